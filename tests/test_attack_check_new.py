"""Reproducers from the attack on check's cron reading (moved into test_check.py at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_check import SPURINV, Node, run_checks, run_config_check

from spurinv.cli import preflight as check


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


@pytest.mark.parametrize("blank", ["\xa0", "\x0b", "\x0c", "\x1f", "\u2003", "\r"])
def test_cron_fields_are_split_at_blanks_only(blank):
    """cron splits the time fields, the user and the command at spaces and tabs only; str.split
    also split at these, which cron and the shell read as part of a word."""
    assert check.cron_line(f"* * * * * root{blank}{SPURINV} refresh") is None
    assert check.cron_line(f"* * * * * root {SPURINV}{blank}refresh") is None
    assert check.cron_line(f"*\t*\t*\t*\t*\troot\t{SPURINV}\trefresh") == ""


def test_a_quoted_hash_starts_no_comment():
    """The shell starts a comment only at an unquoted # that begins a word: logger '#x' does not."""
    assert check.cron_line(f"* * * * * root logger '#x'; {SPURINV} refresh") == ""
    assert check.cron_line(f'* * * * * root echo "a #b"; {SPURINV} refresh') == ""
    assert check.cron_line(f"* * * * * root true # ; {SPURINV} refresh") is None
    assert check.cron_line(f"* * * * * root true;# {SPURINV} refresh") is None


def test_cron_cuts_the_command_at_a_percent_its_backslash_does_not_escape():
    r"""cron's backslash escapes only the % after it: in \\% the first escapes the second, and the
    % is a newline (what follows is the command's input, not a command)."""
    assert check.cron_line(f"* * * * * root echo a\\\\% ; {SPURINV} refresh") is None
    assert check.cron_line(f"* * * * * root echo a\\% ; {SPURINV} refresh") == ""


@pytest.mark.parametrize("schedule", ["@every", "@5min", "99 * * * *", "* 24 * * *", "* * * * 8", "* * * * funday"])
def test_a_schedule_cron_cannot_read_warns(schedule):
    found = check.cron_line(f"{schedule} root {SPURINV} refresh")
    assert found, found


@pytest.mark.parametrize("schedule", ["@hourly", "@daily", "@midnight", "@annually", "0-59/5 0-23 * * 0-7", "* * * * mon-fri"])
def test_a_schedule_cron_reads_passes(schedule):
    assert check.cron_line(f"{schedule} root {SPURINV} refresh") == ""


def test_a_crlf_cron_file_is_no_working_schedule(node):
    """cron ends a command at the newline only: the carriage return of a CRLF line is the last
    character of the command, so spurinv is given "--quiet\r" (or "refresh\r") and every run fails."""
    node.config()
    cron = node.host / "etc" / "cron.d" / "spurinv"
    cron.write_bytes(f"* * * * * root {SPURINV} refresh --quiet\r\n".encode())
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "warn", schedule
    assert "carriage return" in schedule.detail, schedule
    cron.write_bytes(f"* * * * * root {SPURINV} refresh\r\n".encode())
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status != "ok", schedule


def test_python_m_spurinv_checks_the_interpreter(node):
    """python -m spurinv refresh runs the interpreter: the program check named the module as a
    program on cron's PATH and failed 78 on a node whose runs work."""
    node.config()
    python = node.host / "opt" / "venv" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    cron = node.host / "etc" / "cron.d" / "spurinv"
    cron.write_text("* * * * * root /opt/venv/bin/python3 -I -m spurinv refresh --quiet\n")
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "ok", schedule
    cron.write_text("* * * * * root /opt/missing/python3 -m spurinv refresh --quiet\n")
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "fail", schedule
    assert "/opt/missing/python3" in schedule.detail, schedule


@pytest.mark.parametrize("value", ["/etc/two  spaces.toml", "/etc/back\\slash.toml"])
def test_a_crontab_assignment_is_read_as_cron_reads_it(node, monkeypatch, tmp_path, value):
    """crontab(5): a NAME=VALUE line's value is taken as written, less one pair of quotes around
    it; no shell reads it. check unquoted it as a shell would (collapsed spaces, dropped
    backslashes) and compared another file than the runs read."""
    site = tmp_path / value.removeprefix("/etc/")
    site.write_text('[node]\nname = "n1"\n')
    site.chmod(0o600)
    (node.host / "etc" / "cron.d" / "spurinv").write_text(f"SPURINV_CONFIG={tmp_path}/{value.removeprefix('/etc/')}\n"
                                                          f"* * * * * root {SPURINV} refresh\n")  # fmt: skip
    found = run_config_check(node, monkeypatch, str(site))
    assert found.status == "ok", found


