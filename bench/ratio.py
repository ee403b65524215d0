"""The no-change tick against an empty interpreter, paired: ``bench/run --tick-ratio``.

Measured the way the timer pays it: spurinv installed as README.md's "Install on a node" does it
(a venv of its own made from the system interpreter, ``/usr/bin/python3``, pip upgraded, then
``pip install`` of this checkout), so the bytecode is what pip writes and the command is pip's
console script. The checkout's own ``.venv`` is measured beside it: its bytecode is what the test
suite leaves (checked against a hash of the source at every import, tests/doubles.py), which an
installed node never runs, and its interpreter is whichever made the venv.

Each venv's ``python -c pass`` and its no-change ``spurinv refresh`` on the 64-partition CPX root
run alternately (pass, tick, pass, tick, …, both venvs in every round) so a burst of load lands on
all of them, with the same environment (no ``PYTHONDONTWRITEBYTECODE``). CPU is the child's own
user + system time, from the kernel's accounting when it is reaped (``os.wait4``); wall is spawn
to reap. A ratio is the median tick over the median ``pass`` of the same venv; the goal is judged
on the installed one. ``--importtime`` adds one run of each under ``-X importtime`` and lists what
the installed tick imports beyond the interpreter's own start.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.figures import PYTHON, SPURINV, _starts, _steady_state, clean_env
from bench.measure import Sample, run_once
from bench.roots import REPO

GOAL = 2.0  # the tick within 2× an empty interpreter (CPU), bench/README.md
SYSTEM_PYTHON = "/usr/bin/python3"  # README.md, "Install on a node": the venv is made from it


@dataclass
class Side:
    """One venv: its interpreter, its console script, and the pairs measured with them."""

    label: str
    python: str
    spurinv: str
    pairs: list[tuple[Sample, Sample]] = field(default_factory=list)

    def medians(self, pick: str) -> tuple[float, float]:
        """The median ``pick`` (``cpu_ms``, ``wall_ms``) of the ``pass`` runs and of the ticks."""
        return (
            statistics.median(getattr(pass_, pick) for pass_, _tick in self.pairs),
            statistics.median(getattr(tick, pick) for _pass, tick in self.pairs),
        )


def _importtime(argv: list[str], env: dict[str, str], python: str) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs) of one run under ``-X importtime``."""
    err = run_once([python, "-X", "importtime", *argv], env).err
    times: dict[str, tuple[int, int]] = {}
    for line in err.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            own, total, name = line[len("import time:") :].split("|")
            if own.strip().isdigit():
                times[name.strip()] = (int(own), int(total))
    return times


def install(work: Path, base: str) -> tuple[str, str] | str:
    """(python, console script) of spurinv installed from this checkout into a venv of its own made
    from ``base``, as README.md's install does; or why that failed. ``--no-deps``: the tick imports
    none of spurinv's dependencies (tests/test_tick.py), and the full runs that leave the steady
    state it ticks on are the checkout's. pip needs the package index, as the README's install does."""
    venv = work / "installed"
    python = str(venv / "bin" / "python")
    steps = (
        [base, "-m", "venv", str(venv)],
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "pip>=25.2"],
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", str(REPO)],
    )
    for argv in steps:
        try:
            done = subprocess.run(argv, env=clean_env(), capture_output=True, text=True, check=False)
        except OSError as exc:
            return f"{argv[0]}: {exc.strerror}"
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            return f"{' '.join(argv[1:4])} … failed: {last[0]}"
    return python, str(venv / "bin" / "spurinv")


def _version(python: str) -> str:
    sample = run_once([python, "-c", "import sys; print(sys.version.split()[0])"], clean_env())
    return sample.out.strip() or "?"


