"""Fleet scale: a rolling driver reload through the real convergence code, then end to end.

**Simulation.** Every node runs the per-tick sequence of :func:`spurinv.refresh._run` with
``confirm_interval = 0`` (the timer's next tick is the confirmation): ``state.file.record`` the
reading, then :func:`spurinv.refresh.converge` — the real classifier and policy — with a real
:class:`spurinv.controller.rest.Controller` whose ``requests`` session has a transport adapter
mounted that hands each request to ``tests/faultserver.Gateway`` (slurmrestd 24.11, built from
the real captures), in memory. Readings are real: each root of :mod:`bench.roots` is discovered
once and validated into a ``Reading`` that every node reuses with its own ``taken_at``.
``_run``'s bookkeeping after ``converge`` (the ``last`` decision and the fast path's memo) is
left out: the policy reads neither.

Each node starts from a baseline adopted from the controller (``gres=gpu:mi300x:8``, ``api``
detected and cached: bootstrapped once through the same code, its requests not counted), sees
one steady tick, then one to three failed or partial readings, then its old inventory — or, on
the switched 10 %, the CPX inventory — for three ticks. Partial inventories come back with more
GPUs each time: two identical successful readings in a row are a confirmed change by design,
whatever caused them (a node whose GPUs all left the bus twice is held as suspicious instead).

The gateway *applies* every write, including the GPU count change that real Slurm refuses for
file-backed GRES (faultserver's ``gres_policy="slurm"``): the question here is how often the
fleet writes, not whether Slurm accepts it.

**End to end.** The same scenario with real ``spurinv refresh`` processes (the console script),
each node with its own state file, config file and root — a symlink switched between the real
trees between ticks, as sysfs changes under a running node — against ``FaultServer`` serving
the same gateway over HTTP on 127.0.0.1, nodes in parallel on every core.
"""

from __future__ import annotations

import io
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.measure import Row, Stats, run_once
from bench.roots import PARTIAL_COUNTS, Roots

FAILURES = ("unloaded", "kfd-missing", "kfd-half")
SWITCH_FAILURES = (*FAILURES, "cpx-captured")
GRES = {"spx": "gpu:mi300x:8", "cpx": "gpu:mi300x:64"}
START = datetime(2026, 12, 2, 18, 0, tzinfo=UTC)
URL = "http://127.0.0.1:9"  # never dialled: the adapter answers (and port 9 is discard if it were)
NODE_PREFIX = "/slurm/v0.0.42/node/"
EXIT_IOERR = 74  # a failed discovery: the expected exit status of a bad tick
EXIT_TEMPFAIL = 75  # a partition switch in progress (half of KFD's nodes gone): the other expected one


@dataclass
class Plan:
    """One node's ticks: the root each tick reads."""

    name: str
    switched: bool
    ticks: list[str]

    @property
    def final(self) -> str:
        return "cpx" if self.switched else "spx"


def plans(count: int, switched_share: float, seed: int, prefix: str) -> list[Plan]:
    """Every node: a steady tick, 1–3 bad readings, then the final inventory three times."""
    rng = random.Random(seed)  # noqa: S311  (a reproducible draw, not a secret)
    switched = set(rng.sample(range(count), round(count * switched_share)))
    result = []
    for index in range(count):
        is_switched = index in switched
        bad: list[str] = []
        partial = 0
        for _ in range(rng.randint(1, 3)):
            choices = list(SWITCH_FAILURES if is_switched else (*FAILURES, "off-bus"))
            larger = [n for n in PARTIAL_COUNTS if n > partial]
            if larger and not is_switched:
                choices.append("partial")
            kind = rng.choice(choices)
            if kind == "partial":
                partial = rng.choice(larger)
                kind = f"spx-{partial}"
            bad.append(kind)
        plan = Plan(f"{prefix}{index:05d}", is_switched, [])
        plan.ticks = ["spx", *bad, plan.final, plan.final, plan.final]
        result.append(plan)
    return result


def _gateway() -> Any:
    from faultserver import Gateway  # tests/ is on sys.path (bench.roots)

    return Gateway(gres_policy="apply")  # any policy but "slurm" applies every write


