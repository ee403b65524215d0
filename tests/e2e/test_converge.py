"""Convergence against a real Slurm 24.11 controller (slurmctld + 2 slurmd + slurmrestd/JWT on 127.0.0.1).

Each scenario builds fixture roots for node ``n1`` (8 × MI300X, ``gpu:mi300x:8`` in the lab) or ``n2``
(4 GPUs untyped + count-only ``fpga:4``), runs the real ``spurinv refresh`` process against the lab's
slurmrestd, and checks what the controller then says. What Slurm does is measured in
``lab/slurm`` and the reference notes: count-only GRES and ``extra`` are accepted; a change to the
count of File-backed GPUs is refused with 2072; a GPU type change is answered 200 and not applied.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rootbuilder as rb

from spurinv import exitcode

pytestmark = pytest.mark.e2e

OUR_PREFIX = "spurinv:"


class Node:
    """One spurinv installation on a lab node: its config, token, state and fixture roots."""

    def __init__(self, lab, tmp: Path, name: str = "n1", gpus: int = 8, **policy: object) -> None:
        self.lab, self.name, self.tmp, self.gpus = lab, name, tmp, gpus
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        self.token_file = tmp / "token"
        self.token_file.write_text(lab.token("root") + "\n")
        self.token_file.chmod(0o600)
        self.config = tmp / "config.toml"
        settings = {"confirm_interval": 0, "backoff_initial": 60, **policy}
        lines = [
            "[node]", f'name = "{name}"',
            "[controller]", f'url = "{lab.rest_url}"', 'auth = "slurm-jwt"', 'user = "root"',
            f'token_file = "{self.token_file}"', "timeout = 5",
            "[policy]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items()),
        ]  # fmt: skip
        self.config.write_text("\n".join(lines) + "\n")
        self.config.chmod(0o600)
        self.roots: dict[str, Path] = {}

    def root(self, label: str, **kwargs) -> Path:
        if label not in self.roots:
            self.roots[label] = rb.build_mi300x(self.tmp / f"root-{label}", kwargs.pop("mode", "SPX"), gpus=self.gpus, **kwargs)
        return self.roots[label]

    def refresh(self, label: str, *extra: str, timeout: float = 120) -> tuple[int, dict]:
        env = {**os.environ, "SPURINV_CONFIG": str(self.config)}
        env.pop("JOURNAL_STREAM", None)
        argv = ["refresh", "--root", str(self.roots[label]), "--state", str(self.state), "--json", *extra]
        proc = subprocess.run(
            [sys.executable, "-m", "spurinv", *argv], capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"exit {proc.returncode}, no JSON: {proc.stdout}\n{proc.stderr}") from None
        return proc.returncode, document

    def status(self) -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "spurinv", "status", "--state", str(self.state), "--json"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return json.loads(proc.stdout)

    def controller(self) -> dict:
        return self.lab.node_json(self.name)

    def writes(self, document: dict) -> list[dict]:
        return [r for r in document["requests"] if r["method"] == "POST"]


def steps(document: dict) -> list[str]:
    return [step["action"] for step in document["steps"]]


@pytest.fixture
def n1(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path)
    node.root("spx")
    code, first = node.refresh("spx")
    assert code == 0
    assert first["outcome"]["kind"] == "change-pending"
    code, second = node.refresh("spx")
    assert code == 0, second
    return node


def test_first_run_adopts_the_controllers_view_without_writing(n1):
    """First confirmed reading + controller already lists gpu:mi300x:8 → adopt, no POST."""
    status = n1.status()

    assert "adopted" == status["baseline"]["source"]
    assert status["api"]["version"] == "slurm/v0.0.42"
    last = status["last_decision"]
    assert last["outcome"] == "change-confirmed"  # what the run found, not its final state
    assert [action.split(":")[0] for action in last["actions"]] == ["read-view", "adopt"]


def test_a_no_change_tick_makes_no_request(n1):
    code, document = n1.refresh("spx", "--confirm-interval", "0")

    assert 0 == code
    assert [] == document["requests"]


def test_idle_memory_mode_change_is_registered_and_read_back(n1):
    """NPS1 → NPS4 keeps the GPU count: one POST (gres + extra), read back, baseline moves."""
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, document = n1.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    # the GRES alone, read back, then our record on its own: a refused GRES leaves no record
    gres, record = n1.writes(document)
    assert gres["body"] == {"gres": "gpu:mi300x:8"}
    assert list(record["body"]) == ["extra"]
    node = n1.controller()
    assert document["fingerprint"] in node["extra"]
    assert node["gres"] == "gpu:mi300x:8"
    assert node["state"] == ["IDLE"]
    assert n1.status()["baseline"]["source"] == "registered"
    assert n1.status()["baseline"]["fingerprint"] == document["fingerprint"]


def test_idle_vram_change_keeps_count_only_gres(clean_lab, tmp_path):
    """n2 (gpu:4 untyped + count-only fpga:4): the fpga entry is sent back as it is, never zeroed."""
    n2 = Node(clean_lab, tmp_path, name="n2", gpus=4)
    n2.root("spx")
    n2.root("vram", vram_mb=196592)
    n2.refresh("spx")
    n2.refresh("spx")
    n2.refresh("vram")

    code, document = n2.refresh("vram")

    assert 0 == code, document
    post = n2.writes(document)[0]
    assert post["body"] == {"gres": "gpu:4,fpga:4"}
    assert n2.controller()["gres"] == "gpu:4,fpga:4"


def test_gpu_count_change_is_refused_and_drained_with_a_reason_for_the_operator(n1):
    """SPX → CPX (8 → 64) on File-backed GPUs: Slurm says 2072; our drain says what to change."""
    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")

    code, document = n1.refresh("cpx")

    assert exitcode.PROTOCOL == code, document
    assert ["read-view", "register", "drain", "hold"] == steps(document)
    assert "2072" in document["steps"][1]["error"] or "Invalid generic resource" in document["steps"][1]["error"]
    node = n1.controller()
    assert "DRAIN" in node["state"]
    assert node["reason"].startswith(OUR_PREFIX)
    assert "spurinv discover --format slurm" in node["reason"]
    assert node["gres"] == "gpu:mi300x:8"
    status = n1.status()
    assert status["baseline"]["devices"] == 8  # not moved on a refused write
    assert any("spurinv discover --format slurm" in note for note in status["attention"])

    # the next tick: still refused, backoff running: one single-node read, no write, 76
    code, again = n1.refresh("cpx")
    assert exitcode.PROTOCOL == code, again
    assert [("GET", "/slurm/v0.0.42/node/n1")] == [(r["method"], r["path"]) for r in again["requests"]]

    # the operator switches the GPUs back: the change reverted, and the refusal's backoff (60 s, still
    # running) delays only a retry of the refused update: our drain is lifted on the next tick (#10)
    code, back = n1.refresh("spx")
    assert 0 == code, back
    assert ["read-view", "resume", "none"] == steps(back)
    n1.lab.wait_for(lambda: "DRAIN" not in n1.controller()["state"], 10, "n1 resumed")
    status = n1.status()
    assert status["drain"] is None
    assert status["refusal"] is None
    assert status["backoff"] is None


@pytest.fixture
def lab_config(clean_lab):
    """The lab's slurm.conf/gres.conf as start.sh rendered them, put back after the test."""
    yield clean_lab
    clean_lab.restore_config()


