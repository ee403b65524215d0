"""Never strand a node: write-ahead intents, reconciliation, and death at every point.

The kill-point tests run the real full refresh (``refresh.run``: lock, load, discover, classify,
policy, the real ``Controller``, the journal, save) in-process against ``faultserver.Gateway``,
mounted as a ``requests`` transport adapter. A "kill" raises an exception nothing in spurinv
catches (a ``BaseException``, as SIGKILL runs no handler) at the k-th point where the run touches
the outside world — every clock reading and, around each request, before the gateway applies it
and after it applied it but before the answer. What survives is what survives a SIGKILL: the
state file on disk and the controller's state. Then the node goes idle, its GPUs switch back, and
spurinv runs on; the drain must always be lifted, by spurinv, within a few ticks.
"""

from __future__ import annotations

import contextlib
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest
import requests  # noqa: TID251  (the test plays the transport under spurinv's controller client)
from factories import (
    at,
    inventory,
    new_backoff,
    new_baseline,
    new_drain,
    new_intent,
    new_state,
    packages,
    reading,
    with_reading,
)
from faultserver import Gateway, Reply, _encode
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spurinv import exitcode
from spurinv.config.settings import Config
from spurinv.controller.nodeview import NodeView
from spurinv.errors import StateError
from spurinv.inventory.root import Root
from spurinv.log import Log
from spurinv.policy import drain_reason, ours
from spurinv.refresh import Options, World, run
from spurinv.report.models import RefreshDocument, adapter
from spurinv.state import file as state_file
from spurinv.state.file import State
from spurinv.state.intent import Journal, reconcile, recover, unanswered_nonce

URL = "http://127.0.0.1:9"  # never dialled: the adapter answers
START = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
NONCE = "3f9a"  # the tests' random source: b"\x3f\x9a" every time
REASON = drain_reason("8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle", "n1", NONCE)
SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))


class Killed(BaseException):
    """SIGKILL: nothing catches it, no handler or ``finally`` of ours saves anything after it."""


class Points:
    """Counts the points where a run touches the outside world; raises Killed at number ``kill``."""

    def __init__(self, kill: int | None = None) -> None:
        self.kill = kill
        self.count = 0
        self.labels: list[str] = []

    def touch(self, label: str) -> None:
        self.count += 1
        self.labels.append(label)
        if self.kill is not None and self.count == self.kill:
            raise Killed(label)


class Adapter(requests.adapters.BaseAdapter):
    """Hands each request to the gateway, in memory, with kill points before and after it applies."""

    def __init__(self, gateway: Gateway, points: Points) -> None:
        super().__init__()
        self.gateway = gateway
        self.points = points

    def send(self, request: Any, *_args: Any, **_kwargs: Any) -> requests.Response:
        path = urlsplit(request.url).path
        body = request.body or b""
        body = body.encode() if isinstance(body, str) else body
        self.points.touch(f"before {request.method} {path}")
        reply = self.gateway.answer(request.method, path, {}, body)
        self.points.touch(f"after {request.method} {path} applied, before its answer")
        data, content_type = _encode(reply.body)
        response = requests.Response()
        response.status_code = reply.status
        response.headers = requests.structures.CaseInsensitiveDict({"Content-Type": content_type})
        response.raw = io.BytesIO(data)
        response.url = request.url
        response.request = request
        return response

    def close(self) -> None:
        pass


class Node:
    """One node: its roots, state file, the gateway (the controller) and a clock that only moves on."""

    def __init__(self, tmp: Path, built: Any, gres_policy: str = "slurm", skew: float = 0) -> None:
        self.roots = {"spx": built("mi300x-spx"), "cpx": built("mi300x-cpx")}
        self.state_path = tmp / "state" / "state.json"
        self.state_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # an explicit state path's directory exists
        self.now = START
        self.labels: list[str] = []
        self.skew = skew  # how far the controller's clock is ahead of the node's (negative: behind)
        self.nonce = NONCE  # the random part of the next drain's id
        self.gateway = Gateway(gres_policy=gres_policy, clock=lambda: self.epoch() + self.skew)
        self.gateway.add_node("n1", gres="gpu:mi300x:8")
        self.config = Config.model_validate(
            {"node": {"name": "n1"}, "controller": {"url": URL, "api": "slurm/v0.0.42"}, "policy": {"confirm_interval": 0}}
        )

    def epoch(self) -> float:
        return self.now.timestamp()  # the node's clock; the gateway's is ``skew`` ahead of it

    @property
    def controller(self) -> dict[str, Any]:
        return self.gateway.nodes["n1"]

    def busy(self, gpus: int) -> None:
        """A job holding ``gpus`` GPUs (0: the job ended): as slurmctld shows it."""
        self.controller.update(
            state=["MIXED", *self.controller["state"][1:]] if gpus else ["IDLE", *self.controller["state"][1:]],
            alloc_cpus=gpus,
            gres_used=f"gpu:mi300x:{gpus}(IDX:0-{gpus - 1})" if gpus else "gpu:mi300x:0(IDX:N/A)",
        )

    def tick(self, root: str, points: Points | None = None, minutes: float = 1) -> RefreshDocument:
        """One timer tick: the real full run. Raises Killed when ``points`` says so."""
        points = points or Points()
        self.now += timedelta(minutes=minutes)
        self.labels = points.labels

        def clock() -> datetime:
            points.touch("clock")
            return self.now

        session = requests.Session()
        session.mount(URL, Adapter(self.gateway, points))
        world = World(Root(str(self.roots[root])), {}, clock=clock, hostname="n1", log=Log({}, quiet=True),
                      session_factory=lambda: session, entropy=lambda size: bytes.fromhex(self.nonce)[:size])  # fmt: skip
        options = Options(state_path=str(self.state_path), config=self.config, config_identity="test")
        return adapter(RefreshDocument).validate_python(run(world, options))  # the contract, checked

    def gateway_posts(self) -> list[str]:
        return [label for label in self.labels if label.startswith("before POST")]

    def state(self) -> State:
        loaded = state_file.load(str(self.state_path))
        assert loaded is not None
        return loaded


