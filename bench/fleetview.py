"""``spurinv fleet`` at scale: a 10,000-node all-nodes response, parsed and rendered.

**The response** is built from the real slurmrestd 24.11.5 capture
``tests/fixtures/slurm/responses/24.11/v0.0.42/nodes-n1-idle-n2-drained.json``: its two nodes
are replicated under new names and serialised as slurmrestd prints it (indented by 2), about
2.7 kB a node. Per 100 nodes: 60 carry spurinv's record in ``extra``, 1 is under a spurinv drain
(set 1 minute to 99 days ago; its id in the reason and its record in ``extra``), 1 under an NHC
drain (the captured n2), 1 has a record whose gres no longer matches; so 300 of 10,000 need attention, the rest are quiet.

**In one fresh process** (``python -m bench.fleetview BODY``): the body's bytes, fed in 64 KiB
chunks to :class:`spurinv.controller.answer.Reader` keeping :func:`spurinv.report.fleet.essentials` of each node
(what the REST client does with the answer as it arrives) → :func:`spurinv.report.fleet.build` → the JSON document
(``documents.dumps``) → the table (default: the nodes needing attention) and the table with
``--all``, each timed; the process's peak RSS is its ``VmHWM`` (the exec'd image's own
high-water mark; see measure.py for why ``ru_maxrss`` would not do). The budget is
≤ 1 s for parse + build + render and ≤ 200 MiB: checked on the slowest rendering (``--all``)
and on the JSON document.

**End to end**: the real ``spurinv fleet --json`` process against ``tests/faultserver.py``
serving the same bytes on 127.0.0.1 (HTTP included; informational).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import Row, Stats, peak_rss, run_once
from spurinv.controller.ownership import reason_for

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "tests" / "fixtures" / "slurm" / "responses" / "24.11" / "v0.0.42" / "nodes-n1-idle-n2-drained.json"
NOW = 1796316732
RECORD = {"fingerprint": "31ad919b5202" + "0" * 52, "inventory": "8 devices (mi300x 8), 192 CPUs, 1547 GiB"}
PHASES = ("parse", "build", "json", "table", "table_all")
DRAIN_TEXT = "8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle"


def response(count: int) -> bytes:
    """An all-nodes body of ``count`` nodes, from the real capture (see the module docstring)."""
    captured = json.loads(CAPTURE.read_text())
    n1, n2 = captured["nodes"]
    nodes = []
    for index in range(count):
        kind = index % 100
        node = copy.deepcopy(n2 if kind == 1 else n1)
        node["name"] = node["hostname"] = f"gpu{index:05d}"
        node["reason"] = node["reason"] if kind == 1 else ""
        node["extra"] = ""
        record: dict[str, Any] = {**RECORD, "node": node["name"]}
        if kind == 0:  # our drain: its id in the reason, its record in extra
            node["state"] = ["MIXED", "DRAIN"] if index % 200 else ["IDLE", "DRAIN"]
            node["reason"] = reason_for(node["name"], f"{index % 65536:04x}", DRAIN_TEXT)
            node["reason_changed_at"]["number"] = NOW - 60 - (index * 8641) % (99 * 86400)
            record["drain"] = {"id": node["reason"][10:18], "reason": node["reason"], "cause": "busy",
                               "at": "2026-12-03T09:00:00Z"}  # fmt: skip
        if kind < 62 and kind != 1:  # 60 quiet managed nodes, our drain, the hand-edited gres
            gres = "gpu:mi300x:8,fpga:4" if kind == 2 else "gpu:mi300x:8"
            node["extra"] = json.dumps({"spurinv": {**record, "gres": gres}}, sort_keys=True, separators=(",", ":"))
        nodes.append(node)
    return json.dumps({**captured, "nodes": nodes}, indent=2).encode()


def _peak_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(body_path: str) -> dict[str, Any]:
    """One measured run (in a fresh process): wall and CPU ms per phase, rows shown, peak RSS."""
    from spurinv.cli import render
    from spurinv.controller import answer
    from spurinv.report import documents, fleet

    data = Path(body_path).read_bytes()
    marks = [(time.perf_counter(), time.process_time())]
    reader = answer.Reader(fleet.essentials)
    for start in range(0, len(data), 65536):
        reader.feed(data[start : start + 65536])
    nodes = reader.close()["nodes"]
    marks.append((time.perf_counter(), time.process_time()))
    view = fleet.build(nodes, NOW)
    marks.append((time.perf_counter(), time.process_time()))
    document = fleet.document(view, now=NOW, controller="https://c:6820", api="slurm/v0.0.42", transport="rest", exit_code=0)
    text = documents.dumps(document, compact=True)
    marks.append((time.perf_counter(), time.process_time()))
    table = render.fleet_text(document)
    marks.append((time.perf_counter(), time.process_time()))
    table_all = render.fleet_text(document, show_all=True)
    marks.append((time.perf_counter(), time.process_time()))
    return {
        "ms": {phase: (marks[i + 1][0] - marks[i][0]) * 1000 for i, phase in enumerate(PHASES)},
        "cpu_ms": {phase: (marks[i + 1][1] - marks[i][1]) * 1000 for i, phase in enumerate(PHASES)},
        "attention": view["summary"]["attention"],
        "nodes": view["summary"]["nodes"],
        "body_mb": len(data) / 1e6,
        "json_mb": len(text) / 1e6,
        "table_lines": table.count("\n"),
        "table_all_lines": table_all.count("\n"),
        "peak_mib": _peak_mib(),
    }


def measure(count: int, runs: int, python: str, spurinv: str, env: dict[str, str]) -> tuple[list[Row], list[str]]:
    """The rows and notes for bench/run's table."""
    work = Path(tempfile.mkdtemp(prefix="spurinv-fleetview-"))
    try:
        body = response(count)
        body_path = work / "nodes.json"
        body_path.write_bytes(body)
        results = []
        for _ in range(runs):
            sample = run_once([python, "-m", "bench.fleetview", str(body_path)], env, cwd=str(REPO))
            if sample.code != 0:
                return [], [f"fleet view: child failed (exit {sample.code}): {sample.err.strip()[-300:]}"]
            results.append(json.loads(sample.out))
        ms = {phase: Stats.of([result["ms"][phase] for result in results]) for phase in PHASES}

        def total(key: str, phases: tuple[str, ...]) -> Stats:
            return Stats.of([sum(result[key][phase] for phase in phases) for result in results])

        with_table, with_json = ("parse", "build", "table_all"), ("parse", "build", "json")
        peak = Stats.of([result["peak_mib"] for result in results])
        first = results[0]
        label = f"fleet view {count} nodes:"
        rows = [
            Row(f"{label} reading the answer (answer.Reader)", "ms", ms["parse"]),
            Row(f"{label} rows + summary", "ms", ms["build"]),
            Row(f"{label} JSON document (compact)", "ms", ms["json"]),
            Row(f"{label} table, {first['attention']} need attention", "ms", ms["table"]),
            Row(f"{label} table --all", "ms", ms["table_all"]),
            Row(f"{label} parse + rows + table --all, wall", "ms", total("ms", with_table)),
            Row(f"{label} parse + rows + table --all, CPU", "ms", total("cpu_ms", with_table), budget=1000),
            Row(f"{label} parse + rows + JSON document, wall", "ms", total("ms", with_json)),
            Row(f"{label} parse + rows + JSON document, CPU", "ms", total("cpu_ms", with_json), budget=1000),
            Row(f"{label} peak RSS of that process", "MiB", peak, budget=200, judge="max"),
        ]
        notes = [
            f"fleet view: the answer is {first['body_mb']:.1f} MB ({count} nodes from the real 24.11 capture), the JSON "
            f"document {first['json_mb']:.1f} MB; tables of {first['table_lines']} and {first['table_all_lines']} lines "
            f"at 80 columns; {runs} runs, each in a fresh process (peak RSS = VmHWM, interpreter and imports included); "
            "the budgets apply to CPU time, which other processes on a shared machine do not inflate"
        ]
        rows += _end_to_end(body, work, spurinv, env, runs, notes)
        return rows, notes
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _end_to_end(body: bytes, work: Path, spurinv: str, env: dict[str, str], runs: int, notes: list[str]) -> list[Row]:
    """``spurinv fleet --json`` as a real process against the local gateway serving ``body``."""
    sys.path.insert(0, str(REPO / "tests"))
    from faultserver import FaultServer, Reply  # tests/ is on the path only from here

    config = work / "config.toml"
    with FaultServer() as server:
        server.script("GET", "/slurm/v0.0.42/nodes", Reply(200, body))
        config.write_text(f'[controller]\nurl = "{server.url}"\napi = "slurm/v0.0.42"\n')
        config.chmod(0o600)
        child_env = {**env, "SPURINV_CONFIG": str(config)}
        argv = [spurinv, "fleet", "--json"]
        samples = [run_once(argv, child_env) for _ in range(runs)]
        failed = [sample for sample in samples if sample.code != 0]
        if failed:
            notes.append(f"fleet end to end: exit {failed[0].code}: {failed[0].err.strip()[-300:]}")
            return []
        rss = peak_rss(argv, child_env)
    wall = Stats.of([sample.wall_ms for sample in samples])
    rows = [Row("spurinv fleet --json, whole process over HTTP", "ms", wall)]
    if rss is not None:
        rows.append(Row("spurinv fleet --json, whole process: peak RSS", "MiB", Stats.of([rss])))
    notes.append("fleet end to end: the console script against tests/faultserver.py on 127.0.0.1 serving the same answer")
    return rows


if __name__ == "__main__":
    sys.stdout.write(json.dumps(child(sys.argv[1])) + "\n")
