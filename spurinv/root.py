"""The filesystem root every source reads under (procfs's ``FS`` idea).

``--root`` defaults to ``/``; tests, benchmarks and containers that mount the host at ``/host``
pass another directory. Every path spurinv reads is built here, so nothing else in the code
names ``/sys`` or ``/proc``. Stdlib only: this is on the timer's hot path.
"""

from __future__ import annotations

import os

# Relative to the root. The KFD path is the one libhsakmt reads (/sys/class/kfd/kfd/topology,
# a symlink to /sys/devices/virtual/kfd/kfd/topology on real kernels).
PCI_DEVICES = "sys/bus/pci/devices"
PCI_BUS = "sys/bus/pci"
DRM_CLASS = "sys/class/drm"
KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
KFD_CLASS = "sys/class/kfd"
CPU_ONLINE = "sys/devices/system/cpu/online"
NUMA_NODES = "sys/devices/system/node"
SYS = "sys"
MEMINFO = "proc/meminfo"
CPUINFO = "proc/cpuinfo"
NVIDIA_GPUS = "proc/driver/nvidia/gpus"
CDI_DIRS = ("etc/cdi", "var/run/cdi")  # the CDI spec's default directories, in priority order


class RootError(Exception):
    """The root itself is unusable (missing, not a directory)."""


class Root:
    """A node's filesystem root; turns relative paths into paths on disk."""

    __slots__ = ("path",)

    def __init__(self, path: str = "/") -> None:
        full = os.path.abspath(path)
        if not os.path.isdir(full):
            raise RootError(f"--root {path}: not a directory")
        self.path = full

    def __repr__(self) -> str:
        return f"Root({self.path!r})"

    def join(self, *parts: str) -> str:
        """Return the on-disk path of ``parts`` (relative to the root)."""
        return os.path.join(self.path, *parts)

    def resolve(self, path: str) -> str:
        """Resolve symlinks in ``path``; refuse a result outside the root.

        sysfs links are relative, so they stay inside a root mounted anywhere; a link that
        escapes (absolute, or planted) would make us read another machine's view.
        """
        real = os.path.realpath(path)
        base = os.path.realpath(self.path)
        if real != base and not real.startswith(base.rstrip("/") + "/"):
            raise OSError(f"symlink leaves the root ({real})")
        return real

    def host_path(self, on_disk: str) -> str:
        """Return ``on_disk`` as the node would name it (``/sys/...``), for messages and CDI."""
        rel = os.path.relpath(on_disk, self.path)
        return "/" + rel if not rel.startswith("..") else on_disk
