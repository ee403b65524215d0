"""node_exporter textfile-collector metrics, written atomically. Stdlib only (hot path).

The collector reads ``*.prom`` files from its directory at scrape time, so the file is written
to a temporary name in the same directory and renamed (mode 0644: node_exporter runs as another
user). Format: the Prometheus text exposition format, version 0.0.4.
"""

import errno

from spurinv import shape
from spurinv.state import locations, store
from spurinv.state.store import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(state: "Mapping[str, Any]", tick_seconds: float, node: str, version: str) -> str:
    """Render metrics from the raw state document (the JSON form of :class:`spurinv.state.file.State`)."""
    readings = state.get("readings") or []
    latest = readings[-1] if readings else None
    inventory = (latest or {}).get("inventory") if latest and latest.get("ok") else None
    counts: dict[tuple[str, str], int] = {}
    for device in (inventory or {}).get("devices", []):
        key = (device["vendor"], device["model"])
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# HELP spurinv_info spurinv version and node name.",
        "# TYPE spurinv_info gauge",
        f'spurinv_info{{node="{_escape(node)}",version="{_escape(version)}"}} 1',
        "# HELP spurinv_devices Schedulable devices in the latest reading, by vendor and model (none while discovery fails).",
        "# TYPE spurinv_devices gauge",
    ]
    lines += [f'spurinv_devices{{vendor="{_escape(v)}",model="{_escape(m)}"}} {n}' for (v, m), n in sorted(counts.items())]
    success = state.get("last_success")
    switch = state.get("switching")
    from spurinv.inventory.sources import link

    degraded = link.confirmed(state.get("readings") or [])
    lines += [
        "# HELP spurinv_last_success_timestamp_seconds When discovery last succeeded (Unix time).",
        "# TYPE spurinv_last_success_timestamp_seconds gauge",
        f"spurinv_last_success_timestamp_seconds {shape.epoch(success) or 0}",
        "# HELP spurinv_change_pending 1 while a change waits for confirmation, refusal or jobs.",
        "# TYPE spurinv_change_pending gauge",
        f"spurinv_change_pending {1 if state.get('pending') or state.get('refusal') else 0}",
        "# HELP spurinv_drain_active 1 while a drain set by spurinv is on the node.",
        "# TYPE spurinv_drain_active gauge",
        f"spurinv_drain_active {1 if state.get('drain') else 0}",
        "# HELP spurinv_drain_held 1 while spurinv's drain is held for an operator (spurinv will not lift it).",
        "# TYPE spurinv_drain_held gauge",
        f"spurinv_drain_held {1 if isinstance(state.get('drain'), dict) and state['drain'].get('held') is True else 0}",
        "# HELP spurinv_partition_switch_since_timestamp_seconds When the switch in progress was first seen (0: none).",
        "# TYPE spurinv_partition_switch_since_timestamp_seconds gauge",
        f"spurinv_partition_switch_since_timestamp_seconds {_since(switch, 'since')}",
        "# HELP spurinv_link_degraded A GPU's PCIe link narrower than it can be, in the last two readings (width as label).",
        "# TYPE spurinv_link_degraded gauge",
        *(
            f'spurinv_link_degraded{{pci_bdf="{_escape(d["pci_bdf"])}",width="{d["width"]}",max_width="{d["max_width"]}"}} 1'
            for d in degraded
        ),
        "# HELP spurinv_links_degraded GPUs whose PCIe link is degraded in the last two readings.",
        "# TYPE spurinv_links_degraded gauge",
        f"spurinv_links_degraded {len(degraded)}",
        "# HELP spurinv_discovery_failures_consecutive Consecutive failed discoveries.",
        "# TYPE spurinv_discovery_failures_consecutive gauge",
        f"spurinv_discovery_failures_consecutive {int(state.get('consecutive_failures') or 0)}",
        "# HELP spurinv_controller_errors_total Controller errors since the state file was created.",
        "# TYPE spurinv_controller_errors_total counter",
        f"spurinv_controller_errors_total {int(state.get('controller_errors') or 0)}",
        "# HELP spurinv_tick_duration_seconds Wall time of the last run.",
        "# TYPE spurinv_tick_duration_seconds gauge",
        f"spurinv_tick_duration_seconds {tick_seconds:.6f}",
    ]
    drain, pending, refusal, backoff = (state.get(key) for key in ("drain", "pending", "refusal", "backoff"))
    # the ages an alert needs, as timestamps (node clock): rules compare them with time() with a
    # tolerance far above any sane skew (monitoring/spurinv.rules.yml)
    lines += [
        "# HELP spurinv_drain_since_timestamp_seconds When spurinv set the drain that is on (Unix time; 0: none;"
        " 1: on since a time unknown, its start unreadable or at or before 1970).",
        "# TYPE spurinv_drain_since_timestamp_seconds gauge",
        f"spurinv_drain_since_timestamp_seconds {_drain_since(drain)}",
        "# HELP spurinv_change_pending_since_timestamp_seconds Since when a change seen once waits for its confirming"
        " reading (Unix time; 0: none, or confirmed: a confirmed change waiting for jobs or refused shows in"
        " spurinv_drain_since_timestamp_seconds and spurinv_refusal_since_timestamp_seconds).",
        "# TYPE spurinv_change_pending_since_timestamp_seconds gauge",
        f"spurinv_change_pending_since_timestamp_seconds {_since(_unconfirmed(pending, readings), 'since')}",
        "# HELP spurinv_refusal_active 1 while the controller refuses (or ignores) the update for this inventory.",
        "# TYPE spurinv_refusal_active gauge",
        f"spurinv_refusal_active {1 if refusal else 0}",
        "# HELP spurinv_refusal_since_timestamp_seconds When the controller refused the update (Unix time; 0: none).",
        "# TYPE spurinv_refusal_since_timestamp_seconds gauge",
        f"spurinv_refusal_since_timestamp_seconds {_since(refusal, 'at')}",
        "# HELP spurinv_controller_failures_consecutive Controller errors in a row (backoff), by kind; 0: last contact worked.",
        "# TYPE spurinv_controller_failures_consecutive gauge",
    ]
    if isinstance(backoff, dict) and backoff.get("kind"):
        kind = _escape(str(backoff["kind"]))
        lines.append(f'spurinv_controller_failures_consecutive{{kind="{kind}"}} {int(backoff.get("failures") or 0)}')
    else:
        lines.append('spurinv_controller_failures_consecutive{kind="none"} 0')
    skew = _skew(drain)
    if skew is not None:
        lines += [
            "# HELP spurinv_drain_clock_skew_seconds The controller's time for our drain's reason minus ours (while it is on).",
            "# TYPE spurinv_drain_clock_skew_seconds gauge",
            f"spurinv_drain_clock_skew_seconds {skew}",
        ]
    return "\n".join(lines) + "\n"


