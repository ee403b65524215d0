"""Findings of the attack on check's unit reading, launch.parsed and test-setup's venv step,
each held as a strict xfail: the assertion states what systemd, click or the operator expects,
and the mark comes off with the fix.

The systemd rows were compared with ``systemd-analyze security --offline=yes --root`` (systemd
252): a huge drop-in's ProtectSystem=strict, and a unit in /etc/systemd/system.control, are in
force there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from test_test_setup import copy, setup  # noqa: F401 (copy: a fixture used by name)

from spurinv.cli import launch
from spurinv.cli import preflight as check
from spurinv.inventory.root import Root

TEXTFILE = "/var/lib/node_exporter/textfile"
UNITS = "etc/systemd/system"
SERVICE_D = f"{UNITS}/{check.SERVICE}.d"


def _run(tmp_path: Path, files: Mapping[str, str | bytes]) -> check._Run:
    root = tmp_path / "root"
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return cast("check._Run", SimpleNamespace(world=SimpleNamespace(root=Root(str(root)))))


def verdict(tmp_path: Path, files: Mapping[str, str | bytes], directory: str = TEXTFILE):
    return check._sandbox_blocks(_run(tmp_path, files), directory)


@pytest.mark.xfail(strict=True, reason="parsed() reads every command's value flags into every command")
def test_a_flag_the_command_does_not_have_takes_no_value():
    """status has no --node: click stops at it (No such option), so --json is no value of it;
    the refusal of ``status --node <not UTF-8>`` names a node name the command never takes."""
    assert launch.parsed(["status", "--node", "--json"])[1] == ["command", "flag", "flag"]


@pytest.mark.xfail(strict=True, reason="venv --clear follows a .venv symlink and empties its target")
def test_a_venv_that_is_a_symlink_leaves_its_target_alone(copy):  # noqa: F811
    other = copy.parent / "other-venv"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to("/nonexistent/python3")
    (other / "precious").write_text("not test-setup's to remove\n")
    (copy / ".venv").symlink_to(other)
    setup(copy)
    assert (other / "precious").exists()
