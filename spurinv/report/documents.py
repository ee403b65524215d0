"""The JSON documents spurinv prints, built from plain dicts. Stdlib only.

``discover --json`` and ``status --json`` run from the lean entry point (no pydantic, no typer),
and the full CLI prints the very same documents by calling these functions, so there is one
builder per document (``fleet``'s is :func:`spurinv.report.fleet.document`). Each returns its
TypedDict of :mod:`spurinv.report.models` (the one statement of its shape, which ``scripts/schemas``
writes ``schemas/`` from): named for mypy only, as that module imports pydantic.
"""

from __future__ import annotations

from spurinv.shape import gpu_counts, summary, switch_only

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

    from spurinv.inventory.model import InventoryDiff, Outcome
    from spurinv.report.models import (
        C,
        CheckDocument,
        CheckResult,
        ConfigDocument,
        DiffDocument,
        DiscoverDocument,
        ErrorDocument,
        Head,
        ReadingSummary,
        RefreshDocument,
        StatusDocument,
        Step,
    )

FORMAT_VERSION: Final = 1  # of every JSON document spurinv prints


def head(command: C, exit_code: int) -> Head[C]:
    """What every document starts with: its format version, its command, ok, and the exit code."""
    return {"format_version": FORMAT_VERSION, "command": command, "ok": exit_code == 0, "exit_code": exit_code}


def dumps(document: Mapping[str, Any], compact: bool = False) -> str:
    """Serialise a document for stdout (sorted keys, so output is stable).

    ``compact``: one line, for documents that can be large (``fleet``): only without ``indent``
    does the json module use its C encoder (10,000 nodes: 0.09 s instead of 0.24 s).
    """
    import json  # not at the top: status --json imports this module, and json imports re

    if compact:
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    else:
        text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return _valid_utf8(text)


def _valid_utf8(text: str) -> str:
    """A lone surrogate (a path that is not UTF-8, as ``os.listdir`` gives it) written as is would
    make stdout invalid UTF-8: each becomes the JSON spelling of ``\\xff`` (a literal backslash).
    Surrogates only occur inside JSON strings, so the document stays valid JSON."""
    from spurinv.inventory.sources.status import escaped

    return escaped(text, inside_json=True)


def error_document(command: str, exit_code: int, code: str, message: str) -> ErrorDocument:
    """Any command that failed before producing its own document: once JSON is asked for, even a
    failure is an envelope."""
    return {
        **head(command, exit_code),
        "error": {"code": code, "message": message},
    }


def step(action: str, reason: str, request: str | None = None, sent: bool = False, error: str | None = None) -> Step:
    """One step of a refresh (``refresh --json``'s ``steps``): the policy's action and why, and the
    request it sent (or, ``sent`` false, would send) and its error."""
    return {"action": action, "reason": reason, "request": request, "sent": sent, "error": error}


def refresh_document(
    exit_code: int,
    node: str,
    observe: bool,
    dry_run: bool,
    state_file: str,
    controller: str | None,
    reading: Mapping[str, Any],
    outcome: Outcome,
    steps: list[Step],
    requests: list[dict[str, Any]],
    notes: list[str],
) -> RefreshDocument:
    """``refresh --json`` (and what the human rendering reads): the run's reading (JSON form),
    the classifier's outcome (as it is: a plain dict), the steps taken and the requests sent."""
    inventory = reading["inventory"]
    return {
        **head("refresh", exit_code),
        "node": node,
        "mode": "observe" if observe else "controller",
        "dry_run": dry_run,
        "state_file": state_file,
        "controller": controller,
        "reading_ok": reading["ok"],
        "fingerprint": reading["fingerprint"],
        "inventory": summary(inventory) if inventory else None,
        "outcome": outcome,
        "steps": steps,
        "requests": requests,
        "errors": list(reading.get("errors") or ()),
        "notes": notes,
    }


def diff_document(
    exit_code: int,
    state_file: str,
    discovery: Mapping[str, Any],
    baseline: str | None,
    different: bool,
    diffs: tuple[InventoryDiff | None, InventoryDiff | None],
    links: list[str],
) -> DiffDocument:
    """``diff --json``: discovery now (its JSON form) against the baseline (its fingerprint) and
    the last reading: ``diffs`` are the two inventory diffs, None where there is none."""
    inventory = discovery["inventory"]
    return {
        **head("diff", exit_code),
        "state_file": state_file,
        "discovery_ok": discovery["ok"],
        "errors": list(discovery["errors"]),
        "current": inventory["fingerprint"] if inventory else None,
        "baseline": baseline,
        "different": different,
        "vs_baseline": diffs[0],
        "vs_latest_reading": diffs[1],
        "links": links,
    }


def check_document(root: str, exit_code: int, checks: list[CheckResult]) -> CheckDocument:
    """``check --json``: every check, in order."""
    return {**head("check", exit_code), "root": root, "checks": checks}


def config_document(path: str, exists: bool, values: dict[str, Any], origins: dict[str, str]) -> ConfigDocument:
    """``config show --json``: effective values and where each came from."""
    return {
        **head("config", 0),
        "file": path,
        "file_exists": exists,
        "values": values,
        "origins": origins,
    }


def discover_document(discovery: Mapping[str, Any], root: str, exit_code: int) -> DiscoverDocument:
    """``discover --json``: the discovery result, framed."""
    return {
        **head("discover", exit_code),
        "root": root,
        "discovery_ok": discovery["ok"],
        "inventory": discovery["inventory"],
        "sources": discovery["sources"],
        "errors": discovery["errors"],
        "flags": discovery["flags"],
    }


