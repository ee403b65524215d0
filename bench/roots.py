"""The roots the benchmark reads, built in a temporary directory with ``tests/rootbuilder.py``.

The per-node figures use the issue's roots: an 8×MI300X node in CPX (64 partitions, the real
topo-mi300-cpx capture completed to 64) and synthetic roots of 64 and 1024 devices
(``build_big``). The fleet simulation also needs what a node shows *during* a driver reload or a
partition switch; each transient below is a real root that discovery reads:

=================  =====================================================================  ========
name               what the node shows                                                    reading
=================  =====================================================================  ========
unloaded           amdgpu unloaded: GPUs on the PCI bus with no driver, no KFD, no DRM    failed
kfd-missing        amdgpu bound, KFD topology not created yet                            failed
kfd-half           KFD built for 4 of the 8 GPUs                                          failed
cpx-captured       the real CPX capture as taken: one GPU with 7 of its 8 partitions      failed
off-bus            the GPUs gone from the PCI bus (remove/rescan during a reset)          0 GPUs
spx-<n>            n of the 8 GPUs back on the bus (they return one by one)               n GPUs
=================  =====================================================================  ========
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import rootbuilder as rb  # noqa: E402  (tests/ is no package; as conftest.py)

PARTIAL_COUNTS = (2, 4, 6)


class Roots:
    """Paths of every root, built under ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.cpx = rb.build_mi300x(base / "mi300x-cpx", "CPX")
        self.spx = rb.build_mi300x(base / "mi300x-spx", "SPX")
        self.big64 = rb.build_big(base / "big-64", 64)
        self.big1024 = rb.build_big(base / "big-1024", 1024)
        self.transients = {
            "unloaded": _unloaded(self.spx, base / "unloaded"),
            "kfd-missing": _without_kfd(self.spx, base / "kfd-missing"),
            "kfd-half": _half_kfd(self.spx, base / "kfd-half"),
            "cpx-captured": rb.build_mi300x(base / "cpx-captured", "CPX", complete=False),
            "off-bus": _off_bus(self.spx, base / "off-bus"),
            **{f"spx-{n}": rb.build_mi300x(base / f"spx-{n}", "SPX", gpus=n) for n in PARTIAL_COUNTS},
        }


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def _gpu_bdfs(root: Path) -> list[str]:
    return sorted({part.bdf for part in rb.amd_partitions(root)})


def _remove_kfd(root: Path) -> None:
    rb.remove(root, "sys/class/kfd")
    rb.remove(root, rb.KFD_DIR)


def _remove_gpu_drm(root: Path, bdfs: list[str]) -> None:
    """The DRM nodes of the AMD GPUs (the BMC's card0 stays)."""
    for entry in Path(root, "sys/class/drm").iterdir():
        target = str(entry.readlink()) if entry.is_symlink() else ""
        if "amdgpu_xcp" in target or any(f"/{bdf}/" in target for bdf in bdfs):
            entry.unlink()


def _unloaded(spx: Path, target: Path) -> Path:
    root = _copy(spx, target)
    for bdf in _gpu_bdfs(spx):
        function = rb.pci_device_dir(root, bdf)
        (function / "driver").unlink()
        uevent = function / "uevent"
        uevent.write_text("".join(line + "\n" for line in uevent.read_text().splitlines() if not line.startswith("DRIVER=")))
    _remove_kfd(root)
    _remove_gpu_drm(root, _gpu_bdfs(spx))
    return root


def _without_kfd(spx: Path, target: Path) -> Path:
    root = _copy(spx, target)
    _remove_kfd(root)
    return root


def _half_kfd(spx: Path, target: Path) -> Path:
    root = _copy(spx, target)
    for node in rb.gpu_nodes(root)[4:]:
        shutil.rmtree(node)
    return root


def _off_bus(spx: Path, target: Path) -> Path:
    root = _copy(spx, target)
    _remove_gpu_drm(root, _gpu_bdfs(spx))
    for bdf in _gpu_bdfs(spx):
        shutil.rmtree(rb.pci_device_dir(root, bdf))
        rb.remove(root, f"sys/bus/pci/devices/{bdf}")
    for node in rb.gpu_nodes(root):
        shutil.rmtree(node)
    return root
