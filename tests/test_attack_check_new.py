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
