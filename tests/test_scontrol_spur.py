"""spur through its ``scontrol``: the converge scenarios against a stand-in written from spur's
source (``tests/spurstandin.py``, ROCm/spur 4cc3da8), with the cluster in a JSON file.

spur cannot take a GRES update (its scontrol ignores ``Gres=`` with exit 0), so re-registration
is ``controller.register_command`` (a spurd restart, here the stand-in's ``spurd-restart``),
followed by a read-back until the controller lists the new GPUs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doubles import program

from spurinv import exitcode
from spurinv.config.settings import ControllerSection
from spurinv.controller.nodeview import parse_node
from spurinv.controller.scontrol import Scontrol
from spurinv.errors import ConfigError, ControllerError

OUR_PREFIX = "spurinv:"


class Spur:
    """A spur cluster in a file, its scontrol and spurd-restart commands, and one spurinv node."""

    def __init__(self, tmp: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, gpus: int = 8) -> None:
        self.tmp = tmp
        self.file = tmp / "cluster.json"
        self.hardware = tmp / "hardware.json"
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in ("scontrol", "spurd-restart", "release"):
            program(self.bin / tool, "spurstandin", tool)
        node = {"state": "Idle", "reason": None, "admin_locked": False, "cpus": 192, "alloc_cpus": 0,
                "memory_mb": 1547771, "partitions": ["gpu"], "gpus": ["mi300x"] * gpus}  # fmt: skip
        self.write({"controller_up": True, "admin": True, "nodes": {"n1": node}})
        self.set_hardware(8)
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        self.config = Path(env["SPURINV_CONFIG"])
        monkeypatch.setenv("SPUR_STANDIN_STATE", str(self.file))
        monkeypatch.setenv("SPUR_STANDIN_HARDWARE", str(self.hardware))
        self.configure()

    def configure(self, register: bool = True, **controller: object) -> None:
        settings = {"transport": "scontrol", "scontrol": str(self.bin / "scontrol"), "timeout": 10, "register_wait": 5}
        if register:
            settings["register_command"] = [str(self.bin / "spurd-restart"), "n1"]
        settings.update(controller)
        lines = ["[node]", 'name = "n1"', "[controller]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
        self.config.write_text("\n".join(lines) + "\n")

    def read(self) -> dict:
        return json.loads(self.file.read_text())

    def write(self, cluster: dict) -> None:
        self.file.write_text(json.dumps(cluster))

    def node(self) -> dict:
        return self.read()["nodes"]["n1"]

    def set_node(self, **values: object) -> None:
        cluster = self.read()
        cluster["nodes"]["n1"].update(values)
        self.write(cluster)

    def set_hardware(self, gpus: int) -> None:
        self.hardware.write_text(json.dumps({"gpus": ["mi300x"] * gpus}))

    def restarts(self) -> int:
        path = Path(f"{self.file}.restarts")
        return len(path.read_text().splitlines()) if path.exists() else 0

    def jobs_end(self) -> None:
        subprocess.run([str(self.bin / "release"), "n1"], check=True)


@pytest.fixture
def spur(tmp_path, env, monkeypatch):
    return Spur(tmp_path, env, monkeypatch)


def refresh(cli, spur: Spur, root: Path, *extra: str):
    result = cli("refresh", "--root", root, "--state", spur.state, "--confirm-interval", "0", "--json", *extra)
    try:
        return result.code, result.json(), result.err
    except ValueError:
        raise AssertionError(f"exit {result.code}: {result.out}\n{result.err}") from None


def steps(document: dict) -> list[str]:
    return [step["action"] for step in document["steps"]]


def updates(document: dict) -> list[str]:
    return [r["path"] for r in document["requests"] if r["method"] == "EXEC" and " update " in r["path"]]


@pytest.fixture
def adopted(cli, spur, built):
    """n1 with 8 × MI300X in SPX, as spur lists it: adopted without a write."""
    root = built("mi300x-spx")
    refresh(cli, spur, root)
    code, document, _ = refresh(cli, spur, root)
    assert 0 == code, document
    return spur


def test_adopt_reads_spur_and_writes_nothing(cli, adopted, built):
    status = cli("status", "--state", adopted.state, "--json").json()

    assert status["baseline"]["source"] == "adopted"
    code, document, _ = refresh(cli, adopted, built("mi300x-spx"))
    assert 0 == code
    assert [] == document["requests"]
    assert 0 == adopted.restarts()


def test_busy_drains_then_idle_registers_once_reads_back_64_and_lifts_our_drain(cli, adopted, built):
    adopted.set_node(state="Mixed", alloc_cpus=4)
    cpx = built("mi300x-cpx")
    adopted.set_hardware(64)
    refresh(cli, adopted, cpx)

    code, drained, _ = refresh(cli, adopted, cpx)

    assert 0 == code, drained
    assert ["read-view", "drain", "hold"] == steps(drained)
    node = adopted.node()
    assert node["state"] == "Draining"
    assert node["reason"].startswith(OUR_PREFIX)
    assert 0 == adopted.restarts()

    code, waiting, _ = refresh(cli, adopted, cpx)
    assert (0, ["read-view", "hold"]) == (code, steps(waiting))
    assert 0 == adopted.restarts()

    adopted.jobs_end()
    assert adopted.node()["state"] == "Drain"
    code, done, err = refresh(cli, adopted, cpx)

    assert 0 == code, done
    assert ["read-view", "register", "resume", "none"] == steps(done), [s["reason"] for s in done["steps"]]
    assert 1 == adopted.restarts()
    node = adopted.node()
    assert (64, "Idle", None) == (len(node["gpus"]), node["state"], node["reason"])
    assert done["steps"][1]["request"].startswith("EXEC ")
    assert "spurd-restart n1" in done["steps"][1]["request"]
    assert "registered 64 GPUs" in err  # the command's output is logged
    status = cli("status", "--state", adopted.state, "--json").json()
    assert (status["baseline"]["source"], status["baseline"]["devices"], status["drain"]) == ("registered", 64, None)


def test_an_operators_drain_is_never_touched(cli, adopted, built):
    adopted.set_node(state="Drain", reason="NHC: bad ECC on GPU 3", admin_locked=True)
    # the CPX run's read-back never sees 64 GPUs (spurd has 8): it holds after register_wait either way
    adopted.configure(register_wait=1)
    for name in ("mi300x-cpx", "mi300x-cpx", "mi300x-spx", "mi300x-spx-nps4", "mi300x-spx-nps4", "mi300x-spx"):
        code, document, _ = refresh(cli, adopted, built(name), "--ignore-backoff")
        assert code in (0, exitcode.PROTOCOL), document
        assert not [u for u in updates(document) if "State=" in u], document["requests"]
        node = adopted.node()
        assert (node["state"], node["reason"]) == ("Drain", "NHC: bad ECC on GPU 3")


def test_without_register_command_spur_gets_drain_only_and_we_say_it_cannot_reregister(cli, adopted, built):
    adopted.configure(register=False)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, err = refresh(cli, adopted, cpx)

    assert exitcode.PROTOCOL == code, document
    assert ["read-view", "register", "drain", "hold"] == steps(document)
    assert "cannot re-register" in document["steps"][1]["error"]
    assert "cannot re-register" in err
    assert not [u for u in updates(document) if "Gres=" in u]  # never sent: spur would ignore it
    node = adopted.node()
    assert (node["state"], len(node["gpus"])) == ("Drain", 8)
    assert node["reason"].startswith(OUR_PREFIX)
    # the remedy spur needs, not Slurm's (no slurm.conf to update)
    assert "restart spurd" in node["reason"]
    assert "discover --format slurm" not in node["reason"]

    # spurd restarted by hand: the controller now lists 64; the next run, though the refusal
    # backs off, takes it as registered and resumes (spur has no extra: nothing written)
    adopted.set_node(gpus=["mi300x"] * 64)
    code, after, _ = refresh(cli, adopted, cpx)
    assert 0 == code, after
    assert ["read-view", "record", "resume", "none"] == steps(after)
    assert [u for u in updates(after) if "State=RESUME" not in u] == []
    assert adopted.node()["state"] == "Idle"


def test_a_gres_update_spur_ignores_with_exit_0_is_not_success(spur):
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(spur.bin / "scontrol")), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.post({"gres": "gpu:mi300x:64"})

    assert "refused" == caught.value.kind
    assert "unknown update key 'gres'" in caught.value.message
    assert 0 == client.sent[-1].status  # spur said 0
    assert 8 == len(spur.node()["gpus"])


def test_all_nodes_are_read_for_fleet_views(spur):
    cluster = spur.read()
    cluster["nodes"]["n2"] = {**cluster["nodes"]["n1"], "state": "Draining", "alloc_cpus": 3, "reason": "r: x=y"}
    spur.write(cluster)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(spur.bin / "scontrol")), "n1", os.environ)

    views = client.nodes()

    assert ["n1", "n2"] == [v.name for v in views]
    assert (views[1].base, views[1].flags, views[1].reason, views[1].idle) == ("ALLOCATED", ("DRAIN",), "r: x=y", False)
    assert client.flavor == "spur"
    raw = client.all_nodes()  # the data parser's shape, for fleet views: the state as its list
    assert [("n1", ["IDLE"]), ("n2", ["ALLOCATED", "DRAIN"])] == [(n["name"], n["state"]) for n in raw]
    again = parse_node({"nodes": raw}, "n2")
    assert (again.base, again.flags, again.reason, again.alloc_cpus) == ("ALLOCATED", ("DRAIN",), "r: x=y", 3)


def test_controller_down_is_69_and_the_state_is_kept(cli, adopted, built):
    cluster = adopted.read()
    cluster["controller_up"] = False
    adopted.write(cluster)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.UNAVAILABLE == code, document
    assert "failed to connect to spurctld" in document["steps"][-1]["error"]
    assert document["steps"][-1]["sent"] is False  # scontrol ran; nothing reached spurctld
    status = cli("status", "--state", adopted.state, "--json").json()
    assert (status["backoff"]["kind"], status["baseline"]["devices"]) == ("unreachable", 8)


def test_an_unknown_node_is_68(cli, spur, built, env):
    spur.config.write_text(spur.config.read_text().replace('name = "n1"', 'name = "n9"'))
    root = built("mi300x-spx")

    code, document, _ = refresh(cli, spur, root)  # no state yet: the first run reads the controller

    assert exitcode.NOHOST == code, document
    assert "n9" in document["steps"][-1]["error"]


def test_a_failed_update_of_a_listed_node_is_a_permission_error_77(cli, adopted, built):
    """spur prints only "node update failed"; for a node it has just listed, spurctld's only
    failure is require_admin (crates/spurctld/src/server.rs at 4cc3da8), so: 77, not a refusal."""
    cluster = adopted.read()
    cluster["admin"] = False
    cluster["nodes"]["n1"].update(state="Mixed", alloc_cpus=2)
    adopted.write(cluster)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.NOPERM == code, document
    assert "node update failed" in document["steps"][-1]["error"]
    assert "not a spur admin" in document["steps"][-1]["error"]
    assert adopted.node()["state"] == "Mixed"
    status = cli("status", "--state", adopted.state, "--json").json()
    assert status["refusal"] is None  # nothing to wait out: an operator fixes the account


def test_a_failing_register_command_is_76_and_its_output_is_logged_without_secrets(cli, adopted, built, tmp_path):
    failing = tmp_path / "failing-register"
    failing.write_text("#!/bin/sh\necho 'restart failed; token=abc123 Authorization: Bearer s3cr3t'\nexit 3\n")
    failing.chmod(0o755)
    adopted.configure(register_command=[str(failing)])
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, err = refresh(cli, adopted, cpx)

    assert exitcode.PROTOCOL == code, document
    assert "exited 3" in document["steps"][1]["error"]
    assert "restart failed" in err
    assert "abc123" not in err + json.dumps(document)
    assert "s3cr3t" not in err + json.dumps(document)
    reason = adopted.node()["reason"]
    assert reason.startswith(OUR_PREFIX)  # drained, waiting for an operator
    assert "register_command" in reason  # the remedy: the command, not slurm.conf
    assert "discover --format slurm" not in reason


def test_secrets_in_the_register_commands_argv_stay_out_of_output_state_and_log(cli, adopted, built, tmp_path):
    register = tmp_path / "register-with-token"
    register.write_text(f"#!/bin/sh\nexec {adopted.bin / 'spurd-restart'} n1\n")
    register.chmod(0o755)
    adopted.configure(register_command=[str(register), "--token", "abc123def", "API_KEY=k3yk3yk3y"])
    adopted.set_hardware(64)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, err = refresh(cli, adopted, cpx)
    dry = cli("refresh", "--root", cpx, "--state", adopted.state, "--dry-run", "--json")
    status = cli("status", "--state", adopted.state, "--json")

    assert 0 == code, document
    assert 1 == adopted.restarts()
    everything = err + json.dumps(document) + dry.out + dry.err + status.out + adopted.state.read_text()
    for secret in ("abc123def", "k3yk3yk3y"):
        assert secret not in everything
    assert "--token <secret>" in json.dumps(document)


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        ({"register_timeout": 0.5}, "did not finish within 0.5 s"),
        # register_timeout (30 s) is longer than what is left of run_deadline (7 s): the deadline wins
        ({"register_timeout": 30, "run_deadline": 7}, "what was left of controller.run_deadline"),
    ],
)
def test_a_register_command_that_hangs_is_killed_69_and_backed_off(cli, adopted, built, tmp_path, limits, words):
    """Killed (its group) at its own limit or the run's, whichever comes first; a command too slow
    for the run is a failure to back off from, not something to run again every tick."""
    hanging = tmp_path / "hanging-register"
    marker = tmp_path / "still-running"
    hanging.write_text(f"#!/bin/sh\nsleep 30\ntouch {marker}\n")
    hanging.chmod(0o755)
    adopted.configure(register_command=[str(hanging)], **limits)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.UNAVAILABLE == code, document
    assert words in document["steps"][-1]["error"]
    assert not marker.exists()
    saved = json.loads(adopted.state.read_text())
    assert saved["intent"]["kind"] == "register"  # it may have worked before it was killed
    assert saved["backoff"]["kind"] == "unreachable"
    code, held, _ = refresh(cli, adopted, cpx)
    assert exitcode.TEMPFAIL == code, held
    assert [] == held["requests"]  # backed off: the command is not run again at once


def test_too_little_of_the_run_left_starts_no_register_command_75(cli, adopted, built):
    """Started with a second left it would be killed at once, perhaps half done."""
    adopted.configure(run_deadline=2)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.TEMPFAIL == code, document
    assert "too little to start register_command" in document["steps"][-1]["error"]
    assert 0 == adopted.restarts()


def test_a_failing_register_command_never_drains_over_an_operators_drain_set_meanwhile(cli, adopted, built, tmp_path):
    """The refusal is judged on the controller after the command, not on the look before it."""
    failing = tmp_path / "drain-then-fail"
    failing.write_text(f"#!/bin/sh\n{adopted.bin / 'scontrol'} update NodeName=n1 State=DRAIN 'Reason=bob: bad fan'\nexit 1\n")
    failing.chmod(0o755)
    adopted.configure(register_command=[str(failing)])
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.PROTOCOL == code, document
    assert not [u for u in updates(document) if "State=DRAIN" in u]
    assert adopted.node()["reason"] == "bob: bad fan"
    adopted.configure(register_command=[str(adopted.bin / "spurd-restart"), "n1"])
    adopted.set_hardware(64)
    code, later, _ = refresh(cli, adopted, cpx, "--ignore-backoff")
    assert not [u for u in updates(later) if "State=RESUME" in u]  # bob's drain stays bob's
    assert adopted.node()["reason"] == "bob: bad fan"


def test_a_register_command_that_took_effect_but_exited_nonzero_counts_as_applied(cli, adopted, built, tmp_path):
    applied = tmp_path / "restart-then-fail"
    applied.write_text(f"#!/bin/sh\n{adopted.bin / 'spurd-restart'} n1\nexit 1\n")
    applied.chmod(0o755)
    adopted.configure(register_command=[str(applied)])
    adopted.set_hardware(64)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, err = refresh(cli, adopted, cpx)

    assert 0 == code, document
    assert "lists the new GPUs" in err
    assert cli("status", "--state", adopted.state, "--json").json()["baseline"]["source"] == "registered"
    assert adopted.node()["state"] == "Idle"


def test_the_run_deadline_ends_the_read_back_as_a_refusal_76(cli, adopted, built):
    """register_wait (60 s) is longer than the run: not listed by the run's end is a refusal (backed off)."""
    adopted.configure(register_wait=60, run_deadline=8, timeout=3)  # spurd re-registers the 8 its hardware says
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.PROTOCOL == code, [(s["action"], s["error"]) for s in document["steps"]]
    assert 1 == adopted.restarts()
    assert "the rest of controller.run_deadline" in document["steps"][1]["error"]
    assert ["read-view", "register", "drain", "hold"] == steps(document)  # one timeout was kept for it
    assert adopted.node()["reason"].startswith(OUR_PREFIX)
    assert cli("status", "--state", adopted.state, "--json").json()["refusal"] is not None


