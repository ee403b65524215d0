"""The controller's cost of nodes that wait for their jobs: requests and bytes per minute.

A rolling partition change on a share of a 10,000-node fleet leaves those nodes drained by
spurinv, each waiting for a GPU job to end, one timer tick a minute. Sampled nodes run the real
``refresh.converge`` (classifier, policy, ``Controller``) tick after tick against
``tests/faultserver.Gateway`` mounted as a ``requests`` transport adapter; what each tick sends
is counted per kind of request. The per-node rate is then scaled to the waiting share of the
fleet, and bytes come from real-shaped answers: the gateway's single-node body (slurmrestd
24.11's captured node) and its all-nodes body built with 10,000 nodes.

Three designs are compared:

* **before** — the convergence of 0.1.0: every tick that saw a busy node confirmed it with an
  all-nodes ``GET …/nodes`` (``LegacyController`` replays that ``view()``);
* **after** — busy for a GPU change means GPUs allocated, read from the single-node view's
  ``gres_used`` (fresh both ways on Slurm 24.11 and 26.05, docs/busy.md): no all-nodes query;
* **after, no GPU usage data** — a view without ``gres_used`` falls back to the stale fields and
  confirms with an all-nodes query at most once per ``controller.busy_recheck`` (300 s + a
  per-node jitter of up to 75 s).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench.fleet import GRES, START, URL, _adapter, _gateway
from bench.measure import Row, Stats
from bench.roots import Roots

REASON = "spurinv: waiting"


def _legacy_controller() -> type:
    from spurinv.controller.rest import Controller

    class LegacyController(Controller):
        """0.1.0's ``view()``: any busy-looking view confirmed with an all-nodes query, every tick."""

        def view(self, confirm_busy: bool = False) -> Any:  # 0.1.0 had no such choice
            view = super().view(confirm_busy=False)
            if not view.idle and view.dialect != "spur":
                path = f"/{self.api}/nodes"
                status, body = self._call("GET", path)
                if status != 200:
                    raise self._fail("GET", path, status, body)
                view = self._node(body)
            return view

    return LegacyController


def _sizes(gateway: Any, fleet: int) -> tuple[int, int]:
    """Bytes of one single-node answer and of one all-nodes answer for a ``fleet``-node cluster."""
    from faultserver import _encode

    single = len(_encode(gateway.answer("GET", gateway.node_path("w00000"), {}, b"").body)[0])
    template = next(iter(gateway.nodes.values()))
    document = json.loads(json.dumps(gateway.answer("GET", f"/slurm/{gateway.version}/nodes", {}, b"").body))
    document["nodes"] = [dict(template, name=f"n{index:05d}", hostname=f"n{index:05d}") for index in range(fleet)]
    return single, len(json.dumps(document).encode())


def _simulate(roots: Roots, design: str, sample: int, minutes: int) -> tuple[Counter[str], int]:
    """Run ``sample`` waiting nodes for ``minutes`` ticks; count requests by kind."""
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller
    from spurinv.inventory import model
    from spurinv.inventory.discovery import discover
    from spurinv.inventory.model import Reading
    from spurinv.inventory.root import Root
    from spurinv.policy import Settings
    from spurinv.refresh import converge
    from spurinv.state import file as state_file
    from spurinv.state.file import State

    readings = {name: model.reading(discover(Root(str(path))), START)
                for name, path in (("spx", roots.spx), ("cpx", roots.cpx))}  # fmt: skip
    gateway = _gateway()
    adapter = _adapter(gateway)
    section = ControllerSection(url=URL, api="slurm/v0.0.42")
    settings = Settings(observe=False)
    cls: type[Controller] = _legacy_controller() if design == "before" else Controller
    names = [f"w{index:05d}" for index in range(sample)]
    states: dict[str, State] = {}
    for name in names:
        node = gateway.add_node(name, gres=GRES["spx"], state=("MIXED", "DRAIN"), reason=REASON, alloc_cpus=4,
                                gres_used="gpu:mi300x:2(IDX:0-1)")  # fmt: skip
        if design == "after, no GPU usage data":
            del node["gres_used"]
        spx = readings["spx"]
        assert spx["inventory"] is not None
        state = state_file.new(baseline={"inventory": spx["inventory"], "since": START, "source": "adopted"})
        cpx = readings["cpx"]
        state = state_file.record(state_file.record(state, {**cpx, "taken_at": START}), {**cpx, "taken_at": START})
        drain = state_file.drain(reason=REASON, set_at=START, cause="busy", fingerprint=cpx["fingerprint"])
        states[name] = {**state, "drain": drain, "node": name}

    def connect_for(name: str) -> Callable[[Any], Controller]:
        import requests  # noqa: TID251  (the bench plays the transport under spurinv's controller client)

        def connect(_state: Any) -> Controller:
            session = requests.Session()
            session.mount(URL, adapter)
            return cls(section, name, None, session=session)

        return connect

    holds = 0
    for minute in range(1, minutes + 1):
        moment = START + timedelta(minutes=minute)
        for name in names:
            state = states[name]
            reading: Reading = {**readings["cpx"], "taken_at": moment}
            state = state_file.record(state, reading)
            result = converge(state, reading, settings, connect_for(name), lambda moment=moment: moment)  # type: ignore[misc]  # a default binds the loop value
            holds += result.steps[-1]["action"] == "hold"
            states[name] = result.state
    kinds: Counter[str] = Counter()
    for method, path, _body in adapter.seen:
        kinds["all-nodes GET" if path.rstrip("/").endswith("/nodes") else f"single-node {method}"] += 1
    return kinds, holds


