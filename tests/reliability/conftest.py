"""Reliability and security suite: shared fixtures and the one-screen summary.

Every fault a test tries goes into the session's :class:`~summaries.Ledger` (category, fault,
outcome, and whether anything was *lost*: an ok inventory with fewer devices, a state file that
neither loads as the old nor as the new content, a baseline moved on an unverified write, the
token somewhere it must not be, a run that overran its time bound). ``tests/summaries.py`` prints
it after the run (adding up the workers' under pytest-xdist); the tests themselves assert
"nothing lost", the summary shows what was tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from summaries import LEDGER, Ledger

sys.path.insert(0, str(Path(__file__).resolve().parent))  # hostile.py; also under --import-mode=importlib


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    return LEDGER


class Ran:
    """A finished spurinv process: exit code, output, wall time."""

    def __init__(self, code: int, out: str, err: str, seconds: float, pid: int, waits: list[float] | None = None) -> None:
        self.code = code
        self.out = out
        self.err = err
        self.seconds = seconds
        self.pid = pid
        self.waits = waits or []  # the confirm waits an in-process run asked for (not slept)

    def __repr__(self) -> str:
        return f"Ran(code={self.code}, seconds={self.seconds:.2f}, err={self.err.strip()[:300]!r})"


@pytest.fixture
def spurinv(env: dict[str, str]) -> Callable[..., Ran]:
    """Run ``python -m spurinv ARGS`` as a real process; return code, output and wall time."""

    def run(*args: object, extra_env: dict[str, str] | None = None, timeout: float = 120) -> Ran:
        started = time.monotonic()
        with subprocess.Popen(
            [sys.executable, "-m", "spurinv", *map(str, args)],
            env={**env, **(extra_env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as process:
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, 9)
                process.communicate()
                raise
        return Ran(process.returncode, out, err, time.monotonic() - started, process.pid)

    return run


@pytest.fixture
def spurinv_here(
    env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Ran]:
    """Run ``spurinv ARGS`` in this process (``launch.main``, the console script's entry point),
    with ``spurinv``'s interface: for tests about what a run prints and writes, not about the
    process (exit by signal, time bounds, hangs, pids, imports), which keep :func:`spurinv`. As
    with ``cli``, the wait before the confirming re-read is recorded in ``waits``, not slept."""
    from spurinv.cli.launch import main

    def run(*args: object, extra_env: dict[str, str] | None = None, timeout: float = 120) -> Ran:
        del timeout  # a hang here is a hang of the test: tests that can hang use the process
        capsys.readouterr()
        started = time.monotonic()
        with monkeypatch.context() as scoped:
            for name, value in (extra_env or {}).items():
                scoped.setenv(name, value)
            waits: list[float] = []
            code = main([str(a) for a in args], confirm_wait=waits.append)
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err, time.monotonic() - started, os.getpid(), waits)

    return run
