"""Hostile inputs, second pass: files that are not what they seem, text from the
controller and the command line, text that is not UTF-8 (arguments, variables, lone surrogates in
the state file), absurd config numbers and nesting, and a suite that leaves the host alone.

The sysfs/procfs/CDI faults of the same issue (links leaving ``--root``, one PCI function under
two spellings, absurd CPU/memory/device counts, CDI YAML aliases) are rows of the discovery
matrix in ``test_discovery_faults.py``. Every test here failed before the fix it names: a hang
(killed after ``HANG`` seconds), a traceback (exit 70), the wrong file touched, or a leak.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import hostile
import pytest
from faultserver import FaultServer, Gateway, Reply

from spurinv import exitcode
from spurinv.state import locations, store

HANG = 20  # seconds: every run here ends in well under one; a FIFO hang is killed by PID
NODE_PATH = "/slurm/v0.0.42/node/n1"


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in text
    return lines[0]


@pytest.fixture
def observed_state(tmp_path: Path, built, cli) -> Path:
    """A state file from a real observe-mode run (two readings, a baseline)."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    config = hostile.config(tmp_path / "observe.toml")
    for _ in range(2):
        assert 0 == cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config).code
    return state


@pytest.fixture
def gateway_server() -> Iterator[FaultServer]:
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        yield server


# --- files that are not what they seem ---------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expect"),
    [(("refresh",), exitcode.CANTCREAT), (("status",), exitcode.NOINPUT), (("status", "--json"), exitcode.NOINPUT),
     (("diff",), exitcode.NOINPUT)],
    ids=["refresh", "status", "status --json", "diff"],
)  # fmt: skip
def test_a_fifo_as_the_state_file_is_refused_not_waited_on(command, expect, tmp_path, built, spurinv, ledger):
    state = tmp_path / "state.json"
    os.mkfifo(state, 0o600)
    root = ("--root", built("mi300x-spx")) if command[0] != "status" else ()

    ran = spurinv(*command, *root, "--state", state, timeout=HANG)

    ledger.record("hostile files", f"FIFO as the state file: {' '.join(command)}", f"exit {ran.code}")
    assert expect == ran.code, ran
    assert f"{state} is a FIFO, not a regular file" in one_line(ran.err)
    assert state.is_fifo()  # neither moved aside nor replaced
    if "--json" in command:
        assert json.loads(ran.out)["exit_code"] == expect


def test_a_fifo_as_the_token_file_is_refused_before_any_request(tmp_path, built, spurinv, gateway_server, ledger):
    token = tmp_path / "token"
    os.mkfifo(token, 0o600)
    config = hostile.config(tmp_path / "c.toml", gateway_server.url, token_file=token, confirm_interval=0.01)

    ran = spurinv("refresh", "--quiet", "--root", built("mi300x-spx"), "--state", tmp_path / "s.json", "--config", config,
                  timeout=HANG)  # fmt: skip

    ledger.record("hostile files", "FIFO as the token file", f"exit {ran.code}")
    assert exitcode.NOPERM == ran.code, ran
    assert f"token file {token} is a FIFO" in one_line(ran.err)
    assert [] == gateway_server.seen


@pytest.mark.parametrize("how", ["--config", "$SPURINV_CONFIG"])
@pytest.mark.parametrize("command", [("config", "show"), ("config", "show", "--json"), ("refresh",)])
def test_a_fifo_as_the_config_file_is_refused(how, command, tmp_path, built, spurinv, ledger):
    config = tmp_path / "fifo.toml"
    os.mkfifo(config, 0o600)
    args = [*command, *(("--root", built("mi300x-spx"), "--state", tmp_path / "s.json") if command[0] == "refresh" else ())]
    if how == "--config":
        ran = spurinv(*args, "--config", config, timeout=HANG)
    else:
        ran = spurinv(*args, extra_env={"SPURINV_CONFIG": str(config)}, timeout=HANG)

    ledger.record("hostile files", f"FIFO as the config ({how}): {' '.join(command)}", f"exit {ran.code}")
    assert exitcode.CONFIG == ran.code, ran
    assert f"config file {config} is a FIFO, not a regular file" in one_line(ran.err)
    if "--json" in command:
        assert json.loads(ran.out)["error"]["code"] == "config"


