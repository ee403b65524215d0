"""Reproducers from the attack on check (moved into test_check.py at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_check import SPURINV, Node, proc, run_checks


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_busybox_crond_reads_only_the_spool_crontabs(node):
    """busybox crond reads the crontabs in /var/spool/cron/crontabs only: under it an entry in
    /etc/cron.d/spurinv never runs, and check, which names busybox crond as the daemon to start,
    passed it. Its crontab needs no mode 0600."""
    node.config()
    proc(node, 40, "busybox", "busybox crond -f")
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "warn", schedule
    assert "busybox" in schedule.detail
    crontab = node.host / "var" / "spool" / "cron" / "crontabs" / "root"
    crontab.parent.mkdir(parents=True)
    crontab.write_text(f"* * * * * {SPURINV} refresh --quiet\n")
    crontab.chmod(0o644)
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "ok", schedule
    proc(node, 41, "cron")  # Debian's cron beside it skips a crontab not 0600
    assert run_checks(node, None)["schedule"].status == "warn"


@pytest.mark.parametrize(
    "start",
    [
        "/usr/bin/env /opt/missing/spurinv refresh",
        "/usr/bin/env spurinv refresh",
        "/usr/bin/flock /run/lock /opt/missing/spurinv refresh",
        "/bin/sh -c '/opt/missing/spurinv refresh'",
    ],
)
def test_the_spurinv_a_units_exec_start_starts_must_be_there(node, start):
    """The program check looked at ExecStart='s program only: env, flock or sh starting a spurinv
    that is not there passed, and every run failed. The located spurinv word is checked too, as
    it is for cron."""
    from test_check import systemd_host, unit_host

    node.config()
    systemd_host(node)
    unit_host(node, f"[Service]\nExecStart={start}\n")
    for program in ("usr/bin/env", "usr/bin/flock", "bin/sh"):
        (node.host / program).parent.mkdir(parents=True, exist_ok=True)
        (node.host / program).write_text("#!/bin/sh\n")
        (node.host / program).chmod(0o755)
    (node.host / "usr" / "local" / "bin" / "spurinv").unlink()
    schedule = run_checks(node, None)["schedule"]
    assert schedule.status == "fail", schedule
    assert "spurinv" in schedule.detail.split("runs ")[1].split(",")[0], schedule
    unit_host(node, f"[Service]\nExecStart={start.replace('/opt/missing/spurinv', SPURINV)}\n")
    (node.host / "usr" / "local" / "bin" / "spurinv").write_text("#!/bin/sh\n")
    (node.host / "usr" / "local" / "bin" / "spurinv").chmod(0o755)
    assert run_checks(node, None)["schedule"].status == "ok"
