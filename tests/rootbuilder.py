"""Compose complete fake node roots ("/" trees) for spurinv tests.

Each ``build_*`` function writes one node's ``sys/``, ``proc/`` and ``etc/cdi`` files under
``root`` (a temp dir) and returns ``root``.  The AMD KFD topologies and the host-only trees are
real captures copied from ``tests/fixtures/real`` (provenance in ``fixtures/real/PROVENANCE.md``);
the PCI, DRM, host and CDI files around them are synthesized here so that every root is
self-consistent unless a builder says otherwise.  ``tests/fixtures/README.md`` lists, per root,
what is real and what is synthesized, with the expected counts.

The small helpers below (``write``, ``remove``, ``symlink``, ``set_property``, ``kfd_nodes``, ...)
are for fault injection in tests.  Pure stdlib; every symlink written is relative, as in sysfs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# --------------------------------------------------------------------------- fixture locations

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
SYNTHETIC = Path(__file__).resolve().parent / "fixtures" / "synthetic"
_KFD_SETS = REAL / "ROCm__k8s-device-plugin" / "testdata"
MI300X_CPX_TOPOLOGY = _KFD_SETS / "topo-mi300-cpx" / "topology"
MI308X_TOPOLOGY = _KFD_SETS / "topology-parsing-mi308" / "topology"
VEGA10_TOPOLOGY = _KFD_SETS / "topology-parsing" / "topology"
NVIDIA_CDI_YAML = REAL / "salilkadam__Infrastructure" / "gpu-setup" / "configs" / "cdi" / "nvidia.yaml"
JOBSTATS_DEVICE_MINOR = REAL / "jobstats" / "device-minor.txt"
CDI_SCHEMA_DIR = REAL / "cncf-tags__container-device-interface" / "schema"

_HWLOC = REAL / "open-mpi__hwloc" / "tests" / "hwloc" / "linux" / "expanded"
_HWLOC_SETS = (
    "2pa-pcidomain32bits",
    "32intel64-2p8co2t+8ve",
    "40intel64-4n10c+pci-conflicts",
    "nvidiagpunumanodes",
    "nvidia-dgx-gb10",
    "128arm-2pa2n8cluster4co",
    "20em64t-hybrid-1p6c2t+2ca4co1t",
)
#: Real whole-node (or partial) host trees usable as a root by :func:`build_host_only`.
HOST_SETS: dict[str, Path] = {name: _HWLOC / name / name for name in _HWLOC_SETS} | {
    "node_exporter": REAL / "prometheus__node_exporter" / "collector" / "fixtures",
    "procfs": REAL / "prometheus__procfs" / "testdata" / "fixtures",
    "nfd-rootfs-1": REAL / "kubernetes-sigs__node-feature-discovery" / "testdata" / "source" / "pci" / "rootfs-1",
}

# --------------------------------------------------------------------------- constants

KFD_DIR = "sys/devices/virtual/kfd/kfd"
KFD_TOPOLOGY = KFD_DIR + "/topology"

AMD, NVIDIA, ASPEED = 0x1002, 0x10DE, 0x1A03
CLASS_ACCEL, CLASS_3D, CLASS_VGA = 0x120000, 0x030200, 0x030000
DRM_MAJOR = 226
KFD_MAJOR = 235  # /dev/kfd's major is dynamic; 235 is a common value
RENDER_BASE = 128
MAX_XCP = 8  # amdgpu allocates MAX_XCP - 1 amdgpu_xcp platform devices per GPU (amdgpu_xcp.c)

#: The 8 MI300X physical functions of the topo-mi300-cpx capture (location_id >> 8).
MI300X_BDFS = tuple(f"0000:{bus:02x}:00.0" for bus in (0x05, 0x27, 0x47, 0x65, 0x85, 0xA7, 0xC7, 0xE5))
PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
MI300X_MEMTOTAL_KB = 1584918204  # ~1.5 TiB host RAM, synthesized
# One XCC of MI300X = 38 CUs = 152 SIMDs; CPX partition 0 of the capture reports simd_count 152.
_MI300X_XCC_SIMDS = 152

# Host bridge / NVMe / BMC VGA added to every synthesized GPU root so that filters are exercised.
HOST_BRIDGE_BDF, NVME_BDF, BMC_VGA_BDF = "0000:00:00.0", "0000:41:00.0", "0000:c1:00.0"


# --------------------------------------------------------------------------- small file helpers


def write(root: Path, relpath: str, text: str) -> Path:
    """Write ``text`` to ``root/relpath`` (creating parents, replacing a file or symlink)."""
    path = Path(root, relpath)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(text)
    return path


def remove(root: Path, relpath: str, missing_ok: bool = False) -> None:
    """Delete a file, symlink or directory tree below ``root``."""
    path = Path(root, relpath)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif not missing_ok:
        raise FileNotFoundError(path)


def symlink(root: Path, relpath: str, target: str) -> Path:
    """Create (or replace) ``root/relpath`` as a symlink whose text is ``target``."""
    path = Path(root, relpath)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    os.symlink(target, path)
    return path


def read_properties(path: Path) -> dict[str, str]:
    """Parse a KFD ``properties`` file (or the dir holding one) into an ordered dict."""
    path = Path(path)
    if path.is_dir():
        path = path / "properties"
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            key, _, value = line.partition(" ")
            props[key] = value.strip()
    return props


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k} {v}\n" for k, v in props.items()))


def set_property(node_dir: Path, key: str, value: int | str | None) -> None:
    """Set (or with ``None`` delete) one key of ``node_dir/properties``, keeping key order."""
    props = read_properties(node_dir)
    if value is None:
        props.pop(key, None)
    else:
        props[key] = str(value)
    _write_properties(Path(node_dir) / "properties", props)


def kfd_nodes(root: Path) -> list[Path]:
    """All KFD topology node dirs of ``root``, in numeric order."""
    nodes = Path(root, KFD_TOPOLOGY, "nodes")
    if not nodes.is_dir():
        return []
    return sorted((p for p in nodes.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def gpu_nodes(root: Path) -> list[Path]:
    """KFD nodes that are GPUs (``simd_count > 0`` and ``cpu_cores_count == 0``)."""
    out = []
    for node in kfd_nodes(root):
        props = read_properties(node)
        if int(props.get("simd_count", 0)) > 0 and int(props.get("cpu_cores_count", 0)) == 0:
            out.append(node)
    return out


def _link_dirs(node_dir: Path) -> list[Path]:
    links = Path(node_dir, "io_links")
    if not links.is_dir():
        return []
    return sorted((p for p in links.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def io_links(node_dir: Path) -> list[dict[str, str]]:
    """The io_link property dicts of one KFD node, in link-index order."""
    return [read_properties(d) for d in _link_dirs(node_dir)]


def _find_link(node_dir: Path, *, reverse: bool = False, **match: str) -> dict[str, str] | None:
    """First io_link whose properties contain ``match``, reading files lazily (``reverse``:
    search from the last link; kernels list links by ascending ``node_to``)."""
    dirs = _link_dirs(node_dir)
    for d in reversed(dirs) if reverse else dirs:
        props = read_properties(d)
        if all(props.get(k) == v for k, v in match.items()):
            return props
    return None


def _add_io_link(node_dir: Path, props: Mapping[str, object]) -> None:
    """Append one io_link and keep the node's ``io_links_count`` in step."""
    index = len(_link_dirs(node_dir))
    _write_properties(node_dir / "io_links" / str(index) / "properties", props)
    set_property(node_dir, "io_links_count", index + 1)


