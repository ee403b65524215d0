"""Convergence through Slurm's real ``scontrol`` (munge; no slurmrestd involved), against the lab.

The scenarios of ``test_converge.py`` (REST), run with ``controller.transport = "scontrol"``:
adopt, busy drain, idle refusal with our drain, revert lifts our drain, an operator's drain
untouched, unknown node; plus the failures told apart by scontrol's own messages
(``slurm_update error: Invalid user id`` → 77, munge unreachable → 69, slurmctld not answering
→ 69, no scontrol → 78).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import rootbuilder as rb

from spurinv import exitcode

pytestmark = pytest.mark.e2e

OUR_PREFIX = "spurinv:"


class Node:
    """One spurinv installation on a lab node that reaches slurmctld through ``scontrol``."""

    def __init__(self, lab, tmp: Path, name: str = "n1", gpus: int = 8, scontrol: str | None = None, **extra) -> None:
        self.lab, self.name, self.tmp, self.gpus = lab, name, tmp, gpus
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        self.config = tmp / "config.toml"
        controller = {"transport": "scontrol", "scontrol": scontrol or str(lab.prefix / "bin" / "scontrol"),
                      "timeout": 5, **extra.pop("controller", {})}  # fmt: skip
        policy = {"confirm_interval": 0, "backoff_initial": 60, **extra}
        lines = ["[node]", f'name = "{name}"', "[controller]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in controller.items()]
        lines += ["[policy]", *(f"{k} = {json.dumps(v)}" for k, v in policy.items())]
        self.config.write_text("\n".join(lines) + "\n")
        self.config.chmod(0o600)
        self.roots: dict[str, Path] = {}

    def root(self, label: str, **kwargs) -> Path:
        if label not in self.roots:
            self.roots[label] = rb.build_mi300x(self.tmp / f"root-{label}", kwargs.pop("mode", "SPX"), gpus=self.gpus, **kwargs)
        return self.roots[label]

    def refresh(self, label: str, *extra: str, timeout: float = 120) -> tuple[int, dict]:
        env = {**self.lab.env, "SPURINV_CONFIG": str(self.config)}
        env.pop("JOURNAL_STREAM", None)
        argv = ["refresh", "--root", str(self.roots[label]), "--state", str(self.state), "--json", *extra]
        proc = subprocess.run(
            [sys.executable, "-m", "spurinv", *argv], capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"exit {proc.returncode}, no JSON: {proc.stdout}\n{proc.stderr}") from None
        document["_stderr"] = proc.stderr
        return proc.returncode, document

    def status(self) -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "spurinv", "status", "--state", str(self.state), "--json"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return json.loads(proc.stdout)

    def controller(self) -> dict:
        (node,) = [n for n in self.lab.nodes() if n["name"] == self.name]
        return node


def steps(document: dict) -> list[str]:
    return [step["action"] for step in document["steps"]]


def updates(document: dict) -> list[str]:
    """The ``scontrol update`` command lines the run executed."""
    return [r["path"] for r in document["requests"] if r["method"] == "EXEC" and " update " in r["path"]]


@pytest.fixture
def n1(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path)
    node.root("spx")
    code, first = node.refresh("spx")
    assert code == 0, first
    assert first["outcome"]["kind"] == "change-pending"
    code, second = node.refresh("spx")
    assert code == 0, second
    return node


def test_first_run_adopts_the_controllers_view_without_writing(n1):
    status = n1.status()

    assert "adopted" == status["baseline"]["source"]
    last = status["last_decision"]
    assert last["outcome"] == "change-confirmed"  # what the run found; then it adopted the controller's view
    assert [action.split(":")[0] for action in last["actions"]] == ["read-view", "adopt"]


def test_the_view_comes_from_scontrol_json_and_no_update_is_run(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path)
    node.root("spx")
    node.refresh("spx")

    code, document = node.refresh("spx")

    assert 0 == code, document
    commands = [r["path"] for r in document["requests"]]
    assert commands[0].endswith("scontrol --version")
    assert commands[1].endswith("scontrol --json show node n1")
    assert [] == updates(document)
    assert document["mode"] == "controller"


def test_idle_memory_mode_change_is_registered_through_scontrol_update_and_read_back(n1):
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, document = n1.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    gres, record = updates(document)  # the GRES, read back, then our record on its own
    assert gres.endswith(" update NodeName=n1 Gres=gpu:mi300x:8")
    assert " update NodeName=n1 'Extra={" in record
    node = n1.controller()
    assert document["fingerprint"] in node["extra"]
    assert node["state"] == ["IDLE"]
    assert n1.status()["baseline"]["source"] == "registered"


def test_gpu_count_change_is_refused_76_with_our_drain_and_the_revert_lifts_it(n1):
    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")

    code, document = n1.refresh("cpx")

    assert exitcode.PROTOCOL == code, document
    assert ["read-view", "register", "drain", "hold"] == steps(document)
    assert "Invalid generic resource (gres) specification" in document["steps"][1]["error"]
    node = n1.controller()
    assert "DRAIN" in node["state"]
    assert node["reason"].startswith(OUR_PREFIX)
    assert "spurinv discover --format slurm" in node["reason"]
    assert node["gres"] == "gpu:mi300x:8"

    code, back = n1.refresh("spx", "--ignore-backoff")

    assert 0 == code, back
    assert ["read-view", "resume", "none"] == steps(back)
    # UNDRAIN clears DRAIN only (RESUME would clear DOWN too), with our record's drain entry retired
    assert " update NodeName=n1 State=UNDRAIN 'Extra={" in updates(back)[-1]
    n1.lab.wait_for(lambda: "DRAIN" not in n1.controller()["state"], 10, "n1 resumed")


def job_state(lab, job: int) -> str:
    return lab.run("squeue", "-h", "-j", str(job), "-o", "%T", check=False).stdout.strip()


def test_busy_node_is_drained_then_reregistered_and_resumed_when_idle(n1):
    lab = n1.lab
    job = lab.sbatch("n1", "--gres=gpu:mi300x:1")
    lab.wait_for(lambda: job_state(lab, job) == "RUNNING", 15, "job running on n1")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, drained = n1.refresh("nps4")

    assert 0 == code, drained
    assert ["read-view", "drain", "hold"] == steps(drained)
    assert job in lab.jobs()
    node = n1.controller()
    assert "DRAIN" in node["state"]
    assert node["reason"].startswith(OUR_PREFIX)

    lab.scancel(job)
    code, done = n1.refresh("nps4")

    assert 0 == code, done
    assert ["read-view", "register", "resume", "none"] == steps(done), [s["reason"] for s in done["steps"]]
    lab.wait_for(lambda: n1.controller()["state"] == ["IDLE"], 10, "n1 resumed and idle")
    assert n1.status()["drain"] is None


def test_a_job_that_just_ended_is_seen_at_once(n1):
    """scontrol loads every node, so the view is fresh where the REST single-node GET is stale."""
    lab = n1.lab
    job = lab.sbatch("n1", "--gres=gpu:mi300x:1")
    lab.wait_for(lambda: job_state(lab, job) == "RUNNING", 15, "job running on n1")
    lab.scancel(job)
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")

    code, document = n1.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)


def test_an_operators_drain_is_never_touched(n1):
    lab = n1.lab
    lab.scontrol("update", "nodename=n1", "state=drain", "reason=NHC: bad ECC on GPU 3")
    n1.root("cpx", mode="CPX")
    n1.root("nps4", memory_mode="NPS4")

    for label in ("cpx", "cpx", "spx", "nps4", "nps4", "spx", "spx"):
        code, document = n1.refresh(label, "--ignore-backoff")
        assert code in (0, exitcode.PROTOCOL), document
        assert not [u for u in updates(document) if "State=" in u], document["requests"]
        node = n1.controller()
        assert node["reason"] == "NHC: bad ECC on GPU 3"
        assert "DRAIN" in node["state"]


def test_an_unknown_node_name_is_68(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path, name="n9")
    node.root("spx")

    code, document = node.refresh("spx")  # no state yet: the first run reads the controller

    assert exitcode.NOHOST == code, document
    assert "n9" in document["steps"][-1]["error"]
    assert node.status()["backoff"]["kind"] == "unknown-node"


def _wrapper(tmp: Path, body: str) -> str:
    path = tmp / "scontrol-wrapper"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_an_update_by_a_non_admin_is_77(n1, tmp_path):
    """Reads work for anyone; the drain as `nobody` gets `slurm_update error: Invalid user id`."""
    scontrol = n1.lab.prefix / "bin" / "scontrol"
    wrapper = _wrapper(tmp_path, f'exec runuser -u nobody -- {scontrol} "$@"')
    (tmp_path / "nobody").mkdir()
    node = Node(n1.lab, tmp_path / "nobody", scontrol=wrapper)
    node.state.parent.mkdir(parents=True, exist_ok=True)
    node.state.write_bytes(n1.state.read_bytes())
    job = n1.lab.sbatch("n1", "--gres=gpu:mi300x:1")
    n1.lab.wait_for(lambda: job_state(n1.lab, job) == "RUNNING", 15, "job running on n1")
    node.root("nps4", memory_mode="NPS4")
    node.refresh("nps4")

    code, document = node.refresh("nps4")

    assert exitcode.NOPERM == code, document
    assert "Invalid user id" in document["steps"][-1]["error"]
    assert "DRAIN" not in n1.controller()["state"]


def test_munge_unreachable_is_69_and_the_state_is_kept(n1, tmp_path):
    """A client whose munge socket does not exist: scontrol fails before reaching slurmctld."""
    conf = tmp_path / "slurm-badmunge.conf"
    conf.write_text(n1.lab.slurm_conf.read_text() + f"\nAuthInfo=socket={tmp_path}/no-munge.socket\n")
    wrapper = _wrapper(tmp_path, f'SLURM_CONF={conf} exec {n1.lab.prefix / "bin" / "scontrol"} "$@"')
    (tmp_path / "m").mkdir()
    node = Node(n1.lab, tmp_path / "m", scontrol=wrapper)
    node.state.parent.mkdir(parents=True, exist_ok=True)
    node.state.write_bytes(n1.state.read_bytes())
    node.root("nps4", memory_mode="NPS4")
    node.refresh("nps4")

    code, document = node.refresh("nps4")

    assert exitcode.UNAVAILABLE == code, document
    assert "munge" in document["steps"][-1]["error"].lower()
    status = node.status()
    assert status["backoff"]["kind"] == "unreachable"
    assert status["baseline"]["devices"] == 8


def test_slurmctld_not_answering_is_69_within_the_timeout(n1):
    lab = n1.lab
    pid = lab.daemon_pid("slurmctld")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")
    os.kill(pid, signal.SIGSTOP)
    try:
        code, document = n1.refresh("nps4", timeout=60)
    finally:
        os.kill(pid, signal.SIGCONT)

    assert exitcode.UNAVAILABLE == code, document
    assert "did not answer within 5 s" in document["steps"][-1]["error"]
    assert n1.status()["baseline"]["devices"] == 8


def test_no_scontrol_is_78(clean_lab, tmp_path):
    node = Node(clean_lab, tmp_path, scontrol=str(tmp_path / "missing" / "scontrol"))
    node.root("spx")
    node.refresh("spx")  # a first sighting needs no controller

    code, document = node.refresh("spx")

    assert exitcode.CONFIG == code, document
    assert "controller.scontrol" in document["error"]["message"]


def test_dry_run_runs_no_update(n1):
    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")
    before = n1.state.read_bytes()

    code, document = n1.refresh("cpx", "--dry-run")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    assert not document["steps"][1]["sent"]
    assert "update NodeName=n1 Gres=gpu:mi300x:64" in document["steps"][1]["request"]
    assert [] == updates(document)
    assert before == n1.state.read_bytes()


def _register_script(tmp: Path) -> tuple[str, Path]:
    """A site's register command: logs each run (one line) and prints something secret-looking."""
    log = tmp / "register.log"
    script = tmp / "site-register"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "re-registered; token=abc123"\n')
    script.chmod(0o755)
    return str(script), log


