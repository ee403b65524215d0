"""The per-node figures and budgets (bench/README.md), measured as whole processes (and one in-process slope).

Every command runs ``warmup`` times first (so ``__pycache__`` holds the bytecode and the page
cache holds the roots), then ``runs`` times round-robin with the others, so a burst of load on
the machine spreads over all figures instead of landing on one. Each timed run is followed by
one run under ``/usr/bin/time`` for its peak RSS and, for spurinv's lean commands, one under
``-X importtime`` to prove it stayed lean. ``PYTHONDONTWRITEBYTECODE`` is removed from the
children's environment: with it set, every run would compile spurinv again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.measure import TIME, Row, Sample, Stats, imported_modules, peak_rss, run_once
from bench.roots import REPO, Roots

PYTHON = str(REPO / ".venv" / "bin" / "python")
SPURINV = str(REPO / ".venv" / "bin" / "spurinv")  # the console script, as the timer runs it
SLURMD = "/opt/slurm-24.11/sbin/slurmd"
HEAVY = frozenset({"requests", "rich", "pydantic", "typer"})
NETWORK = frozenset({"socket", "_socket", "ssl", "http", "urllib3"})  # without these, Python opens no socket
DROP = ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "SPURINV_CONFIG", "SPURINV_STATE", "STATE_DIRECTORY",
        "CREDENTIALS_DIRECTORY", "JOURNAL_STREAM", "SLURM_CONF")  # fmt: skip
LIBRARIES = ("typer", "pydantic", "requests", "rich", "typer, pydantic, requests, rich")


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of every measured process."""
    return {**{key: value for key, value in os.environ.items() if key not in DROP}, **extra}


def _exit_zero(sample: Sample) -> str | None:
    return None if sample.code == 0 else f"exit {sample.code}: {sample.err.strip()[-300:]}"


def _starts(prefix: str) -> Callable[[Sample], str | None]:
    def check(sample: Sample) -> str | None:
        problem = _exit_zero(sample)
        return problem or (None if sample.out.startswith(prefix) else f"unexpected output {sample.out[:120]!r}")

    return check


def _json_ok(sample: Sample) -> str | None:
    try:
        return _exit_zero(sample) or (None if json.loads(sample.out)["ok"] else "the document says ok: false")
    except (ValueError, KeyError):
        return f"not a JSON document: {sample.out[:120]!r}"


@dataclass
class Command:
    """A measured command and what each of its runs must show."""

    name: str
    argv: list[str]
    env: dict[str, str]
    check: Callable[[Sample], str | None] = _exit_zero
    lean: bool = False  # a spurinv command that must not import anything heavy
    samples: list[Sample] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    imports_seen: set[str] = field(default_factory=set)

    def wall(self) -> Stats:
        return Stats.of([sample.wall_ms for sample in self.samples])

    def cpu(self) -> Stats:
        return Stats.of([sample.cpu_ms for sample in self.samples])

    def rss(self) -> Stats | None:
        return Stats.of(self.rss_mib) if self.rss_mib else None

    def run(self) -> Sample:
        sample = run_once(self.argv, self.env)
        problem = self.check(sample)
        if problem:
            self.problems.append(problem)
        return sample


def measure(commands: list[Command], runs: int, warmup: int) -> None:
    """Warm up, then run every command ``runs`` times, round-robin."""
    for command in commands:
        for _ in range(warmup):
            command.run()
        if command.problems:
            raise SystemExit(f"bench: {command.name}: {command.problems[0]}")
    for _ in range(runs):
        for command in commands:
            command.samples.append(command.run())
            rss = peak_rss(command.argv, command.env)
            if rss is not None:
                command.rss_mib.append(rss)
            if command.lean:  # the console script under -X importtime: the same imports, listed
                traced = run_once([PYTHON, "-X", "importtime", *command.argv], command.env)
                command.imports_seen |= imported_modules(traced.err) & (HEAVY | NETWORK)