@pytest.mark.parametrize("plant", ["hard link to another file", "owned by another user"])
def test_the_lock_file_is_never_truncated_unless_it_is_our_own_single_link_file(plant, tmp_path, built, spurinv_here, ledger):
    """A hard link there made `refresh` truncate and overwrite the linked file with its holder line."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    lock = Path(f"{state}.lock")
    victim = hostile.write_private(tmp_path / "precious.conf", "precious contents\n")
    if plant.startswith("hard link"):
        os.link(victim, lock)
    else:
        hostile.write_private(lock, "precious contents\n")
        os.chown(lock, 4242, 4242)
        victim = lock

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state)  # no one holds the lock: no wait

    lost = victim.read_text() != "precious contents\n"
    ledger.record("hostile files", f"lock file is a {plant}", f"exit {ran.code}", lost=lost)
    assert "precious contents\n" == victim.read_text()
    assert exitcode.CANTCREAT == ran.code, ran
    assert str(lock) in one_line(ran.err)
    assert not state.exists()


def _dead_pid() -> int:
    code = "import os; print(os.getpid())"
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(process.stdout)


@pytest.mark.parametrize("holder", ["a pid that has exited", "a live process that is not spurinv"])
def test_the_lock_message_names_no_stale_holder(holder, tmp_path, ledger):
    """The lock file keeps the last run's line after it ends; only a live spurinv is named."""
    state = str(tmp_path / "state.json")
    pid = _dead_pid() if holder.startswith("a pid") else os.getpid()
    Path(f"{state}.lock").write_text(f"pid {pid} (refresh) since 10:00:00\n")
    fd = os.open(f"{state}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, without rewriting the stale line
    try:
        with pytest.raises(store.LockHeld) as held:
            store.Lock(state, 0, "refresh").acquire()
    finally:
        os.close(fd)

    named = f"pid {pid}" in str(held.value)
    ledger.record("hostile files", f"stale lock holder: {holder}", "named" if named else "not named", lost=named)
    assert f"pid {pid}" not in str(held.value)
    assert "is held by another run" in str(held.value)


def test_a_live_spurinv_holder_is_named(tmp_path, lock_holder, ledger):
    state = tmp_path / "state.json"
    with lock_holder(state) as process, pytest.raises(store.LockHeld) as held:
        store.Lock(str(state), 0, "refresh").acquire()
    named = f"pid {process.pid}" in str(held.value)
    ledger.record("hostile files", "live spurinv lock holder", "named" if named else "not named")
    assert f"held by pid {process.pid} (refresh) since " in str(held.value)


# --- text from the controller and the command line ---------------------------------------------

MARKUP = "fpga[/bold]:1 [link=http://evil.example]x[/link] :warning: [bold red]y"


def test_controller_text_with_rich_markup_is_printed_literally(observed_state, spurinv_here, ledger):
    """A `last.reason` with markup made every `status` exit 70 (MarkupError)."""
    raw = hostile.state_json(observed_state)
    raw["last"]["reason"] = f"spurinv: gres {MARKUP}"
    observed_state.write_text(json.dumps(raw))

    ran = spurinv_here("status", "--state", observed_state, extra_env={"COLUMNS": "400"})

    ledger.record("hostile text", "rich markup in the state's last reason", f"exit {ran.code}")
    assert 0 == ran.code, ran
    assert MARKUP in ran.out


def test_a_gres_with_markup_from_the_controller_renders_and_exits_cleanly(tmp_path, built, spurinv_here, ledger):
    """The adoption step quotes the controller's gres; with markup in it `refresh` exited 70
    after saving the state, and every `status` after it too."""
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1", gres="gpu:mi300x:8,fpga[/bold]:1", gres_used="gpu:mi300x:0(IDX:N/A),fpga[/bold]:0")
    state = tmp_path / "state.json"
    wide = {"COLUMNS": "400"}
    with FaultServer(gateway=gateway) as server:
        config = hostile.config(tmp_path / "c.toml", server.url, token_file=hostile.token(tmp_path / "token"),
                                confirm_interval=0.01)  # fmt: skip
        dry = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config, "--dry-run",
                      extra_env=wide)  # fmt: skip
        real = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config, extra_env=wide)
    status = spurinv_here("status", "--state", state, extra_env=wide)

    codes = [ran.code for ran in (dry, real, status)]
    ledger.record("hostile text", "rich markup in a controller gres", f"exits {codes}")
    assert [0, 0, 0] == codes, (dry, real, status)
    assert hostile.state_json(state)["baseline"]["source"] == "adopted"
    for ran in (real,):
        assert "the controller already lists gpu:mi300x:8,fpga[/bold]:1" in ran.out, ran.out