def _adopted_with_register_command(lab, tmp: Path) -> tuple[Node, str, Path]:
    """n1 in SPX with a site register command, adopted (two readings, no write)."""
    script, log = _register_script(tmp)
    node = Node(lab, tmp, controller={"register_command": [script, "n1"], "register_wait": 10})
    node.root("spx")
    node.refresh("spx")
    node.refresh("spx")
    return node, script, log


def test_register_command_replaces_gres_through_scontrol(clean_lab, tmp_path):
    node, script, log = _adopted_with_register_command(clean_lab, tmp_path)
    node.root("nps4", memory_mode="NPS4")
    node.refresh("nps4")

    code, document = node.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    # no Gres= update: the command did it; then, the GPUs listed, our record of it on its own
    (record,) = updates(document)
    assert ' update NodeName=n1 \'Extra={"spurinv":' in record
    assert document["fingerprint"] in node.controller()["extra"]
    # the step names both writes, as a dry run describes them and a failed save must
    assert document["steps"][1]["request"] == f"EXEC {script} n1 → 0; then EXEC {record} → 0"
    assert ["n1"] == log.read_text().split()
    assert "abc123" not in document["_stderr"]
    assert "re-registered" in document["_stderr"]
    assert node.status()["baseline"]["source"] == "registered"


