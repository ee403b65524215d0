"""Lifting our drain: the narrowest write, never over someone else's
state, and the record in ``extra`` retired with it.

Unit tests on ``decide`` and the ownership helpers, then the real full refresh against
``faultserver.Gateway`` (the node of ``test_intent.Node``), including a kill at every point of
the lifting tick.
"""

from __future__ import annotations

import json

import pytest
from factories import new_intent, new_state
from hypothesis import given
from hypothesis import strategies as st
from test_intent import Killed, Node, Points, adopted, busy_drain_scenario, kill_points, settle_after_revert
from test_policy import CPX, NONE, NOW, OUR_REASON, SLURM, SPX, outcome_for, state_for, view  # tests/ is on sys.path

from spurinv import exitcode
from spurinv.controller.ownership import HARMLESS_FLAGS, KEY, amended, lift_blockers, retired_value, stale_drain
from spurinv.policy import DOWN, Do, Settings, decide
from spurinv.state import file as state_file
from spurinv.state.file import State

NOW_TEXT = "2026-12-03T10:00:00Z"
ADMIN = '{"rack": "r2",  "power": 1E5, '


def record_extra(reason: str, node: str = "n1") -> str:
    record = {"node": node, "fingerprint": "f" * 8, "drain": {"id": reason[10:18], "reason": reason, "cause": "busy"}}
    return ADMIN + f'"{KEY}": ' + json.dumps(record) + "}"


# --- never over someone else's state ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "flags"),
    [
        ("DOWN", ()),
        ("IDLE", ("NOT_RESPONDING",)),
        ("IDLE", ("FAIL",)),
        ("IDLE", ("REBOOT_REQUESTED",)),
        ("IDLE", ("INVALID_REG",)),
        ("IDLE", ("POWERING_DOWN",)),
        ("FUTURE", ()),
        ("UNKNOWN", ()),
    ],
)
def test_our_drain_on_a_node_that_is_also_down_or_flagged_is_never_lifted(base, flags):
    """RESUME also clears DOWN and FAIL: a node down for someone else's reason must stay so."""
    state = state_for(SPX, SPX, SPX, drain=True)
    node = view(base, "DRAIN", *flags, reason=OUR_REASON)

    action = decide(outcome_for(state), node, state, SLURM, NOW)

    assert action.kind == Do.HOLD
    assert action.body is None
    assert "+".join(lift_blockers(base, flags)) in action.reason
    assert "not ours to clear" in action.reason


BLOCKED = st.sampled_from([("DOWN", ()), ("IDLE", ("FAIL",)), ("IDLE", ("NOT_RESPONDING",)), ("MIXED", ("FAIL",)),
                           ("DOWN", ("NOT_RESPONDING",)), ("FUTURE", ()), ("IDLE", ("POWERED_DOWN",))])  # fmt: skip
ADMIN_REASONS = st.sampled_from(["", "admin: replacing GPU 3, ticket 42", "Not responding"])


@given(
    blocked=BLOCKED,
    reason=ADMIN_REASONS,
    path=st.sampled_from(["busy", "refused", "suspicious"]),  # the link: tests/test_link.py
)
def test_no_drain_is_ever_sent_over_someone_elses_down_or_fail(blocked, reason, path):
    """A node DOWN or FAIL (no DRAIN flag) for an admin's reason got
    our drain, and our reason over theirs (Slurm keeps one). Every path that drains holds instead."""
    base, flags = blocked
    cpus, used = (2, "gpu:mi300x:2(IDX:0-1)") if path == "busy" else (0, "gpu:mi300x:0(IDX:N/A)")
    node = view(base, *flags, reason=reason, cpus=cpus, used=used)
    policy = SLURM
    if path == "suspicious":
        state, policy = state_for(SPX, NONE, NONE), Settings(observe=False, drain_on_suspicious=True)
    else:
        state = state_for(SPX, CPX, CPX, refusal=path == "refused")

    action = decide(outcome_for(state), node, state, policy, NOW)

    assert action.kind == Do.HOLD, (path, action)
    assert action.body is None
    assert "+".join(lift_blockers(base, flags)) in action.reason
    if path != "suspicious" and {base, *flags} & DOWN:
        # a confirmed change on a DOWN/FAIL node waits for it to be back (75: the next tick retries)
        assert action.exit_code == exitcode.TEMPFAIL
    else:
        assert action.exit_code == (exitcode.PROTOCOL if path == "refused" else exitcode.OK)


