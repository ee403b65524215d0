"""The discovery fault matrix: every fault is a failure or a flag, never fewer devices.

Each fault is applied to a private copy of a fixture root built from the real captures
(``root_copy``) and discovery runs on it. The promise checked for every one of them: the result
is ``discovery-failed`` with errors naming source, path and reason, or an ok inventory with a flag
naming them — and an ok inventory never has fewer devices than the intact root. A retry that
absorbs a transient fault (a node torn down and rebuilt during the walk) must give exactly the
intact inventory.

Files that cannot be read: CI runs as root, who reads any mode, so the faults are things no one
can read as a file — a directory, a dangling symlink, a symlink loop, a FIFO — plus ``chmod 000``
when not root.

Faults *during* the KFD walk (a node vanishing, ``generation_id`` moving) are injected at the
system-call boundary: ``os.listdir`` of ``topology/nodes`` is wrapped so the "kernel" changes the
tree right after the listing, deterministically. A FIFO cannot do it: spurinv opens attributes
with ``O_NONBLOCK`` (so a FIFO where a file should be never hangs discovery), so a FIFO reads as
EOF without a writer and EAGAIN with one; both are faults of their own below.

Text a run must carry into the state file is checked through the CLI after the matrix: a name
under a CDI directory or sysfs that is not UTF-8 (a lone surrogate from ``os.listdir``), a CDI
spec holding a lone surrogate or a 5,000-digit version. Each is a flag or a failure as above, and
the run's state is saved, as valid UTF-8.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hostile
import pytest
import rootbuilder as rb
from hypothesis import given
from hypothesis import strategies as st

from spurinv.inventory.sources import cdispec

TOPOLOGY = rb.KFD_TOPOLOGY
PCI_DEVICES = "sys/bus/pci/devices"
GPU0 = rb.MI300X_BDFS[0]
NVIDIA0 = "0000:07:00.0"  # first GPU of the real jobstats capture (tests/fixtures/real/jobstats)


@dataclass(frozen=True)
class Fault:
    name: str
    fixture: str
    apply: Callable[[Path, Any], object]  # (root, context) → anything kept alive during discovery
    # "failed", "flagged", "recovered" or "switching" (what a partition switch in progress looks
    # like: no inventory, evidence of source "switch"; a failure after switch_timeout)
    expect: str
    source: str = ""
    words: str = ""
    root_only_skip: bool = False  # needs a non-root user (chmod 000)
    category: str = "discovery"  # the summary's row


def node(root: Path, index: int = 0) -> Path:
    return rb.gpu_nodes(root)[index]


def prop_file(root: Path) -> Path:
    return node(root) / "properties"


def pci(root: Path, bdf: str = GPU0) -> Path:
    return rb.pci_device_dir(root, bdf)


def replace_with_dir(path: Path) -> None:
    rb.remove(path.parent, path.name)
    path.mkdir()


def replace_with_file(path: Path) -> None:
    rb.remove(path.parent, path.name)
    path.touch()


def replace_with_link(path: Path, target: str) -> None:
    rb.symlink(path.parent, path.name, target)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def truncate_mid_line(path: Path) -> None:
    lines = path.read_text().split("\n")
    keep = len(lines) // 2
    path.write_text("\n".join(lines[:keep]) + "\n" + lines[keep][: max(1, len(lines[keep]) // 2)])


def fifo(path: Path, writer: bool, ctx: dict[str, Any]) -> None:
    rb.remove(path.parent, path.name)
    os.mkfifo(path)
    if writer:  # a writer holding the FIFO open with data queued: the read sees "80\n", then EAGAIN
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        os.write(fd, b"80\n")
        ctx["close"].append(fd)


def kfd_walk_hook(root: Path, ctx: dict[str, Any], before: Callable[[int], None], after: Callable[[int], None]) -> None:
    """Wrap ``os.listdir`` of ``topology/nodes``: ``before(n)``/``after(n)`` run around the n-th listing."""
    nodes_dir = os.path.realpath(Path(root, TOPOLOGY, "nodes"))
    real = os.listdir
    calls = [0]

    def listdir(path: Any = ".") -> list[str]:
        if os.path.realpath(path) != nodes_dir:
            return real(path)
        calls[0] += 1
        before(calls[0])
        names = real(path)
        after(calls[0])
        return names

    ctx["monkeypatch"].setattr(os, "listdir", listdir)


def vanish(root: Path, ctx: dict[str, Any], returns: bool) -> None:
    gone = node(root)
    parked = root / "parked-node"

    def after(call: int) -> None:
        if call == 1:
            gone.rename(parked)  # torn down right after the listing named it

    def before(call: int) -> None:
        if call == 2 and returns:
            parked.rename(gone)  # rebuilt before the retry

    kfd_walk_hook(root, ctx, before, after)


def generation_moves(root: Path, ctx: dict[str, Any], every_walk: bool) -> None:
    path = Path(root, TOPOLOGY, "generation_id")

    def after(call: int) -> None:
        if every_walk or call == 1:
            path.write_text(f"{int(path.read_text()) + 1}\n")

    kfd_walk_hook(root, ctx, lambda _call: None, after)


def cdi_spec(root: Path, name: str = "etc/cdi/amd.json") -> Path:
    return Path(root, name)


def amd_cdi_drop_first(root: Path) -> None:
    import json

    spec = json.loads(cdi_spec(root).read_text())
    spec["devices"] = [d for d in spec["devices"] if d["name"] != "0"]
    cdi_spec(root).write_text(json.dumps(spec))


def amd_cdi_add(root: Path, device: dict[str, Any]) -> None:
    import json

    spec = json.loads(cdi_spec(root).read_text())
    spec["devices"].append(device)
    cdi_spec(root).write_text(json.dumps(spec))


def chmod_000(path: Path) -> None:
    path.chmod(0)


# --- links out of --root, one function under two spellings, absurd sizes, YAML aliases


def outside_copy(root: Path, link: Path, name: str) -> Path:
    """Point ``link`` (absolute) at a copy of its target's files *outside* the root: a container's
    ``--root /host`` whose links resolve into the container. Before the fix this read cleanly."""
    inside = Path(os.path.realpath(link))
    outside = root.parent / name
    if inside.name == "kfd":
        shutil.copytree(inside, outside, symlinks=True)
    else:
        outside.mkdir()
        for entry in inside.iterdir():
            if entry.is_file() and not entry.is_symlink():
                shutil.copyfile(entry, outside / entry.name)
    replace_with_link(link, str(outside))
    return outside


def second_spelling(root: Path, bdf: str, nvidia: bool) -> None:
    """The same PCI function listed again as ``00000000:…`` (an 8-digit domain)."""
    long = "0000" + bdf
    os.symlink(os.readlink(Path(root, PCI_DEVICES, bdf)), Path(root, PCI_DEVICES, long))
    if nvidia:
        text = Path(root, NV_INFO).read_text().replace(bdf, long)
        rb.write(root, f"proc/driver/nvidia/gpus/{long}/information", text)


def many_accelerators(root: Path, count: int) -> None:
    for i in range(count):
        function = Path(root, PCI_DEVICES, f"0001:{i >> 8:02x}:{(i >> 3) & 0x1F:02x}.{i & 7}")
        function.mkdir()
        for name, value in (("class", "0x030000"), ("vendor", "0x8086"), ("device", "0x56c0")):
            (function / name).write_text(value + "\n")


ALIAS_SPEC = """cdiVersion: "0.6.0"
kind: example.com/fpga
devices:
- name: a
  containerEdits: &edits
    deviceNodes: [{path: /dev/fpga0}]
