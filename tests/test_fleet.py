"""`spurinv fleet`: the pure fleet view on real captured all-nodes responses, the
80-column table (golden file), the JSON document against its model and schema, the metrics file,
and the command's exit statuses against a fault-injecting gateway.

Inputs are the real slurmrestd ``GET …/nodes`` captures in ``tests/fixtures/slurm/responses``
(22.05/v0.0.38, 24.11/v0.0.40-42, 25.05/v0.0.43); nodes the captures lack (our record in
``extra``, hostile names and reasons) are copies of a captured node with those fields edited.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import stat
import sys
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from faultserver import FaultServer, Gateway, Reply
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from spurinv import exitcode, shape
from spurinv.cli import render
from spurinv.controller import ownership
from spurinv.controller.nodeview import parse_gres, unbound
from spurinv.controller.ownership import MAX_EPOCH, changed_at
from spurinv.errors import ControllerError
from spurinv.report import fleet, metrics
from spurinv.report.models import FleetDocument, adapter

REPO = Path(__file__).resolve().parent.parent
RESPONSES = REPO / "tests" / "fixtures" / "slurm" / "responses"
GOLDEN = REPO / "tests" / "golden"
NOW = 1796316732  # 24 h after the 24.11 n2 drain was captured (reason_changed_at 1796230332)
FINGERPRINT = "31ad919b5202" + "0" * 52
RECORD = {"fingerprint": FINGERPRINT, "inventory": "8 devices (mi300x 8), 192 CPUs, 1547 GiB", "gres": "gpu:mi300x:8"}


def captured(name: str) -> dict[str, Any]:
    return json.loads((RESPONSES / f"{name}.json").read_text())


def nodes(name: str) -> list[dict[str, Any]]:
    return captured(name)["nodes"]


def by_name(view: Mapping[str, Any]) -> dict[str, Any]:
    return {row["name"]: row for row in view["nodes"]}


def edited(node: dict[str, Any], **changes: Any) -> dict[str, Any]:
    copied = copy.deepcopy(node)
    copied.update(changes)
    return copied


def extra(record: dict[str, Any], **foreign: Any) -> str:
    return json.dumps({**foreign, "spurinv": record}, sort_keys=True, separators=(",", ":"))


# --- the pure view on real captures --------------------------------------------------------------


@pytest.mark.parametrize("version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_slurm_24_11_other_drain_and_a_resumed_node_keeping_our_old_reason(version):
    """n1 was resumed but keeps "spurinv: batch drain" (no accounting, 24.11) and foreign plain
    text in extra: neither drained nor managed. n2 is drained by NHC: drained by others."""
    view = fleet.build(nodes(f"24.11/{version}/nodes-n1-idle-n2-drained"), NOW)
    rows = by_name(view)

    assert (False, None, False, [], None) == (
        rows["n1"]["drained"], rows["n1"]["drain_owner"], rows["n1"]["managed"], rows["n1"]["attention"],
        rows["n1"]["registered"],
    )  # fmt: skip
    n2 = rows["n2"]
    assert ("IDLE", ["DRAIN"], "other", False) == (n2["state"], n2["flags"], n2["drain_owner"], n2["managed"])
    assert "NHC: spurinv idle drain test" == n2["reason"]
    assert ("2026-12-02T16:52:12Z", 86400, "root") == (n2["reason_since"], n2["reason_age_seconds"], n2["reason_set_by"])
    assert ["drained-by-others"] == n2["attention"]
    assert "gpu:4,fpga:4" == n2["gres"]
    summary = view["summary"]
    assert (2, 0, 0, 1, 0, 1) == (
        summary["nodes"], summary["managed"], summary["spurinv_drained"], summary["drained_by_others"],
        summary["gres_changed"], summary["attention"],
    )  # fmt: skip


def test_slurm_22_05_our_drain_from_state_flags_and_a_plain_int_timestamp():
    view = fleet.build(nodes("22.05/v0.0.38/nodes-n1-drained-n2-idle"), NOW)
    n1, n2 = by_name(view)["n1"], by_name(view)["n2"]

    assert ("IDLE", ["DRAIN"], "spurinv", True) == (n1["state"], n1["flags"], n1["drain_owner"], n1["managed"])
    assert n1["reason"].startswith("spurinv: ")
    assert NOW - 1796229703 == n1["reason_age_seconds"]
    assert n1["registered"] is None  # drained while busy: no record yet, managed all the same
    # a drain of a spurinv before drain ids: no id, no record; only its node's state file knows it
    assert ["spurinv-drain", "spurinv-drain-orphaned"] == n1["attention"]
    assert n1["drain_recorded"] is False
    assert [n1["name"]] == [drain["name"] for drain in view["summary"]["orphaned_drains"]]
    assert ([], False, None) == (n2["attention"], n2["managed"], n2["reason_since"])
    assert [{"name": "n1", "reason": n1["reason"], "since": n1["reason_since"], "age_seconds": n1["reason_age_seconds"]}] == (
        view["summary"]["spurinv_drains"]
    )


@pytest.mark.parametrize(
    "name",
    ["22.05/v0.0.38/nodes-idle", "22.05/v0.0.38/nodes-allocated", "24.11/v0.0.42/nodes-idle", "25.05/v0.0.43/nodes-idle"],
)
def test_quiet_clusters_need_no_attention(name):
    view = fleet.build(nodes(name), NOW)

    assert 2 == view["summary"]["nodes"]
    assert 0 == view["summary"]["attention"]
    assert all(row["reason_since"] is None for row in view["nodes"])  # reason_changed_at 0 is "never"


def test_spur_gateway_drains_are_read_by_reason_and_have_no_age():
    """spur's display words (drained, draining), a null reason, no extra, no reason_changed_at."""
    spur = [
        {"name": "gpu1", "state": "drained", "reason": "spurinv: 8 GPUs SPX→CPX", "cpus": 192, "alloc_cpus": 0},
        {"name": "gpu2", "state": "draining", "reason": "operator: rack swap", "cpus": 192, "alloc_cpus": 8},
        {"name": "gpu3", "state": "idle", "reason": None, "cpus": 192, "alloc_cpus": 0},
    ]

    rows = by_name(fleet.build(spur, NOW))

    assert ("IDLE", ["DRAIN"], "spurinv", None) == (
        rows["gpu1"]["state"], rows["gpu1"]["flags"], rows["gpu1"]["drain_owner"], rows["gpu1"]["reason_age_seconds"],
    )  # fmt: skip
    assert rows["gpu1"]["drain_recorded"] is False  # no id in the reason: orphaned
    assert ("ALLOCATED", "other") == (rows["gpu2"]["state"], rows["gpu2"]["drain_owner"])
    assert ("", None, []) == (rows["gpu3"]["reason"], rows["gpu3"]["gres"], rows["gpu3"]["attention"])