def test_ignore_backoff_buys_one_retry_of_a_refused_registration_not_one_per_step(cli, adopted, built, tmp_path):
    """An operator's `--ignore-backoff` re-ran a failing register command up to the step limit
    (a spurd restart seven times in one run)."""
    count = tmp_path / "runs"
    failing = tmp_path / "failing-register"
    failing.write_text(f"#!/bin/sh\necho x >> {count}\nexit 3\n")
    failing.chmod(0o755)
    adopted.configure(register_command=[str(failing)])
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)
    code, first, _ = refresh(cli, adopted, cpx)
    assert exitcode.PROTOCOL == code, first

    code, retried, _ = refresh(cli, adopted, cpx, "--ignore-backoff")

    assert exitcode.PROTOCOL == code, retried
    assert 2 == len(count.read_text().splitlines())  # one in each run
    assert steps(retried).count("register") == 1


def test_a_register_command_without_effect_is_76_after_register_wait(cli, adopted, built):
    adopted.configure(register_wait=0.5)  # hardware file still says 8: spurd re-registers 8
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx)

    assert exitcode.PROTOCOL == code, document
    assert "still lists" in document["steps"][1]["error"]
    assert 1 == adopted.restarts()


def test_dry_run_never_runs_the_register_command(cli, adopted, built):
    adopted.set_hardware(64)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)

    code, document, _ = refresh(cli, adopted, cpx, "--dry-run")

    assert 0 == code, document
    assert ["read-view", "register", "none"] == steps(document)
    assert not document["steps"][1]["sent"]
    assert "spurd-restart n1" in document["steps"][1]["request"]
    assert 0 == adopted.restarts()


