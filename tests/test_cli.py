"""The CLI end to end on fixture roots: the confirmation scenario, JSON contracts, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from faultserver import FaultServer, Gateway
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability.hostile import TOKEN, controller_config, write_private

from spurinv import exitcode
from spurinv.report.models import (
    ConfigDocument,
    DiffDocument,
    DiscoverDocument,
    ErrorDocument,
    RefreshDocument,
    StatusDocument,
    adapter,
)

NODE_PATH = "/slurm/v0.0.42/node/n1"


def refresh(cli, root, state, *extra):
    return cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0", "--json", *extra)


def test_spx_to_cpx_scenario_confirms_only_on_two_identical_readings(cli, built, state_path):
    """SPX → pending → baseline; CPX → pending → confirmed with a 1 → 8 diff per GPU."""
    spx, cpx = built("mi300x-spx"), built("mi300x-cpx")

    first = refresh(cli, spx, state_path).json()
    second = refresh(cli, spx, state_path).json()
    third = refresh(cli, cpx, state_path).json()
    fourth = refresh(cli, cpx, state_path).json()

    assert "change-pending" == first["outcome"]["kind"]
    assert "change-confirmed" == second["outcome"]["kind"]
    assert ["observe", "none"] == [s["action"] for s in second["steps"]]
    assert "change-pending" == third["outcome"]["kind"]
    assert "change-confirmed" == fourth["outcome"]["kind"]
    packages = fourth["outcome"]["diff"]["packages"]
    assert 8 == len(packages)
    assert all((p["old_mode"], p["new_mode"], p["old_count"], p["new_count"]) == ("SPX", "CPX", 1, 8) for p in packages)
    status = cli("status", "--state", state_path, "--json").json()
    assert 64 == status["baseline"]["devices"]


def test_a_first_sighting_is_re_read_after_the_confirm_interval_in_one_run(cli, built, state_path):
    """The default run re-reads a first sighting after ``policy.confirm_interval`` (3 s) and
    confirms it then; with 0 it waits for the next tick. The wait is handed to ``launch.main``'s
    ``confirm_wait`` (the in-process runs here take no time)."""
    spx = built("mi300x-spx")

    waited = cli("refresh", "--root", spx, "--state", state_path, "--json")
    other = state_path.parent / "other.json"
    next_tick = cli("refresh", "--root", spx, "--state", other, "--confirm-interval", "0", "--json")

    assert (waited.code, waited.waits, waited.json()["outcome"]["kind"]) == (0, [3.0], "change-confirmed")
    assert (next_tick.code, next_tick.waits, next_tick.json()["outcome"]["kind"]) == (0, [], "change-pending")


def _sigterm(*_args: object, **_kwargs: object) -> None:
    """SIGTERM to this (the main) thread, as systemd stopping the unit: the run's handler raises."""
    import signal
    import threading

    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


def test_sigterm_in_the_confirm_wait_saves_the_first_reading(env, built, state_path, capsys, cli):
    """Stopped while it waits to re-read a first sighting: exit 75, and "state saved" is true: the
    first reading is on disk with the run's record, and the next run confirms against it."""
    from spurinv.cli.launch import main

    spx = built("mi300x-spx")
    code = main(["refresh", "--root", str(spx), "--state", str(state_path), "--json"], confirm_wait=_sigterm)
    document = json.loads(capsys.readouterr().out)

    assert code == exitcode.TEMPFAIL
    assert document["steps"][-1]["error"] == "stopped by SIGTERM; state saved with the first reading"
    saved = json.loads(state_path.read_text())
    assert len(saved["readings"]) == 1
    assert (saved["last"]["exit_code"], saved["last"]["outcome"]) == (exitcode.TEMPFAIL, "change-pending")
    following = refresh(cli, spx, state_path).json()
    assert following["outcome"]["kind"] == "change-confirmed"