def _n1() -> dict[str, Any]:
    return nodes("24.11/v0.0.42/nodes-idle")[0]


def _our_drain(name: str, text: str = "mi300x 8→7; re-registers when idle", **record: Any) -> dict[str, Any]:
    """A node under a drain spurinv wrote (its id in the reason, its record in extra)."""
    reason = ownership.reason_for(name, "3f9a", text)
    drain = {"id": reason[10:18], "reason": reason, "cause": "busy", "at": "2026-12-03T09:00:00Z", **record}
    return edited(_n1(), name=name, state=["MIXED", "DRAIN"], reason=reason,
                  extra=extra({"node": name, "drain": drain}, rack="r2"))  # fmt: skip


def test_a_drain_spurinv_can_tell_is_its_own_is_not_orphaned_and_the_rest_are():
    """What refresh would conclude with no state file (the one rule): a valid id for the
    node (with or without a record, spur has none) is spurinv's; the same words copied onto
    another node, edited after the id, or a record that says other words, are orphaned."""
    ours = _our_drain("a")
    spur = {"name": "b", "state": "drained", "reason": ownership.reason_for("b", "3f9a", "x"), "alloc_cpus": 0}
    copied = edited(_our_drain("a"), name="c")
    edited_reason = edited(_our_drain("d"), reason=_our_drain("d")["reason"] + " (do not resume)")
    contradicted = _our_drain("e", reason="spurinv: [00000000] other words")
    legacy = edited(_n1(), name="f", state=["IDLE", "DRAIN"], reason="spurinv: mi300x 8→7; re-registers when idle")

    view = fleet.build([ours, spur, copied, edited_reason, contradicted, legacy], NOW)
    rows = by_name(view)

    assert {"a": True, "b": True, "c": False, "d": False, "e": False, "f": False} == {
        name: row["drain_recorded"] for name, row in rows.items()
    }
    assert all(row["drain_owner"] == "spurinv" and "spurinv-drain" in row["attention"] for row in rows.values())
    assert ["c", "d", "e", "f"] == sorted(drain["name"] for drain in view["summary"]["orphaned_drains"])
    assert (6, 4) == (view["summary"]["spurinv_drained"], view["summary"]["orphaned_drained"])
    assert ["spurinv-drain"] == rows["a"]["attention"]
    assert ["spurinv-drain", "spurinv-drain-orphaned"] == rows["c"]["attention"]


