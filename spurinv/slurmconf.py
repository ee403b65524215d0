"""What Slurm's configuration must say for this node (``spurinv discover --format slurm``). Pure.

Slurm accepts a GPU count change only through slurm.conf/gres.conf, a reconfigure and a slurmd
restart (docs/slurm-rest.md §2, scontrol(1) ``Gres=``), so when it refuses our update this is the
text an operator pastes: the ``NodeName=`` line in ``slurmd -C``'s style with the node's ``Gres=``,
and the gres.conf lines, one per model and NUMA node, each naming its device files as one
hostlist-style range (``File=/dev/dri/renderD[128-135]``, gres.conf(5)) with the NUMA node's CPUs
as ``Cores=``. The same gres.conf lines go to ``controller.register_command`` (``SPURINV_GRES_CONF``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from spurinv.model import Inventory

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def gres(inventory: Inventory) -> str:
    """The node's GPU GRES as slurm.conf's ``Gres=`` takes it (``gpu:mi300x:64``; "" without GPUs)."""
    return ",".join(f"gpu:{model}:{count}" for model, count in sorted(inventory.gpu_counts().items()))


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
    parts, depth, start = [], 0, 0
    for i, c in enumerate(value):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return [path for part in parts if part for path in expand(part)]


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def gres_conf(inventory: Inventory, node: str, numa_cpus: dict[int, str]) -> list[str]:
    """gres.conf lines: one per model and NUMA node, in the order of the devices' first file
    (Slurm numbers GPUs in gres.conf order), ``Cores=`` the NUMA node's CPU list where known."""
    groups: dict[tuple[str, int | None], list[str]] = {}
    for device in inventory.devices:
        if device.device_node is not None:
            groups.setdefault((device.model, device.numa_node), []).append(device.device_node)
    lines = []
    for (model, numa), files in groups.items():
        cores = numa_cpus.get(numa) if numa is not None else None
        line = f"NodeName={node} Name=gpu Type={model} File={','.join(compress(files))}"
        lines.append(line + (f" Cores={cores}" if cores else ""))
    return lines


def render(inventory: Inventory, node: str, numa_cpus: dict[int, str]) -> str:
    """Return slurm.conf and gres.conf lines for ``inventory``."""
    text = gres(inventory)
    lines = [
        "# slurm.conf — this node as spurinv sees it (compare `slurmd -C`)",
        f"NodeName={node} CPUs={inventory.cpus} RealMemory={inventory.memory_mb}" + (f" Gres={text}" if text else ""),
        "",
        "# gres.conf — one line per GPU model and NUMA node; Cores= is that NUMA node's CPU list",
        *gres_conf(inventory, node, numa_cpus),
    ]
    if not inventory.devices:
        lines.append("# (no GPUs)")
    return "\n".join(lines) + "\n"
