"""NVIDIA MIG instances as partitions, read from the driver's capability tree without NVML:
the synthetic layouts of tests/fixtures/synthetic/nvidia-mig against their expect.json, the CDI
cross-check, failures that must never read as "no MIG", and a layout change through the
controller path (registered when idle, drained when busy)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import rootbuilder as rb
from hypothesis import given
from hypothesis import strategies as st
from test_intent import Node  # tests/ is on sys.path

from spurinv.controller.ownership import extra_record
from spurinv.inventory import model
from spurinv.inventory.classify import compare, diff_summary
from spurinv.inventory.discovery import discover
from spurinv.inventory.model import Discovery
from spurinv.inventory.root import Root
from spurinv.inventory.sources.attribute import ReadError
from spurinv.inventory.sources.mig import ci_minor, decode, gi_minor, parse_access

LAYOUTS = ("disabled", "all-1g.10gb", "balanced", "3-instances", "mixed", "multi-ci", "applying")
CAPS = "proc/driver/nvidia/capabilities"


def run(root: Path) -> Discovery:
    return model.discovery(discover(Root(str(root))))


def expect(layout: str) -> dict:
    return json.loads((rb.SYNTHETIC / "nvidia-mig" / f"mig-{layout}" / "expect.json").read_text())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_reads_as_its_compute_instances_or_the_whole_gpu(built, tmp_path, layout):
    """Identity ``<BDF>/mig<gi>.<ci>`` per compute instance; a GPU without one stays whole
    (mig-applying without its half-built GPU instance, which makes it a switch in progress)."""
    wanted = expect(layout)
    root = built(f"mig-{layout}")
    if layout == "applying":
        root = _copy(built, layout, tmp_path)
        shutil.rmtree(root / CAPS / "gpu0/mig/gi10")
        shutil.rmtree(root / "etc/cdi")  # its stale spec names MIG devices of the cleared GPUs: a switch

    result = run(root)

    assert result["ok"], result["errors"]
    assert result["inventory"] is not None
    ids = [device["id"] for device in result["inventory"]["devices"]]
    whole = [gpu["bdf"] for gpu in wanted["gpus"] if not gpu["mig_devices"]]
    mig = [device["id"] for gpu in wanted["gpus"] for device in gpu["mig_devices"]]
    assert sorted(ids) == sorted(whole + mig)
    assert len(mig) == wanted["mig_device_count"]
    for device in result["inventory"]["devices"]:
        if device["id"] in mig:
            assert device["partition"] is not None
            assert (device["partition"]["compute"], device["partition"]["memory"]) == ("MIG", None)
            assert device["model"] == "h100-80gb-hbm3"  # no NVML: the type is the GPU's model
            assert device["unique_id"] is None
        else:
            assert device["partition"] is None


def test_compute_instances_are_counted_not_gpu_instances(built):
    """mig-multi-ci: 2 GPU instances, 4 compute instances per GPU → 32 devices."""
    inventory = run(built("mig-multi-ci"))["inventory"]
    assert inventory is not None
    assert 32 == len(inventory["devices"])
    assert 16 == len({device["id"].rsplit(".", 1)[0] for device in inventory["devices"]})


@pytest.mark.parametrize("layout", ["all-1g.10gb", "balanced", "3-instances", "mixed", "multi-ci"])
def test_cdi_names_join_by_the_nvidia_cap_minors_not_the_nvml_index(built, layout):
    """Each MIG device carries its ``i:j`` and ``MIG-…`` names; ``i`` is NVML's index (PCI order),
    which differs from the device minor; no flag on a spec that matches."""
    wanted = {d["id"]: gpu["nvml_index"] for gpu in expect(layout)["gpus"] for d in gpu["mig_devices"]}

    result = run(built(f"mig-{layout}"))

    assert result["flags"] == []
    assert result["inventory"] is not None
    for device in result["inventory"]["devices"]:
        if device["id"] not in wanted:
            continue
        index_names = [n for n in device["cdi_names"] if ":" in n.split("=", 1)[1]]
        assert len(index_names) == 1, device["cdi_names"]
        assert index_names[0].split("=", 1)[1].split(":")[0] == str(wanted[device["id"]])
        assert any(n.startswith("nvidia.com/gpu=MIG-") for n in device["cdi_names"])


def test_a_layout_being_applied_is_a_switch_and_a_stale_spec_only_a_flag(built):
    """mig-applying: GI 10 of 0000:48:00.0 has no compute instance (mig-parted between creating
    the GI and its CI): a switch in progress, not a failure and not a layout; the CDI spec is the
    old layout's, which is said but never fails anything."""
    result = run(built("mig-applying"))

    assert {error["source"] for error in result["errors"]} == {"switch"}
    assert "GPU instance 10 of 0000:48:00.0 has no compute instance" in result["errors"][0]["reason"]
    reasons = [flag["reason"] for flag in result["flags"]]
    assert any("which no discovered GPU has" in r for r in reasons)
    assert any("stale spec" in r for r in reasons)