- name: b
  containerEdits: *edits
"""


def alias_bomb(uses: int, nodes: int) -> str:
    """An anchor reused ``uses`` times: ``uses`` × ``nodes`` paths once expanded."""
    paths = ", ".join(f"{{path: /dev/fpga{i}}}" for i in range(nodes))
    devices = "".join(f"- name: d{i}\n  containerEdits: {{deviceNodes: *n}}\n" for i in range(uses))
    return f'cdiVersion: "0.6.0"\nkind: example.com/fpga\nx-nodes: &n [{paths}]\ndevices:\n{devices}'


SPX, CPX, VEGA, NV, NVCDI = "mi300x-spx", "mi300x-cpx", "vega10", "nvidia-8", "nvidia-cdi"
HOSTILE = "hostile sysfs"
ONLINE, MEMINFO = "sys/devices/system/cpu/online", "proc/meminfo"
NV_INFO = f"proc/driver/nvidia/gpus/{NVIDIA0}/information"

FAULTS = [
    # --- KFD topology: files that cannot be read as files
    Fault("kfd generation_id is a directory", SPX, lambda r, c: replace_with_dir(Path(r, TOPOLOGY, "generation_id")),
          "failed", "kfd", "generation_id"),
    Fault("kfd generation_id is a dangling symlink", SPX,
          lambda r, c: replace_with_link(Path(r, TOPOLOGY, "generation_id"), "gone"), "failed", "kfd", "generation_id"),
    Fault("kfd generation_id is a FIFO without a writer", SPX,
          lambda r, c: fifo(Path(r, TOPOLOGY, "generation_id"), False, c), "failed", "kfd", "not a regular file"),
    Fault("kfd generation_id is a FIFO with a writer", SPX,
          lambda r, c: fifo(Path(r, TOPOLOGY, "generation_id"), True, c), "failed", "kfd", "generation_id"),
    Fault("kfd generation_id is garbage", SPX, lambda r, c: Path(r, TOPOLOGY, "generation_id").write_text("eighty\n"),
          "failed", "kfd", "not an integer"),
    Fault("kfd properties is a directory", SPX, lambda r, c: replace_with_dir(prop_file(r)), "failed", "kfd", "properties"),
    Fault("kfd properties is a dangling symlink", SPX, lambda r, c: replace_with_link(prop_file(r), "nowhere"),
          "failed", "kfd", "symlink"),
    Fault("kfd properties is a symlink loop", SPX, lambda r, c: replace_with_link(prop_file(r), "properties"),
          "failed", "kfd", "symlink"),
    Fault("kfd properties is chmod 000", SPX, lambda r, c: chmod_000(prop_file(r)), "failed", "kfd", "properties",
          root_only_skip=True),
    Fault("kfd properties is empty", SPX, lambda r, c: prop_file(r).write_text(""), "failed", "kfd", "empty"),
    Fault("kfd properties truncated mid-line", SPX, lambda r, c: truncate_mid_line(prop_file(r)), "failed", "kfd",
          "expected 'key <decimal>'"),
    Fault("kfd properties truncated at a line end", SPX,
          lambda r, c: prop_file(r).write_text("".join(prop_file(r).read_text().splitlines(True)[:2])),
          "failed", "kfd", "KFD has no node"),
    Fault("kfd properties is binary garbage", SPX, lambda r, c: prop_file(r).write_bytes(b"\xff\xfe\x00garbage\x81"),
          "failed", "kfd", "not UTF-8"),
    Fault("kfd properties has a NUL byte", SPX, lambda r, c: edit(prop_file(r), "domain 0", "domain 0\x00"),
          "failed", "kfd", "line"),
    Fault("kfd properties lacks location_id", SPX, lambda r, c: rb.set_property(node(r), "location_id", None),
          "failed", "kfd", "missing location_id"),
    Fault("kfd properties lacks simd_count", SPX, lambda r, c: rb.set_property(node(r), "simd_count", None),
          "switching", "switch", "KFD has no node"),
    Fault("kfd properties non-numeric value", SPX, lambda r, c: rb.set_property(node(r), "drm_render_minor", "128a"),
          "failed", "kfd", "expected 'key <decimal>'"),
    Fault("kfd properties negative value", SPX, lambda r, c: rb.set_property(node(r), "location_id", -1280),
          "failed", "kfd", "expected 'key <decimal>'"),
    Fault("kfd properties value overflows 64 bits", SPX, lambda r, c: rb.set_property(node(r), "unique_id", 1 << 64),
          "failed", "kfd", "overflows"),
    Fault("kfd properties value of 5000 digits", SPX, lambda r, c: rb.set_property(node(r), "unique_id", "9" * 5000),
          "failed", "kfd", "overflows"),
    Fault("kfd properties duplicate key", SPX, lambda r, c: prop_file(r).write_text(prop_file(r).read_text() + "domain 0\n"),
          "failed", "kfd", "duplicate"),
    Fault("kfd properties larger than an attribute can be", SPX,
          lambda r, c: prop_file(r).write_text(prop_file(r).read_text() + "x 1\n" * 300000), "failed", "kfd", "larger than"),
    Fault("kfd device_id differs from PCI", SPX, lambda r, c: rb.set_property(node(r), "device_id", 0x1234),
          "failed", "kfd", "PCI says"),
    Fault("kfd GPU node removed", SPX, lambda r, c: shutil.rmtree(node(r)), "switching", "switch", "KFD has no node"),
    Fault("kfd node directory is a symlink loop", SPX, lambda r, c: (shutil.rmtree(node(r)), os.symlink("2", node_path(r, 2))),  # type: ignore[func-returns-value]  # two steps as a tuple
          "failed", "kfd", "symlink"),
    Fault("kfd node vanishes mid-walk", SPX, lambda r, c: vanish(r, c, returns=False), "switching", "switch",
          "KFD has no node"),
    Fault("kfd node vanishes mid-walk and comes back", SPX, lambda r, c: vanish(r, c, returns=True), "recovered"),
    Fault("kfd generation_id moves on every walk", SPX, lambda r, c: generation_moves(r, c, every_walk=True),
          "switching", "switch", "kept changing"),
    Fault("kfd generation_id moves during one walk", SPX, lambda r, c: generation_moves(r, c, every_walk=False),
          "recovered"),
    Fault("kfd nodes/ is a file", SPX, lambda r, c: replace_with_file(Path(r, TOPOLOGY, "nodes")), "failed", "kfd", "nodes"),
    Fault("kfd topology missing while PCI shows amdgpu GPUs", SPX, lambda r, c: shutil.rmtree(Path(r, rb.KFD_DIR)),
          "switching", "switch", "PCI shows 8 AMD GPUs"),
    Fault("sys/class/kfd is a file", SPX, lambda r, c: (rb.remove(r, "sys/class/kfd"), rb.write(r, "sys/class/kfd", "")),  # type: ignore[func-returns-value]  # two steps as a tuple
          "failed", "kfd", "not a directory"),
    Fault("kfd mem bank lacks size_in_bytes", VEGA,
          lambda r, c: rb.set_property(node(r) / "mem_banks" / "0", "size_in_bytes", None), "failed", "kfd", "size_in_bytes"),
    Fault("cpx partition missing", CPX, lambda r, c: shutil.rmtree(node(r, 3)), "switching", "switch", "8 partitions expected"),
    Fault("cpx two nodes claim one partition", CPX,
          lambda r, c: rb.set_property(node(r, 1), "location_id", rb.read_properties(node(r, 0))["location_id"]),
          "failed", "kfd", "both claim"),
    # --- PCI: GPUs the driver does not show, devices off the bus
    Fault("amd gpu without a driver", SPX,
          lambda r, c: (rb.remove(pci(r), "driver"), edit(pci(r) / "uevent", "DRIVER=amdgpu\n", "")),  # type: ignore[func-returns-value]  # two steps as a tuple
          "switching", "switch", "has no driver"),
    Fault("amd gpu bound to vfio-pci", SPX,
          lambda r, c: replace_with_link(pci(r) / "driver", "../../../bus/pci/drivers/vfio-pci"), "failed", "pci", "vfio-pci"),
    Fault("pci vendor reads all ones (fell off the bus)", SPX, lambda r, c: (pci(r) / "vendor").write_text("0xffff\n"),
          "failed", "pci", "not responding"),
    Fault("pci config space reads all ones", SPX,
          lambda r, c: [(pci(r) / f).write_text(v) for f, v in (("vendor", "0xffff\n"), ("class", "0xffffff\n"))],
          "failed", "pci", "not responding"),
    Fault("pci class is garbage", SPX, lambda r, c: (pci(r) / "class").write_text("0xzz\n"), "failed", "pci", "class"),
    Fault("pci vendor file missing", SPX, lambda r, c: (pci(r) / "vendor").unlink(), "failed", "pci", "vendor"),
    Fault("pci numa_node is garbage", SPX, lambda r, c: (pci(r) / "numa_node").write_text("zero\n"), "failed", "pci",
          "numa_node"),
    Fault("pci device link dangles", SPX, lambda r, c: replace_with_link(Path(r, PCI_DEVICES, GPU0), "../../../devices/gone"),
          "failed", "pci", GPU0),
    Fault("pci device link is a symlink loop", SPX, lambda r, c: replace_with_link(Path(r, PCI_DEVICES, GPU0), GPU0),
          "failed", "pci", GPU0),
    Fault("pci devices/ has a non-address entry", SPX, lambda r, c: Path(r, PCI_DEVICES, "garbage").mkdir(),
          "failed", "pci", "not a PCI address"),
    Fault("pci devices/ is a file", SPX, lambda r, c: replace_with_file(Path(r, PCI_DEVICES)),
          "failed", "pci", "devices"),
    Fault("gpu gone from the PCI bus, DRM still shows it", SPX, lambda r, c: Path(r, PCI_DEVICES, GPU0).unlink(),
          "failed", "drm", "which the PCI bus does not show"),
    Fault("compute partition file is a directory", SPX, lambda r, c: replace_with_dir(pci(r) / "current_compute_partition"),
          "failed", "pci", "current_compute_partition"),
    # --- DRM
    Fault("drm render node KFD names is missing", SPX, lambda r, c: Path(r, "sys/class/drm/renderD128").unlink(),
          "failed", "drm", "renderD128"),
    Fault("drm device link dangles", SPX, lambda r, c: replace_with_link(pci(r) / "drm" / "renderD128" / "device", "../gone"),
          "failed", "drm", "renderD128"),
    Fault("drm device link is a symlink loop", SPX,
          lambda r, c: replace_with_link(pci(r) / "drm" / "renderD128" / "device", "device"), "failed", "drm", "renderD128"),
    Fault("drm device link leaves the root", SPX, lambda r, c: replace_with_link(pci(r) / "drm" / "renderD128" / "device", "/"),
          "failed", "drm", "renderD128"),
    Fault("drm class dir is a file", SPX, lambda r, c: replace_with_file(Path(r, "sys/class/drm")),
          "failed", "drm", "drm"),
    # --- NVIDIA
    Fault("nvidia function without a /proc entry", NV, lambda r, c: shutil.rmtree(Path(r, NV_INFO).parent),
          "failed", "nvidia", "the NVIDIA driver does not"),
    Fault("nvidia information lacks Device Minor", NV, lambda r, c: edit(Path(r, NV_INFO), "Device Minor", "Device Mirror"),
          "failed", "nvidia", "Device Minor"),
    Fault("nvidia information is binary garbage", NV, lambda r, c: Path(r, NV_INFO).write_bytes(b"\x00\xff" * 64),
          "failed", "nvidia", "information"),
    Fault("nvidia information names another bus location", NV, lambda r, c: edit(Path(r, NV_INFO), NVIDIA0, "0000:08:00.0"),
          "failed", "nvidia", "does not match"),
    Fault("nvidia information is a directory", NV, lambda r, c: replace_with_dir(Path(r, NV_INFO)), "failed", "nvidia",
          "information"),
    Fault("nvidia Device Minor overflows", NV,
          lambda r, c: edit(Path(r, NV_INFO), "Device Minor: \t 2", "Device Minor: \t 99999999"),
          "failed", "nvidia", "out of range"),
    Fault("nvidia driver lists a GPU not on the bus", NV,
          lambda r, c: rb.write(r, "proc/driver/nvidia/gpus/0000:ff:00.0/information",
                                rb.nvidia_information({"model": "X", "irq": 1, "uuid": "GPU-x", "vbios": "1",
                                                       "bdf": "0000:ff:00.0", "minor": 9})),
          "failed", "nvidia", "not on the PCI bus"),
    Fault("nvidia gpu fell off the bus (Xid 79)", NV, lambda r, c: (pci(r, NVIDIA0) / "vendor").write_text("0xffff\n"),
          "failed", "pci", "not responding"),
    # --- host
    Fault("meminfo without MemTotal", SPX, lambda r, c: edit(Path(r, MEMINFO), "MemTotal:", "MemTotals:"), "failed", "memory",
          "no MemTotal"),
    Fault("meminfo is empty", SPX, lambda r, c: Path(r, MEMINFO).write_text(""), "failed", "memory", "no MemTotal"),
    Fault("meminfo MemTotal is not a number", SPX, lambda r, c: edit(Path(r, MEMINFO), "1584918204", "15849l8204"),
          "failed", "memory", "not an integer"),
    Fault("meminfo MemTotal overflows", SPX, lambda r, c: edit(Path(r, MEMINFO), "1584918204", str(1 << 64)),
          "failed", "memory", "out of range"),
    Fault("meminfo MemTotal in MB", SPX, lambda r, c: edit(Path(r, MEMINFO), "1584918204 kB", "1547771 MB"),
          "failed", "memory", "unit"),
    Fault("meminfo MemTotal is 0", SPX, lambda r, c: edit(Path(r, MEMINFO), "1584918204", "0"), "failed", "memory", "is 0"),
    Fault("meminfo is a directory", SPX, lambda r, c: replace_with_dir(Path(r, MEMINFO)), "failed", "memory", "meminfo"),
    Fault("cpu online has a reversed range", SPX, lambda r, c: Path(r, ONLINE).write_text("0-95,191-96\n"), "failed", "cpus",
          "bad CPU range"),
    Fault("cpu online has a garbage range", SPX, lambda r, c: Path(r, ONLINE).write_text("0-x\n"), "failed", "cpus",
          "bad CPU range"),
    Fault("cpu online has non-ASCII digits", SPX, lambda r, c: Path(r, ONLINE).write_text("0-\u00b2\n"), "failed", "cpus",
          "bad CPU range"),
    Fault("cpu online has a 5000-digit number", SPX, lambda r, c: Path(r, ONLINE).write_text("9" * 5000 + "\n"), "failed",
          "cpus", "bad CPU range"),
    Fault("cpu online range absurdly large", SPX, lambda r, c: Path(r, ONLINE).write_text("0-99999999\n"), "failed", "cpus",
          "bad CPU range"),
    Fault("cpu online is empty", SPX, lambda r, c: Path(r, ONLINE).write_text("\n"), "failed", "cpus", "empty"),
    Fault("cpu online is a dangling symlink", SPX, lambda r, c: replace_with_link(Path(r, ONLINE), "gone"), "failed", "cpus",
          "online"),
    # --- CDI: problems are flags (the hardware did not change), never fewer devices
    Fault("cdi spec is invalid JSON", SPX, lambda r, c: cdi_spec(r).write_text('{"cdiVersion": "0.6.0", "kind": '),
          "flagged", "cdi", "invalid JSON"),
    Fault("cdi spec is invalid YAML", NVCDI, lambda r, c: cdi_spec(r, "etc/cdi/nvidia.yaml").write_text("kind: [unclosed\n"),
          "flagged", "cdi", "invalid YAML"),
    Fault("cdi YAML spec with an impossible date", NVCDI,
          lambda r, c: cdi_spec(r, "etc/cdi/nvidia.yaml").write_text("cdiVersion: 2001-02-30\n"), "flagged", "cdi",
          "nvidia.yaml"),
    Fault("cdi JSON spec nested 100000 deep", SPX, lambda r, c: cdi_spec(r).write_text("[" * 100000 + "]" * 100000),
          "flagged", "cdi", "amd.json"),
    Fault("cdi spec is not UTF-8", SPX, lambda r, c: cdi_spec(r).write_bytes(b"\xff\xfe{}"), "flagged", "cdi", "UTF-8"),
    Fault("cdi spec larger than 1 MiB", SPX, lambda r, c: cdi_spec(r).write_text(" " * (5 << 20)), "flagged", "cdi",
          "larger than"),
    Fault("cdi spec of an unsupported version", SPX, lambda r, c: edit(cdi_spec(r), '"0.6.0"', '"9.0.0"'), "flagged", "cdi",
          "unsupported cdiVersion"),
    Fault("cdi duplicate names across directories", SPX,
          lambda r, c: rb.write(r, "var/run/cdi/amd.json", cdi_spec(r).read_text()), "flagged", "cdi", "duplicate CDI device"),
    Fault("cdi duplicate names within a spec", SPX, lambda r, c: amd_cdi_add(r, {"name": "0"}), "flagged", "cdi",
          "duplicate device name"),
    Fault("cdi spec names a device the hardware lacks", SPX,
          lambda r, c: amd_cdi_add(r, {"name": "ghost", "containerEdits": {"deviceNodes": [{"path": "/dev/dri/renderD250"}]}}),
          "flagged", "cdi", "which no discovered GPU has"),
    Fault("cdi spec leaves a GPU out (stale)", SPX, lambda r, c: amd_cdi_drop_first(r), "flagged", "cdi", "no CDI device for"),
    Fault("cdi spec is a symlink loop", SPX, lambda r, c: os.symlink("loop.json", cdi_spec(r, "etc/cdi/loop.json")),
          "flagged", "cdi", "loop.json"),
    Fault("cdi spec is a directory", SPX, lambda r, c: cdi_spec(r, "etc/cdi/dir.json").mkdir(), "flagged", "cdi", "dir.json"),
    Fault("cdi directory is a file", SPX, lambda r, c: rb.write(r, "var/run/cdi", "not a directory"), "flagged", "cdi",
          "var/run/cdi"),
    # --- hostile sysfs, procfs and CDI under --root
    Fault("pci device link leaves the root", SPX, lambda r, c: outside_copy(r, Path(r, PCI_DEVICES, GPU0), "elsewhere"),
          "failed", "pci", "leaves the root", category=HOSTILE),
    Fault("kfd class link leaves the root", SPX, lambda r, c: outside_copy(r, Path(r, "sys/class/kfd/kfd"), "elsewhere"),
          "failed", "kfd", "leaves the root", category=HOSTILE),
    Fault("pci function listed under two spellings (nvidia)", NV, lambda r, c: second_spelling(r, NVIDIA0, True),
          "failed", "pci", "the same PCI function as", category=HOSTILE),
    Fault("pci function listed under two spellings (amd)", SPX, lambda r, c: second_spelling(r, GPU0, False),
          "failed", "pci", "the same PCI function as", category=HOSTILE),
    Fault("1,028 accelerator functions on the bus", SPX, lambda r, c: many_accelerators(r, 1020),
          "failed", "pci", "beyond 1024, the physical limit", category=HOSTILE),
    Fault("cpu online 0-1048576 repeated 200 times", SPX,
          lambda r, c: Path(r, ONLINE).write_text(",".join(["0-1048576"] * 200)),
          "failed", "cpus", "beyond 65536 CPUs", category=HOSTILE),
    Fault("cpu online is a 1 MB list of overlapping ranges", SPX,
          lambda r, c: Path(r, ONLINE).write_text(",".join(["0-65535"] * 131000)),
          "failed", "cpus", "overlap", category=HOSTILE),
    Fault("meminfo MemTotal of 2^64-1 kB", SPX, lambda r, c: edit(Path(r, MEMINFO), "1584918204", str((1 << 64) - 1)),
          "failed", "memory", "beyond 1 PiB", category=HOSTILE),
    Fault("cdi YAML spec with an alias", NVCDI, lambda r, c: rb.write(r, "etc/cdi/fpga.yaml", ALIAS_SPEC),
          "flagged", "cdi", "alias", category=HOSTILE),
    Fault("cdi YAML alias bomb (one anchor used 2,000 times)", NVCDI,
          lambda r, c: rb.write(r, "etc/cdi/bomb.yaml", alias_bomb(2000, 2000)), "flagged", "cdi", "alias", category=HOSTILE),
]  # fmt: skip


def node_path(root: Path, index: int) -> Path:
    return Path(root, TOPOLOGY, "nodes", str(index))


@pytest.fixture(scope="module")
def intact(built: Callable[[str], Path]) -> Callable[[str], dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}

    def get(name: str) -> dict[str, Any]:
        if name not in cache:
            cache[name] = hostile.devices(built(name))
            assert cache[name]["ok"], cache[name]["errors"]
        return cache[name]

    return get


def test_the_matrix_is_large_and_names_are_unique():
    assert len(FAULTS) >= 30
    assert len({fault.name for fault in FAULTS}) == len(FAULTS)


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
def test_fault_is_a_failure_or_a_flag_never_fewer_devices(fault, root_copy, intact, monkeypatch, ledger):
    if fault.root_only_skip and os.geteuid() == 0:
        ledger.record("discovery", fault.name, "skipped (root reads mode 000)")
        pytest.skip("runs as root, who can read a mode-000 file; the directory/symlink/FIFO faults cover root")
    good = intact(fault.fixture)
    root = root_copy(fault.fixture, times=False)  # discovery reads no timestamps
    ctx: dict[str, Any] = {"monkeypatch": monkeypatch, "close": []}
    fault.apply(root, ctx)
    started = time.monotonic()
    try:
        result = hostile.devices(root)
    finally:
        monkeypatch.undo()
        for fd in ctx["close"]:
            os.close(fd)
    seconds = time.monotonic() - started

    inventory = result["inventory"]
    fewer = result["ok"] and len(inventory["devices"]) < len(good["inventory"]["devices"])
    switching = not result["ok"] and all(error["source"] == "switch" for error in result["errors"])
    outcome = "switching" if switching else "failed" if not result["ok"] else ("flagged" if result["flags"] else "ok")
    if fault.expect == "recovered" and result["ok"]:
        outcome = "recovered" if inventory["fingerprint"] == good["inventory"]["fingerprint"] else "ok, different"
    ledger.record(fault.category, fault.name, outcome, lost=fewer)

    assert not fewer, f"an ok inventory with fewer devices: {len(inventory['devices'])}"
    assert seconds < 5, "a fault must not slow discovery down (no blocking reads)"
    assert outcome == fault.expect, (result["errors"], result["flags"])
    problems = result["errors"] if fault.expect in ("failed", "switching") else result["flags"]
    if fault.expect in ("failed", "switching"):
        assert inventory is None
    if fault.expect == "recovered":
        return
    for problem in problems:
        assert problem["source"], problem
        assert problem["reason"], problem
        assert problem["path"].startswith(("/", str(root))), f"path must be a path: {problem}"
    assert any(
        problem["source"] == fault.source and (fault.words in problem["reason"] or fault.words in problem["path"])
        for problem in problems
    ), problems
    if fault.expect == "flagged":
        assert [d["id"] for d in inventory["devices"]] == [d["id"] for d in good["inventory"]["devices"]]


def test_a_non_ascii_digit_kfd_node_name_does_not_crash_discovery(root_copy, intact):
    """``"²".isdigit()`` is True but ``int("²")`` raises: a hostile root must not crash the walk."""
    root = root_copy(SPX, times=False)
    node_path(root, 2).with_name("\u00b2").mkdir()

    result = hostile.devices(root)

    assert result["ok"]
    assert result["inventory"]["fingerprint"] == intact(SPX)["inventory"]["fingerprint"]


# --- names that are not UTF-8 under --root, lone surrogates and 5,000 digits in a CDI spec


def _non_utf8(directory: Path, stem: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + stem


# A bad CDI spec is a flag (the run goes on); a sysfs name that is not a PCI address fails the
# discovery (74, as an ASCII one does), but the failed reading is saved and the run says why.
EXPECTED = {"cdi-file": 0, "sysfs-dangling-link": 74}


@pytest.mark.parametrize("where", sorted(EXPECTED))
def test_a_name_that_is_not_utf8_is_escaped_and_the_run_saves(where, root_copy, state_path, spurinv_here):
    """``os.listdir`` gives ``bad\\udcff.json``; the problem naming it reached the state and the
    output, and every run exited 70 (PydanticSerializationError) with nothing saved."""
    root = root_copy("mi300x-spx")
    if where == "cdi-file":
        (root / "etc" / "cdi").mkdir(parents=True, exist_ok=True)
        with open(_non_utf8(root / "etc" / "cdi", b"bad\xff.json"), "w") as spec:
            spec.write("{not json")
    else:
        os.symlink(b"../../../devices/nowhere", _non_utf8(root / "sys" / "bus" / "pci" / "devices", b"0000:ff:00.\xff"))

    discovered = spurinv_here("discover", "--json", "--root", root)
    ran = spurinv_here("refresh", "--json", "--root", root, "--state", state_path)

    assert ran.code == EXPECTED[where], ran
    assert discovered.code in (0, 65, 74), discovered
    assert "Traceback" not in ran.err + discovered.err
    saved = state_path.read_bytes().decode("utf-8")  # saved, and valid UTF-8
    assert "\\xff" in saved, saved[:2000]
    assert "\\xff" in discovered.out


@given(st.text())
def test_escaped_text_is_always_valid_utf8_and_plain_text_is_untouched(text):
    from spurinv.inventory.sources.status import escaped

    shown = escaped(text)
    shown.encode("utf-8")
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        assert shown == text


SURROGATE_SPECS = {
    "json-path": (
        '{"cdiVersion":"0.6.0","kind":"x.com/g","devices":[{"name":"a",'
        '"containerEdits":{"deviceNodes":[{"path":"/dev/\\udc00"}]}}]}',
        False,
    ),
    "json-key": ('{"cdiVersion":"0.6.0","kind":"x.com/g","\\ud800":1,"devices":[{"name":"a"}]}', False),
    "yaml-path": (
        'cdiVersion: "0.6.0"\nkind: x.com/h\ndevices:\n- name: a\n  containerEdits:\n'
        '    deviceNodes:\n    - path: "/dev/\\udc00"\n',
        True,
    ),
    "yaml-name": ('cdiVersion: "0.6.0"\nkind: x.com/h\ndevices:\n- name: "\\ud800"\n', True),
    "version-digits": ('{"cdiVersion":"0.6.%s","kind":"x.com/g","devices":[{"name":"a"}]}' % ("0" * 5000), False),
}


@pytest.mark.parametrize("pure", [False, True], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize("case", sorted(SURROGATE_SPECS))
def test_a_cdi_spec_with_a_lone_surrogate_or_a_huge_number_is_refused_not_kept(case, pure, monkeypatch):
    """``"\\udc00"`` is valid JSON (and PyYAML's pure-Python scanner makes one of it): a device
    path holding one reached the state file and the output, and every run exited 70."""
    text, yaml_format = SURROGATE_SPECS[case]
    if pure:
        import yaml

        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)  # a PyYAML without libyaml
    with pytest.raises(cdispec.SpecError) as raised:
        cdispec.parse_spec(text, yaml_format)
    message = str(raised.value)
    message.encode("utf-8")  # the message itself is valid text
    assert "\\u" not in message or "surrogate" in message
    assert len(message) < 200


@pytest.mark.parametrize("case", ["json-path", "yaml-path", "version-digits"])
def test_a_cdi_spec_with_a_lone_surrogate_is_a_flag_naming_the_file_and_the_run_goes_on(
    case, root_copy, state_path, spurinv_here
):
    root = root_copy("mi300x-spx")
    text, yaml_format = SURROGATE_SPECS[case]
    spec = root / "etc" / "cdi" / ("hostile.yaml" if yaml_format else "hostile.json")
    spec.write_text(text)

    discovered = spurinv_here("discover", "--json", "--root", root)
    ran = spurinv_here("refresh", "--json", "--root", root, "--state", state_path)

    assert discovered.code == 0, discovered
    flags = [flag for flag in json.loads(discovered.out)["flags"] if flag["path"].endswith(spec.name)]
    assert flags, json.loads(discovered.out)["flags"]
    assert flags[0]["source"] == "cdi", flags
    assert ran.code == 0, ran
    assert json.loads(state_path.read_text())  # saved, and valid UTF-8
    assert "Traceback" not in ran.err + discovered.err