def test_no_crontab_setting_is_offered_for_a_path_holding_a_newline(node, monkeypatch, tmp_path):
    """A crontab line ends at a newline, in an assignment and a command alike: no spelling sets it."""
    site = tmp_path / "a\nb.toml"
    site.write_text('[node]\nname = "n1"\n')
    site.chmod(0o600)
    (node.host / "etc" / "cron.d" / "spurinv").write_text(f"* * * * * root {SPURINV} refresh\n")
    found = run_config_check(node, monkeypatch, str(site))
    assert found.status == "warn", found
    assert "or set" not in found.fix, found


def test_the_config_check_of_a_long_line_takes_linear_time():
    """Each "spurinv refresh" of a line scanned every word before it for SPURINV_CONFIG, and
    copied every word after it: 4,000 on a 64 KiB line took a second per cron file and scheduler
    read. Twenty times the refreshes may take twenty times as long, not four hundred."""
    import time

    def took(count: int) -> float:
        words = check._shell_words(";".join(["spurinv refresh"] * count))
        assert words is not None
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            assert len(check._started_with(words)) == count
            best = min(best, time.perf_counter() - start)
        return best

    assert took(4000) < 80 * took(200)


def test_a_refused_non_utf8_argument_is_printed_without_its_control_characters(capsys):
    """The refusal of an argument that is not UTF-8 spelled out its bytes (\\xff) but wrote its
    control characters as they were: an escape sequence in a path reached the terminal."""
    import os

    from spurinv.cli import launch

    word = os.fsdecode(b"/tmp/a\xff\x1b[2J\x1b]0;title\x07.toml")
    assert launch._not_utf8(["check", "--config", word], {}) == 64
    assert launch._not_utf8(["check"], {"SPURINV_CONFIG": word}) == 78
    err = capsys.readouterr().err
    assert "\\xff" in err
    assert not any(ord(char) < 32 and char != "\n" for char in err), repr(err)


@pytest.mark.parametrize(
    ("command", "status"),
    [
        ("env PATH=/opt/sp/bin spurinv refresh", "ok"),
        ("PATH=/opt/sp/bin spurinv refresh", "ok"),
        ("PATH=/opt/sp/bin:$PATH sh -c 'spurinv refresh'", "ok"),
        ("export PATH=/opt/sp/bin; spurinv refresh", "ok"),  # the shell's state: not guessed
        ("cd /opt/sp && ./bin/spurinv refresh", "ok"),  # relative to cron's working directory: not guessed
        ("PATH=/opt/none spurinv refresh", "fail"),
        ("env PATH=/opt/none spurinv refresh", "fail"),
        ("spurinv refresh", "fail"),  # cron's /usr/bin:/bin
    ],
)
def test_the_program_is_looked_for_on_the_path_its_command_gives_it(node, command, status):
    """The program check looked for spurinv on the crontab's PATH only: an entry that gives its
    own (PATH=DIR spurinv, env PATH=DIR spurinv) failed 78 on a node whose runs work."""
    node.config()
    program = node.host / "opt" / "sp" / "bin" / "spurinv"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    (node.host / "etc" / "cron.d" / "spurinv").write_text(f"* * * * * root {command}\n")
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == status, schedule


def test_every_file_cron_reads_in_cron_d_counts(node):
    """cron reads every file in /etc/cron.d whose name is letters, digits, "_" and "-": an entry
    in /etc/cron.d/gpu-inventory runs, and check failed 78 ("nothing runs spurinv refresh")."""
    node.config()
    (node.host / "etc" / "cron.d" / "spurinv").unlink()
    (node.host / "etc" / "cron.d" / "gpu-inventory").write_text(f"* * * * * root {SPURINV} refresh --quiet\n")
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "ok", schedule
    assert "/etc/cron.d/gpu-inventory" in schedule.detail
    (node.host / "etc" / "cron.d" / "gpu-inventory").rename(node.host / "etc" / "cron.d" / "spurinv.cron")
    assert run_checks(node, None)["schedule"].status == "fail"  # a dotted name cron skips


