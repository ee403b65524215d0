"""Write-ahead intents: every controller write is recorded durably before it is sent.

A write whose answer never arrives (timeout after the request went out, a reset, SIGTERM,
SIGKILL, the unit's stop timeout) has an unknown outcome. Without a record, a drain that was
applied but not answered would look foreign to every later run and never be lifted.
So a write goes: :meth:`Journal.begin` (the intended change — kind, exact body, fingerprint, time —
saved to the state file with fsync), then the request, then ``policy.settle``, which clears it.
Whatever dies in between leaves the intent in the state file, and the next run that reads the
node's view settles it with :func:`reconcile`: a drain carrying exactly our recorded reason (which
holds the drain's id) is ours, whatever the clocks say (:mod:`spurinv.controller.ownership`).

The journal knows nothing about the transport: a write is a kind and a payload, and whoever sends
it (the REST client today, an ``scontrol`` runner tomorrow) calls ``begin`` first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from spurinv.controller.nodeview import NodeView, gres_agrees
from spurinv.controller.ownership import (
    Claim,
    controller_claim,
    extra_fingerprint,
    extra_record,
    nonce_of,
    owns,
    reason_id,
    unamended,
)
from spurinv.shape import gpu_counts
from spurinv.state import file
from spurinv.state.file import Baseline, Drain, State

Kind = Literal["drain", "resume", "register"]
# an action's kind → a write's ("record": our registration record after someone else registered)
KINDS: dict[str, Kind] = {"drain": "drain", "resume": "resume", "register": "register", "record": "register"}


class Journal:
    """Records intents through ``save`` (None: nothing is persisted, e.g. a dry run or a benchmark)."""

    def __init__(self, save: Callable[[State], None] | None) -> None:
        self.save = save

    def begin(
        self,
        state: State,
        kind: Kind,
        body: dict[str, Any],
        now: datetime,
        *,
        fingerprint: str | None = None,
        cause: Literal["busy", "refused", "suspicious", "link"] | None = None,
        transport: str = "rest",
    ) -> State:
        """Return ``state`` with the intent recorded, after saving it durably.

        The fast path's memo goes too: a tick must never skip the reconciliation of an intent.
        """
        intent = file.intent(kind, dict(body), now, fingerprint=fingerprint, cause=cause, transport=transport)
        pending: State = {**state, "intent": intent, "steady": None}
        if self.save is not None:
            self.save(pending)
        return pending


def reconcile(state: State, view: NodeView) -> tuple[State, str | None]:
    """Settle an unsettled intent from the controller's view; pin our drain's reason time.

    Returns the new state and a sentence for the run's steps (None when there was nothing to do).
    Pure.
    """
    state, pinned = _pin(state, view)
    intent = state["intent"]
    if intent is None:
        return state, pinned
    cleared: State = {**state, "intent": None}
    if intent["kind"] == "drain":
        # a drain body without a reason (a hand-edited file) claims nothing, and is never read
        # as a registration below
        reason = file.intent_reason(intent)
        claim = Claim(reason, "intent", at=int(intent["at"].timestamp())) if reason is not None else None
        # sent with our record in the same update, the drain is the one there only if the node's
        # record agrees: a record naming a later drain of ours, none, or this one lifted says these
        # words were put back by someone (a restored state's old intent must not take them)
        disowned = reason is not None and "extra" in intent["body"] and controller_claim(view.name, reason, view.extra) is None
        if reason is not None and not disowned and owns(view.drained, view.reason, view.reason_changed_at, claim):
            drain = file.drain(
                reason=reason,
                set_at=intent["at"],
                cause=intent["cause"] or "busy",
                fingerprint=intent["fingerprint"],
                reason_changed_at=view.reason_changed_at,
            )
            return {**cleared, "drain": drain}, "the unanswered drain was applied: it is ours"
        return cleared, "the unanswered drain was not applied (or was replaced): nothing of ours on the node"
    if intent["kind"] == "resume":
        if not view.drained:
            return {**cleared, "drain": None}, "the unanswered resume was applied"
        if _lifted(state, view):
            # the lift retires our record's drain entry in the same update: the record says
            # lifted, so the drain on the node now is someone else's (a drain without a reason
            # of its own keeps our old words): ours is gone, never lifted again
            return {**cleared, "drain": None}, (
                "the unanswered resume was applied (our record in extra says our drain was lifted); "
                "the drain on the node now is someone else's: not touching it"
            )
        return cleared, "the unanswered resume was not applied"
    # register: applied when the controller lists what we sent and carries our fingerprint
    latest = file.latest_inventory(state)
    if (
        latest is not None
        and intent["fingerprint"] == latest["fingerprint"]
        and gres_agrees(view.gres, gpu_counts(latest))
        # the record follows the GRES (a second update): a run that died between the two has not
        # registered, and registering again sends both
        and ("extra" not in intent["body"] or extra_fingerprint(view.extra) == intent["fingerprint"])
    ):
        baseline: Baseline = {"inventory": latest, "since": intent["at"], "source": "registered"}
        return {
            **cleared,
            "baseline": baseline,
            "pending": None,
            "refusal": None,
            "accepted": None,
        }, "the unanswered re-registration was applied"
    if (
        latest is not None
        and intent["fingerprint"] == latest["fingerprint"]
        and state["baseline"] is not None
        and gpu_counts(state["baseline"]["inventory"]) != gpu_counts(latest)
        and gres_agrees(view.gres, gpu_counts(latest))
    ):
        # the GPU count changed and the controller lists the new one: the write (a register
        # command: a delete, a slurmd restart) took effect and only its record is missing. Kept
        # as a refusal the controller has since met, so the policy writes the record alone
        # instead of running the command again
        took = file.refusal(latest["fingerprint"], intent["at"],
                            "the unanswered re-registration took effect; its record was not written")  # fmt: skip
        return {**cleared, "refusal": took}, "the unanswered re-registration took effect; recording it"
    return cleared, "the unanswered re-registration was not applied; deciding afresh"


def unanswered_nonce(state: State, node: str) -> str | None:
    """The random part of the id of a drain of ours that was sent and never answered, for this
    run's drain to reuse: the unanswered write may still land (a slow slurmctld, a proxy that held
    it), after this run settled it as not applied and drained again. With the same words the two
    are one reason, and on Slurm 24.11 an identical drain of a drained node changes nothing (not
    even the reason's time), so the late one leaves our drain ours; under a fresh id it would
    replace ours with a reason no claim holds and strand the node. None when there is no such
    intent (each drain then draws its own)."""
    intent = state["intent"]
    reason = file.intent_reason(intent) if intent is not None and intent["kind"] == "drain" else None
    drain_id = reason_id(reason, node) if reason is not None else None
    return nonce_of(bytes.fromhex(drain_id)) if drain_id is not None else None


def _lifted(state: State, view: NodeView) -> bool:
    """Does our record in the node's ``extra`` say our drain (the state's) was lifted?"""
    drain_id = reason_id(state["drain"]["reason"], view.name) if state["drain"] is not None else None
    record = extra_record(view.extra)
    lifted = record.get("lifted") if record is not None else None
    return (
        drain_id is not None
        and record is not None
        and record.get("node") == view.name
        and isinstance(lifted, dict)
        and lifted.get("id") == drain_id
    )


def _pin(state: State, view: NodeView) -> tuple[State, str | None]:
    """Record when the controller says our drain's reason was set, the first time it says so."""
    drain = state["drain"]
    if (
        drain is None
        or drain["reason_changed_at"] is not None
        or view.reason_changed_at is None
        or not owns(view.drained, view.reason, view.reason_changed_at, file.claim(drain))
    ):
        return state, None
    pinned: Drain = {**drain, "reason_changed_at": view.reason_changed_at}
    return {**state, "drain": pinned}, None


