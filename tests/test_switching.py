"""A partition switch in progress is a state, not an error: the MI300X snapshots of
tests/fixtures/synthetic/amd-switch and a MIG layout being applied read as *switching* with their
evidence; such a reading neither confirms a change nor counts as a failure, the run exits 75
saying since when, and only a switch longer than ``policy.switch_timeout`` becomes a failure."""

from __future__ import annotations

import errno
import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_intent import Node  # tests/ is on sys.path

from spurinv import exitcode
from spurinv.inventory import model
from spurinv.inventory.classify import Kind, classify, diff_summary, switching
from spurinv.inventory.discovery import discover
from spurinv.inventory.model import Discovery, Problem, Reading
from spurinv.inventory.root import Root
from spurinv.report import metrics
from spurinv.shape import SWITCH
from spurinv.state import file as state_file
from spurinv.state import ledger


def run(root) -> Discovery:
    return model.discovery(discover(Root(str(root))))


def evidence(result: Discovery) -> list[str]:
    return [error["reason"] for error in result["errors"] if error["source"] == SWITCH]


def test_the_settled_snapshot_reads_as_eight_gpus(built):
    result = run(built("amd-spx-settled"))
    assert result["ok"], result["errors"]
    assert result["inventory"] is not None
    assert 8 == len(result["inventory"]["devices"])


def test_a_cpx_switch_caught_mid_way_is_switching_with_its_evidence(built):
    """0000:65:00.0 left KFD and is not back: evidence, not "KFD has no node" as a failure."""
    result = run(built("amd-cpx-switching"))

    assert not result["ok"]
    assert result["inventory"] is None
    assert [error["source"] for error in result["errors"]] == [SWITCH]
    assert "0000:65:00.0" in evidence(result)[0]


def test_a_driver_reload_mid_probe_is_switching_per_unbound_gpu(built):
    result = run(built("amd-nps-reloading"))

    assert {error["source"] for error in result["errors"]} == {SWITCH}
    unbound = sorted(reason.split()[3] for reason in evidence(result))
    assert unbound == ["0000:47:00.0", "0000:65:00.0", "0000:85:00.0", "0000:a7:00.0", "0000:c7:00.0", "0000:e5:00.0"]


def test_a_gpu_bound_to_another_driver_is_still_a_failure(root_copy):
    """vfio-pci is a choice, not a reload: no switch, a failure as before."""
    root = root_copy("mi300x-spx")
    device = next(p for p in (root / "sys/bus/pci/devices").iterdir() if p.name == "0000:05:00.0")
    driver = device / "driver"
    target = root / "sys/bus/pci/drivers/vfio-pci"
    target.mkdir(parents=True, exist_ok=True)
    driver.unlink()
    driver.symlink_to(os.path.relpath(target, driver.resolve().parent if driver.exists() else device.resolve()))

    result = run(root)

    assert not result["ok"]
    assert SWITCH not in {error["source"] for error in result["errors"]}
    assert any("bound to vfio-pci" in error["reason"] for error in result["errors"])


