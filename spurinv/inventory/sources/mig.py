"""NVIDIA MIG instances from the driver's capability tree, without NVML.

``proc/driver/nvidia/capabilities/gpu<M>/mig/gi<G>/ci<C>/access``, ``M`` the GPU's device minor
(``Device Minor:`` of its ``information`` file, not the NVML index). Each ``access`` file holds
three lines, ``DeviceFileMinor: <n>`` first; the minor is fixed by the driver's static table,
``3 + 135·M + 9·G (+ 1 + C)`` (``nv-caps.c``; docs/partitions.md §1.1-1.2). A minor that is
neither that number nor the one ``proc/driver/nvidia-caps/mig-minors`` lists means the file is
not what it claims: a failed read, never "0 MIG devices".

What ``/proc`` cannot say: whether MIG mode is on. A GPU with no compute instance is whole as far
as this reader can tell; a GPU instance without a compute instance is a layout being applied
(mig-parted creates GI then CI), reported as such, never counted as a device.
"""

from __future__ import annotations

import errno
import os

from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import ReadError, read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.nvidia import NvidiaGpu
    from spurinv.inventory.sources.status import Report

    class MigInstance(TypedDict):
        gi: int
        ci: int
        gi_minor: int
        ci_minor: int

    class MigGpu(TypedDict):
        minor: int
        instances: list[MigInstance]
        empty_gis: list[int]


# The driver's table: gpu0…gpu31, gi0…gi14, ci0…ci7 (nv-caps.c); other names cannot come from it.
MAX_GPU_MINOR = 31
MAX_GI = 14
MAX_CI = 7
# Patterns, compiled (and cached) by re on first use: an AMD node's tick imports no re.
_GI = r"^gi(0|[1-9][0-9]?)$"
_CI = r"^ci([0-7])$"
_ACCESS = r"\ADeviceFileMinor: ([0-9]{1,9})\n"


def gi_minor(gpu: int, gi: int) -> int:
    """The ``nvidia-cap`` minor of GPU instance ``gi`` of device minor ``gpu`` (the driver's table)."""
    return 3 + 135 * gpu + 9 * gi


def ci_minor(gpu: int, gi: int, ci: int) -> int:
    """The ``nvidia-cap`` minor of compute instance ``ci`` of ``gi`` on device minor ``gpu``."""
    return gi_minor(gpu, gi) + 1 + ci


def decode(minor: int) -> tuple[int, int, int | None] | None:
    """The ``(gpu minor, GI, CI)`` an ``nvidia-cap`` minor stands for in the driver's table (CI None
    for a GPU instance's own entry); None for a minor outside the GI/CI part of the table."""
    if not 3 <= minor < gi_minor(MAX_GPU_MINOR + 1, 0):
        return None
    gpu, rest = divmod(minor - 3, 135)
    gi, ci = divmod(rest, 9)
    return gpu, gi, (ci - 1 if ci else None)


def index(gi: int, ci: int) -> int:
    """A MIG device's partition index: orders (GI, CI) and never collides (CI ≤ 7)."""
    return gi * (MAX_CI + 1) + ci


def parse_access(text: str, path: str) -> int:
    """Return the ``DeviceFileMinor`` of one ``access`` file; raise ReadError when malformed."""
    import re

    match = re.match(_ACCESS, text)
    if match is None:
        raise ReadError(path, f"expected 'DeviceFileMinor: <n>' first, got {text[:40]!r}")
    return int(match[1])


class _Table:
    """The driver's minor table, read from ``mig-minors`` only when a file disagrees with the formula."""

    def __init__(self, root: Root) -> None:
        self.path = root.join(places.NVIDIA_MIG_MINORS)
        self.entries: dict[str, int] | None = None

    def minor(self, key: str) -> int | None:
        if self.entries is None:
            self.entries = {}
            try:
                text = read_text(self.path)
            except ReadError:
                return None
            for line in text.split("\n"):
                name, _, value = line.partition(" ")
                if value.isascii() and value.isdigit() and len(value) <= 9:
                    self.entries[name] = int(value)
        return self.entries.get(key)


def read_mig(root: Root, report: Report, gpus: list[NvidiaGpu]) -> dict[str, MigGpu]:
    """Return, per GPU BDF, its compute instances and its GPU instances without one.

    A GPU whose ``gpu<M>`` directory is missing has no instances (the driver creates it when it
    attaches the GPU; a node without the capability tree at all is a driver without MIG).
    """
    base = root.join(places.NVIDIA_CAPABILITIES)
    result: dict[str, MigGpu] = {}
    if not gpus or not os.path.isdir(base):
        return result
    import re  # past the early return: a node without MIG capabilities imports no re

    table = _Table(root)
    for gpu in gpus:
        minor = gpu["minor"]
        if minor > MAX_GPU_MINOR:
            continue  # beyond the driver's table: it never registers MIG capabilities for it
        mig = os.path.join(base, f"gpu{minor}", "mig")
        try:
            names = os.listdir(mig)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                report.fail(mig, exc.strerror or str(exc))
            continue
        instances: list[MigInstance] = []
        empty: list[int] = []
        for name in sorted(names):
            match = re.match(_GI, name)
            if match is None or int(match[1]) > MAX_GI:
                report.fail(os.path.join(mig, name), "not a GPU instance of the driver's table (gi0…gi14)")
                continue
            gi = int(match[1])
            found = _instance(os.path.join(mig, name), minor, gi, table, report)
            if found is None:
                continue
            if found:
                instances.extend(found)
            else:
                empty.append(gi)
        instances.sort(key=lambda item: (item["gi"], item["ci"]))
        result[gpu["bdf"]] = {"minor": minor, "instances": instances, "empty_gis": sorted(empty)}
    return result


def _instance(path: str, gpu: int, gi: int, table: _Table, report: Report) -> list[MigInstance] | None:
    """The compute instances of one GPU instance directory; None when it could not be read."""
    try:
        own = _checked(os.path.join(path, "access"), gi_minor(gpu, gi), f"gpu{gpu}/gi{gi}/access", table)
        names = os.listdir(path)
    except ReadError as exc:
        report.fail(exc.path, exc.reason)
        return None
    except OSError as exc:
        report.fail(path, exc.strerror or str(exc))
        return None
    import re

    found: list[MigInstance] = []
    for name in names:
        if name == "access":
            continue
        match = re.match(_CI, name)
        if match is None:
            report.fail(os.path.join(path, name), "not a compute instance of the driver's table (ci0…ci7)")
            return None
        ci = int(match[1])
        key = f"gpu{gpu}/gi{gi}/ci{ci}/access"
        try:
            minor = _checked(os.path.join(path, name, "access"), ci_minor(gpu, gi, ci), key, table)
        except ReadError as exc:
            report.fail(exc.path, exc.reason)
            return None
        found.append({"gi": gi, "ci": ci, "gi_minor": own, "ci_minor": minor})
    return found


def _checked(path: str, expected: int, key: str, table: _Table) -> int:
    minor = parse_access(read_text(path, limit=4096), path)
    if minor != expected and minor != table.minor(key):
        raise ReadError(path, f"DeviceFileMinor {minor}, but the driver's table gives {key} the minor {expected}")
    return minor