def _unconfirmed(pending: object, readings: "list[Any]") -> object:
    """The pending change while it is not yet confirmed; None once the last two readings agree on
    it (it stays in the state until it is registered: a busy drain or a refusal holds it there)."""
    if not isinstance(pending, dict):
        return None
    last = [reading for reading in readings[-2:] if isinstance(reading, dict)]
    if len(last) == 2 and all(r.get("ok") and r.get("fingerprint") == pending.get("fingerprint") for r in last):
        return None
    return pending


def _since(record: object, key: str) -> int:
    """The Unix time of ``record[key]`` (a state timestamp), 0 when there is none (or it is no
    time spurinv writes: a gauge hours off would be worse than none)."""
    return (shape.epoch(record.get(key)) if isinstance(record, dict) else None) or 0


def _drain_since(drain: object) -> int:
    """When the drain that is on was set; 1 when that is no time (unreadable, at or before 1970):
    0 would read as none and keep the long-drain alert quiet for as long as the drain lasts. A
    time is not judged by the readings' clock: one stepped back would make the alert fire,
    resolve and fire again."""
    return max(_since(drain, "set_at"), 1) if isinstance(drain, dict) else 0


def _skew(drain: object) -> "int | None":
    if not isinstance(drain, dict):
        return None
    from spurinv.controller import ownership

    return ownership.drain_skew(drain)