def adopted(tmp_path: Path, built: Any, **kwargs: Any) -> Node:
    node = Node(tmp_path, built, **kwargs)
    node.tick("spx")
    node.tick("spx")
    assert node.state()["baseline"] is not None
    return node


def settle_after_revert(node: Node) -> list[str]:
    """The job ended and the GPUs are back as the controller lists them: spurinv runs on (each tick
    an hour apart, past any backoff). Returns the actions taken."""
    node.busy(0)
    actions = []
    for _ in range(4):
        document = node.tick("spx", minutes=61)
        actions += [step["action"] for step in document["steps"]]
    return actions


def kill_points(node_factory: Any, before: Any, root: str) -> int:
    """How many points the writing tick has (a run that is never killed)."""
    node = node_factory()
    before(node)
    points = Points()
    node.tick(root, points)
    return points.count


def busy_drain_scenario(node: Node) -> None:
    node.busy(2)
    node.tick("cpx")  # first sighting: no request


def refused_drain_scenario(node: Node) -> None:
    node.tick("cpx")  # first sighting; the next tick registers (refused: 2072), then drains


@pytest.mark.parametrize(
    "scenario", [busy_drain_scenario, refused_drain_scenario], ids=["busy → drain", "idle → refused → drain"]
)
def test_a_kill_at_any_point_of_a_drain_never_strands_the_node(tmp_path, built, scenario):
    """Every kill point of the tick that drains: afterwards, once idle with its GPUs back, the node
    is no longer drained, spurinv lifted it, and the state file has nothing outstanding."""
    total = kill_points(lambda: adopted(tmp_path / "count", built), scenario, "cpx")
    assert total > 6  # the drain tick reads the view, writes and saves: many points to die at
    for kill in range(1, total + 1):
        node = adopted(tmp_path / f"kill-{kill}", built)
        scenario(node)
        points = Points(kill)
        with pytest.raises(Killed):
            node.tick("cpx", points)
        label = points.labels[-1]
        drained_now = "DRAIN" in node.controller["state"]

        actions = settle_after_revert(node)

        assert "DRAIN" not in node.controller["state"], (kill, label, actions)
        assert node.state()["drain"] is None, (kill, label)
        assert node.state()["intent"] is None, (kill, label)
        if drained_now:
            assert "resume" in actions, (kill, label, actions)  # lifted by spurinv, not by luck


def test_a_kill_between_recording_and_sending_leaves_the_intent_on_disk(tmp_path, built):
    """The intent is durable *before* the request: killed just before the POST reached the gateway."""
    total = kill_points(lambda: adopted(tmp_path / "count", built), busy_drain_scenario, "cpx")
    for kill in range(1, total + 1):
        node = adopted(tmp_path / f"k{kill}", built)
        busy_drain_scenario(node)
        points = Points(kill)
        with pytest.raises(Killed):
            node.tick("cpx", points)
        if points.labels[-1].startswith("before POST"):
            break
    else:
        pytest.fail("no kill point before the POST")
    intent = node.state()["intent"]
    assert intent is not None
    assert intent["kind"] == "drain"
    assert state_file.intent_reason(intent) == REASON
    assert intent["fingerprint"] == state_file.latest(node.state())["fingerprint"]
    assert "DRAIN" not in node.controller["state"]


def test_a_kill_of_the_resume_never_leaves_our_drain_behind(tmp_path, built):
    """Drained (busy), then idle and reverted: die at every point of the resuming tick."""

    def drained(node: Node) -> None:
        busy_drain_scenario(node)
        node.tick("cpx")
        assert "DRAIN" in node.controller["state"]
        node.busy(0)

    total = kill_points(lambda: adopted(tmp_path / "count", built), drained, "spx")
    for kill in range(1, total + 1):
        node = adopted(tmp_path / f"kill-{kill}", built)
        drained(node)
        points = Points(kill)
        with pytest.raises(Killed):
            node.tick("spx", points)

        settle_after_revert(node)

        assert "DRAIN" not in node.controller["state"], (kill, points.labels[-1])
        assert node.state()["drain"] is None


def test_an_operator_drain_after_an_unsent_intent_is_never_taken(tmp_path, built):
    """Killed before the POST; an operator drains with their own reason: never ours, never lifted."""
    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    total = kill_points(lambda: adopted(tmp_path / "count", built), busy_drain_scenario, "cpx")
    points = Points(next(k for k in range(1, total + 1) if _label(tmp_path, built, k).startswith("before POST")))
    with pytest.raises(Killed):
        node.tick("cpx", points)
    node.controller.update(state=["MIXED", "DRAIN"], reason="NHC: bad ECC on GPU 3")

    settle_after_revert(node)

    assert "DRAIN" in node.controller["state"]
    assert node.controller["reason"] == "NHC: bad ECC on GPU 3"
    assert node.state()["drain"] is None
    assert node.state()["intent"] is None


def _label(tmp_path: Path, built: Any, kill: int) -> str:
    node = adopted(tmp_path / f"label-{kill}", built)
    busy_drain_scenario(node)
    points = Points(kill)
    with contextlib.suppress(Killed):
        node.tick("cpx", points)
    return points.labels[min(kill, len(points.labels)) - 1]


# --- reconcile (pure) ----------------------------------------------------------------------------


def view(*flags: str, reason: str = "", changed: int | None = None, gres: str = "gpu:mi300x:8", extra: str = "") -> NodeView:
    return NodeView(
        name="n1", dialect="slurm-v0.0.39+", base="IDLE", flags=flags, reason=reason, reason_changed_at=changed,
        gres=gres, gres_used="gpu:mi300x:0(IDX:N/A)", extra=extra,
    )  # fmt: skip


