"""The policy, row by row (the action table), plus the settle step and properties."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from effort import examples
from factories import (
    at,
    inventory,
    new_backoff,
    new_baseline,
    new_drain,
    new_intent,
    new_refusal,
    new_state,
    packages,
    reading,
    with_reading,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv import exitcode, shape
from spurinv.config.settings import Config
from spurinv.controller.nodeview import NodeView, parse_gres
from spurinv.controller.ownership import MAX_REASON, PREFIX, extra_fingerprint, reason_for, reason_id, text_of
from spurinv.controller.transport import COMMAND_REMEDY, SLURM_REMEDY
from spurinv.inventory.classify import Kind, classify, diff_summary
from spurinv.policy import (
    WRITES,
    Action,
    Do,
    Settings,
    clamp_backoff,
    contacted,
    decide,
    drain_reason,
    expected_view,
    forget_stale_refusal,
    ours,
    recheck_due,
    register_body,
    settle,
    when,
    with_backoff,
)
from spurinv.secret import printable
from spurinv.state.file import Drain, Refusal, State

SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))
NONE = inventory([], pci=[])
NPS4 = inventory(packages(8, "SPX", memory_mode="NPS4"))
SLURM = Settings(observe=False)
OBSERVE = Settings(observe=True)
OUR_REASON = "spurinv: 8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle"


def view(
    state: str = "IDLE",
    *flags: str,
    reason: str = "",
    gres: str | None = "gpu:mi300x:8",
    cpus: int = 0,
    used: str | None = "gpu:mi300x:0(IDX:N/A)",
    extra: str | None = "",
) -> NodeView:
    return NodeView(
        name="n1", dialect="slurm-v0.0.39+", base=state, flags=flags, reason=reason, alloc_cpus=cpus, gres=gres, gres_used=used,
        extra=extra,
    )  # fmt: skip


IDLE = view()
BUSY = view("MIXED", cpus=2, used="gpu:mi300x:2(IDX:0-1)")
OURS_IDLE = view("IDLE", "DRAIN", reason=OUR_REASON)
OURS_BUSY = view("MIXED", "DRAIN", reason=OUR_REASON, cpus=2, used="gpu:mi300x:2(IDX:0-1)")
CPU_JOB = view("MIXED", cpus=4)  # a CPU-only job: gres_used says no GPU is allocated
STALE_NO_GRES = view("MIXED", cpus=2, used=None)  # no GPU usage data: anything busy-looking counts
NHC_IDLE = view("IDLE", "DRAIN", reason="NHC: bad ECC")
SLURM_INVAL = view(
    "MIXED",
    "DRAIN",
    "INVALID_REG",
    reason="gres/gpu count reported lower than configured (7 < 8)",
    cpus=1,
    used="gpu:mi300x:1(IDX:0)",
)
EMPTY_DRAIN = view("IDLE", "DRAIN", reason="")
LOOKALIKE = view("IDLE", "DRAIN", reason="spurinv: something an operator typed")
NOW = at(600)


def state_for(
    baseline, previous, current, *, drain=False, refusal=False, backoff=None, source="registered", backoff_kind="refused"
) -> State:
    state = new_state(baseline=new_baseline(inventory=baseline, since=at(0), source=source) if baseline else None)
    if previous is not None:
        state = with_reading(state, reading(previous, 0))
    state = with_reading(state, reading(current, 60))
    update: dict[str, Any] = {}
    if drain:
        update["drain"] = new_drain(
            reason=OUR_REASON, set_at=at(60), cause="busy", fingerprint=current["fingerprint"] if current else None
        )
    if refusal:
        refused = current if refusal is True else refusal
        update["refusal"] = new_refusal(fingerprint=refused["fingerprint"], at=at(60), error="2072 Invalid gres")
    if backoff is not None:
        update["backoff"] = new_backoff(kind=backoff_kind, failures=1, next_attempt=at(backoff), error="2072 Invalid gres")
    return new_state(**{**state, **update})


def outcome_for(state):
    readings = state["readings"]
    previous = readings[-2] if len(readings) > 1 else None
    return classify(state["baseline"]["inventory"] if state["baseline"] else None, previous, readings[-1])


ROWS = [
    # name, baseline, previous, current, extras, settings, view, expected action
    ("failed read does nothing", SPX, SPX, None, {}, SLURM, None, Do.NONE),
    ("pending waits", SPX, SPX, CPX, {}, SLURM, None, Do.NONE),
    ("unchanged needs no request", SPX, SPX, SPX, {}, SLURM, None, Do.NONE),
    ("unchanged with our drain reads the node", SPX, SPX, SPX, {"drain": True}, SLURM, None, Do.READ_VIEW),
    ("unchanged with our drain resumes", SPX, SPX, SPX, {"drain": True}, SLURM, OURS_IDLE, Do.RESUME),
    ("our drain replaced by an operator: forget", SPX, SPX, SPX, {"drain": True}, SLURM, NHC_IDLE, Do.FORGET_DRAIN),
    ("our drain replaced by Slurm's INVAL: forget", SPX, CPX, CPX, {"drain": True}, SLURM, SLURM_INVAL, Do.FORGET_DRAIN),
    ("our drain lifted by someone: forget", SPX, SPX, SPX, {"drain": True}, SLURM, IDLE, Do.FORGET_DRAIN),
    ("confirmed needs the node's state", SPX, CPX, CPX, {}, SLURM, None, Do.READ_VIEW),
    ("confirmed + idle re-registers", SPX, CPX, CPX, {}, SLURM, IDLE, Do.REGISTER),
    ("confirmed + busy drains", SPX, CPX, CPX, {}, SLURM, BUSY, Do.DRAIN),
    ("confirmed + CPU-only job re-registers (it holds no GPU)", SPX, CPX, CPX, {}, SLURM, CPU_JOB, Do.REGISTER),
    ("confirmed + busy without GPU usage data drains", SPX, CPX, CPX, {}, SLURM, STALE_NO_GRES, Do.DRAIN),
    ("confirmed + busy + our drain waits", SPX, CPX, CPX, {"drain": True}, SLURM, OURS_BUSY, Do.HOLD),
    ("confirmed + our drain + idle re-registers", SPX, CPX, CPX, {"drain": True}, SLURM, OURS_IDLE, Do.REGISTER),
    (
        "confirmed + busy + operator drain: untouched",
        SPX,
        CPX,
        CPX,
        {},
        SLURM,
        view("MIXED", "DRAIN", reason="NHC: x", cpus=1, used="gpu:mi300x:1(IDX:3)"),
        Do.HOLD,
    ),
    ("confirmed + busy + Slurm INVAL drain: untouched", SPX, CPX, CPX, {}, SLURM, SLURM_INVAL, Do.HOLD),
    ("confirmed + idle + operator drain: gres only", SPX, CPX, CPX, {}, SLURM, NHC_IDLE, Do.REGISTER),
    ("refused + not drained: drain", SPX, CPX, CPX, {"refusal": True}, SLURM, IDLE, Do.DRAIN),
    (
        # our drain for another reason (busy) is re-worded to say what is wrong; with the
        # refusal's own reason it holds, then retries (tests/test_policy_transport.py)
        "refused + drained by us for another reason + backoff: re-drain with the refusal",
        SPX,
        CPX,
        CPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        OURS_IDLE,
        Do.DRAIN,
    ),
    ("refused + foreign drain: never drains", SPX, CPX, CPX, {"refusal": True}, SLURM, NHC_IDLE, Do.REGISTER),
    (
        "transport backoff before any request",
        SPX,
        CPX,
        CPX,
        {"backoff": 9999, "backoff_kind": "unreachable"},
        SLURM,
        None,
        Do.BACKOFF,
    ),
    (
        "auth backoff blocks even lifting our drain",
        SPX,
        SPX,
        SPX,
        {"drain": True, "backoff": 9999, "backoff_kind": "auth"},
        SLURM,
        None,
        Do.BACKOFF,
    ),
    (
        "refusal backoff: its own retry waits, the node is still read",
        SPX,
        CPX,
        CPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        None,
        Do.READ_VIEW,
    ),
    (
        "refusal backoff: the controller still disagrees, hold",
        SPX,
        CPX,
        CPX,
        {"refusal": True, "backoff": 9999},
        SLURM,
        NHC_IDLE,
        Do.HOLD,
    ),
    (
        "refusal backoff: the controller lists the reading now, record it",
        SPX,
        CPX,
        CPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        view("IDLE", "DRAIN", reason=OUR_REASON, gres="gpu:mi300x:64"),
        Do.RECORD,
    ),
    (
        "refusal, no backoff left: the controller lists the reading, record, never re-send",
        SPX,
        CPX,
        CPX,
        {"refusal": True},
        SLURM,
        view(gres="gpu:mi300x:64"),
        Do.RECORD,
    ),
    (
        "refusal backoff: busy, and the controller lists the reading, record",
        SPX,
        CPX,
        CPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        view("MIXED", "DRAIN", reason=OUR_REASON, cpus=2, gres="gpu:mi300x:64", used="gpu:mi300x:2(IDX:0-1)"),
        Do.RECORD,
    ),
    (
        "refusal backoff: the GPUs switched back, read to lift our drain",
        SPX,
        CPX,
        SPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        None,
        Do.READ_VIEW,
    ),
    (
        "refusal backoff: the reverted node's drain is lifted at once",
        SPX,
        CPX,
        SPX,
        {"refusal": True, "drain": True, "backoff": 9999},
        SLURM,
        OURS_IDLE,
        Do.RESUME,
    ),
    (
        "refusal backoff: another confirmed inventory goes ahead",
        SPX,
        NPS4,
        NPS4,
        {"refusal": CPX, "drain": True, "backoff": 9999},
        SLURM,
        None,
        Do.READ_VIEW,
    ),
    ("first run, controller agrees: adopt", None, SPX, SPX, {}, SLURM, IDLE, Do.ADOPT),
    ("first run, controller disagrees: register", None, CPX, CPX, {}, SLURM, IDLE, Do.REGISTER),
    ("first run, busy and disagrees: drain", None, CPX, CPX, {}, SLURM, BUSY, Do.DRAIN),
    ("suspicious holds", SPX, NONE, NONE, {}, SLURM, None, Do.HOLD),
    ("suspicious never registers", SPX, NONE, NONE, {}, Settings(observe=False, drain_on_suspicious=True), IDLE, Do.DRAIN),
    (
        "suspicious drain only when asked, not twice",
        SPX,
        NONE,
        NONE,
        {},
        Settings(observe=False, drain_on_suspicious=True),
        NHC_IDLE,
        Do.HOLD,
    ),
    ("observe: confirmed is observed", SPX, CPX, CPX, {}, OBSERVE, None, Do.OBSERVE),
    ("observe: unchanged", SPX, SPX, SPX, {}, OBSERVE, None, Do.NONE),
    ("observe: suspicious holds", SPX, NONE, NONE, {}, OBSERVE, None, Do.HOLD),
    ("a drain with no reason is not ours", SPX, SPX, SPX, {}, SLURM, EMPTY_DRAIN, Do.NONE),
    ("a spurinv-looking reason we did not set is not ours", SPX, CPX, CPX, {}, SLURM, LOOKALIKE, Do.REGISTER),
    ("confirmed + DOWN node: hold, never register", SPX, CPX, CPX, {}, SLURM, view("DOWN", reason="Not responding"), Do.HOLD),
    ("confirmed + FAIL node: hold, never register", SPX, CPX, CPX, {}, SLURM, view("IDLE", "FAIL", reason="bad DIMM"), Do.HOLD),
    ("first run, DOWN and disagrees: hold", None, CPX, CPX, {}, SLURM, view("DOWN", "DRAIN", reason="x"), Do.HOLD),
]


@pytest.mark.parametrize(
    ("name", "baseline", "previous", "current", "extras", "policy", "node", "expected"), ROWS, ids=[r[0] for r in ROWS]
)
def test_policy_table(name, baseline, previous, current, extras, policy, node, expected):
    state = state_for(baseline, previous, current, **extras)

    action = decide(outcome_for(state), node, state, policy, NOW)

    assert expected == action.kind, action.reason


def test_drain_body_and_reason():
    """The reason carries the drain's id (the nonce and a digest of node and text); the same
    update records it in extra under our key, beside the admin's keys."""
    state = state_for(SPX, CPX, CPX)
    busy = replace(BUSY, extra='{"rack": "r2"}')

    action = decide(outcome_for(state), busy, state, SLURM, NOW, nonce="3f9a")

    reason = drain_reason(OUR_REASON.removeprefix("spurinv: "), "n1", "3f9a")
    assert reason.startswith("spurinv: [3f9a")
    assert ["state", "reason", "extra"] == list(action.body)  # type: ignore[arg-type]  # a write has a body
    assert (["DRAIN"], reason) == (action.body["state"], action.body["reason"])
    extra = json.loads(action.body["extra"])
    assert extra["rack"] == "r2"
    assert extra["spurinv"] == {
        "node": "n1",
        "drain": {"id": reason[10:18], "reason": reason, "cause": "busy", "fingerprint": CPX["fingerprint"],
                  "at": NOW.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }  # fmt: skip


def test_a_write_that_cannot_carry_our_record_says_so_and_one_that_can_does_not():
    state = state_for(SPX, CPX, CPX)
    idle = view(gres="gpu:mi300x:8", extra="operator note")

    foreign = decide(outcome_for(state), idle, state, SLURM, NOW)
    fine = decide(outcome_for(state), replace(idle, extra='{"rack": "r2"}'), state, SLURM, NOW)
    spur = decide(outcome_for(state), replace(idle, extra=None), state, SLURM, NOW)

    assert (foreign.kind, "extra" in foreign.body) == (Do.REGISTER, False)
    assert "no record in it" in foreign.reason
    assert "no record" not in fine.reason
    assert "no record" not in spur.reason  # no extra at all: nothing to say


def test_a_drain_without_extra_to_write_is_the_id_in_the_reason_alone():
    """spur (no extra), foreign extra text, or extra longer than the transport carries."""
    state = state_for(SPX, CPX, CPX)
    large = '{"blob": "' + "x" * 200 + '"}'
    for extra, limit in ((None, None), ("operator note", None), ('{"a": 1, "a": 2}', None), (large, 100)):
        busy = replace(BUSY, extra=extra)

        action = decide(outcome_for(state), busy, state, replace(SLURM, max_extra=limit), NOW, nonce="3f9a")

        assert ["state", "reason"] == list(action.body)  # type: ignore[arg-type]  # a write has a body, extra
        assert action.body["reason"].startswith("spurinv: [3f9a")


def test_resume_sends_state_only_never_a_reason():
    state = state_for(SPX, SPX, SPX, drain=True)

    action = decide(outcome_for(state), OURS_IDLE, state, SLURM, NOW)

    # UNDRAIN clears the DRAIN flag only; RESUME would also clear DOWN, FAIL, REBOOT_*
    assert {"state": ["UNDRAIN"]} == action.body


@pytest.mark.parametrize("dialect", ["spur", "spur-scontrol"])
def test_spur_knows_only_resume(dialect):
    state = state_for(SPX, SPX, SPX, drain=True)
    spur = replace(OURS_IDLE, dialect=dialect, extra=None)

    assert {"state": ["RESUME"]} == decide(outcome_for(state), spur, state, SLURM, NOW).body


def test_register_body_keeps_other_gres_and_records_the_fingerprint():
    state = state_for(SPX, CPX, CPX)

    action = decide(outcome_for(state), view(gres="gpu:mi300x:8,fpga:4", used="gpu:0,fpga:0"), state, SLURM, NOW)

    assert "gpu:mi300x:64,fpga:4" == action.body["gres"]
    assert CPX["fingerprint"] in action.body["extra"]


def test_register_body_records_the_gres_it_sends_next_to_foreign_extra_keys():
    """`spurinv fleet` compares the controller's gres with the one recorded here."""
    state = state_for(SPX, CPX, CPX)
    current = replace(view(gres="gpu:mi300x:8,fpga:4", used="gpu:0,fpga:0"), extra='{"rack":"r2"}')

    action = decide(outcome_for(state), current, state, SLURM, NOW)

    extra = json.loads(action.body["extra"])
    assert "r2" == extra["rack"]
    record = {"fingerprint": CPX["fingerprint"], "inventory": shape.summary(CPX), "gres": action.body["gres"], "node": "n1"}
    assert record == extra["spurinv"]


def test_backoff_and_refused_hold_have_distinct_exit_codes():
    backoff = state_for(SPX, CPX, CPX, backoff=9999, backoff_kind="unreachable")
    refused = state_for(SPX, CPX, CPX, refusal=True, backoff=9999)
    drain = decide(outcome_for(refused), IDLE, refused, SLURM, NOW)  # the drain after a refusal
    held = settle(refused, drain, NOW)
    drained = view("IDLE", "DRAIN", reason=drain.body["reason"])

    assert exitcode.TEMPFAIL == decide(outcome_for(backoff), None, backoff, SLURM, NOW).exit_code
    assert exitcode.PROTOCOL == decide(outcome_for(held), drained, held, SLURM, NOW).exit_code


def test_settle_moves_the_baseline_only_on_an_applied_registration():
    state = state_for(SPX, CPX, CPX)
    action = decide(outcome_for(state), IDLE, state, SLURM, NOW)

    applied = settle(state, action, NOW)
    refused = settle(state, action, NOW, applied=False, error="2072", settings=SLURM)

    assert CPX["fingerprint"] == applied["baseline"]["inventory"]["fingerprint"]
    assert SPX["fingerprint"] == refused["baseline"]["inventory"]["fingerprint"]
    assert refused["refusal"]["fingerprint"] == CPX["fingerprint"]
    assert refused["backoff"]["next_attempt"] > NOW


def _run_to_rest(state, node, policy):
    """Drive decide/settle as a run does, with a controller that applies everything."""
    actions = []
    for _ in range(8):
        action = decide(outcome_for(state), node, state, policy, NOW)
        actions.append(action.kind)
        if action.kind in (Do.NONE, Do.HOLD, Do.BACKOFF):
            return actions, state
        state = settle(state, action, NOW, settings=policy)
        node = expected_view(node, action) if node is not None else node
        if action.kind == Do.READ_VIEW:
            node = IDLE
    raise AssertionError(f"no rest after {actions}")


def test_a_busy_drain_then_idle_reregisters_and_resumes():
    state = state_for(SPX, CPX, CPX)
    actions, state = _run_to_rest(state, BUSY, SLURM)
    assert [Do.DRAIN, Do.HOLD] == actions
    drained_idle = view("IDLE", "DRAIN", reason=state["drain"]["reason"])

    actions, state = _run_to_rest(state, drained_idle, SLURM)

    assert [Do.REGISTER, Do.RESUME, Do.NONE] == actions
    assert state["drain"] is None
    assert state["baseline"]["inventory"]["fingerprint"] == CPX["fingerprint"]


views = st.sampled_from([None, IDLE, BUSY, OURS_IDLE, OURS_BUSY, NHC_IDLE, SLURM_INVAL, EMPTY_DRAIN, LOOKALIKE])
invs = st.sampled_from([None, SPX, CPX, NONE])


@settings(max_examples=examples(300))
@given(
    baseline=invs, previous=invs, current=invs, node=views, drain=st.booleans(), observe=st.booleans(), suspicious=st.booleans()
)
def test_never_writes_over_a_drain_it_does_not_own(baseline, previous, current, node, drain, observe, suspicious):
    """Whatever the inputs: a foreign drain is never resumed or re-drained, and observe mode never writes."""
    state = state_for(baseline, previous, current, drain=drain and current is not None)
    policy = Settings(observe=observe, drain_on_suspicious=suspicious)

    action = decide(outcome_for(state), node, state, policy, NOW)

    foreign = node is not None and node.drained and not (state["drain"] and node.reason == state["drain"]["reason"])
    if foreign:
        assert action.kind not in (Do.RESUME, Do.DRAIN)
    if observe:
        assert action.kind not in WRITES
        assert action.kind != Do.READ_VIEW
    if outcome_for(state)["kind"] in (Kind.DISCOVERY_FAILED, Kind.CHANGE_PENDING):
        assert action.kind not in WRITES
    if outcome_for(state)["kind"] == Kind.SUSPICIOUS:
        assert action.kind != Do.REGISTER


def test_ignore_backoff_lets_an_operator_retry_now():
    state = state_for(SPX, CPX, CPX, backoff=9999)

    action = decide(outcome_for(state), None, state, Settings(observe=False, ignore_backoff=True), NOW)

    assert Do.READ_VIEW == action.kind


def test_a_successful_contact_ends_transport_backoff_but_not_a_refusal():
    from spurinv.policy import contacted

    backoff = new_backoff(kind="unreachable", failures=3, next_attempt=at(9999), error="refused")
    unreachable: State = {**state_for(SPX, CPX, CPX), "backoff": backoff}
    refused = state_for(SPX, CPX, CPX, refusal=True, backoff=9999)

    assert contacted(unreachable)["backoff"] is None
    assert contacted(refused)["backoff"] is not None


@settings(max_examples=examples(200))
@given(
    failures=st.integers(1, 40),
    initial=st.integers(1, 600),
    maximum=st.integers(1, 7200),
    kind=st.sampled_from(["auth", "unreachable", "refused"]),
)
def test_backoff_is_bounded_and_never_shrinks(failures, initial, maximum, kind):
    from spurinv.policy import backoff_seconds

    policy = Settings(observe=False, backoff_initial=initial, backoff_max=maximum)

    first, second = backoff_seconds(failures, policy, kind), backoff_seconds(failures + 1, policy, kind)

    assert 0 < first <= maximum
    assert first <= second


# --- scoped backoff, clamped backoff, bounded busy rechecks --------------------------

BLOCKING = ["unreachable", "auth", "protocol", "unknown-node", "read-only"]


@settings(max_examples=examples(300))
@given(
    baseline=invs,
    previous=invs,
    current=invs,
    drain=st.booleans(),
    refusal=st.sampled_from([None, SPX, CPX, NPS4]),
    kind=st.sampled_from([*BLOCKING, "refused"]),
    left=st.integers(1, 3600),
)
def test_backoff_blocks_all_contact_only_for_transport_and_auth_and_a_refusal_only_its_retry(
    baseline, previous, current, drain, refusal, kind, left
):
    """An active transport/auth backoff: no request whatever the reading needs. An active refusal
    backoff: no request only when the reading needs nothing but the refused update's retry."""
    state = state_for(baseline, previous, current, drain=drain and current is not None, refusal=refusal or False)
    state = {**state, "backoff": new_backoff(kind=kind, failures=2, next_attempt=NOW + timedelta(seconds=left), error="x")}
    outcome = outcome_for(state)

    action = decide(outcome, None, state, SLURM, NOW)

    if kind in BLOCKING:
        assert action.kind != Do.READ_VIEW
    else:
        retry_only = (
            outcome["kind"] == Kind.CHANGE_CONFIRMED
            and refusal is not None
            and refusal["fingerprint"] == outcome["fingerprint"]
        )
        # a refusal's backoff never stops the look (one single-node read) that may show it moot
        assert action.kind != Do.BACKOFF, (outcome["kind"], action.reason)
        assert (action.kind == Do.READ_VIEW and action.cause == "refused") == retry_only, (outcome["kind"], action.reason)


# --- a refusal never hides the controller -----------------------------------------


GRES_TEXTS = ["gpu:mi300x:8", "gpu:mi300x:64", "gpu:mi300x:63", "gpu:mi300x:64,nic:2", "gpu:h100:64", "", None]


@settings(max_examples=examples(300))
@given(
    gres=st.sampled_from(GRES_TEXTS),
    drained=st.booleans(),
    busy=st.booleans(),
    left=st.integers(1, 3600),
    ignore=st.booleans(),
)
def test_a_refused_update_is_never_resent_while_it_backs_off_but_a_controller_that_agrees_ends_it(
    gres, drained, busy, left, ignore
):
    """During a refusal's backoff the node is read; the refused GRES update is never sent again
    before the backoff ends (unless --ignore-backoff), and a controller that lists the reading is
    taken as registered, whatever else the node is doing."""
    state = state_for(SPX, CPX, CPX, refusal=True, drain=drained)
    state = {**state, "backoff": new_backoff(kind="refused", failures=2, next_attempt=NOW + timedelta(seconds=left),
                                                        error="x")}  # fmt: skip
    policy = Settings(observe=False, ignore_backoff=ignore)
    flags = ("DRAIN",) if drained else ()
    node = view("MIXED" if busy else "IDLE", *flags, reason=OUR_REASON if drained else "", gres=gres, cpus=2 if busy else 0,
                used="gpu:mi300x:2(IDX:0-1)" if busy else "gpu:mi300x:0(IDX:N/A)")  # fmt: skip
    outcome = outcome_for(state)

    first = decide(outcome, None, state, policy, NOW)
    action = decide(outcome, node, state, policy, NOW)

    if not ignore:
        assert Do.READ_VIEW == first.kind
        assert "refused" == first.cause  # the single-node read, never the all-nodes re-check
        assert Do.REGISTER != action.kind
    agrees = gres in ("gpu:mi300x:64", "gpu:mi300x:64,nic:2")
    assert (action.kind == Do.RECORD) == agrees, action.reason
    if agrees:
        assert f"the controller now lists {gres}" in action.reason
        assert gres == action.body["gres"]  # nothing to send: the GRES as the controller lists it
        assert CPX["fingerprint"] == json.loads(action.body["extra"])["spurinv"]["fingerprint"]


def test_the_operators_fix_is_taken_as_registered_and_our_drain_lifted_in_one_run():
    refused = state_for(SPX, CPX, CPX, refusal=True, backoff=9999)
    drain = decide(outcome_for(refused), IDLE, refused, SLURM, NOW)  # the drain after a refusal
    state = settle(refused, drain, NOW)
    fixed = view("IDLE", "DRAIN", reason=drain.body["reason"], gres="gpu:mi300x:64")

    record = decide(outcome_for(state), fixed, state, SLURM, NOW)
    recorded = settle(state, record, NOW, settings=SLURM)
    resume = decide(outcome_for(recorded), fixed, recorded, SLURM, NOW)
    actions, state = _run_to_rest(state, fixed, SLURM)

    assert [Do.RECORD, Do.RESUME, Do.NONE] == actions
    assert "registered" == state["baseline"]["source"]
    assert CPX["fingerprint"] == state["baseline"]["inventory"]["fingerprint"]
    assert state["refusal"] is None
    assert state["backoff"] is None
    assert "the controller now lists gpu:mi300x:64; our drain lifted" == resume.reason


@settings(max_examples=examples(300))
@given(
    ahead=st.integers(-(10**6), 10**9),
    maximum=st.integers(1, 7 * 86400),
    kind=st.sampled_from([*BLOCKING, "refused"]),
)
def test_a_stored_backoff_never_reaches_beyond_backoff_max_and_says_so(ahead, maximum, kind):
    """A next_attempt written under a wrong clock (2036) counts as now + backoff_max, with a warning
    that shows the date when it is not today."""
    policy = Settings(observe=False, backoff_max=maximum)
    stored = NOW + timedelta(seconds=ahead)
    state = new_state(backoff=new_backoff(kind=kind, failures=1, next_attempt=stored, error="x"))

    clamped, warning = clamp_backoff(state, policy, NOW)

    assert clamped["backoff"]["next_attempt"] <= NOW + timedelta(seconds=maximum)
    assert (warning is not None) == (ahead > maximum)
    if warning is not None:
        assert stored.strftime("%Y-%m-%d") in warning or stored.date() == NOW.date()
    stored_state: State = {**state_for(SPX, CPX, CPX), "backoff": state["backoff"]}
    blocked = decide(outcome_for(state_for(SPX, CPX, CPX)), None, stored_state, policy, NOW)
    if blocked.kind == Do.BACKOFF:
        assert NOW.strftime("%Y-%m-%d") not in blocked.reason  # today: the time of day is enough


def test_backoff_messages_show_the_date_when_it_is_not_today():
    assert "19:00:00 UTC" == when(at(3600), NOW)
    assert "2036-01-01 00:00:00 UTC" == when(datetime(2036, 1, 1, tzinfo=UTC), NOW)


@settings(max_examples=examples(300))
@given(
    name=st.text(min_size=1, max_size=40),
    interval=st.integers(60, 86400),
    since=st.integers(-(10**6), 10**6),
)
def test_the_all_nodes_query_is_at_most_once_per_interval_per_node_and_at_most_a_quarter_later(name, interval, since):
    last = NOW - timedelta(seconds=since)

    due = recheck_due(last, name, interval, NOW)

    if 0 <= since < interval:
        assert not due
    if since >= interval * 1.25 or since < 0:  # past the largest jitter, or a clock that went back
        assert due
    assert due == recheck_due(last, name, interval, NOW)  # deterministic: the name fixes the jitter
    assert recheck_due(None, name, interval, NOW)


def test_the_all_nodes_query_is_due_from_the_first_instant_of_its_jittered_interval():
    """Node ``n0622660``'s digest starts with 951 << 22, so at an interval of 4096 s its jitter is
    exactly 951 s (951 / 1024 of a quarter): the query is due 5047 s after the last one, not a
    microsecond before."""
    assert recheck_due(NOW - timedelta(seconds=5047), "n0622660", 4096, NOW)
    assert not recheck_due(NOW - timedelta(seconds=5047, microseconds=-1), "n0622660", 4096, NOW)


def test_the_jitter_spreads_a_fleet():
    offsets = {
        next(s for s in range(300, 400) if recheck_due(NOW - timedelta(seconds=s), f"n{i:05d}", 300, NOW)) for i in range(200)
    }
    assert len(offsets) > 40
    assert max(offsets) > 300 * 1.2  # up to a quarter of the interval later, not a fifth


def test_a_fresh_state_reads_the_controller_once_even_for_a_first_reading():
    """No state file (or a corrupt one moved aside): the first run looks at the controller for a
    drain of ours the lost state knew, then waits for the second reading as always."""
    state = with_reading(new_state(fresh=True), reading(CPX, 0))
    outcome = outcome_for(state)
    assert outcome["kind"] == Kind.CHANGE_PENDING

    first = decide(outcome, None, state, SLURM, NOW)
    then = decide(outcome, view(), {**state, "fresh": False}, SLURM, NOW)
    settled = decide(outcome, None, {**state, "fresh": False}, SLURM, NOW)
    observing = decide(outcome, None, state, OBSERVE, NOW)

    assert first.kind == Do.READ_VIEW
    assert "the controller not read yet" in first.reason
    assert (then.kind, settled.kind, observing.kind) == (Do.NONE, Do.NONE, Do.NONE)


def test_a_state_with_readings_that_never_read_the_controller_says_so_not_no_state():
    """Readings recorded in observe mode, then a controller configured: the state is there, the
    controller's view is what it lacks."""
    state = with_reading(with_reading(new_state(fresh=True), reading(SPX, 0)), reading(SPX, 60))
    state = {**state, "baseline": new_baseline(SPX, at(60), "observed")}

    first = decide(outcome_for(state), None, state, SLURM, NOW)

    assert first.kind == Do.READ_VIEW
    assert "no state" not in first.reason
    assert first.reason.startswith("the controller not read yet")


@settings(max_examples=examples(200))
@given(pinned=st.integers(1, 2**40 - 1), seen=st.integers(1, 2**40 - 1))
def test_our_reason_set_at_another_moment_is_never_ours(pinned, seen):
    drain = new_drain(reason=OUR_REASON, set_at=at(60), cause="busy", reason_changed_at=pinned)
    state = new_state(drain=drain)
    node = NodeView(
        name="n1", dialect="slurm-v0.0.39+", base="IDLE", flags=("DRAIN",), reason=OUR_REASON, reason_changed_at=seen
    )

    assert ours(node, state) == (pinned == seen)


def test_our_words_set_again_at_another_time_are_forgotten_saying_so():
    """A drain that reused our reason (same words, another reason time) is not ours; the step
    says the time differs instead of quoting our own reason back as "the reason is now"."""
    drain = new_drain(reason=OUR_REASON, set_at=at(60), cause="busy", reason_changed_at=1_000)
    state = confirmed(SPX, SPX, drain=drain)
    node = NodeView(
        name="n1", dialect="slurm-v0.0.39+", base="IDLE", flags=("DRAIN",), reason=OUR_REASON, reason_changed_at=1_001
    )

    action = decide(outcome_of(state), node, state, SLURM, NOW)

    assert action.kind == Do.FORGET_DRAIN
    assert "set again at 1001" in action.reason
    assert "the reason is now" not in action.reason


def test_a_waiting_node_with_gpus_in_use_holds_and_one_without_registers():
    state = state_for(SPX, CPX, CPX, drain=True)

    waiting = decide(outcome_for(state), OURS_BUSY, state, SLURM, NOW)
    cpu_only = decide(outcome_for(state), view("MIXED", "DRAIN", reason=OUR_REASON, cpus=4), state, SLURM, NOW)

    assert Do.HOLD == waiting.kind
    assert Do.REGISTER == cpu_only.kind


# --- controller text cleaned on input is never written back ---------


@pytest.mark.parametrize("extra", ['{"rack": "Zo\ufffd"}', '{"\ufffd": 1, "spurinv": {"node": "n1"}}', "note \ufffd"])
def test_an_extra_read_with_replacement_is_never_spliced_and_the_run_says_so(extra):
    """``extra`` with a raw Latin-1 byte (read as U+FFFD) was spliced and sent back with U+FFFD
    in place of the admin's byte: the drain and the registration now leave ``extra`` alone."""
    state = state_for(SPX, CPX, CPX)

    drain = decide(outcome_for(state), replace(BUSY, extra=extra), state, SLURM, NOW, nonce="3f9a")
    register = decide(outcome_for(state), view(gres="gpu:mi300x:8", extra=extra), state, SLURM, NOW)

    assert list(drain.body)  # type: ignore[arg-type]  # a write has a body == ["state", "reason"]
    assert (register.kind, "extra" in register.body) == (Do.REGISTER, False)
    assert "no record in it" in register.reason


def test_a_gres_entry_read_with_replacement_is_never_sent_back():
    """Re-registering sends every non-GPU entry back as listed; one read with U+FFFD would go
    back altered (and leaving it out zeroes it): the run holds, says which, and exits 76."""
    state = state_for(SPX, CPX, CPX)
    idle = view(gres="gpu:mi300x:8,fpga:x\ufffd:2")

    action = decide(outcome_for(state), idle, state, SLURM, NOW)

    assert action.kind == Do.HOLD
    assert action.exit_code == exitcode.PROTOCOL
    assert "fpga:x\ufffd:2" in action.reason
    plain = decide(outcome_for(state), view(gres="gpu:mi\ufffd:8,fpga:x:2"), state, SLURM, NOW)
    assert plain.kind == Do.REGISTER  # a GPU entry is rebuilt from the inventory: nothing of it goes back
    assert plain.body["gres"] == "gpu:mi300x:64,fpga:x:2"


@pytest.mark.parametrize("backoff", [9999, None])
def test_an_operators_resume_during_a_refusal_is_not_redrained_for_the_same_refusal(backoff):
    """the operator lifted our "controller refused" drain; spurinv forgets it and does
    not drain again every tick (before: forget-drain, then a drain with a new id, each tick)."""
    state = state_for(SPX, CPX, CPX, refusal=True, drain=True, backoff=backoff)
    drain = state["drain"]
    assert drain is not None
    state = {**state, "drain": {**drain, "cause": "refused"}}
    resumed = view("IDLE")

    forget = decide(outcome_for(state), resumed, state, SLURM, NOW)
    assert Do.FORGET_DRAIN == forget.kind
    state = settle(state, forget, NOW)
    kinds = []
    for _ in range(3):  # three more steps (or ticks) with the operator's node as it is
        action = decide(outcome_for(state), resumed, state, SLURM, NOW)
        kinds.append(action.kind)
        if action.kind in (Do.HOLD, Do.NONE, Do.REGISTER):
            break
        state = settle(state, action, NOW, settings=SLURM)

    assert Do.DRAIN not in kinds
    # during the backoff it holds; once the backoff is over the refused write is retried once
    assert kinds[-1] == (Do.HOLD if backoff else Do.REGISTER)


# --- pinned by the mutation run -------------------------------------------------------------------
# Policy behaviour the table in test_policy.py left unpinned (mutation survivors). Each
# test fails for a change of behaviour a mutation run showed no other fast test noticed: the reason
# length cap, the backoff sequence (with a configured ``backoff_initial``), the exit status recorded
# for a failed discovery, the settle step for every action, and which drain a FORGET_DRAIN reports.
# See docs/mutation.md.


def node_view(state="IDLE", *flags, reason="", gres="gpu:mi300x:8", cpus=0, memory=0, used="gpu:mi300x:0(IDX:N/A)", extra=None):
    return NodeView(
        name="n1",
        dialect="slurm-v0.0.39+",
        base=state,
        flags=flags,
        reason=reason,
        alloc_cpus=cpus,
        alloc_memory=memory,
        gres=gres,
        gres_used=used,
        extra=extra,
    )


def confirmed(baseline, current, **update) -> State:
    state = new_state(baseline=new_baseline(inventory=baseline, since=at(0), source="registered") if baseline else None)
    state = with_reading(with_reading(state, reading(current, 0)), reading(current, 60))
    return new_state(**{**state, **update})


def outcome_of(state: State):
    previous = state["readings"][-2] if len(state["readings"]) > 1 else None
    return classify(state["baseline"]["inventory"] if state["baseline"] else None, previous, state["readings"][-1])


HEAD = len(f"{PREFIX} [12345678] ")  # the prefix and the drain id before the text


def _text_of_length(total: int) -> str:
    """A text that makes ``spurinv: [<id>] <text>`` exactly ``total`` characters long."""
    return "x" * (total - HEAD)


@pytest.mark.parametrize("length", [MAX_REASON - 1, MAX_REASON])
def test_a_reason_within_the_cap_is_sent_whole(length):
    text = _text_of_length(length)

    reason = drain_reason(text, "n1", "3f9a")

    assert len(reason) == length
    assert reason.endswith(text)
    assert reason.startswith(f"{PREFIX} [3f9a")


@pytest.mark.parametrize("length", [MAX_REASON + 1, MAX_REASON + 2, 1000])
def test_a_longer_reason_is_cut_to_exactly_the_cap_and_marked(length):
    reason = drain_reason(_text_of_length(length), "n1", "3f9a")

    assert len(reason) == MAX_REASON
    assert reason.startswith(f"{PREFIX} [3f9a")
    assert reason.endswith("…")
    assert reason[HEAD:-1] == _text_of_length(length)[: MAX_REASON - 1 - HEAD]


@settings(max_examples=examples(300))
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=600), st.sampled_from(["n1", "gpu-07"]))  # type: ignore[arg-type]  # category literals
def test_a_drain_reason_is_always_one_line_within_the_cap_and_ours(text, node):
    reason = drain_reason(text, node, "3f9a")

    assert len(reason) <= MAX_REASON
    assert reason.startswith(f"{PREFIX} [3f9a")
    assert "\n" not in reason
    assert reason == " ".join(reason.split())
    assert reason_id(reason, node) == reason[HEAD - 10 : HEAD - 2]  # carries a valid id for its node
    words = printable(" ".join(text.split()))  # a control character shown escaped, never sent
    if len(words) <= MAX_REASON - HEAD:
        assert reason[HEAD:].strip() == words  # nothing is cut that fits