def test_the_hold_does_not_quote_our_own_reason_as_someone_elses():
    state = state_for(SPX, SPX, SPX, drain=True)

    action = decide(outcome_for(state), view("DOWN", "DRAIN", reason=OUR_REASON), state, SLURM, NOW)
    other = decide(outcome_for(state), view("DOWN", "DRAIN", reason=OUR_REASON + " : Not responding"), state, SLURM, NOW)

    assert action.kind == Do.HOLD
    assert OUR_REASON not in action.reason
    assert "without a reason of its own" in action.reason
    assert other.kind == Do.HOLD


@pytest.mark.parametrize("flags", [(), ("COMPLETING",), ("RESERVED",), ("MAINTENANCE",)])
def test_our_drain_beside_harmless_flags_is_lifted_with_undrain(flags):
    state = state_for(SPX, SPX, SPX, drain=True)

    action = decide(outcome_for(state), view("IDLE", "DRAIN", *flags, reason=OUR_REASON), state, SLURM, NOW)

    assert action.kind == Do.RESUME
    assert action.body == {"state": ["UNDRAIN"]}


@given(
    st.sampled_from(["IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN", "idle"]),
    st.lists(st.sampled_from([*HARMLESS_FLAGS, "NOT_RESPONDING", "FAIL", "REBOOT_ISSUED", "POWERED_DOWN", "X"]), max_size=4),
)
def test_blockers_are_exactly_the_base_states_and_flags_someone_else_set(base, flags):
    blockers = lift_blockers(base, tuple(flags))

    expected_base = base.upper() not in ("IDLE", "MIXED", "ALLOCATED")
    assert (base.upper() in blockers) == expected_base
    assert [flag for flag in flags if flag not in HARMLESS_FLAGS] == [b for b in blockers if b != base.upper()]


# --- the record follows the lift ------------------------------------------------------------------


def test_the_lift_retires_the_drain_entry_in_the_same_update_and_keeps_the_admins_bytes():
    state = state_for(SPX, SPX, SPX, drain=True)
    extra = record_extra(OUR_REASON)

    action = decide(outcome_for(state), view("IDLE", "DRAIN", reason=OUR_REASON, extra=extra), state, SLURM, NOW)

    assert action.kind == Do.RESUME
    assert action.body["state"] == ["UNDRAIN"]
    assert action.body["extra"].startswith(ADMIN)
    record = json.loads(action.body["extra"])[KEY]
    assert "drain" not in record
    assert record["fingerprint"] == "f" * 8  # the registration record stays
    assert record["lifted"]["at"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("drained", "reason", "stale"),
    [
        (False, "", True),  # resumed (by us, a crash before the record followed, or an operator)
        (True, "NHC: bad ECC", True),  # re-worded by an operator
        (True, OUR_REASON, False),  # still on
        (True, OUR_REASON + " : Not responding", False),  # still ours, amended by slurmctld
    ],
)
def test_a_drain_entry_is_stale_only_when_the_node_no_longer_carries_it(drained, reason, stale):
    assert (stale_drain(record_extra(OUR_REASON), "n1", drained, reason) is not None) == stale


def test_another_nodes_record_is_never_retired():
    extra = record_extra(OUR_REASON, node="n7")

    assert stale_drain(extra, "n1", False, "") is None
    assert retired_value(extra, "n1", None, NOW_TEXT) is None


def test_a_stale_entry_is_retired_with_an_extra_only_update():
    state = state_for(SPX, SPX, SPX)
    extra = record_extra(OUR_REASON)

    action = decide(outcome_for(state), view("IDLE", extra=extra), state, SLURM, NOW)

    assert action.kind == Do.RETIRE
    assert set(action.body) == {"extra"}  # type: ignore[arg-type]  # a write has a body
    assert action.body["extra"].startswith(ADMIN)
    assert "drain" not in json.loads(action.body["extra"])[KEY]