@pytest.mark.parametrize("dry_run", [False, True])
def test_sigterm_before_a_complete_reading_says_nothing_was_saved(env, built, state_path, capsys, monkeypatch, dry_run):
    """Stopped during discovery (or any time in a dry run): the message never claims a save."""
    from spurinv import refresh as refresh_module
    from spurinv.cli.launch import main

    monkeypatch.setattr(refresh_module, "discover", _sigterm)
    extra = ["--dry-run"] if dry_run else []
    code = main(["refresh", "--root", str(built("mi300x-spx")), "--state", str(state_path), *extra])
    err = capsys.readouterr().err

    assert code == exitcode.TEMPFAIL, err
    assert "state saved" not in err
    assert ("a dry run saves nothing" if dry_run else "stopped by SIGTERM; nothing saved") in err
    assert not state_path.exists()


def test_a_first_sighting_waits_for_real_outside_the_test_suite(built, env, state_path):
    """A real process sleeps its confirm interval (nothing but ``launch.main``'s caller can
    replace it): a run of 1 s takes at least 1 s."""
    import time

    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "spurinv", "refresh", "--root", built("mi300x-spx"), "--state", state_path,
         "--confirm-interval", "1"],
        capture_output=True, text=True, check=False, env=env, timeout=60,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    assert "re-reading in 1 s" in ran.stderr
    assert time.monotonic() - started >= 1


def test_a_broken_reading_in_between_never_confirms(cli, built, state_path):
    spx, cpx, broken = built("mi300x-spx"), built("mi300x-cpx"), built("mi300x-cpx-captured")
    refresh(cli, spx, state_path)
    refresh(cli, spx, state_path)

    kinds = [refresh(cli, root, state_path).json()["outcome"]["kind"] for root in (cpx, broken, cpx, broken, cpx)]

    # the captured root's count disagrees with its mode: a switch in progress, which
    # resets confirmation like a failure
    assert ["change-pending", "switching", "change-pending", "switching", "change-pending"] == kinds
    assert cli("status", "--state", state_path, "--json").json()["baseline"]["devices"] == 8


def test_failed_discovery_exits_74_and_records_the_failure(cli, built, state_path):
    result = refresh(cli, built("vega10-duplicate"), state_path)

    assert exitcode.IOERR == result.code
    document = result.json()
    assert not document["reading_ok"]
    assert document["errors"][0]["source"] == "kfd"
    assert cli("status", "--state", state_path, "--json").json()["consecutive_failures"] == 1


def test_discover_json_contract(cli, built):
    result = cli("discover", "--root", built("mi300x-cpx"), "--json")

    document = adapter(DiscoverDocument).validate_python(result.json())
    assert 0 == result.code
    assert document["ok"]
    assert document["inventory"] is not None
    device = result.json()["inventory"]["devices"][0]
    assert {"id", "vendor", "model", "pci_bdf", "memory_mb", "partition"} <= device.keys()
    assert {"compute", "memory", "index"} == device["partition"].keys()
    assert {"status", "detail"} == result.json()["sources"]["kfd"].keys()


def test_discover_failure_exits_74_with_errors(cli, built):
    result = cli("discover", "--root", built("vega10-duplicate"), "--json")

    assert exitcode.IOERR == result.code
    document = adapter(DiscoverDocument).validate_python(result.json())
    assert document["inventory"] is None
    assert document["errors"]


def test_discover_on_a_gpu_less_host_says_so(cli, built):
    result = cli("discover", "--root", built("host-40intel64-4n10c+pci-conflicts"))

    assert 0 == result.code
    assert "no GPU or accelerator on this node" in result.out


def test_discover_says_switch_once_and_counts_in_the_singular(cli, built):
    """A switch's evidence is labelled "switch" once (not "switch switch: …"); one CDI spec is
    "1 spec", not "1 specs"."""
    switching = cli("discover", "--root", built("amd-cpx-switching")).out
    cpx = cli("discover", "--root", built("mi300x-cpx")).out

    assert "switch switch" not in switching
    assert any(line.startswith("switch ") and ": kfd: " in line for line in switching.splitlines()), switching
    assert "1 spec, 65 devices" in cpx
    assert "1 specs" not in cpx


