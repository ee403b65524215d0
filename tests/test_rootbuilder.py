"""Sanity tests of the copied fixtures and of the roots tests/rootbuilder.py composes.

These check file layout and counts only; they do not import spurinv.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also works under --import-mode=importlib

import rootbuilder as rb


def cpulist_count(text: str) -> int:
    """Number of CPUs in a kernel cpulist such as ``0-15,88-103``."""
    count = 0
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            count += int(hi or lo) - int(lo) + 1
    return count


def props(node: Path) -> dict[str, int]:
    return {k: int(v) for k, v in rb.read_properties(node).items()}


def render_minors(root: Path) -> list[int]:
    drm = root / "sys/class/drm"
    return sorted(int(p.name[7:]) for p in drm.iterdir() if p.name.startswith("renderD"))


def cdi_devices(root: Path, name: str = "amd.json") -> dict[str, list[str]]:
    spec = json.loads((root / "etc/cdi" / name).read_text())
    return {d["name"]: [n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in spec["devices"]}


def _entries(top: Path | str) -> Iterator[os.DirEntry[str]]:
    """Every entry below ``top``, links not followed, as ``os.walk`` lists them; each entry's
    type comes from its directory listing, not from a stat of each path (a built CPX root has
    9,691 entries, the real captures 23,000)."""
    pending = [os.fspath(top)]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for entry in listing:
                yield entry
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)


def assert_links_relative_and_resolving(root: Path) -> None:
    real_root = os.path.join(os.path.realpath(root), "")
    for entry in _entries(root):
        if entry.is_symlink():
            target = os.readlink(entry.path)
            assert not target.startswith("/"), entry.path
            assert os.path.exists(entry.path), f"dangling {entry.path} -> {target}"
            assert os.path.join(os.path.realpath(entry.path), "").startswith(real_root), entry.path


def assert_amd_root_consistent(root: Path) -> None:
    """Every KFD render minor has a DRM node on the right PCI function; CDI matches KFD."""
    parts = rb.amd_partitions(root)
    for part in parts:
        render = root / "sys/class/drm" / f"renderD{part.render_minor}"
        assert (render / "dev").read_text() == f"226:{part.render_minor}\n"
        owner = (render / "device").resolve()
        if part.slot == 0:
            assert owner == rb.pci_device_dir(root, part.bdf)
        else:
            assert owner.parent.name == "platform"
            assert owner.name.startswith("amdgpu_xcp")
        assert (rb.pci_device_dir(root, part.bdf) / "driver").resolve().name == "amdgpu"
    if (root / "etc/cdi/amd.json").exists():
        devices = cdi_devices(root)
        assert len(devices) == len(parts) + 1
        cdi_renders = sorted(
            int(p.rsplit("renderD", 1)[1]) for n, paths in devices.items() if n != "all" for p in paths if "renderD" in p
        )
        assert cdi_renders == sorted(p.render_minor for p in parts)
        for paths in devices.values():
            assert paths[-1] == "/dev/kfd"
            for path in paths[:-1]:
                assert (root / "sys/class/drm" / path.rsplit("/", 1)[1]).is_dir(), path
    assert_links_relative_and_resolving(root)


# --------------------------------------------------------------------------- copied fixtures

COPIED_SETS = [
    "ROCm__k8s-device-plugin/testdata/topo-mi300-cpx/topology",
    "ROCm__k8s-device-plugin/testdata/topology-parsing-mi308/topology",
    "ROCm__k8s-device-plugin/testdata/topology-parsing/topology",
    "prometheus__procfs/testdata/fixtures",
    "prometheus__node_exporter/collector/fixtures",
    *(f"open-mpi__hwloc/tests/hwloc/linux/expanded/{n}/{n}" for n in rb._HWLOC_SETS),
    "kubernetes-sigs__node-feature-discovery/testdata/source/pci/rootfs-1",
    "salilkadam__Infrastructure/gpu-setup/configs/cdi/nvidia.yaml",
    "cncf-tags__container-device-interface/schema/testdata/good",
    "cncf-tags__container-device-interface/schema/testdata/bad",
    "jobstats/device-minor.txt",
]


@pytest.mark.parametrize("relpath", COPIED_SETS)
def test_copied_set_present_and_in_provenance(relpath: str) -> None:
    assert (rb.REAL / relpath).exists()
    provenance = (rb.REAL / "PROVENANCE.md").read_text()
    assert relpath.split("/", maxsplit=1)[0] in provenance


def test_no_flattened_symlinks_in_fixtures() -> None:
    """A checkout with core.symlinks=false turns links into files holding the target text."""
    links = 0
    for entry in _entries(rb.REAL):  # links to dirs included, not followed
        if entry.is_symlink():
            links += 1
            assert not os.readlink(entry.path).startswith("/"), entry.path
        elif entry.is_file() and entry.stat().st_size < 4096:
            with open(entry.path, "rb") as file:
                data = file.read()
            assert not (data.startswith(b"../") and b"\n" not in data), f"flattened link {entry.path}"
    assert links > 600  # 656 links restored from the shared copy


def test_kfd_pruned_to_what_is_used() -> None:
    for topo in (rb.MI300X_CPX_TOPOLOGY, rb.MI308X_TOPOLOGY, rb.VEGA10_TOPOLOGY):
        names = {p.name for p in topo.rglob("*")}
        assert not names & {"caches", "p2p_links", "used_memory"}


def test_jobstats_lines_verbatim() -> None:
    lines = rb.JOBSTATS_DEVICE_MINOR.read_text().splitlines()
    assert len(lines) == 8
    assert all("information:Device Minor: \t " in line for line in lines)
    assert [g["minor"] for g in rb.nvidia_jobstats_gpus()] == [2, 3, 0, 1, 6, 7, 4, 5]


@pytest.mark.parametrize(
    ("topology", "cpus", "gpus", "physical", "generation"),
    [(rb.MI300X_CPX_TOPOLOGY, 2, 63, 8, 80), (rb.MI308X_TOPOLOGY, 2, 32, 8, 33), (rb.VEGA10_TOPOLOGY, 1, 2, 2, 2)],
)
def test_kfd_capture_counts(topology: Path, cpus: int, gpus: int, physical: int, generation: int) -> None:
    nodes = [props(n) for n in sorted((topology / "nodes").iterdir())]
    gpu = [n for n in nodes if n["simd_count"] > 0 and n["cpu_cores_count"] == 0]
    assert len(nodes) - len(gpu) == cpus
    assert len(gpu) == gpus
    assert len({n["unique_id"] for n in gpu}) == physical  # Vega 10's hand-made copy has unique_id + 1
    assert int((topology / "generation_id").read_text()) == generation


# --------------------------------------------------------------------------- MI300X


@pytest.fixture
def mi300x_cpx(built: Callable[[str], Path]) -> Path:
    """``rb.build_mi300x(path)``, as the suite's shared read-only root (built once a run)."""
    return built("mi300x-cpx")