@pytest.mark.parametrize("number", [errno.EPERM, errno.EBUSY])
def test_an_attribute_refused_during_a_reset_is_switching(root_copy, monkeypatch, number):
    """amdgpu answers EPERM on current_compute_partition while the package resets (§2.2): the
    kernel's answer, produced at the system call (no file can hold it)."""
    root = root_copy("mi300x-spx")
    target = os.path.realpath(root / "sys/bus/pci/devices/0000:27:00.0/current_compute_partition")
    real_open = os.open

    def kernel_open(path, flags, *args, **kwargs):
        if os.path.realpath(path) == target:
            raise OSError(number, os.strerror(number), path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", kernel_open)

    result = run(root)

    assert [error["source"] for error in result["errors"]] == [SWITCH]
    assert result["errors"][0]["path"].endswith("current_compute_partition")


def test_an_unknown_partition_mode_is_switching(root_copy):
    root = root_copy("mi300x-spx")
    (root / "sys/bus/pci/devices/0000:85:00.0/current_compute_partition").write_text("UNKNOWN\n")

    result = run(root)

    assert [error["source"] for error in result["errors"]] == [SWITCH]
    assert "UNKNOWN" in result["errors"][0]["reason"]


def test_the_real_63_node_capture_is_switching_until_the_timeout(built):
    """docs/partitions.md §2.5: a count that disagrees with the mode may never settle; it is
    switching on its own and becomes a failure only through policy.switch_timeout."""
    result = run(built("mi300x-cpx-captured"))
    assert [error["source"] for error in result["errors"]] == [SWITCH]
    assert "CPX: 8 partitions expected, KFD shows 7" in result["errors"][0]["reason"]


def test_a_mig_layout_being_applied_is_switching(built):
    result = run(built("mig-applying"))
    assert {error["source"] for error in result["errors"]} == {SWITCH}  # the half-built GI, the cleared GPUs
    assert "GPU instance 10 of 0000:48:00.0" in result["errors"][0]["reason"]


def test_a_failure_beside_a_switch_is_a_failure_with_the_evidence_listed(root_copy):
    """A real failure counts even during a switch: only a reading whose every error is evidence
    is switching."""
    root = root_copy("mi300x-spx")
    (root / "sys/bus/pci/devices/0000:85:00.0/current_compute_partition").write_text("UNKNOWN\n")
    (root / "proc/meminfo").write_text("garbage\n")

    result = run(root)
    reading = model.reading(result, T0)

    assert result["errors"][0]["source"] == SWITCH
    assert any(error["source"] == "memory" for error in result["errors"])
    assert not switching(reading)
    assert classify(None, None, reading)["kind"] == Kind.DISCOVERY_FAILED


# --- the run ---------------------------------------------------------------------------------------


def amd_node(tmp_path, built, **kwargs) -> Node:
    node = Node(tmp_path, built, **kwargs)
    node.roots["switching"] = built("amd-cpx-switching")
    node.roots["reloading"] = built("amd-nps-reloading")
    node.tick("spx")
    node.tick("spx")
    assert node.state()["baseline"] is not None
    return node


def test_a_switch_exits_75_says_since_when_and_counts_no_failure(tmp_path, built):
    node = amd_node(tmp_path, built)
    node.busy(2)  # a busy node would be drained by a confirmed change: a switch must not be one

    first = node.tick("switching")
    second = node.tick("reloading", minutes=3)

    since = first["outcome"]  # the run's outcome names the first sighting's time
    assert first["outcome"]["kind"] == Kind.SWITCHING == second["outcome"]["kind"]
    assert first["exit_code"] == exitcode.TEMPFAIL == second["exit_code"]
    started = node.state()["switching"]
    assert started is not None
    assert f"partition switch in progress since {started['since']:%H:%M} UTC" in second["outcome"]["reason"]
    assert since["reason"].split(":")[0] == second["outcome"]["reason"].split(":")[0]  # the same start
    assert node.state()["consecutive_failures"] == 0
    assert first["requests"] == [] == second["requests"]
    assert "DRAIN" not in node.controller["state"]


def test_the_settled_reading_after_a_switch_goes_through_two_reading_confirmation(tmp_path, built):
    node = amd_node(tmp_path, built, gres_policy="any")
    node.tick("switching")

    settled = node.tick("cpx")
    confirmed = node.tick("cpx")

    assert node.state()["switching"] is None
    assert settled["outcome"]["kind"] == Kind.CHANGE_PENDING  # a switching reading confirms nothing
    assert confirmed["outcome"]["kind"] == Kind.CHANGE_CONFIRMED
    assert confirmed["outcome"]["diff"] is not None
    assert "8 GPUs SPX→CPX (1→8 each)" in diff_summary(confirmed["outcome"]["diff"])


def test_a_switch_between_two_identical_readings_resets_confirmation(tmp_path, built):
    node = amd_node(tmp_path, built)
    kinds = [node.tick(root)["outcome"]["kind"] for root in ("cpx", "switching", "cpx")]
    assert kinds == [Kind.CHANGE_PENDING, Kind.SWITCHING, Kind.CHANGE_PENDING]


def test_a_switch_longer_than_the_timeout_is_a_failure(tmp_path, built):
    node = amd_node(tmp_path, built)

    early = node.tick("switching", minutes=1)
    within = node.tick("switching", minutes=9)  # 540 s after the first sighting
    late = node.tick("switching", minutes=2)  # 660 s: past the default 600 s

    assert [early["exit_code"], within["exit_code"], late["exit_code"]] == [
        exitcode.TEMPFAIL,
        exitcode.TEMPFAIL,
        exitcode.IOERR,
    ]
    assert late["outcome"]["kind"] == Kind.DISCOVERY_FAILED
    assert "longer than policy.switch_timeout (600 s)" in late["outcome"]["reason"]
    assert node.state()["consecutive_failures"] == 1


def test_status_and_metrics_show_the_switch(tmp_path, built, cli):
    node = amd_node(tmp_path, built)
    node.tick("switching")

    status = cli("status", "--state", node.state_path, "--json").json()
    text = metrics.render(state_file.as_json(node.state()), 0.1, "n1", "test")

    assert status["switching"]["since"]
    assert any("partition switch in progress since" in line for line in status["attention"])
    since = int(node.state()["switching"]["since"].timestamp())
    assert f"spurinv_partition_switch_since_timestamp_seconds {since}" in text


def test_discover_exits_75_on_a_switch_and_74_on_a_failure(cli, built, root_copy):
    switching_run = cli("discover", "--root", built("amd-cpx-switching"), "--json")
    broken = root_copy("mi300x-spx")
    (broken / "proc/meminfo").write_text("garbage\n")
    failed = cli("discover", "--root", broken, "--json")

    assert switching_run.code == exitcode.TEMPFAIL
    assert switching_run.json()["errors"][0]["source"] == SWITCH
    assert failed.code == exitcode.IOERR


# --- the books, as properties --------------------------------------------------------------------

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
KINDS = st.sampled_from(["ok", "switching", "failed"])


def _reading(kind: str, at: datetime) -> Reading:
    if kind == "ok":
        raise AssertionError("built by the caller")
    source = SWITCH if kind == "switching" else "kfd"
    problem: Problem = {"source": source, "path": "p", "reason": "r"}
    return {"taken_at": at, "ok": False, "fingerprint": None, "inventory": None, "errors": [problem], "flags": []}


@given(st.lists(st.tuples(KINDS, st.integers(min_value=1, max_value=400)), max_size=12), st.integers(0, 3600))
def test_switching_readings_count_no_failure_until_overdue(steps, timeout):
    """Over any sequence: ``switching.since`` is the first reading of the current run of switching
    readings; failures count plain failures and overdue switches only; an ok reading clears both."""
    books: dict = {"readings": [], "pending": None, "consecutive_failures": 0, "last_success": None, "switching": None}
    now = T0
    started = None
    failures = 0
    for kind, gap in steps:
        now += timedelta(seconds=gap)
        ok = kind == "ok"
        is_switch = kind == "switching"
        overdue = is_switch and started is not None and (now - started).total_seconds() > timeout
        previous_switching = bool(books["readings"]) and books["readings"][-1] == "switching"
        update = ledger.record(books, kind, ok=ok, fingerprint="f" if ok else None, taken_at=now, baseline="f",
                               switching=is_switch, overdue=overdue, previous_switching=previous_switching)  # fmt: skip
        previous = bool(books["readings"]) and books["readings"][-1] == "switching"
        books.update(update)
        # a switch ends at the second reading in a row without one, not at the first
        started = (started or now) if is_switch else started if previous else None
        failures = 0 if ok else failures + (0 if is_switch and not overdue else 1)
        assert books["consecutive_failures"] == failures
        assert (books["switching"] or {}).get("since") == started


@given(KINDS)
def test_classify_calls_a_reading_switching_exactly_when_it_carries_evidence(kind):
    if kind == "ok":
        return
    reading = _reading(kind, T0)
    outcome = classify(None, None, reading)
    assert switching(reading) == (kind == "switching")
    assert (outcome["kind"] == Kind.SWITCHING) == (kind == "switching")


def test_discover_says_switch_not_failed_to_a_person(cli, built):
    shown = cli("discover", "--root", built("amd-cpx-switching"))

    assert shown.code == exitcode.TEMPFAIL
    assert "partition switch in progress: not a settled reading" in shown.out
    assert "discovery FAILED" not in shown.out


# --- follow-ups: a clock ahead, a zero timeout, a switch alternating with settled readings ---------


def test_a_switch_first_seen_under_a_clock_ahead_still_times_out(tmp_path, built):
    """A tick with the clock a week ahead stamps ``since`` in the future; the next ticks, on the
    right clock, restart the switch at their own time instead of waiting a week for the timeout."""
    node = amd_node(tmp_path, built)
    ahead = node.tick("switching", minutes=7 * 24 * 60)
    assert ahead["exit_code"] == exitcode.TEMPFAIL

    back = node.tick("switching", minutes=-7 * 24 * 60)
    assert node.state()["switching"]["since"] <= node.now
    late = node.tick("switching", minutes=11)

    assert back["exit_code"] == exitcode.TEMPFAIL
    assert late["exit_code"] == exitcode.IOERR
    assert "longer than policy.switch_timeout" in late["outcome"]["reason"]


def test_a_switch_that_did_not_start_today_names_its_date(tmp_path, built):
    node = amd_node(tmp_path, built)
    node.config = node.config.model_copy(update={"policy": node.config.policy.model_copy(update={"switch_timeout": 3600})})
    node.now = node.now.replace(hour=23, minute=50)
    node.tick("switching")
    after_midnight = node.tick("switching", minutes=20)

    since = node.state()["switching"]["since"]
    assert f"partition switch in progress since {since:%Y-%m-%d %H:%M} UTC" in after_midnight["outcome"]["reason"]


def test_a_zero_switch_timeout_fails_the_first_switching_reading(tmp_path, built):
    node = amd_node(tmp_path, built)
    node.config = node.config.model_copy(update={"policy": node.config.policy.model_copy(update={"switch_timeout": 0})})

    first = node.tick("switching")

    assert first["exit_code"] == exitcode.IOERR
    assert first["outcome"]["kind"] == Kind.DISCOVERY_FAILED


def test_a_switch_alternating_with_settled_readings_still_times_out(tmp_path, built):
    """switching, settled, switching, settled…: each settled reading alone does not end the switch,
    so its start is kept and the timeout comes."""
    node = amd_node(tmp_path, built)
    codes = [node.tick(root, minutes=2)["exit_code"] for root in ["switching", "cpx"] * 4]
    last = node.tick("switching", minutes=2)

    assert node.state()["switching"] is not None
    assert exitcode.IOERR not in codes[:6]
    assert last["exit_code"] == exitcode.IOERR
    assert "longer than policy.switch_timeout" in last["outcome"]["reason"]


@given(st.lists(st.tuples(st.booleans(), st.integers(min_value=-7200, max_value=400)), max_size=16))
def test_the_switch_start_is_never_later_than_the_reading_and_survives_single_settled_readings(steps):
    """Over any sequence (clock jumps back included): ``since`` is never after the reading just
    recorded, and a switch ends only after two settled readings in a row."""
    books: dict = {"readings": [], "pending": None, "consecutive_failures": 0, "last_success": None, "switching": None}
    now = T0
    settled_run = 0
    for is_switch, gap in steps:
        now += timedelta(seconds=gap)
        previous = bool(books["readings"]) and books["readings"][-1] == "switching"
        kind = "switching" if is_switch else "ok"
        books.update(ledger.record(books, kind, ok=not is_switch, fingerprint=None if is_switch else "f", taken_at=now,
                                   baseline="f", switching=is_switch, previous_switching=previous))  # fmt: skip
        settled_run = 0 if is_switch else settled_run + 1
        if books["switching"] is not None:
            assert books["switching"]["since"] <= now
            assert settled_run < 2
        else:
            assert settled_run >= 1 or not is_switch