def with_intent(kind: str, body: dict[str, Any], current: Any = CPX, **fields: Any) -> State:
    state = with_reading(new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="adopted")), reading(current, 60))
    intent = new_intent(kind=kind, body=body, at=at(120), fingerprint=current["fingerprint"], cause="busy")  # type: ignore[arg-type]
    return new_state(**{**state, "intent": intent, **fields})


DRAIN_BODY = {"state": ["DRAIN"], "reason": REASON}


def test_an_applied_drain_is_ours_with_the_controllers_time_pinned():
    state = with_intent("drain", DRAIN_BODY)
    seen = view("DRAIN", reason=REASON, changed=int(at(121).timestamp()))

    after, note = reconcile(state, seen)

    assert after["intent"] is None
    assert after["drain"] is not None
    assert after["drain"]["reason"] == REASON
    assert after["drain"]["reason_changed_at"] == int(at(121).timestamp())
    assert "ours" in (note or "")
    assert ours(seen, after)


def test_a_drain_that_never_arrived_is_forgotten_and_nothing_is_claimed():
    after, _note = reconcile(with_intent("drain", DRAIN_BODY), view())

    assert after["intent"] is None
    assert after["drain"] is None


@pytest.mark.parametrize("offset", [-3600, -400, 400, 3600, 86400])
def test_an_unanswered_drain_is_ours_whatever_the_clocks_say(offset):
    """A reason time outside a window around our write (a clock 400 s off) made
    our own drain "not ours". The reason carries our drain's id: ours, and the time is pinned."""
    changed = int((at(120) + timedelta(seconds=offset)).timestamp())
    seen = view("DRAIN", reason=REASON, changed=changed)

    after, note = reconcile(with_intent("drain", DRAIN_BODY), seen)

    assert after["drain"] is not None
    assert after["drain"]["reason_changed_at"] == changed
    assert state_file.drain_skew(after["drain"]) == offset  # reported as clock skew, never as "not ours"
    assert "ours" in (note or "")
    assert ours(seen, after)


def _record(drain_id: str | None = None, lifted: str | None = None) -> str:
    """Our record in extra for n1: naming drain ``drain_id`` as current, or ``lifted`` as lifted."""
    value: dict[str, Any] = {"node": "n1"}
    if drain_id is not None:
        value["drain"] = {"id": drain_id, "reason": REASON if drain_id == REASON[10:18] else "spurinv: [00000000] x",
                          "cause": "busy", "fingerprint": None, "at": "2026-12-03T09:02:00Z"}  # fmt: skip
    if lifted is not None:
        value["lifted"] = {"id": lifted, "at": "2026-12-03T09:05:00Z"}
    return json.dumps({"rack": "r2", "spurinv": value})


@pytest.mark.parametrize(
    ("extra", "applied"),
    [
        (_record(REASON[10:18]), True),  # the drain and its record went in together: ours
        ("", True),  # no record to ask (extra emptied meanwhile): the reason decides
        ("rack=r2 owner=bob", True),  # extra no longer JSON: the reason decides
        (_record("0badc0de"), False),  # our record names a later drain of ours: this one was replaced
        (_record(lifted=REASON[10:18]), False),  # our record says we lifted it: these words are someone else's now
        (_record(), False),  # our record for this node knows of no drain
    ],
    ids=["record names it", "extra empty", "extra not JSON", "record names another", "record says lifted", "no drain"],
)
def test_an_unanswered_drain_sent_with_our_record_is_ours_only_if_the_record_agrees(extra, applied):
    """A state restored from a copy that held an unsettled drain intent, after that drain was
    settled, lifted or replaced by later runs and an operator re-drained pasting its words: the
    reason alone said ours and spurinv lifted the operator's drain. The drain was sent with our
    record in the same update, so the record on the node says whether this drain is the one there."""
    body = {**DRAIN_BODY, "extra": _record(REASON[10:18])}
    seen = view("DRAIN", reason=REASON, changed=int(at(121).timestamp()), extra=extra)

    after, note = reconcile(with_intent("drain", body), seen)

    assert (after["drain"] is not None) == applied, note
    assert after["intent"] is None


def test_an_unanswered_drain_sent_without_a_record_is_judged_by_its_reason_alone():
    """Where our record could not go with the drain (extra not ours to rewrite, too long for the
    transport), an old record on the node says nothing about this drain."""
    seen = view("DRAIN", reason=REASON, changed=int(at(121).timestamp()), extra=_record("0badc0de"))

    after, _note = reconcile(with_intent("drain", DRAIN_BODY), seen)

    assert after["drain"] is not None


def test_a_pinned_drain_re_set_later_with_the_same_text_is_no_longer_ours():
    drain = new_drain(reason=REASON, set_at=at(120), cause="busy", reason_changed_at=int(at(121).timestamp()))
    state = new_state(drain=drain)

    assert ours(view("DRAIN", reason=REASON, changed=int(at(121).timestamp())), state)
    assert not ours(view("DRAIN", reason=REASON, changed=int(at(122).timestamp())), state)
    assert ours(view("DRAIN", reason=REASON, changed=None), state)  # a controller that does not say (spur)


def test_an_unanswered_resume_is_settled_from_the_view():
    drain = new_drain(reason=REASON, set_at=at(60), cause="busy")
    state = with_intent("resume", {"state": ["RESUME"]}, current=SPX, drain=drain)

    applied, _ = reconcile(state, view())
    not_applied, note = reconcile(state, view("DRAIN", reason=REASON))

    assert applied["drain"] is None
    assert applied["intent"] is None
    assert not_applied["drain"] == drain
    assert not_applied["intent"] is None
    assert note == "the unanswered resume was not applied"
    assert not_applied["baseline"] == state["baseline"]  # never read as a registration