def _write_node(node_dir: Path, props: Mapping[str, str], links: list[dict[str, str]]) -> None:
    """Write a KFD node: ``properties`` (with ``io_links_count`` set) and its io_links."""
    _write_properties(node_dir / "properties", dict(props) | {"io_links_count": str(len(links))})
    for index, link in enumerate(links):
        _write_properties(node_dir / "io_links" / str(index) / "properties", link)


def pci_device_dir(root: Path, bdf: str) -> Path:
    """The resolved ``sys/devices/...`` dir of a PCI function."""
    return Path(root, "sys/bus/pci/devices", bdf).resolve()


# --------------------------------------------------------------------------- PCI functions


@dataclass
class PciFunction:
    """One PCI function to create under ``sys/devices/pci<domain>:<root_bus>/<bdf>``."""

    bdf: str
    vendor: int
    device: int
    pci_class: int
    driver: str | None = None
    numa_node: int = -1
    local_cpulist: str = ""
    root_bus: int | None = None  # None: a root bus equal to the function's own bus
    subsystem_vendor: int | None = None
    subsystem_device: int | None = None
    extra: dict[str, str] = field(default_factory=dict)  # more attribute files, name -> text

    @property
    def rel(self) -> str:
        domain, bus = self.bdf.split(":")[:2]
        root_bus = int(bus, 16) if self.root_bus is None else self.root_bus
        return f"sys/devices/pci{domain}:{root_bus:02x}/{self.bdf}"


def add_pci_function(root: Path, fn: PciFunction) -> Path:
    """Create a PCI function dir, its ``sys/bus/pci/devices`` link and its driver links."""
    sub_vendor = fn.vendor if fn.subsystem_vendor is None else fn.subsystem_vendor
    sub_device = fn.device if fn.subsystem_device is None else fn.subsystem_device
    cls = fn.pci_class
    modalias = (
        f"pci:v{fn.vendor:08X}d{fn.device:08X}sv{sub_vendor:08X}sd{sub_device:08X}"
        f"bc{cls >> 16:02X}sc{(cls >> 8) & 0xFF:02X}i{cls & 0xFF:02X}"
    )
    # PCI_CLASS is printed with "%04X" by the kernel (pci-driver.c), so 0x030200 -> "30200",
    # as in the real 2pa-pcidomain32bits capture ("PCI_CLASS=30000").
    uevent = "".join(
        [
            f"DRIVER={fn.driver}\n" if fn.driver else "",
            f"PCI_CLASS={cls:04X}\n",
            f"PCI_ID={fn.vendor:04X}:{fn.device:04X}\n",
            f"PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}\n",
            f"PCI_SLOT_NAME={fn.bdf}\n",
            f"MODALIAS={modalias}\n",
        ]
    )
    files = {
        "vendor": f"0x{fn.vendor:04x}\n",
        "device": f"0x{fn.device:04x}\n",
        "class": f"0x{cls:06x}\n",
        "subsystem_vendor": f"0x{sub_vendor:04x}\n",
        "subsystem_device": f"0x{sub_device:04x}\n",
        "numa_node": f"{fn.numa_node}\n",
        "local_cpulist": f"{fn.local_cpulist}\n",
        "modalias": modalias + "\n",
        "uevent": uevent,
    } | fn.extra
    for name, text in files.items():
        write(root, f"{fn.rel}/{name}", text)
    symlink(root, f"sys/bus/pci/devices/{fn.bdf}", "../../../" + fn.rel.removeprefix("sys/"))
    if fn.driver:
        drv = f"sys/bus/pci/drivers/{fn.driver}"
        Path(root, drv).mkdir(parents=True, exist_ok=True)
        symlink(root, f"{fn.rel}/driver", f"../../../bus/pci/drivers/{fn.driver}")
        symlink(root, f"{drv}/{fn.bdf}", "../../../../" + fn.rel.removeprefix("sys/"))
        symlink(root, f"sys/module/{fn.driver}/drivers/pci:{fn.driver}", f"../../../bus/pci/drivers/{fn.driver}")
    return Path(root, fn.rel)


