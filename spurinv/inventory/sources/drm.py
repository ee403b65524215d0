"""DRM card and render nodes from ``sys/class/drm``.

Each ``card<N>`` / ``renderD<N>`` entry's ``device`` link names the device behind it: a PCI
function, or for MI300 partitions other than the first an ``amdgpu_xcp_<k>`` platform device
(docs/spur.md). Connector entries (``card0-DP-1``), ``controlD64``, ``ttm`` and ``version``
are not device nodes and are skipped.
"""

import os

from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import ReadError, is_bdf, parse_keyed_lines, read_optional, sysfs_names
from spurinv.inventory.sources.pci import canonical, spelled
from spurinv.inventory.sources.status import Report
from spurinv.shape import bdf_key, counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.root import RealPaths, Root

    class DrmNode(TypedDict):
        kind: str
        minor: int
        device: str
        bdf: str | None
        xcp: int | None


def _device(paths: "RealPaths", link: str, directories: "dict[str, bool]") -> str:
    """The directory a node's ``device`` link leads to; ReadError "missing" or "dangling link".

    lexists only when the link did not lead to a directory (a system call for each of ~130 DRM
    nodes per tick), with the verdicts of checking it first; ``directories`` remembers isdir for
    the walk (a partition's card and render node share their device). A device the resolution
    itself proved a directory (:meth:`RealPaths.resolve_proven`) needs no isdir: ~65 system calls a
    tick, 0.5 M instructions."""
    try:
        device, proven = paths.resolve_proven(link)
    except OSError:
        if not os.path.lexists(link):
            raise ReadError(link, "missing") from None
        raise
    if device not in directories:  # the first verdict on a device holds for the walk: one answer per device
        directories[device] = proven or os.path.isdir(device)
    if not directories[device]:
        raise ReadError(link, "dangling link" if os.path.lexists(link) else "missing")
    return device


def _node(name: str) -> "tuple[str, str | None]":
    """The kind and minor of a DRM entry the names ``^(card|renderD)(\\d+)$`` match (minor None
    for any other): ``numbered(name, "card")`` or ``numbered(name, "renderD")``
    (:func:`spurinv.inventory.sources.attribute.numbered`), in one call, not two."""
    if name.startswith("card"):
        kind, digits = "card", name[4:]
    elif name.startswith("renderD"):
        kind, digits = "render", name[7:]
    else:
        return "", None
    if digits.endswith("\n"):
        digits = digits[:-1]
    return kind, digits if digits.isdecimal() else None


def _xcp(leaf: str) -> "str | None":
    """``numbered(leaf, "amdgpu_xcp.") or numbered(leaf, "amdgpu_xcp_")``, in one call."""
    if not leaf.startswith("amdgpu_xcp") or leaf[10:11] not in (".", "_"):
        return None
    digits = leaf[11:-1] if leaf.endswith("\n") else leaf[11:]
    return digits if digits.isdecimal() else None


def read_drm(root: "Root", report: "Report") -> "list[DrmNode]":
    """Return one dict per DRM card/render node: kind, minor, device dir, PCI BDF or xcp index."""
    base = root.join(places.DRM_CLASS)
    names = sysfs_names(root, report, base, lambda: report.absent("no DRM devices (no GPU driver loaded)"))
    if names is None:
        return []
    paths = root.resolver()  # one memo per walk: the tree may change between readings
    nodes: list[DrmNode] = []
    directories: dict[str, bool] = {}  # as paths: the tree is taken not to change during one walk
    leaves: dict[str, tuple[str | None, str | None]] = {}  # device → its BDF or xcp index, as named
    for name in sorted(names):
        kind, minor = _node(name)
        if minor is None:
            continue
        link = f"{base}/{name}/device"  # os.path.join's answer: base ends in "drm", a name has no "/"
        try:
            device = _device(paths, link, directories)
        except OSError as exc:
            report.fail(link, str(exc))
            continue
        except ReadError as exc:
            report.fail(exc.path, exc.reason)
            continue
        named = leaves.get(device)  # a partition's card and render node share their device
        if named is None:
            leaf = device[device.rfind("/") + 1 :]  # os.path.basename
            key = bdf_key(leaf)
            # ^amdgpu_xcp[._](\d+)$, never a PCI address
            xcp = None if key is not None else _xcp(leaf)
            named = leaves[device] = (spelled(key) if key is not None else None, xcp)
        bdf, xcp = named
        if bdf is None and xcp is None:
            # procfs's fixture keeps `device` as a plain directory; its uevent names the slot.
            try:
                uevent = read_optional(os.path.join(device, "uevent"))
            except ReadError as exc:
                report.fail(exc.path, exc.reason)
                continue
            slot = parse_keyed_lines(uevent or "", "=").get("PCI_SLOT_NAME") or ""
            bdf = canonical(slot) if is_bdf(slot) else (slot or None)
        nodes.append(
            {
                "kind": kind,
                "minor": int(minor),
                "device": device,
                "bdf": bdf,
                "xcp": int(xcp) if xcp is not None else None,
            }
        )
    cards = sum(1 for node in nodes if node["kind"] == "card")
    report.detail = f"{counted(cards, 'card')}, {counted(len(nodes) - cards, 'render node')}"
    return nodes