def _adapter(gateway: Any) -> Any:
    """A ``requests`` transport adapter that hands each request to ``gateway``, in memory."""
    import requests  # noqa: TID251  (the bench plays the transport under spurinv's controller client)
    from faultserver import _encode  # the HTTP server's own body encoding

    class GatewayAdapter(requests.adapters.BaseAdapter):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, str, bytes]] = []

        def send(self, request: Any, *_args: Any, **_kwargs: Any) -> requests.Response:
            path = urlsplit(request.url).path
            body = request.body or b""
            body = body.encode() if isinstance(body, str) else body
            headers = {name.lower(): value for name, value in request.headers.items()}
            reply = gateway.answer(request.method, path, headers, body)
            self.seen.append((request.method, path, body))
            data, content_type = _encode(reply.body)
            response = requests.Response()
            response.status_code = reply.status
            response.headers = requests.structures.CaseInsensitiveDict(
                {"Content-Type": content_type, "Content-Length": str(len(data))}
            )
            response.raw = io.BytesIO(data)
            response.url = request.url
            response.request = request
            response.connection = self  # type: ignore[assignment]
            return response

        def close(self) -> None:
            pass

    return GatewayAdapter()


def _node_of(path: str) -> str:
    return path[len(NODE_PREFIX) :] if path.startswith(NODE_PREFIX) else "(api detection)"


@dataclass
class Tally:
    """Requests and outcomes, per node."""

    gets: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)
    registrations: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)

    def count(self, method: str, path: str, body: bytes) -> None:
        node = _node_of(path)
        if method == "GET":
            self.gets[node] += 1
            return
        self.writes[node] += 1
        if b'"gres"' in body:  # a re-registration (complete gres + extra), not a drain or resume
            self.registrations[node] += 1

    def rows(self, fleet: list[Plan], label: str, wrong: list[str]) -> list[Row]:
        def per(counter: Counter[str], switched: bool) -> Stats | None:
            names = [plan.name for plan in fleet if plan.switched == switched]
            return Stats.of([float(counter[name]) for name in names]) if names else None

        requests = self.gets + self.writes
        return [
            Row(f"{label}: reload nodes, requests per node", "count", per(requests, False), 0, "max"),
            Row(f"{label}: reload nodes, writes per node", "count", per(self.writes, False), 0, "max"),
            Row(f"{label}: switched nodes, re-registrations per node", "count", per(self.registrations, True), 1, "exact"),
            Row(f"{label}: switched nodes, writes per node", "count", per(self.writes, True), 1, "exact"),
            Row(f"{label}: switched nodes, GETs per node (view + read-back)", "count", per(self.gets, True), 2, "max"),
            Row(f"{label}: nodes ending in the wrong state", "count", Stats.of([float(len(wrong))]), 0, "exact"),
        ]


def _wrong(fleet: list[Plan], baselines: dict[str, str | None], gres: dict[str, str], expected: dict[str, str]) -> list[str]:
    """Nodes whose baseline is not their final inventory, or whose controller lists other GPUs."""
    return [
        f"{plan.name}: baseline {(baselines[plan.name] or '-')[:12]}, controller gres {gres[plan.name]}"
        for plan in fleet
        if baselines[plan.name] != expected[plan.final] or gres[plan.name] != GRES[plan.final]
    ]


def _drawn(fleet: list[Plan]) -> str:
    bad = Counter(root for plan in fleet for root in plan.ticks[1:-3])
    return ", ".join(f"{root} {count}" for root, count in sorted(bad.items()))