def test_discover_format_slurm_prints_node_and_gres_lines(cli, built):
    result = cli("discover", "--root", built("mi300x-cpx"), "--format", "slurm", "--node", "n1")

    assert 0 == result.code
    assert "NodeName=n1 CPUs=192 RealMemory=" in result.out
    assert "Gres=gpu:mi300x:64" in result.out
    # one gres.conf line per model and NUMA node, its files as one range
    # the fixture has no cpu*/topology: Cores= (logical core indices) is left out, and why said
    assert "NodeName=n1 Name=gpu Type=mi300x File=/dev/dri/renderD[128-159]\n" in result.out
    assert "NodeName=n1 Name=gpu Type=mi300x File=/dev/dri/renderD[160-191]\n" in result.out
    assert "# Cores= left out: no CPU topology" in result.out


def test_discover_format_slurm_gives_logical_core_indices_not_cpu_ids(cli, root_copy):
    """2 sockets x 48 cores x SMT2, one NUMA node per socket: CPUs 0-47,96-143 are socket 0's
    cores 0-47 (their SMT siblings the second range); gres.conf(5) wants ``Cores=0-47``."""
    root = root_copy("mi300x-cpx")
    cpu = root / "sys/devices/system/cpu"
    for n in range(192):
        package, core = (n % 96) // 48, (n % 48) * 2  # sparse core ids, as AMD's are
        (cpu / f"cpu{n}/topology").mkdir(parents=True, exist_ok=True)
        (cpu / f"cpu{n}/topology/physical_package_id").write_text(f"{package}\n")
        (cpu / f"cpu{n}/topology/core_id").write_text(f"{core}\n")
    node = root / "sys/devices/system/node"
    (node / "node0/cpulist").write_text("0-47,96-143\n")
    (node / "node1/cpulist").write_text("48-95,144-191\n")

    result = cli("discover", "--root", root, "--format", "slurm", "--node", "n1")

    assert 0 == result.code, result.out
    assert "File=/dev/dri/renderD[128-159] Cores=0-47\n" in result.out
    assert "File=/dev/dri/renderD[160-191] Cores=48-95\n" in result.out


def full_cli(capsys, *args):
    """The typer CLI without the lean front door."""
    from spurinv.cli.app import run

    capsys.readouterr()
    code = run([str(a) for a in args])
    return code, capsys.readouterr().out


def test_status_json_contract_and_lean_equals_full(cli, built, state_path, capsys):
    refresh(cli, built("mi300x-spx"), state_path)

    lean = cli("status", "--state", state_path, "--json")
    code, full = full_cli(capsys, "status", "--state", state_path, "--json")

    adapter(StatusDocument).validate_python(lean.json())
    assert 0 == lean.code == code
    assert lean.out == full


@pytest.mark.parametrize("name", ["mi300x-cpx", "vega10-duplicate", "nvidia-cdi"])
def test_discover_json_lean_equals_full(cli, built, capsys, monkeypatch, name):
    """With no config file, ``discover --json`` takes the lean path; its output is the full CLI's.

    "No config file" is the suite's private default path (conftest's ``hermetic``), not the
    host's /etc/spurinv/config.toml, which an installed spurinv has (this skipped)."""
    monkeypatch.delenv("SPURINV_CONFIG")
    lean = cli("discover", "--root", built(name), "--json")
    code, full = full_cli(capsys, "discover", "--root", built(name), "--json")

    assert lean.code == code
    assert lean.out == full


def test_status_without_a_state_file(cli, tmp_path):
    result = cli("status", "--state", tmp_path / "none.json", "--json")

    assert 0 == result.code
    assert result.json()["exists"] is False