def waiting_cost(
    roots: Roots, fleet: int = 10000, share: float = 0.1, sample: int = 40, minutes: int = 30
) -> tuple[list[Row], list[str]]:
    """Rows and notes: requests and bytes per minute the waiting share of ``fleet`` costs the controller."""
    waiting = round(fleet * share)
    sizes_gateway = _gateway()
    sizes_gateway.add_node("w00000", gres=GRES["spx"], state=("MIXED", "DRAIN"), reason=REASON)
    single, everything = _sizes(sizes_gateway, fleet)
    rows: list[Row] = []
    notes = [
        f"waiting cost: {waiting} of {fleet} nodes drained by spurinv, each waiting for a GPU job, one tick a minute; "
        f"{sample} nodes simulated for {minutes} minutes each and scaled; a single-node answer is {single:,} bytes, "
        f"an all-nodes answer for {fleet:,} nodes {everything / 1e6:.1f} MB"
    ]
    for design in ("before", "after", "after, no GPU usage data"):
        kinds, holds = _simulate(roots, design, sample, minutes)
        per_node_minute = {kind: count / (sample * minutes) for kind, count in kinds.items()}
        requests = sum(per_node_minute.values()) * waiting
        all_nodes = per_node_minute.get("all-nodes GET", 0.0) * waiting
        megabytes = (all_nodes * everything + (requests - all_nodes) * single) / 1e6
        rows.append(Row(f"waiting, {design}: controller requests per minute", "count", Stats.of([requests])))
        rows.append(Row(f"waiting, {design}: all-nodes queries per minute", "count", Stats.of([all_nodes])))
        rows.append(Row(f"waiting, {design}: MB sent by the controller per minute", "MB", Stats.of([megabytes])))
        notes.append(
            f"waiting, {design}: per node and minute "
            + ", ".join(f"{kind} {rate:.3f}" for kind, rate in sorted(per_node_minute.items()))
            + f"; {holds} of {sample * minutes} ticks held (waiting for the job)"
        )
    if everything > (8 << 20):
        notes.append(
            f"waiting, before: at {fleet:,} nodes the all-nodes answer exceeds the client's 8 MiB body cap, so each "
            "such tick in fact failed (exit 76) and backed off; the figures above count what was asked of the controller"
        )
    return rows, notes


__all__ = ["waiting_cost"]


if __name__ == "__main__":  # pragma: no cover - `python -m bench.waiting` prints just these figures
    import sys
    import tempfile
    from pathlib import Path

    from bench.measure import table

    with tempfile.TemporaryDirectory(prefix="spurinv-bench-") as work:
        rows, notes = waiting_cost(Roots(Path(work) / "roots"), sample=int(sys.argv[1]) if len(sys.argv) > 1 else 40)
    print(table([("controller cost of waiting nodes (10 % of 10,000)", rows)]))
    for note in notes:
        print(f"  {note}")