def measure(work: Path, runs: int, importtime: bool = False, base: str | None = None) -> int:
    """Print the paired figures and the ratios; return 0 (the goal is reported, not enforced)."""
    import rootbuilder as rb  # tests/ is on sys.path: bench.roots

    base = base or SYSTEM_PYTHON
    print(f"bench: installing spurinv from {REPO} into a venv made from {base} …", file=sys.stderr, flush=True)
    installed = install(work, base)
    sides = [Side("checkout's .venv (the tests' bytecode)", PYTHON, SPURINV)]
    if isinstance(installed, str):
        print(f"bench: cannot install as README.md does ({installed}); measuring the checkout only", file=sys.stderr)
    else:
        sides.insert(0, Side("installed (README.md)", *installed))
    root = rb.build_mi300x(work / "mi300x-cpx", "CPX")
    config = work / "empty.toml"  # a real, empty config file, as bench/figures.py: the memo keys on it
    config.write_text("")
    config.chmod(0o600)
    state = work / "tick" / "state.json"
    state.parent.mkdir(mode=0o700)
    env = clean_env(SPURINV_CONFIG=str(config))
    _steady_state(root, state, env)
    check = _starts("unchanged: 64 devices")  # the fast path's own line, not the full run's table

    def tick(side: Side) -> list[str]:
        return [side.spurinv, "refresh", "--root", str(root), "--state", str(state)]

    for number in range(3 + runs):  # three warm-up rounds: bytecode written, roots in the page cache
        for side in sides:
            pair = run_once([side.python, "-c", "pass"], clean_env()), run_once(tick(side), env)
            problem = check(pair[1])
            if problem:
                print(f"bench: the tick of {side.spurinv} left the fast path: {problem}", file=sys.stderr)
                return 1
            if number >= 3:
                side.pairs.append(pair)
    print(f"no-change tick vs python -c pass of the same venv — {runs} rounds, alternating; 64-partition CPX root")
    print(f"{'':44}{'CPU user+sys (ms)':>24}{'ratio':>8}{'per pair: median (quartiles)':>32}{'wall ratio':>12}")
    print(f"{'':44}{'pass':>12}{'tick':>12}")
    for side in sides:
        cpu, wall = side.medians("cpu_ms"), side.medians("wall_ms")
        per_pair = sorted(pair[1].cpu_ms / pair[0].cpu_ms for pair in side.pairs if pair[0].cpu_ms > 0)
        low, high = per_pair[len(per_pair) // 4], per_pair[(3 * len(per_pair)) // 4]
        spread = f"{statistics.median(per_pair):.2f}× ({low:.2f}–{high:.2f}×)"
        print(f"{side.label:44}{cpu[0]:>12.1f}{cpu[1]:>12.1f}{cpu[1] / cpu[0]:>7.2f}×{spread:>32}{wall[1] / wall[0]:>11.2f}×")
        print(f"  {side.python} (Python {_version(side.python)})")
    judged = sides[0]
    cpu = judged.medians("cpu_ms")
    verdict = "met" if cpu[1] / cpu[0] <= GOAL else "not met"
    print(f"goal: CPU ratio ≤ {GOAL:.1f}× for the {judged.label.split(' (')[0]} tick — {verdict}")
    for side in sides:
        if "\nimport re\n" in Path(side.spurinv).read_text(errors="replace"):
            # pip before 25.2 writes console scripts that import re first (pypa/pip#13166): README.md's install upgrades pip
            print(f"note: {side.spurinv} imports re before spurinv starts (written by pip < 25.2): about 6 ms of each tick")
    if importtime:
        base_times = _importtime(["-c", "pass"], clean_env(), judged.python)
        ticked = _importtime(tick(judged), env, judged.python)
        extra = {name: times for name, times in ticked.items() if name not in base_times}
        print(f"\n-X importtime, {judged.label}, one run: {len(extra)} modules beyond the interpreter's start, "
              "self µs (cumulative µs)")  # fmt: skip
        for name, (own, total) in sorted(extra.items(), key=lambda item: -item[1][0])[:25]:
            print(f"  {own:>7} ({total:>7})  {name}")
        print(f"  total self µs of these: {sum(own for own, _total in extra.values())}")
    return 0