def test_a_busy_drain_with_a_huge_diff_stays_within_the_cap():
    many = inventory(packages(64, "CPX", per=8))  # 512 devices, every package changed
    state = confirmed(SPX, many)

    action = decide(outcome_of(state), node_view("MIXED", cpus=2, used="gpu:mi300x:2(IDX:0-1)"), state, SLURM, NOW)

    assert action.kind == Do.DRAIN
    assert len(action.body["reason"]) <= MAX_REASON


def test_a_busy_drain_names_a_memory_mode_switch_and_keeps_its_id():
    """CPX/NPS1 → SPX/NPS4 on a busy node: the drain reason says NPS4 too, within the cap,
    behind spurinv's prefix and an id that is the node's."""
    state = confirmed(inventory(packages(8, "CPX", per=8)), inventory(packages(8, "SPX", memory_mode="NPS4")))

    action = decide(outcome_of(state), node_view("MIXED", used="gpu:mi300x:2(IDX:0-1)"), state, SLURM, NOW, nonce="3f9a")

    reason = action.body["reason"]
    assert action.kind == Do.DRAIN
    assert reason.startswith(f"{PREFIX} [3f9a")
    assert len(reason) <= MAX_REASON
    assert reason_id(reason, "n1") is not None
    assert "8 GPUs CPX/NPS1→SPX/NPS4 (8→1 each)" in reason