BAD_NAMES = ["../../../admin/x?y=1#", "-n1", ".n1", "n1/../x", "n 1", "n1%2f", "x" * 65, "n1\n", "ü"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_node_name_cannot_steer_the_url(name, tmp_path, built, spurinv_here, gateway_server, ledger):
    """`--node '../../../admin/x?y=1#'` sent GET /admin/x?y=1 with the auth headers."""
    config = hostile.config(tmp_path / "c.toml", gateway_server.url, token_file=hostile.token(tmp_path / "token"))
    flag = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", tmp_path / "s.json", "--config", config,
                   "--node", name, "--json")  # fmt: skip
    in_file = hostile.config(tmp_path / "n.toml", gateway_server.url, token_file=tmp_path / "token")
    in_file.write_text(in_file.read_text().replace('name = "n1"', f"name = {json.dumps(name)}", 1))
    from_file = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", tmp_path / "s.json", "--config", in_file)

    ledger.record("hostile text", f"node name {name[:30]!r}", f"--node exit {flag.code}, node.name exit {from_file.code}")
    assert [] == gateway_server.seen
    assert exitcode.USAGE == flag.code, flag
    assert json.loads(flag.out)["exit_code"] == exitcode.USAGE
    assert "--node" in one_line(flag.err)
    assert exitcode.CONFIG == from_file.code, from_file
    assert "node.name" in one_line(from_file.err)


def test_discover_format_slurm_refuses_a_bad_node_name(built, spurinv_here):
    ran = spurinv_here("discover", "--root", built("mi300x-spx"), "--format", "slurm", "--node", "a b")
    assert exitcode.USAGE == ran.code
    assert "--node" in one_line(ran.err)


def test_every_path_segment_is_percent_encoded():
    """Belt and braces: even a name that bypassed validation stays one path segment."""
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller

    client = Controller(ControllerSection(url="http://127.0.0.1:9"), "../admin/x?y=1#", None, api="slurm/v0.0.42")
    assert "/slurm/v0.0.42/node/..%2Fadmin%2Fx%3Fy%3D1%23" == client.node_path()


ECHOES = {
    "truncated": hostile.TOKEN[:24],
    "a middle piece": hostile.TOKEN[19:31],
    "upper-cased": hostile.TOKEN.upper(),
    "hex-encoded": hostile.TOKEN.encode().hex(),
    "hex-encoded, upper-cased, truncated": hostile.TOKEN.encode().hex().upper()[6:60],
}


