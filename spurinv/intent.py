"""Write-ahead intents: every controller write is recorded durably before it is sent.

A write whose answer never arrives (timeout after the request went out, a reset, SIGTERM,
SIGKILL, the unit's stop timeout) has an unknown outcome. Without a record, a drain that was
applied but not answered would look foreign to every later run and never be lifted (issue #10).
So a write goes: :meth:`Journal.begin` (the intended change — kind, exact body, fingerprint, time —
saved to the state file with fsync), then the request, then ``policy.settle``, which clears it.
Whatever dies in between leaves the intent in the state file, and the next run that reads the
node's view settles it with :func:`reconcile`: a drain carrying exactly our recorded reason, set
when we sent it, is ours.

The journal knows nothing about the transport: a write is a kind and a payload, and whoever sends
it (the REST client today, an ``scontrol`` runner tomorrow) calls ``begin`` first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from spurinv.nodeview import NodeView, extra_fingerprint, gres_agrees
from spurinv.state import Baseline, Drain, Intent, State

# How far the controller's clock may be from ours. Slurm authenticates every RPC with munge,
# whose credentials live 300 s by default: nodes whose clocks differ by more cannot talk to
# slurmctld at all. A reason set outside this window around our write was not set by it.
CLOCK_SKEW = 300
# A write reaches the controller while the run that sent it lives: within the longest run
# (controller.run_deadline ≤ 120 s, the last request cut at the deadline) after it was recorded.
WRITE_SLACK = 120

Kind = Literal["drain", "resume", "register"]
KINDS: dict[str, Kind] = {"drain": "drain", "resume": "resume", "register": "register"}  # an action's kind → a write's


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
        cause: Literal["busy", "refused", "suspicious"] | None = None,
        transport: str = "rest",
    ) -> State:
        """Return ``state`` with the intent recorded, after saving it durably.

        The fast path's memo goes too: a tick must never skip the reconciliation of an intent.
        """
        intent = Intent(kind=kind, body=dict(body), at=now, fingerprint=fingerprint, cause=cause, transport=transport)
        pending = state.model_copy(update={"intent": intent, "steady": None})
        if self.save is not None:
            self.save(pending)
        return pending


def in_window(changed_at: int | None, written_at: datetime, slack: float = WRITE_SLACK) -> bool:
    """Could the controller's ``reason_changed_at`` come from a write we made at ``written_at``?"""
    if changed_at is None:
        return True  # the controller does not say: the reason text alone decides
    low = written_at - timedelta(seconds=CLOCK_SKEW)
    high = written_at + timedelta(seconds=CLOCK_SKEW + slack)
    return low.timestamp() <= changed_at <= high.timestamp()


def reconcile(state: State, view: NodeView) -> tuple[State, str | None]:
    """Settle an unsettled intent from the controller's view; pin our drain's reason time.

    Returns the new state and a sentence for the run's steps (None when there was nothing to do).
    Pure.
    """
    state, pinned = _pin(state, view)
    intent = state.intent
    if intent is None:
        return state, pinned
    cleared = state.model_copy(update={"intent": None})
    if intent.kind == "drain" and intent.reason is not None:
        if view.drained and view.reason == intent.reason and in_window(view.reason_changed_at, intent.at):
            drain = Drain(
                reason=intent.reason,
                set_at=intent.at,
                cause=intent.cause or "busy",
                fingerprint=intent.fingerprint,
                reason_changed_at=view.reason_changed_at,
            )
            return cleared.model_copy(update={"drain": drain}), "the unanswered drain was applied: it is ours"
        return cleared, "the unanswered drain was not applied (or was replaced): nothing of ours on the node"
    if intent.kind == "resume":
        if not view.drained:
            return cleared.model_copy(update={"drain": None}), "the unanswered resume was applied"
        return cleared, "the unanswered resume was not applied"
    # register: applied when the controller lists what we sent and carries our fingerprint
    latest = state.latest.inventory if state.latest else None
    if (
        latest is not None
        and intent.fingerprint == latest.fingerprint
        and gres_agrees(view.gres, latest.gpu_counts())
        and extra_fingerprint(view.extra) == intent.fingerprint
    ):
        baseline = Baseline(inventory=latest, since=intent.at, source="registered")
        update = {"baseline": baseline, "pending": None, "refusal": None, "accepted": None}
        return cleared.model_copy(update=update), "the unanswered re-registration was applied"
    return cleared, "the unanswered re-registration was not applied; deciding afresh"


def _pin(state: State, view: NodeView) -> tuple[State, str | None]:
    """Record when the controller says our drain's reason was set, the first time it says so."""
    drain = state.drain
    if (
        drain is None
        or drain.reason_changed_at is not None
        or view.reason_changed_at is None
        or not view.drained
        or view.reason != drain.reason
        or not in_window(view.reason_changed_at, drain.set_at)
    ):
        return state, None
    pinned = drain.model_copy(update={"reason_changed_at": view.reason_changed_at})
    return state.model_copy(update={"drain": pinned}), None


__all__ = ["CLOCK_SKEW", "WRITE_SLACK", "Journal", "in_window", "reconcile"]