def _refused_registration(state: State, policy: Settings, now) -> State:
    action = decide(outcome_of(state), node_view(), state, policy, now)
    assert action.kind == Do.REGISTER
    return settle(state, action, now, applied=False, error="2072 Invalid gres", settings=policy)


def test_a_refused_registration_backs_off_by_the_configured_initial_delay():
    policy = Settings(observe=False, backoff_initial=7, backoff_max=100)

    state = _refused_registration(confirmed(SPX, CPX), policy, NOW)

    assert state["backoff"]["next_attempt"] - NOW == timedelta(seconds=7)
    assert (state["backoff"]["kind"], state["backoff"]["failures"]) == ("refused", 1)
    assert state["refusal"]["fingerprint"] == CPX["fingerprint"]
    assert state["baseline"]["inventory"]["fingerprint"] == SPX["fingerprint"]


def test_refused_registrations_double_the_delay_up_to_the_maximum():
    policy = Settings(observe=False, backoff_initial=10, backoff_max=100)
    state = confirmed(SPX, CPX)
    delays = []
    now = NOW
    for _ in range(6):
        state = _refused_registration({**state, "refusal": None}, policy, now)
        delays.append(int((state["backoff"]["next_attempt"] - now).total_seconds()))
        now = state["backoff"]["next_attempt"]

    assert delays == [10, 20, 40, 80, 100, 100]