def apply_discover_format_slurm(lab, node: Node, label: str) -> str:
    """What the operator does: paste `spurinv discover --format slurm`'s Gres= into slurm.conf and
    its gres.conf lines into gres.conf, `scontrol reconfigure`, restart the node's slurmd. The lab
    differs from the fixture node in two ways only: its device files live under $LAB_DIR and its
    node has 2 CPUs (so the fixture's Cores=0-95 is left out). Returns the Gres= applied."""
    proc = subprocess.run(
        [sys.executable, "-m", "spurinv", "discover", "--root", str(node.roots[label]), "--format", "slurm",
         "--node", node.name],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    gres = re.search(r"^NodeName=\S+ .*Gres=(\S+)$", proc.stdout, re.MULTILINE)
    assert gres is not None, proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith(f"NodeName={node.name} Name=gpu")]
    lines = [re.sub(r" Cores=\S+", "", line.replace("File=/dev/", f"File={lab.lab_dir}/dev/")) for line in lines]
    lab.configure(node.name, gres.group(1), lines)
    lab.reconfigure()
    lab.restart_slurmd(node.name)
    return gres.group(1)


def test_the_operators_fix_is_seen_at_the_next_tick_though_the_refusal_backs_off(n1, lab_config):
    """A static node: SPX → CPX refused (76, our drain); the operator applies
    `discover --format slurm`; the next tick (the refusal's 60 s backoff still running) takes the
    controller's gpu:mi300x:64 as registered, records it, lifts our drain: exit 0."""
    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")
    code, refused = n1.refresh("cpx")
    assert exitcode.PROTOCOL == code, refused
    assert "DRAIN" in n1.controller()["state"]

    gres = apply_discover_format_slurm(lab_config, n1, "cpx")
    assert "gpu:mi300x:64" == gres
    lab_config.wait_for(lambda: n1.controller()["gres"] == gres, 30, "the controller to list gpu:mi300x:64")

    code, document = n1.refresh("cpx")

    assert 0 == code, document
    assert ["read-view", "record", "resume", "none"] == steps(document)
    assert any("the controller now lists gpu:mi300x:64; our drain lifted" in s["reason"] for s in document["steps"])
    path = "/slurm/v0.0.42/node/n1"
    assert [("GET", path), ("POST", path), ("POST", path)] == [(r["method"], r["path"]) for r in document["requests"]]
    record, resume = n1.writes(document)
    assert list(record["body"]) == ["extra"]  # no Gres: nothing left to change
    assert resume["body"]["state"] == ["UNDRAIN"]  # the narrowest lift: DRAIN only
    assert "drain" not in json.loads(resume["body"]["extra"])["spurinv"]  # our record retired with it
    node = n1.controller()
    assert "DRAIN" not in node["state"]
    assert json.loads(node["extra"])["spurinv"]["fingerprint"] == document["fingerprint"]
    status = n1.status()
    assert (status["baseline"]["fingerprint"], status["baseline"]["source"]) == (document["fingerprint"], "registered")
    assert (status["drain"], status["refusal"], status["backoff"]) == (None, None, None)
    # and the node schedules on its new GPUs
    job = n1.lab.sbatch("n1", "--gres=gpu:mi300x:64", wrap="true")
    n1.lab.wait_for(lambda: job not in n1.lab.jobs(), 30, "a job on all 64 GPUs to run and finish")


