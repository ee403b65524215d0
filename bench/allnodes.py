"""The largest all-nodes answer spurinv accepts, in the unit's memory: peak RSS.

A busy node whose view has no GPU usage data is confirmed busy with ``GET …/nodes``
(docs/busy.md), an answer the size of the cluster, read by the systemd unit's run under
``MemoryMax=256M``. So is ``spurinv fleet``'s one query (run by a person, no unit limit).

**The answer** is built from the real slurmrestd 24.11.5 capture
``tests/fixtures/slurm/responses/24.11/v0.0.42/nodes-n1-idle-n2-drained.json``: its nodes
replicated under new names until the body is as large as spurinv accepts
(``controller.MAX_NODES_BODY``), written compact (≈ 1.6 kB a node, the most nodes per byte) and
as slurmrestd prints it (indented by 2, ≈ 2.1 kB a node). ``n1``, the node under test, is MIXED
with 4 CPUs allocated and no ``gres_used``, so the busy re-check is what decides.

**The runs**, each a real ``spurinv refresh`` process (the console script, as the timer runs it)
against ``tests/faultserver.py`` on 127.0.0.1: an 8-GPU SPX baseline adopted, then the node
switched to CPX and seen once; the measured run confirms the change, reads the node, re-checks
"busy" with the all-nodes answer and drains. Its peak RSS is measured by ``/usr/bin/time``
(bench/measure.py says why not ``ru_maxrss``), from the same saved state every time. Then
``spurinv fleet --json`` on the same answer.

**Hostile shapes**: the same 64 MiB as no real answer is — a node nested
``[[],[],…]`` (objects cost 22 times their text), the same under another top-level key, an
answer that is not an object, one 64 MiB string of raw Latin-1 bytes, 21 million ``{}`` nodes,
a node of 32 million zeros — each read in a fresh process through ``answer.Reader`` as the
busy re-check reads it (keeping only ``n1``), peak RSS by ``/usr/bin/time``, with what the
reader said. Before the bounds (``answer.MAX_VALUE``, ``MAX_NODES``, ``MAX_KEPT``) these peaked
at 331 MiB to 1.8 GiB.

``.venv/bin/python -m bench.allnodes [--runs N] [--hostile-only]`` prints the table; ``bench/run`` includes it.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

from bench.measure import Row, Stats, peak_rss, run_once, table

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "tests" / "fixtures" / "slurm" / "responses" / "24.11" / "v0.0.42" / "nodes-n1-idle-n2-drained.json"
NODES_PATH = "/slurm/v0.0.42/nodes"
UNIT_LIMIT_MIB = 256  # systemd/spurinv-refresh.service MemoryMax=256M


def response(limit: int, *, compact: bool) -> tuple[bytes, int]:
    """An all-nodes body just under ``limit`` bytes and its node count (see the module docstring)."""
    captured = json.loads(CAPTURE.read_text())
    template = captured["nodes"][0]
    first = copy.deepcopy(template)
    first.update(name="n1", hostname="n1", state=["MIXED"], alloc_cpus=4, gres="gpu:mi300x:8")
    first.pop("gres_used", None)
    dump = (lambda value: json.dumps(value, separators=(",", ":"))) if compact else (lambda value: json.dumps(value, indent=2))
    head = dump({key: value for key, value in captured.items() if key != "nodes"})
    # the capture's key order: "nodes" first, then last_update, meta, errors, warnings
    parts = [dump(first)]
    size = len(head) + 64 + len(parts[0])
    index = 0
    while True:
        node = copy.deepcopy(captured["nodes"][index % 2])
        node["name"] = node["hostname"] = f"gpu{index:05d}"
        text = dump(node)
        if size + len(text) + 2 > limit:
            break
        parts.append(text)
        size += len(text) + 2
        index += 1
    separator = "," if compact else ",\n"
    body = '{"nodes":[' + separator.join(parts) + "]," + head[1:]
    return body.encode(), len(parts)


def hostile_shapes(limit: int) -> dict[str, bytes]:
    """Answers of ``limit`` bytes no controller sends, each built to cost the most memory."""

    def node(extra: str = "") -> str:
        return '{"name":"n1","state":["MIXED"]' + extra + "}"

    def fill(unit: str) -> str:
        return ",".join([unit] * ((limit - 100) // (len(unit) + 1)))

    latin1 = ('{"nodes":[' + node(',"reason":"')[:-1]).encode() + b"\xeb" * (limit - 100) + b'"}]}'
    return {
        "a node nested [[],[],...]": ('{"nodes":[' + node(',"junk":[' + fill("[]") + "]") + "]}").encode(),
        "another top-level key [{},{},...]": ('{"x":[' + fill("{}") + '],"nodes":[' + node() + "]}").encode(),
        "not an object [{},{},...]": ("[" + fill("{}") + "]").encode(),
        "one string of Latin-1 bytes": latin1,
        "millions of {} nodes": ('{"nodes":[' + node() + "," + fill("{}") + "]}").encode(),
        "a node of zeros": ('{"nodes":[' + node(',"junk":[' + fill("0") + "]") + "]}").encode(),
    }


READ = """
import sys
from spurinv.controller import answer
reader = answer.Reader(lambda node: node if isinstance(node, dict) and node.get("name") == "n1" else None)
try:
    with open(sys.argv[1], "rb") as body:
        while chunk := body.read(65536):
            reader.feed(chunk)
    reader.close()
    print("read")
except (ValueError, RecursionError) as exc:
    print(f"refused: {str(exc)[:70]}")
