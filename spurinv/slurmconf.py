"""What Slurm's configuration must say for this node (``spurinv discover --format slurm``). Pure.

Slurm accepts a GPU count change only through slurm.conf/gres.conf, a reconfigure and a slurmd
restart (docs/slurm-rest.md §2, scontrol(1) ``Gres=``), so when it refuses our update this is the text an operator needs:
the ``NodeName=`` line in ``slurmd -C``'s style, with the GPUs, and one gres.conf line per device.
"""

from __future__ import annotations

import re

from spurinv.model import Device, Inventory
from spurinv.sources.mig import ci_minor, gi_minor

_MIG = re.compile(r"/mig(\d+)\.(\d+)$")
_PARENT = re.compile(r"^/dev/nvidia(\d+)$")


def _files(device: Device) -> str:
    """``File=`` of a device; a MIG device is ``MultipleFiles=`` of its GPU and its two caps (as
    Slurm's AutoDetect=nvml writes them, gpu_nvml.c), by the driver's minor table."""
    mig, parent = _MIG.search(device.id), _PARENT.match(device.device_node or "")
    if device.partition is None or device.partition.compute != "MIG" or mig is None or parent is None:
        return f"File={device.device_node}"
    gpu, gi, ci = int(parent[1]), int(mig[1]), int(mig[2])
    caps = f"/dev/nvidia-caps/nvidia-cap{gi_minor(gpu, gi)},/dev/nvidia-caps/nvidia-cap{ci_minor(gpu, gi, ci)}"
    return f"MultipleFiles={device.device_node},{caps}"


def render(inventory: Inventory, node: str, numa_cpus: dict[int, str]) -> str:
    """Return slurm.conf and gres.conf lines for ``inventory``."""
    counts = inventory.gpu_counts()
    gres = ",".join(f"gpu:{model}:{count}" for model, count in sorted(counts.items()))
    lines = [
        "# slurm.conf — this node as spurinv sees it (compare `slurmd -C`)",
        f"NodeName={node} CPUs={inventory.cpus} RealMemory={inventory.memory_mb}" + (f" Gres={gres}" if gres else ""),
        "",
        "# gres.conf — one line per device; Cores= is the device's NUMA node CPU list",
    ]
    for device in inventory.devices:
        if device.device_node is None:
            continue
        cores = numa_cpus.get(device.numa_node) if device.numa_node is not None else None
        line = f"NodeName={node} Name=gpu Type={device.model} {_files(device)}"
        lines.append(line + (f" Cores={cores}" if cores else "") + f"  # {device.id}")
    if not inventory.devices:
        lines.append("# (no GPUs)")
    return "\n".join(lines) + "\n"