def test_an_unanswered_resume_whose_record_says_lifted_was_applied():
    """The node is drained again, by someone else without a reason
    (our words stay), but our record says our drain was lifted: the resume went in."""
    drain = new_drain(reason=REASON, set_at=at(60), cause="busy")
    state = with_intent("resume", {"state": ["UNDRAIN"]}, current=SPX, drain=drain)
    lifted = json.dumps({"spurinv": {"node": "n1", "lifted": {"id": REASON[10:18], "at": "2026-12-03T09:00:00Z"}}})
    other = json.dumps({"spurinv": {"node": "n1", "lifted": {"id": "00000000", "at": "2026-12-03T09:00:00Z"}}})

    applied, note = reconcile(state, view("DRAIN", reason=REASON, extra=lifted))
    not_applied, _ = reconcile(state, view("DRAIN", reason=REASON, extra=other))

    assert applied["drain"] is None
    assert "applied" in (note or "")
    assert not_applied["drain"] == drain


def test_an_unanswered_registration_moves_the_baseline_only_when_the_controller_has_it():
    state = with_intent("register", {"gres": "gpu:mi300x:64", "extra": "{}"})
    extra = json.dumps({"spurinv": {"fingerprint": CPX["fingerprint"]}})

    applied, _ = reconcile(state, view(gres="gpu:mi300x:64", extra=extra))
    not_applied, _ = reconcile(state, view(gres="gpu:mi300x:8"))

    assert applied["baseline"]["inventory"]["fingerprint"] == CPX["fingerprint"]
    assert applied["baseline"]["source"] == "registered"
    assert not_applied["baseline"]["inventory"]["fingerprint"] == SPX["fingerprint"]
    assert not_applied["intent"] is None


def test_the_journal_saves_before_it_returns_and_drops_the_fast_path_memo():
    saved: list[State] = []
    state = with_intent("drain", DRAIN_BODY, intent=None)

    pending = Journal(saved.append).begin(state, "drain", DRAIN_BODY, at(200), fingerprint=CPX["fingerprint"], cause="busy")

    assert saved == [pending]
    assert pending["intent"] is not None
    assert pending["intent"]["body"] == DRAIN_BODY
    assert pending["steady"] is None


def test_an_unsaveable_intent_means_no_request_is_sent(tmp_path, built):
    """The intent must be on disk before the write: if it cannot be saved, nothing is sent.

    A directory squats on the temporary name the atomic writer needs (``<state>.tmp-<pid>``; this
    process's pid, as the run is in-process), so every save fails, as on a full or broken disk.
    """
    import os

    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    squatter = Path(f"{node.state_path}.tmp-{os.getpid()}")
    squatter.mkdir()

    with pytest.raises(StateError) as raised:
        node.tick("cpx")

    assert raised.value.exit_code in (exitcode.CANTCREAT, exitcode.IOERR)
    assert node.gateway_posts() == []
    assert "DRAIN" not in node.controller["state"]


# --- runs against a gateway that applies and answers late -----------------------------------------


class Process:
    """``spurinv refresh`` against a FaultServer on 127.0.0.1: in this process (``launch.main``),
    or as a real process where the process is the point (a signal, the run deadline)."""

    def __init__(self, tmp: Path, built: Any, env: dict[str, str], server: Any, cli: Any, timeout: float = 2.0) -> None:
        self.tmp, self.built, self.env, self.server, self.cli = tmp, built, env, server, cli
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # an explicit state path's directory exists
        self.config = tmp / "controller.toml"
        self.config.write_text(
            f'[node]\nname = "n1"\n[controller]\nurl = "{server.url}"\napi = "slurm/v0.0.42"\ntimeout = {timeout}\n'
            "[policy]\nconfirm_interval = 0\n"
        )
        self.config.chmod(0o600)

    def argv(self, root: str, *extra: str) -> list[str]:
        import sys

        return [sys.executable, "-m", "spurinv", *self.args(root, *extra)]

    def args(self, root: str, *extra: str) -> list[str]:
        return ["refresh", "--root", str(self.built(root)), "--state", str(self.state), "--config", str(self.config),
                "--json", *extra]  # fmt: skip

    def run(self, root: str, *extra: str, process: bool = False) -> tuple[int, dict[str, Any]]:
        import subprocess

        if process:
            done = subprocess.run(
                self.argv(root, *extra), env=self.env, capture_output=True, text=True, timeout=60, check=False
            )
            code, out, err = done.returncode, done.stdout, done.stderr
        else:
            result = self.cli(*self.args(root, *extra))
            code, out, err = result.code, result.out, result.err
        try:
            return code, json.loads(out)
        except ValueError:
            raise AssertionError(f"exit {code}, no JSON: {out}\n{err}") from None

    def saved(self) -> dict[str, Any]:
        return json.loads(self.state.read_text())


@pytest.fixture
def late(tmp_path, built, env, cli):
    from faultserver import FaultServer

    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        node = Process(tmp_path, built, env, server, cli)
        assert node.run("mi300x-spx")[0] == 0
        assert node.run("mi300x-spx")[0] == 0  # adopted: the controller lists gpu:mi300x:8
        gateway.nodes["n1"].update(state=["MIXED"], alloc_cpus=2, gres_used="gpu:mi300x:2(IDX:0-1)")
        assert node.run("mi300x-cpx")[0] == 0  # first sighting
        yield node, gateway, server


def test_a_drain_applied_but_answered_after_the_timeout_is_ours_and_lifted(late):
    """The gateway applies the POST and answers 4 s later, timeout 2 s."""
    from faultserver import Late

    node, gateway, server = late
    server.script("POST", server.node_path("n1"), Late(4.0))

    code, document = node.run("mi300x-cpx")

    assert exitcode.UNAVAILABLE == code, document
    assert "DRAIN" in gateway.nodes["n1"]["state"]  # the controller did it
    saved = node.saved()
    assert saved["intent"]["kind"] == "drain"
    assert saved["intent"]["body"]["reason"] == gateway.nodes["n1"]["reason"]
    assert saved["drain"] is None

    server.unscript()  # the gateway answers at once again
    gateway.nodes["n1"].update(state=["IDLE", "DRAIN"], alloc_cpus=0, gres_used="gpu:mi300x:0(IDX:N/A)")
    code, document = node.run("mi300x-spx", "--ignore-backoff")  # the transport backoff (60 s) is not the point here

    assert 0 == code, document
    assert ["read-view", "reconcile", "resume", "none"] == [step["action"] for step in document["steps"]]
    assert gateway.nodes["n1"]["state"] == ["IDLE"]
    assert node.saved()["drain"] is None
    assert node.saved()["intent"] is None


