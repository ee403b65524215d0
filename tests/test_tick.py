"""The timer's fast path: same answer as the full run, no heavy imports, no network."""

from __future__ import annotations

import json
import subprocess
import sys

from spurinv import state as state_file
from spurinv.launch import lean_options

HEAVY = ("pydantic", "typer", "rich", "requests")


def steady(cli, root, state_path):
    for _ in range(2):
        result = cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")
        assert 0 == result.code, result.err
    raw = json.loads(state_path.read_text())
    assert raw["steady"] is not None
    return raw


def imported(env, *args):
    """Run spurinv with -X importtime; return (exit code, stdout, top-level modules imported)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "spurinv", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    modules = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    return result.returncode, result.stdout, modules


def test_a_no_change_tick_imports_nothing_heavy(cli, built, state_path, env):
    root = built("mi300x-cpx")
    steady(cli, root, state_path)

    code, out, modules = imported(env, "refresh", "--root", root, "--state", state_path)

    assert 0 == code
    assert out.startswith("unchanged: 64 devices")
    assert not modules & set(HEAVY), modules & set(HEAVY)
    assert "socket" not in modules
    assert "http" not in modules


def test_status_json_and_discover_json_are_lean_too(cli, built, state_path, env):
    steady(cli, built("mi300x-spx"), state_path)
    lean_env = {k: v for k, v in env.items() if k != "SPURINV_CONFIG"}

    for args, environ in (
        (("status", "--state", state_path, "--json"), env),
        (("discover", "--root", built("mi300x-spx"), "--json"), lean_env),
    ):
        code, out, modules = imported(environ, *args)
        assert 0 == code
        assert json.loads(out)["ok"]
        assert not modules & set(HEAVY), (args[0], modules & set(HEAVY))


def test_the_fast_tick_writes_a_state_the_full_model_accepts(cli, built, state_path, spurinv_process):
    root = built("mi300x-cpx")
    before = steady(cli, root, state_path)

    result = spurinv_process("refresh", "--root", root, "--state", state_path)
    after = state_file.load(str(state_path))

    assert result.stdout.startswith("unchanged")
    assert after.readings[-1].taken_at.isoformat() >= before["readings"][-1]["taken_at"][:19]
    assert after.steady is not None
    assert after.last.outcome == "unchanged"


def test_a_changed_root_falls_through_to_the_full_run(cli, built, state_path, spurinv_process):
    steady(cli, built("mi300x-spx"), state_path)

    result = spurinv_process("refresh", "--root", built("mi300x-cpx"), "--state", state_path, "--confirm-interval", "0")

    assert "change-pending" in result.stdout, result.stdout + result.stderr
    assert json.loads(state_path.read_text())["steady"] is None


def test_a_changed_config_file_falls_through(cli, built, state_path, env, spurinv_process, tmp_path):
    root = built("mi300x-spx")
    steady(cli, root, state_path)
    with open(env["SPURINV_CONFIG"], "a") as handle:
        handle.write("[policy]\nconfirm_interval = 0\n")

    result = spurinv_process("refresh", "--root", root, "--state", state_path)

    assert "spurinv refresh, node" in result.stdout  # the full run's rendering, not the one-liner


def test_fast_and_full_runs_agree_on_the_same_steady_state(cli, built, state_path, capsys):
    """Property: where the memo applies, the full run also says unchanged and sends nothing."""
    from spurinv.cli import run

    root = built("mi308x")
    steady(cli, root, state_path)
    capsys.readouterr()
    code = run(["refresh", "--root", str(root), "--state", str(state_path), "--json"])
    document = json.loads(capsys.readouterr().out)

    assert 0 == code
    assert "unchanged" == document["outcome"]["kind"]
    assert [] == document["requests"]


def test_lean_option_parsing_is_conservative():
    assert ("refresh", {"--root": "/x"}) == lean_options(["refresh", "--root", "/x"])
    assert ("refresh", {"--root": "/x"}) == lean_options(["refresh", "--root=/x"])
    assert ("status", {"--json": "1"}) == lean_options(["status", "--json"])
    assert lean_options(["status"]) is None  # people get the rich table from the full CLI
    assert lean_options(["refresh", "--dry-run"]) is None
    assert lean_options(["refresh", "--root"]) is None
    assert lean_options(["refresh", "--root", "/a", "--root", "/b"]) is None
    assert lean_options(["refresh", "--json=1"]) is None
    assert lean_options(["discover", "--root", "--json"]) is None
