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