def test_register_command_replaces_the_post_over_rest_too(clean_lab, tmp_path):
    from test_converge import Node as RestNode

    script, log = _register_script(tmp_path)
    node = RestNode(clean_lab, tmp_path)
    text = node.config.read_text().replace("[controller]\n", f"[controller]\nregister_command = {json.dumps([script])}\n")
    node.config.write_text(text)
    node.root("spx")
    node.refresh("spx")
    node.refresh("spx")
    node.root("nps4", memory_mode="NPS4")
    node.refresh("nps4")

    code, document = node.refresh("nps4")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    # no GRES POST: the command did it; then, the GPUs listed, our record of it on its own
    assert [["extra"]] == [list(r["body"]) for r in document["requests"] if r["method"] == "POST"]
    assert 1 == len(log.read_text().splitlines())
    assert node.status()["baseline"]["source"] == "registered"


def test_all_nodes_for_fleet_views_come_from_one_scontrol_call(clean_lab):
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.scontrol import Scontrol

    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=str(clean_lab.prefix / "bin" / "scontrol")), "n1", clean_lab.env
    )

    raw = client.all_nodes()
    views = client.nodes()

    assert ["n1", "n2"] == [n["name"] for n in raw]
    assert [["IDLE"], ["IDLE"]] == [n["state"] for n in raw]
    assert ["gpu:mi300x:8", "gpu:4,fpga:4"] == [v.gres for v in views]
    assert client.version == "slurm 24.11.5"