"""


def measure_hostile(env: dict[str, str]) -> tuple[list[Row], list[str]]:
    """Peak RSS of reading each hostile shape as the busy re-check does (a fresh process each)."""
    from bench.measure import TIME
    from spurinv.controller.rest import MAX_NODES_BODY

    rows: list[Row] = []
    notes: list[str] = []
    if TIME is None:
        return rows, ["hostile shapes: /usr/bin/time is missing, not measured"]
    work = Path(tempfile.mkdtemp(prefix="spurinv-hostile-"))
    try:
        for name, body in hostile_shapes(MAX_NODES_BODY).items():
            path = work / "body.json"
            path.write_bytes(body)
            del body
            said = run_once([sys.executable, "-c", READ, str(path)], env)
            peak = peak_rss([sys.executable, "-c", READ, str(path)], env)
            if peak is None:
                notes.append(f"hostile shape {name}: the reader process failed: {said.err[-200:]}")
                continue
            rows.append(Row(f"{name}, {MAX_NODES_BODY >> 20} MiB: peak RSS", "MiB", Stats.of([peak]),
                            budget=UNIT_LIMIT_MIB * 0.75, judge="max"))  # fmt: skip
            notes.append(f"hostile shape {name}: {said.out.strip()}")
        return rows, notes
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _config(path: Path, url: str) -> Path:
    path.write_text(
        f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 60\n'
        "run_deadline = 120\n[policy]\nconfirm_interval = 0\n"
    )
    path.chmod(0o600)
    return path


def measure(runs: int, spurinv: str, env: dict[str, str]) -> tuple[list[Row], list[str]]:
    """The rows and notes for the table."""
    sys.path.insert(0, str(REPO / "tests"))
    import rootbuilder
    from faultserver import FaultServer, Gateway, Reply  # tests/ is on the path only from here

    from spurinv.controller.rest import MAX_NODES_BODY

    work = Path(tempfile.mkdtemp(prefix="spurinv-allnodes-"))
    rows: list[Row] = []
    notes: list[str] = []
    try:
        spx = rootbuilder.build_mi300x(work / "spx", "SPX")
        cpx = rootbuilder.build_mi300x(work / "cpx", "CPX")
        for compact in (True, False):
            body, count = response(MAX_NODES_BODY, compact=compact)
            shape = "compact" if compact else "indented as slurmrestd prints it"
            gateway = Gateway()
            node = gateway.add_node("n1", gres="gpu:mi300x:8")
            with FaultServer(gateway=gateway) as server:
                state = work / f"state-{compact}" / "state.json"
                state.parent.mkdir(mode=0o700)
                child = {**env, "SPURINV_CONFIG": str(_config(work / "config.toml", server.url))}
                argv = [spurinv, "refresh", "--quiet", "--state", str(state), "--root"]
                for _ in range(2):
                    adopted = run_once([*argv, str(spx)], child)
                    if adopted.code != 0:
                        return rows, [f"all-nodes: adopting SPX failed (exit {adopted.code}): {adopted.err[-300:]}"]
                node.update(state=["MIXED"], alloc_cpus=4)
                node.pop("gres_used", None)
                server.script("GET", NODES_PATH, Reply(200, body))
                seen = run_once([*argv, str(cpx)], child)  # the change seen once
                saved = state.read_bytes()
                peaks, drained = [], 0
                for _ in range(runs):
                    state.write_bytes(saved)
                    node.update(state=["MIXED"], reason="")
                    before = len(server.requests("GET"))
                    peak = peak_rss([*argv, str(cpx)], child)
                    asked = [r.path for r in server.requests("GET")[before:]]
                    if peak is None or NODES_PATH not in asked:
                        check = run_once([*argv, str(cpx)], child)
                        return rows, [f"all-nodes: the re-check run failed or never asked (exit {check.code}, "
                                      f"seen {seen.code}): {check.err[-300:]}"]  # fmt: skip
                    drained += "DRAIN" in node["state"]
                    peaks.append(peak)
                server.script("GET", NODES_PATH, Reply(200, body))
                fleet_peak = peak_rss([spurinv, "fleet", "--json"], child)
            label = f"{count} nodes, {len(body) / 2**20:.1f} MiB ({shape})"
            rows.append(Row(f"refresh, busy re-check of {label}: peak RSS", "MiB", Stats.of(peaks),
                            budget=UNIT_LIMIT_MIB * 0.75, judge="max"))  # fmt: skip
            if fleet_peak is not None:
                rows.append(Row(f"fleet --json of {label}: peak RSS", "MiB", Stats.of([fleet_peak])))
            notes.append(f"all-nodes ({shape}): the re-check drained the node in {drained} of {runs} runs")
        notes.append(
            f"all-nodes: the budget is three quarters of the unit's MemoryMax={UNIT_LIMIT_MIB}M (room to spare); "
            f"the largest answer accepted is {MAX_NODES_BODY / 2**20:.0f} MiB (controller.MAX_NODES_BODY)"
        )
        return rows, notes
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.allnodes", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per answer (default 3)")
    parser.add_argument("--hostile-only", action="store_true", help="only the hostile shapes (about 30 s)")
    args = parser.parse_args(argv)
    from bench.figures import SPURINV, clean_env

    env = {**clean_env(), "PYTHONPATH": str(REPO)}
    rows, notes = ([], []) if args.hostile_only else measure(args.runs, SPURINV, clean_env())
    hostile_rows, hostile_notes = measure_hostile(env)
    notes += hostile_notes
    print(
        table(
            [
                ("the largest all-nodes answer accepted", rows),
                ("hostile answer shapes, read as the re-check reads", hostile_rows),
            ]
        )
    )
    for note in notes:
        print(f"- {note}")
    return 0 if rows and all(row.verdict() != "FAIL" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