def test_an_operators_drain_is_never_spurinvs_whatever_our_record_says():
    """A record in extra claims nothing by itself: the reason must carry our id."""
    node = edited(_our_drain("a"), reason="NHC: bad ECC on GPU 3")

    row = fleet.build([node], NOW)["nodes"][0]

    assert ("other", None, ["drained-by-others"]) == (row["drain_owner"], row["drain_recorded"], row["attention"])


def test_our_record_makes_a_node_managed_and_a_hand_edited_gres_shows():
    same = edited(_n1(), name="a", extra=extra(RECORD, rack="r2"), gres="gpu:mi300x:8(S:0-1)")
    edited_by_hand = edited(_n1(), name="b", extra=extra({**RECORD, "gres": "gpu:mi300x:8,fpga:4"}), gres="gpu:mi300x:8")

    view = fleet.build([same, edited_by_hand], NOW)
    rows = by_name(view)

    assert (True, False, []) == (rows["a"]["managed"], rows["a"]["gres_changed"], rows["a"]["attention"])
    assert RECORD == rows["a"]["registered"]
    assert (True, True, ["gres-changed"]) == (rows["b"]["managed"], rows["b"]["gres_changed"], rows["b"]["attention"])
    assert ["b"] == view["summary"]["gres_changed_nodes"]


def test_a_record_written_before_gres_was_recorded_still_counts_as_managed():
    old = {key: value for key, value in RECORD.items() if key != "gres"}

    row = fleet.build([edited(_n1(), extra=extra(old))], NOW)["nodes"][0]

    assert (True, None, None) == (row["managed"], row["registered"]["gres"], row["gres_changed"])


@pytest.mark.parametrize(
    "text",
    ["", "spurinv-extra", "{", "[1,2]", '{"spurinv": "x"}', '{"other": {"fingerprint": "f"}}', "{" * 100000 + "}" * 100000],
)
def test_extra_that_is_not_our_record_is_not_managed(text):
    row = fleet.build([edited(_n1(), extra=text)], NOW)["nodes"][0]

    assert (False, None) == (row["managed"], row["registered"])


def test_our_prefix_without_the_drain_flag_is_not_a_drain():
    """Slurm 24.11 without accounting keeps the reason after RESUME: "drained" is the flag."""
    row = fleet.build([edited(_n1(), reason="spurinv: old", state=["IDLE"])], NOW)["nodes"][0]

    assert (False, None, False) == (row["drained"], row["drain_owner"], row["managed"])


def test_drains_are_listed_oldest_first_and_unknown_ages_last():
    at = {"set": True, "infinite": False, "number": 0}
    drained = [
        edited(_n1(), name=name, state=["IDLE", "DRAIN"], reason=f"spurinv: {name}", reason_changed_at={**at, "number": when})
        for name, when in (("young", NOW - 60), ("unknown", 0), ("old", NOW - 86400 * 3), ("middle", NOW - 3600))
    ]

    drains = fleet.build(drained, NOW)["summary"]["spurinv_drains"]

    assert ["old", "middle", "young", "unknown"] == [drain["name"] for drain in drains]
    assert [259200, 3600, 60, None] == [drain["age_seconds"] for drain in drains]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"set": True, "infinite": False, "number": 1796230332}, 1796230332),
        (1796229703, 1796229703),
        ({"set": False, "infinite": False, "number": 1796230332}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        (0, None), (-5, None), (True, None), (math.inf, None), (math.nan, None), (1e999, None), ("1796229703", None),
        (10**30, None), ({"number": [1]}, None), (None, None), ({"number": 1796229703}, None), (1796229703.0, None),
    ],
)  # fmt: skip
def test_reason_changed_at_in_every_shape(value, expected):
    """The one parser (ownership.changed_at) that refresh uses too: a dict must say it is set."""
    assert expected == changed_at(value)


def test_a_clock_behind_the_controller_gives_age_zero_not_negative():
    drained = edited(_n1(), state=["IDLE", "DRAIN"], reason="spurinv: x", reason_changed_at=NOW + 500)

    assert 0 == fleet.build([drained], NOW)["nodes"][0]["reason_age_seconds"]


@pytest.mark.parametrize(
    ("entry", "names"),
    [(["n1"], "nodes[0] is list"), ({"state": ["IDLE"]}, "nodes[0]"), ({"name": "x", "state": 5}, "node 'x'"),
     ({"name": "", "state": ["IDLE"]}, "nodes[0]"), ({"name": 7, "state": ["IDLE"]}, "nodes[0]")],
)  # fmt: skip
def test_an_entry_that_is_not_a_node_is_a_protocol_error_naming_it(entry, names):
    with pytest.raises(ControllerError) as caught:
        fleet.build([entry], NOW)

    assert ("protocol", exitcode.PROTOCOL) == (caught.value.kind, caught.value.exit_code)
    assert names in caught.value.message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