def test_a_retired_entry_says_which_drain_was_lifted_and_when():
    record = {"node": "n1", "fingerprint": "f" * 8, "drain": {"id": "0a1b2c3d", "reason": OUR_REASON, "cause": "busy"}}
    state = state_for(SPX, SPX, SPX)

    action = decide(outcome_for(state), view("IDLE", extra=ADMIN + f'"{KEY}": ' + json.dumps(record) + "}"), state, SLURM, NOW)

    assert action.kind == Do.RETIRE
    assert json.loads(action.body["extra"])[KEY]["lifted"] == {"id": "0a1b2c3d", "at": "2026-12-02T18:10:00Z"}


def test_no_retire_while_a_write_of_ours_is_unsettled():
    state: State = state_for(SPX, SPX, SPX)
    state = {**state, "intent": new_intent(kind="resume", body={"state": ["UNDRAIN"]}, at=NOW)}

    action = decide(outcome_for(state), view("IDLE", extra=record_extra(OUR_REASON)), state, SLURM, NOW)

    assert action.kind != Do.RETIRE


# --- slurmctld's words appended to ours -------------------------------------------------------------


@pytest.mark.parametrize("added", ["Not responding", "reboot issued", "gres/gpu count reported lower than configured (7 < 8)"])
def test_a_reason_slurmctld_appended_to_is_still_ours_and_held_not_forgotten(added):
    """set_node_reason() appends " : <message>" to our reason: still our drain, never stranded
    silently (held and said), never lifted over what Slurm found."""
    state = state_for(SPX, SPX, SPX, drain=True)
    reason = f"{OUR_REASON} : {added}"

    action = decide(outcome_for(state), view("DOWN", "DRAIN", reason=reason), state, SLURM, NOW)

    assert amended(reason, OUR_REASON) == added
    assert action.kind == Do.HOLD
    assert added in action.reason
    assert "State=UNDRAIN" in action.reason


@pytest.mark.parametrize("reason", [OUR_REASON + " : ", OUR_REASON + ": x", "NHC : " + OUR_REASON, OUR_REASON + "x : y"])
def test_other_edits_are_no_amendment(reason):
    assert amended(reason, OUR_REASON) is None


# --- end to end against the fake gateway ----------------------------------------------------------


def drained(node: Node) -> str:
    busy_drain_scenario(node)
    node.tick("cpx")
    assert "DRAIN" in node.controller["state"]
    return node.controller["reason"]


def test_after_the_lift_the_controller_record_says_the_drain_is_gone(tmp_path, built):
    node = adopted(tmp_path, built)
    node.controller["extra"] = '{"rack": "r2",  "power": 1E5}'
    reason = drained(node)
    assert "drain" in json.loads(node.controller["extra"])[KEY]

    actions = settle_after_revert(node)

    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]
    assert node.controller["extra"].startswith('{"rack": "r2",  "power": 1E5,')
    record = json.loads(node.controller["extra"])[KEY]
    assert "drain" not in record
    assert record["lifted"]["id"] == reason[10:18]


def test_a_kill_at_any_point_of_the_lift_leaves_neither_our_drain_nor_a_drain_record(tmp_path, built):
    def before(node: Node) -> None:
        node.controller["extra"] = '{"rack": "r2"}'
        drained(node)
        node.busy(0)

    total = kill_points(lambda: adopted(tmp_path / "count", built), before, "spx")
    assert total > 4
    for kill in range(1, total + 1):
        node = adopted(tmp_path / f"kill-{kill}", built)
        before(node)
        points = Points(kill)
        with pytest.raises(Killed):
            node.tick("spx", points)

        settle_after_revert(node)

        assert "DRAIN" not in node.controller["state"], (kill, points.labels[-1])
        assert "drain" not in json.loads(node.controller["extra"])[KEY], (kill, points.labels[-1])
        assert node.controller["extra"].startswith('{"rack": "r2"')
        assert node.state()["drain"] is None


def test_an_operators_resume_leaves_no_false_drain_record(tmp_path, built):
    node = adopted(tmp_path, built)
    node.controller["extra"] = '{"rack": "r2"}'
    drained(node)
    node.controller["state"].remove("DRAIN")  # the operator resumed it by hand
    node.busy(0)

    actions = [step["action"] for step in node.tick("spx", minutes=61)["steps"]]

    assert "forget-drain" in actions
    assert "retire-record" in actions
    assert "drain" not in json.loads(node.controller["extra"])[KEY]


