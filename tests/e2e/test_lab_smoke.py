"""Smoke tests for the Slurm lab harness: every assertion is against the real daemons (slurmctld, slurmd n1/n2,
JWT slurmrestd on 127.0.0.1). They prove the harness works; spurinv's own e2e tests build on the same fixtures."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest
from slurmlab import API, SlurmLab, SlurmLabError, SlurmLabTimeout

pytestmark = pytest.mark.e2e

NODE = f"/slurm/{API}/node"


def test_lab_started(slurm_lab: SlurmLab, record_property: Callable[[str, object], None]) -> None:
    record_property("slurm_lab_start_s", round(slurm_lab.timings["start"], 3))
    assert slurm_lab.rest_url.startswith("http://127.0.0.1:")
    assert slurm_lab.slurm_conf.is_file()
    assert slurm_lab.scontrol("ping").returncode == 0


def test_both_nodes_idle(clean_lab: SlurmLab) -> None:
    for name in ("n1", "n2"):
        node = clean_lab.node_json(name)
        assert node["state"] == ["IDLE"], node["state"]
        assert node["alloc_cpus"] == 0
        assert node["reason"] == ""


def test_gres_via_jwt(clean_lab: SlurmLab) -> None:
    assert clean_lab.node_json("n1")["gres"] == "gpu:mi300x:8"
    assert clean_lab.node_json("n2")["gres"] == "gpu:4,fpga:4"


def test_drain_resume_via_rest_and_reset(clean_lab: SlurmLab) -> None:
    lab = clean_lab
    r = lab.rest("POST", f"{NODE}/n1", {"state": ["DRAIN"], "reason": "x"})
    assert r.status_code == 200, r.text
    assert r.json()["errors"] == []
    node = lab.node_json("n1")
    assert "DRAIN" in node["state"]
    assert node["reason"] == "x"
    assert node["reason_set_by_user"] == "root"

    r = lab.rest("POST", f"{NODE}/n1", {"state": ["RESUME"]})
    assert r.status_code == 200, r.text
    lab.wait_for(
        lambda: (lab.node_json("n1")["state"] == ["IDLE"], lab.node_json("n1")["state"]),
        15,
        "n1 IDLE after RESUME (NOT_RESPONDING for ~1 s first)",
    )
    assert lab.node_json("n1")["reason"] == "x"  # no accounting: RESUME keeps the old reason (docs/slurm-rest.md §3)

    # leave a mess for reset(): drained again, with comment/extra, features and a REST-only gres change on n2
    assert lab.rest("POST", f"{NODE}/n1", {"state": ["DRAIN"], "reason": "y", "comment": "c", "extra": "e"}).ok
    assert lab.rest("POST", f"{NODE}/n1", {"features": ["mi300x", "rack1", "zz"], "features_act": ["zz"]}).ok
    assert lab.rest("POST", f"{NODE}/n2", {"gres": "gpu:4,fpga:2"}).ok
    assert lab.node_json("n2")["gres"] == "gpu:4,fpga:2"

    lab.reset()
    n1, n2 = lab.node_json("n1"), lab.node_json("n2")
    assert n1["state"] == ["IDLE"]
    assert (n1["reason"], n1["comment"], n1["extra"]) == ("", "", "")
    assert n1["active_features"] == ["mi300x", "rack1"]
    assert n2["gres"] == "gpu:4,fpga:4"


def test_reset_recovers_invalid_registration_down_and_pending_job(clean_lab: SlurmLab) -> None:
    lab = clean_lab
    # count-only GRES raised above what slurmd reports: accepted, then INVALID_REG on the next registration
    assert lab.rest("POST", f"{NODE}/n2", {"gres": "gpu:4,fpga:6"}).ok
    assert lab.rest("POST", f"{NODE}/n2", {"state": ["DRAIN"], "reason": "a"}).ok
    assert lab.rest("POST", f"{NODE}/n2", {"state": ["RESUME"]}).ok
    lab.wait_for(lambda: ("INVALID_REG" in (s := lab.node_json("n2")["state"]), s), 15, "n2 INVALID_REG after re-registration")
    assert lab.rest("POST", f"{NODE}/n1", {"state": ["DOWN"], "reason": "down"}).ok
    assert lab.rest("POST", f"{NODE}/n1", {"weight": 7}).ok
    job = lab.sbatch("n1")  # stays pending on the DOWN node

    lab.reset()
    assert lab.jobs() == [], job
    for name, gres in (("n1", "gpu:mi300x:8"), ("n2", "gpu:4,fpga:4")):
        node = lab.node_json(name)
        assert node["state"] == ["IDLE"], node["state"]
        assert node["reason"] == ""
        assert node["gres"] == gres
        assert node["weight"] == 1


def test_job_makes_node_busy_then_idle(clean_lab: SlurmLab) -> None:
    lab = clean_lab
    job = lab.sbatch("n1")

    def busy() -> tuple[bool, tuple[list[str], int]]:
        n = lab.node_json("n1")
        return n["alloc_cpus"] > 0 and n["state"][0] in ("MIXED", "ALLOCATED"), (n["state"], n["alloc_cpus"])

    state, alloc = lab.wait_for(busy, 30, f"n1 busy with job {job}")
    assert alloc == 1  # 1 of 2 CPUs
    assert state == ["MIXED"]

    lab.scancel(job)

    def idle() -> tuple[bool, tuple[list[str], int]]:
        n = lab.node_json("n1")
        return n["state"] == ["IDLE"] and n["alloc_cpus"] == 0, (n["state"], n["alloc_cpus"])

    lab.wait_for(idle, 30, f"n1 idle after scancel {job}")
    assert lab.jobs() == []


def test_bad_token_rejected(clean_lab: SlurmLab) -> None:
    r = clean_lab.rest("GET", f"{NODE}/n1", token="not-a-jwt")
    assert r.status_code in (401, 511), (r.status_code, r.text[:500])
    r = clean_lab.rest("GET", f"{NODE}/n1", token="")  # no token headers at all
    assert r.status_code == 401, (r.status_code, r.text[:500])


def test_file_backed_gpu_count_change_refused(clean_lab: SlurmLab) -> None:
    r = clean_lab.rest("POST", f"{NODE}/n1", {"gres": "gpu:mi300x:7"})
    assert r.status_code == 500, r.text
    assert 2072 in [e.get("error_number") for e in r.json()["errors"]], r.json()["errors"]
    assert clean_lab.node_json("n1")["gres"] == "gpu:mi300x:8"


def test_wait_for_reports_what_and_last_value(slurm_lab: SlurmLab) -> None:
    with pytest.raises(SlurmLabTimeout, match=r"n1 to be on fire; last observed: \['IDLE'\]"):
        slurm_lab.wait_for(lambda: (False, ["IDLE"]), 0.3, "n1 to be on fire")


def test_daemon_pid_takes_the_first_line_and_checks_the_process(slurm_lab: SlurmLab) -> None:
    """slurmctld 24.11 rewrites its pid file in place on a reconfigure (no truncate): after a pid wrap-around the
    file reads e.g. ``989\\n1\\n``. A pid that is not the lab's daemon is refused, so no signal goes astray."""
    pid = slurm_lab.daemon_pid("slurmctld")
    assert (slurm_lab.lab_dir / "slurmctld.pid").read_text().split("\n")[0] == str(pid)
    stray = slurm_lab.lab_dir / "slurmd-stray.pid"
    try:
        stray.write_text(f"{pid}\n1\n")  # slurmctld's pid where a slurmd's belongs
        with pytest.raises(SlurmLabError, match=rf"slurmd-stray\.pid names pid {pid}, which is not a running .*/slurmd$"):
            slurm_lab.daemon_pid("slurmd-stray")
        stray.write_text(f"{os.getpid()}\n")
        with pytest.raises(SlurmLabError, match="not a running"):
            slurm_lab.daemon_pid("slurmd-stray")
    finally:
        stray.unlink(missing_ok=True)


