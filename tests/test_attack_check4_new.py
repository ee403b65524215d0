from __future__ import annotations

import shutil
from pathlib import Path

from test_check import chroot_node, chroot_schedule


def test_a_timer_upheld_by_a_target_is_enabled(tmp_path, monkeypatch, capsys):
    # [Install] UpheldBy=multi-user.target (systemd 249+) enables it by a link in
    # multi-user.target.upholds: the timer starts at boot as a WantedBy= one does
    root = chroot_node(tmp_path)
    for name in ("spurinv-refresh.timer", "spurinv-refresh.service"):
        shutil.copy(Path("systemd") / name, root / "usr/lib/systemd/system" / name)
    (root / "etc/systemd/system/multi-user.target.upholds").mkdir()
    (root / "etc/systemd/system/multi-user.target.upholds/spurinv-refresh.timer").symlink_to(
        "/usr/lib/systemd/system/spurinv-refresh.timer"
    )
    found = chroot_schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "ok", found


def test_a_path_of_thousands_of_linked_components_is_followed_quickly(tmp_path):
    # a unit or cron file may name any path: each step joined the whole followed list again, so
    # 4,000 components through links to "." took seconds; the kernel gives up after 40 links
    import time

    from spurinv.cli import preflight as check

    (tmp_path / "d").mkdir()
    for number in range(1, 40):
        (tmp_path / "d" / f"s{number}").symlink_to(".")
    inside = "d/" + "/".join(f"s{number % 39 + 1}" for number in range(8000))
    began = time.monotonic()
    followed = check._follow_on(str(tmp_path), inside)
    assert time.monotonic() - began < 1.0
    assert followed.startswith(str(tmp_path / "d"))