@pytest.mark.parametrize(("kind", "first"), [("unreachable", 5), ("refused", 5), ("auth", 20)])
def test_controller_errors_back_off_from_the_configured_initial_delay(kind, first):
    policy = Settings(observe=False, backoff_initial=5, backoff_max=10_000)

    once = with_backoff(new_state(), kind, "boom", policy, NOW)
    twice = with_backoff(once, kind, "boom", policy, NOW)

    assert once["backoff"]["next_attempt"] - NOW == timedelta(seconds=first)
    assert twice["backoff"]["next_attempt"] - NOW == timedelta(seconds=2 * first)
    assert (once["backoff"]["failures"], twice["backoff"]["failures"]) == (1, 2)
    assert twice["controller_errors"] == 2


def test_a_backoff_ends_exactly_at_its_next_attempt():
    backoff = new_backoff(kind="unreachable", failures=1, next_attempt=NOW, error="x")
    state = confirmed(SPX, CPX, backoff=backoff)

    just_before = decide(outcome_of(state), None, state, SLURM, NOW - timedelta(seconds=1))
    at_the_time = decide(outcome_of(state), None, state, SLURM, NOW)

    assert just_before.kind == Do.BACKOFF
    assert just_before.exit_code == exitcode.TEMPFAIL
    assert at_the_time.kind == Do.READ_VIEW


