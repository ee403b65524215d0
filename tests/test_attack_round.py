"""Regressions found by the independent attack on the merged 0.2 work (issues #10, #11, #14)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spurinv import process
from spurinv.config import ControllerSection, read_token
from spurinv.errors import TokenError
from spurinv.nodeview import gres_agrees, parse_spur_nodes
from spurinv.secret import Secret

SPUR_NO_GPUS = """NodeName=n1
   State=IDLE Reason=
   Partitions=default
   CPUTot=4 CPUAlloc=0 RealMemory=1000 FreeMem=1000
"""


def test_a_spur_node_without_a_gres_line_has_no_gpus_and_agrees_with_none():
    """spur prints no ``Gres=`` line for a node without GPUs (crates/spur-cli/src/scontrol.rs at
    4cc3da8); taken as "unknown", a CPU-only spur node was refused for ever."""
    (view,) = parse_spur_nodes(SPUR_NO_GPUS)

    assert view.gres == ""
    assert gres_agrees(view.gres, {})
    assert not gres_agrees(view.gres, {"mi300x": 8})


def test_a_grandchild_holding_the_pipes_does_not_outlive_the_timeout(tmp_path: Path):
    """A command that leaves a ``setsid`` child holding stdout hung past every timeout."""
    script = tmp_path / "bg.sh"
    script.write_text("#!/bin/sh\nsetsid sleep 30 &\necho $! > " + str(tmp_path / "pid") + "\nsleep 10\n")
    script.chmod(0o755)
    started = time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.run([str(script)], dict(os.environ), 1.0)
        assert time.monotonic() - started < 8
    finally:
        pid_file = tmp_path / "pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), 9)  # the grandchild we started, by PID


def test_an_empty_slurm_jwt_line_is_an_empty_token_not_no_authentication(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=   \n")
    token.chmod(0o600)
    section = ControllerSection(url="http://127.0.0.1:1", auth="slurm-jwt", token_file=str(token))

    with pytest.raises(TokenError, match="empty"):
        read_token(section, {})


def test_columns_zero_still_prints(tmp_path: Path, env: dict[str, str]):
    """COLUMNS=0 made every human output empty (a failed discovery said nothing at all)."""
    ran = subprocess.run(
        [sys.executable, "-m", "spurinv", "status", "--state", str(tmp_path / "state.json")],
        env={**env, "COLUMNS": "0"}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    assert "no runs yet" in ran.stdout


def test_controller_text_cannot_steer_the_terminal():
    """An error body with ESC/OSC/RLO reached the terminal raw from refresh (fleet escaped it)."""
    text = Secret("").scrub("boom\x1b]0;pwn\x07\x1b[2J\u202e")

    assert text.isprintable()
    assert "\\x1b]0;pwn" in text


def test_the_run_deadline_cuts_a_hanging_scontrol(tmp_path: Path, env: dict[str, str], built):
    """``controller.run_deadline`` bounded only REST: a hanging ``scontrol`` ran for its own
    ``controller.timeout`` (25 s here) instead of ending the run at the deadline with 75."""
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "slurm 24.11.5"; exit 0; }\nexec sleep 25\n')
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(
        f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
        "timeout = 30\nrun_deadline = 3\n[policy]\nconfirm_interval = 0\n"
    )
    config.chmod(0o600)
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")), "--state", str(state)]

    started = time.monotonic()  # no state yet: even the first reading reads the controller
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert ran.returncode == 75, (ran.stdout, ran.stderr)
    assert time.monotonic() - started < 15
    assert "run_deadline" in ran.stdout + ran.stderr


# --- the lean path vouches only for what the model accepts (B-1, C-F3) -----------------------------

CORRUPTIONS = {
    "a field of the wrong type": lambda s: s.update(consecutive_failures="many"),
    "a bad timestamp": lambda s: s["readings"][-1].update(taken_at="2026-02-30T18:00:00Z"),
    "an unknown enum value": lambda s: s["baseline"].update(source="guessed"),
    "an unknown drain cause": lambda s: s.update(
        drain={"reason": "spurinv: x", "set_at": "2026-12-02T18:00:00Z", "cause": "bored"}
    ),
    "a field the model does not know": lambda s: s.update(seal="x"),
    "a fingerprint that is not the devices'": lambda s: s["baseline"]["inventory"].update(cpus=1),
    "a reading ok with errors": lambda s: s["readings"][-1].update(errors=[{"source": "pci", "path": "", "reason": "x"}]),
    "a word for the last exit code": lambda s: s["last"].update(exit_code="zero"),
    "a string where a list of readings belongs": lambda s: s.update(readings="ab"),
}


def _steady_state(cli, root, state: Path) -> dict:
    import json

    for _ in range(2):
        assert cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0").code == 0
    return json.loads(state.read_text())


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=list(CORRUPTIONS))
def test_lean_and_full_status_agree_on_a_corrupt_state(cli, built, state_path, capsys, corruption):
    """``status --json`` on the lean path checked only schema_version and said ok: true where the
    full CLI said exit 65."""
    import json

    from spurinv import cli as full
    from spurinv.launch import main

    state = _steady_state(cli, built("mi300x-spx"), state_path)
    CORRUPTIONS[corruption](state)
    state_path.write_text(json.dumps(state))
    args = ["status", "--json", "--state", str(state_path)]
    capsys.readouterr()

    lean_code = main(args)
    lean = json.loads(capsys.readouterr().out)
    full_code = full.run(args)
    whole = json.loads(capsys.readouterr().out)

    assert (lean_code, lean["ok"]) == (full_code, whole["ok"]) == (65, False)
    assert lean == whole


def test_lean_status_still_serves_a_valid_state(cli, built, state_path, monkeypatch):
    """The check hands over only what it cannot vouch for: a state spurinv wrote is served lean."""
    import spurinv.cli

    _steady_state(cli, built("mi300x-spx"), state_path)
    monkeypatch.setattr(spurinv.cli, "run", lambda args: pytest.fail(f"handed over: {args}"))

    result = cli("status", "--json", "--state", state_path)

    assert result.code == 0
    assert result.json()["ok"] is True


@pytest.mark.parametrize("corruption", ["a field of the wrong type", "a bad timestamp", "an unknown drain cause"])
def test_the_tick_hands_a_state_the_model_refuses_to_the_full_run(cli, built, state_path, env, corruption):
    """The fast tick replayed the memo and rewrote the file with the invalid fields carried on;
    the full run moves such a file aside and starts afresh."""
    import json

    from spurinv import state as state_file
    from spurinv import tick

    root = built("mi300x-spx")
    state = _steady_state(cli, root, state_path)
    CORRUPTIONS[corruption](state)
    state_path.write_text(json.dumps(state))
    before = state_path.read_bytes()

    assert tick.run({"--root": str(root), "--state": str(state_path)}, env) is None
    assert state_path.read_bytes() == before  # the tick wrote nothing

    result = cli("refresh", "--root", root, "--state", state_path)

    moved = list(state_path.parent.glob("state.json.corrupt-*"))
    assert result.code == 0, result.err
    assert len(moved) == 1
    assert moved[0].read_bytes() == before
    assert "corrupt state file" in result.err
    assert state_file.load(str(state_path)) is not None  # what is there now, the model accepts


# --- config values are taken as TOML typed them (B-6) ---------------------------------------------


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('[controller]\ntimeout = "5"\n', 'controller.timeout: "5" is a string; expected a number > 0 and <= 120'),
        ('[controller]\nverify = "off"\n', 'controller.verify: "off" is a string; expected true or false'),
        ("[controller]\nverify = 0\n", "controller.verify: 0 is an integer; expected true or false"),
        ('[policy]\nbackoff_max = "60"\n', 'policy.backoff_max: "60" is a string; expected a whole number >= 1'),
        ('[state]\nlock_timeout = "1"\n', 'state.lock_timeout: "1" is a string; expected a number >= 0'),
        ('[controller]\ncredential = "../../etc/shadow"\n', 'controller.credential: "../../etc/shadow" is not valid'),
        ('[controller]\ncredential = "a/../b"\n', 'controller.credential: "a/../b" is not valid'),
        ('[controller]\ncredential = "/etc/shadow"\n', 'controller.credential: "/etc/shadow" is not valid'),
    ],
)
def test_a_config_value_of_the_wrong_type_is_a_config_error_not_coerced(cli, env, line, said):
    """``timeout = "5"`` was taken as 5.0 and ``verify = "off"`` as false (pydantic's lax mode);
    a credential name with ``..`` read a file outside ``$CREDENTIALS_DIRECTORY``."""
    path = env["SPURINV_CONFIG"]
    Path(path).write_text(line)

    result = cli("config", "show")

    assert result.code == 78
    assert result.err.splitlines() == [result.err.splitlines()[0]]
    assert result.err.startswith(f"spurinv: error: {path}: {said}"), result.err


def test_numbers_and_booleans_typed_as_toml_types_them_still_load(cli, env):
    Path(env["SPURINV_CONFIG"]).write_text(
        '[controller]\ntimeout = 5\nverify = false\ncredential = "spurinv.token"\n[policy]\nconfirm_interval = 0\n'
    )

    result = cli("config", "show", "--json")

    assert result.code == 0, result.err
    values = result.json()["values"]
    assert (values["controller.timeout"], values["controller.verify"], values["policy.confirm_interval"]) == (5.0, False, 0.0)


# --- fleet: state words that are not a list of strings (C-F6) --------------------------------------


@pytest.mark.parametrize("flags", ["DRAIN", None, ["DRAIN", 1]], ids=["a string", "null", "a number among them"])
def test_fleet_refuses_state_flags_that_are_not_a_list_of_strings(cli, env, flags):
    """``state_flags: "DRAIN"`` (the v0.0.38 dialect) was read letter by letter: exit 0 and a node
    with the flags D, R, A, I, N. Like any malformed answer it is a protocol error (76)."""
    import json

    sys.path.insert(0, str(Path(__file__).parent))
    from faultserver import FaultServer, Reply

    captured = Path(__file__).parent / "fixtures/slurm/responses/22.05/v0.0.38/nodes-n1-drained-n2-idle.json"
    body = json.loads(captured.read_text())
    body["nodes"][0]["state_flags"] = flags
    with FaultServer() as server:
        server.script("GET", "/openapi/v3", Reply(200, {"paths": {"/slurm/v0.0.38/node/{node_name}": {"get": {}}}}))
        server.script("GET", "/slurm/v0.0.38/nodes", Reply(200, body))
        Path(env["SPURINV_CONFIG"]).write_text(f'[controller]\nurl = "{server.url}"\n')

        result = cli("fleet", "--json")

    assert result.code == 76, result.err
    assert result.json()["error"]["code"] == "controller-protocol"
    assert "state_flags" in result.json()["error"]["message"]
    assert len(result.err.splitlines()) == 1


# --- the recorded outcome of a run whose metrics write failed (C-F4) -------------------------------


def test_status_shows_the_real_exit_status_of_a_run_whose_metrics_write_failed(cli, built, state_path, tmp_path, env):
    """The state is written first, then the metrics; when the metrics failed (73) the saved record
    still said exit 0, and ``status`` showed a clean run. Full run and tick alike."""
    from spurinv import tick

    root = built("mi300x-spx")
    missing = tmp_path / "no-such-dir" / "spurinv.prom"
    args = ("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0", "--metrics-file", missing)
    for _ in range(2):  # a first sighting, then the confirmation: full runs
        assert cli(*args).code == 73
        full = cli("status", "--json", "--state", state_path).json()["last_decision"]
        assert full["exit_code"] == 73
        assert full["actions"][-1].startswith(f"metrics: metrics file: cannot write {missing}")

    assert tick.run({"--root": str(root), "--state": str(state_path), "--metrics-file": str(missing)}, env) == 73
    ticked = cli("status", "--json", "--state", state_path).json()
    human = cli("status", "--state", state_path)

    assert ticked["last_decision"]["exit_code"] == 73
    assert ticked["last_decision"]["actions"][-1].startswith(f"metrics: metrics file: cannot write {missing}")
    assert ticked["last_decision"]["at"] >= full["at"]
    assert "exit 73" in human.out

    missing.parent.mkdir()
    assert cli(*args).code == 0
    assert cli("status", "--json", "--state", state_path).json()["last_decision"]["exit_code"] == 0


# --- standard output that cannot be written (B-5) ---------------------------------------------------


def _run_with_stdout(env: dict[str, str], stdout: int, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spurinv", *map(str, args)],
        env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [("refresh",), ("refresh", "--json"), ("status", "--json"), ("status",), ("discover", "--json"), ("version",)],
    ids=["lean tick", "full refresh --json", "lean status --json", "full status", "discover --json", "version"],
)
@pytest.mark.parametrize("sink", ["/dev/full", "a closed pipe"])
def test_a_stdout_that_cannot_be_written_is_one_line_and_74(cli, built, state_path, env, command, sink):
    """``spurinv refresh > /dev/full`` (or a reader that went away) was a traceback and exit 1 on
    the fast path and "internal error" (70) on the full one."""
    root = built("mi300x-spx")
    for _ in range(2):
        assert cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0").code == 0
    args = [*command]
    if command[0] in ("refresh", "discover"):
        args += ["--root", root]
    if command[0] in ("refresh", "status"):
        args += ["--state", state_path]
    if sink == "/dev/full":
        if not os.path.exists("/dev/full"):
            pytest.skip("this system has no /dev/full")
        with open("/dev/full", "w") as full:
            ran = _run_with_stdout(env, full.fileno(), *args)
    else:
        read, write = os.pipe()
        os.close(read)
        try:
            ran = _run_with_stdout(env, write, *args)
        finally:
            os.close(write)

    reason = "No space left on device" if sink == "/dev/full" else "Broken pipe"
    if sink != "/dev/full" and command[0] != "refresh":
        # issue #25: a reader that closed the pipe (`spurinv discover | head`) chose to: quiet, 0
        assert ran.returncode == 0, ran.stderr
        assert ran.stderr == ""
    else:
        assert ran.returncode == 74, ran.stderr
        assert ran.stderr == f"spurinv: error: cannot write to standard output: {reason}\n"
    from spurinv import state as state_file

    assert state_file.load(str(state_path)) is not None  # the state is whole


# --- a node name scontrol would misread (ALL) is refused before anything is written -----------------


def _scontrol_config(env: dict[str, str], tmp_path: Path, extra: str = "") -> Path:
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "scontrol must not run" >&2\nexit 1\n')
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(f'{extra}[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n[policy]\nconfirm_interval = 0\n')
    config.chmod(0o600)
    return config


@pytest.mark.parametrize("name", ["ALL", "all", "All"])
def test_node_all_on_the_command_line_is_refused_up_front_with_64(cli, built, state_path, env, tmp_path, name):
    """``refresh --node ALL`` with ``transport = "scontrol"`` ran once with exit 0 (a first
    sighting needs no controller) and failed with 78 on the next run."""
    _scontrol_config(env, tmp_path)
    args = ("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--node", name)

    results = [cli(*args), cli(*args, "--json")]

    assert [result.code for result in results] == [64, 64]
    assert results[0].err == (
        f'spurinv: error: --node: node.name: "{name}" is not a node for controller.transport = "scontrol": '
        "scontrol reads ALL, in any case, as every node\n"
    )
    assert results[1].json()["error"]["code"] == "usage"
    assert not state_path.exists()
    assert not state_path.parent.exists() or list(state_path.parent.iterdir()) == []


def test_node_name_all_in_the_config_file_is_78_naming_the_file(cli, built, state_path, env, tmp_path):
    config = _scontrol_config(env, tmp_path, '[node]\nname = "all"\n')

    result = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path)

    assert result.code == 78
    assert result.err.startswith(f'spurinv: error: {config}: node.name: "all" is not a node for controller.transport')
    assert len(result.err.splitlines()) == 1
    assert not state_path.exists()


def test_a_host_named_all_needs_node_name_with_scontrol_but_not_with_rest():
    from spurinv.config import Config
    from spurinv.errors import ConfigError

    with pytest.raises(ConfigError, match=r"the hostname 'all' is not a node for controller\.transport"):
        Config.model_validate({"controller": {"transport": "scontrol"}}).node_name("all.example.org")
    assert Config.model_validate({"controller": {"transport": "scontrol"}, "node": {"name": "n1"}}).node_name("all") == "n1"
    assert Config().node_name("all") == "all"


@pytest.mark.parametrize(("args", "code"), [(["status", "--bogus"], 64), (["refresh", "--config", "/nonexistent/x.toml"], 78)])
def test_an_unwritable_stderr_keeps_the_real_exit_status(tmp_path: Path, env: dict[str, str], args, code):
    """With 2>/dev/full every error became exit 1, and a run that logged mid-way died unsaved."""
    with open("/dev/full", "w") as full:
        ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, stderr=full, stdout=subprocess.DEVNULL,
                             timeout=60, check=False)  # fmt: skip

    assert ran.returncode == code


def test_a_refresh_that_logs_with_an_unwritable_stderr_still_saves(tmp_path: Path, env: dict[str, str], built):
    state = tmp_path / "state.json"
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")), "--state", str(state)]
    with open("/dev/full", "w") as full:
        ran = subprocess.run([*argv, "--confirm-interval", "0"], env=env, stderr=full, stdout=subprocess.DEVNULL,
                             timeout=60, check=False)  # fmt: skip

    assert ran.returncode == 0
    assert json.loads(state.read_text())["readings"]


@pytest.mark.parametrize("version", ['"2"', "2.0", "true", "0"])
def test_a_schema_version_that_is_not_a_version_number_is_corrupt_and_never_rewritten_as_ours(
    tmp_path: Path, cli, version
):
    state = tmp_path / "state.json"
    state.write_text('{"schema_version": ' + version + ', "readings": []}')

    lean = cli("status", "--state", state, "--json")
    full = cli("status", "--state", state)

    assert (lean.code, full.code) == (65, 65)
    assert json.loads(lean.out)["ok"] is False