class _Simulation:
    """The fleet in memory: real readings, the real convergence loop, a gateway behind requests."""

    def __init__(self, roots: Roots) -> None:
        from spurinv.config.settings import ControllerSection
        from spurinv.inventory import model
        from spurinv.inventory.discovery import discover
        from spurinv.inventory.root import Root
        from spurinv.policy import Settings

        trees = {"spx": roots.spx, "cpx": roots.cpx, **roots.transients}
        self.readings = {name: model.reading(discover(Root(str(path))), START) for name, path in trees.items()}
        self.gateway = _gateway()
        self.adapter = _adapter(self.gateway)
        self.section = ControllerSection(url=URL)  # api "auto": detected by the bootstrap, cached in the state
        self.settings = Settings(observe=False)
        self.outcomes: Counter[str] = Counter()
        self.unexpected: list[str] = []

    def connect(self, name: str) -> Callable[[Any], Any]:
        import requests  # noqa: TID251

        from spurinv.controller.transport import Transport, connect
        from spurinv.log import Log

        def session() -> requests.Session:
            made = requests.Session()
            made.mount(URL, self.adapter)
            return made

        def transport(state: Any) -> Transport:  # as refresh.transport_for, with the adapter mounted
            cached = state["api"]["version"] if state["api"] and state["api"]["url"] == self.section.url else None
            return connect(self.section, name, {}, Log({}, io.StringIO()), api=cached, session_factory=session)

        return transport

    def tick(self, state: Any, name: str, root: str, moment: datetime) -> Any:
        """One timer tick of ``refresh._run`` (confirm_interval 0): record, then converge."""
        from spurinv.inventory.model import Reading
        from spurinv.refresh import converge
        from spurinv.state import file as state_file

        reading: Reading = {**self.readings[root], "taken_at": moment}
        state = {**state_file.record(state, reading), "node": name}
        result = converge(state, reading, self.settings, self.connect(name), lambda: moment)
        self.outcomes[result.outcome["kind"].value] += 1
        if result.exit_code not in (0, EXIT_IOERR, EXIT_TEMPFAIL):
            errors = [step["error"] for step in result.steps if step["error"]]
            self.unexpected.append(f"{name} {root}: exit {result.exit_code} {errors}")
        return result.state

    def bootstrap(self) -> Any:
        """A node state with a baseline adopted from the controller and the API version cached."""
        from spurinv.state import file as state_file

        self.gateway.add_node("template", gres=GRES["spx"])
        state = state_file.new()
        for minute in range(2):  # first sighting, then confirmed: the controller already lists it → adopt
            state = self.tick(state, "template", "spx", START + timedelta(minutes=minute))
        assert state["baseline"] is not None
        assert state["baseline"]["source"] == "adopted", state["baseline"]
        assert state["api"] is not None, "the bootstrap should have detected and cached the API version"
        self.adapter.seen.clear()
        self.outcomes.clear()
        return state


def simulate(roots: Roots, count: int, seed: int = 6) -> tuple[list[Row], list[str]]:
    """The in-memory fleet; return its rows and notes."""
    sim = _Simulation(roots)
    template = sim.bootstrap()
    fleet = plans(count, 0.1, seed, "n")
    for plan in fleet:
        sim.gateway.add_node(plan.name, gres=GRES["spx"])
    baselines: dict[str, str | None] = {}
    started = time.perf_counter()
    for plan in fleet:
        state = template
        for minute, root in enumerate(plan.ticks, start=3):
            state = sim.tick(state, plan.name, root, START + timedelta(minutes=minute))
        baselines[plan.name] = state["baseline"]["inventory"]["fingerprint"] if state["baseline"] else None
    elapsed = time.perf_counter() - started

    tally = Tally(outcomes=sim.outcomes)
    for method, path, body in sim.adapter.seen:
        tally.count(method, path, body)
    expected = {name: sim.readings[name]["fingerprint"] or "" for name in ("spx", "cpx")}
    wrong = _wrong(fleet, baselines, {p.name: sim.gateway.nodes[p.name]["gres"] for p in fleet}, expected)
    ticks = sum(len(plan.ticks) for plan in fleet)
    notes = [
        f"simulation: {count} nodes ({sum(p.switched for p in fleet)} switched), {ticks} ticks through converge() in "
        f"{elapsed:.1f} s ({elapsed / ticks * 1000:.2f} ms a tick); {len(sim.adapter.seen)} requests, "
        f"{sum(tally.writes.values())} of them writes",
        f"simulation bad readings drawn: {_drawn(fleet)}",
        "simulation outcomes: " + ", ".join(f"{kind} {n}" for kind, n in sorted(sim.outcomes.items())),
        *sim.unexpected[:5],
        *wrong[:5],
    ]
    rows = tally.rows(fleet, "sim", wrong)
    rows.append(Row("sim: ticks ending with an unexpected exit status", "count",
                    Stats.of([float(len(sim.unexpected))]), 0, "exact"))  # fmt: skip
    return rows, notes


