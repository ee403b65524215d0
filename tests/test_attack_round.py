"""Regressions found by the independent attack on the merged 0.2 work (issues #10, #11, #14)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spurinv import registration
from spurinv.config import ControllerSection, read_token
from spurinv.errors import TokenError
from spurinv.nodeview import gres_agrees, parse_spur_nodes
from spurinv.secret import Secret

SPUR_NO_GPUS = """NodeName=n1
   State=IDLE Reason=
   Partitions=default
   CPUTot=4 CPUAlloc=0 RealMemory=1000 FreeMem=1000
"""


def test_a_spur_node_without_a_gres_line_has_no_gpus_and_agrees_with_none():
    """spur prints no ``Gres=`` line for a node without GPUs (crates/spur-cli/src/scontrol.rs at
    4cc3da8); taken as "unknown", a CPU-only spur node was refused for ever."""
    (view,) = parse_spur_nodes(SPUR_NO_GPUS)

    assert view.gres == ""
    assert gres_agrees(view.gres, {})
    assert not gres_agrees(view.gres, {"mi300x": 8})


def test_a_grandchild_holding_the_pipes_does_not_outlive_the_timeout(tmp_path: Path):
    """A command that leaves a ``setsid`` child holding stdout hung past every timeout."""
    script = tmp_path / "bg.sh"
    script.write_text("#!/bin/sh\nsetsid sleep 30 &\necho $! > " + str(tmp_path / "pid") + "\nsleep 10\n")
    script.chmod(0o755)
    started = time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            registration.run([str(script)], dict(os.environ), 1.0)
        assert time.monotonic() - started < 8
    finally:
        pid_file = tmp_path / "pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), 9)  # the grandchild we started, by PID


def test_an_empty_slurm_jwt_line_is_an_empty_token_not_no_authentication(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=   \n")
    token.chmod(0o600)
    section = ControllerSection(url="http://127.0.0.1:1", auth="slurm-jwt", token_file=str(token))

    with pytest.raises(TokenError, match="empty"):
        read_token(section, {})


def test_columns_zero_still_prints(tmp_path: Path, env: dict[str, str]):
    """COLUMNS=0 made every human output empty (a failed discovery said nothing at all)."""
    ran = subprocess.run(
        [sys.executable, "-m", "spurinv", "status", "--state", str(tmp_path / "state.json")],
        env={**env, "COLUMNS": "0"}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    assert "no runs yet" in ran.stdout


def test_controller_text_cannot_steer_the_terminal():
    """An error body with ESC/OSC/RLO reached the terminal raw from refresh (fleet escaped it)."""
    text = Secret("").scrub("boom\x1b]0;pwn\x07\x1b[2J\u202e")

    assert text.isprintable()
    assert "\\x1b]0;pwn" in text


def test_the_run_deadline_cuts_a_hanging_scontrol(tmp_path: Path, env: dict[str, str], built):
    """``controller.run_deadline`` bounded only REST: a hanging ``scontrol`` ran for its own
    ``controller.timeout`` (25 s here) instead of ending the run at the deadline with 75."""
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "slurm 24.11.5"; exit 0; }\nexec sleep 25\n')
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(
        f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
        "timeout = 30\nrun_deadline = 3\n[policy]\nconfirm_interval = 0\n"
    )
    config.chmod(0o600)
    state = tmp_path / "state" / "state.json"
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")), "--state", str(state)]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert first.returncode == 0, first.stderr

    started = time.monotonic()
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert ran.returncode == 75, (ran.stdout, ran.stderr)
    assert time.monotonic() - started < 15
    assert "run_deadline" in ran.stdout + ran.stderr
