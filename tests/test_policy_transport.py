"""What the policy takes from the way the node re-registers: the remedy a refusal
names in our drain reason, and which jobs hold a re-registration off."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, asdict, replace
from datetime import timedelta

import pytest
from factories import at, inventory, new_baseline, new_drain, new_intent, new_state, packages, reading, with_reading
from hypothesis import given
from hypothesis import strategies as st

from spurinv.controller.nodeview import NodeView
from spurinv.controller.ownership import PREFIX
from spurinv.controller.transport import COMMAND_REMEDY, SLURM_REMEDY, SPUR_REMEDY
from spurinv.inventory.classify import classify
from spurinv.policy import Do, Settings, decide, expected_view, ours, settle
from spurinv.state.file import State

SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))
NOW = at(600)
DIRECT = Settings(observe=False)
COMMAND = Settings(observe=False, any_job_busy=True)


def view(state="IDLE", *flags, reason="", cpus=0, used="gpu:mi300x:0(IDX:N/A)") -> NodeView:
    return NodeView(
        name="n1", dialect="slurm-v0.0.39+", base=state, flags=flags, reason=reason,
        alloc_cpus=cpus, gres="gpu:mi300x:8", gres_used=used,
    )  # fmt: skip


def confirmed() -> State:
    state = new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered"))
    return with_reading(with_reading(state, reading(CPX, 0)), reading(CPX, 60))


def outcome_for(state: State):
    return classify(state["baseline"]["inventory"] if state["baseline"] else None, state["readings"][-2], state["readings"][-1])


def decide_for(state: State, seen: NodeView, settings: Settings = DIRECT):
    return decide(outcome_for(state), seen, state, settings, NOW)


def refused(remedy: str | None) -> State:
    state = confirmed()
    action = decide_for(state, view())
    assert action.kind == Do.REGISTER
    return settle(state, action, NOW, applied=False, error="not applied", settings=DIRECT, remedy=remedy)


def test_a_refusal_keeps_the_remedy_of_the_transport_that_was_refused():
    assert refused(COMMAND_REMEDY)["refusal"]["remedy"] == COMMAND_REMEDY


def test_the_drain_after_a_refusal_names_that_transports_remedy():
    for remedy in (SLURM_REMEDY, COMMAND_REMEDY, SPUR_REMEDY):
        action = decide_for(refused(remedy), view())

        assert action.kind == Do.DRAIN
        assert action.cause == "refused"
        assert action.body["reason"].startswith(PREFIX)
        assert action.body["reason"].endswith(remedy)


def test_a_refusal_saved_without_a_remedy_was_slurms():
    action = decide_for(refused(None), view())

    assert action.body["reason"].endswith(SLURM_REMEDY)


def refused_and_drained(remedy: str | None) -> tuple[State, NodeView]:
    """A refusal, then the drain the policy asks for after it, as the controller shows it."""
    state = refused(remedy)
    drain = decide_for(state, view())
    assert drain.kind == Do.DRAIN
    state = settle(state, drain, NOW)
    return state, view("IDLE", "DRAIN", reason=drain.body["reason"])


def test_while_backing_off_from_a_refusal_the_hold_names_its_remedy():
    state, seen = refused_and_drained(SPUR_REMEDY)

    action = decide_for(state, seen)

    assert action.kind == Do.HOLD
    assert SPUR_REMEDY in action.reason
    assert SLURM_REMEDY not in action.reason
    assert state["backoff"]["next_attempt"] - NOW == timedelta(seconds=DIRECT.backoff_initial)


def test_once_the_backoff_is_over_the_refused_registration_is_retried():
    state, seen = refused_and_drained(COMMAND_REMEDY)

    action = decide(outcome_for(state), seen, state, DIRECT, NOW + timedelta(seconds=DIRECT.backoff_initial))

    assert action.kind == Do.REGISTER


def test_our_busy_drain_is_reworded_when_the_registration_is_then_refused():
    """It said "re-registers when idle" on an idle node waiting for an operator."""
    state: State = {
        **refused(COMMAND_REMEDY),
        "drain": new_drain(reason="spurinv: mi300x 8→64; re-registers when idle", set_at=NOW, cause="busy"),
    }
    seen = view("IDLE", "DRAIN", reason="spurinv: mi300x 8→64; re-registers when idle")

    action = decide_for(state, seen)
    after = settle(state, action, NOW)

    assert (action.kind, action.cause) == (Do.DRAIN, "refused")
    assert action.body["reason"].endswith(COMMAND_REMEDY)
    assert after["drain"]["reason"] == action.body["reason"]
    assert decide_for(after, view("IDLE", "DRAIN", reason=after["drain"]["reason"])).kind == Do.HOLD


def test_an_operators_drain_is_never_reworded_after_a_refusal():
    state = refused(COMMAND_REMEDY)

    action = decide_for(state, view("IDLE", "DRAIN", reason="NHC: bad ECC"))

    assert action.kind != Do.DRAIN


def test_with_a_register_command_a_cpu_only_job_holds_the_change_off_with_a_busy_drain():
    """A register command may restart the node's agent: any job counts (docs/busy.md)."""
    state = confirmed()

    direct = decide_for(state, view("MIXED", cpus=2), DIRECT)
    command = decide_for(state, view("MIXED", cpus=2), COMMAND)

    assert direct.kind == Do.REGISTER  # a GRES update does not touch a CPU job
    assert (command.kind, command.cause) == (Do.DRAIN, "busy")