@pytest.mark.parametrize("form", ECHOES)
def test_a_server_echoing_the_token_in_any_form_never_gets_it_stored_or_printed(form, tmp_path, built, spurinv_here, ledger):
    echo = ECHOES[form]
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1")
    state = tmp_path / "state.json"
    with FaultServer(gateway=gateway) as server:
        server.script("GET", NODE_PATH, Reply(500, {"errors": [{"error_number": 9001, "description": f"bad token {echo}"}]}))
        config = hostile.config(tmp_path / "c.toml", server.url, token_file=hostile.token(tmp_path / "token"),
                                confirm_interval=0.01)  # fmt: skip
        runs = [spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config, "--json")]
        runs.append(spurinv_here("status", "--state", state))
    text = "".join(ran.out + ran.err for ran in runs) + state.read_text()

    leaked = echo.lower() in text.lower() or echo[:12].lower() in text.lower()
    ledger.record("hostile text", f"token echoed back {form}", "LEAKED" if leaked else "scrubbed", lost=leaked)
    assert not leaked
    assert "<token>" in hostile.state_json(state)["backoff"]["error"]


def test_server_text_is_bounded_in_messages_and_the_state_file(tmp_path, built, spurinv_here, ledger):
    gateway = Gateway()
    gateway.add_node("n1")
    state = tmp_path / "state.json"
    with FaultServer(gateway=gateway) as server:
        server.script("GET", NODE_PATH, Reply(500, {"errors": [{"error_number": 9001, "description": "A" * 200_000}]}))
        ran = spurinv_here("refresh", "--quiet", "--root", built("mi300x-spx"), "--state", state, "--config",
                      hostile.config(tmp_path / "c.toml", server.url, confirm_interval=0.01))  # fmt: skip
    error = hostile.state_json(state)["backoff"]["error"]

    ledger.record("hostile text", "200 kB of server text", f"{len(error)} characters kept")
    assert len(error) < 1000
    assert len(one_line(ran.err)) < 1000


# --- text that is not UTF-8: arguments, variables, lone surrogates in the state file -----------