def test_sigterm_mid_request_saves_the_intent_and_exits_75_at_once(late):
    """systemd stops the unit while the drain's answer is outstanding (answer due in 30 s)."""
    import signal
    import subprocess

    from faultserver import Late

    node, gateway, server = late
    server.script("POST", server.node_path("n1"), Late(30.0))
    proc = subprocess.Popen(node.argv("mi300x-cpx"), env=node.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # until the POST reached the gateway (bounded: 600 × 50 ms)
            if server.requests("POST"):
                break
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                continue
        assert server.requests("POST"), "the run never sent its drain"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)  # the answer is 30 s away: ending before it is the point
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert exitcode.TEMPFAIL == proc.returncode, err
    document = json.loads(out)
    assert "SIGTERM" in document["steps"][-1]["error"]
    saved = node.saved()
    assert saved["intent"]["kind"] == "drain"
    assert saved["backoff"] is None  # a signal is no controller error
    assert "DRAIN" in gateway.nodes["n1"]["state"]

    server.unscript()
    gateway.nodes["n1"].update(state=["IDLE", "DRAIN"], alloc_cpus=0, gres_used="gpu:mi300x:0(IDX:N/A)")
    code, document = node.run("mi300x-spx")

    assert 0 == code, document
    assert "resume" in [step["action"] for step in document["steps"]]
    assert gateway.nodes["n1"]["state"] == ["IDLE"]


def test_the_run_deadline_stops_requests_and_exits_75_without_backoff(late):
    """controller.run_deadline = 1 s and a view that takes 3 s: the request is cut at the deadline,
    nothing else is sent, the state is saved, and the controller is not blamed (no backoff)."""
    node, gateway, server = late
    node.config.write_text(node.config.read_text().replace("timeout = 2.0", "timeout = 5.0\nrun_deadline = 1"))
    server.script("GET", server.node_path("n1"), Reply(200, {"nodes": [gateway.nodes["n1"]]}, delay=3.0))
    before = len(server.requests())

    code, document = node.run("mi300x-cpx", process=True)

    assert exitcode.TEMPFAIL == code, document
    assert "run_deadline" in document["steps"][-1]["error"]
    assert len(server.requests()) - before == 1
    assert node.saved()["backoff"] is None
    assert server.requests("POST") == []


def test_status_says_a_write_is_unsettled(tmp_path, built, cli):
    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    total = kill_points(lambda: adopted(tmp_path / "count", built), busy_drain_scenario, "cpx")
    kill = next(k for k in range(1, total + 1) if _label(tmp_path, built, k).startswith("before POST"))
    with pytest.raises(Killed):
        node.tick("cpx", Points(kill))

    status = cli("status", "--state", node.state_path, "--json").json()

    assert any("outcome is unknown" in note for note in status["attention"])


def test_a_backoff_stored_under_a_wrong_clock_is_clamped_with_a_dated_warning(tmp_path, built):
    """next_attempt in 2036 (the clock was wrong when it was written): counts as now + backoff_max."""

    node = adopted(tmp_path, built)
    far = datetime(2036, 1, 1, tzinfo=UTC)
    stuck: State = {**node.state(), "backoff": new_backoff(kind="unreachable", failures=3, next_attempt=far, error="x")}
    state_file.save(str(node.state_path), stuck)

    first = node.tick("cpx")
    confirmed = node.tick("cpx")  # needs the controller: still backing off, an hour at most

    assert any("2036-01-01" in note and "backoff_max" in note for note in first["notes"]), first["notes"]
    assert node.state()["backoff"]["next_attempt"] <= node.now + timedelta(seconds=3600)
    assert confirmed["exit_code"] == exitcode.TEMPFAIL
    assert "backing off until" in confirmed["steps"][-1]["reason"]
    assert "2036" not in confirmed["steps"][-1]["reason"]
    later = node.tick("cpx", minutes=61)
    assert "read-view" in [step["action"] for step in later["steps"]]  # an hour later it talks to the controller


def test_budget_signals_raise_once_and_wait_for_a_shielded_save():
    import signal
    import threading

    from spurinv.budget import Signals, shielded
    from spurinv.errors import Interrupted

    events = []

    def save_then_continue() -> None:
        with shielded():
            # to this (the main) thread: a process-wide signal may go to another thread of the test
            # process (pytest-xdist's), which the mask does not hold; spurinv has no other thread
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            events.append("saved")  # the signal waits for the end of the block
        events.append("not reached")

    with Signals() as signals:
        with pytest.raises(Interrupted):
            save_then_continue()
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # a second one while the first is handled: ignored
        events.append("still running")
    assert ["saved", "still running"] == events
    assert signals.received == signal.SIGINT
    assert signal.getsignal(signal.SIGTERM) is not signals._handle


