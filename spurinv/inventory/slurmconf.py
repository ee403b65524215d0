"""What Slurm's configuration must say for this node (``spurinv discover --format slurm``). Pure.

Slurm accepts a GPU count change only through slurm.conf/gres.conf, a reconfigure and a slurmd
restart (docs/slurm-rest.md §2, scontrol(1) ``Gres=``), so when it refuses our update this is the
text an operator pastes: the ``NodeName=`` line in ``slurmd -C``'s style with the node's ``Gres=``,
and the gres.conf lines, one per model and NUMA node, each naming its device files as one
hostlist-style range (``File=/dev/dri/renderD[128-135]``, gres.conf(5)) with the NUMA node's
cores as ``Cores=``: Slurm's logical core indices (cores numbered socket by socket, gres.conf(5)),
never Linux CPU ids (SMT siblings and sparse ids would name the wrong cores); left out, with a
comment saying why, where the topology cannot be read.
The same gres.conf lines go to ``controller.register_command`` (``SPURINV_GRES_CONF``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from spurinv import hostlist
from spurinv.inventory.model import Device, Inventory
from spurinv.inventory.sources.mig import ci_minor, gi_minor
from spurinv.shape import gpu_counts

_MIG = re.compile(r"/mig(\d+)\.(\d+)$")
_PARENT = re.compile(r"^/dev/nvidia(\d+)$")


def _files(device: Device) -> str:
    """``File=`` of a device; a MIG device is ``MultipleFiles=`` of its GPU and its two caps (as
    Slurm's AutoDetect=nvml writes them, gpu_nvml.c), by the driver's minor table."""
    node, partition = device["device_node"], device["partition"]
    mig, parent = _MIG.search(device["id"]), _PARENT.match(node or "")
    if partition is None or partition["compute"] != "MIG" or mig is None or parent is None:
        return f"File={node}"
    gpu, gi, ci = int(parent[1]), int(mig[1]), int(mig[2])
    caps = f"/dev/nvidia-caps/nvidia-cap{gi_minor(gpu, gi)},/dev/nvidia-caps/nvidia-cap{ci_minor(gpu, gi, ci)}"
    return f"MultipleFiles={node},{caps}"


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def gres(inventory: Inventory) -> str:
    """The node's GPU GRES as slurm.conf's ``Gres=`` takes it (``gpu:mi300x:64``; "" without GPUs)."""
    return ",".join(f"gpu:{model}:{count}" for model, count in sorted(gpu_counts(inventory).items()))


def compress(paths: Iterable[str]) -> list[str]:
    """Device files as few hostlist-style expressions as Slurm's ``File=`` reads back:
    ``/dev/dri/renderD128`` … ``135`` → ``/dev/dri/renderD[128-135]``; a gap is a comma
    (``[128-131,136]``). Numbers keep their width where zero-padded (``gpu[00-07]``); a path
    without a trailing number, or one with a bracket or comma of its own, stays as it is."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for path in dict.fromkeys(paths):
        match = _NUMBERED.match(path)
        if match is None or any(c in path for c in "[],"):
            plain.append(path)
            continue
        prefix, digits = match.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((prefix, width), []).append(int(digits))
    out = []
    for (prefix, width), numbers in groups.items():
        runs = _runs(sorted(numbers))
        text = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs)
        out.append(f"{prefix}{text}" if len(numbers) == 1 and width == 0 else f"{prefix}[{text}]")
    return out + plain


def expand(expression: str) -> list[str]:
    """The paths of one :func:`compress` expression (``a[1-3,5]`` → ``a1 a2 a3 a5``)."""
    match = re.fullmatch(r"(.*)\[([0-9,-]+)\]", expression)
    if match is None:
        return [expression]
    prefix, body = match.groups()
    paths = []
    for part in body.split(","):
        low, _, high = part.partition("-")
        width = len(low) if low.startswith("0") and len(low) > 1 else 0
        paths += [f"{prefix}{n:0{width}d}" for n in range(int(low), int(high or low) + 1)]
    return paths