def test_a_refusal_backoff_survives_contact_and_a_transport_backoff_does_not():
    refused = new_backoff(kind="refused", failures=1, next_attempt=at(9999), error="2072")
    auth = new_backoff(kind="auth", failures=1, next_attempt=at(9999), error="401")

    assert contacted(new_state(backoff=refused))["backoff"] == refused
    assert contacted(new_state(backoff=auth))["backoff"] is None
    assert contacted(new_state())["backoff"] is None


def test_the_policy_defaults_are_the_documented_configuration_defaults():
    """settle() falls back to Settings(observe=False) when given none: the same bounds as the config."""
    documented = Config().policy

    assert (SLURM.backoff_initial, SLURM.backoff_max) == (documented.backoff_initial, documented.backoff_max)
    assert SLURM.drain_on_suspicious == documented.drain_on_suspicious


def test_a_refusal_records_the_controllers_own_words():
    state = confirmed(SPX, CPX)
    action = decide(outcome_of(state), node_view(), state, SLURM, NOW)

    refused = settle(state, action, NOW, applied=False, error="2072 Invalid gres", settings=SLURM)
    unexplained = settle(state, action, NOW, applied=False, settings=SLURM)

    assert refused["refusal"]["error"] == "2072 Invalid gres"
    assert refused["backoff"]["error"] == "2072 Invalid gres"
    assert unexplained["refusal"]["error"]  # never empty


def test_actions_are_immutable():
    action = Action(kind=Do.NONE, reason="x")

    with pytest.raises(FrozenInstanceError):
        action.kind = Do.DRAIN  # type: ignore[misc]