def test_status_on_a_corrupt_file_exits_65_and_leaves_it(cli, tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{not json")

    result = cli("status", "--state", path, "--json")

    assert exitcode.DATAERR == result.code
    assert result.json()["error"]["code"] == "state"
    assert path.read_text() == "{not json"


def test_refresh_moves_a_corrupt_state_aside_and_starts_afresh(cli, built, state_path):
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text("{not json")

    result = refresh(cli, built("mi300x-spx"), state_path)

    assert 0 == result.code
    assert "moved aside" in result.err
    moved = list(state_path.parent.glob("state.json.corrupt-*"))
    assert len(moved) == 1
    assert moved[0].read_text() == "{not json"
    assert result.json()["outcome"]["kind"] == "change-pending"


def test_strict_refuses_a_corrupt_state_with_65(cli, built, state_path):
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text("{not json")

    result = refresh(cli, built("mi300x-spx"), state_path, "--strict")

    assert exitcode.DATAERR == result.code
    assert state_path.read_text() == "{not json"


def test_a_newer_state_file_is_never_overwritten(cli, built, state_path):
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state_path.write_text('{"schema_version": 7}')

    result = refresh(cli, built("mi300x-spx"), state_path)

    assert exitcode.DATAERR == result.code
    assert state_path.read_text() == '{"schema_version": 7}'


def test_diff_is_read_only_and_exit_code_reports_a_difference(cli, built, state_path):
    spx, cpx = built("mi300x-spx"), built("mi300x-cpx")
    refresh(cli, spx, state_path)
    refresh(cli, spx, state_path)
    before = state_path.read_bytes()

    same = cli("diff", "--root", spx, "--state", state_path, "--exit-code")
    changed = cli("diff", "--root", cpx, "--state", state_path, "--exit-code", "--json")

    assert 0 == same.code
    assert "no difference" in same.out
    assert exitcode.DIFFERENT == changed.code
    assert changed.json()["different"] is True
    assert len(changed.json()["vs_baseline"]["packages"]) == 8
    assert before == state_path.read_bytes()


def test_diff_human_output_shows_the_partition_summary(cli, built, state_path):
    spx, cpx = built("mi300x-spx"), built("mi300x-cpx")
    refresh(cli, spx, state_path)
    refresh(cli, spx, state_path)

    result = cli("diff", "--root", cpx, "--state", state_path)

    assert "0000:05:00.0 SPX→CPX: 1 → 8 devices" in result.out


def test_dry_run_explains_and_writes_nothing(cli, built, state_path):
    spx = built("mi300x-spx")
    refresh(cli, spx, state_path)
    before = state_path.read_bytes()

    result = cli("refresh", "--root", spx, "--state", state_path, "--dry-run", "--confirm-interval", "0")

    assert 0 == result.code
    assert "DRY RUN" in result.out
    assert "outcome   change-confirmed" in result.out
    assert before == state_path.read_bytes()


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


def test_usage_errors_exit_64(cli, tmp_path):
    assert exitcode.USAGE == cli("refresh", "--no-such-flag").code
    assert exitcode.USAGE == cli("discover", "--root", tmp_path / "missing").code
    assert exitcode.USAGE == cli("nonsense").code


def test_accept_needs_the_current_fingerprint(cli, built, state_path):
    result = refresh(cli, built("mi300x-spx"), state_path, "--accept", "deadbeefdead")

    assert exitcode.USAGE == result.code
    assert "fingerprint" in result.json()["error"]["message"]


def test_refresh_json_contract(cli, built, state_path):
    document = adapter(RefreshDocument).validate_python(refresh(cli, built("mi300x-spx"), state_path).json())

    assert document["mode"] == "observe"
    assert document["format_version"] == 1


def test_console_script_runs(built, env):
    """The installed entry point works as a process (python -m spurinv)."""
    result = subprocess.run([sys.executable, "-m", "spurinv", "version"], capture_output=True, text=True, check=False, env=env)

    assert 0 == result.returncode
    assert result.stdout.startswith("spurinv ")


@pytest.mark.parametrize("command", ["discover", "refresh", "diff", "status", "config", "version"])
def test_every_command_has_help(cli, command):
    result = cli(command, "--help")

    assert 0 == result.code
    assert "Usage" in result.out


def test_diff_and_config_and_error_json_contracts(cli, built, state_path):
    refresh(cli, built("mi300x-spx"), state_path)

    adapter(DiffDocument).validate_python(cli("diff", "--root", built("mi300x-cpx"), "--state", state_path, "--json").json())
    adapter(ConfigDocument).validate_python(cli("config", "show", "--json").json())
    adapter(ErrorDocument).validate_python(cli("status", "--state", state_path.parent, "--json").json())


def test_show_completion_in_this_process_returns_its_status(monkeypatch, capsys):
    """typer ends --show-completion with sys.exit: a caller of launch.main gets a status back."""
    import shellingham  # type: ignore[import-untyped]

    from spurinv.cli.launch import main

    # typer asks shellingham for the shell in the process tree: bash, whatever shell runs the suite
    monkeypatch.setattr(shellingham, "detect_shell", lambda: ("bash", "/bin/bash"))
    code = main(["--show-completion"])
    printed = capsys.readouterr()
    assert code == 0, printed
    assert "complete -o default -F _spurinv_completion spurinv" in printed.out


def test_the_launchers_reading_of_a_command_line_knows_the_real_command_tree():
    """launch.parsed reads argv without importing click: its groups and its flags that take a value
    are the CLI's, or a "--" or a value would be read where click reads a command or a flag."""
    from spurinv.cli import launch
    from spurinv.cli.app import _command

    groups: set[tuple[str, ...]] = set()
    valued: dict[tuple[str, ...], set[str]] = {}
    flags: dict[tuple[str, ...], set[str]] = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            groups.add(path)
        for parameter in command.params:
            for name in [*parameter.opts, *parameter.secondary_opts]:
                if name.startswith("-"):
                    (flags if getattr(parameter, "is_flag", False) else valued).setdefault(path, set()).add(name)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))

    walk(_command(), ())
    assert groups == launch._GROUPS
    assert valued == {path: set(names) for path, names in launch._VALUED.items()}
    assert {path for path, names in flags.items() if "--json" in names} == set(launch._JSON)
    assert set().union(*valued.values()) == set(launch._WHAT) - {"PATH"}
    assert not set().union(*flags.values()) & set(launch._WHAT)