FIELDS = ("name", "state", "state_flags", "reason", "reason_changed_at", "reason_set_by_user", "gres", "extra")


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON | st.text(), max_size=8), max_size=5),
    st.integers(0, MAX_EPOCH - 1),
)
def test_any_json_is_a_fleet_view_or_a_protocol_error(entries, now):
    """Whatever a transport hands over, build() answers a view that fits the model, or a ControllerError."""
    try:
        view = fleet.build(entries, now)
    except ControllerError as exc:
        kind = exc.kind
        assert "protocol" == kind
        return
    adapter(FleetDocument).validate_python(
        fleet.document(view, now=now, controller="http://127.0.0.1:1", api=None, transport="rest", exit_code=0)
    )
    for row in view["nodes"]:
        assert row["reason_age_seconds"] is None or row["reason_age_seconds"] >= 0
        assert row["drain_owner"] != "spurinv" or row["managed"]


@given(st.lists(st.sampled_from(["gpu:mi300x:8(S:0-1)", "fpga:4", "gpu:4", "nic:2(S:0,1)", "(null)"]), max_size=5))
def test_gres_entries_ignore_order_and_socket_bindings(entries):
    assert fleet.gres_entries(",".join(entries)) == fleet.gres_entries(",".join(reversed(entries)))
    assert all("(" not in entry for entry in fleet.gres_entries(",".join(entries)))


def test_gres_entries_drop_the_binding_but_not_an_untyped_gpus_null_type():
    assert fleet.gres_entries("gpu:(null):8(S:0-1),fpga:4") == ["fpga:4", "gpu:(null):8"]


def test_gres_entries_drop_a_blank_before_the_binding():
    assert fleet.gres_entries("fpga:4 (S:0),gpu:mi300x:8") == ["fpga:4", "gpu:mi300x:8"]


@given(st.text(alphabet="gpu:mi30x8(S0-1,)fa4 \t(null)", max_size=40))
def test_fleet_and_the_controller_view_split_gres_alike(text):
    """fleet compares registrations by the entries nodeview reads (one splitter)."""
    try:
        read = parse_gres(text)
    except ControllerError:
        return
    heads = (unbound(entry.text) for entry in read)
    assert fleet.gres_entries(text) == sorted(head for head in heads if head)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (0, "0s"), (59, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h00m"), (11100, "3h05m"),
     (86399, "23h59m"), (86400, "1d00h"), (86400 * 2 + 3600 * 4, "2d04h"), (86400 * 100 - 1, "99d23h"),
     (86400 * 100, "100d"), (86400 * 400, "400d")],
)  # fmt: skip
def test_age_text(seconds, text):
    assert text == fleet.age_text(seconds)


# --- the table -----------------------------------------------------------------------------------

HOSTILE_NAME = "gpu-[bold red]x[/]../../etc"
HOSTILE_TEXT = "8→7 GPUs \x1b[31mred\x1b[0m ../../etc/passwd [link=file:///etc]x[/link]\u202eevil"
# spurinv sends a reason printable (ownership.reason_for); another writer, or a spurinv before,
# may have set one that holds control characters, with an id that checks: the table escapes it
HOSTILE_REASON = f"{ownership.PREFIX} [3f9a{ownership._tag(HOSTILE_NAME, '3f9a', HOSTILE_TEXT)}] {HOSTILE_TEXT}"


def table_fleet() -> list[dict[str, Any]]:
    """The 24.11 capture (n1 resumed with our old reason, n2 drained by NHC) plus edited copies:
    our drain with a hostile name and reason, a record whose gres was changed by hand, a long
    name, a managed idle node, an invalid registration Slurm drained, and an orphaned drain of a
    spurinv before drain ids."""
    n1, n2 = nodes("24.11/v0.0.42/nodes-n1-idle-n2-drained")
    at = dict(n2["reason_changed_at"])
    return [
        n1,
        n2,
        edited(n1, name=HOSTILE_NAME, state=["MIXED", "DRAIN"], reason=HOSTILE_REASON,
               reason_changed_at={**at, "number": NOW - 3 * 86400 - 7200}, extra=extra(RECORD)),
        edited(n1, name="gpu-rack07-node0042", extra=extra({**RECORD, "gres": "gpu:mi300x:8,fpga:4"}), reason=""),
        edited(n1, name="n5", extra=extra(RECORD), reason=""),
        edited(n1, name="n6", state=["DOWN", "DRAIN", "INVALID_REG"], extra=extra(RECORD),
               reason="gres/gpu count reported lower than configured (7 < 8)", reason_changed_at={**at, "number": NOW - 300}),
        edited(n1, name="節点-七", reason=""),
        edited(n1, name="n8", state=["IDLE", "DRAIN"], reason="spurinv: mi300x 8→7; re-registers when idle",
               reason_changed_at={**at, "number": NOW - 3600}),
    ]  # fmt: skip


