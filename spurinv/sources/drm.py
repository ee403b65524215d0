"""DRM card and render nodes from ``sys/class/drm``.

Each ``card<N>`` / ``renderD<N>`` entry's ``device`` link names the device behind it: a PCI
function, or for MI300 partitions other than the first an ``amdgpu_xcp_<k>`` platform device
(docs/spur.md). Connector entries (``card0-DP-1``), ``controlD64``, ``ttm`` and ``version``
are not device nodes and are skipped.
"""

from __future__ import annotations

import os
import re

from spurinv import root as places
from spurinv.sources.attribute import ReadError, parse_keyed_lines, read_optional, sysfs_names
from spurinv.sources.pci import BDF, canonical
from spurinv.sources.status import Report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.root import Root
    from spurinv.shape import DrmNode

NODE = re.compile(r"^(card|renderD)(\d+)$")
XCP = re.compile(r"^amdgpu_xcp[._](\d+)$")


def read_drm(root: Root, report: Report) -> list[DrmNode]:
    """Return one dict per DRM card/render node: kind, minor, device dir, PCI BDF or xcp index."""
    base = root.join(places.DRM_CLASS)
    names = sysfs_names(root, report, base, lambda: report.absent("no DRM devices (no GPU driver loaded)"))
    if names is None:
        return []
    paths = root.resolver()  # one memo per walk: the tree may change between readings
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
        bdf = canonical(leaf) if BDF.match(leaf) else None
        xcp_match = XCP.match(leaf)
        if bdf is None and xcp_match is None:
            # procfs's fixture keeps `device` as a plain directory; its uevent names the slot.
            try:
                uevent = read_optional(os.path.join(device, "uevent"))
            except ReadError as exc:
                report.fail(exc.path, exc.reason)
                continue
            slot = parse_keyed_lines(uevent or "", "=").get("PCI_SLOT_NAME") or ""
            bdf = canonical(slot) if BDF.match(slot) else (slot or None)
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