def test_the_policy_settings_are_immutable():
    """One Settings serves every step of a run: no step can change the bounds the next one reads."""
    policy = Settings(observe=False, backoff_initial=7)

    with pytest.raises(FrozenInstanceError):
        policy.backoff_initial = 0  # type: ignore[misc]
    assert policy.backoff_initial == 7


def _refused(backoff_kind: str = "refused") -> State:
    """CPX confirmed, its registration refused, and a backoff still running."""
    refusal = new_refusal(fingerprint=CPX["fingerprint"], at=at(60), error="2072 Invalid gres")
    backoff = new_backoff(kind=backoff_kind, failures=3, next_attempt=at(99_999), error="2072 Invalid gres")
    return confirmed(SPX, CPX, refusal=refusal, backoff=backoff)


def test_back_at_the_baseline_a_refusal_and_its_backoff_are_forgotten_so_the_change_is_tried_at_once_next_time():
    reverted = with_reading(_refused(), reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))
    again = with_reading(with_reading(forgotten, reading(CPX, 180)), reading(CPX, 240))

    assert (forgotten["refusal"], forgotten["backoff"]) == (None, None)
    assert decide(outcome_of(again), None, again, SLURM, at(300)).kind == Do.READ_VIEW  # not held by the old backoff
    assert decide(outcome_of(again), node_view(), again, SLURM, at(300)).kind == Do.REGISTER  # not drained as refused


def test_without_forgetting_the_same_change_would_wait_for_the_old_backoff():
    """The contrast to the test above: what the old refusal does when it is kept."""
    kept = with_reading(with_reading(with_reading(_refused(), reading(SPX, 120)), reading(CPX, 180)), reading(CPX, 240))

    assert decide(outcome_of(kept), None, kept, SLURM, at(300)).kind == Do.READ_VIEW  # the look goes ahead
    assert decide(outcome_of(kept), node_view(), kept, SLURM, at(300)).kind == Do.DRAIN  # drained as refused, not re-sent


@pytest.mark.parametrize("kind", ["unreachable", "auth"])
def test_back_at_the_baseline_a_transport_backoff_is_kept_and_still_blocks_contact(kind):
    reverted = with_reading(_refused(kind), reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))

    assert forgotten["refusal"] is None
    assert forgotten["backoff"] == reverted["backoff"]
    again = with_reading(with_reading(forgotten, reading(CPX, 180)), reading(CPX, 240))
    assert decide(outcome_of(again), None, again, SLURM, at(300)).kind == Do.BACKOFF


@pytest.mark.parametrize("left", ["refusal", "backoff"])
def test_a_refusal_or_a_refused_backoff_alone_is_forgotten_too(left):
    gone = "backoff" if left == "refusal" else "refusal"
    reverted = with_reading(new_state(**{**_refused(), gone: None}), reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))

    assert (forgotten["refusal"], forgotten["backoff"]) == (None, None)


def test_a_refusal_is_kept_while_the_node_still_differs_from_its_baseline():
    state = _refused()  # CPX confirmed twice: the refused inventory is still there

    assert forget_stale_refusal(state, outcome_of(state)) == state
    pending = with_reading(state, reading(NONE, 120))  # something else, seen once
    assert forget_stale_refusal(pending, outcome_of(pending)) == pending


@pytest.mark.parametrize("backoff", [None, new_backoff(kind="auth", failures=1, next_attempt=at(99_999), error="401")])
def test_back_at_the_baseline_with_nothing_refused_nothing_changes(backoff):
    state = confirmed(SPX, SPX, backoff=backoff)

    assert forget_stale_refusal(state, outcome_of(state)) == state


def test_a_failed_discovery_does_nothing_and_says_ioerr():
    state = new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered"))
    state = with_reading(with_reading(state, reading(SPX, 0)), reading(None, 60))
    outcome = outcome_of(state)
    assert outcome["kind"] == Kind.DISCOVERY_FAILED

    for node in (None, node_view(), node_view("MIXED", cpus=2)):
        action = decide(outcome, node, state, SLURM, NOW)
        assert (action.kind, action.exit_code) == (Do.NONE, exitcode.IOERR)
        assert action.body is None