def test_the_deadline_stops_new_requests():
    from spurinv.budget import Budget
    from spurinv.errors import DeadlineError

    now = [0.0]
    budget = Budget(60, clock=lambda: now[0])
    budget.check("a request")
    now[0] = 59.5
    assert budget.remaining() == 0.5
    now[0] = 60.0
    with pytest.raises(DeadlineError, match="run_deadline"):
        budget.check("a request")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    scenario=st.sampled_from([busy_drain_scenario, refused_drain_scenario]),
    kill=st.integers(1, 40),
    busy_ticks=st.integers(0, 3),
    stay_ticks=st.integers(0, 2),
    operator=st.sampled_from([None, "NHC: bad ECC", "reuse"]),
)
def test_property_after_a_kill_any_schedule_ends_with_our_drain_lifted_and_no_foreign_one_touched(
    tmp_path_factory, built, scenario, kill, busy_ticks, stay_ticks, operator
):
    """Killed at any point of the draining tick; then the job runs on for a while, the GPUs stay
    switched for a few ticks, and perhaps an operator drains the node (with their own reason, or
    re-draining with ours) — once idle and back to what the controller lists, our drain is gone
    and an operator's drain is still there, untouched.

    One case is left out, because nothing the controller says can tell it apart: a write killed
    before its answer and re-drained with our very reason before any run read the node. The
    reason time is all that differs, and a clock decides no ownership; every other
    re-drain is told apart by the reason time pinned when a run (or the drain's read-back) first
    saw our drain."""
    node = adopted(tmp_path_factory.mktemp("prop"), built)
    scenario(node)
    with contextlib.suppress(Killed):
        node.tick("cpx", Points(kill))
    unanswered = node.state()["intent"] is not None and "DRAIN" in node.controller["state"]
    assume(not (operator == "reuse" and unanswered and busy_ticks + stay_ticks == 0))
    for _ in range(busy_ticks):
        node.tick("cpx", minutes=61)
    node.busy(0)
    for _ in range(stay_ticks):
        node.tick("cpx", minutes=61)
    if operator is not None:
        reason = node.controller["reason"] if operator == "reuse" and node.controller["reason"] else operator
        node.now += timedelta(hours=2)  # the operator comes by later than any write of ours
        node.controller.update(state=["IDLE", "DRAIN"], reason=reason)
        node.controller["reason_changed_at"] = {"set": True, "infinite": False, "number": int(node.epoch())}

    settle_after_revert(node)

    if operator is None:
        assert "DRAIN" not in node.controller["state"]
    else:
        assert "DRAIN" in node.controller["state"]  # never lifted: not ours
    assert node.state()["drain"] is None
    assert node.state()["intent"] is None


# --- what the mutation run found no test for ----------------------------------------


def test_an_unanswered_drain_keeps_the_cause_it_was_sent_for():
    """The drain recorded from an unanswered write keeps its intent's cause: a drain sent because
    the hardware looked suspicious must not come back as a ``busy`` one (which ``decide`` lifts
    on its own terms); only an intent without a cause (written by an older version) means busy."""
    seen = view("DRAIN", reason=REASON, changed=int(at(121).timestamp()))
    for cause, expected in (("suspicious", "suspicious"), ("refused", "refused"), ("busy", "busy"), (None, "busy")):
        state = with_intent("drain", DRAIN_BODY)
        intent = state["intent"]
        assert intent is not None
        state = {**state, "intent": {**intent, "cause": cause}}  # type: ignore[typeddict-item]

        after, _note = reconcile(state, seen)

        assert after["drain"] is not None
        assert after["drain"]["cause"] == expected, cause


def test_our_drain_without_the_controllers_time_gets_it_pinned_the_first_time_it_is_seen():
    """With no intent to settle, ``reconcile`` still records when the controller says our drain's
    reason was set: once, from a view that says it, and never over a time already pinned."""
    drain = new_drain(reason=REASON, set_at=at(120), cause="busy")
    state = new_state(drain=drain)
    first = int(at(121).timestamp())

    pinned, note = reconcile(state, view("DRAIN", reason=REASON, changed=first))
    unsaid, _ = reconcile(state, view("DRAIN", reason=REASON, changed=None))
    again, _ = reconcile(pinned, view("DRAIN", reason=REASON, changed=first))

    assert note is None
    assert pinned["drain"] is not None
    assert pinned["drain"]["reason_changed_at"] == first
    assert unsaid["drain"] == drain  # a controller that does not say (spur): nothing to pin
    assert again["drain"] == pinned["drain"]


def test_a_drain_that_is_not_ours_on_the_node_pins_nothing():
    drain = new_drain(reason=REASON, set_at=at(120), cause="busy")
    state = new_state(drain=drain)

    foreign, _ = reconcile(state, view("DRAIN", reason="admin: bad fan", changed=int(at(121).timestamp())))
    lifted, _ = reconcile(state, view(reason="", changed=int(at(121).timestamp())))

    assert foreign["drain"] == drain
    assert lifted["drain"] == drain


def test_an_unanswered_drain_that_was_not_applied_is_never_read_as_a_registration():
    """A drain sent for a reading whose GPU counts the controller already lists (a suspicious or
    NPS-only change: same GRES, new fingerprint) and never applied: only the intent goes. Read as
    an applied registration, it would move the baseline to hardware nobody registered."""
    same_gpus = inventory(packages(8, "SPX"), cpus=96)
    state = with_intent("drain", DRAIN_BODY, current=same_gpus)

    after, note = reconcile(state, view(gres="gpu:mi300x:8"))

    assert after["intent"] is None
    assert after["drain"] is None
    assert after["baseline"]["inventory"]["fingerprint"] == SPX["fingerprint"]
    assert note == "the unanswered drain was not applied (or was replaced): nothing of ours on the node"


def test_an_unanswered_registration_listed_without_our_record_took_effect_only_if_the_gpu_count_changed():
    """the controller lists what was sent but not our record (the run died
    between the GRES and the record). A changed GPU count can only be the write's doing: kept as a
    refusal the controller has met, so the record is written alone; with the count unchanged
    (here the CPUs changed) the listing proves nothing and the run decides afresh."""
    changed = with_intent("register", {"gres": "gpu:mi300x:64", "extra": "{}"})
    fewer_cpus = inventory(packages(8, "SPX"), cpus=96)
    same_count = with_intent("register", {"gres": "gpu:mi300x:8", "extra": "{}"}, current=fewer_cpus)

    took, note = reconcile(changed, view(gres="gpu:mi300x:64"))
    afresh, other = reconcile(same_count, view(gres="gpu:mi300x:8"))

    assert note == "the unanswered re-registration took effect; recording it"
    assert took["refusal"] is not None
    assert (took["refusal"]["fingerprint"], took["refusal"]["at"], took["refusal"]["error"]) == (
        CPX["fingerprint"],
        at(120),
        "the unanswered re-registration took effect; its record was not written",
    )
    assert (took["intent"], took["baseline"]["inventory"]["fingerprint"]) == (None, SPX["fingerprint"])
    assert other == "the unanswered re-registration was not applied; deciding afresh"
    assert (afresh["intent"], afresh["refusal"], afresh["baseline"]["inventory"]["fingerprint"]) == (
        None,
        None,
        SPX["fingerprint"],
    )


