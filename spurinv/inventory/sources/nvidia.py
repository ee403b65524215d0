"""NVIDIA GPUs from ``proc/driver/nvidia/gpus/<BDF>/information``.

Format from NVIDIA/open-gpu-kernel-modules ``kernel-open/nvidia/nv-procfs.c``: ``Key: \\t value``
lines; ``Device Minor`` is the ``/dev/nvidiaN`` number, which need not follow PCI order
(PrincetonUniversity/jobstats capture: 0000:07:00.0 → 2, 0000:48:00.0 → 0).
"""

from __future__ import annotations

import os

from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import ReadError, is_bdf, parse_int, parse_keyed_lines, read_text
from spurinv.inventory.sources.pci import canonical, sort_key
from spurinv.inventory.sources.status import Report
from spurinv.shape import counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.root import Root

    class NvidiaGpu(TypedDict):
        bdf: str
        model: str
        uuid: str | None
        minor: int
        path: str


def parse_information(text: str, path: str, bdf: str) -> NvidiaGpu:
    """Parse one ``information`` file; raise ReadError when a required line is missing or wrong."""
    fields = parse_keyed_lines(text)
    for key in ("Model", "Bus Location", "Device Minor"):
        if not fields.get(key):
            raise ReadError(path, f"no '{key}' line")
    location = fields["Bus Location"].lower()
    if (canonical(location) if is_bdf(location) else location) != bdf:
        raise ReadError(path, f"Bus Location {location} does not match the directory name {bdf}")
    return {
        "bdf": bdf,
        "model": fields["Model"],
        "uuid": fields.get("GPU UUID") or None,
        "minor": parse_int(fields["Device Minor"], path, bits=20),
        "path": path,
    }


def read_nvidia(root: Root, report: Report) -> list[NvidiaGpu]:
    """Return the GPUs the NVIDIA driver knows about."""
    base = root.join(places.NVIDIA_GPUS)
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        report.absent(places.NVIDIA_ABSENT)
        return []
    except OSError as exc:
        report.fail(base, exc.strerror or str(exc))
        return []
    gpus = []
    seen: set[str] = set()
    minors: dict[int, str] = {}
    for name in sorted(names, key=sort_key):
        path = os.path.join(base, name, "information")
        if not is_bdf(name):
            report.fail(os.path.join(base, name), "not a PCI address")
            continue
        bdf = canonical(name)
        if bdf in seen:
            report.fail(os.path.join(base, name), f"the same PCI function as {bdf} (one GPU listed twice)")
            continue
        seen.add(bdf)
        try:
            gpu = parse_information(read_text(path), path, bdf)
        except ReadError as exc:
            report.fail(exc.path, exc.reason)
            continue
        # the minor names /dev/nvidia<M> and the MIG tree gpu<M>: two GPUs cannot share it
        other = minors.get(gpu["minor"])
        if other is not None:
            report.fail(path, f"Device Minor {gpu['minor']} of {bdf} is also {other}'s (two GPUs claim one minor)")
            continue
        minors[gpu["minor"]] = bdf
        gpus.append(gpu)
    report.detail = counted(len(gpus), "GPU")
    return gpus
