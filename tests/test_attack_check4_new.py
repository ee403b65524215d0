from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_check import chroot_node, chroot_schedule


def test_a_timer_masked_only_below_the_unit_systemd_loads_is_not_masked(tmp_path, monkeypatch, capsys):
    # systemd loads the first spurinv-refresh.timer on its search path: the copy in /etc wins
    # over a /dev/null link in /usr/local/lib, so the timer runs
    root = chroot_node(tmp_path)
    for unit in ("spurinv-refresh.timer", "spurinv-refresh.service"):
        shutil.copy(Path("systemd") / unit, root / "etc/systemd/system" / unit)
    (root / "usr/local/lib/systemd/system").mkdir(parents=True)
    (root / "usr/local/lib/systemd/system/spurinv-refresh.timer").symlink_to("/dev/null")
    (root / "etc/systemd/system/timers.target.wants/spurinv-refresh.timer").symlink_to(
        "/etc/systemd/system/spurinv-refresh.timer"
    )
    found = chroot_schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "ok", found


@pytest.mark.parametrize(("unit", "mask"), [("spurinv-refresh.timer", ""), ("spurinv-refresh.timer", "../../../dev/null"),
                                            ("spurinv-refresh.service", "../../../dev/null")])  # fmt: skip
def test_a_unit_masked_by_an_empty_file_or_a_relative_link_fails(tmp_path, monkeypatch, capsys, unit, mask):
    # systemd masks a unit whose file is empty or resolves to /dev/null, not only a link naming
    # "/dev/null": such a node runs nothing
    root = chroot_node(tmp_path)
    for name in ("spurinv-refresh.timer", "spurinv-refresh.service"):
        shutil.copy(Path("systemd") / name, root / "usr/lib/systemd/system" / name)
    (root / "etc/systemd/system/timers.target.wants/spurinv-refresh.timer").symlink_to(
        "/usr/lib/systemd/system/spurinv-refresh.timer"
    )
    masked = root / "etc/systemd/system" / unit
    if mask:
        (root / "dev").mkdir()
        os.mkfifo(root / "dev/null")  # a test root's stand-in for a real root's character device: no regular file
        masked.symlink_to(mask)
    else:
        masked.write_text("")
    found = chroot_schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "fail", found
    assert "masked" in found["detail"], found