@pytest.mark.parametrize("flag", ["NOT_RESPONDING", "FAIL", "REBOOT_REQUESTED"])
def test_a_down_or_flagged_node_keeps_its_state_and_our_drain_stays_until_it_is_clear(tmp_path, built, flag):
    node = adopted(tmp_path, built)
    drained(node)
    node.busy(0)
    node.controller["state"].append(flag)

    held = node.tick("spx", minutes=61)

    assert [step["action"] for step in held["steps"]][-1] == "hold"
    assert flag in node.controller["state"]
    assert "DRAIN" in node.controller["state"]
    assert not any(seen.startswith("before POST") for seen in node.labels)

    node.controller["state"].remove(flag)  # Slurm (or the operator) cleared it
    actions = settle_after_revert(node)

    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]


@pytest.mark.parametrize("extra", [True, False], ids=["record in extra", "id in the reason only"])
def test_a_lost_state_still_knows_our_drain_after_slurmctld_appended_to_it(tmp_path, built, extra):
    """No state file, and slurmctld appended " : Not responding" to our reason: the run says the
    drain is ours and why it stays, never lifts it, never treats it as someone else's."""
    import shutil

    node = adopted(tmp_path, built)
    if not extra:
        del node.controller["extra"]
    reason = drained(node)
    node.busy(0)
    node.controller["reason"] = f"{reason} : Not responding"
    node.controller["state"][0] = "DOWN"
    shutil.rmtree(node.state_path.parent)
    node.state_path.parent.mkdir(mode=0o700)

    document = node.tick("spx", minutes=61)

    recovered = [step["reason"] for step in document["steps"] if step["action"] == "recover"]
    assert recovered, document["steps"]
    assert "'Not responding'" in recovered[0]
    for _ in range(3):  # the first reading of a new state is only pending: the next ones decide
        document = node.tick("spx", minutes=61)
        assert document["steps"][-1]["action"] == "hold", document["steps"]
        assert "slurmctld appended 'Not responding'" in document["steps"][-1]["reason"]
    assert node.state()["drain"]["reason"] == reason
    drain = node.state()["drain"]
    assert drain is not None
    assert state_file.drain_skew(drain) is None
    assert node.controller["state"][:2] == ["DOWN", "DRAIN"]
    assert not [label for label in node.labels if label.startswith("before POST")]


# --- our key holding what is not ours ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ['"rack 7"', "42", '{"old": true}', '{"node": 5}', '["a"]', '{"node": "n1", "owner": "ops"}'],
    ids=["text", "number", "other object", "node not a name", "list", "extra members"],
)
def test_an_admins_own_spurinv_key_is_never_overwritten_and_we_say_so(tmp_path, built, value):
    node = adopted(tmp_path, built)
    text = '{"rack": "r2", "spurinv": ' + value + "}"
    node.controller["extra"] = text

    busy_drain_scenario(node)
    document = node.tick("cpx")

    assert "DRAIN" in node.controller["state"]
    assert node.controller["extra"] == text
    drain_step = next(step for step in document["steps"] if step["action"] == "drain")
    assert "not spurinv's record: left as it is" in drain_step["reason"]
    node.busy(0)
    assert "resume" in settle_after_revert(node)  # the id in the reason did the work
    assert node.controller["extra"] == text


def test_another_nodes_record_is_left_and_named(tmp_path, built):
    """A renamed node's record (n7's drain) stays as evidence of n7's drain; ours goes in the id."""
    node = adopted(tmp_path, built)
    text = '{"spurinv": ' + json.dumps({"node": "n7", "drain": {"id": "3f9a0000", "reason": "spurinv: [3f9a0000] x"}}) + "}"
    node.controller["extra"] = text

    busy_drain_scenario(node)
    document = node.tick("cpx")
    node.busy(0)
    actions = settle_after_revert(node)

    assert "for node 'n7'" in next(step["reason"] for step in document["steps"] if step["action"] == "drain")
    assert "resume" in actions
    assert "retire-record" not in actions
    assert node.controller["extra"] == text


# --- a change without a baseline is told against the controller ---------------------------------------


