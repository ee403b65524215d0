"""An operator's first hour: the rough edges a new operator hit, each fixed.

A missing token is said before the confirm wait and names ``controller.token_file``; a dry run
reads the node once, so a bad token shows there; a wrong URL is one plain line, never a library's
repr; a URL with a path is refused; ``discover`` works for a user who may not read the config;
``status`` says who may read the state; ``discover | head`` ends quietly.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, Gateway
from reliability.hostile import TOKEN, write_private

from spurinv import exitcode

NODE_PATH = "/slurm/v0.0.42/node/n1"


def controller_config(tmp_path: Path, url: str, token: Path | str, extra: str = "") -> Path:
    text = (
        f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
        f'auth = "slurm-jwt"\nuser = "root"\ntoken_file = "{token}"\n{extra}'
    )
    return write_private(tmp_path / "config.toml", text)


def test_a_missing_token_is_said_before_the_confirm_wait_naming_the_key(cli, built, state_path, tmp_path):
    config = controller_config(tmp_path, "http://127.0.0.1:9", tmp_path / "no-token", "[policy]\nconfirm_interval = 30\n")
    started = time.monotonic()
    ran = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--config", config)
    took = time.monotonic() - started
    assert ran.code == exitcode.NOPERM
    assert took < 10, took  # not after the 30 s confirm wait
    assert "controller.token_file" in ran.err
    assert "mode 0600" in ran.err  # and the fix
    assert len(ran.err.strip().splitlines()) == 1


def test_a_dry_run_reads_the_node_once_so_a_bad_token_shows(cli, built, state_path, tmp_path):
    """The node is settled (adopted, unchanged): a dry run needs no request, and used to say
    "no controller request needed" with exit 0 over a bad token. Now it reads the node once."""
    root = built("mi300x-spx")
    token = write_private(tmp_path / "token", TOKEN + "\n")
    with FaultServer(gateway=Gateway(token=TOKEN)) as server:
        server.gateway.add_node("n1")
        config = controller_config(tmp_path, server.url, token)
        for _ in range(2):
            assert cli("refresh", "--root", root, "--state", state_path, "--config", config).code == 0
        good = cli("refresh", "--dry-run", "--json", "--root", root, "--state", state_path, "--config", config)
        write_private(token, "not-the-token\n")
        server.seen.clear()
        bad = cli("refresh", "--dry-run", "--json", "--root", root, "--state", state_path, "--config", config)
        seen = [(request.method, request.path) for request in server.seen]
    assert good.code == 0, good.out
    assert good.json()["steps"][-1]["action"] == "read"
    assert good.json()["steps"][-1]["error"] is None
    assert bad.code == exitcode.NOPERM, bad.out
    assert bad.json()["steps"][-1]["action"] == "read"
    assert "authentication" in bad.json()["steps"][-1]["error"]
    assert seen == [("GET", NODE_PATH)]  # one read, never a write


def test_a_url_with_a_path_is_a_config_error_naming_the_key(cli, tmp_path):
    config = write_private(tmp_path / "c.toml", '[controller]\nurl = "https://127.0.0.1:6820/slurm/v0.0.42"\n')
    ran = cli("config", "show", "--config", config)
    assert ran.code == exitcode.CONFIG
    assert "controller.url" in ran.err
    assert "without a path" in ran.err
    assert "controller.api" in ran.err
    flag = cli("config", "show", "--config", write_private(tmp_path / "d.toml", ""))
    assert flag.code == 0
    for ok in ("https://h:6820", "https://h:6820/", "http://127.0.0.1"):
        write_private(tmp_path / "e.toml", f'[controller]\nurl = "{ok}"\n')
        assert cli("config", "show", "--config", tmp_path / "e.toml").code == 0, ok


@pytest.fixture
def closes_at_once() -> Iterator[int]:
    """A TCP port that accepts and closes without a word (slurmctld's port to an HTTP client)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def refresh_against(cli, built, state_path, tmp_path, url: str):
    root = built("mi300x-spx")
    config = write_private(
        tmp_path / "config.toml", f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
    )
    return cli("refresh", "--root", root, "--state", state_path, "--config", config, "--confirm-interval", "0")


def test_a_port_that_closes_without_answering_is_one_plain_line(cli, built, state_path, tmp_path, closes_at_once):
    ran = refresh_against(cli, built, state_path, tmp_path, f"http://127.0.0.1:{closes_at_once}")
    assert ran.code == exitcode.UNAVAILABLE
    assert "closed the connection without an HTTP answer" in ran.err
    assert "RemoteDisconnected" not in ran.err
    assert "Connection aborted" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1


def test_https_to_a_plain_http_port_says_so_in_one_line(cli, built, state_path, tmp_path):
    with FaultServer(gateway=Gateway()) as server:
        server.gateway.add_node("n1")
        ran = refresh_against(cli, built, state_path, tmp_path, server.url.replace("http://", "https://"))
    assert ran.code == exitcode.UNAVAILABLE
    assert "does not speak TLS on this port" in ran.err
    assert "HTTPSConnectionPool" not in ran.err
    assert "WRONG_VERSION_NUMBER" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1


def test_check_says_the_same_about_a_wrong_url(cli, tmp_path, closes_at_once):
    (tmp_path / "st").mkdir(mode=0o700)
    text = f'[node]\nname = "n1"\n[controller]\nurl = "http://127.0.0.1:{closes_at_once}"\napi = "slurm/v0.0.42"\n'
    config = write_private(tmp_path / "config.toml", text)
    ran = cli("check", "--json", "--root", tmp_path, "--state", tmp_path / "st" / "state.json", "--config", config)
    controller = next(item for item in ran.json()["checks"] if item["name"] == "controller")
    assert controller["status"] == "fail"
    assert "without an HTTP answer" in controller["detail"]


# --- a user who is not root -------------------------------------------------------------------------


SETPRIV = shutil.which("setpriv")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs setpriv and root")


@needs_setpriv
def test_discover_works_where_the_default_config_cannot_be_read(env, built, tmp_path):
    """As the issue's non-root user: /etc/spurinv/config.toml unreadable. Played by root without
    the DAC capabilities (a 0000 file is then unreadable to it), the default path pointed at it."""
    config = write_private(tmp_path / "config.toml", "", 0o000)
    code = (
        "import sys; from spurinv.state import locations; locations.DEFAULT_CONFIG = sys.argv[1]; "
        "from spurinv.cli.launch import main; sys.exit(main(sys.argv[2:]))"
    )
    environ = {key: value for key, value in env.items() if key != "SPURINV_CONFIG"}
    argv = [SETPRIV, "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c", code, str(config)]
    for args in (["discover", "--root", str(built("mi300x-spx"))], ["discover", "--json", "--root", str(built("nvidia-8"))]):
        ran = subprocess.run([*argv, *args], env=environ, capture_output=True, text=True, timeout=60, check=False)  # type: ignore[list-item]  # set: needs_setpriv
        assert ran.returncode == 0, ran.stderr
        assert f"cannot read {config}" in ran.stderr
        assert "default discovery settings" in ran.stderr


@needs_setpriv
def test_status_as_a_user_who_cannot_read_the_state_says_run_as_root(env, cli, built, state_path):
    assert cli("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--confirm-interval", "0").code == 0
    ran = subprocess.run(
        [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "spurinv", "status",  # type: ignore[list-item]  # set: needs_setpriv
         "--state", str(state_path)],
        env=env, capture_output=True, text=True, timeout=60, check=False, cwd="/",
    )  # fmt: skip
    assert ran.returncode == exitcode.NOINPUT, ran.stderr
    assert "run as root" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


# --- a Unix filter ----------------------------------------------------------------------------------


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