def recover(state: State, view: NodeView, now: datetime) -> tuple[State, str | None]:
    """A state started afresh meets the controller for the first time: a drain the controller
    says is ours on this node (:func:`spurinv.controller.ownership.controller_claim`) becomes ours again.

    Only a fresh state asks (no usable file, or one written under another boot: a stale copy
    may hold another drain, or none): one of this boot that knows the node and forgot a drain
    (someone re-worded it) never takes it back from the controller's word. Pure.
    """
    if not state["fresh"]:
        return state, None
    state = {**state, "fresh": False}
    known = state["drain"]
    if not view.drained or (known is not None and owns(view.drained, view.reason, view.reason_changed_at, file.claim(known))):
        return state, None
    claim = controller_claim(view.name, view.reason, view.extra)
    added = None
    if claim is None and (split := unamended(view.reason, view.name)) is not None:
        # slurmctld appended to our reason (set_node_reason()): still our drain, which the
        # policy then holds and reports rather than lifts
        claim, added = controller_claim(view.name, split[0], view.extra), split[1]
    elif claim is not None and not owns(view.drained, view.reason, view.reason_changed_at, claim):
        return state, None
    if claim is None:
        return state, None
    drain = file.drain(
        reason=claim.reason,
        set_at=datetime.fromtimestamp(claim.at, UTC) if claim.at is not None else now,
        cause=KIND_CAUSES.get(claim.cause, "busy"),
        fingerprint=claim.fingerprint,
        reason_changed_at=view.reason_changed_at if added is None else None,  # an append is slurmctld's time
        recovered="controller-record" if claim.source == "controller-record" else "reason",
    )
    where = (
        "the controller record"
        if drain["recovered"] == "controller-record"
        else "the id in its reason (no record of ours in the node's extra)"
    )
    also = f"; slurmctld appended {added!r} to its reason" if added is not None else ""
    return {**state, "drain": drain}, f"drain recovered from {where}: it is ours{also}"


KIND_CAUSES: dict[str, Literal["busy", "refused", "suspicious", "link"]] = {
    "busy": "busy",
    "refused": "refused",
    "suspicious": "suspicious",
    "link": "link",
}


__all__ = ["Journal", "reconcile", "recover", "unanswered_nonce"]