def _reading_summary(reading: Mapping[str, Any]) -> ReadingSummary:
    inventory = reading.get("inventory")
    return {
        "taken_at": reading["taken_at"],  # required of every reading (spurinv/state/state.schema.json)
        "ok": bool(reading.get("ok")),
        "fingerprint": reading.get("fingerprint"),
        "devices": len(inventory["devices"]) if inventory else None,
        "models": gpu_counts(inventory),
        "cpus": inventory["cpus"] if inventory else None,
        "memory_mb": inventory["memory_mb"] if inventory else None,
        "errors": list(reading.get("errors") or []),
        "flags": list(reading.get("flags") or []),
    }


def attention(state: Mapping[str, Any]) -> list[str]:
    """What an operator should know, in plain words (also shown by ``status``)."""
    notes = []
    if state.get("refusal"):
        notes.append(
            "the controller refused or did not apply the new inventory "
            f"({state['refusal'].get('error')}); "
            # a state file from before 0.2 has no remedy: it was always Slurm's
            f"{state['refusal'].get('remedy') or 'update its configuration: see `spurinv discover --format slurm`'}"
        )
    drain = state.get("drain")
    if drain:
        notes.append(f"spurinv drained this node ({drain.get('cause')}): {drain.get('reason')}")
        notes += _drain_notes(drain)
        if drain.get("held") is True:
            notes.append(
                "our drain is held for an operator (the node is also DOWN or flagged, or slurmctld appended to its "
                "reason): spurinv will not lift it; once fixed: "
                f"scontrol update NodeName={state.get('node') or '<node>'} State=UNDRAIN"
            )
    intent = state.get("intent")
    if isinstance(intent, dict):
        notes.append(
            f"a controller write ({intent.get('kind')}, {intent.get('at')}) was sent or about to be sent but its outcome "
            "is unknown; the next run that reaches the controller settles it from the node's state"
        )
    backoff = state.get("backoff")
    if backoff:
        notes.append(f"controller backoff ({backoff.get('kind')}) until {backoff.get('next_attempt')}: {backoff.get('error')}")
    from spurinv.inventory.sources import link

    for degraded in link.confirmed(state.get("readings") or []):
        notes.append(f"degraded PCIe link: {link.line(degraded)} ({degraded['speed'] or 'unknown'}), in the last two readings")
    switch = state.get("switching")
    if isinstance(switch, dict):
        latest = (state.get("readings") or [{}])[-1]
        errors = latest.get("errors") or [] if isinstance(latest, dict) else []
        if switch_only(error.get("source") if isinstance(error, dict) else None for error in errors):
            notes.append(f"partition switch in progress since {switch.get('since')}: waiting for the settled reading")
        else:  # a single settled reading does not end a switch (ledger.record)
            since = switch.get("since")
            notes.append(f"partition switch in progress since {since}: one settled reading so far, a second ends it")
    if int(state.get("consecutive_failures") or 0) > 0:
        notes.append(f"discovery failed {state['consecutive_failures']} time(s) in a row")
    return notes


def _drain_notes(drain: Mapping[str, Any]) -> list[str]:
    """A drain rebuilt from the controller, and the clock skew its reason time shows."""
    from spurinv.controller import ownership

    notes = []
    if drain.get("recovered") == "controller-record":
        notes.append("drain recovered from the controller record (the state file had been lost or moved aside)")
    elif drain.get("recovered") == "reason":
        notes.append(
            "drain recovered from the id in its reason (the state file had been lost; no record of ours in the node's extra)"
        )
    warning = ownership.skew_warning(ownership.drain_skew(dict(drain)))
    if warning:
        notes.append(warning)
    return notes


def _degraded_links(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    from spurinv.inventory.sources import link

    return link.confirmed(state.get("readings") or [])


def discover_exit(result: Mapping[str, Any]) -> int:
    """``discover``'s status: 0, 75 when it caught a partition switch in progress (every error of
    the source ``switch``: come back later), 74 for any other failure."""
    from spurinv import exitcode  # stdlib-only constants; imported where used, as elsewhere here

    if result["ok"]:
        return exitcode.OK
    return exitcode.TEMPFAIL if switch_only(error["source"] for error in result["errors"]) else exitcode.IOERR


def status_document(state: Mapping[str, Any] | None, path: str) -> StatusDocument:
    """``status --json`` from the raw state document (None: no state file yet)."""
    if state is None:
        return {
            **head("status", 0),
            "state_file": path,
            "exists": False,
            "node": None,
            "readings": [],
            "baseline": None,
            "pending": None,
            "last_decision": None,
            "drain": None,
            "refusal": None,
            "backoff": None,
            "switching": None,
            "degraded_links": [],
            "api": None,
            "consecutive_failures": 0,
            "controller_errors": 0,
            "last_success": None,
            "errors": [],
            "attention": [],
        }
    readings = [_reading_summary(reading) for reading in state.get("readings") or []]
    baseline = state.get("baseline")
    latest = readings[-1] if readings else None
    return {
        **head("status", 0),
        "state_file": path,
        "exists": True,
        "node": state.get("node"),
        "readings": readings,
        "baseline": {
            "fingerprint": baseline["inventory"]["fingerprint"],
            "since": baseline["since"],
            "source": baseline["source"],
            "devices": len(baseline["inventory"]["devices"]),
            "models": gpu_counts(baseline["inventory"]),
        }
        if baseline
        else None,
        "pending": state.get("pending"),
        "last_decision": state.get("last"),
        "drain": state.get("drain"),
        "refusal": state.get("refusal"),
        "backoff": state.get("backoff"),
        "switching": state.get("switching"),
        "degraded_links": _degraded_links(state),
        "api": state.get("api"),
        "consecutive_failures": int(state.get("consecutive_failures") or 0),
        "controller_errors": int(state.get("controller_errors") or 0),
        "last_success": state.get("last_success"),
        "errors": latest["errors"] if latest else [],
        "attention": attention(state),
    }