@pytest.mark.parametrize("flag", ["--state", "--root", "--metrics-file", "--config"])
def test_an_argument_that_is_not_utf8_is_one_usage_line(flag, built, tmp_path, state_path, env):
    import subprocess
    import sys

    value = os.fsencode(tmp_path) + b"/bad\xff"  # a process: the interpreter decodes its argv
    args = [b"refresh", b"--root", os.fsencode(built("mi300x-spx")), b"--state", os.fsencode(state_path)]
    command = [sys.executable, "-m", "spurinv", *args, flag.encode(), value]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    err = ran.stderr.decode("utf-8")
    assert err.count("\n") == 1, err
    assert f"{flag} {tmp_path}/bad\\xff: not UTF-8" in err
    assert not state_path.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([b"--node", b"n\xff1"], "--node n\\xff1: not UTF-8 text; give a node name that is"),
        ([b"--node=n\xff1"], "--node=n\\xff1: not UTF-8 text; give a node name that is"),
        ([b"--controller-url", b"http://h\xff"], "--controller-url http://h\\xff: not UTF-8 text; give a URL that is"),
        ([b"--accept", b"ab\xffcd"], "--accept ab\\xffcd: not UTF-8 text; give the fingerprint's hex digits"),
        ([b"--state", b"s\xff"], "--state s\\xff: not UTF-8 text; name a path that is"),
        # "--" as --node's value (typer takes it so) ends no options: the word after is --state's
        ([b"--node", b"--", b"--state", b"s\xff"], "--state s\\xff: not UTF-8 text; name a path that is"),
        # --state is --node's value, so that "--" ends the options: the word after is no flag's
        ([b"--node", b"--state", b"--", b"--metrics-file", b"s\xff"], "s\\xff: not UTF-8 text; give an argument that is"),
        ([b"--node", b"PATH", b"--", b"--state", b"s\xff"], "s\\xff: not UTF-8 text; give an argument that is"),
        ([b"--node", b"--metrics-file", b"s\xff"], "s\\xff: not UTF-8 text; give an argument that is"),
    ],
    ids=["node", "node=", "controller-url", "accept", "state", "node --", "node --state --", "node PATH --", "node flag"],
)
def test_a_refused_argument_that_is_not_utf8_is_named_for_what_it_is(args, said, env):
    """A node name is no path: the fix names what the argument is."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-m", "spurinv", "refresh", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.decode("utf-8") == f"spurinv: error: {said}\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([b"/x/c\xff.toml"], "PATH /x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"--force", b"/x/c\xff.toml"], "PATH /x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"--", b"/x/c\xff.toml"], "PATH /x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"--config", b"/x/c\xff.toml"], "--config /x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"--config=/x/c\xff.toml"], "--config=/x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"--config", b"--x\xff=y"], "--config --x\\xff=y: not UTF-8 text; name a path that is"),
        ([b"--", b"--x\xff=y"], "PATH --x\\xff=y: not UTF-8 text; name a path that is"),
        ([b"--", b"--config=/x/c\xff.toml"], "PATH --config=/x/c\\xff.toml: not UTF-8 text; name a path that is"),
    ],
    ids=["PATH", "--force PATH", "-- PATH", "config", "config=", "config --x=y", "-- --x=y", "-- --config="],
)
def test_config_init_names_a_path_that_is_not_utf8_as_its_usage_does(args, said, env):
    """A flag that takes no value (--force) or "--" does not own the word after it: that word
    is config init's PATH, and the refusal named it as the flag's value or as an argument. A
    value that looks like ``--x=y`` is still the value of the flag before it, and after "--"
    a word is PATH whatever it looks like."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "spurinv", "config", "init", *args]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.decode("utf-8") == f"spurinv: error: {said}\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([b"--", b"discover", b"--format", b"j\xff"], "--format j\\xff: not UTF-8 text; give table, json or slurm"),
        ([b"--", b"refresh", b"--node", b"--", b"--state", b"s\xff"], "--state s\\xff: not UTF-8 text; name a path that is"),
        ([b"--", b"refresh", b"--", b"--state", b"s\xff"], "s\\xff: not UTF-8 text; give an argument that is"),
        ([b"--", b"config", b"init", b"/x/c\xff.toml"], "PATH /x/c\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"config", b"--", b"init", b"--config", b"/x/c\xff"], "--config /x/c\\xff: not UTF-8 text; name a path that is"),
    ],
    ids=["-- discover --format", "-- refresh --node --", "-- refresh --", "-- config init PATH", "config -- init --config"],
)  # fmt: skip
def test_a_dash_dash_before_the_command_ends_only_the_groups_options(args, said, env):
    """click reads ``spurinv -- discover --format X`` as discover's --format: a "--" before the
    command ends the options of ``spurinv`` (or ``spurinv config``), and the command reads its own
    from the start. The refusal took every word after it for an operand."""
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.decode("utf-8") == f"spurinv: error: {said}\n"
    assert ran.stdout == b""


@pytest.mark.parametrize(
    ("args", "document"),
    [
        ([b"--", b"status", b"--json", b"--state", b"s\xff"], True),
        ([b"status", b"--state", b"--", b"--json", b"s\xff"], True),  # "--" is --state's value
        ([b"status", b"--", b"--json", b"s\xff"], False),  # an operand, as click reads it
        ([b"refresh", b"--node", b"--json", b"--state", b"s\xff"], False),  # --node's value
    ],
    ids=["-- status --json", "--state -- --json", "status -- --json", "--node --json"],
)
def test_a_refusal_is_a_json_document_where_click_reads_json_as_the_flag(args, document, env):
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.decode("utf-8").count("\n") == 1, ran
    if document:
        parsed = json.loads(ran.stdout)
        assert (parsed["command"], parsed["error"]["code"], parsed["exit_code"]) == ("status", "usage", 64)
    else:
        assert ran.stdout == b""


