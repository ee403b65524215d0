"""``bench/run``: options, the order of the measurements, and the one table."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import allnodes, cdi, figures, fleet, fleetview, ratio, waiting
from bench.measure import Row, table
from bench.roots import Roots


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run", description="spurinv's performance figures and budgets")
    parser.add_argument("--quick", action="store_true", help="5 runs per command, 1,000 simulated nodes, 10 e2e nodes")
    parser.add_argument("--runs", type=_positive, help="timed runs per command (default 15)")
    parser.add_argument("--nodes", type=_positive, help="nodes in the in-memory fleet simulation (default 10,000)")
    parser.add_argument("--e2e-nodes", type=_positive, help="nodes in the end-to-end run (default 30: ~250 processes)")
    parser.add_argument("--no-fleet", action="store_true", help="skip the fleet simulation and the end-to-end run")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (roots, state files)")
    parser.add_argument("--fleet-view-only", action="store_true", help="only `spurinv fleet` on a 10,000-node answer")
    parser.add_argument(
        "--tick-ratio",
        action="store_true",
        help="only the no-change tick against python -c pass, paired, and their ratio",
    )
    parser.add_argument("--importtime", action="store_true", help="with --tick-ratio: what the tick imports, -X importtime")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="with --tick-ratio: the interpreter the installed venv is made from (default /usr/bin/python3, as README.md)",
    )
    args = parser.parse_args(argv)
    args.runs = args.runs or (5 if args.quick else 31 if args.tick_ratio else 15)
    args.nodes = args.nodes or (1000 if args.quick else 10000)
    args.e2e_nodes = args.e2e_nodes or (10 if args.quick else 30)
    return args


def main(argv: list[str]) -> int:
    args = options(argv)
    work = Path(tempfile.mkdtemp(prefix="spurinv-bench-"))
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    if args.fleet_view_only:
        return _fleet_view_only(args, started, load_before)
    if args.tick_ratio:
        return _tick_ratio(args, work)
    try:
        print(f"bench: building roots in {work} …", file=sys.stderr, flush=True)
        roots = Roots(work / "roots")
        print(f"bench: {args.runs} runs per command after warm-up …", file=sys.stderr, flush=True)
        measured = figures.Figures(roots, work)
        measured.measure(args.runs, warmup=3)
        sections = [
            ("baseline (informational)", measured.baseline_rows()),
            ("spurinv on one node (64-partition CPX root)", measured.spurinv_rows()),
            ("discovery, in one process", figures.discovery_rows(roots, args.runs)),
        ]
        notes = list(measured.notes)
        if not args.no_fleet:
            print(f"bench: fleet simulation, {args.nodes} nodes …", file=sys.stderr, flush=True)
            rows, more = fleet.simulate(roots, args.nodes)
            sections.append(("fleet: in-memory simulation", rows))
            notes += more
            print("bench: waiting cost at 10,000 nodes, 10 % waiting …", file=sys.stderr, flush=True)
            rows, more = waiting.waiting_cost(roots, sample=10 if args.quick else 40)
            sections.append(("fleet: controller cost of nodes waiting for jobs (10 % of 10,000)", rows))
            notes += more
            print(f"bench: end to end, {args.e2e_nodes} nodes …", file=sys.stderr, flush=True)
            e2e = work / "e2e"
            e2e.mkdir()
            rows, more = fleet.end_to_end(roots, e2e, args.e2e_nodes, figures.SPURINV, figures.clean_env())
            sections.append(("fleet: end to end (real processes, local HTTP gateway)", rows))
            notes += more
        print("bench: spurinv fleet on a 10,000-node answer …", file=sys.stderr, flush=True)
        rows, more = fleetview.measure(10000, min(args.runs, 5), figures.PYTHON, figures.SPURINV, figures.clean_env())
        sections.append(("spurinv fleet: a 10,000-node all-nodes answer", rows))
        notes += more
        print("bench: the largest all-nodes answer accepted (64 MiB) …", file=sys.stderr, flush=True)
        rows, more = allnodes.measure(1 if args.quick else 3, figures.SPURINV, figures.clean_env())
        sections.append(("the largest all-nodes answer accepted, in the unit's memory", rows))
        notes += more
        rows, more = allnodes.measure_hostile(figures.clean_env(PYTHONPATH=str(allnodes.REPO)))
        sections.append(("hostile answer shapes (64 MiB), read as the busy re-check reads", rows))
        notes += more
        print("bench: CDI specs (alias bomb, the largest spec, the bound of a run) …", file=sys.stderr, flush=True)
        rows, more = cdi.measure(1 if args.quick else 3)
        sections.append(("CDI specs, CPU seconds in one process", rows))
        notes += more
    finally:
        if args.keep:
            print(f"bench: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return _report(sections, notes, args, started, load_before)


def _tick_ratio(args: argparse.Namespace, work: Path) -> int:
    try:
        return ratio.measure(work, args.runs, args.importtime, args.python)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fleet_view_only(args: argparse.Namespace, started: float, load_before: float) -> int:
    print("bench: spurinv fleet on a 10,000-node answer …", file=sys.stderr, flush=True)
    rows, notes = fleetview.measure(10000, min(args.runs, 5), figures.PYTHON, figures.SPURINV, figures.clean_env())
    return _report([("spurinv fleet: a 10,000-node all-nodes answer", rows)], notes, args, started, load_before)


def _report(sections: list[tuple[str, list[Row]]], notes: list[str], args: argparse.Namespace, started: float,
            load_before: float) -> int:  # fmt: skip
    print(f"spurinv bench — {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"{args.runs} runs per command, {time.perf_counter() - started:.0f} s; 1-minute load average "
          f"{load_before:.2f} at the start (others), {os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    print(table(sections))
    for note in notes:
        print(f"  {note}")
    failed = [row.figure for _title, rows in sections for row in rows if row.verdict() == "FAIL"]
    if failed:
        print(f"budgets not met: {', '.join(failed)}")
    return 1 if failed else 0