def table(view: Any, show_all: bool = False, width: int = 80) -> str:
    document = fleet.document(view, now=NOW, controller="https://slurmrestd:6820", api="slurm/v0.0.42", transport="rest",
                              exit_code=0)  # fmt: skip
    return render.fleet_text(document, show_all=show_all, width=width)


def cells(line: str) -> int:
    """Terminal cells a line takes (East Asian wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in line)


def golden(request: pytest.FixtureRequest, name: str, text: str) -> None:
    """Compare with tests/golden/NAME; ``pytest --update-golden`` (where conftest.py offers it) or
    ``SPURINV_UPDATE_GOLDEN=1`` rewrites the file instead."""
    path = GOLDEN / name
    if request.config.getoption("--update-golden", default=False) or os.environ.get("SPURINV_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with SPURINV_UPDATE_GOLDEN=1 and review it"
    assert path.read_text() == text, f"{name} changed: review the output, then run with SPURINV_UPDATE_GOLDEN=1"


def test_the_80_column_table_is_pinned(request):
    text = table(fleet.build(table_fleet(), NOW))

    golden(request, "fleet-80.txt", text)


def test_the_80_column_table_with_all_nodes_is_pinned(request):
    text = table(fleet.build(table_fleet(), NOW), show_all=True)

    golden(request, "fleet-all-80.txt", text)


@pytest.mark.parametrize("show_all", [False, True])
@pytest.mark.parametrize("width", [60, 80, 132])
def test_every_line_fits_the_console_and_hostile_text_stays_text(show_all, width):
    text = table(fleet.build(table_fleet(), NOW), show_all=show_all, width=width)

    assert all(cells(line) <= width for line in text.splitlines()), text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text)  # no escape sequence reaches the terminal
    assert "\\x1b[31m" in text or width < 132  # shown escaped where the note is wide enough
    assert "gpu-[bold red]x[/]" in text  # markup printed literally, not interpreted


HOSTILE_TEXTS = st.text(
    alphabet=st.sampled_from([*"ab/[]\\\"'{}=é…→ ", "\x1b", "\n", "\r", "\t", "\x00", "\x85", "\u202e", "\u200b", "節", "七"]),
    max_size=60,
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(HOSTILE_TEXTS, HOSTILE_TEXTS, HOSTILE_TEXTS, st.booleans()), min_size=1, max_size=4),
       st.sampled_from([60, 80, 100]))  # fmt: skip
def test_any_controller_text_renders_within_the_width_and_never_as_terminal_control(entries, width):
    n1 = _n1()
    fleet_nodes = [
        edited(n1, name=f"{name}-{index}", reason=reason, gres=gres or "gpu:1",
               state=["IDLE", "DRAIN"] if drained else ["IDLE"], extra=extra({**RECORD, "gres": "gpu:2"}))
        for index, (name, reason, gres, drained) in enumerate(entries)
    ]  # fmt: skip

    text = table(fleet.build(fleet_nodes, NOW), show_all=True, width=width)

    assert all(cells(line) <= width for line in text.splitlines()), text
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b\u202e]", text)
    assert len(text.splitlines()) >= 4 + len(entries)  # a header, a summary, a row per node


def test_the_default_table_lists_only_nodes_needing_attention():
    text = table(fleet.build(table_fleet(), NOW))

    assert not re.search(r"^n1 ", text, re.M)
    assert not re.search(r"^n5 ", text, re.M)
    assert re.search(r"^n2 ", text, re.M)
    assert "3 more node(s) need no attention; --all lists every node" in text


def test_a_quiet_fleet_says_so():
    text = table(fleet.build(nodes("25.05/v0.0.43/nodes-idle"), NOW))

    assert "no node needs attention" in text
    assert "NODE" not in text


# --- JSON document, schema, metrics --------------------------------------------------------------


def test_the_document_fits_its_model_and_the_committed_schema():
    jsonschema = pytest.importorskip("jsonschema")
    view = fleet.build(table_fleet(), NOW)
    document = fleet.document(view, now=NOW, controller="https://c:6820", api="slurm/v0.0.42", transport="rest", exit_code=1)
    schema = json.loads((REPO / "schemas" / "fleet.schema.json").read_text())

    adapter(FleetDocument).validate_python(document)
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(document)))
    assert ("fleet", 1, False, 1) == (document["command"], document["format_version"], document["ok"], document["exit_code"])


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    parsed = list(text_string_to_metric_families(text))
    assert all(family.name.startswith("spurinv_fleet_") and family.type == "gauge" for family in parsed)
    return {family.name: [(sample.labels, sample.value) for sample in family.samples] for family in parsed}


def test_metrics_count_the_fleet_and_date_each_of_our_drains():
    fleet_nodes = table_fleet()
    fleet_nodes.append(copy.deepcopy(fleet_nodes[2]))  # the same node twice: one series only
    summary = fleet.build(fleet_nodes, NOW)["summary"]

    samples = families(metrics.render_fleet(summary, NOW))

    assert [({}, 1)] == samples["spurinv_fleet_up"]
    assert [({}, 9)] == samples["spurinv_fleet_nodes"]
    assert [({}, 6)] == samples["spurinv_fleet_managed_nodes"]
    assert [({"by": "spurinv"}, 3), ({"by": "others"}, 2)] == samples["spurinv_fleet_drained_nodes"]
    assert [({}, 1)] == samples["spurinv_fleet_gres_changed_nodes"]
    assert [({}, 1)] == samples["spurinv_fleet_orphaned_drain_nodes"]  # n8, a drain from before drain ids
    assert [({}, 6)] == samples["spurinv_fleet_attention_nodes"]
    assert [({}, 3 * 86400 + 7200)] == samples["spurinv_fleet_oldest_drain_age_seconds"]
    assert [({}, 0)] == samples["spurinv_fleet_undated_drain_nodes"]
    assert [({}, NOW)] == samples["spurinv_fleet_last_success_timestamp_seconds"]
    assert [({"node": HOSTILE_NAME}, NOW - 3 * 86400 - 7200), ({"node": "n8"}, NOW - 3600)] == samples[
        "spurinv_fleet_drain_since_timestamp_seconds"
    ]


@pytest.mark.parametrize("changed", [None, {"set": False, "infinite": False, "number": 0}, "yesterday"])
def test_a_drain_the_controller_does_not_date_is_counted_apart(changed):
    """Without a start there is no age: the oldest-age gauge cannot see the drain, so a gauge of
    its own counts it (SpurinvFleetUndatedDrain alerts on it held for a day)."""
    fleet_nodes = table_fleet()
    undated = copy.deepcopy(fleet_nodes[7])  # n8, our drain an hour old
    undated["name"] = "n9"
    if changed is None:
        del undated["reason_changed_at"]
    else:
        undated["reason_changed_at"] = changed
    summary = fleet.build([*fleet_nodes, undated], NOW)["summary"]

    samples = families(metrics.render_fleet(summary, NOW))

    assert [({}, 1)] == samples["spurinv_fleet_undated_drain_nodes"]
    assert [({"by": "spurinv"}, 3), ({"by": "others"}, 2)] == samples["spurinv_fleet_drained_nodes"]
    assert [({}, 3 * 86400 + 7200)] == samples["spurinv_fleet_oldest_drain_age_seconds"]
    assert "n9" not in {labels.get("node") for labels, _ in samples["spurinv_fleet_drain_since_timestamp_seconds"]}


@given(st.integers(1, ownership.MAX_EPOCH - 1), st.sampled_from(["int", "number"]))
def test_a_drains_metric_time_is_the_controllers_reason_time(seconds, spelling):
    """fleet writes the reason time as shape.stamp, the metrics read it back as shape.epoch."""
    changed = seconds if spelling == "int" else {"set": True, "infinite": False, "number": seconds}
    node = {"name": "n1", "state": ["IDLE", "DRAIN"], "reason": "spurinv: [00000000] busy", "reason_changed_at": changed}
    summary = fleet.build([node], seconds)["summary"]

    samples = families(metrics.render_fleet(summary, seconds))

    assert [({"node": "n1"}, seconds)] == samples["spurinv_fleet_drain_since_timestamp_seconds"]
    assert shape.epoch(summary["spurinv_drains"][0]["since"]) == seconds


def test_metrics_when_the_fleet_could_not_be_read():
    assert {"spurinv_fleet_up": [({}, 0)]} == families(metrics.render_fleet(None, None))


# --- the command against a gateway ---------------------------------------------------------------


def body_of(node_list: list[dict[str, Any]]) -> dict[str, Any]:
    return {**captured("24.11/v0.0.42/nodes-n1-idle-n2-drained"), "nodes": node_list}


@pytest.fixture
def configure(tmp_path, env):
    """Write the config spurinv fleet reads (SPURINV_CONFIG from the env fixture)."""

    def write(url: str, *lines: str) -> None:
        path = Path(env["SPURINV_CONFIG"])
        path.write_text("\n".join(["[controller]", f'url = "{url}"', *lines]) + "\n")
        path.chmod(0o600)

    return write


def serve(server: FaultServer, body: Any, status: int = 200) -> None:
    server.script("GET", "/openapi/v3", Reply(200, {"paths": {"/slurm/v0.0.42/node/{node_name}": {"get": {}}}}))
    server.script("GET", "/slurm/v0.0.42/nodes", Reply(status, body))


def test_fleet_json_reads_every_node_with_one_query(cli, configure):
    with FaultServer() as server:
        serve(server, body_of(table_fleet()))
        configure(server.url)

        result = cli("fleet", "--json")

        assert ["/openapi/v3", "/slurm/v0.0.42/nodes"] == [seen.path for seen in server.seen]
    document = result.json()
    assert (0, 0, True) == (result.code, document["exit_code"], document["ok"])
    assert ("fleet", 1, "slurm/v0.0.42", "rest") == (
        document["command"], document["format_version"], document["api"], document["transport"],
    )  # fmt: skip
    assert 8 == len(document["nodes"]) == document["summary"]["nodes"]
    adapter(FleetDocument).validate_python(document)


def test_exit_code_flag_is_1_when_a_node_needs_attention_and_0_otherwise(cli, configure):
    with FaultServer() as server:
        serve(server, body_of(table_fleet()))
        configure(server.url)
        assert exitcode.ATTENTION == cli("fleet", "--exit-code").code
        assert 0 == cli("fleet").code
    with FaultServer() as server:
        serve(server, captured("24.11/v0.0.42/nodes-idle"))
        configure(server.url)
        assert 0 == cli("fleet", "--exit-code").code


def test_without_an_api_description_the_version_is_probed_on_the_all_nodes_route(cli, configure):
    """22.05-style: no /openapi/v3 → probe …/nodes newest first (not …/node/<this host>)."""
    with FaultServer() as server:
        server.script("GET", "/slurm/v0.0.38/nodes", Reply(200, captured("22.05/v0.0.38/nodes-n1-drained-n2-idle")))
        configure(server.url)

        document = cli("fleet", "--json").json()

        paths = [seen.path for seen in server.seen]
    assert "slurm/v0.0.38" == document["api"]
    assert "/openapi/v3" == paths[0]
    assert "/slurm/v0.0.38/nodes" == paths[-1]
    assert all(path.endswith("/nodes") for path in paths[1:])
    assert ["n1"] == [drain["name"] for drain in document["summary"]["spurinv_drains"]]


def test_a_large_fleet_answer_above_the_single_node_limit_is_read(cli, configure):
    """~4,000 nodes are ~11 MB: more than the 8 MiB a single-node answer may be."""
    n1 = _n1()
    big = [edited(n1, name=f"gpu{index:05d}") for index in range(4000)]
    with FaultServer() as server:
        serve(server, body_of(big))
        configure(server.url)

        result = cli("fleet", "--json")

    assert 0 == result.code, result.out
    assert 4000 == result.json()["summary"]["nodes"]


def test_a_token_is_sent_and_a_bad_one_is_77(cli, configure, tmp_path):
    token = tmp_path / "token"
    token.write_text("good-token\n")
    token.chmod(0o600)
    gateway = Gateway(token="good-token")
    gateway.add_node("n1")
    with FaultServer(gateway=gateway) as server:
        configure(server.url, 'auth = "slurm-jwt"', f'token_file = "{token}"')
        assert 0 == cli("fleet").code
        token.write_text("bad-token\n")
        result = cli("fleet", "--json")
    assert (exitcode.NOPERM, "controller-auth") == (result.code, result.json()["error"]["code"])


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply(200, "this is not JSON"), exitcode.PROTOCOL),
        (Reply(200, {"nodes": {"n1": {}}}), exitcode.PROTOCOL),
        (Reply(200, {"nodes": [["n1"]]}), exitcode.PROTOCOL),
        (Reply(200, {"meta": {}}), exitcode.PROTOCOL),
        (Reply(404, "Not Found"), exitcode.PROTOCOL),
        (Reply(200, b"\x00" * 16, size=(64 << 20) + 1), exitcode.PROTOCOL),
        (Reply(401, "Authentication failure"), exitcode.NOPERM),
        (Reply(503, "busy"), exitcode.UNAVAILABLE),
    ],
    ids=["not-json", "nodes-not-a-list", "entry-not-a-node", "no-nodes", "no-route", "too-large", "401", "503"],
)
def test_failures_are_one_line_and_a_json_envelope_with_their_exit_code(cli, configure, reply, code):
    with FaultServer() as server:
        serve(server, None)
        server.script("GET", "/slurm/v0.0.42/nodes", reply)
        configure(server.url)

        result = cli("fleet", "--json")

    assert code == result.code
    document = result.json()
    assert (False, code, "fleet") == (document["ok"], document["exit_code"], document["command"])
    assert 1 == len(result.err.strip().splitlines()), result.err
    assert "Traceback" not in result.err


def test_an_unreachable_controller_is_69_and_metrics_say_down(cli, configure, tmp_path):
    prom = tmp_path / "fleet.prom"
    with FaultServer() as server:
        url = server.url
    configure(url)  # the server is gone: connection refused

    result = cli("fleet", "--metrics-file", prom)

    assert exitcode.UNAVAILABLE == result.code
    assert "cannot connect" in result.err
    assert {"spurinv_fleet_up": [({}, 0)]} == families(prom.read_text())


def test_no_controller_configured_is_78(cli, configure):
    configure("")

    result = cli("fleet", "--json")

    assert exitcode.CONFIG == result.code
    assert "controller.url" in result.json()["error"]["message"]


def test_metrics_file_is_written_atomically_world_readable(cli, configure, tmp_path):
    prom = tmp_path / "fleet.prom"
    with FaultServer() as server:
        serve(server, body_of(table_fleet()))
        configure(server.url)

        assert 0 == cli("fleet", "--metrics-file", prom).code

    assert 0o644 == stat.S_IMODE(prom.stat().st_mode)
    assert [({}, 8)] == families(prom.read_text())["spurinv_fleet_nodes"]
    assert ["fleet.prom"] == [path.name for path in tmp_path.iterdir() if path.name.startswith("fleet")]


def test_an_unwritable_metrics_file_is_73_and_nothing_is_printed_as_success(cli, configure, tmp_path):
    with FaultServer() as server:
        serve(server, body_of(table_fleet()))
        configure(server.url)

        result = cli("fleet", "--json", "--metrics-file", tmp_path / "missing-dir" / "fleet.prom")

    assert exitcode.CANTCREAT == result.code
    assert "error" in result.json()


def test_an_unsafe_token_file_is_77_before_any_request_and_metrics_say_down(cli, configure, tmp_path):
    token = tmp_path / "token"
    token.write_text("a-token\n")
    token.chmod(0o644)
    prom = tmp_path / "fleet.prom"
    with FaultServer() as server:
        serve(server, body_of(table_fleet()))
        configure(server.url, 'auth = "slurm-jwt"', f'token_file = "{token}"')

        result = cli("fleet", "--json", "--metrics-file", prom)

        assert [] == server.seen
    assert (exitcode.NOPERM, "token") == (result.code, result.json()["error"]["code"])
    assert {"spurinv_fleet_up": [({}, 0)]} == families(prom.read_text())


@pytest.mark.parametrize(
    "body",
    [{"nodes": [], "errors": [{"error": "Unable to query nodes", "error_number": 1}]},
     {"nodes": None},
     {"nodes": [], "errors": [{"error": "boom", "error_number": None}]}],
    ids=["empty list beside an error", "null without an error", "error without a number"],
)  # fmt: skip
def test_an_answer_that_is_not_the_fleet_is_a_protocol_error_not_an_empty_fleet(cli, configure, body):
    """Found by the attack on the merged work: these were exit 0 with 0 nodes and fleet_up 1."""
    with FaultServer() as server:
        serve(server, body)
        configure(server.url)

        result = cli("fleet", "--json")

    assert exitcode.PROTOCOL == result.code
    assert result.json()["ok"] is False


@pytest.mark.parametrize("flags", ["DRAIN", None, ["DRAIN", 1]], ids=["a string", "null", "a number among them"])
def test_fleet_refuses_state_flags_that_are_not_a_list_of_strings(cli, env, flags):
    """``state_flags: "DRAIN"`` (the v0.0.38 dialect) was read letter by letter: exit 0 and a node
    with the flags D, R, A, I, N. Like any malformed answer it is a protocol error (76)."""
    import json

    sys.path.insert(0, str(Path(__file__).parent))
    from faultserver import FaultServer, Reply

    captured = Path(__file__).parent / "fixtures/slurm/responses/22.05/v0.0.38/nodes-n1-drained-n2-idle.json"
    body = json.loads(captured.read_text())
    body["nodes"][0]["state_flags"] = flags
    with FaultServer() as server:
        server.script("GET", "/openapi/v3", Reply(200, {"paths": {"/slurm/v0.0.38/node/{node_name}": {"get": {}}}}))
        server.script("GET", "/slurm/v0.0.38/nodes", Reply(200, body))
        Path(env["SPURINV_CONFIG"]).write_text(f'[controller]\nurl = "{server.url}"\n')

        result = cli("fleet", "--json")

    assert result.code == 76, result.err
    assert result.json()["error"]["code"] == "controller-protocol"
    assert "state_flags" in result.json()["error"]["message"]
    assert len(result.err.splitlines()) == 1
