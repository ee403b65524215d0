"""Fixtures for the end-to-end tests against a real Slurm 24.11 lab on 127.0.0.1.

``slurm_lab`` (session): starts one lab (private LAB_DIR, free ports) and always stops it, by PID.
``clean_lab`` (function): the same lab, ``reset()`` to two clean idle nodes before the test.
Both skip, with the reason, when not root or when Slurm 24.11.5 is missing (``lab/slurm/ensure-slurm.sh``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import summaries

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also works under --import-mode=importlib

from slurmlab import SlurmLab, unavailable_reason


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: end-to-end test against a real Slurm 24.11 lab on 127.0.0.1 "
        "(needs root and Slurm from lab/slurm/ensure-slurm.sh; skipped otherwise)",
    )


@pytest.fixture(scope="session")
def slurm_lab(request: pytest.FixtureRequest) -> Iterator[SlurmLab]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    lab = SlurmLab()
    try:
        lab.start()  # cleans up after itself if it fails
        yield lab
    finally:
        try:
            lab.stop()
        finally:
            summaries.LAB_TIMINGS.append(_timings(lab))


def _timings(lab: SlurmLab) -> str:
    t = lab.timings
    resets = t.get("reset", [])
    parts = []
    if "start" in t:
        parts.append(f"start {t['start']:.2f} s")
    if resets:
        parts.append(
            f"reset x{len(resets)} mean {sum(resets) / len(resets):.2f} s (min {min(resets):.2f}, max {max(resets):.2f})"
        )
    if "stop" in t:
        parts.append(f"stop {t['stop']:.2f} s")
    restarts = "".join(f"\nRESTARTED after: {seen}" for seen in t["restarts"])
    return f"LAB_DIR={lab.lab_dir} ports {lab.port_base}-{(lab.port_base or 0) + 3}: " + ", ".join(parts) + restarts


@pytest.fixture
def clean_lab(slurm_lab: SlurmLab) -> SlurmLab:
    slurm_lab.reset()
    return slurm_lab
