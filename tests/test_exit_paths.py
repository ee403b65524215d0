"""Every exit status the README and the man page document happens, on the path they name
(the tables said one thing and the program did another).

Each scenario is a real situation: fixture roots, a state file in tmp, and for the controller's
answers the fault server on 127.0.0.1. With ``--json`` each failure is also one JSON document.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultserver import ERRORS, FaultServer, Gateway, Reply

from spurinv import exitcode
from spurinv.report.models import ErrorDocument, adapter
from spurinv.state import store

NODE_PATH = "/slurm/v0.0.42/node/n1"


class Scene:
    """What a scenario gets: the in-process CLI, fixture roots, and a tmp directory."""

    def __init__(self, cli: Callable[..., Any], built: Callable[[str], Path], tmp: Path) -> None:
        self.cli = cli
        self.built = built
        self.tmp = tmp
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists

    def config(self, text: str, name: str = "config.toml") -> Path:
        path = self.tmp / name
        path.write_text(text)
        path.chmod(0o600)
        return path

    def controller(self, url: str, *, token: Path | None = None) -> Path:
        auth = f'auth = "bearer"\ntoken_file = "{token}"\n' if token else ""
        text = f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n{auth}'
        return self.config(text + "[policy]\nconfirm_interval = 0\n[state]\nlock_timeout = 0\n", "controller.toml")

    def refresh(self, *args: Any) -> Any:
        return self.cli("refresh", "--root", self.built("mi300x-spx"), "--state", self.state, "--json", *args)

    def prime(self) -> None:
        """One observe-mode reading of node n1: the next run with a controller confirms and asks it."""
        assert 0 == self.refresh("--confirm-interval", "0", "--config", self.config('[node]\nname = "n1"\n')).code

    def against(self, reply: Reply) -> Any:
        self.prime()
        with FaultServer(gateway=Gateway()) as server:
            server.script("GET", NODE_PATH, reply)
            return self.refresh("--config", self.controller(server.url))


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, never listening, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ok(scene: Scene) -> Any:
    return scene.cli("status", "--state", scene.state, "--json")


def different(scene: Scene) -> Any:
    return scene.cli("diff", "--root", scene.built("mi300x-spx"), "--state", scene.state, "--exit-code", "--json")


def usage(scene: Scene) -> Any:
    return scene.cli("refresh", "--json", "--confirm-interval", "abc")


def corrupt(scene: Scene) -> Any:
    scene.state.parent.mkdir(exist_ok=True)
    scene.state.write_text("{not json")
    return scene.cli("status", "--state", scene.state, "--json")


def unreadable(scene: Scene) -> Any:
    scene.state.mkdir(parents=True)  # a directory where the file should be: cannot be read as root either
    return scene.cli("status", "--state", scene.state, "--json")


def unknown_node(scene: Scene) -> Any:
    return scene.against(Reply(500, ERRORS["unknown-node"]))


def unavailable(scene: Scene) -> Any:
    scene.prime()
    return scene.refresh("--config", scene.controller(f"http://127.0.0.1:{closed_port()}"))


def cantcreat(scene: Scene) -> Any:
    blocker = scene.tmp / "file"
    blocker.write_text("")
    return scene.cli("refresh", "--root", scene.built("mi300x-spx"), "--state", blocker / "state.json", "--json")


def ioerr(scene: Scene) -> Any:
    return scene.cli("discover", "--root", scene.built("vega10-duplicate"), "--json")


def tempfail(scene: Scene) -> Any:
    holder = store.Lock(str(scene.state), 0, "test")
    assert holder.try_acquire()
    try:
        return scene.refresh("--config", scene.config("[state]\nlock_timeout = 0\n"))
    finally:
        holder.release()


def protocol(scene: Scene) -> Any:
    return scene.against(Reply(500, {"errors": [{"error_number": 9001, "description": "x"}]}))


def noperm(scene: Scene) -> Any:
    scene.prime()
    token = scene.tmp / "token"
    token.write_text("secret\n")
    token.chmod(0o644)  # readable by others: refused before anything is sent
    return scene.refresh("--config", scene.controller(f"http://127.0.0.1:{closed_port()}", token=token))


def config_error(scene: Scene) -> Any:
    return scene.refresh("--config", scene.config("[policy]\nconfirm_interval = -5\n"))


SCENARIOS: dict[int, Callable[[Scene], Any]] = {
    exitcode.OK: ok,
    exitcode.DIFFERENT: different,
    exitcode.USAGE: usage,
    exitcode.DATAERR: corrupt,
    exitcode.NOINPUT: unreadable,
    exitcode.NOHOST: unknown_node,
    exitcode.UNAVAILABLE: unavailable,
    exitcode.CANTCREAT: cantcreat,
    exitcode.IOERR: ioerr,
    exitcode.TEMPFAIL: tempfail,
    exitcode.PROTOCOL: protocol,
    exitcode.NOPERM: noperm,
    exitcode.CONFIG: config_error,
}
MEANING = {code: meaning for code, _name, meaning in exitcode.TABLE}


@pytest.mark.parametrize("code", sorted(SCENARIOS))
def test_every_documented_exit_status_happens(cli, built, tmp_path, code):
    meaning = MEANING[code]
    result = SCENARIOS[code](Scene(cli, built, tmp_path))

    assert code == result.code, (meaning, result.err)
    document = json.loads(result.out)
    assert (code, code == 0) == (document["exit_code"], document["ok"])
    if code not in (exitcode.OK, exitcode.DIFFERENT, exitcode.IOERR) and "error" in document:
        adapter(ErrorDocument).validate_python(document)


def test_the_scenarios_cover_the_table_and_nothing_else():
    # 70 (a bug) has its own test below: it needs a broken spurinv, not a bad input
    assert set(MEANING) == set(SCENARIOS) | {exitcode.SOFTWARE}


def test_an_internal_error_is_70_in_one_line(tmp_path, env):
    """A crash (here: spurinv's own module made unimportable for the run) is one line and 70."""
    import shutil
    import subprocess
    import sys

    shadow = tmp_path / "shadow" / "spurinv"
    package = Path(__import__("spurinv").__file__).parent  # type: ignore[arg-type]  # a package has a file
    shutil.copytree(package, shadow, ignore=shutil.ignore_patterns("__pycache__"))
    (shadow / "cli" / "render.py").write_text("raise RuntimeError('boom')\n")
    run = subprocess.run(
        [sys.executable, "-m", "spurinv", "status", "--state", str(tmp_path / "none.json")],
        env={**env, "PYTHONPATH": str(shadow.parent)},
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert exitcode.SOFTWARE == run.returncode, run.stderr
    assert run.stderr.startswith("spurinv: internal error: RuntimeError: boom")
    assert 1 == len(run.stderr.splitlines())
    assert os.path.exists(shadow / "cli" / "app.py")


def _run_with_stdout(env: dict[str, str], stdout: int, *args: object) -> subprocess.CompletedProcess[str]:
    # a process: its file descriptor 1 is the full disk or the closed pipe, flushed at exit too
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
        # a reader that closed the pipe (`spurinv discover | head`) chose to: quiet, 0
        assert ran.returncode == 0, ran.stderr
        assert ran.stderr == ""
    else:
        assert ran.returncode == 74, ran.stderr
        assert ran.stderr == f"spurinv: error: cannot write to standard output: {reason}\n"
    from spurinv.state import file as state_file

    assert state_file.load(str(state_path)) is not None  # the state is whole


@pytest.mark.parametrize("args", [["discover"], ["discover", "--json"], ["discover", "--devices"]])
def test_discover_into_head_exits_quietly(env, built, args):
    """``spurinv discover | head -n 1``: the reader closing the pipe is its choice: exit 0, no words."""
    pipeline = f"{sys.executable} -m spurinv {' '.join(args)} --root {built('mi300x-cpx')} | head -n 1 >/dev/null"
    # bash's PIPESTATUS gives spurinv's own status, not head's
    ran = subprocess.run(
        ["bash", "-c", pipeline + '; echo "status=${PIPESTATUS[0]}" >&2'],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.stderr.strip().splitlines()[-1] == "status=0", ran.stderr
    assert ran.stderr.strip().splitlines() == ["status=0"], ran.stderr


@pytest.mark.parametrize(("args", "code"), [(["status", "--bogus"], 64), (["refresh", "--config", "/nonexistent/x.toml"], 78)])
def test_an_unwritable_stderr_keeps_the_real_exit_status(tmp_path: Path, env: dict[str, str], args, code):
    """With 2>/dev/full every error became exit 1, and a run that logged mid-way died unsaved."""
    # a process: its file descriptor 2 is /dev/full
    with open("/dev/full", "w") as full:
        ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, stderr=full, stdout=subprocess.DEVNULL,
                             timeout=60, check=False)  # fmt: skip

    assert ran.returncode == code


def test_a_refresh_that_logs_with_an_unwritable_stderr_still_saves(tmp_path: Path, env: dict[str, str], built):
    state = tmp_path / "state.json"
    # a process: its file descriptor 2 is /dev/full
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")), "--state", str(state)]
    with open("/dev/full", "w") as full:
        ran = subprocess.run([*argv, "--confirm-interval", "0"], env=env, stderr=full, stdout=subprocess.DEVNULL,
                             timeout=60, check=False)  # fmt: skip

    assert ran.returncode == 0
    assert json.loads(state.read_text())["readings"]


def _full_once_drained(node: Any, monkeypatch: Any) -> None:
    """The state directory's disk is full from the moment the controller shows the drain."""
    import errno

    from spurinv.state import file as state_file

    real_save = state_file.save

    def full_once_drained(path: str, state: Any) -> None:
        if "DRAIN" in node.controller["state"]:
            raise store.StoreError(f"cannot write {path}: No space left on device", errno.ENOSPC)
        real_save(path, state)

    monkeypatch.setattr(state_file, "save", full_once_drained)


def test_a_full_disk_after_a_drain_exits_74_and_still_says_the_drain_was_sent(tmp_path, built, monkeypatch):
    """The drain went out, then the disk filled: the run exits 74 as for any full disk, and its
    document keeps the steps (the drain, sent) and says in the failed save what was sent."""

    from test_intent import adopted, busy_drain_scenario  # tests/ is on sys.path

    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    _full_once_drained(node, monkeypatch)
    document = node.tick("cpx")

    assert document["exit_code"] == exitcode.IOERR
    drain = next(step for step in document["steps"] if step["action"] == "drain")
    assert drain["sent"]
    assert drain["request"].startswith("POST")
    failed = document["steps"][-1]
    assert failed["action"] == "save"
    assert "No space left on device" in failed["error"]
    assert "already sent: drain (POST" in failed["error"]


def test_a_full_disk_after_a_registration_names_its_record_write_too(tmp_path, built, monkeypatch):
    """A re-registration is two writes: the GRES, then our record in ``extra`` as its own update
    (``requests`` lists both). The failed save named only the first, so the message hid that
    the node's extra was rewritten too."""
    import errno

    from test_intent import adopted  # tests/ is on sys.path

    from spurinv.state import file as state_file

    node = adopted(tmp_path, built, gres_policy="accept")
    node.tick("cpx")  # first sighting: no request
    real_save = state_file.save

    def full_once_registered(path: str, state: Any) -> None:
        if node.controller["gres"] != "gpu:mi300x:8":
            raise store.StoreError(f"cannot write {path}: No space left on device", errno.ENOSPC)
        real_save(path, state)

    monkeypatch.setattr(state_file, "save", full_once_registered)
    document = node.tick("cpx")

    assert document["exit_code"] == exitcode.IOERR
    assert [sorted(request["body"]) for request in document["requests"] if request["method"] == "POST"] == [["gres"], ["extra"]]
    failed = document["steps"][-1]
    assert failed["action"] == "save"
    assert "already sent: register (POST" in failed["error"]
    assert '; then POST /slurm/v0.0.42/node/n1 {"extra": ' in failed["error"]


def test_a_stop_after_a_drain_then_a_full_disk_never_says_state_saved(tmp_path, built, monkeypatch):
    """SIGTERM while the drain's answer is on its way, then the disk is full: the stop's step may
    not say "state saved" (it was not), and the failed save still names the drain sent."""
    import signal
    import threading

    from test_intent import Points, adopted, busy_drain_scenario  # tests/ is on sys.path

    class TermAfterPost(Points):
        def touch(self, label: str) -> None:
            super().touch(label)
            if label.startswith("after POST"):
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # systemd stops the unit

    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    _full_once_drained(node, monkeypatch)
    document = node.tick("cpx", TermAfterPost())

    assert document["exit_code"] == exitcode.IOERR
    assert not any("state saved" in (step["error"] or "") for step in document["steps"]), document["steps"]
    drain = next(step for step in document["steps"] if step["action"] == "drain")
    assert drain["error"] == "stopped by SIGTERM; the state was not saved"
    assert "already sent: drain (POST" in document["steps"][-1]["error"]


def test_a_refused_connection_says_nothing_was_sent(cli, built, tmp_path):
    """The controller's port is closed: the request never left, and neither output says "sent";
    the state holds readings (observe mode) but has never read the controller, and says that."""
    scene = Scene(cli, built, tmp_path)
    scene.prime()
    config = scene.controller(f"http://127.0.0.1:{closed_port()}")

    document = scene.refresh("--config", config).json()
    human = scene.cli("refresh", "--root", built("mi300x-spx"), "--state", scene.state, "--config", config, "--ignore-backoff")

    step = document["steps"][0]
    assert (step["request"], step["sent"]) == (f"GET {NODE_PATH}", False)
    assert "Connection refused" in step["error"]
    assert step["reason"].startswith("the controller not read yet")
    lines = [line.strip() for line in human.out.splitlines()]
    assert f"not sent: GET {NODE_PATH}" in lines
    assert not any(line.startswith(("sent:", "would send:")) for line in lines), human.out
    assert "no state yet" not in human.out