@pytest.mark.parametrize(
    ("args", "said", "document"),
    [
        ([b"status", b"--node", b"n\xff"], "n\\xff: not UTF-8 text; give an argument that is", None),
        ([b"status", b"--node=n\xff"], "--node=n\\xff: not UTF-8 text; give an argument that is", None),
        ([b"check", b"--format", b"j\xff"], "j\\xff: not UTF-8 text; give an argument that is", None),
        ([b"status", b"--node", b"--json", b"n\xff"], "n\\xff: not UTF-8 text; give an argument that is", "status"),
        ([b"status", b"--root", b"/x", b"--json", b"n\xff"], "n\\xff: not UTF-8 text; give an argument that is", "status"),
        ([b"config", b"init", b"--json", b"/x/c\xff"], "PATH /x/c\\xff: not UTF-8 text; name a path that is", None),
        ([b"--json", b"status", b"--state", b"s\xff"], "--state s\\xff: not UTF-8 text; name a path that is", None),
        ([b"refresh", b"--node", b"--json", b"n\xff"], "n\\xff: not UTF-8 text; give an argument that is", None),
    ],
    ids=["status --node", "status --node=", "check --format", "status --node --json", "status --root --json",
         "config init --json", "--json status", "refresh --node --json"],
)  # fmt: skip
def test_a_refusal_reads_only_the_options_the_command_has(args, said, document, env):
    """status has no --node, check no --format, config init and the group no --json: click stops
    at such an option ("No such option"), so the word after it is no value of it, and --json
    there is no flag click reads. The refusal named a node name or a format the command never
    takes, and gave a JSON document for ``config init --json`` and ``spurinv --json status`` but
    none for ``status --node --json`` (while ``status --root /x --json`` got one)."""
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.decode("utf-8") == f"spurinv: error: {said}\n"
    if document is None:
        assert ran.stdout == b""
    else:
        parsed = json.loads(ran.stdout)
        assert (parsed["command"], parsed["error"]["message"]) == (document, said)


@pytest.mark.parametrize(
    ("args", "document"),
    [(["status", "--node", "--json"], True), (["status", "--root", "/x", "--json"], True),
     (["--json", "status"], False), (["config", "init", "--json", "--bogus"], False)],
    ids=["status --node --json", "status --root /x --json", "--json status", "config init --json --bogus"],
)  # fmt: skip
def test_a_usage_error_is_a_json_document_only_where_the_command_has_json(args, document, env):
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, text=True, check=False)

    assert ran.returncode == 64, ran
    assert "No such option" in ran.stderr
    assert (json.loads(ran.stdout)["error"]["code"] == "usage") if document else ran.stdout == "", ran


@pytest.mark.parametrize(
    ("args", "command"),
    [(["--", "status", "--json", "--bogus"], "status"), (["--", "config", "show", "--json", "--bogus"], "config")],
    ids=["-- status", "-- config show"],
)
def test_a_usage_error_after_a_dash_dash_before_the_command_is_a_json_document(args, command, env):
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, text=True, check=False)

    assert ran.returncode == 64, ran
    parsed = json.loads(ran.stdout)
    assert (parsed["command"], parsed["error"]["code"]) == (command, "usage")
    assert "No such option: --bogus" in parsed["error"]["message"]


def test_a_flag_missing_its_value_after_a_dash_dash_names_the_command(env):
    command = [sys.executable, "-m", "spurinv", "--", "config", "init", "--config"]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    assert ran.returncode == 64, ran
    assert ran.stderr.startswith("spurinv config init: Option '--config' requires an argument."), ran.stderr


def test_a_state_path_variable_that_is_not_utf8_is_a_config_error(built, tmp_path, env):
    import subprocess
    import sys

    environ = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    environ[b"SPURINV_STATE"] = os.fsencode(tmp_path) + b"/s\xff.json"  # a process: the interpreter decodes environ
    command = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx"))]
    ran = subprocess.run(command, env=environ, capture_output=True, check=False)

    assert ran.returncode == 78, ran
    assert "$SPURINV_STATE" in ran.stderr.decode("utf-8")


