"""The no-change tick against an empty interpreter, paired (issue #22): ``bench/run --tick-ratio``.

One figure, measured the way the timer pays it: ``python -c pass`` and a no-change ``spurinv
refresh`` on the 64-partition CPX root, alternating (pass, tick, pass, tick, …) so a burst of load
lands on both, from the same virtualenv interpreter with the same environment (no
``PYTHONDONTWRITEBYTECODE``: the bytecode caches are part of what a tick costs). CPU is the
child's own user + system time, from the kernel's accounting when it is reaped (``os.wait4``,
the per-child form of ``getrusage(RUSAGE_CHILDREN)``); wall is spawn to reap. The ratio is the
median tick over the median ``pass``. ``--importtime`` adds one run of each under ``-X
importtime`` and lists what the tick imports beyond the interpreter's own start.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from bench.figures import PYTHON, SPURINV, _starts, _steady_state, clean_env
from bench.measure import Sample, run_once
from bench.roots import REPO  # noqa: F401  (puts tests/ on sys.path for rootbuilder)

GOAL = 2.0  # issue #22: the tick within 2× an empty interpreter (CPU)


def _importtime(argv: list[str], env: dict[str, str]) -> dict[str, tuple[int, int]]:
    """module -> (self µs, cumulative µs) of one run under ``-X importtime``."""
    err = run_once([PYTHON, "-X", "importtime", *argv], env).err
    times: dict[str, tuple[int, int]] = {}
    for line in err.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            own, total, name = line[len("import time:") :].split("|")
            if own.strip().isdigit():
                times[name.strip()] = (int(own), int(total))
    return times


def measure(work: Path, runs: int, importtime: bool = False) -> int:
    """Print the paired figures and the ratio; return 0 (the goal is reported, not enforced)."""
    import rootbuilder as rb  # tests/ is on sys.path: bench.roots

    root = rb.build_mi300x(work / "mi300x-cpx", "CPX")
    config = work / "empty.toml"  # a real, empty config file, as bench/figures.py: the memo keys on it
    config.write_text("")
    config.chmod(0o600)
    state = work / "tick" / "state.json"
    state.parent.mkdir(mode=0o700)
    env = clean_env(SPURINV_CONFIG=str(config))
    _steady_state(root, state, env)
    empty = [PYTHON, "-c", "pass"]
    tick = [SPURINV, "refresh", "--root", str(root), "--state", str(state)]
    check = _starts("unchanged: 64 devices")  # the fast path's own line, not the full run's table
    pairs: list[tuple[Sample, Sample]] = []
    for number in range(3 + runs):  # three warm-up pairs: bytecode written, roots in the page cache
        pair = run_once(empty, clean_env()), run_once(tick, env)
        problem = check(pair[1])
        if problem:
            print(f"bench: the tick left the fast path: {problem}", file=sys.stderr)
            return 1
        if number >= 3:
            pairs.append(pair)

    def median(values: list[float]) -> float:
        return statistics.median(values)

    cpu = [median([pair[side].cpu_ms for pair in pairs]) for side in (0, 1)]
    wall = [median([pair[side].wall_ms for pair in pairs]) for side in (0, 1)]
    per_pair = sorted(pair[1].cpu_ms / pair[0].cpu_ms for pair in pairs if pair[0].cpu_ms > 0)
    print(f"no-change tick vs python -c pass — {len(pairs)} alternating pairs, {sys.implementation.name} "
          f"{sys.version.split()[0]}, {PYTHON}")  # fmt: skip
    print(f"{'':24}{'CPU user+sys (ms)':>20}{'wall (ms)':>12}")
    print(f"{'python -c pass':24}{cpu[0]:>20.1f}{wall[0]:>12.1f}")
    print(f"{'spurinv refresh (tick)':24}{cpu[1]:>20.1f}{wall[1]:>12.1f}")
    print(f"{'ratio (median/median)':24}{cpu[1] / cpu[0]:>19.2f}×{wall[1] / wall[0]:>11.2f}×")
    if per_pair:
        low, high = per_pair[len(per_pair) // 4], per_pair[(3 * len(per_pair)) // 4]
        print(f"CPU ratio per pair: median {median(per_pair):.2f}×, quartiles {low:.2f}×–{high:.2f}×")
    print(f"goal (issue #22): CPU ratio ≤ {GOAL:.1f}× — {'met' if cpu[1] / cpu[0] <= GOAL else 'not met'}")
    if "\nimport re\n" in Path(SPURINV).read_text(errors="replace"):
        # pip before 25.2 writes console scripts that import re first (pypa/pip#13166): README.md's install upgrades pip
        print(f"note: {SPURINV} imports re before spurinv starts (written by pip < 25.2): about 6 ms of each tick")
    if importtime:
        base = _importtime(empty, clean_env())
        ticked = _importtime(tick, env)
        extra = {name: times for name, times in ticked.items() if name not in base}
        print(f"\n-X importtime, one run: {len(extra)} modules beyond the interpreter's start, self µs (cumulative µs)")
        for name, (own, total) in sorted(extra.items(), key=lambda item: -item[1][0])[:25]:
            print(f"  {own:>7} ({total:>7})  {name}")
        print(f"  total self µs of these: {sum(own for own, _total in extra.values())}")
    return 0