def add_platform_functions(root: Path, node_cpulists: list[str], bmc_vga: bool = True) -> None:
    """Non-GPU PCI functions of a typical GPU server: AMD host bridge, NVMe, ASPEED BMC VGA.

    The BMC VGA (``ast`` driver, class 0x030000 like the ASPEED in NFD rootfs-1) takes DRM
    ``card0`` and a ``card0-VGA-1`` connector, so GPU cards start at ``card1`` -- which is what
    the real nvidia.yaml CDI spec shows (``/dev/dri/card1`` with ``renderD128``).
    """
    first, last = node_cpulists[0], node_cpulists[-1]
    add_pci_function(
        root, PciFunction(HOST_BRIDGE_BDF, 0x1022, 0x14A4, 0x060000, numa_node=0, local_cpulist=first, root_bus=0x00)
    )
    add_pci_function(
        root, PciFunction(NVME_BDF, 0x144D, 0xA80A, 0x010802, "nvme", numa_node=0, local_cpulist=first, root_bus=0x40)
    )
    if bmc_vga:
        fn = PciFunction(
            BMC_VGA_BDF,
            ASPEED,
            0x2000,
            CLASS_VGA,
            "ast",
            numa_node=len(node_cpulists) - 1,
            local_cpulist=last,
            root_bus=0xC0,
            extra={"boot_vga": "1\n"},
        )
        add_pci_function(root, fn)
        add_drm_minor(root, fn.rel, "card0", 0)
        conn = f"{fn.rel}/drm/card0/card0-VGA-1"
        write(root, f"{conn}/status", "connected\n")
        write(root, f"{conn}/enabled", "enabled\n")
        symlink(root, "sys/class/drm/card0-VGA-1", "../../" + conn.removeprefix("sys/"))


# --------------------------------------------------------------------------- DRM


def add_drm_minor(root: Path, parent_rel: str, name: str, minor: int) -> None:
    """Create ``<parent>/drm/<name>`` (card or renderD) and its ``sys/class/drm`` link.

    ``device`` points back at the parent the way the kernel writes it (``../../../<parent>``,
    cf. ``card0/device`` in the 2pa-pcidomain32bits capture); it resolves to the parent dir.
    """
    node = f"{parent_rel}/drm/{name}"
    write(root, f"{node}/dev", f"{DRM_MAJOR}:{minor}\n")
    write(root, f"{node}/uevent", f"MAJOR={DRM_MAJOR}\nMINOR={minor}\nDEVNAME=dri/{name}\nDEVTYPE=drm_minor\n")
    symlink(root, f"{node}/device", "../../../" + Path(parent_rel).name)
    symlink(root, f"sys/class/drm/{name}", "../../" + node.removeprefix("sys/"))
    version = Path(root, "sys/class/drm/version")
    if not version.exists():
        version.write_text("drm 1.1.0 20060810\n")


def add_xcp_device(root: Path, name: str) -> str:
    """Create the ``sys/devices/platform/<name>`` dir of an amdgpu XCP partition device."""
    rel = f"sys/devices/platform/{name}"
    write(root, f"{rel}/driver_override", "(null)\n")
    write(root, f"{rel}/modalias", f"platform:{name}\n")
    write(root, f"{rel}/uevent", f"MODALIAS=platform:{name}\n")
    return rel


# --------------------------------------------------------------------------- host files