def test_a_type_only_change_answered_200_but_not_applied_is_caught_by_the_read_back(n1):
    """mi300x → mi325x with the same count: Slurm says 200 and keeps gpu:mi300x:8."""
    n1.root("mi325x", device_id=0x74A5)
    n1.refresh("mi325x")

    code, document = n1.refresh("mi325x")

    assert exitcode.PROTOCOL == code, document
    assert "still says gres" in document["steps"][1]["error"]
    assert n1.controller()["gres"] == "gpu:mi300x:8"
    assert n1.status()["baseline"]["devices"] == 8
    assert n1.status()["refusal"] is not None


def job_state(lab, job: int) -> str:
    """The job's state from squeue (which, unlike an all-nodes query, does not refresh node data)."""
    return lab.run("squeue", "-h", "-j", str(job), "-o", "%T", check=False).stdout.strip()


def test_busy_node_is_drained_then_reregistered_and_resumed_when_idle(n1):
    """Busy (a job holding a GPU) → our drain (jobs finish); then idle → re-register and lift the drain.

    No all-nodes query runs between the job's start/end and spurinv's run, so spurinv sees what a
    single-node GET says: stale allocation counters, but a fresh gres_used (docs/busy.md).
    """
    lab = n1.lab
    job = lab.sbatch("n1", "--gres=gpu:mi300x:1")
    lab.wait_for(lambda: job_state(lab, job) == "RUNNING", 15, "job running on n1")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, drained = n1.refresh("nps4")

    assert 0 == code, drained
    assert ["read-view", "drain", "hold"] == steps(drained)
    assert job in lab.jobs()  # a drain lets the job finish
    code, waiting = n1.refresh("nps4")
    assert 0 == code
    assert [] == n1.writes(waiting)
    assert ["read-view", "hold"] == steps(waiting)
    node = n1.controller()
    assert "DRAIN" in node["state"]
    assert node["reason"].startswith(OUR_PREFIX)

    lab.scancel(job)
    code, done = n1.refresh("nps4")

    assert 0 == code, done
    assert ["read-view", "register", "resume", "none"] == steps(done), [s["reason"] for s in done["steps"]]
    lab.wait_for(lambda: n1.controller()["state"] == ["IDLE"], 10, "n1 resumed and idle")
    assert n1.status()["drain"] is None
    # each waiting tick read the one node: no cluster-sized all-nodes query (#10)
    for document in (drained, waiting, done):
        assert not any(r["path"].endswith("/nodes") for r in document["requests"]), document["requests"]


def test_a_cpu_only_job_does_not_hold_up_a_gpu_change(n1):
    """A job that holds no GPU is not "busy" for a GPU inventory change: re-register at once, no drain."""
    lab = n1.lab
    job = lab.sbatch("n1")  # CPUs only
    lab.wait_for(lambda: job_state(lab, job) == "RUNNING", 15, "job running on n1")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, document = n1.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    assert "DRAIN" not in n1.controller()["state"]
    assert job in lab.jobs()
    lab.scancel(job)


def test_an_operators_drain_is_never_touched(n1):
    lab = n1.lab
    lab.scontrol("update", "nodename=n1", "state=drain", "reason=NHC: bad ECC on GPU 3")
    job = lab.sbatch("n2")  # keep the cluster doing something
    n1.root("cpx", mode="CPX")
    n1.root("nps4", memory_mode="NPS4")

    for label in ("cpx", "cpx", "spx", "nps4", "nps4", "spx", "spx"):
        code, document = n1.refresh(label, "--ignore-backoff")
        assert code in (0, exitcode.PROTOCOL), document
        assert all(w["body"].get("state") is None for w in n1.writes(document)), document["requests"]
        node = n1.controller()
        assert node["reason"] == "NHC: bad ECC on GPU 3"
        assert "DRAIN" in node["state"]
    lab.scancel(job)


