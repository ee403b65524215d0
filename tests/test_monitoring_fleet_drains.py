"""The fleet's drain alerts, SpurinvFleetOldDrain and SpurinvFleetUndatedDrain, on what
``spurinv fleet --metrics-file`` writes each minute (``fleet.build`` then ``render_fleet``).

A series that leaves the file while node_exporter still answers (a fleet run that could not read
the controller writes only ``spurinv_fleet_up 0``) is marked stale, as Prometheus does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_monitoring import expected, needs_promtool, promtool  # tests/ is on sys.path

from spurinv.report import fleet, metrics

NOW = 1_800_000_000
FleetScene = Callable[[int], list[dict[str, Any]] | None]  # minute -> the nodes (None: the controller failed)


def drain(name: str, changed_at: object = ...) -> dict[str, Any]:
    """A node under a spurinv drain; ``reason_changed_at`` as given (left out: ...)."""
    node: dict[str, Any] = {"name": name, "state": ["IDLE", "DRAIN"], "reason": f"spurinv: [{name}.ab12] x"}
    if changed_at is not ...:
        node["reason_changed_at"] = changed_at
    return node


def fleet_series(scene: FleetScene, minutes: int) -> list[dict[str, str]]:
    found: dict[str, list[str]] = {}
    for minute in range(minutes + 1):
        nodes = scene(minute)
        now = minute * 60
        text = metrics.render_fleet(None if nodes is None else fleet.build(nodes, now)["summary"], now)
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = {**sample.labels, "instance": "ctl:9100", "job": "node"}
                inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
                found.setdefault(f"{sample.name}{{{inner}}}", ["_"] * (minutes + 1))[minute] = repr(float(sample.value))
    for values in found.values():
        for index in range(1, len(values)):
            if values[index] == "_" and values[index - 1] not in ("_", "stale"):
                values[index] = "stale"
    return [{"series": name, "values": " ".join(values)} for name, values in found.items()]


def check(alert: str, at: str, fires: bool) -> dict[str, Any]:
    alerts = [expected(alert, instance="ctl:9100", job="node")] if fires else []
    return {"eval_time": at, "alertname": alert, "exp_alerts": alerts}


@needs_promtool
def test_two_undated_drains_in_turn_are_not_one_a_day_long(tmp_path):
    """Undated drains on a (0 to 14 h) and b (13 h to 27 h): the count stayed above 0 for 27 h,
    but no drain lasted a day."""

    def scene(minute: int) -> list[dict[str, Any]]:
        return [drain(name) for name, start, end in (("a", 0, 840), ("b", 780, 1620)) if start <= minute < end]

    promtool(tmp_path, fleet_series(scene, 1620), [check("SpurinvFleetUndatedDrain", at, False) for at in ("24h10m", "26h")])


@needs_promtool
def test_an_undated_drain_pages_after_a_day_through_a_failed_fleet_run(tmp_path):
    """One fleet run at 12 h could not read the controller: the drain still pages at a day."""

    def scene(minute: int) -> list[dict[str, Any]] | None:
        return None if minute == 720 else [drain("a")]

    promtool(
        tmp_path,
        fleet_series(scene, 1800),
        [check("SpurinvFleetUndatedDrain", "23h50m", False),
         *(check("SpurinvFleetUndatedDrain", at, True) for at in ("24h10m", "30h"))],
    )  # fmt: skip


@needs_promtool
def test_a_drain_the_controller_dated_ahead_pages_after_a_day(tmp_path):
    """The controller's clock was 2 h ahead when it set the reason (since corrected): the drain
    pages once it has been seen a day and stays paged as its start comes; one rightly dated
    pages once, not once per rule clause."""
    promtool(
        tmp_path,
        fleet_series(lambda minute: [drain("ahead", 7200)], 1620),
        [check("SpurinvFleetOldDrain", "23h50m", False),
         *(check("SpurinvFleetOldDrain", at, True) for at in ("24h10m", "25h", "26h10m", "27h"))],
    )  # fmt: skip


@pytest.mark.parametrize(
    "changed_at",
    [..., None, 0, -5, 1.8e9, "1799910000", True, 253402300800,
     {"set": False, "infinite": False, "number": NOW - 90000}, {"set": True, "infinite": True, "number": 0},
     {"set": True, "infinite": False, "number": NOW - 90000}, NOW - 90000, NOW + 7200, 1, 253402300799],
)  # fmt: skip
def test_each_drain_is_dated_or_undated_once(changed_at):
    """Every spurinv drain is in exactly one of the since series and the undated series, and the
    undated gauge counts the latter; a node listed twice counts once."""
    nodes = [drain("n1", changed_at), drain("n2"), drain("n2", NOW - 60)]
    text = metrics.render_fleet(fleet.build(nodes, NOW)["summary"], NOW)
    samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    dated = {s.labels["node"] for s in samples if s.name == "spurinv_fleet_drain_since_timestamp_seconds"}
    undated = {s.labels["node"] for s in samples if s.name == "spurinv_fleet_drain_undated"}
    (count,) = (s.value for s in samples if s.name == "spurinv_fleet_undated_drain_nodes")
    assert dated | undated == {"n1", "n2"}
    assert not dated & undated
    assert count == len(undated)
    assert "n2" in dated