@pytest.mark.parametrize(
    ("args", "path", "parts"),
    [
        (["--", "discover", "--format", "json"], ("discover",), ["--", "command", "flag", "--format"]),
        (["config", "--", "init", "--", "--force"], ("config", "init"), ["command", "--", "command", "--", ""]),
        (["--", "--", "status"], ("--",), ["--", "command", ""]),
        (["refresh", "--node", "--", "--json", "-"], ("refresh",), ["command", "flag", "--node", "flag", ""]),
        (["--help", "status", "--node"], ("status",), ["flag", "command", "flag"]),
        (["check", "--format", "x"], ("check",), ["command", "flag", ""]),
        (["status", "--root", "/x", "--json"], ("status",), ["command", "flag", "", "flag"]),
        (["config", "init", "--json", "x"], ("config", "init"), ["command", "command", "flag", ""]),
    ],
)
def test_the_launcher_reads_a_command_line_as_click_does(args, path, parts):
    from spurinv.cli import launch

    assert launch.parsed(args) == (path, parts)


def test_a_flag_the_command_does_not_have_takes_no_value():
    """status has no --node: click stops at it (No such option), so --json is no value of it;
    the refusal of ``status --node <not UTF-8>`` named a node name the command never takes."""
    from spurinv.cli import launch

    assert launch.parsed(["status", "--node", "--json"])[1] == ["command", "flag", "flag"]


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["status", "--json"], True),
        (["--json", "status"], False),  # the group has no --json: click says "No such option"
        (["config", "init", "--json"], False),
        (["config", "show", "--json"], True),
        (["config", "--json", "show"], False),
        (["version", "--json"], False),
        (["bogus", "--json"], False),
        (["status", "--node", "--json"], True),  # an option status lacks takes no value
        (["refresh", "--node", "--json"], False),  # refresh's --node does
        (["--", "status", "--json"], True),
    ],
)
def test_json_is_wanted_where_the_command_has_it(args, wanted):
    from spurinv.cli import launch

    assert launch.wants_json(args) is wanted