def test_mi300x_cpx_complete(mi300x_cpx: Path) -> None:
    root = mi300x_cpx
    gpus = [props(n) for n in rb.gpu_nodes(root)]
    assert len(gpus) == 64
    assert Counter(Counter(n["unique_id"] for n in gpus).values()) == {8: 8}
    assert sorted(n["drm_render_minor"] for n in gpus) == list(range(128, 192))
    assert render_minors(root) == list(range(128, 192))
    for node in rb.gpu_nodes(root):
        assert props(node)["io_links_count"] == len(rb.io_links(node)) == 64
    cpu1 = root / rb.KFD_TOPOLOGY / "nodes/1"
    assert props(cpu1)["io_links_count"] == len(rb.io_links(cpu1)) == 33
    new = props(root / rb.KFD_TOPOLOGY / "nodes/65")
    assert (new["location_id"], new["drm_render_minor"]) == (0xE5 << 8 | 7, 191)
    assert new["unique_id"] == props(root / rb.KFD_TOPOLOGY / "nodes/64")["unique_id"]
    for bdf in rb.MI300X_BDFS:
        dev = rb.pci_device_dir(root, bdf)
        assert (dev / "class").read_text() == "0x120000\n"
        assert (dev / "current_compute_partition").read_text() == "CPX\n"
        assert (dev / "numa_node").read_text() == ("0\n" if bdf < "0000:80" else "1\n")
    assert (root / "sys/devices/system/cpu/online").read_text() == "0-191\n"
    assert (root / "proc/meminfo").read_text().startswith("MemTotal:")
    assert len(list((root / "sys/devices/platform").iterdir())) == 56
    assert_amd_root_consistent(root)


def test_mi300x_cpx_as_captured(built: Callable[[str], Path]) -> None:
    root = built("mi300x-cpx-captured")  # rb.build_mi300x(path, complete=False), shared and read-only
    topo = root / rb.KFD_TOPOLOGY
    captured = sorted(p.relative_to(rb.MI300X_CPX_TOPOLOGY) for p in rb.MI300X_CPX_TOPOLOGY.rglob("*") if p.is_file())
    assert sorted(p.relative_to(topo) for p in topo.rglob("*") if p.is_file()) == captured
    assert all((topo / p).read_bytes() == (rb.MI300X_CPX_TOPOLOGY / p).read_bytes() for p in captured)
    parts = rb.amd_partitions(root)
    assert len(parts) == 63
    assert sum(p.bus == 0xE5 for p in parts) == 7
    assert render_minors(root) == list(range(128, 191))
    assert len(cdi_devices(root)) == 64  # 63 + "all"
    assert_amd_root_consistent(root)