def _steady_state(root: Path, state: Path, env: dict[str, str]) -> None:
    """Two full runs: the first sighting, then the confirmation that leaves the fast path's memo."""
    for _ in range(2):
        sample = run_once([SPURINV, "refresh", "--root", str(root), "--state", str(state), "--confirm-interval", "0"], env)
        if sample.code != 0:
            raise SystemExit(f"bench: setting up the baseline failed: {sample.out}{sample.err}")
    if not json.loads(state.read_text()).get("steady"):
        raise SystemExit("bench: the full run left no steady memo; the tick would not take the fast path")


def _socket_calls(command: Command, work: Path) -> int | None:
    """socket()/connect() system calls of one run under strace (None when strace is missing)."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    log = work / "strace.log"
    run_once([strace, "-f", "-qq", "-e", "trace=socket,connect", "-o", str(log), *command.argv], command.env)
    return sum(1 for line in log.read_text().splitlines() if "socket(" in line or "connect(" in line)


class Figures:
    """The baseline and spurinv commands, measured; :meth:`rows` turns them into table rows."""

    def __init__(self, roots: Roots, work: Path) -> None:
        config = work / "empty.toml"  # a real, empty config file: the lean path keys its memo on it
        config.write_text("")
        config.chmod(0o600)
        state = work / "tick" / "state.json"
        state.parent.mkdir(mode=0o700)  # --state names an existing directory
        env = clean_env(SPURINV_CONFIG=str(config))
        _steady_state(roots.cpx, state, env)
        self.work = work
        self.notes: list[str] = []
        self.baseline = Command("python -c pass", [PYTHON, "-c", "pass"], clean_env())
        self.slurmd = None
        if os.access(SLURMD, os.X_OK):
            conf = work / "slurm.conf"  # slurmd -C prints the node's hardware and exits; no daemon
            conf.write_text("ClusterName=bench\nSlurmctldHost=localhost\n")
            self.slurmd = Command("slurmd -C", [SLURMD, "-C"], clean_env(SLURM_CONF=str(conf)), _starts("NodeName="))
        self.libraries = [Command(f"import {name}", [PYTHON, "-c", f"import {name}"], clean_env()) for name in LIBRARIES]
        self.tick = Command(
            "refresh (no change)",
            [SPURINV, "refresh", "--root", str(roots.cpx), "--state", str(state)],
            env,
            _starts("unchanged: 64 devices"),  # the fast path's own line: the full run prints a table
            lean=True,
        )
        self.status = Command("status --json", [SPURINV, "status", "--state", str(state), "--json"], env, _json_ok, True)
        # discover --json is lean only without a config file: no SPURINV_CONFIG, no /etc/spurinv/config.toml
        self.discover = Command(
            "discover --json", [SPURINV, "discover", "--root", str(roots.cpx), "--json"], clean_env(), _json_ok, True
        )
        self.discover_path = "lean path (no config file)"
        if os.path.exists("/etc/spurinv/config.toml"):
            self.discover_path = "FULL path: /etc/spurinv/config.toml exists, so the lean path steps aside"

    def commands(self) -> list[Command]:
        slurmd = [self.slurmd] if self.slurmd else []
        return [self.baseline, *slurmd, *self.libraries, self.tick, self.status, self.discover]

    def measure(self, runs: int, warmup: int) -> None:
        measure(self.commands(), runs, warmup)
        if not any((REPO / "spurinv" / "__pycache__").glob("tick.*.pyc")):
            self.notes.append("WARNING: no bytecode in spurinv/__pycache__: every run compiled spurinv (read-only tree?)")

    def _rows(self, command: Command, budget: float | None = None, rss_budget: float | None = None) -> list[Row]:
        slurmd = self.slurmd
        wall = Row(f"{command.name} wall", "ms", command.wall(), budget, baseline=self.baseline.wall(),
                   slurmd=slurmd.wall() if slurmd else None)  # fmt: skip
        rss = Row(f"{command.name} peak RSS", "MiB", command.rss(), rss_budget, "max", self.baseline.rss(),
                  slurmd.rss() if slurmd else None)  # fmt: skip
        return [wall, rss]

    def baseline_rows(self) -> list[Row]:
        rows = self._rows(self.baseline)
        if self.slurmd:
            rows += self._rows(self.slurmd)
        else:
            self.notes.append(f"{SLURMD} not found: no slurmd -C figures (scripts/test-setup builds Slurm)")
        for library in self.libraries:
            rows.append(self._rows(library)[0])
        rows.append(self._rows(self.libraries[-1])[1])
        return rows

    def spurinv_rows(self) -> list[Row]:
        tick, status, discover = self.tick, self.status, self.discover
        rows = self._rows(tick, 50, 30)
        rows.append(Row(f"{tick.name} CPU (user+sys)", "ms", tick.cpu(), baseline=self.baseline.cpu(),
                        slurmd=self.slurmd.cpu() if self.slurmd else None))  # fmt: skip
        rows += self._rows(status, 60) + self._rows(discover, 150)
        problems = [f"{command.name}: {problem}" for command in self.commands() for problem in command.problems]
        leaked = {command.name: sorted(command.imports_seen) for command in (tick, status, discover) if command.imports_seen}
        rows.append(Row("runs failing or off the expected path", "count", Stats.of([float(len(problems))]), 0, "exact"))
        rows.append(Row("lean commands importing requests/rich/pydantic/typer/socket", "count",
                        Stats.of([float(len(leaked))]), 0, "exact"))  # fmt: skip
        sockets = _socket_calls(tick, self.work)
        if sockets is None:
            self.notes.append("strace not installed: the no-network check rests on the imports (no socket module)")
        else:
            rows.append(Row(f"{tick.name} socket()/connect() calls", "count", Stats.of([float(sockets)]), 0, "exact"))
        if TIME is None:
            self.notes.append("/usr/bin/time not installed (Debian package `time`): no peak RSS figures")
        self.notes += [f"problem: {problem}" for problem in problems[:10]]
        self.notes += [f"{name} imported {', '.join(modules)}" for name, modules in leaked.items()]
        self.notes.append(f"discover --json took the {self.discover_path}")
        self.notes.append(
            f"lean paths verified on every timed run: {len(tick.samples)} refresh, {len(status.samples)} status, "
            f"{len(discover.samples)} discover (output checked, plus a paired -X importtime run each)"
        )
        return rows


SLOPE = """
import json, sys, time
from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root
runs, roots = int(sys.argv[1]), sys.argv[2:]
for root in roots:
    discover(Root(root))