def expand_all(value: str) -> list[str]:
    """The paths of a ``File=`` value: :func:`compress`'s expressions joined by commas."""
    return [path for part in hostlist.split(value) if part for path in expand(part)]


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def gres_conf(inventory: Inventory, node: str, numa_cores: dict[int, str]) -> list[str]:
    """gres.conf lines: one per model and NUMA node, in the order of the devices' first file
    (Slurm numbers GPUs in gres.conf order), ``Cores=`` the NUMA node's logical cores where known."""
    # a MIG device names its GPU and two caps (MultipleFiles=): a line of its own, in order
    groups: dict[tuple[str, int | None] | str, tuple[str, int | None, list[str]]] = {}
    for device in inventory["devices"]:
        file = device["device_node"]
        if file is None:
            continue
        named = _files(device)
        model, numa = device["model"], device["numa_node"]
        if named.startswith("MultipleFiles="):
            groups[device["id"]] = (model, numa, [named])
        else:
            groups.setdefault((model, numa), (model, numa, []))[2].append(file)
    lines = []
    for key, (model, numa, files) in groups.items():
        cores = numa_cores.get(numa) if numa is not None else None
        where = files[0] if isinstance(key, str) else f"File={','.join(compress(files))}"
        line = f"NodeName={node} Name=gpu Type={model} {where}"
        lines.append(line + (f" Cores={cores}" if cores else "") + (f"  # {key}" if isinstance(key, str) else ""))
    return lines


def core_keys(topology: Mapping[int, tuple[int, int]], siblings: Mapping[int, frozenset[int]] | None = None,
              dies: Mapping[int, int] | None = None) -> dict[int, tuple[int, ...]] | None:  # fmt: skip
    """CPU → a key naming its core, in the order Slurm numbers cores. Without ``siblings``
    (``thread_siblings_list``): (package, core_id). With them: (package, die, first sibling CPU),
    since ``core_id`` repeats inside a package across dies and clusters (Linux
    Documentation/ABI/stable/sysfs-devices-system-cpu). None when the topology is inconsistent: a
    sibling set without its CPU, siblings that disagree or span packages or dies, or two CPUs that
    share a core_id in one package and die but are not siblings of each other (then core_id alone
    cannot tell the cores apart either way). Pure."""
    if siblings is None:
        return dict(topology)
    keys: dict[int, tuple[int, ...]] = {}
    owner: dict[tuple[int, int, int], frozenset[int]] = {}
    for cpu, (package, core) in topology.items():
        group = siblings.get(cpu)
        die = (dies or {}).get(cpu, 0)
        if not group or cpu not in group:
            return None
        for other in group:
            if other in topology and (siblings.get(other) != group or topology[other][0] != package
                                      or (dies or {}).get(other, 0) != die):  # fmt: skip
                return None
        if owner.setdefault((package, die, core), group) != group:
            return None  # core_id repeats in this die with no sibling link: cannot tell
        keys[cpu] = (package, die, min(group))
    return keys


def logical_cores(numa_cpus: Mapping[int, Iterable[int]], topology: Mapping[int, tuple[int, int]],
                  siblings: Mapping[int, frozenset[int]] | None = None,
                  dies: Mapping[int, int] | None = None) -> dict[int, str] | None:  # fmt: skip
    """NUMA node → its cores as gres.conf's ``Cores=`` wants them: Slurm's logical core indices,
    every core of the node (``topology``: CPU → (physical_package_id, core_id); ``siblings``: CPU
    → its thread_siblings_list, ``dies``: CPU → die_id, see :func:`core_keys`) numbered socket by
    socket in order, then by core. None when a NUMA node's CPU has no topology or the topology
    is inconsistent (the caller omits ``Cores=`` with a comment). Pure."""
    keyed = core_keys(topology, siblings, dies)
    if keyed is None:
        return None
    index = {core: i for i, core in enumerate(sorted(set(keyed.values())))}
    result = {}
    for numa, cpus in numa_cpus.items():
        cores = set()
        for cpu in cpus:
            if cpu not in keyed:
                return None
            cores.add(index[keyed[cpu]])
        if cores:
            result[numa] = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _runs(sorted(cores)))
    return result


def render(inventory: Inventory, node: str, numa_cores: dict[int, str], note: str | None = None) -> str:
    """Return slurm.conf and gres.conf lines for ``inventory``; ``note`` says why ``Cores=`` is left out."""
    text = gres(inventory)
    lines = [
        "# slurm.conf — this node as spurinv sees it (compare `slurmd -C`)",
        f"NodeName={node} CPUs={inventory['cpus']} RealMemory={inventory['memory_mb']}" + (f" Gres={text}" if text else ""),
        "",
        "# gres.conf — one line per GPU model and NUMA node; Cores= is that NUMA node's cores (logical indices)",
        *([f"# Cores= left out: {note}"] if note else []),
        *gres_conf(inventory, node, numa_cores),
    ]
    if not inventory["devices"]:
        lines.append("# (no GPUs)")
    return "\n".join(lines) + "\n"
