"""A Slurm dynamic node re-registers by itself through ``spurinv-slurm-dynamic``, on
the real Slurm 24.11 lab: node ``d1`` is ``slurmd -Z --conf "… Gres=${SLURMD_GRES}"`` (lab/slurm/
slurmd-dynamic.sh, the lab's stand-in for a systemd unit with EnvironmentFile=), spurinv reaches
slurmctld through ``scontrol`` and re-registers through the shipped command.

The lab differs from a real node only in where its device files live: the register command is
wrapped so the gres.conf lines spurinv passes name the lab's files under $LAB_DIR (and no Cores=:
the lab's node has 2 CPUs, the fixture's 192).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import rootbuilder as rb

from spurinv import exitcode

pytestmark = pytest.mark.e2e

NAME = "d1"

WRAPPER = r"""
import os, re, sys
lab = os.environ["LAB_DIR"]
lines = os.environ.get("SPURINV_GRES_CONF", "")
lines = re.sub(r" Cores=\S+", "", lines.replace("File=/dev/", f"File={lab}/dev/{sys.argv[1]}/"))
os.environ["SPURINV_GRES_CONF"] = lines
os.execv(sys.executable, [sys.executable, "-m", "spurinv.slurmdynamic", *sys.argv[2:]])
"""


class Dynamic:
    """spurinv on the dynamic node: scontrol transport, register_command = spurinv-slurm-dynamic."""

    def __init__(self, lab, tmp: Path, transport: str = "scontrol") -> None:
        self.lab, self.tmp = lab, tmp
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700)
        wrapper = tmp / "register"
        wrapper.write_text(f"#!{sys.executable}\n{WRAPPER}")
        wrapper.chmod(0o755)
        scontrol = str(lab.prefix / "bin" / "scontrol")
        command = [str(wrapper), NAME, "--gres-conf", str(lab.slurm_conf.parent / "gres.conf"),
                   "--env-file", str(lab.dynamic_env_file(NAME)), "--restart", " ".join(lab.restart_dynamic_argv(NAME)),
                   "--scontrol", scontrol]  # fmt: skip
        self.config = tmp / "config.toml"
        if transport == "rest":
            token = tmp / "token"
            token.write_text(lab.token("root") + "\n")
            token.chmod(0o600)
            reach = f'url = "{lab.rest_url}"\nauth = "slurm-jwt"\nuser = "root"\ntoken_file = "{token}"\n'
        else:
            reach = f'transport = "scontrol"\nscontrol = "{scontrol}"\n'
        self.config.write_text(
            f'[node]\nname = "{NAME}"\n[controller]\n{reach}timeout = 10\n'
            f"register_command = {json.dumps(command)}\nregister_wait = 30\n"
            "[policy]\nconfirm_interval = 0\nbackoff_initial = 60\n"
        )
        self.config.chmod(0o600)
        self.roots = {mode: rb.build_mi300x(tmp / f"root-{mode}", mode, gpus=8) for mode in ("SPX", "CPX")}

    def refresh(self, mode: str) -> tuple[int, dict]:
        env = {**self.lab.env, "SPURINV_CONFIG": str(self.config)}
        env.pop("JOURNAL_STREAM", None)
        argv = ["refresh", "--root", str(self.roots[mode]), "--state", str(self.state), "--json"]
        proc = subprocess.run([sys.executable, "-m", "spurinv", *argv], capture_output=True, text=True, env=env,
                              timeout=180, check=False)  # fmt: skip
        try:
            document = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"exit {proc.returncode}, no JSON: {proc.stdout}\n{proc.stderr}") from None
        document["_stderr"] = proc.stderr
        return proc.returncode, document

    def controller(self) -> dict:
        return next(n for n in self.lab.nodes() if n["name"] == NAME)

    def status(self) -> dict:
        proc = subprocess.run([sys.executable, "-m", "spurinv", "status", "--state", str(self.state), "--json"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return json.loads(proc.stdout)


def steps(document: dict) -> list[str]:
    return [step["action"] for step in document["steps"]]


@pytest.fixture(params=["scontrol", "rest"])
def d1(clean_lab, tmp_path, request):
    lab = clean_lab
    files = f"{lab.lab_dir}/dev/{NAME}/dri/renderD[128-135]"
    try:
        # every device file CPX will name exists from the start (the kernel makes them on a switch)
        lab.configure(NAME, "", [f"NodeName={NAME} Name=gpu Type=mi300x File={lab.lab_dir}/dev/{NAME}/dri/renderD[128-191]"])
        lab.start_dynamic(NAME, "gpu:mi300x:8", [f"NodeName={NAME} Name=gpu Type=mi300x File={files}"])
        node = Dynamic(lab, tmp_path, request.param)
        for _ in range(2):
            code, document = node.refresh("SPX")
            assert code == 0, document
        assert node.status()["baseline"]["source"] == "adopted"
        yield node
    finally:
        lab.stop_dynamic(NAME)


def test_an_idle_dynamic_node_goes_from_8_to_64_gpus_by_itself(d1):
    d1.refresh("CPX")

    code, document = d1.refresh("CPX")

    assert exitcode.OK == code, (document, document["_stderr"])
    assert ["read-view", "register", "none"] == steps(document), document["steps"]
    node = d1.controller()
    assert node["gres"] == "gpu:mi300x:64"
    assert "DRAIN" not in node["state"]
    assert json.loads(node["extra"])["spurinv"]["fingerprint"] == document["fingerprint"]
    status = d1.status()
    assert (status["baseline"]["fingerprint"], status["baseline"]["source"]) == (document["fingerprint"], "registered")
    assert status["drain"] is None
    assert d1.lab.dynamic_env_file(NAME).read_text() == "SLURMD_GRES=gpu:mi300x:64\n"
    # and it schedules on its new GPUs
    job = d1.lab.sbatch(NAME, "--gres=gpu:mi300x:64", wrap="true")
    d1.lab.wait_for(lambda: job not in d1.lab.jobs(), 30, "a job on all 64 GPUs to run and finish")


def test_an_operators_drain_on_a_dynamic_node_is_never_lost_by_a_re_create(d1):
    d1.lab.scontrol("update", f"nodename={NAME}", "state=drain", "reason=admin: burn-in")
    d1.refresh("CPX")

    code, document = d1.refresh("CPX")

    assert exitcode.PROTOCOL == code, document  # the command refused: 77 from it, 76 from spurinv
    node = d1.controller()
    assert (node["reason"], "DRAIN" in node["state"], node["gres"]) == ("admin: burn-in", True, "gpu:mi300x:8")


def test_a_busy_dynamic_node_is_drained_and_converges_once_its_job_ends(d1):
    """CPX (64) → SPX (8) while a job runs: drained with our reason (no delete hits the job); the
    job ends; the next tick re-creates the node with 8 GPUs and nothing of ours is left on it."""
    lab = d1.lab
    d1.refresh("CPX")
    assert d1.refresh("CPX")[0] == exitcode.OK
    assert d1.controller()["gres"] == "gpu:mi300x:64"
    job = lab.sbatch(NAME, "--gres=gpu:mi300x:1")
    lab.wait_for(lambda: lab.run("squeue", "-h", "-j", str(job), "-o", "%T").stdout.strip() == "RUNNING", 30, "job running")
    d1.refresh("SPX")

    code, busy = d1.refresh("SPX")

    assert exitcode.OK == code, busy
    assert "drain" in steps(busy)
    node = d1.controller()
    assert "DRAIN" in node["state"]
    assert node["reason"].startswith("spurinv: [")
    assert node["gres"] == "gpu:mi300x:64"  # nothing deleted under the job
    assert lab.run("squeue", "-h", "-j", str(job), "-o", "%T").stdout.strip() == "RUNNING"

    lab.scancel(job)
    # the lab looks at all nodes, as sinfo would (slurmrestd's single-node GET is stale until one
    # does, and spurinv itself re-checks at most once per controller.busy_recheck: docs/busy.md)
    lab.wait_for(lambda: d1.controller()["state"][:1] == ["IDLE"], 30, "d1 idle after its job")
    code, after = d1.refresh("SPX")

    assert exitcode.OK == code, (after, after["_stderr"])
    assert "register" in steps(after)
    node = d1.controller()
    assert node["gres"] == "gpu:mi300x:8"
    assert "DRAIN" not in node["state"]
    status = d1.status()
    assert (status["baseline"]["fingerprint"], status["drain"]) == (after["fingerprint"], None)