def test_with_a_register_command_our_busy_drain_waits_for_every_job_then_registers():
    state: State = {
        **confirmed(),
        "drain": new_drain(reason="spurinv: waiting", set_at=NOW, cause="busy", fingerprint=CPX["fingerprint"]),
    }

    waiting = decide_for(state, view("MIXED", "DRAIN", reason="spurinv: waiting", cpus=2), COMMAND)
    idle = decide_for(state, view("IDLE", "DRAIN", reason="spurinv: waiting"), COMMAND)

    assert waiting.kind == Do.HOLD
    assert idle.kind == Do.REGISTER


@given(cpus=st.integers(0, 4), gpus=st.integers(0, 8), any_job=st.booleans())
def test_a_register_happens_only_on_a_node_free_of_what_the_settings_count(cpus, gpus, any_job):
    state = confirmed()
    base = "IDLE" if cpus == gpus == 0 else "MIXED"
    seen = view(base, cpus=cpus, used=f"gpu:mi300x:{gpus}(IDX:0-{gpus - 1})" if gpus else "gpu:mi300x:0(IDX:N/A)")

    action = decide_for(state, seen, Settings(observe=False, any_job_busy=any_job))

    busy = (cpus > 0 or gpus > 0) if any_job else gpus > 0
    assert (action.kind == Do.REGISTER) == (not busy)
    assert (action.kind == Do.DRAIN) == busy


def test_a_reworded_drain_stays_ours_until_the_controller_is_read_again():
    """The view after our write must not keep the old drain's reason time: with it our re-worded
    drain looked like someone else's, was forgotten, and stranded the node."""
    old_time = int(at(0).timestamp())
    state: State = {
        **refused(COMMAND_REMEDY),
        "drain": new_drain(reason="spurinv: busy", set_at=at(0), cause="busy", reason_changed_at=old_time),
    }
    seen = replace(view("IDLE", "DRAIN", reason="spurinv: busy"), reason_changed_at=old_time)
    action = decide_for(state, seen)
    assert action.kind == Do.DRAIN

    after = settle(state, action, NOW)

    assert ours(expected_view(seen, action), after)
    assert decide_for(after, expected_view(seen, action)).kind == Do.HOLD


def test_a_change_seen_once_never_acts_and_says_it_waits():
    """One reading never acts, whatever else makes the policy read the node (an unsettled write
    here), and the run says the change waits, not "unchanged"."""
    nps = inventory(packages(8, "SPX", memory_mode="NPS4"))
    state = with_reading(confirmed(), reading(nps, 120))  # a different inventory, seen once
    state = {**state, "intent": new_intent(kind="drain", body={"state": ["DRAIN"], "reason": "x"}, at=at(30))}
    outcome = outcome_for(state)

    for seen in (None, view()):
        action = decide(outcome, seen, state, DIRECT, NOW)

        assert (action.kind, action.body) == (Do.NONE, None)
        assert action.reason == outcome["reason"]


def test_an_unchanged_node_with_an_unsettled_intent_needs_nothing_once_the_node_is_read():
    state = new_state(baseline=new_baseline(inventory=SPX, since=at(0), source="registered"))
    state = with_reading(with_reading(state, reading(SPX, 0)), reading(SPX, 60))
    state = {**state, "intent": new_intent(kind="register", body={"gres": "gpu:mi300x:8"}, at=at(30))}

    action = decide_for(state, view())

    assert (action.kind, action.body, action.exit_code) == (Do.NONE, None, 0)


def test_a_view_of_the_node_is_an_immutable_value():
    """The view a step decided on is the one the next step sees: nothing may change it in between."""
    seen = view()

    with pytest.raises(FrozenInstanceError):
        seen.reason = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError, match="extra_field"):
        NodeView(**asdict(seen), extra_field=1)  # type: ignore[call-arg]
