"""End-of-run summaries: the reliability ledger (``tests/reliability``) and the Slurm lab timings
(``tests/e2e``), printed once after the tests whether the suite ran in one process or under
pytest-xdist. A worker's terminal is never shown, so each worker hands what it recorded to the
controller (``workeroutput``), which adds it up and prints it. Loaded by ``tests/conftest.py``
(``pytest_plugins``) so that the controller, which collects nothing, has it too.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest


class Ledger:
    """What the reliability suite tried and what came of it."""

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

    def dump(self) -> dict[str, Any]:
        """Plain data a worker can send to the controller."""
        return {
            "tried": {category: sorted(faults) for category, faults in self.tried.items()},
            "outcomes": {category: dict(counts) for category, counts in self.outcomes.items()},
            "lost": dict(self.lost),
        }

    def merge(self, data: dict[str, Any]) -> None:
        """Add a worker's ``dump()``."""
        for category, faults in data["tried"].items():
            self.tried[category].update(faults)
        for category, counts in data["outcomes"].items():
            self.outcomes[category].update(counts)
        for category, faults in data["lost"].items():
            self.lost[category].extend(faults)

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
#: One line per Slurm lab this process started and stopped (``tests/e2e/conftest.py``).
LAB_TIMINGS: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker
        output["summaries"] = {"ledger": LEDGER.dump(), "lab_timings": LAB_TIMINGS}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, in the controller: a worker finished; add up what it recorded."""
    summaries = getattr(node, "workeroutput", {}).get("summaries")
    if summaries:
        LEDGER.merge(summaries["ledger"])
        LAB_TIMINGS.extend(summaries["lab_timings"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if LEDGER.tried:
        terminalreporter.section("reliability: faults tried, outcomes, anything lost")
        for line in LEDGER.lines():
            terminalreporter.write_line(line)
    if LAB_TIMINGS:
        terminalreporter.write_sep("-", "slurm lab timings")
        for line in LAB_TIMINGS:
            terminalreporter.write_line(line)