def test_a_path_variable_that_is_not_utf8_under_json_is_a_config_error_document(built, tmp_path, env):
    import subprocess
    import sys

    environ = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    environ[b"SPURINV_STATE"] = os.fsencode(tmp_path) + b"/s\xff.json"
    ran = subprocess.run([sys.executable, "-m", "spurinv", "status", "--json"], env=environ, capture_output=True, check=False)

    document = json.loads(ran.stdout)
    assert (ran.returncode, document["command"], document["error"]["code"]) == (78, "status", "config")
    assert document["error"]["message"] == f"$SPURINV_STATE ({tmp_path}/s\\xff.json): not UTF-8 text; name a path that is"


def test_status_json_of_a_state_holding_a_lone_surrogate_is_valid_utf8(built, state_path, env, spurinv_here):
    """``"\\udcff"`` is valid JSON: status --json wrote it to stdout as the raw byte (invalid
    UTF-8) or failed writing it (74, blaming stdout)."""
    import subprocess
    import sys

    assert spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["last"]["reason"] = "seen \udcff here"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escape, valid UTF-8
    args = ["status", "--json", "--state", str(state_path)]  # documents.dumps: the lean path and the CLI

    # a process: the bytes written to a real stdout, not the text capsys sees
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    document = json.loads(ran.stdout.decode("utf-8"))
    assert document["last_decision"]["reason"] == "seen \\xff here"


