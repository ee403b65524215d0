"""node_exporter textfile-collector metrics, written atomically. Stdlib only (hot path).

The collector reads ``*.prom`` files from its directory at scrape time, so the file is written
to a temporary name in the same directory and renamed (mode 0644: node_exporter runs as another
user). Format: the Prometheus text exposition format, version 0.0.4.
"""

from __future__ import annotations

from spurinv import store
from spurinv.store import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(state: Mapping[str, Any], tick_seconds: float, node: str, version: str) -> str:
    """Render metrics from the raw state document (the JSON form of :class:`spurinv.state.State`)."""
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
    lines += [
        "# HELP spurinv_last_success_timestamp_seconds When discovery last succeeded (Unix time).",
        "# TYPE spurinv_last_success_timestamp_seconds gauge",
        f"spurinv_last_success_timestamp_seconds {_epoch(success) if success else 0}",
        "# HELP spurinv_change_pending 1 while a change waits for confirmation, refusal or jobs.",
        "# TYPE spurinv_change_pending gauge",
        f"spurinv_change_pending {1 if state.get('pending') or state.get('refusal') else 0}",
        "# HELP spurinv_drain_active 1 while a drain set by spurinv is on the node.",
        "# TYPE spurinv_drain_active gauge",
        f"spurinv_drain_active {1 if state.get('drain') else 0}",
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
    return "\n".join(lines) + "\n"


def _epoch(stamp: str) -> int:
    """``2026-12-02T18:00:00Z`` → Unix seconds, without importing datetime (hot path)."""
    import calendar
    import time

    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))


def write(path: str, text: str) -> None:
    """Atomically replace ``path`` (mode 0644), in a directory that must exist (the collector's)."""
    try:
        store.write_atomic(path, text.encode(), 0o644, make_directory=False)
    except StoreError as exc:
        raise StoreError(f"metrics file: {exc}", exc.errno) from None
