"""SpurinvDrainTooLong on a drain whose recorded start is ahead of Prometheus's clock.

Every series is sampled each minute and the rules are evaluated each minute, as a real
Prometheus does: with samples 10 minutes apart a series is absent from half the evaluations
(the 5-minute lookback), which would hide what a ``for:`` does across a gap.
"""

from __future__ import annotations

from typing import Any

from test_monitoring import Scene, healthy, needs_promtool, node, promtool, series, stamp  # tests/ is on sys.path

HOUR = 3600


def drained(start: int, ahead: int, end: int | None = None) -> Scene:
    """A drain on from minute ``start`` (until ``end``), its start recorded ``ahead`` seconds
    after it was set (a node clock that was ahead, since corrected)."""

    def scene(minute: int) -> dict[str, Any]:
        state = healthy(minute)
        if minute >= start and (end is None or minute < end):
            state["drain"] = {"reason": "spurinv: [n1.ab12] x", "set_at": stamp(start * 60 + ahead), "cause": "busy"}
        return state

    return scene


def failed_scrapes(input_series: list[dict[str, str]], minutes: list[int]) -> list[dict[str, str]]:
    """node_exporter did not answer at these minutes: ``up`` is 0 and Prometheus marks every
    series of the target stale."""
    for entry in input_series:
        values = entry["values"].split()
        for minute in minutes:
            values[minute] = "0" if entry["series"].startswith("up{") else "stale"
        entry["values"] = " ".join(values)
    return input_series


def check(alert: str, at: str, *instances: str) -> dict[str, Any]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": [node(alert, instance) for instance in instances]}


@needs_promtool
def test_a_start_ahead_pages_once_and_stays_until_the_drain_ends(tmp_path):
    """Starts 7 h and 30 days ahead: the drain pages once it has been seen for 6 h and stays
    paged, also after the recorded start has come (7 h ahead: a second alert used to take over
    only 6 h after that, with the drain unreported in between). 6 h ahead: it used to wait 12 h."""
    scenes = {"ahead7h:9100": drained(60, 7 * HOUR), "ahead30d:9100": drained(60, 30 * 86400),
              "ahead6h:9100": drained(60, 6 * HOUR)}  # fmt: skip
    every = ("ahead6h:9100", "ahead30d:9100", "ahead7h:9100")
    promtool(
        tmp_path,
        series(scenes, 900),
        [
            check("SpurinvDrainTooLong", "6h50m"),
            *(check("SpurinvDrainTooLong", at, *every) for at in ("7h10m", "7h50m", "8h10m", "10h", "13h50m", "14h10m")),
        ],
    )


@needs_promtool
def test_a_start_ahead_pages_through_failed_scrapes(tmp_path):
    """One failed scrape while the drain waits, and one after it paged: neither delays nor ends
    the alert by 6 hours (a ``for: 6h`` started again after each)."""
    input_series = failed_scrapes(series({"ahead:9100": drained(60, 30 * HOUR)}, 900), [240, 480])
    promtool(
        tmp_path,
        input_series,
        [
            check("SpurinvDrainTooLong", "6h50m"),
            *(check("SpurinvDrainTooLong", at, "ahead:9100") for at in ("7h10m", "8h10m", "12h", "14h10m")),
        ],
    )


@needs_promtool
def test_a_drain_set_again_is_a_new_drain(tmp_path):
    """A drain lifted at 5 h and set again at 5h05 (both starts far ahead) is aged from 5h05, also
    when the second drain carries the first one's start (recovered from the same record)."""
    first, second = drained(60, 30 * HOUR, end=300), drained(305, 30 * HOUR)
    same = drained(60, 30 * HOUR)

    def scene(minute: int) -> dict[str, Any] | None:
        return (first if minute < 305 else second)(minute)

    def recovered(minute: int) -> dict[str, Any] | None:
        return first(minute) if minute < 305 else same(minute)

    promtool(
        tmp_path,
        series({"again:9100": scene, "recovered:9100": recovered}, 720),
        [
            check("SpurinvDrainTooLong", "7h10m"),
            check("SpurinvDrainTooLong", "11h10m", "again:9100", "recovered:9100"),
        ],
    )


@needs_promtool
def test_a_drain_a_node_clock_a_minute_ahead_set_pages_once(tmp_path):
    """A start a minute ahead: one alert from 6 h on, never two, never flapping."""
    promtool(
        tmp_path,
        series({"minute:9100": drained(60, 60), "ok:9100": healthy}, 600),
        [
            check("SpurinvDrainTooLong", "6h50m"),
            *(check("SpurinvDrainTooLong", at, "minute:9100") for at in ("7h02m", "7h30m", "10h")),
        ],
    )