def test_a_bad_token_is_77_with_backoff_and_the_next_tick_sends_nothing(n1):
    n1.token_file.write_text("not-a-jwt\n")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, document = n1.refresh("nps4")
    again_code, again = n1.refresh("nps4")

    assert exitcode.NOPERM == code, document
    status = n1.status()
    assert status["backoff"]["kind"] == "auth"
    assert exitcode.TEMPFAIL == again_code
    assert [] == again["requests"]


def _restd_pid(lab) -> int:
    return int((lab.lab_dir / "slurmrestd-jwt.pid").read_text())


def _start_restd(lab) -> None:
    """Start the JWT slurmrestd again exactly as lab/slurm/start-restd.sh does; record its PID."""
    env = {**lab.env, "SLURM_JWT": "daemon"}
    log = open(lab.lab_dir / "log" / "slurmrestd-jwt.log", "a")  # noqa: SIM115 (the daemon keeps it)
    proc = subprocess.Popen(
        [str(lab.prefix / "sbin/slurmrestd"), "-a", "rest_auth/jwt", "-s", "openapi/slurmctld", "-u", "nobody", "-g", "nogroup",
         f"127.0.0.1:{lab.port_base + 3}"],
        env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    (lab.lab_dir / "slurmrestd-jwt.pid").write_text(f"{proc.pid}\n")
    lab.wait_for(lambda: lab.rest("GET", "/slurm/v0.0.42/ping/").status_code == 200, 10, "slurmrestd back")


def test_controller_stopped_is_69_state_intact_and_the_next_run_succeeds(n1):
    lab = n1.lab
    before = n1.state.read_bytes()
    pid = _restd_pid(lab)
    os.kill(pid, signal.SIGINT)
    lab.wait_for(lambda: not Path(f"/proc/{pid}").exists(), 15, "slurmrestd (JWT) stopped")
    try:
        n1.root("nps4", memory_mode="NPS4")
        n1.refresh("nps4")
        code, document = n1.refresh("nps4")
        assert exitcode.UNAVAILABLE == code, document
        status = n1.status()
        assert status["backoff"]["kind"] == "unreachable"
        assert status["baseline"]["devices"] == 8
        assert len(before) > 0
    finally:
        _start_restd(lab)

    code, document = n1.refresh("nps4", "--ignore-backoff")

    assert 0 == code, document
    assert n1.status()["backoff"] is None
    assert document["fingerprint"] in n1.controller()["extra"]


def test_event_to_controller_latency_with_confirm_interval(clean_lab, tmp_path, record_property):
    """A udev event starts a run that sees the change, re-reads after confirm_interval and
    updates the controller: measure event → controller updated."""
    node = Node(clean_lab, tmp_path, confirm_interval=2)
    node.root("spx")
    node.root("nps4", memory_mode="NPS4")
    node.refresh("spx", "--confirm-interval", "0")
    node.refresh("spx", "--confirm-interval", "0")

    started = time.monotonic()
    code, document = node.refresh("nps4")  # the run the udev rule would start
    clean_lab.wait_for(lambda: document["fingerprint"] in (node.controller()["extra"] or ""), 20, "extra updated")
    latency = time.monotonic() - started

    assert 0 == code, document
    assert latency < 10
    record_property("event_to_controller_seconds", round(latency, 2))
    print(f"\nevent → confirmed → controller updated: {latency:.2f} s (confirm_interval 2 s)")


def test_dry_run_reads_the_controller_but_never_writes(n1):
    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")
    before_state = n1.state.read_bytes()
    before_node = n1.controller()

    code, document = n1.refresh("cpx", "--dry-run")

    assert 0 == code, document
    assert document["dry_run"] is True
    assert ["read-view", "register", "none"] == steps(document)
    assert not document["steps"][1]["sent"]
    assert document["steps"][1]["request"].startswith("POST /slurm/v0.0.42/node/n1 ")
    assert all(r["method"] == "GET" for r in document["requests"])
    assert before_state == n1.state.read_bytes()
    after = n1.controller()
    assert (before_node["gres"], before_node["state"], before_node["extra"]) == (after["gres"], after["state"], after["extra"])


def test_an_unknown_node_name_is_68(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path, name="n9")
    node.root("spx")

    code, document = node.refresh("spx")  # no state yet: the first run reads the controller

    assert exitcode.NOHOST == code, document
    assert "n9" in document["steps"][-1]["error"]
    assert node.status()["backoff"]["kind"] == "unknown-node"