def test_a_stopped_daemon_is_named_and_the_lab_refuses_further_resets(slurm_lab: SlurmLab) -> None:
    """A daemon that stops answering (here SIGSTOP, as a crash or a stray signal would leave it) is named by
    ``daemon_trouble`` and at the end of ``diagnostics``; a reset that then fails marks the lab broken, so the
    tests after it fail at once naming the cause instead of each waiting out its timeouts."""
    assert slurm_lab.daemon_trouble() is None
    pid = slurm_lab.daemon_pid("slurmd-n2")
    os.kill(pid, signal.SIGSTOP)
    try:
        trouble = slurm_lab.wait_for(slurm_lab.daemon_trouble, 5, "slurmd-n2 seen stopped")
        assert trouble == f"slurmd-n2.pid names pid {pid}: stopped {os.path.realpath(slurm_lab.prefix / 'sbin/slurmd')}"
        assert f"slurmd-n2: pid {pid} stopped" in slurm_lab.diagnostics().rsplit("--- daemons", 1)[1]
        broken, slurm_lab._broken = slurm_lab._broken, trouble  # what a failed restart records
        try:
            with pytest.raises(SlurmLabError, match=r"broke in an earlier test, not reset: slurmd-n2\.pid names pid"):
                slurm_lab.reset()
        finally:
            slurm_lab._broken = broken
    finally:
        os.kill(pid, signal.SIGCONT)
    assert slurm_lab.wait_for(lambda: slurm_lab.daemon_trouble() is None, 5, "slurmd-n2 running again")


