"""Policy behaviour the table in test_policy.py left unpinned (mutation survivors, issue #16).

Each test fails for a change of behaviour a mutation run showed no other fast test noticed: the
reason length cap, the backoff sequence (with a configured ``backoff_initial``), the exit status
recorded for a failed discovery, the settle step for every action, and which drain a FORGET_DRAIN
reports. See docs/mutation.md.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import at, inventory, packages, reading
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spurinv import exitcode
from spurinv.classify import Kind, classify
from spurinv.config import Config
from spurinv.nodeview import NodeView, parse_gres
from spurinv.ownership import MAX_REASON, PREFIX, extra_fingerprint, reason_id
from spurinv.policy import (
    Action,
    Do,
    Settings,
    contacted,
    decide,
    drain_reason,
    expected_view,
    forget_stale_refusal,
    register_body,
    settle,
    with_backoff,
)
from spurinv.state import Backoff, Baseline, Drain, Intent, Refusal, State

SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))
NONE = inventory([], pci=[])
SLURM = Settings(observe=False)
NOW = at(600)


def view(state="IDLE", *flags, reason="", gres="gpu:mi300x:8", cpus=0, memory=0, used="gpu:mi300x:0(IDX:N/A)", extra=None):
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
    state = State(baseline=Baseline(inventory=baseline, since=at(0), source="registered") if baseline else None)
    state = state.record(reading(current, 0)).record(reading(current, 60))
    return state.model_copy(update=update)


def outcome_of(state: State):
    previous = state.readings[-2] if len(state.readings) > 1 else None
    return classify(state.baseline.inventory if state.baseline else None, previous, state.readings[-1])


# ------------------------------------------------------------------------ the reason length cap


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


@settings(max_examples=300)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=600), st.sampled_from(["n1", "gpu-07"]))
def test_a_drain_reason_is_always_one_line_within_the_cap_and_ours(text, node):
    reason = drain_reason(text, node, "3f9a")

    assert len(reason) <= MAX_REASON
    assert reason.startswith(f"{PREFIX} [3f9a")
    assert "\n" not in reason
    assert reason == " ".join(reason.split())
    assert reason_id(reason, node) == reason[HEAD - 10 : HEAD - 2]  # carries a valid id for its node
    words = " ".join(text.split())
    if len(words) <= MAX_REASON - HEAD:
        assert reason[HEAD:].strip() == words  # nothing is cut that fits


def test_a_busy_drain_with_a_huge_diff_stays_within_the_cap():
    many = inventory(packages(64, "CPX", per=8))  # 512 devices, every package changed
    state = confirmed(SPX, many)

    action = decide(outcome_of(state), view("MIXED", cpus=2, used="gpu:mi300x:2(IDX:0-1)"), state, SLURM, NOW)

    assert action.kind == Do.DRAIN
    assert len(action.body["reason"]) <= MAX_REASON


# ------------------------------------------------------------------------------------ backoff


def _refused_registration(state: State, policy: Settings, now) -> State:
    action = decide(outcome_of(state), view(), state, policy, now)
    assert action.kind == Do.REGISTER
    return settle(state, action, now, applied=False, error="2072 Invalid gres", settings=policy)


def test_a_refused_registration_backs_off_by_the_configured_initial_delay():
    policy = Settings(observe=False, backoff_initial=7, backoff_max=100)

    state = _refused_registration(confirmed(SPX, CPX), policy, NOW)

    assert state.backoff.next_attempt - NOW == timedelta(seconds=7)
    assert (state.backoff.kind, state.backoff.failures) == ("refused", 1)
    assert state.refusal.fingerprint == CPX.fingerprint
    assert state.baseline.inventory.fingerprint == SPX.fingerprint


def test_refused_registrations_double_the_delay_up_to_the_maximum():
    policy = Settings(observe=False, backoff_initial=10, backoff_max=100)
    state = confirmed(SPX, CPX)
    delays = []
    now = NOW
    for _ in range(6):
        state = _refused_registration(state.model_copy(update={"refusal": None}), policy, now)
        delays.append(int((state.backoff.next_attempt - now).total_seconds()))
        now = state.backoff.next_attempt

    assert delays == [10, 20, 40, 80, 100, 100]


@pytest.mark.parametrize(("kind", "first"), [("unreachable", 5), ("refused", 5), ("auth", 20)])
def test_controller_errors_back_off_from_the_configured_initial_delay(kind, first):
    policy = Settings(observe=False, backoff_initial=5, backoff_max=10_000)

    once = with_backoff(State(), kind, "boom", policy, NOW)
    twice = with_backoff(once, kind, "boom", policy, NOW)

    assert once.backoff.next_attempt - NOW == timedelta(seconds=first)
    assert twice.backoff.next_attempt - NOW == timedelta(seconds=2 * first)
    assert (once.backoff.failures, twice.backoff.failures) == (1, 2)
    assert twice.controller_errors == 2


def test_a_backoff_ends_exactly_at_its_next_attempt():
    backoff = Backoff(kind="unreachable", failures=1, next_attempt=NOW, error="x")
    state = confirmed(SPX, CPX, backoff=backoff)

    just_before = decide(outcome_of(state), None, state, SLURM, NOW - timedelta(seconds=1))
    at_the_time = decide(outcome_of(state), None, state, SLURM, NOW)

    assert just_before.kind == Do.BACKOFF
    assert just_before.exit_code == exitcode.TEMPFAIL
    assert at_the_time.kind == Do.READ_VIEW


def test_a_refusal_backoff_survives_contact_and_a_transport_backoff_does_not():
    refused = Backoff(kind="refused", failures=1, next_attempt=at(9999), error="2072")
    auth = Backoff(kind="auth", failures=1, next_attempt=at(9999), error="401")

    assert contacted(State(backoff=refused)).backoff == refused
    assert contacted(State(backoff=auth)).backoff is None
    assert contacted(State()).backoff is None


def test_the_policy_defaults_are_the_documented_configuration_defaults():
    """settle() falls back to Settings(observe=False) when given none: the same bounds as the config."""
    documented = Config().policy

    assert (SLURM.backoff_initial, SLURM.backoff_max) == (documented.backoff_initial, documented.backoff_max)
    assert SLURM.drain_on_suspicious == documented.drain_on_suspicious


def test_a_refusal_records_the_controllers_own_words():
    state = confirmed(SPX, CPX)
    action = decide(outcome_of(state), view(), state, SLURM, NOW)

    refused = settle(state, action, NOW, applied=False, error="2072 Invalid gres", settings=SLURM)
    unexplained = settle(state, action, NOW, applied=False, settings=SLURM)

    assert refused.refusal.error == "2072 Invalid gres"
    assert refused.backoff.error == "2072 Invalid gres"
    assert unexplained.refusal.error  # never empty


def test_actions_are_immutable():
    action = Action(kind=Do.NONE, reason="x")

    with pytest.raises(ValidationError):
        action.kind = Do.DRAIN  # type: ignore[misc]


def test_the_policy_settings_are_immutable():
    """One Settings serves every step of a run: no step can change the bounds the next one reads."""
    policy = Settings(observe=False, backoff_initial=7)

    with pytest.raises(ValidationError):
        policy.backoff_initial = 0  # type: ignore[misc]
    assert policy.backoff_initial == 7


# ------------------------------------------------------- a refusal the node no longer needs


def _refused(backoff_kind: str = "refused") -> State:
    """CPX confirmed, its registration refused, and a backoff still running."""
    refusal = Refusal(fingerprint=CPX.fingerprint, at=at(60), error="2072 Invalid gres")
    backoff = Backoff(kind=backoff_kind, failures=3, next_attempt=at(99_999), error="2072 Invalid gres")
    return confirmed(SPX, CPX, refusal=refusal, backoff=backoff)


def test_back_at_the_baseline_a_refusal_and_its_backoff_are_forgotten_so_the_change_is_tried_at_once_next_time():
    reverted = _refused().record(reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))
    again = forgotten.record(reading(CPX, 180)).record(reading(CPX, 240))

    assert (forgotten.refusal, forgotten.backoff) == (None, None)
    assert decide(outcome_of(again), None, again, SLURM, at(300)).kind == Do.READ_VIEW  # not held by the old backoff
    assert decide(outcome_of(again), view(), again, SLURM, at(300)).kind == Do.REGISTER  # not drained as refused


def test_without_forgetting_the_same_change_would_wait_for_the_old_backoff():
    """The contrast to the test above: what the old refusal does when it is kept."""
    kept = _refused().record(reading(SPX, 120)).record(reading(CPX, 180)).record(reading(CPX, 240))

    assert decide(outcome_of(kept), None, kept, SLURM, at(300)).kind == Do.READ_VIEW  # the look goes ahead
    assert decide(outcome_of(kept), view(), kept, SLURM, at(300)).kind == Do.DRAIN  # drained as refused, not re-sent


@pytest.mark.parametrize("kind", ["unreachable", "auth"])
def test_back_at_the_baseline_a_transport_backoff_is_kept_and_still_blocks_contact(kind):
    reverted = _refused(kind).record(reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))

    assert forgotten.refusal is None
    assert forgotten.backoff == reverted.backoff
    again = forgotten.record(reading(CPX, 180)).record(reading(CPX, 240))
    assert decide(outcome_of(again), None, again, SLURM, at(300)).kind == Do.BACKOFF


@pytest.mark.parametrize("left", ["refusal", "backoff"])
def test_a_refusal_or_a_refused_backoff_alone_is_forgotten_too(left):
    gone = "backoff" if left == "refusal" else "refusal"
    reverted = _refused().model_copy(update={gone: None}).record(reading(SPX, 120))

    forgotten = forget_stale_refusal(reverted, outcome_of(reverted))

    assert (forgotten.refusal, forgotten.backoff) == (None, None)


def test_a_refusal_is_kept_while_the_node_still_differs_from_its_baseline():
    state = _refused()  # CPX confirmed twice: the refused inventory is still there

    assert forget_stale_refusal(state, outcome_of(state)) == state
    pending = state.record(reading(NONE, 120))  # something else, seen once
    assert forget_stale_refusal(pending, outcome_of(pending)) == pending


@pytest.mark.parametrize("backoff", [None, Backoff(kind="auth", failures=1, next_attempt=at(99_999), error="401")])
def test_back_at_the_baseline_with_nothing_refused_nothing_changes(backoff):
    state = confirmed(SPX, SPX, backoff=backoff)

    assert forget_stale_refusal(state, outcome_of(state)) == state


# ------------------------------------------------------------------ outcomes and exit statuses


def test_a_failed_discovery_does_nothing_and_says_ioerr():
    state = State(baseline=Baseline(inventory=SPX, since=at(0), source="registered"))
    state = state.record(reading(SPX, 0)).record(reading(None, 60))
    outcome = outcome_of(state)
    assert outcome.kind == Kind.DISCOVERY_FAILED

    for node in (None, view(), view("MIXED", cpus=2)):
        action = decide(outcome, node, state, SLURM, NOW)
        assert (action.kind, action.exit_code) == (Do.NONE, exitcode.IOERR)
        assert action.body is None


def test_a_pending_change_does_nothing_and_exits_zero():
    state = State(baseline=Baseline(inventory=SPX, since=at(0), source="registered")).record(reading(CPX, 60))

    action = decide(outcome_of(state), view(), state, SLURM, NOW)

    assert (action.kind, action.exit_code, action.body) == (Do.NONE, exitcode.OK, None)


@pytest.mark.parametrize("observe", [True, False])
def test_a_suspicious_reading_is_held_with_its_release(observe):
    state = confirmed(SPX, NONE)
    outcome = outcome_of(state)

    action = decide(outcome, None, state, Settings(observe=observe), NOW)

    assert action.kind == Do.HOLD
    assert outcome.release in action.reason
    assert action.exit_code == exitcode.OK


def test_observe_mode_observes_a_confirmed_change_and_settle_makes_it_the_observed_baseline():
    state = confirmed(SPX, CPX)

    action = decide(outcome_of(state), None, state, Settings(observe=True), NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.OBSERVE
    assert outcome_of(state).diff.summary() in action.reason  # what would change, against the baseline
    assert "first inventory" not in action.reason
    assert after.baseline.inventory.fingerprint == CPX.fingerprint
    assert after.baseline.source == "observed"


def test_observe_mode_with_no_baseline_still_records_the_first_inventory():
    state = confirmed(None, SPX)

    action = decide(outcome_of(state), None, state, Settings(observe=True), NOW)

    assert action.kind == Do.OBSERVE
    assert f"first inventory: {SPX.summary()}" in action.reason  # no baseline to compare with: what it is
    assert settle(state, action, NOW).baseline.inventory == SPX


# --------------------------------------------------------------------------------- settle


def test_adopting_takes_the_reading_and_clears_what_it_settles():
    state = confirmed(None, SPX, refusal=Refusal(fingerprint="f", at=at(1), error="x"), accepted="f")

    action = decide(outcome_of(state), view(), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.ADOPT
    assert (after.baseline.inventory, after.baseline.source, after.baseline.since) == (SPX, "adopted", NOW)
    assert (after.refusal, after.accepted) == (None, None)


def test_an_applied_registration_clears_refusal_and_backoff():
    backoff = Backoff(kind="refused", failures=2, next_attempt=at(1), error="x")
    state = confirmed(SPX, CPX, refusal=Refusal(fingerprint=CPX.fingerprint, at=at(1), error="x"), backoff=backoff)
    reason = decide(outcome_of(state), view(), state, SLURM, NOW).body["reason"]  # the drain after the refusal
    drained = view("IDLE", "DRAIN", reason=reason)
    state = state.model_copy(update={"drain": Drain(reason=reason, set_at=at(1), cause="refused")})

    action = decide(outcome_of(state), drained, state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.REGISTER
    assert after.baseline.inventory.fingerprint == CPX.fingerprint
    assert (after.baseline.source, after.baseline.since) == ("registered", NOW)
    assert (after.refusal, after.backoff) == (None, None)
    assert after.drain is not None  # lifted by the RESUME that follows, not by the registration


def test_a_cpu_only_job_does_not_make_a_gpu_change_busy():
    state = confirmed(SPX, CPX)

    action = decide(outcome_of(state), view("MIXED", cpus=2), state, SLURM, NOW)

    assert action.kind == Do.REGISTER


def test_a_drain_records_its_reason_cause_and_fingerprint():
    state = confirmed(SPX, CPX)
    action = decide(outcome_of(state), view("MIXED", cpus=2, used="gpu:mi300x:2(IDX:0-1)"), state, SLURM, NOW)

    after = settle(state, action, NOW)

    assert after.drain.reason == action.body["reason"]
    assert (after.drain.cause, after.drain.set_at, after.drain.fingerprint) == ("busy", NOW, CPX.fingerprint)


def test_a_suspicious_drain_records_its_cause():
    state = confirmed(SPX, NONE)
    action = decide(outcome_of(state), view(), state, Settings(observe=False, drain_on_suspicious=True), NOW)

    after = settle(state, action, NOW)

    assert after.drain.cause == "suspicious"
    assert after.drain.reason == action.body["reason"]


def test_a_resume_forgets_our_drain_and_any_backoff():
    backoff = Backoff(kind="refused", failures=1, next_attempt=at(1), error="x")
    state = confirmed(SPX, SPX, drain=Drain(reason="spurinv: x", set_at=at(1), cause="busy"), backoff=backoff)

    action = decide(outcome_of(state), view("IDLE", "DRAIN", reason="spurinv: x"), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.RESUME
    assert (after.drain, after.backoff) == (None, None)


def test_forget_drain_forgets_only_the_drain():
    backoff = Backoff(kind="refused", failures=1, next_attempt=at(1), error="x")
    state = confirmed(SPX, SPX, drain=Drain(reason="spurinv: x", set_at=at(1), cause="busy"), backoff=backoff)

    action = decide(outcome_of(state), view("IDLE", "DRAIN", reason="NHC: bad ECC"), state, SLURM, NOW)
    after = settle(state, action, NOW)

    assert action.kind == Do.FORGET_DRAIN
    assert after.drain is None
    assert after.backoff == backoff
    assert after.baseline == state.baseline


@pytest.mark.parametrize("kind", [Do.NONE, Do.HOLD, Do.BACKOFF, Do.READ_VIEW])
def test_steps_that_write_nothing_change_nothing(kind):
    state = confirmed(SPX, CPX)

    assert settle(state, Action(kind=kind, reason="x"), NOW) == state


def _write(kind: Do) -> Action:
    body = {"state": ["DRAIN"], "reason": "spurinv: x"} if kind == Do.DRAIN else {"state": ["RESUME"]}
    return Action(kind=kind, reason="x", body=register_body(view(), CPX) if kind == Do.REGISTER else body, cause="busy")


@pytest.mark.parametrize("applied", [True, False])
@pytest.mark.parametrize("kind", [Do.REGISTER, Do.DRAIN, Do.RESUME])
def test_a_writes_outcome_clears_its_write_ahead_intent(kind, applied):
    """Once settle knows how a write ended, the next run must not settle it again from the view."""
    action = _write(kind)
    intent = Intent(kind=kind.value, body=action.body, at=NOW, fingerprint=CPX.fingerprint)
    state = confirmed(SPX, CPX, intent=intent)

    after = settle(state, action, NOW, applied=applied, error=None if applied else "2072", settings=SLURM)

    assert after.intent is None


@pytest.mark.parametrize("kind", [Do.NONE, Do.READ_VIEW, Do.FORGET_DRAIN])
def test_a_step_that_writes_nothing_keeps_an_unsettled_intent(kind):
    intent = Intent(kind="drain", body={"state": ["DRAIN"], "reason": "spurinv: x"}, at=NOW)
    state = confirmed(SPX, CPX, intent=intent)

    assert settle(state, Action(kind=kind, reason="x"), NOW).intent == intent


def test_expected_view_after_drain_and_resume_matches_what_slurm_shows():
    busy = view("MIXED", cpus=2)
    drain = Action(kind=Do.DRAIN, reason="x", body={"state": ["DRAIN"], "reason": "spurinv: y"})

    drained = expected_view(busy, drain)
    twice = expected_view(drained, drain)
    resumed = expected_view(drained, Action(kind=Do.RESUME, reason="x", body={"state": ["RESUME"]}))

    assert (drained.drained, drained.reason, drained.flags) == (True, "spurinv: y", ("DRAIN",))
    assert twice.flags == ("DRAIN",)
    assert not resumed.drained
    assert expected_view(busy, Action(kind=Do.NONE, reason="x")) == busy


# -------------------------------------------------------------------- whose drain is reported


def test_forget_drain_names_the_new_reason_only_when_the_node_is_still_drained():
    """A replaced drain: the report carries the new (someone else's) reason. A lifted drain: it does
    not quote the leftover reason (24.11 keeps it after RESUME), which would read as a live drain."""
    state = confirmed(SPX, SPX, drain=Drain(reason="spurinv: x", set_at=at(1), cause="busy"))
    replaced = view("IDLE", "DRAIN", reason="NHC: bad ECC")
    lifted = view("IDLE", reason="spurinv: stale reason kept after resume")

    on_replaced = decide(outcome_of(state), replaced, state, SLURM, NOW)
    on_lifted = decide(outcome_of(state), lifted, state, SLURM, NOW)

    assert (on_replaced.kind, on_lifted.kind) == (Do.FORGET_DRAIN, Do.FORGET_DRAIN)
    assert "NHC: bad ECC" in on_replaced.reason
    assert "stale reason kept" not in on_lifted.reason


def test_a_busy_hold_under_our_drain_says_what_is_allocated():
    state = confirmed(SPX, CPX, drain=Drain(reason="spurinv: x", set_at=at(1), cause="busy"))
    node = view("MIXED", "DRAIN", reason="spurinv: x", cpus=3, memory=2048, used="gpu:mi300x:2(IDX:0-1)")

    action = decide(outcome_of(state), node, state, SLURM, NOW)

    assert action.kind == Do.HOLD
    assert node.busy_text() in action.reason
    assert "gpu:mi300x:2(IDX:0-1)" in node.busy_text()


# --------------------------------------------------------------------------- register body


@settings(max_examples=100)
@given(
    extra=st.one_of(st.none(), st.just(""), st.dictionaries(st.sampled_from(["rack", "owner", "spurinv"]), st.text(max_size=5)))
)
def test_the_register_body_records_the_fingerprint_readably(extra):
    import json

    current = None if extra is None else (extra if isinstance(extra, str) else json.dumps(extra))
    body = register_body(view(extra=current), CPX)

    if extra is None:  # the controller has no extra (spur, Slurm 22.05): nothing to write
        assert "extra" not in body
        return
    if isinstance(extra, dict) and "spurinv" in extra:  # the admin's own text under our key: theirs
        assert "extra" not in body
        return
    assert extra_fingerprint(body["extra"]) == CPX.fingerprint
    assert [(g.name, g.type, g.count) for g in parse_gres(body["gres"])] == [("gpu", "mi300x", 64)]