def write(path: str, text: str) -> None:
    """Atomically replace ``path`` (mode 0644), in a directory that must exist (the collector's).
    Only a regular file is replaced: a FIFO, device node or link put there since the options were
    checked (the no-change tick does not check them again) is refused (73)."""
    if what := locations.not_regular(path):
        raise StoreError(f"metrics file: {path} is {what}; not replaced", errno.EEXIST)
    try:
        store.write_atomic(path, text.encode(), 0o644, make_directory=False)
    except StoreError as exc:
        raise StoreError(f"metrics file: {exc}", exc.errno) from None


def render_fleet(summary: "Mapping[str, Any] | None", taken_at: "int | None") -> str:
    """``spurinv fleet --metrics-file``: fleet gauges (only ``spurinv_fleet_up 0`` when the fleet could not be read)."""
    lines = [
        "# HELP spurinv_fleet_up 1 when spurinv fleet could read every node from the controller.",
        "# TYPE spurinv_fleet_up gauge",
        f"spurinv_fleet_up {0 if summary is None else 1}",
    ]
    if summary is None:
        return "\n".join(lines) + "\n"
    drains = summary["spurinv_drains"]
    oldest = max((drain["age_seconds"] or 0 for drain in drains), default=0)
    # a repeated series would make node_exporter drop the whole file; a node listed twice counts
    # once, dated if either listing is (the dated come first)
    dated: dict[str, str] = {}
    for drain in drains:
        if drain["since"] and drain["name"] not in dated:
            dated[drain["name"]] = drain["since"]
    undated = sorted({drain["name"] for drain in drains if not drain["since"]} - dated.keys())
    gauges = (
        ("last_success_timestamp_seconds", "When spurinv fleet last read the fleet (Unix time).", taken_at or 0),
        ("nodes", "Nodes the controller lists.", summary["nodes"]),
        ("managed_nodes", "Nodes with a spurinv record in extra or under a spurinv drain.", summary["managed"]),
        ("attention_nodes", "Nodes under a drain or whose gres changed since spurinv registered it.", summary["attention"]),
        ("gres_changed_nodes", "Managed nodes whose gres differs from what spurinv registered.", summary["gres_changed"]),
        ("orphaned_drain_nodes", "spurinv drains no id or record ties to their node (no spurinv lifts them by itself).",
         summary["orphaned_drained"]),
        ("oldest_drain_age_seconds",
         "Age of the oldest spurinv drain the controller dates (0: none, or only starts unknown or still to come).",
         oldest),
        ("undated_drain_nodes", "spurinv drains whose start the controller does not give (no age to alert on).",
         len(undated)),
    )  # fmt: skip
    for name, meaning, number in gauges:
        metric = f"spurinv_fleet_{name}"
        lines += [f"# HELP {metric} {meaning}", f"# TYPE {metric} gauge", f"{metric} {number}"]
    lines += [
        "# HELP spurinv_fleet_drained_nodes Drained or draining nodes, by whose drain it is (the reason's spurinv: prefix).",
        "# TYPE spurinv_fleet_drained_nodes gauge",
        f'spurinv_fleet_drained_nodes{{by="spurinv"}} {summary["spurinv_drained"]}',
        f'spurinv_fleet_drained_nodes{{by="others"}} {summary["drained_by_others"]}',
        "# HELP spurinv_fleet_drain_since_timestamp_seconds When each spurinv drain's reason was set (Unix time).",
        "# TYPE spurinv_fleet_drain_since_timestamp_seconds gauge",
    ]
    lines += [
        f'spurinv_fleet_drain_since_timestamp_seconds{{node="{_escape(name)}"}} {shape.epoch(since) or 0}'
        for name, since in dated.items()
    ]
    # per node, so that a rule can tell one drain lasting a day from two in turn
    lines += [
        "# HELP spurinv_fleet_drain_undated 1 for each spurinv drain whose start the controller does not give.",
        "# TYPE spurinv_fleet_drain_undated gauge",
        *(f'spurinv_fleet_drain_undated{{node="{_escape(name)}"}} 1' for name in undated),
    ]
    return "\n".join(lines) + "\n"