def test_a_comment_inside_a_continued_unit_line_is_left_out(node, monkeypatch):
    """systemd.syntax(7): comment lines after a line ending in a backslash are skipped, and the
    line goes on after them (systemd-analyze verify 252 names /nonexistent/progX for
    "ExecStart=\\", "#/bin/true", "/nonexistent/progX"). check made the comment part of the value:
    it compared the commented-out --config and looked for a program named "#/bin/true"."""
    from test_check import systemd_host, unit_host

    site = str(node.config())
    systemd_host(node)
    unit_host(node, f"[Service]\nExecStart={SPURINV} refresh \\\n# --config /etc/old.toml\n  --config {site}\n")
    assert run_config_check(node, monkeypatch, site).status == "ok"
    unit_host(node, f"[Service]\nExecStart=\\\n#/bin/true\n{SPURINV} refresh --config {site}\n")
    assert run_checks(node, None)["schedule"].status == "ok"
    # a comment's own backslash continues nothing: the ExecStart= after it is read
    unit_host(node, "[Service]\n# old \\\nExecStart=/nonexistent/spurinv refresh\n")
    assert run_checks(node, None)["schedule"].status == "fail"


def test_each_cron_file_is_read_once_for_its_entries(node, monkeypatch):
    """cron reads every file of /etc/cron.d, and the schedule, config, PATH and program checks each
    asked for every entry of every file again: 5,000 files took 4 s."""
    from collections import Counter

    node.config()
    for number in range(20):
        (node.host / "etc" / "cron.d" / f"other{number}").write_text("* * * * * root /bin/true\n")
    reads: Counter[str] = Counter()
    read = check._root_text

    def counted(run, name):
        reads[name] += 1
        return read(run, name)

    monkeypatch.setattr(check, "_root_text", counted)
    assert run_checks(node, None)["schedule"].status == "ok"
    cron_reads = {name: count for name, count in reads.items() if "cron" in name}
    assert cron_reads
    assert max(cron_reads.values()) <= 2, cron_reads  # the first entry's search, then every entry


def test_no_quoted_setting_is_offered_inside_a_shells_script(node, monkeypatch, tmp_path):
    """--config '/x/a b.toml' pasted into sh -c '... --config /etc/other.toml' ends the script's
    quotes: the fix offered a spelling for the outer command line, not for the script."""
    site = tmp_path / "a b.toml"
    site.write_text('[node]\nname = "n1"\n')
    site.chmod(0o600)
    cron = node.host / "etc" / "cron.d" / "spurinv"
    cron.write_text(f"* * * * * root sh -c '{SPURINV} refresh --config /etc/other.toml'\n")
    found = run_config_check(node, monkeypatch, str(site))
    assert found.status == "warn", found
    assert "or set" not in found.fix, found
    cron.write_text(f"* * * * * root {SPURINV} refresh --config /etc/other.toml\n")  # not nested: offered
    found = run_config_check(node, monkeypatch, str(site))
    assert f"or set --config '{site}' on the entry" in found.fix, found


def test_a_debian_crontab_of_another_mode_than_0600_warns(node):
    """Debian's cron skips a spool crontab whose mode is not 0600 ("INSECURE MODE (mode 0600
    expected) (crontabs/root)"): one copied in place with 0644 passed."""
    node.config()
    (node.host / "etc" / "cron.d" / "spurinv").unlink()
    crontab = node.host / "var" / "spool" / "cron" / "crontabs" / "root"
    crontab.parent.mkdir(parents=True)
    crontab.write_text(f"* * * * * {SPURINV} refresh --quiet\n")
    crontab.chmod(0o644)
    schedule = run_checks(node, None)["schedule"]
    assert (schedule.status, schedule.fix) == ("warn", "chmod 0600 /var/spool/cron/crontabs/root"), schedule
    crontab.chmod(0o600)
    assert run_checks(node, None)["schedule"].status == "ok"