def test_a_busy_node_never_gets_the_register_command(cli, adopted, built):
    """Even if a job lands between the policy's view and the command: checked again first."""
    from spurinv.controller.registration import Registrar
    from spurinv.log import Log

    adopted.set_node(state="Allocated", alloc_cpus=8)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(adopted.bin / "scontrol")), "n1", os.environ)
    registrar = Registrar((str(adopted.bin / "spurd-restart"), "n1"), 5, 1, os.environ, Log({}))

    result = registrar.register(client, {"mi300x": 64})

    assert not result.applied
    assert "no longer idle" in (result.error or "")
    assert 0 == adopted.restarts()


def test_a_job_that_lands_before_the_register_command_gets_a_busy_drain_not_a_refusal(cli, adopted, built, tmp_path):
    """The policy saw the node idle; a job started before the command: nothing run, nothing
    refused, the same run drains for jobs instead (and re-registers when they end)."""
    count = tmp_path / "shows"
    flip = (
        "import json, os; p = os.environ['SPUR_STANDIN_STATE']; c = json.load(open(p)); "
        "c['nodes']['n1'].update(state='Allocated', alloc_cpus=8); json.dump(c, open(p, 'w'))"
    )
    wrapper = tmp_path / "scontrol-job-lands"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = show ]; then n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; '
        f'[ $n -eq 2 ] && {sys.executable} -S -c "{flip}"; fi\n'
        f'exec {adopted.bin / "scontrol"} "$@"\n'
    )
    wrapper.chmod(0o755)
    cpx = built("mi300x-cpx")
    refresh(cli, adopted, cpx)
    adopted.configure(scontrol=str(wrapper))

    code, document, _ = refresh(cli, adopted, cpx)

    assert 0 == code, document
    assert ["read-view", "register", "drain", "hold"] == steps(document)
    assert 0 == adopted.restarts()
    assert adopted.node()["state"] == "Draining"
    status = cli("status", "--state", adopted.state, "--json").json()
    assert status["refusal"] is None
    assert status["drain"]["cause"] == "busy"


