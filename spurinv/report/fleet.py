"""The fleet view: every node the controller lists → one row each, and a summary. Pure.

A transport hands over all nodes as Slurm's data parser prints them — a list of node dicts:
the REST client's :meth:`spurinv.controller.rest.Controller.all_nodes` (``GET …/nodes``) today; the
``nodes`` list of ``scontrol show node --json`` has the same shape. Only these fields are read:
``name``, ``state`` (+ ``state_flags`` on v0.0.38; spur's display words), ``reason``,
``reason_changed_at``, ``reason_set_by_user``, ``gres`` and ``extra``.

Who owns a drain: the DRAIN flag decides "drained" (a resumed node may keep its old reason
text, docs/slurm-rest.md §3; README "Fleet view"), and the reason's ``spurinv:`` prefix decides
whose it looks like — the user that set it cannot tell (Slurm, NHC and spurinv all drain as
root). Whether spurinv will ever lift it is the rule ``refresh`` uses when its state is gone
(:func:`spurinv.controller.ownership.controller_claim`): a ``spurinv:`` drain whose reason carries no valid id
for the node, or contradicts our record in ``extra``, is *orphaned* — only a state file that
still knows it can lift it, so it needs a person. A node is *managed* when its ``extra`` holds
our record or it is under a ``spurinv:`` drain.

Plain dicts in the per-node loop (10,000 nodes in well under a second, bench/fleetview.py), typed
by :class:`spurinv.report.models.FleetDocument`, which ``scripts/schemas`` writes
``schemas/fleet.schema.json`` from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from spurinv import shape
from spurinv.controller.nodeview import node_state, split_gres, unbound
from spurinv.controller.ownership import PREFIX, changed_at, controller_claim, extra_record, owns
from spurinv.errors import ControllerError
from spurinv.report.documents import head

if TYPE_CHECKING:  # the module imports pydantic
    from spurinv.report.models import FleetAttention, FleetDocument, FleetDrain, FleetNode, FleetRecord, FleetSummary, FleetView

SPURINV_DRAIN: Final = "spurinv-drain"
ORPHANED_DRAIN: Final = "spurinv-drain-orphaned"
OTHER_DRAIN: Final = "drained-by-others"
GRES_CHANGED: Final = "gres-changed"
ATTENTION = (SPURINV_DRAIN, ORPHANED_DRAIN, OTHER_DRAIN, GRES_CHANGED)
# The fields a row reads: a transport keeps only these of each node while it reads the answer
FIELDS = ("name", "state", "state_flags", "reason", "reason_changed_at", "reason_set_by_user", "gres", "extra")


class NodeSource(Protocol):
    """A transport that can list every node in the data parser's shape, each reduced by ``keep``."""

    def all_nodes(self, keep: Callable[[Any], Any] | None = None) -> list[Any]: ...


def essentials(node: Any) -> Any:
    """What a row needs of a node (:data:`FIELDS`); anything but an object as it is, for
    :func:`build` to refuse."""
    return {key: node[key] for key in FIELDS if key in node} if isinstance(node, dict) else node


