"""What an operator sees: usage errors under --json, one exit-code rule for bad
values, plain configuration errors all at once, config show/init, help text, literal output."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import rootbuilder
import typer
from reliability.hostile import write_private

from spurinv import exitcode
from spurinv.cli import app as cli_module
from spurinv.cli import render
from spurinv.config import settings as config
from spurinv.errors import ConfigError
from spurinv.report.models import ErrorDocument, adapter
from spurinv.secret import Secret
from spurinv.state import store

# --- usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["diff", "--json", "--bogus"], "diff"),
        (["refresh", "--json", "--confirm-interval", "abc"], "refresh"),
        (["refresh", "--confirm-interval=abc", "--json"], "refresh"),
        (["status", "--json", "--nope"], "status"),
        (["discover", "--json", "--format", "yaml"], "discover"),
        (["discover", "--json", "--format", "slurm"], "discover"),
        (["config", "show", "--json", "--bogus"], "config"),
        (["refresh", "--json", "--accept", "d52907f"], "refresh"),
    ],
)
def test_a_usage_error_under_json_is_a_json_error_document_and_64(cli, args, command):
    result = cli(*args)

    assert exitcode.USAGE == result.code
    document = adapter(ErrorDocument).validate_python(result.json())
    assert (command, False, 64, "usage") == (
        document["command"],
        document["ok"],
        document["exit_code"],
        document["error"]["code"],
    )
    assert "Input should be" not in result.out + result.err  # typer's pydantic words, said plainly


def test_an_invalid_format_is_64_without_json_too(cli):
    result = cli("discover", "--format", "yaml")

    assert (exitcode.USAGE, "") == (result.code, result.out)
    assert "--format yaml: expected table, json or slurm" in result.err


def test_an_unknown_option_points_to_the_commands_help(cli):
    result = cli("refresh", "--bogus")

    assert exitcode.USAGE == result.code
    assert ["spurinv refresh: No such option: --bogus", "(see spurinv refresh --help)"] == result.err.splitlines()


def test_a_bad_flag_value_is_said_plainly(cli):
    result = cli("refresh", "--confirm-interval", "abc")

    assert "spurinv refresh: --confirm-interval: 'abc' is not a valid number; expected SECONDS" == result.err.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["--confirm-interval", "5", "--confirm-interval", "abc"], "'abc'"),
        (["--confirm-interval=1", "--confirm-interval=bad"], "'bad'"),
        (["--confirm-interval=abc", "--confirm-interval", "xyz"], "'xyz'"),
        (["--confirm-interval", "abc", "--", "--confirm-interval=zzz"], "'abc'"),
        (["--node", "--confirm-interval=5", "--confirm-interval", "abc"], "'abc'"),
        (["--metrics-file", "--confirm-interval", "--confirm-interval", "abc"], "'abc'"),
        (["--confirm-interval", "it's"], '"it\'s"'),
    ],
)
def test_a_bad_flag_value_quoted_is_the_one_refused(cli, args, refused):
    """click refuses the last value it parsed; the message quotes that one, as click spells it."""
    result = cli("refresh", *args)

    assert exitcode.USAGE == result.code
    said = result.err.splitlines()[0]
    assert f"spurinv refresh: --confirm-interval: {refused} is not a valid number; expected SECONDS" == said


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (["refresh", "--node"], "spurinv refresh"),
        (["config", "show", "--config"], "spurinv config show"),
        (["status", "--state"], "spurinv status"),
    ],
)
def test_a_flag_missing_its_value_names_the_command(cli, args, path):
    result = cli(*args)
    flag = args[-1]

    assert exitcode.USAGE == result.code
    assert [f"{path}: Option '{flag}' requires an argument.", f"(see {path} --help)"] == result.err.splitlines()


def test_a_flag_missing_its_value_under_json_names_the_command_in_the_document(cli):
    result = cli("refresh", "--json", "--node")

    assert (exitcode.USAGE, "refresh") == (result.code, result.json()["command"])


def test_bare_spurinv_prints_the_usage_cleanly(cli):
    result = cli()

    assert exitcode.USAGE == result.code
    assert result.err.startswith("Usage: spurinv [OPTIONS] COMMAND [ARGS]...\n")
    assert "(see" not in result.err
    assert "spurinv: usage" not in result.err


# --- one rule: from the command line 64, from the file 78 ------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "key", "toml"),
    [
        ("--confirm-interval", "-5", "policy.confirm_interval", "[policy]\nconfirm_interval = -5\n"),
        ("--api", "v9", "controller.api", '[controller]\napi = "v9"\n'),
        ("--controller-url", "ftp://x", "controller.url", '[controller]\nurl = "ftp://x"\n'),
    ],
)
def test_a_bad_value_is_64_from_a_flag_and_78_from_the_file(cli, env, built, state_path, flag, value, key, toml):
    root = built("mi300x-spx")
    from_flag = cli("refresh", "--root", root, "--state", state_path, flag, value, "--json")
    with open(env["SPURINV_CONFIG"], "w") as handle:
        handle.write(toml)
    from_file = cli("refresh", "--root", root, "--state", state_path, "--json")

    assert (exitcode.USAGE, exitcode.CONFIG) == (from_flag.code, from_file.code)
    assert from_flag.json()["error"]["message"].startswith(f"{flag}: {key}: ")
    assert from_file.json()["error"]["message"].startswith(f"{env['SPURINV_CONFIG']}: {key}: ")
    assert not state_path.exists()


def test_accept_with_fewer_than_8_hex_digits_says_so(cli, built, state_path):
    result = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--accept", "d52907f")

    assert exitcode.USAGE == result.code
    assert "needs 8 or more hex digits" in result.err
    assert not state_path.exists()


def test_a_dry_run_takes_no_lock_and_writes_nothing(cli, built, tmp_path):
    """A dry run by someone who cannot write the state directory (here: the lock is held, and the
    state directory does not exist) still answers, and leaves no file behind."""
    state = tmp_path / "absent" / "state.json"
    busy = tmp_path / "busy" / "state.json"
    holder = store.Lock(str(busy), 0, "test")
    assert holder.try_acquire()
    try:
        settings = tmp_path / "locked.toml"
        settings.write_text("[state]\nlock_timeout = 0\n")
        settings.chmod(0o600)
        fresh = cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--dry-run")
        locked = cli("refresh", "--root", built("mi300x-spx"), "--state", busy, "--dry-run", "--config", settings)
    finally:
        holder.release()

    assert (0, 0) == (fresh.code, locked.code), fresh.err + locked.err
    assert not (tmp_path / "absent").exists()
    assert ["state.json.lock"] == sorted(path.name for path in busy.parent.iterdir())


def test_a_dry_run_says_what_it_would_do_after_a_drain_it_only_describes(tmp_path, built):
    """Busy, confirmed: a dry run describes the drain, then holds on the view that drain would
    leave. Its hold must not say the node is "drained by spurinv": nothing was drained."""
    from datetime import timedelta

    import test_intent  # tests/ is on sys.path
    from test_intent import NONCE, URL, Adapter, Points, adopted, busy_drain_scenario

    from spurinv.inventory.root import Root
    from spurinv.log import Log
    from spurinv.refresh import Options, World, run

    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    node.now += timedelta(minutes=1)
    session = test_intent.requests.Session()  # the transport under the client, as Node.tick mounts it
    session.mount(URL, Adapter(node.gateway, Points()))
    world = World(Root(str(node.roots["cpx"])), {}, clock=lambda: node.now, hostname="n1", log=Log({}, quiet=True),
                  session_factory=lambda: session, entropy=lambda size: bytes.fromhex(NONCE)[:size])  # fmt: skip
    options = Options(state_path=str(node.state_path), config=node.config, config_identity="test", dry_run=True)

    steps = run(world, options)["steps"]

    assert [step["action"] for step in steps] == ["read-view", "drain", "hold"]
    assert not steps[1]["sent"]
    assert "DRAIN" not in node.controller["state"]
    held = "drained by spurinv; waiting for jobs to finish (2 CPUs, gpu:mi300x:2(IDX:0-1) allocated)"
    assert steps[2]["reason"] == "if the requests above were sent: " + held
    buffer = io.StringIO()
    render.refresh(render.console(file=buffer, width=100), run(world, options))
    assert "hold: if the requests above were sent: drained by spurinv" in " ".join(buffer.getvalue().split())


# --- a user who is not root -------------------------------------------------------------------------


SETPRIV = shutil.which("setpriv")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs setpriv and root")


def test_a_dry_run_as_an_unprivileged_user_answers():
    """as a user who cannot write (or read) the 0700 state directory, a dry run still
    answers, exit 0, and touches nothing. Runs spurinv as uid 65534 with the system Python (the
    venv's interpreter may live under /root, which that user cannot enter)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to run spurinv as another user")
    system = "/usr/bin/python3"
    version = subprocess.run(
        [system, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=False
    )
    if version.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip(f"{system} is not Python {sys.version_info[:2]}, so it cannot import this venv's packages")
    base = Path(tempfile.mkdtemp(prefix="spurinv-unprivileged-"))  # pytest's tmp is 0700: out of that user's reach
    try:
        base.chmod(0o755)
        _dry_run_as_nobody(base, system)
    finally:
        shutil.rmtree(base)


def _dry_run_as_nobody(base: Path, system: str) -> None:
    root = rootbuilder.build_mi300x(base / "root", "SPX")
    settings = base / "config.toml"
    settings.write_text("")
    settings.chmod(0o644)
    private = base / "state"
    private.mkdir(mode=0o700)
    (private / "state.json").write_text("{}")
    (private / "state.json").chmod(0o600)
    package = Path(__import__("spurinv").__file__).parent.parent  # type: ignore[arg-type]  # a package has a file
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", system, "-m", "spurinv", "refresh"]
    run = subprocess.run(
        [*command, "--dry-run", "--root", str(root), "--state", str(private / "state.json"), "--config", str(settings)],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{package}:{site}", "COLUMNS": "80"},
        capture_output=True,
        text=True,
        check=False,
        cwd=base,
    )

    assert (0, "") == (run.returncode, run.stderr), run.stdout
    assert "DRY RUN" in run.stdout
    assert "Permission denied; deciding as on a first run" in " ".join(run.stdout.split())
    assert ["state.json"] == [path.name for path in private.iterdir()]


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


# --- configuration errors ----------------------------------------------------------------------

BROKEN = """\
url = "https://ctl:6820"
[nonsense]
a = 1
[controler]
b = 2
[controller]
timout = 3
timeout = -1
auth = "jwt"
[policy]
confirm_interval = "abc"
backoff_max = 1.5
[discovery]
cdi_dirs = "x"
ignore_pci = ["05:00.0"]
"""


def test_every_config_problem_is_reported_at_once_one_line_each(cli, env):
    path = env["SPURINV_CONFIG"]
    with open(path, "w") as handle:
        handle.write(BROKEN)

    result = cli("config", "show")

    assert exitcode.CONFIG == result.code
    lines = result.err.splitlines()
    assert all(line.startswith(f"spurinv: error: {path}: ") for line in lines), lines
    said = "\n".join(line.removeprefix(f"spurinv: error: {path}: ") for line in lines)
    for expected in [
        "url: a key outside any table; did you mean to put it under [controller]?",
        "[nonsense]: unknown table",
        "[controler]: unknown table; did you mean controller?",
        "controller.timout: unknown key in [controller]; did you mean timeout?",
        "controller.timeout: -1 is out of range; expected a number > 0",
        'controller.auth: "jwt" is not allowed; expected one of "none", "slurm-jwt", "bearer"',
        'policy.confirm_interval: "abc" is a string; expected a number >= 0',
        "policy.backoff_max: 1.5 has a fraction; expected a whole number >= 1",
        'discovery.cdi_dirs: "x" is a string; expected an array of strings',
        'discovery.ignore_pci: ["05:00.0"] is not valid; expected PCI addresses like 0000:05:00.0',
    ]:
        assert expected in said, (expected, said)
    assert 10 == len(lines)
    for pydantic in ("Input should", "Extra inputs", "instance of", "Value error", "valid dictionary"):
        assert pydantic not in result.err


def test_a_section_that_is_not_a_table_names_its_keys(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("controller = 5\n")
    path.chmod(0o600)

    with pytest.raises(ConfigError) as caught:
        config.load(str(path), True)

    assert f"{path}: [controller]: 5 is an integer; expected a table with keys url, api" in caught.value.message


def test_config_errors_describe_keys_added_to_the_models_later():
    """The descriptions come from the models, so keys another change adds (a transport choice, a
    deadline) are reported in the same words without touching the reporting code."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    from spurinv.config.problem import Problems, expectation

    class Controller(BaseModel):
        model_config = ConfigDict(extra="forbid")
        transport: Literal["rest", "scontrol"] = "rest"
        run_deadline: float = Field(600.0, gt=0, le=3600)

    class Settings(BaseModel):
        model_config = ConfigDict(extra="forbid")
        controller: Controller = Controller()

    raw = {"controller": {"transport": "ssh", "run_deadline": 0, "run_dedline": 1}}
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate(raw)
    lines = [line for _origin, line in Problems(Settings, "f.toml", {}, {}).lines(caught.value)]

    assert [
        'f.toml: controller.transport: "ssh" is not allowed; expected one of "rest", "scontrol"',
        "f.toml: controller.run_deadline: 0 is out of range; expected a number > 0 and <= 3600",
        "f.toml: controller.run_dedline: unknown key in [controller]; did you mean run_deadline?"
        " (known: transport, run_deadline)",
    ] == lines
    for section, model in config.SECTIONS.items():
        for key, info in model.model_fields.items():
            assert "a value" not in expectation(info), f"{section}.{key} has no description of what it expects"


# --- config init / show ------------------------------------------------------------------------


def test_config_init_writes_a_template_that_parses_and_sets_nothing(cli, tmp_path):
    path = tmp_path / "etc" / "config.toml"

    result = cli("config", "init", path)

    assert 0 == result.code
    text = path.read_text()
    parsed = tomllib.loads(text)
    assert set(parsed) == set(config.SECTIONS)
    assert all(values == {} for values in parsed.values()), parsed  # tables only: every key commented out
    path.chmod(0o600)
    _loaded, origins = config.load(str(path), True)
    assert set(origins.values()) == {"default"}
    for dotted in config.keys():  # noqa: SIM118 (config.keys() is a function, not dict.keys)
        name = dotted.split(".")[1]  # every key is there, commented out with its default
        assert re.search(rf"^#{name} = ", text, re.M), dotted
    uncommented = "\n".join(line.removeprefix("#") if re.match(r"#\w+ = ", line) else line for line in text.splitlines())
    assert tomllib.loads(uncommented) == config.Config().model_dump(mode="json")


def test_config_show_prints_toml_with_each_origin(cli, env, tmp_path):
    path = env["SPURINV_CONFIG"]
    with open(path, "w") as handle:
        handle.write('[node]\nname = "n7"\n[controller]\nverify = false\n')

    result = cli("config", "show")

    assert 0 == result.code
    assert result.out.startswith(f"# read {path}\n")
    assert tomllib.loads(result.out) == config.Config(node={"name": "n7"}, controller={"verify": False}).model_dump(mode="json")  # type: ignore[arg-type]  # tables, as TOML gives them
    assert re.search(rf'^name = "n7"\s+# {re.escape(path)}$', result.out, re.M)
    assert re.search(r"^verify = false\s+# ", result.out, re.M)
    assert re.search(r'^api = "auto"\s+# default$', result.out, re.M)
    assert "True" not in result.out
    assert "''" not in result.out
    assert (path, True) == (
        cli("config", "show", "--json").json()["file"],
        cli("config", "show", "--json").json()["file_exists"],
    )


def test_config_show_says_the_default_file_is_missing(cli, monkeypatch, tmp_path):
    from spurinv.state import locations

    if __import__("os").path.exists(locations.DEFAULT_CONFIG):
        pytest.skip(f"{locations.DEFAULT_CONFIG} exists on this machine")
    monkeypatch.delenv("SPURINV_CONFIG")

    result = cli("config", "show")

    assert result.out.startswith(f"# {locations.DEFAULT_CONFIG} does not exist: every value is a default")


# --- help --------------------------------------------------------------------------------------


def help_text(cli, monkeypatch, columns: int, *command: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = cli(*command, "--help")
    assert 0 == result.code
    return result.out


@pytest.mark.parametrize("columns", [80, 200])
def test_the_top_level_help_lists_every_command_uncut(cli, monkeypatch, columns):
    text = help_text(cli, monkeypatch, columns)

    assert "..." not in text.split("Commands:")[1]
    for name in ("discover", "refresh", "diff", "status", "version", "config"):
        assert re.search(rf"^  {name} +\S", text, re.M), name
    group = help_text(cli, monkeypatch, columns, "config")
    assert "..." not in group.split("Commands:")[1]


PLACEHOLDERS = re.compile(r"`(--[a-z-]+) ([A-Z]+)`")


def readme_options() -> list[tuple[str, str, list[str]]]:
    readme = cli_module.__file__.rsplit("/spurinv/", 1)[0] + "/README.md"
    with open(readme) as handle:
        text = handle.read()
    section = text[text.index("## Options\n") :]
    rows = []
    for line in section[: section.index("\n## ", 1)].splitlines()[3:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for option, placeholder in PLACEHOLDERS.findall(cells[0]):
            rows.append((option, placeholder, cells[1].split(", ")))
    return rows


@pytest.mark.parametrize(("option", "placeholder", "commands"), readme_options())
def test_the_readme_placeholders_are_the_help_placeholders(cli, monkeypatch, option, placeholder, commands):
    """The README's option table is checked against ``--help`` itself (and the man page uses the
    same words: test_docs checks its SYNOPSIS)."""
    for command in commands:
        text = help_text(cli, monkeypatch, 200, *command.split())
        assert re.search(rf"^\s+(-\w, )?{re.escape(option)} {placeholder}\s", text, re.M), (command, option)


def man_synopsis() -> list[tuple[str, str, str]]:
    """``(command, option, PLACEHOLDER)`` from the man page's SYNOPSIS."""
    page = (Path(__import__("spurinv").__file__).parent.parent / "man" / "spurinv.8").read_text()  # type: ignore[arg-type]
    synopsis = page[page.index(".SH SYNOPSIS") : page.index(".SH DESCRIPTION")].replace("\\-", "-")
    found = []
    for chunk in synopsis.split(".br"):
        name = re.search(r"^\.B spurinv ?([a-z ]*)$", chunk, re.M)
        if name:
            for option, placeholder in re.findall(r"^\.RB \[ (--[a-z-]+)\n\.IR ([A-Z]+) \]$", chunk, re.M):
                found.append((name.group(1).strip(), option, placeholder))
    return found


@pytest.mark.parametrize(("command", "option", "placeholder"), man_synopsis())
def test_the_man_synopsis_placeholders_are_the_help_placeholders(cli, monkeypatch, command, option, placeholder):
    text = help_text(cli, monkeypatch, 200, *command.split())

    assert re.search(rf"^\s+{re.escape(option)} {placeholder}\s", text, re.M), (command, option)


def test_no_help_uses_type_names_as_placeholders(cli, monkeypatch):
    tree = typer.main.get_command(cli_module.app)
    for name in ("discover", "refresh", "diff", "status"):
        text = help_text(cli, monkeypatch, 200, name)
        assert "<str>" not in text, name
        assert "<float>" not in text, name
    assert "config" in tree.commands  # type: ignore[attr-defined]


# --- literal output ----------------------------------------------------------------------------


def test_markup_in_outside_text_is_printed_literally():
    out = io.StringIO()
    console = render.console(file=out, width=80)
    document: Any = {  # only what the rendering shows
        "state_file": "/x/[bold]state.json",
        "exists": True,
        "node": "[red]n1[/red]",
        "readings": [],
        "baseline": None,
        "pending": None,
        "last_decision": {"at": "t", "outcome": "o", "action": "a", "reason": "[link=x]r[/link]", "exit_code": 0},
        "api": None,
        "attention": ["spurinv drained this node (busy): spurinv: [blink]x[/blink]"],
    }

    render.status(console, document)

    text = out.getvalue()
    for literal in ("/x/[bold]state.json", "[red]n1[/red]", "[link=x]r[/link]", "[blink]x[/blink]"):
        assert literal in text


def test_status_json_keeps_every_action_of_the_last_run(cli, built, state_path):
    root = built("mi300x-spx")
    cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")
    cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")

    last = cli("status", "--state", state_path, "--json").json()["last_decision"]

    assert "change-confirmed" == last["outcome"]  # the run's outcome, not its last step's
    assert [action.split(":")[0] for action in last["actions"]] == ["observe"]
    assert json.dumps(last)


def test_an_observed_baseline_is_one_story_in_refresh_and_status(cli, built, state_path, tmp_path):
    """Observe mode, then a controller configured: refresh no longer says "no baseline yet" while
    status lists one; both say the baseline was only observed."""
    root = built("mi300x-spx")
    for _ in range(2):
        cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")
    with socket.socket() as probe:  # a controller URL nothing answers: the dry run's GET fails, 69
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"

    run = cli("refresh", "--root", root, "--state", state_path, "--dry-run", "--controller-url", url, "--json")
    status = cli("status", "--state", state_path)

    reason = run.json()["outcome"]["reason"]
    assert "no baseline yet" not in reason
    assert "the baseline was only observed, never told to a controller" in reason
    assert "observed" in status.out
    assert "never told to a controller" in " ".join(status.out.split())


def test_columns_zero_still_prints(tmp_path: Path, env: dict[str, str]):
    """COLUMNS=0 made every human output empty (a failed discovery said nothing at all)."""
    # a process: the terminal width a fresh interpreter's console takes from its environment
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