@pytest.mark.parametrize(("mode", "per_gpu", "simds"), [("SPX", 1, 1216), ("DPX", 2, 608), ("QPX", 4, 304)])
def test_mi300x_synthesized_modes(tmp_path: Path, mode: str, per_gpu: int, simds: int) -> None:
    root = rb.build_mi300x(tmp_path, mode)
    nodes = rb.gpu_nodes(root)
    assert len(nodes) == 8 * per_gpu
    expected = sorted(128 + 8 * i + p for i in range(8) for p in range(per_gpu))
    assert sorted(props(n)["drm_render_minor"] for n in nodes) == expected
    assert render_minors(root) == expected
    for node in nodes:
        p = props(node)
        assert (p["simd_count"], p["num_xcc"]) == (simds, 8 // per_gpu)
        links = rb.io_links(node)
        assert p["io_links_count"] == len(links) == len(nodes)  # 1 PCIe + (N - 1) XGMI
        assert (links[0]["type"], links[0]["weight"]) == ("2", "20")
        if mode == "SPX":
            assert {(lk["type"], lk["weight"]) for lk in links[1:]} == {("11", "15")}
    for bdf in rb.MI300X_BDFS:
        assert (rb.pci_device_dir(root, bdf) / "current_compute_partition").read_text() == mode + "\n"
    assert_amd_root_consistent(root)


def test_mi300x_spx_extra_xcp(tmp_path: Path) -> None:
    root = rb.build_mi300x(tmp_path, "SPX", spx_extra_xcp=True)
    assert len(rb.gpu_nodes(root)) == 8
    assert render_minors(root) == list(range(128, 192))  # 56 xcp render nodes KFD ignores
    assert len(cdi_devices(root)) == 9
    assert_amd_root_consistent(root)


def test_mi300x_overrides(tmp_path: Path) -> None:
    root = rb.build_mi300x(
        tmp_path, "SPX", gpus=2, device_id=0x74A5, vram_mb=196592, cdi=False, memory_mode="NPS4", xcp_name="amdgpu_xcp.{}"
    )
    nodes = rb.gpu_nodes(root)
    assert len(nodes) == 2
    assert {props(n)["device_id"] for n in nodes} == {0x74A5}
    assert {props(n / "mem_banks/0")["size_in_bytes"] for n in nodes} == {196592 << 20}
    dev = rb.pci_device_dir(root, rb.MI300X_BDFS[0])
    assert (dev / "device").read_text() == "0x74a5\n"
    assert (dev / "current_memory_partition").read_text() == "NPS4\n"
    assert not (root / "etc/cdi").exists()
    assert_amd_root_consistent(root)


def test_mi300x_xcp_name_style(tmp_path: Path) -> None:
    root = rb.build_mi300x(tmp_path, "DPX", gpus=1, xcp_name="amdgpu_xcp.{}")
    assert [p.name for p in (root / "sys/devices/platform").iterdir()] == ["amdgpu_xcp.0"]


# --------------------------------------------------------------------------- MI308X, Vega 10


def test_mi308x(tmp_path: Path) -> None:
    root = rb.build_mi308x(tmp_path)
    nodes = rb.gpu_nodes(root)
    assert len(nodes) == 32
    vram_mib = Counter(props(n / "mem_banks/0")["size_in_bytes"] // 2**20 for n in nodes)
    assert vram_mib == {49152: 24, 49136: 8}
    parts = rb.amd_partitions(root)
    assert Counter(p.domain for p in parts) == {0: 16, 1: 16}
    bdfs = sorted({p.bdf for p in parts})
    assert (bdfs[0], bdfs[-1]) == ("0000:0a:00.0", "0001:c9:00.0")
    for bdf in bdfs:
        dev = rb.pci_device_dir(root, bdf)
        assert (dev / "device").read_text() == "0x74a2\n"
        assert (dev / "available_compute_partition").read_text() == "SPX, DPX, CPX\n"
    assert len(cdi_devices(root)) == 33
    assert_amd_root_consistent(root)


def test_vega10_clean(tmp_path: Path) -> None:
    root = rb.build_vega10(tmp_path)
    assert len(rb.gpu_nodes(root)) == 1
    dev = rb.pci_device_dir(root, "0000:19:00.0")
    assert (dev / "device").read_text() == "0x6860\n"
    assert (dev / "class").read_text() == "0x030000\n"
    assert not (dev / "current_compute_partition").exists()
    assert_amd_root_consistent(root)


def test_vega10_keeps_synthetic_copy(tmp_path: Path) -> None:
    root = rb.build_vega10(tmp_path, keep_synthetic_copy=True)
    locations = [props(n)["location_id"] for n in rb.gpu_nodes(root)]
    assert locations == [6400, 6400]  # two KFD nodes claim 0000:19:00.0
    assert render_minors(root) == [128]  # node 2's render minor 129 has no DRM node


# --------------------------------------------------------------------------- NVIDIA


def parse_information(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def test_nvidia_jobstats_node(tmp_path: Path) -> None:
    root = rb.build_nvidia(tmp_path)
    gpus = root / "proc/driver/nvidia/gpus"
    infos = {p.name: parse_information((p / "information").read_text()) for p in gpus.iterdir()}
    expected = {g["bdf"]: str(g["minor"]) for g in rb.nvidia_jobstats_gpus()}
    assert {bdf: info["Device Minor"] for bdf, info in infos.items()} == expected
    for bdf, info in infos.items():
        assert info["Bus Location"] == bdf
        assert info["Model"] == "NVIDIA H100 80GB HBM3"
        assert info["GPU UUID"].startswith("GPU-")
        dev = rb.pci_device_dir(root, bdf)
        assert (dev / "vendor").read_text() == "0x10de\n"
        assert (dev / "class").read_text() == "0x030200\n"
        assert (dev / "driver").resolve().name == "nvidia"
    assert render_minors(root) == list(range(128, 136))
    assert_links_relative_and_resolving(root)


def test_nvidia_cdi_node(tmp_path: Path) -> None:
    root = rb.build_nvidia_cdi(tmp_path)
    assert (root / "etc/cdi/nvidia.yaml").read_bytes() == rb.NVIDIA_CDI_YAML.read_bytes()
    info = parse_information((root / "proc/driver/nvidia/gpus/0000:84:00.0/information").read_text())
    assert info["GPU UUID"] == "GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e"
    assert info["Device Minor"] == "0"
    card1 = (root / "sys/class/drm/card1/device").resolve()
    assert card1 == (root / "sys/class/drm/renderD128/device").resolve() == rb.pci_device_dir(root, "0000:84:00.0")
    assert_links_relative_and_resolving(root)


# --------------------------------------------------------------------------- host-only sets

HOSTS = [
    # set, CPUs online (None: no online file), MemTotal kB, PCI functions
    ("2pa-pcidomain32bits", 2, 2052540, 9),
    ("32intel64-2p8co2t+8ve", 32, 97445600, 28),
    ("40intel64-4n10c+pci-conflicts", 40, 529428392, 3),
    ("nvidiagpunumanodes", 32, 358162944, 6),
    ("nvidia-dgx-gb10", 20, 125508468, 0),
    ("128arm-2pa2n8cluster4co", 128, 527031224, 0),
    ("20em64t-hybrid-1p6c2t+2ca4co1t", 20, 32489496, 0),
    ("node_exporter", 4, 3742148, 3),
    ("procfs", None, 15666184, 3),
]


@pytest.mark.parametrize(("name", "cpus", "memtotal", "pci"), HOSTS)
def test_host_only(tmp_path: Path, name: str, cpus: int | None, memtotal: int, pci: int) -> None:
    root = rb.build_host_only(tmp_path, name)
    online = root / "sys/devices/system/cpu/online"
    assert (cpulist_count(online.read_text()) if online.exists() else None) == cpus
    first = (root / "proc/meminfo").read_text().splitlines()[0].split()
    assert first == ["MemTotal:", str(memtotal), "kB"]
    devices = root / "sys/bus/pci/devices"
    assert (len(list(devices.iterdir())) if devices.exists() else 0) == pci
    assert not (root / rb.KFD_DIR).exists()


def test_host_only_keeps_symlinks(tmp_path: Path) -> None:
    root = rb.build_host_only(tmp_path, "2pa-pcidomain32bits")
    link = root / "sys/bus/pci/devices/10000:00:04.0"
    assert link.is_symlink()
    assert link.resolve().is_dir()
    assert (root / "sys/class/drm/card0/device").resolve().name == "0000:00:02.0"


# --------------------------------------------------------------------------- big, helpers, CDI schema


def test_build_big_is_linear(tmp_path: Path) -> None:
    def files(root: Path) -> int:
        return sum(len(names) for _, _, names in os.walk(root))

    small = rb.build_big(tmp_path / "a", 16)
    large = rb.build_big(tmp_path / "b", 32)
    assert len(rb.gpu_nodes(large)) == 32
    assert len(cdi_devices(large)) == 33
    per_device = (files(large) - files(small)) / 16
    assert per_device < 12
    assert files(large) < 100 + per_device * 32
    assert_amd_root_consistent(large)
    spread = rb.build_big(tmp_path / "c", 33, partitions_per_gpu=1)  # 32 GPUs per PCI domain
    assert {p.domain for p in rb.amd_partitions(spread)} == {0, 1}
    assert len(rb.gpu_nodes(spread)) == 33


def test_fault_injection_helpers(tmp_path: Path) -> None:
    root = rb.build_vega10(tmp_path)
    node = rb.gpu_nodes(root)[0]
    rb.set_property(node, "simd_count", 0)
    assert rb.gpu_nodes(root) == []
    rb.set_property(node, "simd_count", None)
    assert "simd_count" not in rb.read_properties(node)
    assert list(rb.read_properties(node))[:2] == ["cpu_cores_count", "mem_banks_count"]
    rb.write(root, "sys/class/drm/renderD128/dev", "226:129\n")
    assert (root / "sys/class/drm/renderD128/dev").read_text() == "226:129\n"
    rb.symlink(root, "sys/bus/pci/devices/0000:19:00.0", "../../../devices/nowhere")
    assert not (root / "sys/bus/pci/devices/0000:19:00.0").exists()
    rb.remove(root, "sys/class/kfd")
    assert rb.kfd_nodes(root) == [root / rb.KFD_TOPOLOGY / "nodes" / n for n in ("0", "1")]
    rb.remove(root, rb.KFD_DIR)
    assert rb.kfd_nodes(root) == []
    with pytest.raises(FileNotFoundError):
        rb.remove(root, "no/such/file")


def _listing(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry below ``root``: type and mode, owner, and what it is: a link's target, a
    file's hard links, xattrs and bytes (a directory's size and links depend on its history)."""
    found: dict[str, tuple[object, ...]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            what: tuple[object, ...] = ()
            if stat.S_ISLNK(info.st_mode):
                what = (os.readlink(path),)
            elif stat.S_ISREG(info.st_mode):
                what = (info.st_nlink, os.listxattr(path), Path(path).read_bytes())
            elif stat.S_ISDIR(info.st_mode):
                what = (os.listxattr(path),)
            found[os.path.relpath(path, root)] = (info.st_mode, info.st_uid, info.st_gid, *what)
    return found


# not the 64-partition CPX root: the same kinds of entry as the SPX root, nine times as many (1.3 s a run)
@pytest.mark.parametrize("name", ["mi300x-spx", "vega10", "nvidia-8", "nvidia-cdi"])
def test_a_copy_without_timestamps_is_the_root_but_for_them(built: Callable[[str], Path], tmp_path: Path, name: str) -> None:
    """copy_root(times=False), which the discovery faults use: what discovery can see of a file
    is as in the built root, and a fault in the copy never reaches the root."""
    root = built(name)
    old = os.umask(0o077)  # a umask that would strip bits from what cp creates
    try:
        copy = rb.copy_root(root, tmp_path / "copy", times=False)
    finally:
        os.umask(old)

    assert _listing(copy) == _listing(root)
    first = next(path for path in sorted(copy.rglob("*")) if path.is_file() and not path.is_symlink())
    first.write_text("fault\n")
    assert (root / first.relative_to(copy)).read_bytes() != b"fault\n"


def test_cdi_specs_against_real_schema(mi300x_cpx: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    referencing = pytest.importorskip("referencing")
    schema = json.loads((rb.CDI_SCHEMA_DIR / "schema.json").read_text())
    defs = referencing.Resource.from_contents(
        json.loads((rb.CDI_SCHEMA_DIR / "defs.json").read_text()), default_specification=referencing.jsonschema.DRAFT7
    )
    validator = jsonschema.Draft7Validator(schema, registry=referencing.Registry().with_resource("defs.json", defs))
    validator.validate(json.loads((mi300x_cpx / "etc/cdi/amd.json").read_text()))
    for good in (rb.CDI_SCHEMA_DIR / "testdata/good").iterdir():
        validator.validate(json.loads(good.read_text()))
    assert not validator.is_valid(json.loads((rb.CDI_SCHEMA_DIR / "testdata/bad/explicit-empty.json").read_text()))
    assert (rb.CDI_SCHEMA_DIR / "testdata/bad/empty.json").read_bytes() == b""