WORDS = ["--", "-", "-q", "-qx", "--json", "--bogus", "--bogus=v", "---", "v", "-v", "--=v"]


def _click_reading(args: list[str]) -> tuple[tuple[str, ...], list[tuple[str, str]], bool]:
    """What click's own parser makes of ``args``, an option the command lacks taking no value
    (click stops there; the launcher reads on, as click would had it been a flag): the command,
    each option's (name, value) in order, and whether --json is read as the command's flag."""
    from typer._click import Context  # typer's own click, the one that reads spurinv's argv

    from spurinv.cli.app import _command

    command, rest = _command(), list(args)
    path: tuple[str, ...] = ()
    while hasattr(command, "commands"):  # a group: its parser, as click runs it, up to the command's name
        context = Context(command, info_name="spurinv", resilient_parsing=True)
        _, largs, _ = command.make_parser(context).parse_args(list(rest))
        rest = largs  # resilient: an unknown option of the group leaves what follows it unread
        if not rest or rest[0] not in command.commands:
            return ((*path, rest[0]) if rest else path), [], False
        command, path, rest = command.commands[rest[0]], (*path, rest[0]), rest[1:]
    context = Context(command, info_name=path[-1], ignore_unknown_options=True, resilient_parsing=True)
    parser = command.make_parser(context)
    read: list[tuple[str, str]] = []
    for option in {id(o): o for o in parser._long_opt.values()}.values():

        def process(value, state, option=option, process=option.process):
            read.append((option._long_opts[0], value))
            process(value, state)

        option.process = process
    parser.parse_args(list(rest))
    valued = [(name, value) for name, value in read if value is not None]
    return path, valued, any(name == "--json" for name, _ in read)


@settings(max_examples=400, deadline=None)
@given(
    before=st.lists(st.sampled_from(["--", "--bogus", "--help"]), max_size=2),
    path=st.sampled_from([("status",), ("refresh",), ("check",), ("discover",), ("config", "init"), ("config", "show"),
                          ("fleet",), ("diff",), ("version",)]),
    words=st.lists(st.sampled_from([*WORDS, "--node", "--state", "--root", "--format", "--config", "--node=v",
                                    "--state=v", "--accept", "--api=v", "--metrics-file"]), max_size=7),
)  # fmt: skip
def test_the_launchers_reading_is_clicks_own(before, path, words):
    """launch.parsed against click's parser, on the real command tree: the command, the values
    of its options, and whether --json is its flag."""
    from spurinv.cli import launch

    args = [*before, *path, *words]
    clicks_path, clicks_values, clicks_json = _click_reading(args)
    if clicks_path != path:  # click stops before the command (an option the group lacks)
        return
    got_path, parts = launch.parsed(args)
    start = len(parts) - parts[::-1].index(launch.COMMAND)
    values = []
    for at in range(start, len(args)):
        if parts[at] in launch._WHAT:
            values.append((parts[at], args[at]))
        elif parts[at] == launch.FLAG and "=" in args[at] and args[at].partition("=")[0] in launch._VALUED.get(path, ()):
            values.append(tuple(args[at].split("=", 1)))
    # click reads a flag that takes a value at the very end as a missing value (its error)
    assert (got_path, values, launch.wants_json(args)) == (path, clicks_values, clicks_json), parts
