"""Attacks on `spurinv check --root` (schedule): false failures on working nodes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from spurinv.cli.launch import main

REPO = Path(__file__).resolve().parent.parent


def _root(tmp_path: Path) -> Path:
    """A systemd node as README.md installs it: a venv in /opt/spurinv, /usr/local/bin/spurinv links to it."""
    root = tmp_path / "root"
    for folder in ("run/systemd/system", "etc/systemd/system/timers.target.wants", "opt/spurinv/bin", "usr/bin",
                   "usr/local/bin", "usr/lib/systemd/system", "etc/spurinv"):  # fmt: skip
        (root / folder).mkdir(parents=True)
    shutil.copy("/usr/bin/true", root / "usr/bin/python3.11")
    (root / "usr/bin/python3").symlink_to("python3.11")
    (root / "opt/spurinv/bin/python3").symlink_to("/usr/bin/python3")
    program = root / "opt/spurinv/bin/spurinv"
    program.write_text("#!/opt/spurinv/bin/python3\n")
    program.chmod(0o755)
    (root / "usr/local/bin/spurinv").symlink_to("/opt/spurinv/bin/spurinv")
    (root / "etc/os-release").write_text("ID=ubuntu\nID_LIKE=debian\n")
    return root


def _schedule(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "state").mkdir(mode=0o700, exist_ok=True)
    monkeypatch.setenv("SPURINV_STATE", str(tmp_path / "state/state.json"))
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("SPURINV_CONFIG", str(config))
    capsys.readouterr()
    main(["check", "--root", str(root), "--config", str(config), "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    found: dict = next(check for check in checks if check["name"] == "schedule")
    return found


@pytest.mark.parametrize("how", ["systemctl link", "relative wants link", "merged /usr, absolute /lib link"])
def test_enabled_timer_through_links_on_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    root = _root(tmp_path)
    units = root / "etc/systemd/system"
    wants = units / "timers.target.wants/spurinv-refresh.timer"
    if how == "systemctl link":  # /etc/systemd/system/UNIT -> /opt/..., the wants link to /etc's link
        (root / "opt/spurinv/share").mkdir()
        for unit in ("spurinv-refresh.timer", "spurinv-refresh.service"):
            shutil.copy(REPO / "systemd" / unit, root / "opt/spurinv/share" / unit)
            (units / unit).symlink_to(f"/opt/spurinv/share/{unit}")
        wants.symlink_to("/etc/systemd/system/spurinv-refresh.timer")
    elif how == "relative wants link":
        for unit in ("spurinv-refresh.timer", "spurinv-refresh.service"):
            (root / "opt/spurinv/share").mkdir(exist_ok=True)
            shutil.copy(REPO / "systemd" / unit, root / "opt/spurinv/share" / unit)
            (units / unit).symlink_to(f"/opt/spurinv/share/{unit}")
        wants.symlink_to("../spurinv-refresh.timer")
    else:
        for unit in ("spurinv-refresh.timer", "spurinv-refresh.service"):
            shutil.copy(REPO / "systemd" / unit, root / "usr/lib/systemd/system" / unit)
        (root / "lib").symlink_to("/usr/lib")
        wants.symlink_to("/lib/systemd/system/spurinv-refresh.timer")
    found = _schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "ok", found
    assert os.path.islink(wants)


def test_program_looked_for_once_for_many_cron_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spurinv.cli import preflight

    root = _root(tmp_path)
    shutil.rmtree(root / "run/systemd")
    (root / "etc/cron.d").mkdir()
    for number in range(50):
        (root / f"etc/cron.d/site{number}").write_text("*/5 * * * * root /usr/local/bin/spurinv refresh\n")
    calls: list[str] = []
    executable = preflight._executable

    def counted(run: object, program: str) -> bool:
        calls.append(program)
        return executable(run, program)  # type: ignore[arg-type]

    monkeypatch.setattr(preflight, "_executable", counted)
    found = _schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "ok", found
    assert len(calls) <= 4, calls  # the program and its Python once each, not once a file (10,000 files: 5 s)


@pytest.mark.parametrize("command", ["/usr/local/bin/spu\0/../spurinv refresh", "PATH=/a\0b spurinv refresh"])
def test_nul_in_cron_program_is_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    root = _root(tmp_path)
    shutil.rmtree(root / "run/systemd")
    (root / "etc/cron.d").mkdir()
    (root / "etc/cron.d/spurinv").write_text(f"*/5 * * * * root {command}\n")
    found = _schedule(tmp_path, root, monkeypatch, capsys)  # was: internal error, exit 70
    assert found["status"] == "fail", found
    assert "not an executable file" in found["detail"]


@pytest.mark.parametrize("program", ["/../../usr/local/bin/spurinv", "/opt/other/current/../bin/spurinv"])
def test_dot_dot_in_a_program_is_followed_as_the_kernel_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], program: str
) -> None:
    root = _root(tmp_path)
    shutil.rmtree(root / "run/systemd")
    (root / "etc/cron.d").mkdir()
    (root / "opt/other").mkdir()
    (root / "opt/other/current").symlink_to("/opt/spurinv/bin")  # its ".." is /opt/spurinv, not /opt/other
    (root / "etc/cron.d/spurinv").write_text(f"*/5 * * * * root {program} refresh\n")
    found = _schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "ok", found


@pytest.mark.xfail(strict=True, reason="Debian with cronie (package cronie, its daemon crond) is taken as Debian's cron "
                   "from /etc/debian_version alone: a /etc/cron.d file with a dot, which cronie runs, fails 78. Whether "
                   "Debian's cronie names its daemon crond (a /proc sign to trust) is not confirmed here")  # fmt: skip
def test_debian_running_cronie_reads_a_dotted_cron_d_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    shutil.rmtree(root / "run/systemd")
    (root / "etc/debian_version").write_text("12.8\n")
    (root / "etc/os-release").write_text("ID=debian\n")
    (root / "proc/77").mkdir(parents=True)
    (root / "proc/77/comm").write_text("crond\n")
    (root / "proc/77/exe").symlink_to("/usr/sbin/crond")
    (root / "etc/cron.d").mkdir()
    (root / "etc/cron.d/spurinv.cron").write_text("*/5 * * * * root /usr/local/bin/spurinv refresh\n")
    found = _schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] != "fail", found


def test_crlf_python_shebang_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    shutil.rmtree(root / "run/systemd")
    (root / "etc/cron.d").mkdir()
    (root / "etc/cron.d/spurinv").write_text("*/5 * * * * root /usr/local/bin/spurinv refresh\n")
    (root / "opt/spurinv/bin/spurinv").write_bytes(b"#!/opt/spurinv/bin/python3\r\n")  # the kernel looks for python3\r
    found = _schedule(tmp_path, root, monkeypatch, capsys)
    assert found["status"] == "fail", found
    assert "carriage return" in found["detail"]
    assert found["fix"] == "sed -i --follow-symlinks '1s/\\r$//' /usr/local/bin/spurinv", found
