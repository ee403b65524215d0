"""Logs: one line per event on stderr; a syslog priority prefix under systemd
($JOURNAL_STREAM), plain `spurinv: ...` elsewhere; --quiet keeps warnings and errors."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurinv import exitcode
from spurinv.log import ERROR, INFO, NOTICE, WARNING, Log
from spurinv.secret import printable

JOURNAL = {"JOURNAL_STREAM": "8:123456"}


def emitted(environ: dict[str, str], priority: int, message: str, quiet: bool = False) -> str:
    stream = io.StringIO()
    Log(environ, stream=stream, quiet=quiet).emit(priority, message)
    return stream.getvalue()


@pytest.mark.parametrize(
    ("priority", "journal", "plain"),
    [
        (ERROR, "<3>state lock held\n", "spurinv: error: state lock held\n"),
        (WARNING, "<4>state lock held\n", "spurinv: warning: state lock held\n"),
        (NOTICE, "<5>state lock held\n", "spurinv: state lock held\n"),
        (INFO, "<6>state lock held\n", "spurinv: state lock held\n"),
    ],
)
def test_priority_prefix_under_systemd_and_plain_text_elsewhere(priority, journal, plain):
    assert journal == emitted(JOURNAL, priority, "state lock held")
    assert plain == emitted({}, priority, "state lock held")


def test_quiet_drops_info_and_notice_but_never_warnings_or_errors():
    assert ("", "") == (emitted(JOURNAL, INFO, "x", quiet=True), emitted(JOURNAL, NOTICE, "x", quiet=True))
    assert ("<4>x\n", "<3>x\n") == (emitted(JOURNAL, WARNING, "x", quiet=True), emitted(JOURNAL, ERROR, "x", quiet=True))


@given(message=st.text(), journal=st.booleans(), priority=st.sampled_from([ERROR, WARNING, NOTICE, INFO]))
def test_every_event_is_exactly_one_line(message, journal, priority):
    """Whatever the message holds (newlines from an exception, tabs, CRs), one event is one line;
    control characters left after that are shown escaped (secret.printable)."""
    out = emitted(JOURNAL if journal else {}, priority, message)
    assert 1 == len(out.splitlines()) == out.count("\n")
    level = {ERROR: "error: ", WARNING: "warning: "}.get(priority, "")
    prefix = f"<{priority}>" if journal else f"spurinv: {level}"
    assert prefix + printable(" ".join(message.split())) + "\n" == out


def test_a_held_lock_is_one_error_line_under_systemd(cli, state_path, tmp_path, lock_holder, monkeypatch):
    """The lock is held by another run (a real process); exit 75 and exactly one `<3>` line naming it."""
    settings = tmp_path / "fast.toml"
    settings.write_text("[state]\nlock_timeout = 0\n")
    settings.chmod(0o600)
    for name, value in {**JOURNAL, "SPURINV_CONFIG": str(settings)}.items():
        monkeypatch.setenv(name, value)
    with lock_holder(state_path) as holder:
        run = cli("refresh", "--quiet", "--state", state_path)
    assert exitcode.TEMPFAIL == run.code
    assert "" == run.out
    [line] = run.err.splitlines()
    pattern = rf"<3>state lock {re.escape(str(state_path))}\.lock is held by pid {holder.pid} \(refresh\).*"
    assert re.fullmatch(pattern, line), line


def test_a_run_without_state_uses_the_suites_private_state_not_the_hosts(spurinv_process, hermetic, built):
    """this file once ran `refresh` without --state and left /var/lib/spurinv behind."""
    # a process: the default state path a fresh interpreter takes from the environment the suite hands on
    run = spurinv_process("refresh", "--quiet", "--confirm-interval", "0", "--root", built("mi300x-spx"))

    assert 0 == run.returncode, run.stderr
    assert {"state.json", "state.json.lock"} == {p.name for p in (hermetic / "state").iterdir()}


def test_without_journal_stream_the_same_error_is_plain(cli, tmp_path):
    run = cli("refresh", "--root", tmp_path / "missing")
    assert exitcode.USAGE == run.code
    assert [f"spurinv: error: --root {tmp_path / 'missing'}: not a directory"] == run.err.splitlines()


def test_with_json_a_failure_is_an_envelope_on_stdout_and_one_line_on_stderr(cli, tmp_path, monkeypatch):
    for name, value in JOURNAL.items():
        monkeypatch.setenv(name, value)
    run = cli("refresh", "--json", "--root", tmp_path / "missing")
    assert exitcode.USAGE == run.code
    assert ["<3>--root " + str(tmp_path / "missing") + ": not a directory"] == run.err.splitlines()
    assert '"exit_code": 64' in run.out