def test_a_lone_surrogate_hand_edited_into_the_state_is_written_back_escaped(built, state_path, spurinv_here):
    """``"boot_id": "\\ud800"`` is valid JSON the model accepts, but the full run's writer (UTF-8)
    could not encode it: every ``refresh`` exited 70 and never got past it."""
    root = built("mi300x-spx")
    assert spurinv_here("refresh", "--root", root, "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["boot_id"] = "x\ud800"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escape

    ran = spurinv_here("refresh", "--root", root, "--state", state_path)

    assert ran.code == 0, ran
    text = state_path.read_bytes().decode("ascii")  # the escape, never a raw surrogate
    assert json.loads(text)["boot_id"] == "x\ud800"  # no boot id under this root: kept as it was


def test_status_of_a_state_holding_a_lone_surrogate_shows_it_escaped(built, state_path, env, spurinv_here):
    """``"node": "vm\\udcff"`` or a reason with ``"\\ud800"`` (valid JSON the model accepts):
    ``spurinv status`` failed writing it (74, blaming standard output)."""
    import subprocess
    import sys

    assert spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["node"] = "vm\udcff"
    saved["last"]["reason"] = "seen \ud800 here"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escapes

    # a process: the bytes written to a real stdout, not the text capsys sees
    command = [sys.executable, "-m", "spurinv", "status", "--state", str(state_path)]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    shown = ran.stdout.decode("utf-8")
    assert "vm\\udcff" in shown
    assert "seen \\ud800 here" in shown


def test_diff_of_a_baseline_holding_a_lone_surrogate_shows_it_escaped(built, state_path, env, spurinv_here):
    """A baseline device's model ``"mi300x\\ud800"`` (fingerprint recomputed: the model accepts
    it): ``spurinv diff`` failed writing the changed field (74, blaming standard output)."""
    import subprocess
    import sys

    from spurinv.inventory.fingerprint import fingerprint

    root = built("mi300x-spx")
    for _ in range(2):
        assert spurinv_here("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0").code == 0
    saved = json.loads(state_path.read_text())
    inventory = saved["baseline"]["inventory"]
    inventory["devices"][0]["model"] = "mi300x\ud800"
    inventory["fingerprint"] = fingerprint(inventory["cpus"], inventory["memory_mb"], inventory["devices"])
    state_path.write_text(json.dumps(saved))

    command = [sys.executable, "-m", "spurinv", "diff", "--root", str(root), "--state", str(state_path)]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    assert "mi300x\\ud800" in ran.stdout.decode("utf-8")


# --- the config file ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("config", "show", "--json"), ("refresh", "--json")])
def test_a_non_utf8_config_is_exit_78_naming_the_file(command, tmp_path, built, spurinv_here, ledger):
    config = tmp_path / "config.toml"
    config.write_bytes(b'[node]\nname = "n\xff1"\n')
    config.chmod(0o600)
    root = ("--root", built("mi300x-spx"), "--state", tmp_path / "s.json") if command[0] == "refresh" else ()

    ran = spurinv_here(*command, *root, "--config", config)

    ledger.record("hostile config", f"non-UTF-8 config: {command[0]}", f"exit {ran.code}")
    assert exitcode.CONFIG == ran.code, ran
    assert f"config file {config} is not UTF-8 text" in one_line(ran.err)
    assert json.loads(ran.out)["error"]["code"] == "config"


ABSURD = {
    "policy.backoff_initial": "[policy]\nbackoff_initial = 1000000000000\nbackoff_max = 1000000000000\n",
    "policy.backoff_max": "[policy]\nbackoff_max = 604801\n",
    "state.lock_timeout": "[state]\nlock_timeout = 601\n",
    "controller.timeout": "[controller]\ntimeout = inf\n",
    "policy.confirm_interval": "[policy]\nconfirm_interval = nan\n",
}


@pytest.mark.parametrize("key", ABSURD)
def test_every_config_number_is_bounded_and_a_bad_one_is_named(key, tmp_path, built, spurinv_here, ledger):
    """`backoff_initial = backoff_max = 10^12` passed validation, then OverflowError (exit 70)
    threw away the pending reading."""
    config = hostile.write_private(tmp_path / "config.toml", ABSURD[key])

    shown = spurinv_here("config", "show", "--config", config)
    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", tmp_path / "s.json", "--config", config)

    ledger.record("hostile config", f"absurd {key}", f"exit {shown.code}/{ran.code}")
    assert (exitcode.CONFIG, exitcode.CONFIG) == (shown.code, ran.code), (shown, ran)
    lines = ran.err.splitlines()  # every problem at once, one line each
    assert "Traceback" not in ran.err
    assert any(key in line for line in lines), lines
    assert all(str(config) in line for line in lines), lines


def test_the_upper_bounds_themselves_are_accepted(tmp_path, spurinv_here):
    config = hostile.write_private(
        tmp_path / "config.toml",
        "[policy]\nbackoff_initial = 604800\nbackoff_max = 604800\n[state]\nlock_timeout = 600\n[controller]\ntimeout = 120\n",
    )
    assert 0 == spurinv_here("config", "show", "--config", config).code


@pytest.mark.parametrize("nesting", ["[", "{a="], ids=["array", "inline table"])
def test_a_config_nested_thousands_deep_is_a_config_error_naming_the_file(nesting, tmp_path, state_path, built, spurinv_here):
    closing = "]" if nesting == "[" else "}"
    config = tmp_path / "deep.toml"
    config.write_text("[node]\nname = " + nesting * 2000 + "1" + closing * 2000 + "\n")
    config.chmod(0o600)

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--config", config, "--state", state_path)

    assert ran.code == 78, ran
    assert str(config) in ran.err, ran.err
    assert "Traceback" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err


# --- the suite itself --------------------------------------------------------------------------


def test_the_suite_never_uses_the_hosts_default_paths(hermetic, ledger):
    """Every test runs with private default paths (conftest's autouse ``hermetic``); the proof
    that nothing reaches the host is scripts/hermetic-check, which CI runs."""
    environ = dict(os.environ)
    paths = [locations.state_path(None, environ), locations.config_path(None, environ)[0], locations.DEFAULT_STATE,
             locations.DEFAULT_CONFIG]  # fmt: skip
    private = all(Path(path).is_relative_to(hermetic) for path in paths)
    ledger.record("hermetic suite", "default state and config paths", "private" if private else "HOST", lost=not private)
    assert private, paths