def test_a_fresh_state_that_knows_the_controllers_drain_keeps_it_as_it_is():
    """A state from another boot that holds the drain the controller shows: it is
    simply ours; nothing is rebuilt from the controller's word, and no recovery is reported."""
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.ownership import reason_for

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    drain = new_drain(reason=reason, set_at=datetime(2026, 12, 1, tzinfo=UTC), cause="refused", reason_changed_at=1764547200)
    state = new_state(node="n1", drain=drain, fresh=True)
    view = NodeView(name="n1", dialect="slurm", base="IDLE", flags=("DRAIN",), reason=reason, reason_changed_at=1764547200)

    after, said = recover(state, view, datetime(2026, 12, 4, tzinfo=UTC))

    assert said is None
    assert (after["drain"], after["fresh"]) == (drain, False)


@pytest.mark.parametrize(("base", "appended"), [("IDLE", ""), ("DOWN", " : Not responding")])
def test_a_fresh_state_recovers_no_drain_from_a_node_that_is_not_drained(base, appended):
    """Our words still in the reason of a node that is not drained (resumed, its reason left
    behind; or DOWN, slurmctld's words appended): no drain to take back, whatever the reason says."""
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.ownership import reason_for

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    view = NodeView(name="n1", dialect="slurm", base=base, flags=(), reason=reason + appended, reason_changed_at=1764547200)

    after, said = recover(new_state(node="n1", fresh=True), view, datetime(2026, 12, 4, tzinfo=UTC))

    assert (after["drain"], after["fresh"], said) == (None, False, None)


def test_a_drain_recovered_from_the_id_in_its_reason_says_so():
    """No record of ours in the node's extra, only the id in the reason: the recovery says which
    word of the controller it rests on, for the operator who reads the status."""
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.ownership import reason_for

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    view = NodeView(name="n1", dialect="slurm", base="IDLE", flags=("DRAIN",), reason=reason, reason_changed_at=1764547200)

    after, said = recover(new_state(node="n1", fresh=True), view, datetime(2026, 12, 4, tzinfo=UTC))

    assert after["drain"] is not None
    assert after["drain"]["recovered"] == "reason"
    assert said == "drain recovered from the id in its reason (no record of ours in the node's extra): it is ours"


def test_an_unanswered_drain_without_a_reason_claims_nothing_and_is_never_read_as_a_registration():
    """A drain intent whose body has no reason (a hand-edited state file): nothing on the node can
    be ours by it, and the controller listing the reading's GPUs must not move the baseline to
    hardware nobody registered, as an unanswered registration would."""
    state = with_intent("drain", {"state": ["DRAIN"]})

    on_a_drained_node, note = reconcile(state, view("DRAIN", reason="", changed=int(at(121).timestamp()), gres="gpu:mi300x:64"))
    on_an_idle_node, other = reconcile(state, view(gres="gpu:mi300x:64"))

    for after in (on_a_drained_node, on_an_idle_node):
        assert (after["intent"], after["drain"], after["refusal"]) == (None, None, None)
        assert after["baseline"]["inventory"]["fingerprint"] == SPX["fingerprint"]
    assert note == other == "the unanswered drain was not applied (or was replaced): nothing of ours on the node"


def test_a_drain_recovered_from_the_controller_record_takes_the_records_time_cause_and_fingerprint():
    """Our record in the node's extra names this drain: the recovered drain is set when the record
    says, for the record's cause and fingerprint, with the controller's reason time pinned."""
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.ownership import reason_for, reason_id

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    entry = {"id": reason_id(reason, "n1"), "reason": reason, "cause": "suspicious", "fingerprint": "ab" * 8,
             "at": "2026-12-01T00:00:00Z"}  # fmt: skip
    extra = json.dumps({"spurinv": {"node": "n1", "drain": entry}})
    view = NodeView(name="n1", dialect="slurm", base="IDLE", flags=("DRAIN",), reason=reason, reason_changed_at=1764547205,
                    extra=extra)  # fmt: skip

    after, said = recover(new_state(node="n1", fresh=True), view, datetime(2026, 12, 4, tzinfo=UTC))

    assert after["drain"] is not None
    assert (after["drain"]["reason"], after["drain"]["set_at"], after["drain"]["cause"], after["drain"]["fingerprint"]) == (
        reason, datetime(2026, 12, 1, tzinfo=UTC), "suspicious", "ab" * 8,
    )  # fmt: skip
    assert (after["drain"]["reason_changed_at"], after["drain"]["recovered"], after["fresh"]) == (
        1764547205,
        "controller-record",
        False,
    )
    assert said == "drain recovered from the controller record: it is ours"


def _recovered_start(at: str, changed: int | None, now: datetime) -> tuple[datetime, int | None]:
    """The start of a drain recovered from our record (written ``at``) with the controller's
    reason time ``changed``, on a node whose clock reads ``now``; and its skew."""
    from spurinv.controller.ownership import reason_for, reason_id

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    entry = {"id": reason_id(reason, "n1"), "reason": reason, "cause": "busy", "fingerprint": "ab" * 8, "at": at}
    extra = json.dumps({"spurinv": {"node": "n1", "drain": entry}})
    view = NodeView(name="n1", dialect="slurm", base="IDLE", flags=("DRAIN",), reason=reason, reason_changed_at=changed,
                    extra=extra)  # fmt: skip

    after, _said = recover(new_state(node="n1", fresh=True), view, now)

    assert after["drain"] is not None
    assert after["drain"]["recovered"] == "controller-record"
    set_at = after["drain"]["set_at"]
    pinned = after["drain"]["reason_changed_at"]
    return set_at, (pinned - int(set_at.timestamp()) if pinned is not None else None)


