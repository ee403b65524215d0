"""Whole-process measurements: wall time and peak RSS of one child, and the table.

Wall time is taken around spawn and reap of a direct child, so every figure includes the
interpreter's start, as the timer pays it. Peak RSS comes from separate runs under
``/usr/bin/time -f %M``. It cannot come from reaping our own children: ``ru_maxrss`` of a
child (``os.wait4``, or ``getrusage(RUSAGE_CHILDREN)``, whose ``ru_maxrss`` is moreover the
largest child ever reaped, not a sum a delta could undo) includes the memory the child had
*before* ``exec`` — a copy of this benchmark process, already bigger than the figures it
measures (Linux fs/exec.c keeps the old mm's high-water mark). ``time`` is a small C program,
so what its children carry over is about 1 MiB.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass

TIME = shutil.which("time", path="/usr/bin:/bin")  # GNU time (Debian package "time")


@dataclass
class Sample:
    """One run of one process."""

    wall_ms: float
    cpu_ms: float
    code: int
    out: str
    err: str


def run_once(argv: list[str], env: dict[str, str], *, cwd: str | None = None) -> Sample:
    """Run ``argv`` to completion; return its wall time, CPU time and output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd)
        _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Sample(
            wall_ms=wall * 1000,
            cpu_ms=(usage.ru_utime + usage.ru_stime) * 1000,
            code=process.returncode,
            out=out.read().decode(errors="replace"),
            err=err.read().decode(errors="replace"),
        )


def peak_rss(argv: list[str], env: dict[str, str]) -> float | None:
    """Peak RSS (MiB) of one more run of ``argv``, measured by ``/usr/bin/time``; None without it."""
    if TIME is None:
        return None
    with tempfile.NamedTemporaryFile(mode="r") as report:
        sample = run_once([TIME, "-f", "%M", "-o", report.name, *argv], env)
        if sample.code != 0:
            return None
        return int(report.read().split()[-1]) / 1024


@dataclass
class Stats:
    """Median, min and max of a series."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        return cls(statistics.median(values), min(values), max(values), len(values))


def imported_modules(stderr: str) -> set[str]:
    """Top-level packages named in ``-X importtime`` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name.split(".")[0])
    return names


@dataclass
class Row:
    """One line of the table. ``budget`` and ``judge`` are None for informational figures."""

    figure: str
    unit: str
    stats: Stats | None
    budget: float | None = None
    judge: str = "median"  # which statistic the budget applies to: median, max, or exact
    baseline: Stats | None = None  # python -c pass (same unit)
    slurmd: Stats | None = None  # slurmd -C (same unit)
    note: str = ""

    def verdict(self) -> str:
        if self.budget is None:
            return "info"
        if self.stats is None:
            return "n/a"
        value = {"median": self.stats.median, "max": self.stats.high}.get(self.judge)
        if self.judge == "exact":
            return "ok" if self.stats.low == self.stats.high == self.budget else "FAIL"
        assert value is not None
        return "ok" if value <= self.budget else "FAIL"

    def cells(self) -> list[str]:
        def number(value: float) -> str:
            if self.unit == "count":
                return f"{value:.0f}"
            return f"{value:.3f}" if abs(value) < 1 else f"{value:.1f}"

        def ratio(reference: Stats | None) -> str:
            if reference is None or self.stats is None or reference.median <= 0:
                return "—"
            return f"{self.stats.median / reference.median:.1f}×"

        stats = self.stats
        if self.budget is None:
            budget = "—"
        else:
            relation = {"median": "≤", "max": "≤ (max)", "exact": "="}[self.judge]
            budget = f"{relation} {number(self.budget)}"
        return [
            f"{self.figure} ({self.unit})",
            number(stats.median) if stats else "—",
            number(stats.low) if stats else "—",
            number(stats.high) if stats else "—",
            budget,
            self.verdict(),
            ratio(self.baseline),
            ratio(self.slurmd),
        ]


HEADER = ["figure", "median", "min", "max", "budget", "verdict", "÷ python -c pass", "÷ slurmd -C"]


def table(sections: list[tuple[str, list[Row]]]) -> str:
    """One table; a section title is a line of its own."""
    rows = [row.cells() for _title, section in sections for row in section]
    widths = [max(len(cell) for cell in column) for column in zip(HEADER, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "-" * len(line(HEADER))
    out = [line(HEADER), rule]
    for title, section in sections:
        out.append(f"[{title}]")
        out.extend(line(row.cells()) for row in section)
    out.append(rule)
    return "\n".join(out)
