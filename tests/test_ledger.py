"""One set of books: the timer's tick and the full run keep the state file the same way.

:mod:`spurinv.state.ledger` is the only place that records a reading, writes the decision and the
steady memo; the pydantic ``State`` validates the same JSON shape. These properties hold the
two paths to it: the model's ``record`` equals the ledger's on raw JSON, and a tick on the fast
path leaves the very state file (apart from timestamps) that the full run leaves from the same
state, root and options.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from factories import at, inventory, new_baseline, new_state, packages, reading, with_reading
from faultserver import FaultServer, Gateway
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from spurinv.cli import tick
from spurinv.cli.app import run as full_run
from spurinv.cli.launch import lean_options
from spurinv.controller.nodeview import rebuild_gres
from spurinv.inventory.discovery import discover
from spurinv.inventory.model import Reading
from spurinv.inventory.root import Root
from spurinv.state import file as state_file
from spurinv.state import ledger

SPX = inventory(packages(2, "SPX"))
CPX = inventory(packages(2, "CPX", per=8))
READING = TypeAdapter(Reading)  # a reading as JSON, as the tick has it
TIMES = ("taken_at", "at", "since", "last_success", "set_at", "detected_at", "next_attempt")


def _record_raw(raw: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    baseline = raw.get("baseline")
    fingerprint = baseline["inventory"]["fingerprint"] if baseline else None
    return {
        **raw,
        **ledger.record(raw, new, ok=new["ok"], fingerprint=new["fingerprint"], taken_at=new["taken_at"], baseline=fingerprint),
    }


@settings(max_examples=examples(150), deadline=None)
@given(
    baseline=st.sampled_from([None, SPX, CPX]),
    sequence=st.lists(st.sampled_from([SPX, CPX, None]), min_size=1, max_size=6),
)
def test_the_model_records_a_reading_as_the_ledger_does(baseline, sequence):
    """``State.record`` (the full run) and ``ledger.record`` on raw JSON (the tick) agree."""
    model = new_state()
    if baseline is not None:
        model = {**model, "baseline": new_baseline(inventory=baseline, since=at(0), source="registered")}
    raw = state_file.as_json(model)
    for index, inv in enumerate(sequence):
        new = reading(inv, 60 * (index + 1))
        model = with_reading(model, new)
        raw = _record_raw(raw, READING.dump_python(new, mode="json"))
        assert state_file.as_json(model) == raw
        assert state_file.validate(raw) == model


def test_a_memo_is_left_only_when_nothing_is_outstanding():
    calm = {"baseline": {"source": "registered"}, "drain": None, "refusal": None, "backoff": None, "pending": None}
    assert ledger.settled(calm, "unchanged", 0, observe=False)
    assert not ledger.settled(calm, "unchanged", 69, observe=False)
    assert not ledger.settled(calm, "change-confirmed", 0, observe=False)
    for busy in ("drain", "refusal", "backoff", "pending"):
        assert not ledger.settled({**calm, busy: {"x": 1}}, "unchanged", 0, observe=False), busy
    observed = {**calm, "baseline": {"source": "observed"}}
    assert ledger.settled(observed, "unchanged", 0, observe=True)
    assert not ledger.settled(observed, "unchanged", 0, observe=False)  # never told to the controller
    assert not ledger.settled({**calm, "baseline": None}, "unchanged", 0, observe=True)


def test_every_flag_a_tick_can_carry_is_in_the_key():
    """A memo left by ``refresh --node X`` must not label a later plain tick's metrics."""
    base = ("/", "/etc/spurinv/config.toml:1:2:3", None, None, "gpu01")
    key = ledger.steady_key(*base)
    for index, other in enumerate(("/host", "/etc/spurinv/config.toml:1:2:4", "/m.prom", "x1", "gpu02")):
        changed = list(base)
        changed[index] = other
        assert ledger.steady_key(*changed) != key, other  # type: ignore[arg-type]


def test_two_different_values_of_the_same_flag_make_different_keys():
    """A memo left by ``--node x1`` must not serve ``--node x2`` (nor one ``--metrics-file`` another)."""
    base = ["/", "/etc/spurinv/config.toml:1:2:3", "/a.prom", "x1", "gpu01"]
    key = ledger.steady_key(*base)
    for index, other in ((2, "/b.prom"), (3, "x2")):
        changed = list(base)
        changed[index] = other
        assert ledger.steady_key(*changed) != key, other


# -- the fast and the full path, whole, on the same inputs -----------------------------------------