def test_a_wiped_state_tells_the_change_against_the_controllers_gres_not_from_zero(tmp_path, built):
    """After a wipe there is no baseline: the drain's words compare with what the controller
    lists (mi300x 8→64), never "0→64" from nothing."""
    import shutil

    node = adopted(tmp_path, built)
    shutil.rmtree(node.state_path.parent)
    node.state_path.parent.mkdir(mode=0o700)
    node.busy(2)
    node.tick("cpx")
    node.tick("cpx")

    reason = node.controller["reason"]
    assert "DRAIN" in node.controller["state"]
    assert "mi300x 8→64" in reason
    assert "0→" not in reason


# --- orphaned drains and renames ------------------------------------------------------------------


def test_a_drain_of_ours_under_another_node_name_is_noted_never_lifted(tmp_path, built):
    """Renamed n7 → n1: n7's drain (its id and record name n7) is not ours as n1; every run that
    reads the node says so, and nothing lifts it."""
    from spurinv.controller.ownership import reason_for

    node = adopted(tmp_path, built)
    reason = reason_for("n7", "3f9a", "mi300x 8→64; re-registers when idle")
    node.controller["state"].append("DRAIN")
    node.controller["reason"] = reason
    record = {"node": "n7", "drain": {"id": reason[10:18], "reason": reason}}
    node.controller["extra"] = '{"spurinv": ' + json.dumps(record) + "}"

    node.tick("cpx")  # first sighting: no controller read
    document = node.tick("cpx")
    again = node.tick("cpx", minutes=61)

    for run in (document, again):
        notes = [note for note in run["notes"] if "not this node's drain" in note]
        assert notes, run["notes"]
        assert "names node 'n7'" in notes[0]
    assert node.controller["reason"] == reason
    assert "DRAIN" in node.controller["state"]


def test_the_rename_advice_does_not_promise_a_rebuild(tmp_path, built):
    from spurinv.errors import ConfigError
    from spurinv.refresh import check_node

    with pytest.raises(ConfigError) as caught:
        check_node(new_state(node="n7"), "n1", "/s/state.json", from_flag=False)

    assert "rebuilds" not in caught.value.message
    # no drain of ours on record: an UNDRAIN could only lift someone else's
    assert "State=UNDRAIN" not in caught.value.message
    assert "records no drain of spurinv's" in caught.value.message


@pytest.mark.parametrize("from_flag", [True, False], ids=["--node", "node.name"])
def test_the_rename_advice_lifts_only_the_drain_spurinv_set(from_flag):
    """A renamed node's drain of ours is never lifted by spurinv: the advice may lift it by hand,
    but only once the node shows exactly our reason; someone else's drain stays."""
    from spurinv.errors import ConfigError, UsageError
    from spurinv.refresh import check_node

    state = new_state(**{**state_for(SPX, SPX, SPX, drain=True), "node": "n7"})

    with pytest.raises(UsageError if from_flag else ConfigError) as caught:
        check_node(state, "n1", "/s/state.json", from_flag=from_flag)

    message = caught.value.message
    assert "not ours as 'n1'" in message
    assert f"only if `scontrol show node n1` shows exactly Reason={OUR_REASON!r}, lift it by hand" in message
    assert "(scontrol update NodeName=n1 State=UNDRAIN); any other reason is someone else's: leave it" in message


def test_status_and_the_metric_say_our_drain_is_held_for_an_operator(tmp_path, built, cli):
    """A held drain was said only in the run's steps; ``status``
    and the metrics now say spurinv will not lift it, and how to once it is fixed."""
    from spurinv.report import metrics

    node = adopted(tmp_path, built)
    drained(node)
    node.busy(0)
    node.controller["state"].append("NOT_RESPONDING")
    node.tick("spx", minutes=61)
    prom = tmp_path / "held.prom"

    held = cli("status", "--state", node.state_path, "--json").json()
    metrics.write(str(prom), metrics.render(json.loads(node.state_path.read_text()), 0.1, "n1", "test"))

    assert any("spurinv will not lift it" in note and "State=UNDRAIN" in note for note in held["attention"])
    assert "spurinv_drain_held 1" in prom.read_text()

    node.controller["state"].remove("NOT_RESPONDING")
    node.busy(2)  # still busy: our drain stays, no longer held for an operator
    node.tick("cpx", minutes=61)
    node.tick("cpx", minutes=61)  # confirmed: the view read, the drain kept for the job

    free = cli("status", "--state", node.state_path, "--json").json()
    assert not any("spurinv will not lift it" in note for note in free["attention"])
