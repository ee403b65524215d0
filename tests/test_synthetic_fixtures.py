"""The synthetic fixtures (``tests/fixtures/synthetic``) stay honest: the sets equal what build.py
writes, the counts in their README hold, the files obey the driver formats of docs/partitions.md,
checked here independently of the generator (a parser per format, not the generator's own
functions), and the real captures they are derived from are still in ``tests/fixtures/real``."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

SYNTH = Path(__file__).parent / "fixtures" / "synthetic"
REAL = Path(__file__).parent / "fixtures" / "real"


def _build():
    spec = importlib.util.spec_from_file_location("synthetic_build", SYNTH / "build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


BUILD = _build()
RENDERED = BUILD.render_all()
SETS = sorted(RENDERED)


def _readme_rows() -> dict[str, tuple[int, int]]:
    rows = {}
    for match in re.finditer(r"^\| `([\w.-]+/[\w.-]+)` \| (\d+) \| (\d+) \|", (SYNTH / "README.md").read_text(), re.M):
        rows[match[1]] = (int(match[2]), int(match[3]))
    return rows


def _expect(name: str) -> dict:
    return json.loads((SYNTH / name / "expect.json").read_text())


@pytest.mark.parametrize("name", SETS)
def test_committed_set_is_what_build_py_writes(name):
    assert BUILD.on_disk(SYNTH / name) == RENDERED[name]


def test_readme_lists_every_set_with_its_counts():
    rows = _readme_rows()
    assert sorted(rows) == SETS
    for name, (files, links) in rows.items():
        paths = list((SYNTH / name).rglob("*"))
        assert (files, links) == (
            sum(1 for p in paths if p.is_file() and not p.is_symlink()),
            sum(1 for p in paths if p.is_symlink()),
        ), name


# --------------------------------------------------------------------------- NVIDIA


CAP = re.compile(r"\ADeviceFileMinor: (\d+)\nDeviceFileMode: (\d+)\nDeviceFileModify: ([01])\n\Z")
MINOR_LINE = re.compile(r"Device Minor:[ \t]+(\d+)")
NV_SETS = [s for s in SETS if s.startswith("nvidia-mig/")]


def _minors_table(root: Path) -> dict[str, int]:
    table = {}
    for line in (root / "proc/driver/nvidia-caps/mig-minors").read_text().splitlines():
        name, minor = line.split(" ")
        table[name] = int(minor)
    return table


def test_mig_minors_table_matches_the_nvidia_documentation():
    table = _minors_table(SYNTH / "nvidia-mig/mig-disabled/root")
    # docs.nvidia.com MIG user guide, "Device Nodes and Capabilities": first and last lines.
    assert list(table.items())[:4] == [("config", 1), ("monitor", 2), ("gpu0/gi0/access", 3), ("gpu0/gi0/ci0/access", 4)]
    assert list(table.items())[-2:] == [("gpu31/gi14/ci6/access", 4321), ("gpu31/gi14/ci7/access", 4322)]
    # The guide's example: GI 1 with compute instances 0-2 -> nvidia-cap12 .. nvidia-cap15.
    gi1 = ("gpu0/gi1/access", "gpu0/gi1/ci0/access", "gpu0/gi1/ci1/access", "gpu0/gi1/ci2/access")
    assert [table[k] for k in gi1] == [12, 13, 14, 15]
    assert len(table) == 2 + 32 * 15 * 9


@pytest.mark.parametrize("name", NV_SETS)
def test_capability_tree_agrees_with_the_minor_table_and_expect(name):
    root = SYNTH / name / "root"
    table = _minors_table(root)
    caps = root / "proc/driver/nvidia/capabilities"
    minors = {}
    for info in (root / "proc/driver/nvidia/gpus").glob("*/information"):
        match = MINOR_LINE.search(info.read_text())
        assert match, info
        minors[info.parent.name] = int(match[1])
    found = []
    for access in sorted(caps.glob("gpu*/mig/gi*/**/access")):
        match = CAP.match(access.read_text())
        assert match, access
        rel = access.relative_to(caps).as_posix().replace("/mig/", "/", 1)
        assert int(match[1]) == table[rel], rel
        assert int(match[2]) == 0o444
        if "/ci" in rel:
            gpu, gi, ci = re.fullmatch(r"gpu(\d+)/gi(\d+)/ci(\d+)/access", rel).groups()
            bdf = next(b for b, m in minors.items() if m == int(gpu))
            found.append(f"{bdf}/mig{gi}.{ci}")
    expect = _expect(name)
    expected = [d["id"] for g in expect["gpus"] for d in g["mig_devices"]]
    assert sorted(found) == sorted(expected)
    assert len(found) == expect["mig_device_count"]
    # Every GPU's directory is named by its Device Minor, never by the NVML (PCI) order.
    assert {g["bdf"]: g["minor"] for g in expect["gpus"]} == minors
    with_instances = {p.parent.name for p in caps.glob("gpu*/mig")}
    empty = set((SYNTH / name / "empty-dirs.txt").read_text().split()) if (SYNTH / name / "empty-dirs.txt").exists() else set()
    assert {f"gpu{m}" for m in minors.values()} == with_instances | {Path(p).parent.name for p in empty}


@pytest.mark.parametrize("name", NV_SETS)
def test_cdi_mig_devices_name_existing_capabilities_unless_stale(name):
    root = SYNTH / name / "root"
    text = (root / "etc/cdi/nvidia.yaml").read_text()
    by_minor = {v: k for k, v in _minors_table(root).items()}
    caps = root / "proc/driver/nvidia/capabilities"
    devices = re.findall(r"- containerEdits:\n    deviceNodes:\n((?:    - path: \S+\n)+)  name: (\S+)", text)
    assert devices[-1][1] == "all"
    stale = []
    for paths, device in devices[:-1]:
        nodes = re.findall(r"path: (\S+)", paths)
        caps_nodes = [int(n.rsplit("nvidia-cap", 1)[1]) for n in nodes if "nvidia-cap" in n]
        assert ":" in device.strip('"') or device.startswith("MIG-") or not caps_nodes
        for minor in caps_nodes:
            if not (caps / by_minor[minor].replace("/", "/mig/", 1)).is_file():
                stale.append(device)
    assert bool(stale) == (not _expect(name)["cdi_matches_proc"])


def test_materialize_creates_the_empty_mig_directories(tmp_path):
    dest = BUILD.materialize(SYNTH / "nvidia-mig/mig-disabled", tmp_path / "root")
    mig_dirs = sorted(dest.glob("proc/driver/nvidia/capabilities/gpu*/mig"))
    assert len(mig_dirs) == 8
    assert all(p.is_dir() and not any(p.iterdir()) for p in mig_dirs)


# --------------------------------------------------------------------------- AMD


AMD_SETS = [s for s in SETS if s.startswith("amd-switch/")]
KFD = "sys/devices/virtual/kfd/kfd/topology"
MODES = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}


def _props(path: Path) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in path.read_text().splitlines())


@pytest.mark.parametrize("name", AMD_SETS)
def test_kfd_topology_is_self_consistent_and_counts_match_expect(name):
    root = SYNTH / name / "root"
    topo = root / KFD
    nodes = sorted((topo / "nodes").iterdir(), key=lambda p: int(p.name))
    assert [int(p.name) for p in nodes] == list(range(len(nodes)))
    gpu_nodes = []
    for node in nodes:
        props = _props(node / "properties")
        links = sorted((node / "io_links").iterdir(), key=lambda p: int(p.name))
        assert int(props["io_links_count"]) == len(links), node
        for link in links:
            lp = _props(link / "properties")
            assert lp["node_from"] == node.name
            assert 0 <= int(lp["node_to"]) < len(nodes)
        if int(props["simd_count"]):
            gpu_nodes.append(props)
    expect = _expect(name)
    assert len(gpu_nodes) == expect["gpu_partitions"]
    assert int((topo / "generation_id").read_text()) == expect["generation_id"]
    for package in expect["packages"]:
        bus = int(package["bdf"].split(":")[1], 16)
        mine = [n for n in gpu_nodes if int(n["location_id"]) >> 8 == bus]
        assert len(mine) == len(package["kfd_nodes"]), package["bdf"]


@pytest.mark.parametrize("name", AMD_SETS)
def test_partition_attributes_have_the_kernel_format(name):
    root = SYNTH / name / "root"
    for fn in sorted((root / "sys/bus/pci/devices").iterdir()):
        current = fn / "current_compute_partition"
        if not current.exists():
            assert not (fn / "driver").exists(), fn  # only an unbound function lacks them
            continue
        assert re.fullmatch(r"(SPX|DPX|TPX|QPX|CPX|UNKNOWN)\n", current.read_text())
        assert re.fullmatch(r"(NPS[123468]|UNKNOWN)\n", (fn / "current_memory_partition").read_text())
        assert re.fullmatch(r"[A-Z]{3}(, [A-Z]{3})*\n", (fn / "available_compute_partition").read_text())
        assert re.fullmatch(r"NPS\d(, NPS\d)*\n", (fn / "available_memory_partition").read_text())


def test_switching_snapshot_has_a_package_without_nodes_and_a_blocking_read():
    expect = _expect("amd-switch/cpx-switching")
    faults = json.loads((SYNTH / "amd-switch/cpx-switching/faults.json").read_text())
    empty = [p["bdf"] for p in expect["packages"] if not p["kfd_nodes"]]
    assert empty == ["0000:65:00.0"]
    assert [f["behaviour"] for f in faults["reads"]] == ["blocks"]
    assert faults["reads"][0]["path"].endswith("0000:65:00.0/current_compute_partition")
    assert (SYNTH / "amd-switch/cpx-switching/root" / faults["reads"][0]["path"]).is_file()


def test_cpx_partitions_keep_the_captured_properties_of_their_package():
    real = REAL / "ROCm__k8s-device-plugin/testdata/topo-mi300-cpx/topology/nodes"
    captured = {_props(n / "properties")["location_id"]: _props(n / "properties") for n in real.iterdir()}
    topo = SYNTH / "amd-switch/cpx-switching/root" / KFD / "nodes"
    cpx = [_props(n / "properties") for n in topo.iterdir() if _props(n / "properties").get("num_xcc") == "1"]
    assert len(cpx) == 24
    for props in cpx:
        real_props = captured[props["location_id"]]
        same = {k for k in real_props if k not in {"io_links_count", "p2p_links_count", "simd_id_base"}}
        assert {k: props[k] for k in same} == {k: real_props[k] for k in same}


# --------------------------------------------------------------------------- PCIe links


LINK_SETS = [s for s in SETS if s.startswith("pcie-link/")]
SPEED = re.compile(r"(\d+(?:\.\d+)?) GT/s(?: PCIe)?|Unknown(?: speed)?")


def _link(fn: Path) -> tuple[int, int, str, str]:
    return (
        int((fn / "current_link_width").read_text()),
        int((fn / "max_link_width").read_text()),
        (fn / "current_link_speed").read_text().removesuffix("\n"),
        (fn / "max_link_speed").read_text().removesuffix("\n"),
    )


@pytest.mark.parametrize("name", LINK_SETS)
def test_link_files_have_kernel_formats_and_expect_names_the_degraded(name):
    root = SYNTH / name / "root"
    links = {fn.name: _link(fn) for fn in (root / "sys/bus/pci/devices").iterdir()}
    for cur, top, cur_speed, max_speed in links.values():
        assert SPEED.fullmatch(cur_speed)
        assert SPEED.fullmatch(max_speed)
        assert 0 <= cur <= 63
        assert 0 < top <= 32 or top in (63, 255)
    expect = _expect(name)
    if name.endswith("amd-internal-switch"):
        cur, top, _, _ = links[expect["link_device"]]
        assert (cur, top) == tuple(expect["link"]["width"]) == (8, 16)
        assert links[expect["gpu"]][:2] == (16, 16)  # the endpoint alone would look healthy
    else:
        degraded = sorted(b for b, (cur, top, _, _) in links.items() if 0 < cur < top and cur != 63 and top != 63)
        assert degraded == expect["degraded"]


def test_real_captures_cover_the_old_format_and_the_unknown_values():
    """docs/partitions.md §3 relies on these real values; they must stay in the repo."""
    values: dict[str, set[str]] = {
        name: set() for name in ("current_link_speed", "max_link_speed", "current_link_width", "max_link_width")
    }
    # one pass over the 23,000 entries, not one ``rglob`` each: the regular files of those names,
    # links to directories not followed, as rglob does not follow them
    pending = [str(REAL)]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.name in values and entry.is_file(follow_symlinks=False):
                    with open(entry.path) as file:
                        values[entry.name].add(file.read().strip())
    assert {"8 GT/s", "Unknown", "8.0 GT/s PCIe", "16.0 GT/s PCIe"} <= values["current_link_speed"] | values["max_link_speed"]
    assert "0" in values["current_link_width"]
    assert "255" in values["max_link_width"]