def end_to_end(
    roots: Roots, work: Path, count: int, spurinv: str, env: dict[str, str], seed: int = 7
) -> tuple[list[Row], list[str]]:
    """The scenario with real processes against a local HTTP gateway."""
    from faultserver import FaultServer

    from spurinv.inventory.discovery import discover
    from spurinv.inventory.root import Root

    trees = {"spx": roots.spx, "cpx": roots.cpx, **roots.transients}
    gateway = _gateway()
    fleet = plans(count, 0.1, seed, "e")
    processes: Counter[str] = Counter()
    unexpected: list[str] = []

    def run(plan: Plan, ticks: list[str]) -> None:
        home = work / plan.name
        for root in ticks:
            staging = home / "root.next"
            staging.symlink_to(trees[root])
            staging.replace(home / "root")  # atomically: the node's /sys changes between ticks
            argv = [spurinv, "refresh", "--root", str(home / "root"), "--state", str(home / "state.json"),
                    "--config", str(home / "config.toml")]  # fmt: skip
            sample = run_once(argv, env)
            processes["fast path" if sample.out.startswith("unchanged:") else "full path"] += 1
            if sample.code not in ((0,) if root in ("spx", "cpx") else (0, EXIT_IOERR, EXIT_TEMPFAIL)):
                unexpected.append(f"{plan.name} {root}: exit {sample.code}: {sample.err.strip()[-200:]}")

    workers = os.cpu_count() or 2
    with FaultServer(gateway=gateway) as server:
        for plan in fleet:
            gateway.add_node(plan.name, gres=GRES["spx"])
            _node_files(work / plan.name, plan.name, server.url)
        with ThreadPoolExecutor(max_workers=workers) as pool:  # bootstrap: first sighting, then adopt
            list(pool.map(lambda plan: run(plan, ["spx", "spx"]), fleet))
        bootstrap = len(server.seen), sum(processes.values())
        processes.clear()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda plan: run(plan, plan.ticks), fleet))
        elapsed = time.perf_counter() - started
        seen = server.requests()[bootstrap[0] :]
    tally = Tally()
    for request in seen:
        tally.count(request.method, request.path, request.body)
    baselines = {}
    for plan in fleet:
        baseline = json.loads((work / plan.name / "state.json").read_text()).get("baseline") or {}
        baselines[plan.name] = (baseline.get("inventory") or {}).get("fingerprint")
    expected = {name: discover(Root(str(trees[name])))["inventory"]["fingerprint"] for name in ("spx", "cpx")}
    wrong = _wrong(fleet, baselines, {p.name: gateway.nodes[p.name]["gres"] for p in fleet}, expected)
    notes = [
        f"end to end: {count} nodes ({sum(p.switched for p in fleet)} switched), {sum(processes.values())} refresh "
        f"processes ({processes['fast path']} on the fast path; +{bootstrap[1]} to bootstrap) on {workers} workers in "
        f"{elapsed:.1f} s against {server.url}; {len(seen)} requests, {sum(tally.writes.values())} of them writes",
        f"end to end bad readings drawn: {_drawn(fleet)}",
        *unexpected[:5],
        *wrong[:5],
    ]
    rows = tally.rows(fleet, "e2e", wrong)
    rows.append(Row("e2e: processes with an unexpected exit status", "count", Stats.of([float(len(unexpected))]), 0,
                    "exact"))  # fmt: skip
    return rows, notes


def _node_files(home: Path, name: str, url: str) -> None:
    home.mkdir(parents=True)
    config = home / "config.toml"
    config.write_text(f'[node]\nname = "{name}"\n\n[controller]\nurl = "{url}"\n\n[policy]\nconfirm_interval = 0\n')
    config.chmod(0o600)