def test_gpus_cleared_mid_apply_read_whole_but_the_spec_names_their_mig_devices(built, tmp_path):
    """mig-applying one step later (GI 10 got its compute instance), GPUs 4c…cb still cleared:
    every GPU reads as a layout or whole, but the CDI spec names MIG devices of the cleared ones
    (their nvidia-cap minors decode to their device minors): a switch in progress, never a
    layout to confirm and register."""
    root = _copy(built, "applying", tmp_path)
    ci = root / CAPS / "gpu0/mig/gi10/ci0"
    ci.mkdir()
    (ci / "access").write_text(f"DeviceFileMinor: {ci_minor(0, 10, 0)}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")

    result = run(root)

    assert not result["ok"]
    assert {error["source"] for error in result["errors"]} == {"switch"}
    cleared = {gpu["bdf"] for gpu in expect("applying")["gpus"] if not gpu["mig_devices"]}
    named = {bdf for bdf in cleared if any(f"{bdf} reads whole (no MIG instance) but" in e["reason"] for e in result["errors"])}
    assert named == cleared
    assert all("/dev/nvidia-caps/nvidia-cap" in error["reason"] for error in result["errors"])


@given(st.integers(0, 31), st.integers(0, 14), st.one_of(st.none(), st.integers(0, 7)))
def test_decode_inverts_the_drivers_table(gpu, gi, ci):
    minor = gi_minor(gpu, gi) if ci is None else ci_minor(gpu, gi, ci)
    assert decode(minor) == (gpu, gi, ci)


@pytest.mark.parametrize("minor", [0, 1, 2, 4323, 4324, 10**9])
def test_decode_refuses_minors_outside_the_mig_part_of_the_table(minor):
    assert decode(minor) is None


def test_the_summary_says_mig_and_the_count_per_gpu(built):
    """ "4 GPUs MIG (7→3 each)", the shape of "8 GPUs SPX→CPX (1→8 each)"."""

    def inventory(layout):
        found = run(built(f"mig-{layout}"))["inventory"]
        assert found is not None
        return found

    shrink = diff_summary(compare(inventory("all-1g.10gb"), inventory("3-instances")))
    enable = diff_summary(compare(inventory("disabled"), inventory("mixed")))
    balanced = diff_summary(compare(inventory("balanced"), inventory("3-instances")))

    assert shrink.startswith("8 GPUs MIG (7→3 each)")
    assert enable.startswith("4 GPUs -→MIG (1→7 each)")
    assert "8 GPUs MIG (4→3 each)" in balanced
    assert "h100-80gb-hbm3 32→24" in balanced


def _copy(built, layout, tmp_path):
    return rb.copy_root(built(f"mig-{layout}"), tmp_path / "root")


def test_a_minor_the_driver_would_not_give_fails_the_reading(built, tmp_path):
    """A wrong ``DeviceFileMinor`` is not what the driver writes: a failure, never "0 MIG"."""
    root = _copy(built, "balanced", tmp_path)
    access = root / CAPS / "gpu0/mig/gi3/ci0/access"
    access.write_text("DeviceFileMinor: 999\nDeviceFileMode: 292\nDeviceFileModify: 1\n")

    result = run(root)

    assert not result["ok"]
    assert any("DeviceFileMinor 999" in error["reason"] and "gpu0/gi3/ci0" in error["reason"] for error in result["errors"])


