"""The state file's bookkeeping, once, on its plain JSON shape. Stdlib only (hot path).

Both runs keep the books through here: the timer's no-change tick (:mod:`spurinv.cli.tick`) on the
raw JSON document, and the full run (:mod:`spurinv.refresh`, through :func:`spurinv.state.file.record`)
on the same dicts as validated when the file was loaded (``tests/test_ledger.py`` proves they
agree). Three things live here:

* :func:`record` — append a reading (keeping two), track the pending change, count failures;
* :func:`decision` and :func:`memo` (with :func:`settled` and :func:`steady_key`) — what a run
  writes as its ``last`` decision, and the ``steady`` memo a no-change run leaves for the next tick;
* :func:`replay` — the tick: apply a memo to a new reading, or say that the full run must decide.
"""

import os
import time

from spurinv import shape
from spurinv.inventory.sources import link
from spurinv.shape import (
    KEEP_READINGS,
    NO_ACTION,
    QUIET,
    QUIET_OBSERVE,
    SCHEMA_VERSION,
    UNCHANGED,
    UNCHANGED_REASON,
    accepted_link,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any, TypeVar

    R = TypeVar("R")  # a reading: the raw JSON dict on the tick, the validated model.Reading on the full run
    T = TypeVar("T")  # a timestamp: ``2026-12-02T18:00:00Z`` on the tick, an aware datetime on the full run

# What a full run records for an unchanged reading (classify.classify's reason and policy.decide's
# step, in the words spurinv.shape keeps for both): a tick writes the same books, which
# tests/test_ledger.py's property test holds it to.
_QUIET = (f"{NO_ACTION}: {QUIET}", f"{NO_ACTION}: {QUIET_OBSERVE}")


def now_text() -> str:
    """The current UTC time as ``2026-12-02T18:00:00Z`` (whole seconds, as pydantic writes it)."""
    return shape.stamp(int(time.time()))


def steady_key(
    root: str, config_identity: str, metrics_flag: "str | None", node_flag: "str | None", host: str, boot: str = ""
) -> str:
    """Everything besides the fingerprint that a no-change run's answer depends on.

    The root read, the config file's identity (path, inode, size, mtime: it holds the discovery
    settings, the node name and the mode), and the command-line flags a tick can carry that change
    what is written: ``--metrics-file`` and ``--node`` (the node labels the metrics), plus the
    host name the node name defaults to, and the boot (a state file from another boot must be
    checked against the controller by a full run: :func:`spurinv.inventory.root.boot_id`).
    """
    return (
        f"root={os.path.abspath(root)}|config={config_identity}|metrics={metrics_flag or ''}|node={node_flag or ''}|host={host}"
        + (f"|boot={boot}" if boot else "")
    )


def record(
    state: "Mapping[str, Any]",
    reading: "R",
    *,
    ok: bool,
    fingerprint: "str | None",
    taken_at: "T",
    baseline: "str | None",
    switching: bool = False,
    overdue: bool = False,
    previous_switching: bool = False,
) -> "dict[str, Any]":
    """The top-level fields that change when ``reading`` is recorded into ``state``.

    ``state`` needs ``readings``, ``pending`` (``{"fingerprint", "since"}`` or None),
    ``consecutive_failures``, ``last_success`` and ``switching`` (``{"since"}`` or None);
    ``baseline`` is the baseline's fingerprint.
    A successful reading that differs from the baseline is pending from the first time it was
    seen; one equal to the baseline clears it; a failure changes neither (it only resets
    confirmation, which :mod:`spurinv.inventory.classify` reads from the readings kept).
    A ``switching`` reading (a partition switch in progress) keeps the time the switch was first
    seen and is no failure, unless ``overdue`` (longer than ``policy.switch_timeout``). The switch
    ends only at the second reading in a row without one (``previous_switching`` says whether the
    last reading kept had one): a switch alternating with single settled readings keeps its start,
    so it still times out. A start later than ``taken_at`` (written under a clock ahead) is moved
    back to ``taken_at``, or the timeout could never come.
    """
    readings: Sequence[R] = state.get("readings") or ()
    pending = state.get("pending")
    if ok and fingerprint != baseline:
        if pending is None or pending["fingerprint"] != fingerprint:
            pending = {"fingerprint": fingerprint or "", "since": taken_at}
    elif ok:
        pending = None
    switch = state.get("switching")
    failures = int(state.get("consecutive_failures") or 0)
    return {
        "readings": [*readings, reading][-KEEP_READINGS:],
        "pending": pending,
        "consecutive_failures": 0 if ok else failures + (0 if switching and not overdue else 1),
        "last_success": taken_at if ok else state.get("last_success"),
        "switching": _switch(switch, taken_at, switching, previous_switching),
    }


def _switch(switch: "Mapping[str, Any] | None", taken_at: "Any", switching: bool, previous: bool) -> "dict[str, Any] | None":
    if switch is None or not (switching or previous):
        # one settled reading between two switching ones is part of the same switch; two end it
        return {"since": taken_at} if switching else None
    return {"since": min(switch["since"], taken_at)}


def decision(
    at: "T", outcome: str, action: str, reason: str, exit_code: int, requests: int, actions: "list[str]"
) -> "dict[str, Any]":
    """The ``last`` field: what a run found, what it did (every step), and why."""
    return {
        "at": at,
        "outcome": outcome,
        "action": action,
        "reason": reason,
        "exit_code": exit_code,
        "requests": requests,
        "actions": actions,
    }


def metrics_failed(last: "Mapping[str, Any]", error: str, exit_code: int) -> "dict[str, Any]":
    """The ``last`` decision once the metrics write after the state write failed: the run's real
    exit status and the failure as its last action (``status`` shows both).

    The state is written first, so a crash never leaves metrics newer than the state; when the
    metrics then fail, the run amends its record with this (a second write, on this path only).
    The memo stays: the controller's answer did not change, and the next tick retries the metrics.
    """
    return {**last, "exit_code": exit_code, "actions": [*last.get("actions", ()), f"metrics: {error}"]}


def settled(state: "Mapping[str, Any]", outcome: str, exit_code: int, observe: bool) -> bool:
    """May this run leave a memo? Only an *unchanged*, successful run with nothing outstanding.

    Nothing outstanding: no drain, refusal, backoff, pending change or unsettled write intent, and a baseline the
    current mode trusts (an observed baseline was never told to a controller).
    """
    baseline = state.get("baseline")
    return (
        outcome == UNCHANGED
        and exit_code == 0
        and all(state.get(name) is None for name in ("drain", "refusal", "backoff", "pending", "intent"))
        and baseline is not None
        and (observe or baseline["source"] != "observed")
    )


def memo(
    fingerprint: str,
    key: str,
    cdi_dirs: "Iterable[str]",
    ignore_pci: "Iterable[str]",
    metrics_file: "str | None",
    node: str,
    observe: bool = False,
    drain_links: bool = False,
) -> "dict[str, Any]":
    """The ``steady`` field: what the next tick needs to replay this run without the config."""
    return {
        "drain_links": drain_links,
        "fingerprint": fingerprint,
        "key": key,
        "cdi_dirs": list(cdi_dirs),
        "ignore_pci": list(ignore_pci),
        "metrics_file": metrics_file,
        "node": node,
        "observe": observe,
    }


def memo_for(state: "Mapping[str, Any]", key: str) -> "dict[str, Any] | None":
    """The memo in a raw state document, if it was left for exactly this ``key``."""
    steady = state.get("steady")
    if state.get("schema_version") != SCHEMA_VERSION or not isinstance(steady, dict) or steady.get("key") != key:
        return None
    return steady


def replay(
    state: "Mapping[str, Any]", steady: "Mapping[str, Any]", discovery: "Mapping[str, Any]", taken_at: str
) -> "dict[str, Any] | None":
    """The state after a tick that found the memo's fingerprint again, or None: the full run decides.

    The same situation as the run that left the memo, so the same books: the reading recorded,
    the decision *unchanged, no action*, the memo kept, in the words a full run uses for an
    unchanged reading (observe mode says so).
    """
    inventory = discovery["inventory"]
    if not discovery["ok"] or inventory is None or inventory["fingerprint"] != steady["fingerprint"]:
        return None
    baseline = state.get("baseline")
    if baseline is None or baseline["inventory"]["fingerprint"] != steady["fingerprint"]:
        return None  # a hand-edited file: the memo no longer describes it
    new = shape.reading(discovery, taken_at)
    books = record(state, new, ok=True, fingerprint=new["fingerprint"], taken_at=taken_at, baseline=steady["fingerprint"])
    accepted = list(state.get("accepted_links") or ())
    if accepted:  # as State.record: a link read at another width twice is no longer accepted
        books["accepted_links"] = link.still_accepted(accepted, books["readings"])
    confirmed = [found for found in link.confirmed(books["readings"])
                 if accepted_link(found) not in accepted]  # fmt: skip
    if steady.get("drain_links") and confirmed:
        return None  # policy.drain_on_degraded_link: the full run drains (not a memo's answer)
    return {
        **state,
        **books,
        "last": decision(taken_at, UNCHANGED, NO_ACTION, UNCHANGED_REASON, 0, 0, [_QUIET[bool(steady.get("observe"))]]),
    }