def test_a_reset_that_fails_restarts_the_lab_once_and_says_why(slurm_lab: SlurmLab) -> None:
    """slurmctld killed (as a crash would): the next reset fails, restarts the lab, resets the fresh one, and
    records what it saw, which the run's summary prints."""
    before = list(slurm_lab.timings["restarts"])  # a real restart earlier in the run stays in the summary
    pid = slurm_lab.daemon_pid("slurmctld")
    os.kill(pid, signal.SIGKILL)
    slurm_lab.wait_for(lambda: slurm_lab.daemon_trouble(), 10, "slurmctld seen gone")  # noqa: PLW0108 - a fresh call each poll
    try:
        slurm_lab.reset()
        assert slurm_lab.daemon_pid("slurmctld") != pid
        assert slurm_lab.scontrol("ping").returncode == 0
        assert [n["state"] for n in slurm_lab.nodes()] == [["IDLE"], ["IDLE"]]
        *earlier, seen = slurm_lab.timings["restarts"]
        assert earlier == before
        assert seen.startswith("reset failed: "), seen
        assert f"slurmctld.pid names pid {pid}: gone" in seen.splitlines()[0], seen
        assert seen.splitlines()[0].endswith(f"in {os.environ['PYTEST_CURRENT_TEST']}"), seen
        assert "Unable to contact slurm controller" in seen, seen  # the client's own words are kept
    finally:
        slurm_lab.timings["restarts"][:] = before  # this one was asked for: the summary shows only the others


def test_a_reset_that_fails_on_a_lab_that_answers_fails_and_restarts_nothing(
    slurm_lab: SlurmLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reset that cannot clean up while every daemon runs and answers is the reset's (or a test's leftovers')
    failure, not the lab's: it fails as it is, and no restart turns it green."""
    before = list(slurm_lab.timings["restarts"])
    pid = slurm_lab.daemon_pid("slurmctld")

    def cannot_clean_up() -> None:
        raise SlurmLabError("timed out after 30 s waiting for both nodes IDLE")

    monkeypatch.setattr(slurm_lab, "_reset", cannot_clean_up)
    with pytest.raises(SlurmLabError, match=r"(?s)^reset failed: timed out .*\(every daemon running and answering\)"):
        slurm_lab.reset()
    assert slurm_lab.timings["restarts"] == before
    assert slurm_lab.daemon_pid("slurmctld") == pid
