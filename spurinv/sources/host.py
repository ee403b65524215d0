"""CPUs (``sys/devices/system/cpu/online``) and memory (``proc/meminfo`` MemTotal).

A failed read is an error, never 0 (spur's ``discover_memory_mb`` returned 0 silently:
docs/spur.md). When ``online`` does not exist (procfs's fixture) the ``processor`` lines of
``proc/cpuinfo`` are counted, as spur does.
"""

from __future__ import annotations

import os

from spurinv import root as places
from spurinv.sources.attribute import MAX_CPUS, ReadError, parse_cpulist, parse_int, parse_keyed_lines, read_text
from spurinv.sources.report import Report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.root import Root

MAX_MEMORY_KIB = 1 << 40  # 1 PiB: beyond any node built (issue #11: 2^64-1 kB was accepted)


def read_cpus(root: Root, report: Report) -> int | None:
    """Return the number of online logical CPUs, or None after reporting the failure."""
    online = root.join(places.CPU_ONLINE)
    try:
        if os.path.lexists(online) or not os.path.lexists(root.join(places.CPUINFO)):
            count = len(parse_cpulist(read_text(online), online))
            report.detail = f"{count} online"
            return count
        cpuinfo = root.join(places.CPUINFO)
        text = read_text(cpuinfo)
        count = sum(1 for line in text.split("\n") if line.split(":", 1)[0].strip() == "processor")
        if count == 0:
            raise ReadError(cpuinfo, "no 'processor' lines")
        if count > MAX_CPUS:
            raise ReadError(cpuinfo, f"{count} 'processor' lines: beyond {MAX_CPUS} CPUs, the physical limit")
        report.detail = f"{count} (from cpuinfo; {online} is missing)"
        return count
    except ReadError as exc:
        report.fail(exc.path, exc.reason)
        return None


def parse_meminfo(text: str, path: str) -> int:
    """Return MemTotal in MiB from ``/proc/meminfo`` text."""
    value = parse_keyed_lines(text).get("MemTotal")
    if value is None:
        raise ReadError(path, "no MemTotal line")
    number, _, unit = value.partition(" ")
    if unit.strip() != "kB":
        raise ReadError(path, f"MemTotal has unit {unit.strip()!r}, expected kB")
    kib = parse_int(number, path)
    if kib == 0:
        raise ReadError(path, "MemTotal is 0")
    if kib > MAX_MEMORY_KIB:
        raise ReadError(path, f"MemTotal of {kib} kB is beyond 1 PiB, the physical limit")
    return kib // 1024


def read_memory(root: Root, report: Report) -> int | None:
    """Return MemTotal in MiB, or None after reporting the failure."""
    path = root.join(places.MEMINFO)
    try:
        memory = parse_meminfo(read_text(path), path)
    except ReadError as exc:
        report.fail(exc.path, exc.reason)
        return None
    report.detail = f"{memory} MiB"
    return memory


def read_numa_cpus(root: Root) -> dict[int, str]:
    """NUMA node → CPU list (``sys/devices/system/node/node<N>/cpulist``); {} when unavailable."""
    base = root.join(places.NUMA_NODES)
    result = {}
    try:
        names = os.listdir(base)
    except OSError:
        return {}
    for name in names:
        if name.startswith("node") and name[4:].isdigit():
            try:
                result[int(name[4:])] = read_text(os.path.join(base, name, "cpulist")).strip()
            except ReadError:
                continue
    return result