FIXTURES = ("mi300x-cpx", "mi300x-spx", "mi308x", "vega10", "nvidia-8", "nvidia-cdi")


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: None if key in TIMES else _timeless(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


def _metrics(path: Path) -> list[str]:
    drop = ("spurinv_tick_duration_seconds ", "spurinv_last_success_timestamp_seconds ")
    return [line for line in path.read_text().splitlines() if not line.startswith(drop)]


@pytest.fixture(scope="module")
def controller() -> Any:
    gateway = Gateway()
    with FaultServer(gateway=gateway) as server:
        yield server


@settings(
    max_examples=24,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fixture=st.sampled_from(FIXTURES),
    mode=st.sampled_from(["observe", "controller"]),
    metrics_flag=st.booleans(),
    metrics_config=st.booleans(),
    node_flag=st.sampled_from([None, "x1"]),
    node_config=st.sampled_from(["", "n1"]),
    quiet=st.booleans(),
)
def test_fast_and_full_paths_leave_the_same_state_file(
    built, env, capsys, controller, fixture, mode, metrics_flag, metrics_config, node_flag, node_config, quiet
):
    """Property: from a steady state, a tick and a full run write the same state (and metrics)."""
    work = Path(tempfile.mkdtemp(prefix="spurinv-ledger-"))
    try:
        root = str(built(fixture))
        state = work / "state" / "state.json"
        state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        found = discover(Root(root))["inventory"]
        counts: dict[str, int] = {}
        for device in found["devices"]:
            counts[device["model"]] = counts.get(device["model"], 0) + 1
        # the controller already lists these GPUs: the confirmed run adopts them
        controller.gateway.add_node(node_flag or node_config or os.uname().nodename, gres=rebuild_gres("", counts))
        lines = ["[policy]", "confirm_interval = 0", "[node]", f'name = "{node_config}"']
        if mode == "controller":
            lines += ["[controller]", f'url = "{controller.url}"', 'api = "slurm/v0.0.42"', "timeout = 5"]
        if metrics_config:
            lines += ["[metrics]", f'file = "{work / "config.prom"}"']
        config = work / "config.toml"
        config.write_text("\n".join(lines) + "\n")
        config.chmod(0o600)
        args = ["refresh", "--root", root, "--state", str(state), "--config", str(config)]
        if metrics_flag:
            args += ["--metrics-file", str(work / "flag.prom")]
        if node_flag:
            args += ["--node", node_flag]
        if quiet:
            args.append("--quiet")
        metrics_file = work / ("flag.prom" if metrics_flag else "config.prom")

        for _ in range(2):  # first sighting, then confirmed: adopt/observe/register, and the memo
            assert 0 == full_run(args), capsys.readouterr()
        steady = state.read_bytes()
        assert json.loads(steady)["steady"] is not None, json.loads(steady)["last"]

        lean = lean_options(args)
        assert lean is not None, "the timer's invocation must be one the lean path serves"
        assert 0 == tick.run(lean[1], env), "the tick handed over from a steady state"
        fast = json.loads(state.read_text())
        fast_metrics = _metrics(metrics_file) if metrics_flag or metrics_config else None

        state.write_bytes(steady)
        seen = len(controller.seen)
        assert 0 == full_run(args)
        full = json.loads(state.read_text())
        full_metrics = _metrics(metrics_file) if metrics_flag or metrics_config else None
        capsys.readouterr()

        assert len(controller.seen) == seen, "the full run sent a request on a steady node"
        assert _timeless(fast) == _timeless(full)
        assert fast["steady"] == full["steady"]
        assert fast_metrics == full_metrics
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_memo_written_by_0_1_0_still_loads(tmp_path):
    """0.1.0's memo carried ``controller_errors`` (never read); dropping the field must not make
    every existing state file corrupt."""

    memo = ledger.memo(SPX["fingerprint"], "k", (), (), None, "n1")
    raw = {"schema_version": 1, "steady": {**memo, "controller_errors": 0}}
    path = tmp_path / "state.json"
    path.write_text(json.dumps(raw))

    loaded = state_file.load(str(path))

    assert loaded is not None
    assert loaded["steady"] is not None
    assert state_file.as_json(loaded)["steady"] == memo


# -- the replay's guard --------------------------------------------------------------


def _memo_state(inv: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A raw state whose baseline is ``inv``, and the memo a calm run of it left."""
    model = with_reading(new_state(baseline=new_baseline(inventory=inv, since=at(0), source="registered")), reading(inv, 60))
    raw = state_file.as_json(model)
    steady = ledger.memo(inv["fingerprint"], "key", [], [], None, "n1")
    return {**raw, "steady": steady}, steady


def _discovery(inv: Any, ok: bool = True) -> dict[str, Any]:
    return {"ok": ok, "inventory": inv, "errors": [], "flags": []}


def test_a_memo_replays_only_the_hardware_it_was_left_for():
    """The fast path's memo stands for one situation: an ok discovery of the memo's fingerprint.
    Other hardware, a failed discovery or no inventory goes to the full run (None), never
    recorded as *unchanged*."""
    raw, steady = _memo_state(SPX)

    same = ledger.replay(raw, steady, _discovery(SPX), "2026-01-01T00:02:00Z")
    changed = ledger.replay(raw, steady, _discovery(CPX), "2026-01-01T00:02:00Z")
    failed = ledger.replay(raw, steady, _discovery(SPX, ok=False), "2026-01-01T00:02:00Z")
    empty = ledger.replay(raw, steady, _discovery(None), "2026-01-01T00:02:00Z")

    assert same is not None
    assert same["last"]["outcome"] == "unchanged"
    assert same["readings"][-1]["fingerprint"] == SPX["fingerprint"]
    assert changed is None
    assert failed is None
    assert empty is None


def test_a_memo_over_a_hand_edited_baseline_does_not_replay():
    raw, steady = _memo_state(SPX)
    other, _ = _memo_state(CPX)

    assert ledger.replay({**raw, "baseline": other["baseline"]}, steady, _discovery(SPX), "2026-01-01T00:02:00Z") is None
    assert ledger.replay({**raw, "baseline": None}, steady, _discovery(SPX), "2026-01-01T00:02:00Z") is None


def test_a_reading_that_differs_from_the_baseline_is_pending_since_it_was_first_seen():
    """``status`` shows what is pending and since when: the first sighting of a new inventory,
    kept while the same one is read again, restarted by another one, untouched by a failed
    reading, cleared by a reading of the baseline."""
    other = inventory(packages(4, "SPX"))
    state = new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered"))

    first = with_reading(state, reading(CPX, 60))
    again = with_reading(first, reading(CPX, 120))
    failed = with_reading(again, reading(None, 180))
    switched = with_reading(failed, reading(other, 240))
    back = with_reading(switched, reading(SPX, 300))

    assert first["pending"] is not None
    assert (first["pending"]["fingerprint"], first["pending"]["since"]) == (CPX["fingerprint"], at(60))
    assert again["pending"] == first["pending"]
    assert failed["pending"] == first["pending"]
    assert switched["pending"] is not None
    assert (switched["pending"]["fingerprint"], switched["pending"]["since"]) == (other["fingerprint"], at(240))
    assert back["pending"] is None


def test_failed_readings_are_counted_until_one_succeeds():
    """``consecutive_failures`` (status, the metrics): 0 after any good reading, one more per failure."""
    state = new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered"))
    counts: list[int] = []
    for inv in (SPX, None, None, CPX, None, SPX):
        state = with_reading(state, reading(inv, 60 * (len(counts) + 1)))
        counts.append(state["consecutive_failures"])

    assert counts == [0, 1, 2, 0, 1, 0]
    assert state["last_success"] == at(360)


# -- which memo a tick may use; the record of a failed metrics write -------


def test_a_memo_is_used_only_for_its_own_key_and_the_current_schema():
    """A memo left under other flags, another config or boot (another key), by another state
    schema, or not a memo at all, sends the tick to the full run."""
    raw, steady = _memo_state(SPX)

    assert ledger.memo_for(raw, "key") == steady
    assert ledger.memo_for(raw, "key|boot=2") is None
    assert ledger.memo_for({**raw, "schema_version": raw["schema_version"] + 1}, "key") is None
    assert ledger.memo_for({**raw, "schema_version": None}, "key") is None
    assert ledger.memo_for({**raw, "steady": [steady]}, "key") is None
    assert ledger.memo_for({**raw, "steady": None}, "key") is None


def test_a_failed_metrics_write_amends_the_decision_with_its_exit_status_and_a_last_action():
    last = ledger.decision("2026-01-01T00:02:00Z", "unchanged", "none", "unchanged", 0, 1, ["GET /node → 200"])

    amended = ledger.metrics_failed(last, "metrics file: cannot write /x/spurinv.prom", 73)

    actions = ["GET /node → 200", "metrics: metrics file: cannot write /x/spurinv.prom"]
    assert amended == {**last, "exit_code": 73, "actions": actions}
    assert last["actions"] == ["GET /node → 200"]  # the decision passed in is left as it was
    assert ledger.metrics_failed({"exit_code": 0}, "disk full", 74) == {"exit_code": 74, "actions": ["metrics: disk full"]}