def test_a_node_name_scontrol_would_expand_is_refused(spur):
    settings = ControllerSection(transport="scontrol", scontrol=str(spur.bin / "scontrol"))
    for name in ("n[1-4]", "n1,n2", "-h", "ALL", "all", "a b", "n1\n", ""):
        with pytest.raises(ConfigError):
            Scontrol(settings, name, os.environ)


def test_version_output_that_is_neither_slurm_nor_spur_is_76(spur):
    cluster = spur.read()
    cluster["version"] = "lsf 10.1"
    spur.write(cluster)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(spur.bin / "scontrol")), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)


def gone_or_zombie(pid: int) -> bool:
    """Killed: reaped, or a zombie waiting to be (whoever reaps it may do so between two looks)."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def test_an_interrupted_run_takes_the_register_command_down_with_it(adopted, built, tmp_path, env):
    """SIGINT while the command runs: its whole process group is killed before spurinv exits."""
    started = tmp_path / "started"
    marker = tmp_path / "finished"
    slow = tmp_path / "slow-register"
    slow.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {started}.tmp\nmv {started}.tmp {started}\nwait\ntouch {marker}\n")
    slow.chmod(0o755)
    adopted.configure(register_command=[str(slow)])
    cpx = built("mi300x-cpx")
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(cpx), "--state", str(adopted.state)]
    argv += ["--confirm-interval", "0"]
    run_env = {**env, "SPUR_STANDIN_STATE": str(adopted.file), "SPUR_STANDIN_HARDWARE": str(adopted.hardware)}
    subprocess.run(argv, env=run_env, capture_output=True, check=False, timeout=60)  # first sighting

    with subprocess.Popen(argv, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        deadline = time.monotonic() + 30
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), process.communicate()
        sleeper = int(started.read_text())
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)

    assert process.returncode != 0
    assert gone_or_zombie(sleeper)
    assert not marker.exists()


def test_fleet_reads_every_spur_node_through_scontrol(cli, spur):
    """``spurinv fleet`` with ``transport = "scontrol"`` and no url: our
    drain is found by its reason, an operator's drain is someone else's, a free node unmanaged."""
    cluster = spur.read()
    free = dict(cluster["nodes"]["n1"])
    cluster["nodes"]["n1"].update(state="Drain", reason="spurinv: 8 GPUs -> 64 GPUs (busy)")
    cluster["nodes"]["n2"] = {**free, "state": "Drain", "reason": "NHC: [bold]ECC[/bold]"}
    cluster["nodes"]["n3"] = free
    spur.write(cluster)

    result = cli("fleet", "--json", "--all")

    assert result.code == 0, result.err
    document = result.json()
    assert document["transport"] == "scontrol"
    rows = {row["name"]: row for row in document["nodes"]}
    assert rows["n1"]["drain_owner"] == "spurinv"
    assert rows["n1"]["reason"] == "spurinv: 8 GPUs -> 64 GPUs (busy)"
    assert rows["n2"]["drain_owner"] == "other"
    assert rows["n3"]["managed"] is False
    assert rows["n3"]["drain_owner"] is None
    assert document["summary"]["spurinv_drained"] == 1


def test_fleet_over_scontrol_names_its_program_as_the_controller(cli, spur):
    """the header said `fleet    2026-…` with an empty controller field."""
    document = cli("fleet", "--json").json()
    assert document["controller"].startswith("scontrol (/")  # the program run, resolved on PATH if need be
    assert document["controller"].endswith("/scontrol)")
    text = cli("fleet").out.splitlines()[0]
    assert text.startswith("fleet  20")
    assert "scontrol (" in text


def test_fleet_views_of_spur_nodes_carry_each_nodes_gres_and_an_empty_one_without_gpus(spur):
    """The data parser's shape has a GRES string for every node: spur's ``Gres=`` as listed, and
    ``""`` for a node without GPUs (spur leaves the line out), never None."""
    cluster = spur.read()
    cluster["nodes"]["n2"] = {**cluster["nodes"]["n1"], "gpus": ["mi300x"] * 2}
    cluster["nodes"]["n3"] = {**cluster["nodes"]["n1"], "gpus": []}
    spur.write(cluster)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(spur.bin / "scontrol")), "n1", os.environ)

    raw = client.all_nodes()

    assert [(n["name"], n["gres"]) for n in raw] == [
        ("n1", ",".join(["gpu:mi300x:1"] * 8)),
        ("n2", "gpu:mi300x:1,gpu:mi300x:1"),
        ("n3", ""),
    ]
