"""CPUs (``sys/devices/system/cpu/online``) and memory (``proc/meminfo`` MemTotal).

A failed read is an error, never 0 (spur's ``discover_memory_mb`` returned 0 silently:
docs/spur.md). When ``online`` does not exist (procfs's fixture) the ``processor`` lines of
``proc/cpuinfo`` are counted, as spur does.
"""

import errno
import os

from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import (
    MAX_CPUS,
    ReadError,
    decimal,
    parse_cpulist,
    parse_int,
    parse_keyed_lines,
    read_text,
)
from spurinv.inventory.sources.status import Report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.inventory.root import Root

MAX_MEMORY_KIB = 1 << 40  # 1 PiB: beyond any node built (2^64-1 kB was accepted)


def read_cpus(root: "Root", report: "Report") -> "int | None":
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


def read_memory(root: "Root", report: "Report") -> "int | None":
    """Return MemTotal in MiB, or None after reporting the failure."""
    path = root.join(places.MEMINFO)
    try:
        memory = parse_meminfo(read_text(path), path)
    except ReadError as exc:
        report.fail(exc.path, exc.reason)
        return None
    report.detail = f"{memory} MiB"
    return memory


def read_numa_cores(root: "Root") -> "tuple[dict[int, str], str | None]":
    """NUMA node → its cores as gres.conf's ``Cores=`` wants them (logical indices, from
    ``cpu<N>/topology/{physical_package_id,core_id}``), and why they are left out ({} and the
    reason) when the topology cannot be read (spurinv/inventory/slurmconf.py ``logical_cores``)."""
    from spurinv.inventory.slurmconf import logical_cores

    base = root.join(places.NUMA_NODES)
    numa: dict[int, list[int]] = {}
    try:
        names = os.listdir(base)
    except OSError:
        return {}, f"{base} is not readable"
    for name in names:
        node = decimal(name[4:], 9) if name.startswith("node") else None
        if node is not None:
            path = os.path.join(base, name, "cpulist")
            try:
                numa[node] = parse_cpulist(read_text(path), path)
            except ReadError as error:
                return {}, f"{error.path}: {error.reason}"
    cpus = root.join(os.path.dirname(places.CPU_ONLINE))
    topology: dict[int, tuple[int, int]] = {}
    siblings: dict[int, frozenset[int]] = {}
    dies: dict[int, int] = {}
    for cpu in sorted({cpu for listed in numa.values() for cpu in listed}):
        where = os.path.join(cpus, f"cpu{cpu}", "topology")
        try:
            package = parse_int(read_text(os.path.join(where, "physical_package_id")).strip(), where, signed=True)
            core = parse_int(read_text(os.path.join(where, "core_id")).strip(), where)
        except ReadError as error:
            return {}, f"no CPU topology ({error.path}: {error.reason}); Slurm wants logical core indices, not CPU ids"
        topology[cpu] = (package, core)
        # core_id may repeat across the dies or clusters of one package: the sibling set and the
        # die tell cores apart (Documentation/admin-guide/cputopology.rst); older kernels lack them
        for name in ("thread_siblings_list", "die_id"):
            path = os.path.join(where, name)
            try:
                text = read_text(path).strip()
                if name == "die_id":
                    dies[cpu] = parse_int(text, path, signed=True)
                else:
                    siblings[cpu] = frozenset(parse_cpulist(text, path))
            except ReadError as error:
                if error.errno == errno.ENOENT:  # read once: absent is the answer, not a race
                    continue
                return {}, f"{error.path}: {error.reason}"
    complete = len(siblings) == len(topology)
    result = logical_cores(numa, topology, siblings if complete else None, dies if len(dies) == len(topology) else None)
    return (result, None) if result is not None else ({}, "CPU topology incomplete")
