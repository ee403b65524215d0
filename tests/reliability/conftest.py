"""Reliability and security suite (issue #7): shared fixtures and the one-screen summary.

Every fault a test tries goes into the session's :class:`Ledger` (category, fault, outcome, and
whether anything was *lost*: an ok inventory with fewer devices, a state file that neither loads
as the old nor as the new content, a baseline moved on an unverified write, the token somewhere
it must not be, a run that overran its time bound). ``pytest_terminal_summary`` prints it; the
tests themselves assert "nothing lost", the summary shows what was tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # hostile.py; also under --import-mode=importlib


class Ledger:
    """What the suite tried and what came of it."""

    def __init__(self) -> None:
        self.tried: dict[str, set[str]] = defaultdict(set)
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.lost: dict[str, list[str]] = defaultdict(list)

    def record(self, category: str, fault: str, outcome: str, lost: bool = False) -> None:
        """One trial of ``fault``; ``lost`` when an invariant broke (the test then fails)."""
        self.tried[category].add(fault)
        self.outcomes[category][outcome] += 1
        if lost:
            self.lost[category].append(fault)

    def lines(self) -> list[str]:
        width = max(len(category) for category in self.tried)
        lines = []
        for category in sorted(self.tried):
            outcomes = ", ".join(f"{name} {count}" for name, count in sorted(self.outcomes[category].items()))
            runs = sum(self.outcomes[category].values())
            lost = len(self.lost[category])
            lines.append(
                f"{category:<{width}}  {len(self.tried[category]):>3} faults  {runs:>5} trials  lost {lost}  ({outcomes})"
            )
        total = sum(len(faults) for faults in self.lost.values())
        lines.append(
            f"lost: {total}"
            + ("" if not total else " — " + "; ".join(f"{c}: {', '.join(f)}" for c, f in self.lost.items() if f))
        )
        return lines


LEDGER = Ledger()


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    return LEDGER


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not LEDGER.tried:
        return
    terminalreporter.section("reliability: faults tried, outcomes, anything lost")
    for line in LEDGER.lines():
        terminalreporter.write_line(line)


class Ran:
    """A finished spurinv process: exit code, output, wall time."""

    def __init__(self, code: int, out: str, err: str, seconds: float, pid: int) -> None:
        self.code = code
        self.out = out
        self.err = err
        self.seconds = seconds
        self.pid = pid

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
