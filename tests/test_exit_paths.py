"""Every exit status the README and the man page document happens, on the path they name
(issue #13: the tables said one thing and the program did another).

Each scenario is a real situation: fixture roots, a state file in tmp, and for the controller's
answers the fault server on 127.0.0.1. With ``--json`` each failure is also one JSON document.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultserver import ERRORS, FaultServer, Gateway, Reply

from spurinv import exitcode, store
from spurinv.report import ErrorDocument

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
        ErrorDocument.model_validate(document)


def test_the_scenarios_cover_the_table_and_nothing_else():
    # 70 (a bug) has its own test below: it needs a broken spurinv, not a bad input
    assert set(MEANING) == set(SCENARIOS) | {exitcode.SOFTWARE}


def test_an_internal_error_is_70_in_one_line(tmp_path, env):
    """A crash (here: spurinv's own module made unimportable for the run) is one line and 70."""
    import subprocess
    import sys

    shadow = tmp_path / "shadow" / "spurinv"
    shadow.mkdir(parents=True)
    (shadow / "render.py").write_text("raise RuntimeError('boom')\n")
    package = Path(__import__("spurinv").__file__).parent
    for source in package.glob("*.py"):
        if source.name != "render.py":
            (shadow / source.name).write_text(source.read_text())
    (shadow / "sources").symlink_to(package / "sources")
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
    assert os.path.exists(shadow / "cli.py")