def test_the_drivers_own_table_wins_over_the_formula(built, tmp_path):
    """A future driver may number differently: a minor that ``mig-minors`` lists is accepted."""
    root = _copy(built, "balanced", tmp_path)
    access = root / CAPS / "gpu0/mig/gi3/ci0/access"
    access.write_text("DeviceFileMinor: 5000\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    table = root / "proc/driver/nvidia-caps/mig-minors"
    table.write_text(table.read_text().replace("gpu0/gi3/ci0/access 31\n", "gpu0/gi3/ci0/access 5000\n"))

    result = run(root)

    assert result["ok"], result["errors"]


@pytest.mark.parametrize("name", ["gi15", "gi03", "foo"])
def test_a_gpu_instance_outside_the_drivers_table_fails(built, tmp_path, name):
    root = _copy(built, "balanced", tmp_path)
    (root / CAPS / "gpu0/mig" / name).mkdir()

    result = run(root)

    assert not result["ok"]
    assert any(error["path"].endswith(f"gpu0/mig/{name}") for error in result["errors"])


def test_an_access_file_that_is_a_fifo_fails_without_blocking(built, tmp_path):
    root = _copy(built, "balanced", tmp_path)
    access = root / CAPS / "gpu2/mig/gi2/ci0/access"
    access.unlink()
    os.mkfifo(access)

    result = run(root)

    assert not result["ok"]
    assert any("not a regular file" in error["reason"] for error in result["errors"])


def test_a_node_without_the_capability_tree_has_whole_gpus(built):
    """No ``capabilities`` directory (an old driver): 8 whole GPUs, nothing failed."""
    result = run(built("nvidia-8"))
    assert result["ok"]
    assert result["inventory"] is not None
    assert [d["partition"] for d in result["inventory"]["devices"]] == [None] * 8


def test_the_minor_formula_matches_the_drivers_table():
    table = dict(
        line.split(" ")
        for line in (rb.SYNTHETIC / "nvidia-mig/mig-disabled/root/proc/driver/nvidia-caps/mig-minors").read_text().splitlines()
    )
    for gpu in range(32):
        for gi in range(15):
            assert int(table[f"gpu{gpu}/gi{gi}/access"]) == gi_minor(gpu, gi)
            for ci in range(8):
                assert int(table[f"gpu{gpu}/gi{gi}/ci{ci}/access"]) == ci_minor(gpu, gi, ci)


@given(st.integers(min_value=0, max_value=10**9 - 1), st.integers(0, 511), st.sampled_from(["0", "1"]))
def test_parse_access_reads_the_minor_of_the_drivers_format(minor, mode, modify):
    text = f"DeviceFileMinor: {minor}\nDeviceFileMode: {mode}\nDeviceFileModify: {modify}\n"
    assert parse_access(text, "p") == minor


@given(st.text(max_size=80))
def test_parse_access_refuses_anything_else_with_a_read_error(text):
    try:
        minor = parse_access(text, "p")
    except ReadError as exc:
        path = exc.path
    else:
        path = "p"
        assert text.startswith(f"DeviceFileMinor: {minor}\n")
    assert path == "p"


# --- through the controller --------------------------------------------------------------------


def mig_node(tmp_path, built, **kwargs) -> Node:
    node = Node(tmp_path, built, **kwargs)
    node.roots = {"four": built("mig-balanced"), "three": built("mig-3-instances")}
    node.controller["gres"] = "gpu:h100-80gb-hbm3:32"
    node.tick("four")
    node.tick("four")
    assert node.state()["baseline"] is not None
    return node


def test_a_mig_layout_change_on_an_idle_node_is_registered(tmp_path, built):
    node = mig_node(tmp_path, built, gres_policy="any")

    pending = node.tick("three")
    registered = node.tick("three")

    assert pending["outcome"]["kind"] == "change-pending"
    assert registered["outcome"]["kind"] == "change-confirmed"
    assert registered["outcome"]["diff"] is not None
    assert "8 GPUs MIG (4→3 each)" in diff_summary(registered["outcome"]["diff"])
    assert registered["exit_code"] == 0
    assert extra_record(node.controller["extra"])["gres"] == "gpu:h100-80gb-hbm3:24"


def test_a_mig_layout_change_on_a_busy_node_drains_it_with_our_reason(tmp_path, built):
    node = mig_node(tmp_path, built)
    node.busy(2)

    node.tick("three")
    node.tick("three")

    assert "DRAIN" in node.controller["state"]
    assert node.controller["reason"].startswith("spurinv: [")
    assert "MIG (4→3 each)" in node.controller["reason"]


def test_gres_conf_gives_each_mig_device_its_gpu_and_both_caps(built):
    """As Slurm's AutoDetect=nvml: /dev/nvidia<minor> plus the GI and CI caps (mig-balanced
    0000:07:00.0 is minor 2; its GI 3 / CI 0 are nvidia-cap300/301 in expect.json)."""
    from spurinv.inventory import slurmconf

    inventory = run(built("mig-balanced"))["inventory"]
    assert inventory is not None

    text = slurmconf.render(inventory, "n1", {})

    line = next(line for line in text.splitlines() if line.endswith("# 0000:07:00.0/mig3.0"))
    assert "MultipleFiles=/dev/nvidia2,/dev/nvidia-caps/nvidia-cap300,/dev/nvidia-caps/nvidia-cap301" in line


def test_two_gpus_claiming_one_device_minor_fail_naming_both(built, tmp_path):
    """``Device Minor`` names /dev/nvidia<M> and the MIG tree gpu<M>: two GPUs with the same one
    cannot both be true, so the reading fails naming the duplicate."""
    root = _copy(built, "balanced", tmp_path)
    gpus = sorted((root / "proc/driver/nvidia/gpus").iterdir())
    first = (gpus[0] / "information").read_text()
    minor = next(line for line in first.splitlines() if line.startswith("Device Minor:"))
    second = gpus[1] / "information"
    text = second.read_text()
    old = next(line for line in text.splitlines() if line.startswith("Device Minor:"))
    second.write_text(text.replace(old, minor))

    result = run(root)

    assert not result["ok"]
    number = minor.split(":")[1].strip()
    assert any(f"Device Minor {number} of {gpus[1].name} is also {gpus[0].name}'s" in e["reason"] for e in result["errors"])


def test_a_gpu_instance_without_a_compute_instance_says_what_settles_it(built):
    """-cgi without -C is legal and stable, but no usable device: it stays a switch (a failure
    after policy.switch_timeout) whose reason tells the operator both ways out."""
    result = run(built("mig-applying"))

    (reason,) = [e["reason"] for e in result["errors"] if "GPU instance 10 of 0000:48:00.0" in e["reason"]]
    assert "nvidia-smi mig -i 0000:48:00.0 -gi 10 -cci, or -dgi" in reason


def test_the_device_table_names_a_mig_parents_node_once(cli, built):
    shown = cli("discover", "--root", built("mig-balanced"), "--devices")
    lines = [line for line in shown.out.splitlines() if "/mig" in line]
    assert lines
    nodes = [word for line in lines for word in line.split() if word.startswith("nvidia") and word[6:].isdigit()]
    assert len(nodes) == len(set(nodes))  # each parent's node once
    assert any("〃" in line for line in lines)


def test_a_layout_half_applied_on_one_gpu_is_a_switch_not_a_change(built, tmp_path):
    """Some of a GPU's instances made, others not yet, the spec naming them all: the reading looks
    valid and stable (a smaller layout) and was confirmed and registered. It is a switch."""
    root = _copy(built, "all-1g.10gb", tmp_path)
    gis = sorted((root / CAPS / "gpu0/mig").glob("gi*"))
    for gi in gis[2:]:
        shutil.rmtree(gi)

    result = run(root)

    assert not result["ok"]
    assert {error["source"] for error in result["errors"]} == {"switch"}
    assert any("has no MIG instance" in error["reason"] and "stale spec" in error["reason"] for error in result["errors"])