@pytest.mark.parametrize("at", ["9999-12-31T23:00:00-01:00", "0001-01-01T00:00:00+01:00"], ids=["year-10000", "year-0"])
def test_a_drain_recovered_from_a_record_whose_time_no_calendar_holds_starts_when_found(at):
    """An offset can carry a record's time past the year 9999 or before the year 1: that is no
    time (a ``datetime`` of it raised, every run, and nothing was saved), so the drain starts when
    it is found, as with no time at all."""
    now = datetime(2026, 12, 4, tzinfo=UTC)
    assert _recovered_start(at, None, now) == (now, None)


@pytest.mark.parametrize(
    "node_now",
    [
        datetime(2026, 12, 5, 20, 30, tzinfo=UTC),
        datetime(2026, 12, 5, 17, 30, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 2, tzinfo=UTC),
    ],
    ids=["2h-behind", "5h-behind", "1970-before-ntp"],
)
def test_a_drain_recovered_on_a_node_whose_clock_is_wrong_keeps_the_time_the_controller_agrees_with(node_now):
    """A node rebooted with its state lost and its clock hours behind, or at 1970 before NTP: the
    record says 22:00 and the controller set the reason a second later. That record is right and
    kept: judged by the node's clock it was "ahead" and replaced with "now" (a drain begun hours
    late, or at 1970: the alert quiet), with a skew of hours that was the node's."""
    drained = datetime(2026, 12, 5, 22, tzinfo=UTC)

    start, skew = _recovered_start("2026-12-05T22:00:00Z", int(drained.timestamp()) + 1, node_now)

    assert (start, skew) == (drained, 1)


def test_a_drain_slurmctld_appended_to_is_recovered_as_our_words_without_its_time():
    """slurmctld appended `` : Not responding`` to our reason: the drain recovered is our reason
    alone, set when it is found (no record of ours says when), and the reason time on the node is
    slurmctld's, not ours, so none is pinned; the sentence says what was appended."""
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.ownership import reason_for

    reason = reason_for("n1", NONCE, "8 GPUs SPX→CPX; re-registers when idle")
    view = NodeView(name="n1", dialect="slurm", base="DOWN", flags=("DRAIN",), reason=reason + " : Not responding",
                    reason_changed_at=1764547205)  # fmt: skip
    now = datetime(2026, 12, 4, tzinfo=UTC)

    after, said = recover(new_state(node="n1", fresh=True), view, now)

    assert after["drain"] is not None
    assert (after["drain"]["reason"], after["drain"]["set_at"], after["drain"]["cause"]) == (reason, now, "busy")
    assert (after["drain"]["reason_changed_at"], after["drain"]["recovered"]) == (None, "reason")
    assert said == (
        "drain recovered from the id in its reason (no record of ours in the node's extra): it is ours"
        "; slurmctld appended 'Not responding' to its reason"
    )


# --- a drain that lands late --------------------------------------------------------------------------


class HeldBack(Adapter):
    """The first POST times out on the client's side and is held by the gateway, to land later."""

    held: ClassVar[list[tuple[str, str, bytes]]] = []

    def send(self, request: Any, *args: Any, **kwargs: Any) -> requests.Response:
        if request.method == "POST" and not HeldBack.held:
            body = request.body or b""
            HeldBack.held.append((request.method, urlsplit(request.url).path, body.encode() if isinstance(body, str) else body))
            raise requests.exceptions.ReadTimeout("held by the gateway")
        return super().send(request, *args, **kwargs)


def test_a_drain_that_lands_after_our_re_drain_is_still_ours_and_lifted(tmp_path, built, monkeypatch):
    """Drain A gets no answer within the client's timeout; the next run finds no drain, settles A
    as not applied and drains again; then A lands over that drain. The re-drain sent A's reason
    again (same id): A landing changes nothing, the drain stays ours and is lifted once the job
    ends (before: a new id, "our drain is no longer ours", the node drained for good)."""
    node = adopted(tmp_path, built)
    busy_drain_scenario(node)
    monkeypatch.setattr(HeldBack, "held", [])
    monkeypatch.setattr(f"{__name__}.Adapter", HeldBack)
    unanswered = node.tick("cpx")
    assert unanswered["exit_code"] == exitcode.UNAVAILABLE
    sent = node.state()["intent"]
    assert sent is not None
    assert "DRAIN" not in node.controller["state"]  # not applied yet

    node.nonce = "b7c2"  # each run draws its own
    again = node.tick("cpx", minutes=61)  # past the backoff: no drain on the node, drained again
    assert "DRAIN" in node.controller["state"]
    assert node.controller["reason"] == sent["body"]["reason"]  # A's words and id, not a fresh id
    method, path, body = HeldBack.held[0]
    node.gateway.answer(method, path, {}, body)  # A lands over it

    assert node.controller["reason"] == sent["body"]["reason"], [step["reason"] for step in again["steps"]]
    assert node.state()["drain"]["reason"] == sent["body"]["reason"]
    actions = [step["action"] for step in node.tick("cpx", minutes=61)["steps"]]
    assert "forget-drain" not in actions
    assert "resume" in settle_after_revert(node)
    assert "DRAIN" not in node.controller["state"]
    assert node.state()["drain"] is None


def test_only_an_unanswered_drain_of_ours_lends_its_id_to_the_next_drain():
    drain = with_intent("drain", DRAIN_BODY)

    assert unanswered_nonce(drain, "n1") == NONCE
    assert unanswered_nonce(drain, "n2") is None  # not this node's id
    assert unanswered_nonce(with_intent("register", {"gres": "gpu:mi300x:64"}), "n1") is None
    assert unanswered_nonce(with_intent("drain", {"state": ["DRAIN"]}), "n1") is None  # no reason
    assert unanswered_nonce(new_state(), "n1") is None