def test_a_pending_change_does_nothing_and_exits_zero():
    state = with_reading(new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered")), reading(CPX, 60))

    action = decide(outcome_of(state), node_view(), state, SLURM, NOW)

    assert (action.kind, action.exit_code, action.body) == (Do.NONE, exitcode.OK, None)


@pytest.mark.parametrize("observe", [True, False])
def test_a_suspicious_reading_is_held_with_its_release(observe):
    state = confirmed(SPX, NONE)
    outcome = outcome_of(state)

    action = decide(outcome, None, state, Settings(observe=observe), NOW)

    assert action.kind == Do.HOLD
    assert outcome["release"] in action.reason
    assert action.exit_code == exitcode.OK


def test_observe_mode_observes_a_confirmed_change_and_settle_makes_it_the_observed_baseline():
    state = confirmed(SPX, CPX)

    action = decide(outcome_of(state), None, state, Settings(observe=True), NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.OBSERVE
    assert diff_summary(outcome_of(state)["diff"]) in action.reason  # what would change, against the baseline
    assert "first inventory" not in action.reason
    assert after["baseline"]["inventory"]["fingerprint"] == CPX["fingerprint"]
    assert after["baseline"]["source"] == "observed"


def test_observe_mode_with_no_baseline_still_records_the_first_inventory():
    state = confirmed(None, SPX)

    action = decide(outcome_of(state), None, state, Settings(observe=True), NOW)

    assert action.kind == Do.OBSERVE
    assert f"first inventory: {shape.summary(SPX)}" in action.reason  # no baseline to compare with: what it is
    assert settle(state, action, NOW)["baseline"]["inventory"] == SPX


def test_adopting_takes_the_reading_and_clears_what_it_settles():
    state = confirmed(None, SPX, refusal=new_refusal(fingerprint="f", at=at(1), error="x"), accepted="f")

    action = decide(outcome_of(state), node_view(), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.ADOPT
    assert (after["baseline"]["inventory"], after["baseline"]["source"], after["baseline"]["since"]) == (SPX, "adopted", NOW)
    assert (after["refusal"], after["accepted"]) == (None, None)


def test_an_applied_registration_clears_refusal_and_backoff():
    backoff = new_backoff(kind="refused", failures=2, next_attempt=at(1), error="x")
    state = confirmed(SPX, CPX, refusal=new_refusal(fingerprint=CPX["fingerprint"], at=at(1), error="x"), backoff=backoff)
    reason = decide(outcome_of(state), node_view(), state, SLURM, NOW).body["reason"]  # the drain after the refusal
    drained = node_view("IDLE", "DRAIN", reason=reason)
    state = {**state, "drain": new_drain(reason=reason, set_at=at(1), cause="refused")}

    action = decide(outcome_of(state), drained, state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.REGISTER
    assert after["baseline"]["inventory"]["fingerprint"] == CPX["fingerprint"]
    assert (after["baseline"]["source"], after["baseline"]["since"]) == ("registered", NOW)
    assert (after["refusal"], after["backoff"]) == (None, None)
    assert after["drain"] is not None  # lifted by the RESUME that follows, not by the registration


def test_a_cpu_only_job_does_not_make_a_gpu_change_busy():
    state = confirmed(SPX, CPX)

    action = decide(outcome_of(state), node_view("MIXED", cpus=2), state, SLURM, NOW)

    assert action.kind == Do.REGISTER


def test_a_drain_records_its_reason_cause_and_fingerprint():
    state = confirmed(SPX, CPX)
    action = decide(outcome_of(state), node_view("MIXED", cpus=2, used="gpu:mi300x:2(IDX:0-1)"), state, SLURM, NOW)

    after = settle(state, action, NOW)

    assert after["drain"]["reason"] == action.body["reason"]
    assert (after["drain"]["cause"], after["drain"]["set_at"], after["drain"]["fingerprint"]) == (
        "busy",
        NOW,
        CPX["fingerprint"],
    )


def test_a_suspicious_drain_records_its_cause():
    state = confirmed(SPX, NONE)
    action = decide(outcome_of(state), node_view(), state, Settings(observe=False, drain_on_suspicious=True), NOW)

    after = settle(state, action, NOW)

    assert after["drain"]["cause"] == "suspicious"
    assert after["drain"]["reason"] == action.body["reason"]


def test_a_resume_forgets_our_drain_and_any_backoff():
    backoff = new_backoff(kind="refused", failures=1, next_attempt=at(1), error="x")
    state = confirmed(SPX, SPX, drain=new_drain(reason="spurinv: x", set_at=at(1), cause="busy"), backoff=backoff)

    action = decide(outcome_of(state), node_view("IDLE", "DRAIN", reason="spurinv: x"), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.RESUME
    assert (after["drain"], after["backoff"]) == (None, None)


def test_forget_drain_forgets_only_the_drain():
    backoff = new_backoff(kind="refused", failures=1, next_attempt=at(1), error="x")
    state = confirmed(SPX, SPX, drain=new_drain(reason="spurinv: x", set_at=at(1), cause="busy"), backoff=backoff)

    action = decide(outcome_of(state), node_view("IDLE", "DRAIN", reason="NHC: bad ECC"), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.FORGET_DRAIN
    assert after["drain"] is None
    assert after["backoff"] == backoff
    assert after["baseline"] == state["baseline"]


@pytest.mark.parametrize("kind", [Do.NONE, Do.HOLD, Do.BACKOFF, Do.READ_VIEW])
def test_steps_that_write_nothing_change_nothing(kind):
    state = confirmed(SPX, CPX)

    assert settle(state, Action(kind=kind, reason="x"), NOW) == state


def _write(kind: Do) -> Action:
    body = {"state": ["DRAIN"], "reason": "spurinv: x"} if kind == Do.DRAIN else {"state": ["RESUME"]}
    return Action(kind=kind, reason="x", body=register_body(node_view(), CPX) if kind == Do.REGISTER else body, cause="busy")


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", [Do.REGISTER, Do.DRAIN, Do.RESUME])
def test_a_writes_outcome_clears_its_write_ahead_intent(kind, applied):
    """Once settle knows how a write ended, the next run must not settle it again from the view."""
    action = _write(kind)
    intent = new_intent(kind=kind.value, body=action.body, at=NOW, fingerprint=CPX["fingerprint"])  # type: ignore[arg-type]  # a write has a body
    state = confirmed(SPX, CPX, intent=intent)

    after = settle(state, action, NOW, applied=applied, error=None if applied else "2072", settings=SLURM)

    assert after["intent"] is None


@pytest.mark.parametrize("kind", [Do.NONE, Do.READ_VIEW, Do.FORGET_DRAIN])
def test_a_step_that_writes_nothing_keeps_an_unsettled_intent(kind):
    intent = new_intent(kind="drain", body={"state": ["DRAIN"], "reason": "spurinv: x"}, at=NOW)
    state = confirmed(SPX, CPX, intent=intent)

    assert settle(state, Action(kind=kind, reason="x"), NOW)["intent"] == intent


def test_expected_view_after_drain_and_resume_matches_what_slurm_shows():
    busy = node_view("MIXED", cpus=2)
    drain = Action(kind=Do.DRAIN, reason="x", body={"state": ["DRAIN"], "reason": "spurinv: y"})

    drained = expected_view(busy, drain)
    twice = expected_view(drained, drain)
    resumed = expected_view(drained, Action(kind=Do.RESUME, reason="x", body={"state": ["RESUME"]}))

    assert (drained.drained, drained.reason, drained.flags) == (True, "spurinv: y", ("DRAIN",))
    assert twice.flags == ("DRAIN",)
    assert not resumed.drained
    assert expected_view(busy, Action(kind=Do.NONE, reason="x")) == busy


def test_forget_drain_names_the_new_reason_only_when_the_node_is_still_drained():
    """A replaced drain: the report carries the new (someone else's) reason. A lifted drain: it does
    not quote the leftover reason (24.11 keeps it after RESUME), which would read as a live drain."""
    state = confirmed(SPX, SPX, drain=new_drain(reason="spurinv: x", set_at=at(1), cause="busy"))
    replaced = node_view("IDLE", "DRAIN", reason="NHC: bad ECC")
    lifted = node_view("IDLE", reason="spurinv: stale reason kept after resume")

    on_replaced = decide(outcome_of(state), replaced, state, SLURM, NOW)
    on_lifted = decide(outcome_of(state), lifted, state, SLURM, NOW)

    assert (on_replaced.kind, on_lifted.kind) == (Do.FORGET_DRAIN, Do.FORGET_DRAIN)
    assert "NHC: bad ECC" in on_replaced.reason
    assert "stale reason kept" not in on_lifted.reason


def test_a_busy_hold_under_our_drain_says_what_is_allocated():
    state = confirmed(SPX, CPX, drain=new_drain(reason="spurinv: x", set_at=at(1), cause="busy"))
    node = node_view("MIXED", "DRAIN", reason="spurinv: x", cpus=3, memory=2048, used="gpu:mi300x:2(IDX:0-1)")

    action = decide(outcome_of(state), node, state, SLURM, NOW)

    assert action.kind == Do.HOLD
    assert node.busy_text() in action.reason
    assert "gpu:mi300x:2(IDX:0-1)" in node.busy_text()


@settings(max_examples=examples(100))
@given(
    extra=st.one_of(st.none(), st.just(""), st.dictionaries(st.sampled_from(["rack", "owner", "spurinv"]), st.text(max_size=5)))
)
def test_the_register_body_records_the_fingerprint_readably(extra):
    import json

    current = None if extra is None else (extra if isinstance(extra, str) else json.dumps(extra))
    body = register_body(node_view(extra=current), CPX)

    if extra is None:  # the controller has no extra (spur, Slurm 22.05): nothing to write
        assert "extra" not in body
        return
    if isinstance(extra, dict) and "spurinv" in extra:  # the admin's own text under our key: theirs
        assert "extra" not in body
        return
    assert extra_fingerprint(body["extra"]) == CPX["fingerprint"]
    assert [(g.name, g.type, g.count) for g in parse_gres(body["gres"])] == [("gpu", "mi300x", 64)]


@pytest.mark.parametrize(("cause", "why"), [("link", "the PCIe link is back"), ("busy", "inventory matches the baseline")])
def test_lifting_our_drain_says_why_it_is_lifted(cause, why):
    """A link drain is lifted because the link is back, any other because the inventory is the
    baseline again: the step says which (drain_on_degraded_link off, so no second reading is awaited)."""
    state = state_for(SPX, SPX, SPX, drain=True)
    drain = state["drain"]
    assert drain is not None
    state = {**state, "drain": {**drain, "cause": cause}}

    action = decide(outcome_for(state), OURS_IDLE, state, SLURM, NOW)

    assert (action.kind, action.reason) == (Do.RESUME, f"{why}; lifting our drain")


def test_without_a_baseline_a_model_the_controller_lists_at_zero_and_we_do_not_have_is_no_change():
    """``gpu:h100:0`` beside our eight MI300X: zero listed and zero found is no change to name."""
    from spurinv.policy import against

    eight = inventory(packages(8))
    assert against(view(gres="gpu:mi300x:8,gpu:h100:0"), eight).startswith("as the controller lists: ")
    assert against(view(gres="gpu:mi300x:7,gpu:h100:0"), eight) == "mi300x 7→8 (vs the controller's gres)"


# --- our refusal drain, in the words of another version -------------------------------------


def _drained_for_refusal(baseline, current, **refused: Any) -> tuple[State, Action]:
    """Our drain for the refusal of ``current``, as decide() sets it (nonce ``abcd``), during the
    refusal's backoff; ``refused``: the refusal's keys (``remedy``)."""
    state = state_for(baseline, current, current, refusal=True, backoff=9999)
    assert state["refusal"] is not None
    state = {**state, "refusal": cast("Refusal", {**state["refusal"], **refused})}
    action = decide(outcome_for(state), view(gres="gpu:mi300x:8"), state, SLURM, NOW, nonce="abcd")
    assert action.kind == Do.DRAIN
    assert action.cause == "refused"
    return settle(state, action, NOW, settings=SLURM), action


def _reworded(state: State, text: str, **drain: Any) -> tuple[State, NodeView]:
    """``state``'s drain of ours, its reason worded ``text`` (as another version wrote it)."""
    assert state["drain"] is not None
    reason = drain_reason(text, "n1", "abcd")
    state = {**state, "drain": cast("Drain", {**state["drain"], "reason": reason, **drain})}
    return state, view("IDLE", "DRAIN", reason=reason, gres="gpu:mi300x:8")


def _older_words(reason: str) -> str:
    """The same drain, with the summary in other words (the remedy as it was)."""
    text = text_of(reason)
    assert "8 GPUs SPX→CPX (1→8 each)" in text or text.endswith("…"), text
    return text.replace("8 GPUs SPX→CPX (1→8 each)", "8 packages SPX→CPX")


# what keeping our refusal drain through an upgrade that rewords its summary would need
REWORDED = (
    "a reworded summary (an upgrade) rewrites our refusal drain once and restarts its time: keeping it needs "
    "the baseline the drain was written against, which the drain does not record"
)


@pytest.mark.xfail(
    strict=True,
    reason=REWORDED,
)
def test_our_refusal_drain_in_older_words_is_kept_its_time_too():
    """An upgrade rewords the summary (a memory mode in it): the drain for the same refusal, for
    the same reading, with the same remedy, stays as it is: a rewrite would restart its time."""
    state, first = _drained_for_refusal(SPX, CPX)
    state, drained = _reworded(state, _older_words(first.body["reason"]))

    action = decide(outcome_for(state), drained, state, SLURM, NOW, nonce="ef01")

    assert action.kind == Do.HOLD, action
    assert action.exit_code == exitcode.PROTOCOL


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"remedy": COMMAND_REMEDY}, "the remedy changed: the drain must say the new one"),
        ({"cause": "busy"}, "our drain for busy must now say what is wrong"),
        ({"fingerprint": None}, "a drain recovered from its reason alone: no fingerprint to match"),
        ({"fingerprint": "f" * 64}, "our drain for another reading"),
    ],
)
def test_our_drain_in_other_words_is_redrained_unless_it_is_for_this_very_refusal(change, why):
    state, first = _drained_for_refusal(SPX, CPX)
    refusal = state["refusal"]
    assert refusal is not None
    remedy = change.pop("remedy", None)
    if remedy is not None:
        state = {**state, "refusal": {**refusal, "remedy": remedy}}
    state, drained = _reworded(state, _older_words(first.body["reason"]), **change)

    action = decide(outcome_for(state), drained, state, SLURM, NOW, nonce="ef01")

    assert action.kind == Do.DRAIN, why
    assert text_of(action.body["reason"]).endswith(remedy or SLURM_REMEDY)
    # then it says it: the next run keeps it
    state = settle(state, action, NOW, settings=SLURM)
    again = view("IDLE", "DRAIN", reason=action.body["reason"], gres="gpu:mi300x:8")
    assert decide(outcome_for(state), again, state, SLURM, NOW).kind == Do.HOLD


def test_without_a_baseline_our_refusal_drain_follows_the_controllers_gres():
    """With no baseline the summary is against the controller's GRES, which someone may change
    without the reading changing: word for word then."""
    state, first = _drained_for_refusal(None, CPX)
    state, drained = _reworded(state, text_of(first.body["reason"]).replace("controller refused", "controller refused, was"))

    action = decide(outcome_for(state), drained, state, SLURM, NOW, nonce="ef01")

    assert action.kind == Do.DRAIN


def test_a_refusal_drain_whose_remedy_is_cut_off_is_compared_word_for_word_and_settles():
    long = f"{SLURM_REMEDY}, {'then check sinfo -R on every node of the partition, ' * 4}and run spurinv refresh"
    state, first = _drained_for_refusal(SPX, CPX, remedy=long)
    text = text_of(first.body["reason"])
    assert text.endswith("…")
    assert long not in text
    older, drained = _reworded(state, _older_words(first.body["reason"]))

    action = decide(outcome_for(older), drained, older, SLURM, NOW, nonce="ef01")
    assert action.kind == Do.DRAIN  # the remedy does not show: only the words can tell

    # as this version words it, it stays
    assert decide(outcome_for(state), view("IDLE", "DRAIN", reason=first.body["reason"]), state, SLURM, NOW).kind == Do.HOLD


@pytest.mark.xfail(
    strict=True,
    reason=REWORDED,
)
def test_a_refusal_drain_in_the_old_wording_is_not_rewritten_after_an_upgrade(cli, built, tmp_path, monkeypatch):
    """Through the CLI and a stand-in scontrol: the drain that says the same refusal in the words
    before the NPS summary is not rewritten (no update), and keeps its time."""
    from scontrolfake import Slurm

    def _refresh(*extra: Any) -> tuple[int, dict[str, Any]]:
        result = cli("refresh", "--state", lab.state, "--config", lab.config, "--json", *extra)
        return result.code, result.json()

    lab = Slurm(tmp_path, refuse_gres=True)
    lab.update(gres="gpu:mi300x:64")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    for _ in range(2):
        assert _refresh("--root", built("mi300x-cpx"))[0] == exitcode.OK
    _refresh("--root", built("mi300x-spx-nps4"))
    code, document = _refresh("--root", built("mi300x-spx-nps4"))
    assert code == exitcode.PROTOCOL, document
    new = lab.node["reason"]
    assert "CPX/NPS1→SPX/NPS4" in new
    # what the code before the merge wrote for the same switch (its summary had no memory mode)
    old_text = new.split("] ", 1)[1].replace("CPX/NPS1→SPX/NPS4", "CPX→SPX")
    old = reason_for("n1", new[len("spurinv: [") :][:4], old_text)
    saved = json.loads(lab.state.read_text())
    saved["drain"]["reason"] = old
    lab.state.write_text(json.dumps(saved))
    extra = json.loads(lab.node["extra"])
    extra["spurinv"]["drain"].update(reason=old, id=old[len("spurinv: [") :][:8])
    lab.update(reason=old, extra=json.dumps(extra))
    before = len(lab.calls())

    code, document = _refresh("--root", built("mi300x-spx-nps4"))

    assert code == exitcode.PROTOCOL, document
    assert "drain" not in [step["action"] for step in document["steps"]], document["steps"]
    assert [call for call in lab.calls()[before:] if call[:1] == ["update"]] == []
    assert lab.node["reason"] == old


# --- review: our refusal drain after the baseline was replaced ----------------------------------------

EIGHT = inventory(packages(8))
SEVEN = inventory(packages(7))
SIX = inventory(packages(6))


def _reading_twice(state: State, inv, when: int) -> State:
    return new_state(**with_reading(with_reading(state, reading(inv, when)), reading(inv, when + 60)))


def test_our_refusal_drain_is_rewritten_when_the_baseline_it_was_written_against_was_replaced():
    """A GPU drops (8→7): refused, drained "controller refused mi300x 8→7". Another drops (6),
    that registers (baseline 6) but the lift of our drain never lands (the controller went
    away). The GPU comes back (7): refused again, for the same reading's fingerprint and remedy.
    The drain must now say 6→7, what the controller holds against what the node has; it kept
    saying 8→7, a GRES the controller has not listed since."""
    state = _reading_twice(new_state(baseline=new_baseline(EIGHT, at(0), "registered")), SEVEN, 0)
    node = node_view(gres="gpu:mi300x:8")
    register = decide(outcome_of(state), node, state, SLURM, at(120))
    assert register.kind == Do.REGISTER
    state = settle(state, register, at(120), applied=False, error="2072 Invalid gres", settings=SLURM, remedy=SLURM_REMEDY)
    drain = decide(outcome_of(state), node, state, SLURM, at(120))
    assert drain.kind == Do.DRAIN
    assert "mi300x 8→7" in drain.body["reason"]
    state = settle(state, drain, at(120), settings=SLURM)
    node = expected_view(node, drain)
    assert ours(node, state)

    # the second GPU goes: registered as 6, our drain not lifted (the resume never arrived)
    state = _reading_twice(state, SIX, 1000)
    register = decide(outcome_of(state), node, state, SLURM, at(1200))
    assert register.kind == Do.REGISTER
    state = settle(state, register, at(1200), settings=SLURM)
    node = replace(node, gres="gpu:mi300x:6")
    assert state["baseline"] is not None
    assert state["refusal"] is None
    assert ours(node, state)

    # it comes back: 7 again, refused again (the backoff of the first refusal long over)
    state = _reading_twice(state, SEVEN, 100_000)
    register = decide(outcome_of(state), node, state, SLURM, at(100_200))
    assert register.kind == Do.REGISTER
    state = settle(state, register, at(100_200), applied=False, error="2072 Invalid gres", settings=SLURM, remedy=SLURM_REMEDY)
    after = decide(outcome_of(state), node, state, SLURM, at(100_200))
    assert after.kind == Do.DRAIN, (after.kind, node.reason)
    assert "mi300x 6→7" in after.body["reason"]


def test_a_full_run_rewrites_our_refusal_drain_once_the_baseline_moved(cli, built, tmp_path):
    """The CLI against the fault server: SPX (8) adopted; CPX (64) refused and drained "8 GPUs
    SPX→CPX …; mi300x 8→64"; DPX (16) registers, but the lift of our drain that follows fails
    (a 500); CPX again is refused against the DPX baseline. The drain must say what this
    refusal is (DPX→CPX, 16→64, as the run's own register step says), not 8→64 with the
    controller listing 16. Passes before 04c3b7c6 (word for word)."""
    from faultserver import FaultServer, Gateway, Late, Reply

    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    config = tmp_path / "c.toml"
    with FaultServer(gateway=gateway) as server:
        config.write_text(
            f'[node]\nname = "n1"\n[controller]\nurl = "{server.url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
            "[policy]\nconfirm_interval = 0\n"
        )
        config.chmod(0o600)

        def run(root: str) -> int:
            return cli("refresh", "--root", built(root), "--state", state, "--config", config, "--ignore-backoff").code

        for root in ("mi300x-spx", "mi300x-spx", "mi300x-cpx", "mi300x-cpx"):
            run(root)
        node = gateway.nodes["n1"]
        assert "mi300x 8→64" in node["reason"]
        gateway.gres_policy = "any"
        run("mi300x-dpx")
        # the registration applies (its GRES, then its record), the lift after it is answered 500
        server.script("POST", server.node_path("n1"), Late(0), Late(0), Reply(500, {"errors": [{"error": "boom"}]}))
        run("mi300x-dpx")
        server.unscript()
        assert node["gres"] == "gpu:mi300x:16"
        assert "mi300x 8→64" in node["reason"]  # our drain is still on
        gateway.gres_policy = "slurm"
        codes = [run(root) for root in ("mi300x-cpx", "mi300x-cpx")]

    assert codes == [exitcode.OK, exitcode.PROTOCOL]  # a first sighting, then the refusal

    assert "DPX→CPX" in node["reason"], node["reason"]
    assert "mi300x 16→64" in node["reason"], node["reason"]