def meminfo_text(total_kb: int) -> str:
    """A /proc/meminfo in the kernel's format (``%-16s%8lu kB``), MemTotal first."""
    free = total_kb * 93 // 100
    rows: list[tuple[str, int, bool]] = [
        ("MemTotal", total_kb, True),
        ("MemFree", free, True),
        ("MemAvailable", total_kb * 95 // 100, True),
        ("Buffers", 683968, True),
        ("Cached", total_kb // 50, True),
        ("SwapCached", 0, True),
        ("Active", total_kb // 100, True),
        ("Inactive", total_kb // 60, True),
        ("SwapTotal", 0, True),
        ("SwapFree", 0, True),
        ("Dirty", 1344, True),
        ("Writeback", 0, True),
        ("AnonPages", 1745360, True),
        ("Mapped", 482196, True),
        ("Shmem", 31464, True),
        ("Slab", 9845864, True),
        ("SReclaimable", 1240468, True),
        ("SUnreclaim", 8605396, True),
        ("KernelStack", 73440, True),
        ("PageTables", 30200, True),
        ("CommitLimit", total_kb // 2, True),
        ("Committed_AS", 20823760, True),
        ("VmallocTotal", 34359738367, True),
        ("VmallocUsed", 1286548, True),
        ("VmallocChunk", 0, True),
        ("HugePages_Total", 0, False),
        ("HugePages_Free", 0, False),
        ("HugePages_Rsvd", 0, False),
        ("HugePages_Surp", 0, False),
        ("Hugepagesize", 2048, True),
        ("DirectMap4k", 5344, True),
        ("DirectMap2M", 2078720, True),
        ("DirectMap1G", total_kb // 1048576 * 1048576, True),
    ]
    return "".join(f"{k + ':':<16}{v:>8}{' kB' if kb else ''}\n" for k, v, kb in rows)


def add_host(root: Path, online: str, memtotal_kb: int, node_cpulists: Iterable[str]) -> None:
    """CPU/NUMA/memory files: ``cpu/online``, ``node/node<N>/cpulist``, ``proc/meminfo``."""
    cpulists = list(node_cpulists)
    write(root, "sys/devices/system/cpu/online", online + "\n")
    write(root, "sys/devices/system/cpu/possible", online + "\n")
    write(root, "sys/devices/system/cpu/offline", "\n")
    write(root, "sys/devices/system/node/online", ("0" if len(cpulists) == 1 else f"0-{len(cpulists) - 1}") + "\n")
    for i, cpus in enumerate(cpulists):
        write(root, f"sys/devices/system/node/node{i}/cpulist", cpus + "\n")
    write(root, "proc/meminfo", meminfo_text(memtotal_kb))


# --------------------------------------------------------------------------- AMD: KFD -> PCI/DRM/CDI


@dataclass(frozen=True)
class AmdPartition:
    """One KFD GPU node as the rest of the root must mirror it."""

    node: int
    domain: int
    bus: int
    slot: int  # XCP slot = location_id & 7 (partition index), 0 = the PCI function itself
    render_minor: int
    cpu_node: int  # NUMA node, from the node's PCIe (type 2) io_link
    device_id: int

    @property
    def bdf(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:00.0"


def amd_partitions(root: Path) -> list[AmdPartition]:
    """Read the KFD GPU nodes of ``root`` (location_id = bus << 8 | dev << 3 | fn)."""
    parts = []
    for node in gpu_nodes(root):
        props = read_properties(node)
        loc = int(props["location_id"])
        pcie = _find_link(node, type="2")
        cpu = int(pcie["node_to"]) if pcie else 0
        parts.append(
            AmdPartition(
                int(node.name),
                int(props.get("domain", 0)),
                loc >> 8,
                loc & 7,
                int(props["drm_render_minor"]),
                cpu,
                int(props["device_id"]),
            )
        )
    return parts


@dataclass
class _Gpu:
    fn: PciFunction
    parts: list[AmdPartition]


def _write_amd_devices(
    root: Path,
    parts: list[AmdPartition],
    *,
    node_cpulists: list[str],
    partition_files: Mapping[str, str],
    pci_class: int = CLASS_ACCEL,
    extra_xcp: bool = False,
    xcp_name: str = "amdgpu_xcp_{}",
    card_offset: int = 1,
    cdi: bool = True,
) -> None:
    """PCI functions, DRM nodes and the amd-ctk CDI spec mirroring KFD partitions ``parts``.

    Partition slot 0 keeps the PCI function's own card/renderD; slot p >= 1 of the g-th GPU (in
    BDF order) lives on platform device ``amdgpu_xcp_<7 * g + p - 1>``: amdgpu allocates
    MAX_XCP - 1 xcp devices per GPU in probe order, whatever the partition mode.  Render minors
    are <renderD of slot 0> + p and card numbers are render minor - 128 + ``card_offset``
    (``card0`` being the BMC VGA).
    """
    gpus: dict[str, _Gpu] = {}
    for part in sorted(parts, key=lambda p: (p.domain, p.bus, p.slot)):
        if part.bdf not in gpus:
            numa = part.cpu_node
            fn = PciFunction(
                part.bdf,
                AMD,
                part.device_id,
                pci_class,
                "amdgpu",
                numa_node=numa,
                local_cpulist=node_cpulists[numa],
                root_bus=part.bus & 0xE0,
                extra=dict(partition_files),
            )
            gpus[part.bdf] = _Gpu(fn, [])
        gpus[part.bdf].parts.append(part)

    for g, gpu in enumerate(gpus.values()):
        add_pci_function(root, gpu.fn)
        base = min(p.render_minor - p.slot for p in gpu.parts)
        used = {p.slot for p in gpu.parts}
        slots = range(MAX_XCP) if extra_xcp else sorted(used)
        for slot in slots:
            parent = gpu.fn.rel if slot == 0 else add_xcp_device(root, xcp_name.format((MAX_XCP - 1) * g + slot - 1))
            render = base + slot
            add_drm_minor(root, parent, f"card{render - RENDER_BASE + card_offset}", render - RENDER_BASE + card_offset)
            add_drm_minor(root, parent, f"renderD{render}", render)

    if cdi:
        # amd-ctk: one device per partition, grouped per GPU in BDF order, then render minor.
        ordered = [p for gpu in gpus.values() for p in sorted(gpu.parts, key=lambda p: p.render_minor)]
        write_amd_cdi(
            root,
            [
                [f"/dev/dri/card{p.render_minor - RENDER_BASE + card_offset}", f"/dev/dri/renderD{p.render_minor}"]
                for p in ordered
            ],
        )


def write_amd_cdi(root: Path, devices: list[list[str]], relpath: str = "etc/cdi/amd.json") -> Path:
    """Write an amd-ctk style CDI spec: devices "0".."N-1" (DRM nodes + /dev/kfd) and "all".

    Layout follows ROCm/container-toolkit ``internal/cdi/cdi.go`` + ``internal/amdgpu``: the
    spec is Go's compact ``json.Encoder`` output; device nodes carry type/major/minor/fileMode/
    permissions/uid/gid; ``minor`` 0 is omitted (``omitempty``); drm nodes come in glob order
    (card before renderD); ``all`` lists every DRM node then /dev/kfd once.
    """

    def node(path: str) -> dict[str, object]:
        name = path.rsplit("/", 1)[1]
        if name == "kfd":
            major, minor, gid = KFD_MAJOR, 0, 110  # render group
        else:
            major, minor = DRM_MAJOR, int(name.removeprefix("card").removeprefix("renderD"))
            gid = 110 if name.startswith("renderD") else 44  # render / video
        out: dict[str, object] = {"path": path, "type": "c", "major": major}
        if minor:
            out["minor"] = minor
        return out | {"fileMode": 0o660, "permissions": "rwm", "uid": 0, "gid": gid}

    kfd = node("/dev/kfd")
    devs = [
        {"name": str(i), "containerEdits": {"deviceNodes": [node(p) for p in paths] + [kfd]}} for i, paths in enumerate(devices)
    ]
    every = [node(p) for paths in devices for p in paths] + [kfd]
    devs.append({"name": "all", "containerEdits": {"deviceNodes": every}})
    spec = {"cdiVersion": "0.6.0", "kind": "amd.com/gpu", "devices": devs, "containerEdits": {}}
    return write(root, relpath, json.dumps(spec, separators=(",", ":")) + "\n")


def _copy_topology(src: Path, root: Path) -> Path:
    """Copy a captured KFD topology and add the ``sys/class/kfd/kfd`` link."""
    dst = Path(root, KFD_TOPOLOGY)
    _copy_into(src, dst, "--no-preserve=all")  # as copyfile: new files, the umask's modes
    symlink(root, "sys/class/kfd/kfd", "../../devices/virtual/kfd/kfd")
    return dst


def _finish_gpu_nodes(root: Path, device_id: int | None, vram_mb: int | None) -> None:
    for node in gpu_nodes(root):
        if device_id is not None:
            set_property(node, "device_id", device_id)
        if vram_mb is not None:
            _write_properties(
                node / "mem_banks" / "0" / "properties",
                {"heap_type": 1, "size_in_bytes": vram_mb * 1024 * 1024, "flags": 0, "width": 8192, "mem_clk_max": 1300},
            )  # width/clock as MI308X capture
            set_property(node, "mem_banks_count", 1)


def _complete_mi300x_cpx(topology: Path) -> None:
    """Add the 64th CPX partition the capture lacks (GPU 0000:e5, XCP slot 7).

    Node 65 copies node 64 (0000:e5 partition 6) with location fn 7, render minor 191 and the
    next simd_id_base (+40 per XCC, as between captured partitions); every node that links to
    node 64 gets the same link to node 65, and node 65 gets node 64's links plus 65 -> 64.
    """
    nodes = topology / "nodes"
    src, new = nodes / "64", nodes / "65"
    props = read_properties(src)
    props["location_id"] = str(int(props["location_id"]) + 1)
    props["drm_render_minor"] = str(int(props["drm_render_minor"]) + 1)
    props["simd_id_base"] = str(int(props["simd_id_base"]) + 40)
    _write_properties(new / "properties", props)
    src_links = io_links(src)
    for node in sorted(nodes.iterdir(), key=lambda p: int(p.name)):
        if node.name == "65":
            continue
        to_src = _find_link(node, reverse=True, node_to="63" if node == src else "64")
        if to_src is not None:  # CPU node 0 only links to the GPUs on its own socket
            _add_io_link(node, to_src | {"node_from": node.name, "node_to": "65"})
    set_property(new, "io_links_count", 0)
    for link in src_links:
        _add_io_link(new, link | {"node_from": "65"})
    same_gpu = next(lk for lk in src_links if lk["node_to"] == "63")
    _add_io_link(new, same_gpu | {"node_from": "65", "node_to": "64"})


def _synth_mi300x_kfd(root: Path, parts_per_gpu: int, gpus: int) -> None:
    """KFD for SPX/DPX/QPX (or CPX with < 8 GPUs), derived from the CPX capture.

    Per GPU i, the template is captured CPX partition 0 (node 2 + 8 i).  Partition p gets
    location_id bus << 8 | p, drm_render_minor 128 + 8 i + p, simd_count / num_xcc / array_count
    scaled by the XCCs per partition, simd_id_base + 40 per XCC; all other keys (unique_id,
    hive_id, ...) are the template's.  io_links: CPU (type 2, weight 20, captured link 0),
    same-GPU partitions (type 11 weight 13, captured) and other GPUs (type 11, weight 41 as
    captured for CPX; weight 15 in SPX, as reported for MI300X SPX hives).
    """
    src = MI300X_CPX_TOPOLOGY
    topo = Path(root, KFD_TOPOLOGY)
    for name in ("generation_id", "system_properties"):
        write(root, f"{KFD_TOPOLOGY}/{name}", (src / name).read_text())
    symlink(root, "sys/class/kfd/kfd", "../../devices/virtual/kfd/kfd")

    tmpl_links = io_links(src / "nodes" / "2")
    pcie = tmpl_links[0]
    xgmi_same = next(lk for lk in tmpl_links if lk["type"] == "11" and lk["weight"] == "13")
    xgmi_other = next(lk for lk in tmpl_links if lk["type"] == "11" and lk["weight"] == "41")
    if parts_per_gpu == 1:
        xgmi_other = xgmi_other | {"weight": "15"}
    cpu_to_gpu = io_links(src / "nodes" / "0")[1]

    xcc = MAX_XCP // parts_per_gpu
    gpu_nodes_: list[tuple[int, int, dict[str, str]]] = []  # (node id, gpu index, props)
    for i in range(gpus):
        tmpl = read_properties(src / "nodes" / str(2 + MAX_XCP * i))
        for p in range(parts_per_gpu):
            props = dict(tmpl)
            props["simd_count"] = str(_MI300X_XCC_SIMDS * xcc)
            props["array_count"] = str(int(tmpl["array_count"]) * xcc)
            props["num_xcc"] = str(xcc)
            props["simd_id_base"] = str(int(tmpl["simd_id_base"]) + 40 * xcc * p)
            props["location_id"] = str(int(tmpl["location_id"]) | p)
            props["drm_render_minor"] = str(RENDER_BASE + MAX_XCP * i + p)
            gpu_nodes_.append((2 + len(gpu_nodes_), i, props))

    numa = {i: 0 if i < 4 else 1 for i in range(gpus)}  # buses 05-65 on socket 0, 85-e5 on 1
    for cpu in (0, 1):
        links = [io_links(src / "nodes" / str(cpu))[0]]  # CPU <-> CPU, as captured
        links += [cpu_to_gpu | {"node_from": str(cpu), "node_to": str(nid)} for nid, i, _ in gpu_nodes_ if numa[i] == cpu]
        _write_node(topo / "nodes" / str(cpu), read_properties(src / "nodes" / str(cpu)), links)
    for nid, i, props in gpu_nodes_:
        links = [pcie | {"node_from": str(nid), "node_to": str(numa[i])}]
        links += [
            (xgmi_same if i == j else xgmi_other) | {"node_from": str(nid), "node_to": str(other)}
            for other, j, _ in gpu_nodes_
            if other != nid
        ]
        _write_node(topo / "nodes" / str(nid), props, links)


def _mi300_partition_files(compute: str, available: str, memory: str) -> dict[str, str]:
    return {
        "current_compute_partition": compute + "\n",
        "available_compute_partition": available + "\n",
        "current_memory_partition": memory + "\n",
        "available_memory_partition": "NPS1, NPS4\n",
    }


# --------------------------------------------------------------------------- AMD builders


def build_mi300x(
    root: Path,
    mode: str = "CPX",
    *,
    memory_mode: str = "NPS1",
    gpus: int = 8,
    complete: bool = True,
    vram_mb: int | None = None,
    cdi: bool = True,
    device_id: int = 0x74A1,
    spx_extra_xcp: bool = False,
    bmc_vga: bool = True,
    xcp_name: str = "amdgpu_xcp_{}",
) -> Path:
    """8 x MI300X (or the first ``gpus``) on a 2 x 96-core host.

    CPX with 8 GPUs uses the real topo-mi300-cpx KFD capture (63 partitions); ``complete=True``
    adds the missing 64th, ``complete=False`` keeps the capture's 63 (GPU 0000:e5 then reports
    CPX but has 7 partitions).  Other modes / GPU counts are synthesized from the capture.
    ``spx_extra_xcp`` adds the amdgpu_xcp card/renderD nodes the kernel creates for unused XCP
    slots (7 per GPU in SPX) which KFD does not reference.  ``xcp_name`` is the platform
    device name: ``amdgpu_xcp_{}`` (current kernels) or ``amdgpu_xcp.{}`` (older ones).
    """
    if mode not in PARTITIONS:
        raise ValueError(f"mode must be one of {sorted(PARTITIONS)}")
    if not 1 <= gpus <= len(MI300X_BDFS):
        raise ValueError("gpus must be 1..8")
    if not complete and (mode != "CPX" or gpus != 8):
        raise ValueError("complete=False only applies to the CPX capture with 8 GPUs")
    root = Path(root)
    if mode == "CPX" and gpus == 8:
        topology = _copy_topology(MI300X_CPX_TOPOLOGY, root)
        if complete:
            _complete_mi300x_cpx(topology)
    else:
        _synth_mi300x_kfd(root, PARTITIONS[mode], gpus)
    _finish_gpu_nodes(root, device_id, vram_mb)

    cpulists = ["0-95", "96-191"]
    add_platform_functions(root, cpulists, bmc_vga)
    _write_amd_devices(
        root,
        amd_partitions(root),
        node_cpulists=cpulists,
        partition_files=_mi300_partition_files(mode, "SPX, DPX, QPX, CPX", memory_mode),
        extra_xcp=spx_extra_xcp,
        xcp_name=xcp_name,
        card_offset=int(bmc_vga),
        cdi=cdi,
    )
    add_host(root, "0-191", MI300X_MEMTOTAL_KB, cpulists)
    return root


def build_mi308x(
    root: Path,
    *,
    cdi: bool = True,
    bmc_vga: bool = True,
    extra_xcp: bool = False,
    xcp_name: str = "amdgpu_xcp_{}",
) -> Path:
    """8 x MI308X in CPX (4 partitions each) from the real topology-parsing-mi308 capture.

    KFD is the capture unchanged (32 GPU nodes, PCI domains 0 and 1, VRAM in mem_banks).
    PCI (0x74a2, partition files "CPX" / "SPX, DPX, CPX" / NPS1), DRM, CDI and host files are
    synthesized; MemTotal is the captured KFD system-memory banks of both CPU nodes.
    """
    root = Path(root)
    topology = _copy_topology(MI308X_TOPOLOGY, root)
    cpulists = ["0-111", "112-223"]  # 2 x 112 cores (cpu_cores_count 112)
    add_platform_functions(root, cpulists, bmc_vga)
    _write_amd_devices(
        root,
        amd_partitions(root),
        node_cpulists=cpulists,
        partition_files=_mi300_partition_files("CPX", "SPX, DPX, CPX", "NPS1"),
        extra_xcp=extra_xcp,
        xcp_name=xcp_name,
        card_offset=int(bmc_vga),
        cdi=cdi,
    )
    add_host(root, "0-223", _kfd_system_memory_kb(topology), cpulists)
    return root


def build_vega10(
    root: Path,
    keep_synthetic_copy: bool = False,
    *,
    cdi: bool = True,
    bmc_vga: bool = True,
) -> Path:
    """1 x Vega 10 (0x6860) from the real topology-parsing capture, old KFD key set.

    Node 2 of that capture is a hand-made copy of node 1 (its README says so); it is dropped by
    default.  ``keep_synthetic_copy=True`` keeps it: a broken root where two KFD nodes claim
    PCI function 0000:19:00.0 and node 2's render minor 129 has no DRM node.
    """
    root = Path(root)
    topology = _copy_topology(VEGA10_TOPOLOGY, root)
    if not keep_synthetic_copy:
        shutil.rmtree(topology / "nodes" / "2")  # CPU node 0 only links to node 1: nothing else to fix
    real = [p for p in amd_partitions(root) if p.node != 2]  # PCI/DRM/CDI mirror node 1 only
    cpulists = ["0-19"]  # cpu_cores_count 20
    add_platform_functions(root, cpulists, bmc_vga)
    _write_amd_devices(
        root, real, node_cpulists=cpulists, partition_files={}, pci_class=CLASS_VGA, card_offset=int(bmc_vga), cdi=cdi
    )
    add_host(root, "0-19", _kfd_system_memory_kb(topology), cpulists)
    return root


def build_big(root: Path, devices: int, partitions_per_gpu: int = 8, *, cdi: bool = True) -> Path:
    """A synthetic node with ``devices`` GPU partitions, for benchmarks (size linear in devices).

    GPUs are MI300X-like (CPX partition 0 of the capture as template), 32 per PCI domain; each
    KFD GPU node has only its PCIe link to its CPU node (CPU nodes have no io_links), so the
    file count grows linearly.  Render minors run 128 .. 128 + devices - 1, cards from card0.
    """
    if partitions_per_gpu not in PARTITIONS.values():
        raise ValueError("partitions_per_gpu must be 1, 2, 4 or 8")
    root = Path(root)
    src = MI300X_CPX_TOPOLOGY
    topo = Path(root, KFD_TOPOLOGY)
    for name in ("generation_id", "system_properties"):
        write(root, f"{KFD_TOPOLOGY}/{name}", (src / name).read_text())
    symlink(root, "sys/class/kfd/kfd", "../../devices/virtual/kfd/kfd")
    for cpu in (0, 1):
        _write_node(topo / "nodes" / str(cpu), read_properties(src / "nodes" / str(cpu)), [])
    tmpl = read_properties(src / "nodes" / "2")
    pcie = io_links(src / "nodes" / "2")[0]
    xcc = MAX_XCP // partitions_per_gpu
    parts: list[AmdPartition] = []
    for d in range(devices):
        g, p = divmod(d, partitions_per_gpu)
        domain, bus = divmod(g, 32)
        bus = 0x04 + 8 * bus
        nid, cpu = 2 + d, g % 2
        props = tmpl | {
            "simd_count": str(_MI300X_XCC_SIMDS * xcc),
            "num_xcc": str(xcc),
            "location_id": str(bus << 8 | p),
            "domain": str(domain),
            "drm_render_minor": str(RENDER_BASE + d),
            "unique_id": str(0x5EED0000 + g),
        }
        _write_node(topo / "nodes" / str(nid), props, [pcie | {"node_from": str(nid), "node_to": str(cpu)}])
        parts.append(AmdPartition(nid, domain, bus, p, RENDER_BASE + d, cpu, 0x74A1))
    mode = next(k for k, v in PARTITIONS.items() if v == partitions_per_gpu)
    cpulists = ["0-95", "96-191"]
    add_platform_functions(root, cpulists, bmc_vga=False)
    _write_amd_devices(
        root,
        parts,
        node_cpulists=cpulists,
        partition_files=_mi300_partition_files(mode, "SPX, DPX, QPX, CPX", "NPS1"),
        card_offset=0,
        cdi=cdi,
    )
    add_host(root, "0-191", MI300X_MEMTOTAL_KB, cpulists)
    return root


def _kfd_system_memory_kb(topology: Path) -> int:
    total = 0
    for bank in topology.glob("nodes/*/mem_banks/*/properties"):
        props = read_properties(bank)
        if props.get("heap_type") == "0":
            total += int(props["size_in_bytes"])
    return total // 1024


# --------------------------------------------------------------------------- NVIDIA


def nvidia_jobstats_gpus() -> list[dict[str, object]]:
    """BDF and device minor of the 8 GPUs in the real jobstats ``Device Minor`` lines."""
    gpus: list[dict[str, object]] = []
    for line in JOBSTATS_DEVICE_MINOR.read_text().splitlines():
        path, _, value = line.partition(":Device Minor:")
        gpus.append({"bdf": path.split("/")[-2], "minor": int(value.strip())})
    return gpus


def nvidia_information(gpu: Mapping[str, object]) -> str:
    """An ``information`` file in the format of nv-procfs.c (tabs and spaces as the driver)."""
    lines = [
        f"Model: \t\t {gpu['model']}",
        f"IRQ:   \t\t {gpu['irq']}",
        f"GPU UUID: \t {gpu['uuid']}",
        f"Video BIOS: \t {gpu['vbios']}",
        "Bus Type: \t PCIe",
        "DMA Size: \t 52 bits",
        "DMA Mask: \t 0xfffffffffffff",
        f"Bus Location: \t {gpu['bdf']}",
        f"Device Minor: \t {gpu['minor']}",
    ]
    if gpu.get("firmware"):
        lines.append(f"GPU Firmware: \t {gpu['firmware']}")
    lines.append(f"GPU Excluded:\t {'Yes' if gpu.get('excluded') else 'No'}")
    return "\n".join(lines) + "\n"


def _nvidia_defaults(gpu: Mapping[str, object], index: int) -> dict[str, object]:
    bdf = str(gpu["bdf"])
    bus = int(bdf.split(":")[1], 16)
    return {
        "model": "NVIDIA H100 80GB HBM3",
        "device": 0x2330,
        "uuid": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"spurinv-test/{bdf}")),
        "vbios": "96.00.30.00.01",
        "irq": 220 + index,
        "firmware": "575.64.03",
        "excluded": False,
        "numa_node": 0 if bus < 0x80 else 1,
    } | dict(gpu)


def build_nvidia(
    root: Path,
    gpus: list[dict[str, object]] | None = None,
    *,
    drm: bool = True,
    bmc_vga: bool = True,
) -> Path:
    """NVIDIA node: per GPU a PCI function (vendor 0x10de, class 0x030200, driver nvidia) and
    ``proc/driver/nvidia/gpus/<BDF>/information``; with ``drm`` also nvidia-drm card/renderD.

    Default GPUs: the 8 BDF / Device Minor pairs of the real jobstats lines (minor != PCI
    order) as H100 80GB HBM3 (0x2330).  Each dict needs ``bdf`` and ``minor`` and may set
    ``model``, ``device``, ``uuid``, ``vbios``, ``irq``, ``firmware``, ``excluded``,
    ``numa_node``.  DRM cards/render nodes follow PCI order (card1/renderD128 first).
    """
    root = Path(root)
    specs = [_nvidia_defaults(g, i) for i, g in enumerate(gpus or nvidia_jobstats_gpus())]
    cpulists = ["0-47,96-143", "48-95,144-191"]  # 2 x 48 cores with SMT siblings
    add_platform_functions(root, cpulists, bmc_vga)
    for i, gpu in enumerate(sorted(specs, key=lambda g: str(g["bdf"]))):
        numa = int(str(gpu["numa_node"]))
        device = int(str(gpu["device"]))
        fn = PciFunction(
            str(gpu["bdf"]),
            NVIDIA,
            device,
            CLASS_3D,
            "nvidia",
            numa_node=numa,
            local_cpulist=cpulists[numa] if numa >= 0 else "0-191",
            root_bus=int(str(gpu["bdf"]).split(":")[1], 16) & 0xE0,
            subsystem_device=0x16C1 if device == 0x2330 else None,
        )  # HGX H100 SXM5
        add_pci_function(root, fn)
        write(root, f"proc/driver/nvidia/gpus/{gpu['bdf']}/information", nvidia_information(gpu))
        if drm:
            add_drm_minor(root, fn.rel, f"card{i + int(bmc_vga)}", i + int(bmc_vga))
            add_drm_minor(root, fn.rel, f"renderD{RENDER_BASE + i}", RENDER_BASE + i)
    add_host(root, "0-191", 2113389580, cpulists)
    return root


def build_nvidia_cdi(root: Path) -> Path:
    """The single-GPU node behind the real nvidia.yaml CDI spec, with that spec in etc/cdi.

    GPU 0000:84:00.0, UUID GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e, minor 0, card1 +
    renderD128 (all from the spec).  The model is not in the capture; H100 PCIe (0x2331) and
    ``numa_node -1`` (firmware without PCI proximity info) are assumptions.
    """
    gpu = {
        "bdf": "0000:84:00.0",
        "minor": 0,
        "uuid": "GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e",
        "model": "NVIDIA H100 PCIe",
        "device": 0x2331,
        "numa_node": -1,
    }
    build_nvidia(root, [gpu])
    write(root, "etc/cdi/nvidia.yaml", NVIDIA_CDI_YAML.read_text())
    return Path(root)


def materialize_synthetic(set_name: str, root: Path) -> Path:
    """Lay the issue-24 synthetic set ``<family>/<set>`` over ``root`` (``build.materialize``:
    its ``root/`` plus the empty directories git cannot hold)."""
    src = SYNTHETIC / set_name
    for path in sorted((src / "root").rglob("*")):  # over a built node: its links may exist already
        dest = Path(root, path.relative_to(src / "root"))
        if path.is_symlink():
            if not dest.is_symlink():
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.symlink_to(os.readlink(path))
            elif os.readlink(dest) != os.readlink(path):
                raise ValueError(f"{dest} already links elsewhere than {set_name} says")
        elif path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    empty = src / "empty-dirs.txt"
    if empty.exists():
        for line in empty.read_text().splitlines():
            Path(root, line).mkdir(parents=True, exist_ok=True)
    return Path(root)


def build_nvidia_mig(root: Path, layout: str) -> Path:
    """The 8 × H100 node of ``build_nvidia`` (the same BDFs, minors and UUIDs as the synthetic
    sets) with the capability tree and CDI spec of ``nvidia-mig/<layout>``."""
    build_nvidia(root)
    return materialize_synthetic(f"nvidia-mig/{layout}", root)


def build_amd_switch(root: Path, snapshot: str) -> Path:
    """The MI300X node of ``amd-switch/<snapshot>`` (PCI functions, partition attributes, KFD
    topology) made whole: the host files, and a render node for each KFD GPU node's
    ``drm_render_minor`` (on a platform device, as amdgpu's XCP nodes are)."""
    root = materialize_synthetic(f"amd-switch/{snapshot}", root)
    for node in gpu_nodes(root):
        minor = int(read_properties(node / "properties")["drm_render_minor"])
        parent = add_xcp_device(root, f"amdgpu_xcp_r{minor}")
        add_drm_minor(root, parent, f"renderD{minor}", minor)
    add_host(root, "0-191", MI300X_MEMTOTAL_KB, ["0-95", "96-191"])
    return Path(root)


# --------------------------------------------------------------------------- host only


def build_host_only(root: Path, hwloc_set: str) -> Path:
    """Copy one real host tree (``HOST_SETS`` key) as the root: no GPU, symlinks kept."""
    try:
        src = HOST_SETS[hwloc_set]
    except KeyError:
        raise ValueError(f"unknown set {hwloc_set!r}; choose from {sorted(HOST_SETS)}") from None
    _copy_into(src, Path(root), "--preserve=mode,timestamps")
    return Path(root)


def _copy_into(src: Path, dst: Path, keep: str) -> None:
    """``src``'s contents into ``dst`` (made if missing), symlinks kept as links: ``cp`` takes about
    half the CPU of ``shutil.copytree``."""
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-R", "--no-dereference", keep, "--", f"{src}/.", str(dst)], check=True)


def copy_root(src: Path, dst: Path, times: bool = True) -> Path:
    """A private, mutable copy of a built root, symlinks kept as links. ``cp -a`` takes about
    half the CPU of ``shutil.copytree`` on a root's thousands of small files.

    ``times=False``, for tests of code that reads no timestamps (discovery): the copy's are the
    copy's own, which takes about half of ``cp -a``'s CPU again (its utimensat, chown and xattr
    calls). Everything else is the same (tests/test_rootbuilder.py compares them): types, links,
    sizes and contents; modes (with no umask, cp creates each file with its source's mode); the
    owner (the copier, who built the root). A built root has no hard links or xattrs to keep."""
    if os.path.lexists(dst):
        raise FileExistsError(dst)  # cp would copy into it instead
    if times:
        subprocess.run(["cp", "-a", "--", str(src), str(dst)], check=True)
    else:
        subprocess.run(["cp", "-R", "--no-dereference", "--", str(src), str(dst)], check=True, umask=0)
    return Path(dst)