def test_with_register_command_a_cpu_only_job_is_waited_out_with_our_drain(clean_lab, tmp_path):
    """A register command may restart the node's agent: a CPU-only job holds it off too (a
    drain, then the command once the job ends), where a direct GRES update would not wait."""
    node, _script, log = _adopted_with_register_command(clean_lab, tmp_path)
    job = clean_lab.sbatch("n1", "--cpus-per-task=1")
    clean_lab.wait_for(lambda: job_state(clean_lab, job) == "RUNNING", 15, "CPU job running on n1")
    node.root("nps4", memory_mode="NPS4")
    node.refresh("nps4")

    code, drained = node.refresh("nps4")

    assert 0 == code, drained
    assert ["read-view", "drain", "hold"] == steps(drained)
    assert not log.exists()  # never while a job runs
    assert node.controller()["reason"].startswith(OUR_PREFIX)

    clean_lab.scancel(job)
    code, done = node.refresh("nps4")

    assert 0 == code, done
    assert ["read-view", "register", "resume", "none"] == steps(done), [s["reason"] for s in done["steps"]]
    assert ["n1"] == log.read_text().split()
    clean_lab.wait_for(lambda: node.controller()["state"] == ["IDLE"], 10, "n1 resumed and idle")


@pytest.fixture
def lab_config(clean_lab):
    yield clean_lab
    clean_lab.restore_config()


def test_the_operators_fix_is_seen_at_the_next_tick_over_scontrol(n1, lab_config):
    """Over `scontrol`: refused (76), the operator applies `discover --format slurm`,
    the next tick (inside the backoff) writes our record with Extra= alone and resumes: exit 0."""
    from test_converge import apply_discover_format_slurm

    n1.root("cpx", mode="CPX")
    n1.refresh("cpx")
    assert exitcode.PROTOCOL == n1.refresh("cpx")[0]
    gres = apply_discover_format_slurm(lab_config, n1, "cpx")
    lab_config.wait_for(lambda: n1.controller()["gres"] == gres, 30, f"the controller to list {gres}")

    code, document = n1.refresh("cpx")

    assert 0 == code, document
    assert ["read-view", "record", "resume", "none"] == steps(document)
    record, resume = updates(document)
    assert " Extra=" in record or "'Extra=" in record
    assert "Gres=" not in record
    assert " update NodeName=n1 State=UNDRAIN" in resume
    node = n1.controller()
    assert "DRAIN" not in node["state"]
    assert json.loads(node["extra"])["spurinv"]["fingerprint"] == document["fingerprint"]
