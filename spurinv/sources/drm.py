"""DRM card and render nodes from ``sys/class/drm``.

Each ``card<N>`` / ``renderD<N>`` entry's ``device`` link names the device behind it: a PCI
function, or for MI300 partitions other than the first an ``amdgpu_xcp_<k>`` platform device
(spur.md §1.5). Connector entries (``card0-DP-1``), ``controlD64``, ``ttm`` and ``version``
are not device nodes and are skipped.
"""

from __future__ import annotations

import os
import re

from spurinv import root as places
from spurinv.sources.attribute import ReadError, parse_keyed_lines, read_optional
from spurinv.sources.pci import BDF
from spurinv.sources.report import Report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.records import DrmNode
    from spurinv.root import Root

NODE = re.compile(r"^(card|renderD)(\d+)$")
XCP = re.compile(r"^amdgpu_xcp[._](\d+)$")


def read_drm(root: Root, report: Report) -> list[DrmNode]:
    """Return one dict per DRM card/render node: kind, minor, device dir, PCI BDF or xcp index."""
    base = root.join(places.DRM_CLASS)
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        if not os.path.isdir(root.join(places.SYS)):
            report.fail(root.join(places.SYS), "sysfs is not mounted under the root")
        else:
            report.absent("no DRM devices (no GPU driver loaded)")
        return []
    except OSError as exc:
        report.fail(base, exc.strerror or str(exc))
        return []
    paths = RealPaths(root)
    nodes: list[DrmNode] = []
    for name in sorted(names):
        match = NODE.match(name)
        if match is None:
            continue
        link = os.path.join(base, name, "device")
        try:
            if not os.path.lexists(link):
                raise ReadError(link, "missing")
            device = paths.resolve(link)
            if not os.path.isdir(device):
                raise ReadError(link, "dangling link")
        except OSError as exc:
            report.fail(link, str(exc))
            continue
        except ReadError as exc:
            report.fail(exc.path, exc.reason)
            continue
        leaf = os.path.basename(device)
        bdf = leaf if BDF.match(leaf) else None
        xcp_match = XCP.match(leaf)
        if bdf is None and xcp_match is None:
            # procfs's fixture keeps `device` as a plain directory; its uevent names the slot.
            try:
                uevent = read_optional(os.path.join(device, "uevent"))
            except ReadError as exc:
                report.fail(exc.path, exc.reason)
                continue
            bdf = parse_keyed_lines(uevent or "", "=").get("PCI_SLOT_NAME") or None
        nodes.append(
            {
                "kind": "card" if match.group(1) == "card" else "render",
                "minor": int(match.group(2)),
                "device": device,
                "bdf": bdf,
                "xcp": int(xcp_match.group(1)) if xcp_match else None,
            }
        )
    cards = sum(1 for node in nodes if node["kind"] == "card")
    report.detail = f"{cards} cards, {len(nodes) - cards} render nodes"
    return nodes


class RealPaths:
    """``Root.resolve`` for many paths under one root, remembering what it already resolved.

    Each DRM node's ``device`` link leads through the same dozen sysfs directories, and
    ``os.path.realpath`` lstat()s every one of them again on every call: that was three quarters
    of discovery on a 1024-device root (issue #6 profile). This is CPython's non-strict
    algorithm (``posixpath._joinrealpath``) with its per-call table of resolved links kept for
    the whole walk, plus the components known not to be links, so a path costs only the system
    calls of components not seen before. The answers are realpath's as long as the tree does not
    change during one discovery; a node torn down meanwhile fails a later read instead.
    """

    __slots__ = ("base", "links", "plain")

    def __init__(self, root: Root) -> None:
        self.links: dict[str, str | None] = {}  # symlink → its resolution (None while resolving)
        self.plain: set[str] = set()  # paths known not to be symlinks (or not to exist)
        self.base = self.realpath(root.path)

    def resolve(self, path: str) -> str:
        """Resolve symlinks in ``path``; refuse a result outside the root (as Root.resolve)."""
        real = self.realpath(path)
        if real != self.base and not real.startswith(self.base.rstrip("/") + "/"):
            raise OSError(f"symlink leaves the root ({real})")
        return real

    def realpath(self, path: str) -> str:
        """``os.path.realpath(path)``."""
        return os.path.abspath(self._join("", path)[0])

    def _join(self, path: str, rest: str) -> tuple[str, bool]:
        # posixpath.join and split are spelled out (`name` never contains a slash): the calls
        # were half of what remained.
        if rest.startswith("/"):
            path, rest = "/", rest[1:]
        while rest:
            name, _, rest = rest.partition("/")
            if not name or name == ".":
                continue
            if name == "..":
                if path:
                    cut = path.rfind("/") + 1
                    head, name = path[:cut], path[cut:]
                    path = head.rstrip("/") or head  # os.path.split, spelled out
                    if name == "..":
                        path = os.path.join(path, "..", "..")
                else:
                    path = ".."
                continue
            newpath = path + name if not path or path.endswith("/") else f"{path}/{name}"
            if newpath in self.plain:
                path = newpath
                continue
            if newpath in self.links:
                known = self.links[newpath]
                if known is None:
                    return os.path.join(newpath, rest), False  # a symlink loop: realpath gives up here
                path = known
                continue
            try:
                target = os.readlink(newpath)  # realpath lstat()s first; EINVAL says "not a link" as well
            except OSError:  # not a link, or not there: realpath (non-strict) carries on with the name
                self.plain.add(newpath)
                path = newpath
                continue
            self.links[newpath] = None
            ok = False
            try:
                path, ok = self._join(path, target)
            finally:
                if ok:
                    self.links[newpath] = path
                else:  # a loop or an error is not remembered: the next call retries, as realpath would
                    del self.links[newpath]
            if not ok:
                return os.path.join(path, rest), False
        return path, True
