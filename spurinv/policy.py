"""The policy: ``decide(outcome, view, state, settings, now) → action`` and ``settle``. Pure.

The table (the review of ROCm/spur#834 by yansun1996; docs/spur.md):

==================  ==========================  ============================================
outcome             controller view              action
==================  ==========================  ============================================
discovery-failed    —                            none (nothing may be acted on)
switching           —                            none, exit 75 (a switch in progress; not a failure)
change-pending      —                            none (wait for a second identical reading)
suspicious          —                            hold; drain only with drain_on_suspicious
unchanged           our drain on                 resume (``{"state":["RESUME"]}`` only); a link drain
                                                 only once the link is back
unchanged           link degraded twice          drain with ``spurinv: 0000:05:00.0 PCIe x16→x8``, only
                                                 with drain_on_degraded_link
unchanged           otherwise                    none, and no request at all
change-confirmed    no baseline, gres agrees     adopt the reading as the baseline
change-confirmed    idle                         register (complete gres + extra), read back
change-confirmed    busy (GPUs allocated)        drain with ``spurinv: <diff>``; register later
change-confirmed    refused before               drain if not drained; retry after backoff
any, refused backoff only the refused retry      no request; anything else goes ahead at once
any                 drain not ours               never resumed, never overwritten
==================  ==========================  ============================================

"Ours" = DRAIN flag set and the reason equal to the one we set, which carries the drain's id
(:mod:`spurinv.controller.ownership`; NHC's leader convention made exact: docs/slurm-rest.md §6). A state
started afresh reads the controller once, even for a first reading, so a drain the lost state
knew is found (``intent.recover``). ``decide`` is called repeatedly within a run, each time with
the state and view as updated by :func:`settle`, until it returns a terminal action; each
non-terminal action is one request (or none).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from spurinv import exitcode, shape
from spurinv.controller.nodeview import NodeView, gpu_counts, gres_agrees, rebuild_gres, unsendable_gres
from spurinv.controller.ownership import (
    amended,
    foreign_key,
    lift_blockers,
    owns,
    reason_for,
    reason_id,
    record_value,
    retired_value,
    splice,
    stale_drain,
    text_of,
)
from spurinv.controller.transport import SLURM_REMEDY
from spurinv.errors import ControllerKind
from spurinv.inventory.classify import Kind, diff_summary
from spurinv.inventory.model import Inventory, Outcome
from spurinv.inventory.sources import link
from spurinv.secret import printable
from spurinv.state import file
from spurinv.state.file import Backoff, Baseline, State


class Do(StrEnum):
    """Action kinds; the values are the documented JSON strings."""

    NONE = shape.NO_ACTION
    HOLD = "hold"
    BACKOFF = "backoff"
    READ_VIEW = "read-view"
    ADOPT = "adopt"
    OBSERVE = "observe"
    FORGET_DRAIN = "forget-drain"
    REGISTER = "register"
    RECORD = "record"
    DRAIN = "drain"
    RESUME = "resume"
    RETIRE = "retire-record"  # our record's drain entry, once the drain is gone (extra only)


TERMINAL = frozenset({Do.NONE, Do.HOLD, Do.BACKOFF})
DOWN = frozenset({"DOWN", "FAIL", "FAILING"})  # node states spurinv never registers or drains
WRITES = frozenset({Do.REGISTER, Do.RECORD, Do.DRAIN, Do.RESUME, Do.RETIRE})


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The part of the configuration the policy reads (built from the validated config)."""

    observe: bool
    drain_on_suspicious: bool = False
    switch_timeout: int = 600  # policy.switch_timeout: a switch in progress longer than this is a failure
    drain_on_degraded_link: bool = False
    backoff_initial: int = 60
    backoff_max: int = 3600
    ignore_backoff: bool = False  # `refresh --ignore-backoff`: an operator retries now
    busy_recheck: int = 300  # controller.busy_recheck: least seconds between all-nodes queries
    # the longest ``extra`` the transport can carry (bytes; None: no limit of its own), so our
    # record never makes a write the transport cannot send (transport.extra_limit)
    max_extra: int | None = None
    # controller.register_command set: it may restart the node's agent, so any job holds it off
    # (docs/busy.md); a direct GRES update waits only for GPU jobs
    any_job_busy: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One step: what to do, why, and (for writes) the exact request body."""

    kind: Do
    reason: str
    body: dict[str, Any] | None = None
    cause: Literal["busy", "refused", "suspicious", "link"] | None = None
    exit_code: int = exitcode.OK
    held: bool = False  # our drain, held for an operator (status says so)


def drain_reason(text: str, node: str = "", nonce: str = "0000") -> str:
    """``spurinv: [<id>] <text>`` on one line, short enough for ``sinfo -R`` (the id: ``nonce``
    and a digest binding it to ``node`` and the text, :func:`spurinv.controller.ownership.reason_for`)."""
    return reason_for(node, nonce, text)


def drain_body(view: NodeView, text: str, cause: str, fingerprint: str | None, settings: Settings, now: datetime,
               nonce: str) -> dict[str, Any]:  # fmt: skip
    """The drain, and our record of it in ``extra`` in the same update where the controller has
    ``extra`` we may rewrite and the transport can carry it (else the id in the reason is all)."""
    reason = drain_reason(text, view.name, nonce)
    body: dict[str, Any] = {"state": ["DRAIN"], "reason": reason}
    drain = {"id": reason_id(reason, view.name), "reason": reason, "cause": cause,
             "fingerprint": fingerprint, "at": shape.stamp(int(now.timestamp()))}  # fmt: skip
    value = record_value(view.extra, view.name, {"drain": drain})
    extra = splice(view.extra, value, settings.max_extra) if value is not None else None
    if extra is not None:
        body["extra"] = extra
    return body


def ours(view: NodeView, state: State) -> bool:
    """Is the node drained by us? DRAIN set, exactly the reason we recorded (which carries our
    drain's id), and — where the controller says when the reason was set — still the time we
    first saw, not a later drain that reused our text (:func:`spurinv.controller.ownership.owns`)."""
    drain = state["drain"]
    return drain is not None and owns(view.drained, view.reason, view.reason_changed_at, file.claim(drain))


def when(moment: datetime, now: datetime) -> str:
    """``14:05:00 UTC`` today, ``2036-01-01 14:05:00 UTC`` on any other day."""
    return moment.strftime("%H:%M:%S UTC" if moment.date() == now.date() else "%Y-%m-%d %H:%M:%S UTC")


def clamp_backoff(state: State, settings: Settings, now: datetime) -> tuple[State, str | None]:
    """A stored ``next_attempt`` beyond ``now + backoff_max`` (written under a wrong clock) counts
    as ``now + backoff_max``; return the state and a warning when it was clamped."""
    backoff = state["backoff"]
    limit = now + timedelta(seconds=settings.backoff_max)
    if backoff is None or backoff["next_attempt"] <= limit:
        return state, None
    warning = (
        f"stored backoff until {when(backoff['next_attempt'], now)} is beyond policy.backoff_max "
        f"({settings.backoff_max} s; a clock that was wrong?); retrying at {when(limit, now)} instead"
    )
    clamped: Backoff = {**backoff, "next_attempt": limit}
    return {**state, "backoff": clamped}, warning


def forget_stale_refusal(state: State, outcome: Outcome) -> State:
    """The reading is the baseline again: a refusal of another inventory (and its backoff) is moot."""
    if outcome["kind"] != Kind.UNCHANGED or (
        state["refusal"] is None and (state["backoff"] is None or state["backoff"]["kind"] != "refused")
    ):
        return state
    backoff = None if state["backoff"] is not None and state["backoff"]["kind"] == "refused" else state["backoff"]
    return {**state, "refusal": None, "backoff": backoff}


def _retry_only(outcome: Outcome, state: State) -> bool:
    """Is the only thing this reading could lead to a retry of the request the controller refused?"""
    refusal = state["refusal"]
    return (
        outcome["kind"] == Kind.CHANGE_CONFIRMED
        and refusal is not None
        and refusal["fingerprint"] == outcome["fingerprint"]
        and state["intent"] is None
    )


def decide(
    outcome: Outcome, view: NodeView | None, state: State, settings: Settings, now: datetime, *, nonce: str = "0000"
) -> Action:
    """Return the next step for this run (``nonce``: the random part of a drain's id)."""
    if outcome["kind"] == Kind.DISCOVERY_FAILED:
        return Action(kind=Do.NONE, reason=f"{outcome['reason']}; nothing may be acted on", exit_code=exitcode.IOERR)
    if outcome["kind"] == Kind.SWITCHING:
        # not settled: no change to confirm, no failure to back off from; the next tick looks again
        return Action(kind=Do.NONE, reason=f"{outcome['reason']}; waiting for the settled reading", exit_code=exitcode.TEMPFAIL)
    # a state started afresh reads the controller once whatever the reading: a drain of ours
    # the lost state knew is found only there
    first_look = state["fresh"] and not settings.observe
    if outcome["kind"] == Kind.CHANGE_PENDING and not (first_look and view is None):
        return Action(kind=Do.NONE, reason=outcome["reason"])
    current = file.latest_inventory(state)
    if settings.observe:
        return _observed(outcome, state, current)

    degraded = _degraded_links(state) if settings.drain_on_degraded_link else []
    needs_view = (
        outcome["kind"] == Kind.CHANGE_CONFIRMED
        or (outcome["kind"] == Kind.UNCHANGED and bool(degraded) and state["drain"] is None)
        or (outcome["kind"] == Kind.SUSPICIOUS and settings.drain_on_suspicious)
        or (outcome["kind"] == Kind.UNCHANGED and state["drain"] is not None)
        or state["intent"] is not None  # an unsettled write: the controller's view settles it
        or first_look
    )
    if not needs_view:
        # the view read for another reason this run (a drain just forgotten) shows a stale record
        retire = stale_record(view, state, settings, now) if view is not None else None
        if retire is not None:
            return retire
        if outcome["kind"] == Kind.SUSPICIOUS:
            return Action(kind=Do.HOLD, reason=f"{outcome['reason']}; {outcome['release']}")
        return Action(kind=Do.NONE, reason=shape.QUIET)
    if view is None:
        # Transport and auth trouble block all contact; a refusal only delays its own retry, so
        # another action this reading needs (lift our drain after a revert, drain a newly busy
        # node, register another inventory) goes ahead at once.
        backoff = _active_backoff(state, settings, now)
        if backoff is not None and backoff["kind"] == "refused" and _retry_only(outcome, state):
            # the refused write waits for its backoff, but not the look that may show it moot:
            # the operator fixed slurm.conf and the controller lists the reading now. One
            # single-node read (``cause``: never the all-nodes busy re-check for it).
            return Action(
                kind=Do.READ_VIEW,
                reason="the refused update waits for its backoff; reading the node: the controller may list the GPUs now",
                cause="refused",
            )
        if backoff is not None and backoff["kind"] != "refused":
            return Action(
                kind=Do.BACKOFF,
                reason=f"backing off until {when(_next_attempt(backoff, settings, now), now)} after: {backoff['error']}",
                exit_code=exitcode.TEMPFAIL,
            )
        if first_look:
            # the state may hold readings (observe mode, a file from another boot): what it
            # lacks is the controller's view
            return Action(kind=Do.READ_VIEW, reason="the controller not read yet: read the node from it, and any drain of ours")
        return Action(kind=Do.READ_VIEW, reason="read the node's state from the controller")

    drained_by_us = ours(view, state)
    if state["drain"] is not None and not drained_by_us:
        return _no_longer_exactly_ours(view, state["drain"]["reason"])
    foreign = view.drained and not drained_by_us
    retire = stale_record(view, state, settings, now)
    if retire is not None:
        return retire

    if outcome["kind"] == Kind.UNCHANGED:
        return _unchanged(view, state, settings, now, nonce, drained_by_us=drained_by_us, degraded=degraded)

    if outcome["kind"] == Kind.SUSPICIOUS:
        return _suspicious(outcome, view, settings, now, nonce)

    # change-confirmed
    assert current is not None
    assert outcome["diff"] is not None
    models = shape.gpu_counts(current)
    if state["baseline"] is None and gres_agrees(view.gres, models):
        return Action(kind=Do.ADOPT, reason=f"the controller already lists {view.gres}; adopting the reading as the baseline")
    refusal = state["refusal"] if state["refusal"] and state["refusal"]["fingerprint"] == outcome["fingerprint"] else None
    if refusal is not None and state["baseline"] is not None and gres_agrees(view.gres, models):
        # someone did what the refusal asked (slurm.conf, gres.conf, reconfigure, slurmd): the
        # refused write is moot, busy or not; only our record is written (extra alone)
        body = record_body(view, current, settings)
        return Action(
            kind=Do.RECORD,
            reason=f"the controller now lists {view.gres}; taking it as registered{_unrecorded(view, body)}",
            body=body,
        )
    summary = against(view, current) if state["baseline"] is None else diff_summary(outcome["diff"])
    if DOWN & {view.base, *view.flags}:
        down = lift_blockers(view.base, view.flags)
        # a DOWN/FAIL node is no idle node: its jobs may be unseen, and a register command would
        # restart or delete a node the operator is working on
        said = f" ({view.reason!r})" if view.reason else ""
        return Action(
            kind=Do.HOLD,
            reason=f"the node is {'+'.join(down)}{said}; not re-registering ({summary}) until it is back",
            exit_code=exitcode.TEMPFAIL,
        )
    if (not view.idle) if settings.any_job_busy else view.gpu_busy:
        if drained_by_us:
            return Action(kind=Do.HOLD, reason=f"drained by spurinv; waiting for jobs to finish ({view.busy_text()})")
        if foreign:
            return Action(kind=Do.HOLD, reason=f"busy and drained by someone else ({view.reason!r}); not touching it")
        if blocked := _not_over(view, summary):
            return Action(kind=Do.HOLD, reason=blocked)
        body = drain_body(view, f"{summary}; re-registers when idle", "busy", current["fingerprint"], settings, now, nonce)
        return Action(
            kind=Do.DRAIN,
            reason=f"busy ({view.busy_text()}); draining so jobs finish first{_unrecorded(view, body)}",
            body=body,
            cause="busy",
        )
    if refusal is not None:
        remedy = refusal["remedy"] or SLURM_REMEDY  # a refusal saved before remedies were kept was Slurm's
        words = f"controller refused {summary}; {remedy}"
        # our own drain for busy said "re-registers when idle": now it must say what is wrong
        if (not view.drained and not refusal["resumed"]) or (
            drained_by_us and state["drain"] is not None and not _says(state["drain"]["reason"], words)
        ):
            if blocked := _not_over(view, f"the controller refused {summary}"):
                return Action(kind=Do.HOLD, reason=f"{blocked}; {remedy}", exit_code=exitcode.PROTOCOL)
            body = drain_body(view, words, "refused", current["fingerprint"], settings, now, nonce)
            return Action(
                kind=Do.DRAIN, reason=f"the controller refused the update: {refusal['error']}", body=body, cause="refused"
            )
        if backoff := _active_backoff(state, settings, now):
            return Action(
                kind=Do.HOLD,
                reason=(
                    f"the controller refused the update ({refusal['error']}); "
                    f"{remedy}; retry at {when(_next_attempt(backoff, settings, now), now)}"
                ),
                exit_code=exitcode.PROTOCOL,
            )
    if altered := unsendable_gres(view.gres or ""):
        return Action(
            kind=Do.HOLD,
            reason=(
                f'the controller\'s GRES entry "{printable(altered[:60])}" held bytes that are not UTF-8 (read as U+FFFD): '
                "it cannot be sent back as it was, and leaving it out would zero it; not re-registering "
                f"({summary}); fix the node's GRES on the controller"
            ),
            exit_code=exitcode.PROTOCOL,
        )
    body = register_body(view, current, settings)
    return Action(kind=Do.REGISTER, reason=f"idle; re-registering: {summary}{_unrecorded(view, body)}", body=body)


def _suspicious(outcome: Outcome, view: NodeView, settings: Settings, now: datetime, nonce: str) -> Action:
    """A suspicious reading, confirmed: drain (policy.drain_on_suspicious), unless the node is
    drained already or in a state someone else set."""
    if view.drained:
        return Action(kind=Do.HOLD, reason=f"{outcome['reason']}; node already drained")
    if blocked := _not_over(view, "suspicious reading"):
        return Action(kind=Do.HOLD, reason=f"{outcome['reason']}; {blocked}")
    words = f"suspicious reading: {outcome['reason']}"
    body = drain_body(view, words, "suspicious", outcome["fingerprint"], settings, now, nonce)
    return Action(kind=Do.DRAIN, reason=outcome["reason"], body=body, cause="suspicious")


def _unchanged(view: NodeView, state: State, settings: Settings, now: datetime, nonce: str, *, drained_by_us: bool,
               degraded: list[dict[str, Any]]) -> Action:  # fmt: skip
    """Unchanged inventory: lift our drain, or (drain_on_degraded_link) drain while a link is degraded."""
    words = "; ".join(link.line(found) for found in degraded)
    link_drain = state["drain"] is not None and state["drain"]["cause"] == "link"
    if drained_by_us and link_drain and degraded:
        return Action(kind=Do.NONE, reason=f"drained by spurinv while a PCIe link is degraded ({words})")
    if drained_by_us and link_drain and state["drain"] is not None and settings.drain_on_degraded_link:
        readings = list(state["readings"])
        if not link.back(readings, link.named(state["drain"]["reason"])):
            reason = "drained by spurinv for a PCIe link: lifted only once two readings show it at full width"
            return Action(kind=Do.NONE, reason=reason)
    if drained_by_us:
        return _lift(view, state, settings, now, "the PCIe link is back" if link_drain else "inventory matches the baseline")
    if degraded and not view.drained:
        if blocked := _not_over(view, f"degraded PCIe link ({words})"):
            return Action(kind=Do.HOLD, reason=blocked)
        current = file.latest_inventory(state)
        body = drain_body(view, words, "link", current["fingerprint"] if current else None, settings, now, nonce)
        reason = f"degraded PCIe link in two readings ({words}); policy.drain_on_degraded_link"
        return Action(kind=Do.DRAIN, reason=reason + _unrecorded(view, body), body=body, cause="link")
    return Action(kind=Do.NONE, reason="unchanged")


def _degraded_links(state: State) -> list[dict[str, Any]]:
    """Links degraded in the last two readings (spurinv.inventory.sources.link.confirmed), but those an
    operator accepted by lifting our drain (:attr:`State.accepted_links`)."""
    found = link.confirmed(list(state["readings"]))
    return [each for each in found if shape.accepted_link(each) not in state["accepted_links"]]


def _observed(outcome: Outcome, state: State, current: Inventory | None) -> Action:
    """Observe mode (no controller configured): say what would be done."""
    if outcome["kind"] == Kind.CHANGE_CONFIRMED and current is not None:
        diff = outcome["diff"]
        summary = diff_summary(diff) if diff and state["baseline"] else f"first inventory: {shape.summary(current)}"
        return Action(kind=Do.OBSERVE, reason=f"observe mode (no controller configured): would re-register: {summary}")
    if outcome["kind"] == Kind.SUSPICIOUS:
        return Action(kind=Do.HOLD, reason=f"{outcome['reason']}; {outcome['release']}")
    return Action(kind=Do.NONE, reason=shape.QUIET_OBSERVE)


def _lift(view: NodeView, state: State, settings: Settings, now: datetime, why: str) -> Action:
    """The inventory is back and the drain is ours: lift it, unless the node is also DOWN or
    flagged by someone else (:func:`spurinv.controller.ownership.lift_blockers`)."""
    blockers = lift_blockers(view.base, view.flags)
    if blockers:
        return Action(kind=Do.HOLD, reason=_held(view, state, blockers), held=True)
    reason = f"{why}; lifting our drain"
    if state["drain"] is not None and state["drain"]["cause"] == "refused" and gres_agrees(view.gres, _counts(state)):
        reason = f"the controller now lists {view.gres}; our drain lifted"
    return Action(kind=Do.RESUME, reason=reason, body=lift_body(view, state, settings, now))


def lift_body(view: NodeView, state: State, settings: Settings, now: datetime) -> dict[str, Any]:
    """Lift our drain with the narrowest write: Slurm's ``UNDRAIN`` clears the DRAIN flag only,
    where ``RESUME`` would also clear DOWN, FAIL and a requested reboot (update_node() in
    src/slurmctld/node_mgr.c); spur knows only ``RESUME`` (its nodes have no other flag to
    lose). The drain entry of our record in ``extra`` is retired in the same update, so the record
    never says "drain on" once it is gone (a record a crash left behind is retired later:
    :func:`stale_record`)."""
    body: dict[str, Any] = {"state": ["RESUME"] if view.dialect.startswith("spur") else ["UNDRAIN"]}
    drain_id = reason_id(state["drain"]["reason"], view.name) if state["drain"] is not None else None
    value = retired_value(view.extra, view.name, drain_id, shape.stamp(int(now.timestamp())))
    extra = splice(view.extra, value, settings.max_extra) if value is not None else None
    if extra is not None:
        body["extra"] = extra
    return body


def _held(view: NodeView, state: State, blockers: list[str]) -> str:
    """Why our drain stays although the inventory is back. Slurm keeps one reason per node: when
    it set DOWN (or a flag) without words of its own, the reason shown is still ours, not the
    DOWN's, and is not quoted as someone else's."""
    mine = state["drain"] is not None and view.reason == state["drain"]["reason"]
    why = "Slurm or an operator set that without a reason of its own" if mine else f"reason {view.reason!r}"
    return (
        f"inventory matches the baseline, but the node is also {'+'.join(blockers)} "
        f"({why}): not ours to clear; our drain stays until that is gone "
        "(lifting it would not make the node usable, and Slurm's RESUME would clear the rest too)"
    )


def _not_over(view: NodeView, what: str) -> str | None:
    """Why a drain (a write with a reason) must not go to this node: it is DOWN, FAIL,
    NOT_RESPONDING or otherwise in a state someone else set (:func:`spurinv.controller.ownership.lift_blockers`).
    Slurm keeps one reason per node: ours would overwrite the one that state was set with."""
    blockers = lift_blockers(view.base, view.flags)
    if not blockers:
        return None
    shown = f", reason {view.reason!r}" if view.reason else ""
    return (
        f"{what}: not draining, the node is {'+'.join(blockers)}{shown} — set by someone else; a drain "
        "would overwrite its reason. Holding until that is cleared"
    )


def stale_record(view: NodeView, state: State, settings: Settings, now: datetime) -> Action | None:
    """A drain entry our record in ``extra`` still holds for a drain the node no longer carries
    (a run that died between lifting and recording, or an operator's resume): retire it with an
    ``extra``-only update, every other byte of the admin's text unchanged. Not while a write of
    ours is unsettled: its outcome decides first."""
    if state["intent"] is not None or view.extra is None:
        return None
    drain_id = stale_drain(view.extra, view.name, view.drained, view.reason)
    if drain_id is None:
        return None
    value = retired_value(view.extra, view.name, drain_id or None, shape.stamp(int(now.timestamp())))
    extra = splice(view.extra, value, settings.max_extra) if value is not None else None
    if extra is None or extra == view.extra:
        return None
    return Action(
        kind=Do.RETIRE,
        reason=f"our record in extra still holds drain {drain_id or '(no id)'}, which the node no longer carries: retiring it",
        body={"extra": extra},
    )


def _no_longer_exactly_ours(view: NodeView, reason: str) -> Action:
    """Our drain's reason is not on the node as we set it: slurmctld appended to it (still ours,
    held and said), or it is gone or someone else's (forgotten)."""
    added = amended(view.reason, reason) if view.drained else None
    if added is not None:
        return Action(kind=Do.HOLD, reason=_amended(view, added), held=True)
    if not view.drained:
        what = "the node was resumed, or re-created"
    elif view.reason == reason:
        # our words, but the controller set them at another time: a drain that reused them
        what = f"the node carries our words, set again at {view.reason_changed_at}, not at the time our drain was set"
    else:
        what = f"the reason is now {view.reason!r}"
    return Action(kind=Do.FORGET_DRAIN, reason=f"our drain is no longer ours ({what}); never touching it again")


def _amended(view: NodeView, added: str) -> str:
    """Our drain, with slurmctld's words appended (:func:`spurinv.controller.ownership.amended`)."""
    state = "+".join([view.base, *view.flags])
    return (
        f"our drain is still on, but slurmctld appended {added!r} to its reason (node {state}): "
        f"the node needs an operator; spurinv keeps it drained and does not lift it "
        f"(once fixed: scontrol update NodeName={view.name} State=UNDRAIN)"
    )


def against(view: NodeView, inventory: Inventory) -> str:
    """The change without a baseline (a first run, a wiped state): against the GPUs the
    controller lists, never "0→8" from nothing."""
    listed = gpu_counts(view.gres or "")
    new: dict[str | None, int] = dict(shape.gpu_counts(inventory).items())
    models = sorted(set(listed) | set(new), key=str)
    parts = [f"{model or 'gpu'} {listed.get(model, 0)}→{new.get(model, 0)}" for model in models
             if listed.get(model, 0) != new.get(model, 0)]  # fmt: skip
    return "; ".join(parts) + " (vs the controller's gres)" if parts else f"as the controller lists: {shape.summary(inventory)}"


def _unrecorded(view: NodeView, body: dict[str, Any]) -> str:
    """Say so when the controller has ``extra`` but our record cannot go into it."""
    if view.extra is None or "extra" in body:
        return ""
    foreign = foreign_key(view.extra, view.name)
    if foreign is not None:
        return f" ({foreign})"
    return " (the node's extra is not one JSON object we may rewrite, or too long for the transport: no record in it)"


def _says(reason: str, words: str) -> bool:
    """Does our drain's ``reason`` already say ``words`` (whatever its id)?"""
    return text_of(reason) == text_of(drain_reason(words))


def recheck_due(last: datetime | None, node: str, interval: int, now: datetime) -> bool:
    """May this run confirm "busy" with an all-nodes query? At most once per ``interval`` seconds
    plus a per-node jitter of up to a quarter of it, fixed by the node's name, so a fleet that
    started waiting together does not query together."""
    if last is None or last > now:  # never, or under a clock that has since gone back
        return True
    digest = hashlib.sha256(node.encode()).digest()
    jitter = int.from_bytes(digest[:4], "big") / 2**32 * interval / 4
    return (now - last).total_seconds() >= interval + jitter


def register_body(view: NodeView, inventory: Inventory, settings: Settings | None = None) -> dict[str, Any]:
    """The complete ``gres`` (GPUs rebuilt, everything else kept) and our record in ``extra``.

    The transport sends the record only once the controller lists the GRES (a second update:
    Slurm applies ``extra`` even when it refuses the GRES of the same update), spliced into the
    ``extra`` it then reads; ``extra`` is left out where we may not rewrite it.
    """
    return _registration(view, inventory, rebuild_gres(view.gres or "", shape.gpu_counts(inventory)), settings)


def record_body(view: NodeView, inventory: Inventory, settings: Settings | None = None) -> dict[str, Any]:
    """A registration someone else did (the controller already lists the reading): the GRES as
    the controller lists it, which is never sent, and our registration record for ``extra``."""
    return _registration(view, inventory, view.gres or "", settings)


def _registration(view: NodeView, inventory: Inventory, gres: str, settings: Settings | None) -> dict[str, Any]:
    body: dict[str, Any] = {"gres": gres}
    # the gres goes into the record too, so `spurinv fleet` can see a later hand edit
    update = {"fingerprint": inventory["fingerprint"], "inventory": shape.summary(inventory), "gres": gres}
    limit = settings.max_extra if settings is not None else None
    value = record_value(view.extra, view.name, update)
    extra = splice(view.extra, value, limit) if value is not None else None
    if extra is not None:
        body["extra"] = extra
    return body


def _counts(state: State) -> dict[str, int]:
    latest = file.latest_inventory(state)
    return shape.gpu_counts(latest)


def _next_attempt(backoff: Backoff, settings: Settings, now: datetime) -> datetime:
    return min(backoff["next_attempt"], now + timedelta(seconds=settings.backoff_max))


def _active_backoff(state: State, settings: Settings, now: datetime) -> Backoff | None:
    backoff = state["backoff"]
    if backoff is None or settings.ignore_backoff:
        return None
    return backoff if now < _next_attempt(backoff, settings, now) else None


def contacted(state: State) -> State:
    """The controller answered: transport and auth backoffs are over (a refusal's is not)."""
    if state["backoff"] is not None and state["backoff"]["kind"] != "refused":
        return {**state, "backoff": None}
    return state


def backoff_seconds(failures: int, settings: Settings, kind: str) -> int:
    """Exponential, bounded; authentication errors back off four times harder."""
    factor = 4 if kind == "auth" else 1
    return int(min(settings.backoff_max, settings.backoff_initial * factor * (2 ** max(0, failures - 1))))


def with_backoff(state: State, kind: ControllerKind, error: str, settings: Settings, now: datetime) -> State:
    """Record a controller error: backoff grows with consecutive failures."""
    failures = (state["backoff"]["failures"] if state["backoff"] else 0) + 1
    delay = backoff_seconds(failures, settings, kind)
    backoff: Backoff = {"kind": kind, "failures": failures, "next_attempt": now + timedelta(seconds=delay), "error": error}
    return {**state, "backoff": backoff, "controller_errors": state["controller_errors"] + 1, "steady": None}


def settle(
    state: State,
    action: Action,
    now: datetime,
    *,
    applied: bool = True,
    error: str | None = None,
    settings: Settings | None = None,
    remedy: str | None = None,
) -> State:
    """Return the state after ``action`` (``applied`` False: the controller refused it).

    A write's outcome is known here, so its write-ahead intent is cleared.
    """
    if action.kind in WRITES and state["intent"] is not None:
        state = {**state, "intent": None}
    current = file.latest_inventory(state)
    if action.kind in (Do.ADOPT, Do.OBSERVE) and current is not None:
        baseline: Baseline = {
            "inventory": current,
            "since": now,
            "source": "adopted" if action.kind == Do.ADOPT else "observed",
        }
        return {**state, "baseline": baseline, "pending": None, "refusal": None, "accepted": None}
    if action.kind == Do.FORGET_DRAIN:
        if state["refusal"] is not None and state["drain"] is not None and state["drain"]["cause"] == "refused":
            return {**state, "drain": None, "refusal": {**state["refusal"], "resumed": True}}
        if state["drain"] is not None and state["drain"]["cause"] == "link":
            # the operator lifted our link drain: they accept these links as they are now
            keys = [shape.accepted_link(found) for found in _degraded_links(state)]
            return {**state, "drain": None, "accepted_links": tuple(dict.fromkeys([*state["accepted_links"], *keys]))[-64:]}
        return {**state, "drain": None}
    if action.kind in (Do.REGISTER, Do.RECORD) and current is not None:
        if applied:
            registered: Baseline = {"inventory": current, "since": now, "source": "registered"}
            return {**state, "baseline": registered, "pending": None, "refusal": None, "backoff": None, "accepted": None}
        refused: State = {
            **state, "refusal": file.refusal(current["fingerprint"], now, error or "refused", remedy=remedy)
        }  # fmt: skip
        return with_backoff(refused, "refused", error or "refused", settings or Settings(observe=False), now)
    if action.kind == Do.DRAIN and action.body is not None:
        drain = file.drain(
            reason=action.body["reason"],
            set_at=now,
            cause=action.cause or "busy",
            fingerprint=current["fingerprint"] if current else None,
        )
        return {**state, "drain": drain}
    if action.kind == Do.RESUME:
        return {**state, "drain": None, "backoff": None}
    return state


def expected_view(view: NodeView, action: Action) -> NodeView:
    """The view after a successful drain or resume, without another GET."""
    if action.kind == Do.DRAIN and action.body is not None:
        flags = tuple(dict.fromkeys((*view.flags, "DRAIN")))
        # the controller stamps a new reason time we have not read: an old one (a drain re-worded)
        # would make our own drain look like someone else's
        extra = action.body.get("extra", view.extra)
        return replace(view, flags=flags, reason=action.body["reason"], reason_changed_at=None, extra=extra)
    changes: dict[str, Any] = {}
    if action.kind == Do.RESUME:
        changes["flags"] = tuple(f for f in view.flags if f != "DRAIN")
    if action.kind in (Do.RESUME, Do.RETIRE) and action.body is not None and "extra" in action.body:
        changes["extra"] = action.body["extra"]
    return replace(view, **changes) if changes else view
