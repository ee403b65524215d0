"""The node_exporter textfile: written by `refresh --metrics-file` on fixture roots,
checked with prometheus_client's parser of the text exposition format (what node_exporter and
promtool read)."""

from __future__ import annotations

import os
import socket
import stat
from typing import Any

import pytest
import rootbuilder as rb
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from spurinv import exitcode, shape
from spurinv.report import metrics

FAMILIES = {
    "spurinv_info": "gauge",
    "spurinv_devices": "gauge",
    "spurinv_last_success_timestamp_seconds": "gauge",
    "spurinv_change_pending": "gauge",
    "spurinv_drain_active": "gauge",
    "spurinv_drain_held": "gauge",
    "spurinv_partition_switch_since_timestamp_seconds": "gauge",
    "spurinv_link_degraded": "gauge",
    "spurinv_links_degraded": "gauge",
    "spurinv_discovery_failures_consecutive": "gauge",
    "spurinv_controller_errors": "counter",  # exposed as spurinv_controller_errors_total
    "spurinv_tick_duration_seconds": "gauge",
    "spurinv_drain_since_timestamp_seconds": "gauge",
    "spurinv_change_pending_since_timestamp_seconds": "gauge",
    "spurinv_refusal_active": "gauge",
    "spurinv_refusal_since_timestamp_seconds": "gauge",
    "spurinv_controller_failures_consecutive": "gauge",
}


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Parse the file; check that every family is declared with HELP and TYPE; return samples."""
    families = list(text_string_to_metric_families(text))
    assert FAMILIES == {family.name: family.type for family in families}
    declared = [line.split()[2] for line in text.splitlines() if line.startswith(("# HELP ", "# TYPE "))]
    for family in families:
        exposed = family.name + ("_total" if family.type == "counter" else "")
        assert 2 == declared.count(exposed), f"{exposed}: one HELP and one TYPE line"
        assert family.documentation
    return {family.name: [(sample.labels, sample.value) for sample in family.samples] for family in families}


def value(samples: dict, name: str) -> float:
    [(labels, number)] = samples[name]
    assert {} == labels
    return number


def refresh(cli, root, state, metrics_file, *extra):
    return cli("refresh", "--root", root, "--state", state, "--metrics-file", metrics_file, *extra)


def test_observe_mode_pending_then_confirmed_then_the_fast_path(cli, built, state_path, tmp_path):
    prom = tmp_path / "textfile" / "spurinv.prom"
    prom.parent.mkdir()
    cpx = built("mi300x-cpx")

    first = refresh(cli, cpx, state_path, prom, "--confirm-interval", "0")
    assert exitcode.OK == first.code
    samples = parse(prom.read_text())
    assert [({"vendor": "amd", "model": "mi300x"}, 64.0)] == samples["spurinv_devices"]
    assert 1 == value(samples, "spurinv_change_pending")  # first sighting, waits for a second reading
    assert 0 == value(samples, "spurinv_drain_active")
    assert 0 == value(samples, "spurinv_discovery_failures_consecutive")
    assert 0 == value(samples, "spurinv_controller_errors")
    assert 0 < value(samples, "spurinv_tick_duration_seconds") < 60
    assert 1_700_000_000 < value(samples, "spurinv_last_success_timestamp_seconds")
    [(info, one)] = samples["spurinv_info"]
    assert (1, {"node", "version"}) == (one, set(info))

    second = refresh(cli, cpx, state_path, prom, "--confirm-interval", "0")
    assert exitcode.OK == second.code
    assert 0 == value(parse(prom.read_text()), "spurinv_change_pending")

    # Same root, config and metrics flag: the lean tick, which rewrites the file too.
    prom.unlink()
    third = refresh(cli, cpx, state_path, prom)
    assert third.out.startswith("unchanged: 64 devices"), third.out
    samples = parse(prom.read_text())
    assert [({"vendor": "amd", "model": "mi300x"}, 64.0)] == samples["spurinv_devices"]
    assert 0 < value(samples, "spurinv_tick_duration_seconds")

    assert 0o644 == stat.S_IMODE(prom.stat().st_mode)  # node_exporter runs as another user
    assert ["spurinv.prom"] == os.listdir(prom.parent)  # no temporary file left behind


def test_devices_by_vendor_and_model_on_nvidia(cli, built, state_path, tmp_path):
    prom = tmp_path / "spurinv.prom"
    assert exitcode.OK == refresh(cli, built("nvidia-8"), state_path, prom, "--confirm-interval", "0").code
    assert [({"vendor": "nvidia", "model": "h100-80gb-hbm3"}, 8.0)] == parse(prom.read_text())["spurinv_devices"]


def test_failed_discoveries_count_up_and_keep_the_last_success_time(cli, root_copy, state_path, tmp_path):
    prom = tmp_path / "spurinv.prom"
    root = root_copy("mi300x-spx")
    assert exitcode.OK == refresh(cli, root, state_path, prom, "--confirm-interval", "0").code
    succeeded = value(parse(prom.read_text()), "spurinv_last_success_timestamp_seconds")

    rb.remove(root, "proc/meminfo")  # the memory source fails: the whole discovery fails
    for expected in (1, 2):
        assert exitcode.IOERR == refresh(cli, root, state_path, prom).code
        samples = parse(prom.read_text())
        assert expected == value(samples, "spurinv_discovery_failures_consecutive")
        assert succeeded == value(samples, "spurinv_last_success_timestamp_seconds")
        assert [] == samples["spurinv_devices"]  # no numbers from a reading that failed


def test_a_controller_error_is_counted(cli, built, state_path, tmp_path):
    prom = tmp_path / "spurinv.prom"
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        # no state yet: the first run reads the controller (a drain of ours a lost state knew?)
        result = refresh(cli, built("mi300x-spx"), state_path, prom, "--confirm-interval", "0", "--controller-url", url)
    assert exitcode.UNAVAILABLE == result.code
    samples = parse(prom.read_text())
    assert 1 == value(samples, "spurinv_controller_errors")
    assert 0 == value(samples, "spurinv_drain_active")
    # told apart from a discovery failure: the kind of the controller error, counted in a row
    assert [({"kind": "unreachable"}, 1.0)] == samples["spurinv_controller_failures_consecutive"]
    assert 0 == value(samples, "spurinv_discovery_failures_consecutive")


def test_an_unwritable_metrics_file_is_exit_73(cli, built, state_path, tmp_path):
    missing = tmp_path / "no-such-directory" / "spurinv.prom"
    assert exitcode.CANTCREAT == refresh(cli, built("mi300x-spx"), state_path, missing, "--confirm-interval", "0").code


label_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # type: ignore[arg-type]  # category literals


@given(node=label_text, version=label_text, model=label_text)
def test_label_values_survive_escaping(node, version, model):
    """Any node name, version or model string reads back unchanged (quotes, backslashes, newlines)."""
    state = {"readings": [{"ok": True, "inventory": {"devices": [{"vendor": "amd", "model": model}] * 2}}]}
    samples = parse(metrics.render(state, 0.25, node, version))
    assert [({"node": node, "version": version}, 1.0)] == samples["spurinv_info"]
    assert [({"vendor": "amd", "model": model}, 2.0)] == samples["spurinv_devices"]


@pytest.mark.parametrize("key", ["pending", "refusal"])
def test_a_pending_change_or_a_refusal_sets_change_pending(key):
    samples = parse(metrics.render({key: {"fingerprint": "ab"}}, 0.1, "n1", "0"))
    assert 1 == value(samples, "spurinv_change_pending")


def test_the_ages_alerts_need_are_timestamps_from_the_state():
    """a drain, a pending change and a refusal each say since when; none: 0."""
    state = {
        "drain": {"reason": "spurinv: [n1.ab12] x", "set_at": "2026-12-02T18:00:00Z", "cause": "busy"},
        "pending": {"fingerprint": "ab", "since": "2026-12-02T17:00:00Z"},
        "refusal": {"fingerprint": "ab", "at": "2026-12-02T16:00:00Z", "error": "no"},
        "backoff": {"kind": "auth", "failures": 4, "next_attempt": "2026-12-02T19:00:00Z", "error": "401"},
    }
    samples = parse(metrics.render(state, 0.1, "n1", "0"))
    assert 1796234400 == value(samples, "spurinv_drain_since_timestamp_seconds")
    assert 1796230800 == value(samples, "spurinv_change_pending_since_timestamp_seconds")
    assert 1796227200 == value(samples, "spurinv_refusal_since_timestamp_seconds")
    assert 1 == value(samples, "spurinv_refusal_active")
    assert [({"kind": "auth"}, 4.0)] == samples["spurinv_controller_failures_consecutive"]
    empty = parse(metrics.render({}, 0.1, "n1", "0"))
    for name in ("drain_since", "change_pending_since", "refusal_since"):
        assert 0 == value(empty, f"spurinv_{name}_timestamp_seconds")
    assert 0 == value(empty, "spurinv_refusal_active")
    assert [({"kind": "none"}, 0.0)] == empty["spurinv_controller_failures_consecutive"]


TIMES = ("last_success", "partition_switch_since", "drain_since", "change_pending_since", "refusal_since")


def every_time_at(when: object) -> dict[str, Any]:
    """A state whose every time the metrics show is ``when``, a drain on among them."""
    return {
        "last_success": when,
        "switching": {"since": when},
        "drain": {"reason": "spurinv: [n1.ab12] x", "set_at": when, "cause": "busy"},
        "pending": {"fingerprint": "ab", "since": when},
        "refusal": {"fingerprint": "ab", "at": when, "error": "no"},
    }


@pytest.mark.parametrize("when", ["2026-12-02T18:00:00.Z", "not a time", "", 1796234400])
def test_a_time_spurinv_did_not_write_is_no_time_not_a_wrong_one(when):
    """spurinv writes its times as RFC 3339 (shape.stamp). Anything else reads as 0, none: text
    that is no time stopped the metrics. A drain that is on reads as on since a time unknown, 1:
    none would keep its alert quiet."""
    state = every_time_at(when)
    samples = parse(metrics.render(state, 0.1, "n1", "0"))

    unknown = {**dict.fromkeys(TIMES, 0), "drain_since": 1}
    assert unknown == {name: value(samples, f"spurinv_{name}_timestamp_seconds") for name in TIMES}
    utc = parse(metrics.render({**state, "last_success": "2026-12-02T18:00:00Z"}, 0.1, "n1", "0"))
    assert 1796234400 == value(utc, "spurinv_last_success_timestamp_seconds")


@pytest.mark.parametrize("when", ["2026-12-02T20:00:00+02:00", "2026-12-02T12:30:00-05:30", "2026-12-02T18:00:00-00:00"])
def test_a_time_in_another_zone_reads_as_its_instant(when):
    """A hand-edited state file in local time: the state's model reads ``+02:00`` as that
    instant, and so do the metrics. Read as none, the drain that is on had no start (and the
    long-drain alert went quiet), the last success none, the refusal none; its zone ignored, the
    time was hours off."""
    state = every_time_at(when)
    samples = parse(metrics.render(state, 0.1, "n1", "0"))

    assert dict.fromkeys(TIMES, 1796234400) == {name: value(samples, f"spurinv_{name}_timestamp_seconds") for name in TIMES}


@pytest.mark.parametrize(
    "set_at",
    ["0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "not a time"],
    ids=["year-1", "epoch", "unreadable"],
)
def test_a_drain_on_since_no_time_we_wrote_reads_as_since_a_time_unknown(set_at):
    """A drain is on, but when it was set is no time: before 1970, or unreadable. 0 (none) or a
    negative time kept the long-drain alert quiet for as long as the drain lasts; 1 is a start so
    old the alert fires."""
    drain = {"reason": "spurinv: [n1.ab12] x", "set_at": set_at, "cause": "busy"}
    state: dict[str, object] = {"readings": [{"taken_at": "2026-12-02T18:00:00Z", "ok": False}], "drain": drain}

    samples = parse(metrics.render(state, 0.1, "n1", "0"))

    assert (value(samples, "spurinv_drain_active"), value(samples, "spurinv_drain_since_timestamp_seconds")) == (1, 1)


@pytest.mark.parametrize("behind", [0, 1800, 3601, 7200, 86400 * 365])
def test_a_drain_start_reads_as_written_whatever_the_readings_clock_says(behind):
    """The drain was set at 18:00 by a right clock; then the node's clock stepped back and the
    readings since are stamped ``behind`` seconds early. Judged by the last reading, the start
    read as unknown (1) once over an hour ahead: the long-drain alert fired at once, resolved
    when the clock caught up and fired again six hours later."""
    set_at = 1796234400  # 2026-12-02T18:00:00Z
    state: dict[str, object] = {
        "readings": [{"taken_at": shape.stamp(set_at + 60 - behind), "ok": False}],
        "drain": {"reason": "spurinv: [n1.ab12] x", "set_at": shape.stamp(set_at), "cause": "busy"},
    }

    samples = parse(metrics.render(state, 0.1, "n1", "0"))

    assert value(samples, "spurinv_drain_since_timestamp_seconds") == set_at


def test_status_shows_the_real_exit_status_of_a_run_whose_metrics_write_failed(cli, built, state_path, tmp_path, env):
    """The state is written first, then the metrics; when the metrics failed (73) the saved record
    still said exit 0, and ``status`` showed a clean run. Full run and tick alike."""
    from spurinv.cli import tick

    root = built("mi300x-spx")
    missing = tmp_path / "no-such-dir" / "spurinv.prom"
    args = ("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0", "--metrics-file", missing)
    for _ in range(2):  # a first sighting, then the confirmation: full runs
        assert cli(*args).code == 73
        full = cli("status", "--json", "--state", state_path).json()["last_decision"]
        assert full["exit_code"] == 73
        assert full["actions"][-1].startswith(f"metrics: metrics file: cannot write {missing}")

    assert tick.run({"--root": str(root), "--state": str(state_path), "--metrics-file": str(missing)}, env) == 73
    ticked = cli("status", "--json", "--state", state_path).json()
    human = cli("status", "--state", state_path)

    assert ticked["last_decision"]["exit_code"] == 73
    assert ticked["last_decision"]["actions"][-1].startswith(f"metrics: metrics file: cannot write {missing}")
    assert ticked["last_decision"]["at"] >= full["at"]
    assert "exit 73" in human.out

    missing.parent.mkdir()
    assert cli(*args).code == 0
    assert cli("status", "--json", "--state", state_path).json()["last_decision"]["exit_code"] == 0