def gres_entries(text: str) -> list[str]:
    """A GRES string as a sorted list of ``name[:type]:count`` entries, socket bindings dropped.

    ``gpu:mi300x:8(S:0-1),fpga:4`` and ``fpga:4,gpu:mi300x:8`` are the same registration.
    """
    entries = (unbound(item) for item in split_gres(text))
    return sorted(entry for entry in entries if entry)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def row(node: Mapping[str, Any], now: int) -> FleetNode:
    """One node's row; ValueError when the dict is not a usable node (no name, no state)."""
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("a node without a name")
    _dialect, base, flags = node_state(node)
    reason = _text(node.get("reason")) or ""
    drained = "DRAIN" in flags
    ours = drained and reason.startswith(PREFIX)
    record = extra_record(node.get("extra"))
    since = changed_at(node.get("reason_changed_at")) if reason or drained else None
    # what refresh would conclude with no state file: will a spurinv ever lift this drain?
    recorded = owns(drained, reason, since, controller_claim(name, reason, node.get("extra"))) if ours else None
    gres = _text(node.get("gres"))
    registered: FleetRecord | None = None
    changed = None
    if record is not None:
        registered = {
            "fingerprint": _text(record.get("fingerprint")),
            "inventory": _text(record.get("inventory")),
            "gres": _text(record.get("gres")),
        }
        if registered["gres"] is not None and gres is not None:
            changed = gres_entries(gres) != gres_entries(registered["gres"])
    attention: list[FleetAttention] = []
    if ours:
        attention.append(SPURINV_DRAIN)
        if not recorded:
            attention.append(ORPHANED_DRAIN)
    elif drained:
        attention.append(OTHER_DRAIN)
    if changed:
        attention.append(GRES_CHANGED)
    return {
        "name": name,
        "state": base,
        "flags": list(flags),
        "drained": drained,
        "drain_owner": ("spurinv" if ours else "other") if drained else None,
        "drain_recorded": recorded,
        "reason": reason,
        "reason_set_by": _text(node.get("reason_set_by_user")) if reason else None,
        "reason_since": shape.stamp(since) if since is not None else None,
        "reason_age_seconds": max(0, now - since) if since is not None else None,
        "managed": record is not None or ours,
        "registered": registered,
        "gres": gres,
        "gres_changed": changed,
        "attention": attention,
    }


def build(nodes: Sequence[object], now: int) -> FleetView:
    """``{"nodes": [rows], "summary": {...}}`` from a transport's node list, at ``now`` (Unix seconds).

    Raises ControllerError("protocol") naming the entry when one is not a node: a transport
    that answers garbage for one node is answering garbage.
    """
    rows = []
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise ControllerError("protocol", f"nodes[{index}] is {type(node).__name__}, not a node object")
        try:
            rows.append(row(node, now))
        except (ValueError, TypeError) as exc:
            name = node.get("name")
            where = f"node {name[:80]!r}" if isinstance(name, str) and name else f"nodes[{index}]"
            raise ControllerError("protocol", f"{where}: unusable ({exc})") from None
    return {"nodes": rows, "summary": summary(rows)}


def summary(rows: Sequence[FleetNode]) -> FleetSummary:
    """Counts, our drains oldest first (unknown age last), the orphaned ones among them, and the
    nodes whose gres was changed."""
    ours = [r for r in rows if r["drain_owner"] == "spurinv"]
    ours.sort(key=lambda r: (r["reason_age_seconds"] is None, -(r["reason_age_seconds"] or 0)))
    orphans = [r for r in ours if not r["drain_recorded"]]
    return {
        "nodes": len(rows),
        "managed": sum(1 for r in rows if r["managed"]),
        "spurinv_drained": len(ours),
        "orphaned_drained": len(orphans),
        "drained_by_others": sum(1 for r in rows if r["drain_owner"] == "other"),
        "gres_changed": sum(1 for r in rows if r["gres_changed"]),
        "attention": sum(1 for r in rows if r["attention"]),
        "spurinv_drains": [_drain(r) for r in ours],
        "orphaned_drains": [_drain(r) for r in orphans],
        "gres_changed_nodes": [r["name"] for r in rows if r["gres_changed"]],
    }


def _drain(r: FleetNode) -> FleetDrain:
    return {"name": r["name"], "reason": r["reason"], "since": r["reason_since"], "age_seconds": r["reason_age_seconds"]}


def age_text(seconds: int | None) -> str:
    """Compact, for a table cell: ``45s``, ``12m``, ``3h05m``, ``2d04h``, ``400d``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds < 100 * 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"
    return f"{seconds // 86400}d"


def document(
    view: FleetView, *, now: int, controller: str, api: str | None, transport: Literal["rest", "scontrol"], exit_code: int
) -> FleetDocument:
    """``spurinv fleet --json``: the envelope, where the nodes came from and when, rows and summary."""
    return {
        **head("fleet", exit_code),
        "taken_at": shape.stamp(now),
        "controller": controller,
        "api": api,
        "transport": transport,
        **view,
    }