wall = {root: [] for root in roots}
cpu = {root: [] for root in roots}
for _ in range(runs):
    for root in roots:
        started, used = time.perf_counter(), time.process_time()
        result = discover(Root(root))
        wall[root].append((time.perf_counter() - started) * 1000)
        cpu[root].append((time.process_time() - used) * 1000)
        assert result["ok"], result["errors"][:1]
print(json.dumps({"wall": wall, "cpu": cpu}))
"""


def discovery_rows(roots: Roots, runs: int) -> list[Row]:
    """discover() in one fresh process (refresh's reading: no io_links), and the per-device slope.

    The slope is taken per round — (1024-device time - 64-device time) / 960 of the same round —
    so the median slope is not the difference of two medians taken at different moments. The
    CPU slope (process time) is what the slope would be on an idle machine.
    """
    paths = [str(roots.cpx), str(roots.big64), str(roots.big1024)]
    result = subprocess.run([PYTHON, "-c", SLOPE, str(runs), *paths], env=clean_env(), capture_output=True, text=True,
                            check=True)  # fmt: skip
    measured = json.loads(result.stdout)
    wall, cpu = measured["wall"], measured["cpu"]

    def slope(times: dict[str, list[float]]) -> Stats:
        return Stats.of([(big - small) / (1024 - 64) for small, big in zip(times[paths[1]], times[paths[2]], strict=True)])

    return [
        Row("discover() 64-partition CPX root", "ms", Stats.of(wall[paths[0]])),
        Row("discover() 64-device synthetic root", "ms", Stats.of(wall[paths[1]])),
        Row("discover() 1024-device synthetic root", "ms", Stats.of(wall[paths[2]])),
        Row("discover() slope 64→1024 devices", "ms/device", slope(wall), 0.2),
        Row("discover() slope 64→1024 devices, CPU time", "ms/device", slope(cpu)),
    ]
