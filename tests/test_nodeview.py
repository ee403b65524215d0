"""The controller view parser and GRES handling, on real captured slurmrestd responses."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv.controller.nodeview import (
    NodeView,
    gpu_counts,
    gres_agrees,
    parse_gres,
    parse_node,
    rebuild_gres,
    slurm_errors,
    split_gres,
    used_count,
)
from spurinv.controller.ownership import MAX_EPOCH, extra_fingerprint, splice
from spurinv.errors import ControllerError

RESPONSES = Path(__file__).parent / "fixtures" / "slurm" / "responses"


def state_text(view: NodeView) -> str:
    """``IDLE+DRAIN``, as sinfo writes it."""
    return "+".join((view.base, *view.flags))


def load(relative: str) -> Any:
    return json.loads((RESPONSES / relative).read_text())


VIEWS = [
    # file, node, state text, idle, drained
    ("22.05/v0.0.38/node-n1-idle.json", "n1", "IDLE", True, False),
    ("22.05/v0.0.38/node-n1-draining-allocated.json", "n1", "ALLOCATED+DRAIN", False, True),
    ("22.05/v0.0.38/node-n1-drained-idle.json", "n1", "IDLE+DRAIN", True, True),
    ("22.05/v0.0.38/node-n2-down.json", "n2", "DOWN+DRAIN", True, True),
    ("24.11/v0.0.40/node-n2-allocated.json", "n2", "ALLOCATED", False, False),
    ("24.11/v0.0.41/node-n2-allocated-draining.json", "n2", "ALLOCATED+DRAIN+NOT_RESPONDING", False, True),
    ("24.11/v0.0.42/node-n1-idle.json", "n1", "IDLE", True, False),
    ("24.11/v0.0.42/node-n1-mixed-draining.json", "n1", "MIXED+DRAIN", False, True),
    ("24.11/v0.0.42/node-n1-after-resume.json", "n1", "IDLE+NOT_RESPONDING", True, False),
    (
        "24.11/v0.0.42/node-n1-reregistered-7-of-8-gpus-while-drained-with-job.json",
        "n1",
        "MIXED+DRAIN+INVALID_REG",
        False,
        True,
    ),
    ("25.05/v0.0.43/node-n1-mixed-draining.json", "n1", "ALLOCATED+DRAIN", False, True),
    ("25.05/v0.0.43/node-n1-drained-idle.json", "n1", "IDLE+DRAIN", True, True),
]


@pytest.mark.parametrize(("path", "node", "state", "idle", "drained"), VIEWS)
def test_captured_node_views(path, node, state, idle, drained):
    view = parse_node(load(path), node)

    assert (state, idle, drained) == (state_text(view), view.idle, view.drained)


def test_after_resume_the_old_reason_stays_but_drain_is_gone():
    """24.11 without accounting keeps the reason after RESUME (docs/slurm-rest.md §3): decide by the flag."""
    view = parse_node(load("24.11/v0.0.42/node-n1-after-resume.json"), "n1")

    assert view.reason.startswith("spurinv:")
    assert not view.drained


@pytest.mark.parametrize(
    "path", ["22.05/v0.0.38/node-missing.json", "24.11/v0.0.42/node-missing.json", "25.05/v0.0.43/node-missing.json"]
)
def test_unknown_node_in_both_dialects(path):
    with pytest.raises(ControllerError) as caught:
        parse_node(load(path), "nosuchnode")

    assert "unknown-node" == caught.value.kind


def test_spur_gateway_dialect():
    body = {"meta": {}, "nodes": [{"name": "gpu1", "state": "draining", "reason": "spurinv: x", "alloc_cpus": 4}]}

    view = parse_node(body, "gpu1")

    assert ("spur", "ALLOCATED+DRAIN", False, None) == (view.dialect, state_text(view), view.idle, view.gres)


@pytest.mark.parametrize("body", [[], "x", {"nodes": "nope"}, {"nodes": [{"name": "n1", "state": 5}]}, {"meta": {}}])
def test_wrong_shapes_are_protocol_errors(body):
    with pytest.raises(ControllerError) as caught:
        parse_node(body, "n1")

    assert caught.value.kind in ("protocol", "unknown-node")


def test_error_numbers_in_both_dialects():
    assert [(2072, "Failure to update node n1: Invalid generic resource (gres) specification")] == slurm_errors(
        load("24.11/v0.0.42/post-node-n1-gres-7-with-job.json")
    )
    assert slurm_errors(load("22.05/v0.0.38/node-missing.json"))[0][0] == 2018


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("gpu:mi300x:8", [("gpu", "mi300x", 8)]),
        ("gpu:4,fpga:4", [("gpu", None, 4), ("fpga", None, 4)]),
        ("gpu:mi300x:8(S:0-1)", [("gpu", "mi300x", 8)]),
        ("gpu:a100:2(S:0,1),gpu:v100:1", [("gpu", "a100", 2), ("gpu", "v100", 1)]),
        ("", []),
        ("(null)", []),
        # gres_used of untyped GPUs: Slurm prints the missing type as "(null)"
        ("gpu:(null):3(IDX:0-2)", [("gpu", None, 3)]),
        ("gpu:(null):0(IDX:N/A),fpga:2", [("gpu", None, 0), ("fpga", None, 2)]),
        # a blank before the binding is no part of the count
        ("gpu:mi300x:4 (IDX:0-3)", [("gpu", "mi300x", 4)]),
    ],
)
def test_parse_gres(text, entries):
    assert entries == [(e.name, e.type, e.count) for e in parse_gres(text)]


def test_used_count():
    assert 2 == used_count("gpu:mi300x:2(IDX:0-1)")
    assert 0 == used_count("gpu:mi300x:0(IDX:N/A)")
    assert 4 == used_count("gpu:1,fpga:3")
    assert 0 == used_count("gpu:(null):0(IDX:N/A)")  # an idle node with untyped GPUs, not one in use
    assert 3 == used_count("gpu:(null):3(IDX:0-2)")


@pytest.mark.parametrize(
    ("current", "models", "expected"),
    [
        ("gpu:mi300x:8", {"mi300x": 64}, "gpu:mi300x:64"),
        ("gpu:4,fpga:4", {"mi300x": 8}, "gpu:8,fpga:4"),  # untyped stays untyped, fpga kept
        ("fpga:4,gpu:mi300x:8(S:0-1)", {"mi300x": 8}, "fpga:4,gpu:mi300x:8"),
        ("fpga:2", {"mi300x": 8}, "fpga:2,gpu:mi300x:8"),
        ("gpu:mi300x:8", {}, ""),
        ("gpu:(null):8(S:0-1),fpga:4(S:0)", {"mi300x": 4}, "gpu:4,fpga:4"),
    ],
)
def test_rebuild_gres_keeps_every_other_entry(current, models, expected):
    assert expected == rebuild_gres(current, models)


def test_gres_agrees():
    assert gres_agrees("gpu:mi300x:8", {"mi300x": 8})
    assert gres_agrees("gpu:8,fpga:4", {"mi300x": 8})
    assert not gres_agrees("gpu:mi300x:8", {"mi300x": 64})
    assert not gres_agrees("gpu:mi300x:8", {"mi325x": 8})
    assert not gres_agrees(None, {"mi300x": 8})


def test_a_splice_keeps_foreign_keys_and_refuses_foreign_text():
    assert splice('{"rack":"r2"}', {"fingerprint": "f"}) == '{"rack":"r2","spurinv":{"fingerprint":"f"}}'
    assert splice("operator note", {"fingerprint": "f"}) is None
    assert splice("", {"fingerprint": "f"}) == '{"spurinv":{"fingerprint":"f"}}'


@pytest.mark.parametrize(
    ("node", "said"),
    [
        ({"state": "IDLE", "state_flags": "DRAIN"}, "state_flags is str, not a list"),
        ({"state": "IDLE", "state_flags": None}, "state_flags is NoneType, not a list"),
        ({"state": "IDLE", "state_flags": {"DRAIN": True}}, "state_flags is dict, not a list"),
        ({"state": "IDLE", "state_flags": ["DRAIN", 7]}, "state_flags holds int '7', not a word"),
        ({"state": ["IDLE", None]}, "state holds NoneType 'None', not a word"),
        ({"state": [["IDLE"]]}, "state holds list \"['IDLE']\", not a word"),
        ({"state": ["IDLE", 123456789012345678901234]}, "state holds int '12345678901234567890', not a word"),  # 20 shown
        ({"state": 5}, "state is int"),
    ],
)
def test_state_words_that_are_not_a_list_of_strings_are_refused(node, said):
    """``state_flags: "DRAIN"`` was read letter by letter (flags D, R, A, I, N) and numbers became words."""
    from spurinv.controller.nodeview import node_state

    with pytest.raises(ValueError, match="^" + re.escape(said) + "$"):
        node_state({"name": "n1", **node})
    with pytest.raises(ControllerError, match=re.escape(said)) as caught:
        parse_node({"nodes": [{"name": "n1", **node}]}, "n1")
    assert caught.value.kind == "protocol"


def test_state_words_are_read_upper_case_in_both_dialects():
    from spurinv.controller.nodeview import node_state

    assert node_state({"state": ["idle", "drain"]}) == ("slurm-v0.0.39+", "IDLE", ("DRAIN",))
    flagged = {"state": "idle", "state_flags": ["drain", "Completing"]}
    assert node_state(flagged) == ("slurm-v0.0.38", "IDLE", ("DRAIN", "COMPLETING"))
    assert node_state({"state": "idle", "state_flags": []}) == ("slurm-v0.0.38", "IDLE", ())
    assert node_state({"state": []}) == ("slurm-v0.0.39+", "UNKNOWN", ())


# --- pinned by the mutation run -------------------------------------------------------------------
# Node view and GRES behaviour a mutation run found unpinned, on real captured bodies. The
# busy tests set the view's two signals against each other: the state word (``MIXED``, ``ALLOCATED``)
# and the counters (``alloc_cpus``, ``gres_used``). Every captured busy body has both agreeing; on
# real Slurm they disagree (24.11's single-node GET keeps MIXED after the job ended while
# ``gres_used`` is already 0; 25.05 counts no CPUs for a running GPU job), so each signal alone must
# make the node busy.


def node_of(relative: str) -> dict:
    return copy.deepcopy(load(relative)["nodes"][0])


# (capture, node) of real busy bodies and the fields that make a stale or a counter-only view
STALE_WORD = [  # the word says busy, every counter says idle: still busy (the client confirms it)
    ("24.11/v0.0.42/node-n1-mixed-job-gres.json", {"alloc_cpus": 0, "alloc_memory": 0, "gres_used": "gpu:mi300x:0(IDX:N/A)"}),
    ("24.11/v0.0.40/node-n2-allocated.json", {"alloc_cpus": 0, "alloc_memory": 0, "gres_used": "gpu:0,fpga:0"}),
    ("25.05/v0.0.43/node-n1-mixed-job-gres.json", {"alloc_cpus": 0, "alloc_memory": 0, "gres_used": "gpu:mi300x:0(IDX:N/A)"}),
    (
        "22.05/v0.0.38/node-n1-allocated-2jobs-gres.json",
        {"alloc_cpus": 0, "alloc_memory": 0, "gres_used": "gpu:mi300x:0(IDX:N/A)"},
    ),
]


IDLE_WORD = [  # the word says IDLE, one counter says busy
    ("25.05/v0.0.43/node-n1-mixed-job-gres.json", {"state": ["IDLE"]}),  # as captured: alloc_cpus 0, 2 GPUs used
    ("24.11/v0.0.42/node-n2-allocated.json", {"state": ["IDLE"], "alloc_cpus": 0, "gres_used": "gpu:0,fpga:3"}),
    ("24.11/v0.0.42/node-n1-mixed-job-gres.json", {"state": ["IDLE"], "gres_used": "gpu:mi300x:0(IDX:N/A)"}),  # CPUs
    ("24.11/v0.0.42/node-n1-idle.json", {"alloc_memory": 4096}),
    ("22.05/v0.0.38/node-n1-allocated-2jobs-gres.json", {"state": "idle", "alloc_cpus": 0}),
]


@pytest.mark.parametrize(("capture", "fields"), STALE_WORD, ids=[f"{c} word only" for c, _ in STALE_WORD])
def test_a_busy_word_alone_makes_the_node_busy(capture, fields):
    node = node_of(capture)
    node.update(fields)

    view = parse_node({"nodes": [node]}, node["name"])

    assert not view.idle
    assert used_count(view.gres_used or "") == 0
    assert (view.alloc_cpus, view.alloc_memory) == (0, 0)


@pytest.mark.parametrize(("capture", "fields"), IDLE_WORD, ids=[f"{c} counter only" for c, _ in IDLE_WORD])
def test_a_busy_counter_alone_makes_the_node_busy(capture, fields):
    node = node_of(capture)
    node.update(fields)

    view = parse_node({"nodes": [node]}, node["name"])

    assert view.base == "IDLE"
    assert not view.idle


def test_completing_is_busy_whatever_the_base_state():
    node = node_of("24.11/v0.0.42/node-n1-idle.json")
    node["state"] = ["IDLE", "COMPLETING"]

    view = parse_node({"nodes": [node]}, "n1")

    assert view.flags == ("COMPLETING",)
    assert not view.idle


def test_an_idle_capture_is_idle_and_a_bare_view_defaults_to_idle():
    assert parse_node(load("24.11/v0.0.42/node-n1-idle.json"), "n1").idle
    assert NodeView(name="n1", dialect="spur", base="IDLE").idle


def test_busy_text_names_each_allocation_and_falls_back_to_the_state():
    view = NodeView(name="n1", dialect="x", base="MIXED", alloc_cpus=3, alloc_memory=2048, gres_used="gpu:mi300x:2(IDX:0-1)")

    text = view.busy_text()

    assert "3" in text
    assert "2048" in text
    assert "gpu:mi300x:2(IDX:0-1)" in text
    assert "gpu" not in NodeView(name="n1", dialect="x", base="MIXED", gres_used="gpu:mi300x:0").busy_text()
    assert NodeView(name="n1", dialect="x", base="MIXED").busy_text() == "mixed"


def test_a_body_with_a_singular_node_object_is_read_like_a_list_of_one():
    node = node_of("24.11/v0.0.42/node-n1-mixed-draining.json")

    singular = parse_node({"node": node}, "n1")

    assert singular == parse_node({"nodes": [node]}, "n1")
    assert (singular.base, singular.drained, singular.reason) == ("MIXED", True, node["reason"])


@pytest.mark.parametrize("body", [{"node": "n1"}, {"node": ["n1"]}, {"node": None}])
def test_a_singular_node_that_is_not_an_object_is_a_protocol_error(body):
    with pytest.raises(ControllerError) as caught:
        parse_node(body, "n1")

    assert caught.value.kind == "protocol"


def test_the_named_node_is_picked_from_several():
    body = load("24.11/v0.0.42/nodes-n1-idle-n2-drained.json")

    n1, n2 = parse_node(body, "n1"), parse_node(body, "n2")

    assert (n1.name, n1.drained, n2.name, n2.drained) == ("n1", False, "n2", True)


def test_an_empty_node_list_is_an_unknown_node_and_no_list_is_a_protocol_error():
    with pytest.raises(ControllerError) as empty:
        parse_node({"nodes": []}, "n1")
    with pytest.raises(ControllerError) as missing:
        parse_node({"nodes": [{"name": "n2", "state": ["IDLE"]}]}, "n1")
    with pytest.raises(ControllerError) as shapeless:
        parse_node({"meta": {}}, "n1")

    assert (empty.value.kind, missing.value.kind, shapeless.value.kind) == ("unknown-node", "unknown-node", "protocol")


def test_the_three_dialects_read_the_same_drain():
    v38 = parse_node(load("22.05/v0.0.38/node-n1-drained-idle.json"), "n1")
    v42 = parse_node(load("24.11/v0.0.42/node-n1-drained-idle.json"), "n1")
    spur = parse_node({"nodes": [{"name": "n1", "state": "drained", "reason": "spurinv: x"}]}, "n1")

    assert [(v.dialect, v.base, v.drained) for v in (v38, v42, spur)] == [
        ("slurm-v0.0.38", "IDLE", True),
        ("slurm-v0.0.39+", "IDLE", True),
        ("spur", "IDLE", True),
    ]
    assert parse_node({"nodes": [{"name": "n1", "state": []}]}, "n1").base == "UNKNOWN"


def test_slurm_errors_join_description_and_detail():
    body = {
        "errors": [
            {"error_number": 2072, "description": "Failure", "error": "Invalid gres"},
            {"errno": 2018, "error": "Invalid node name"},
            {"error_number": "x", "description": "d", "error": "No error"},
            "not an object",
        ]
    }

    assert slurm_errors(body) == [(2072, "Failure: Invalid gres"), (2018, "Invalid node name"), (None, "d")]
    assert slurm_errors({"errors": "x"}) == []
    assert slurm_errors([]) == []


def test_rebuild_drops_socket_bindings_of_every_entry_it_keeps():
    """``(S:…)`` is not accepted in a node update's gres; other entries are kept by name and count."""
    rebuilt = rebuild_gres("gpu:mi300x:8(S:0-1),fpga:4(S:0)", {"mi300x": 64})

    assert rebuilt == "gpu:mi300x:64,fpga:4"


def test_rebuild_keeps_untyped_gpus_untyped_and_places_them_where_they_were():
    assert rebuild_gres("fpga:2,gpu:4(S:0),nic:1", {"mi300x": 8}) == "fpga:2,gpu:8,nic:1"
    assert rebuild_gres("gpu:a100:2(S:0,1),gpu:v100:1", {"a100": 2, "v100": 0}) == "gpu:a100:2"
    assert rebuild_gres("", {"mi300x": 8, "mi325x": 0}) == "gpu:mi300x:8"
    assert rebuild_gres("gpu:4", {}) == ""


gres_entries = st.tuples(
    st.sampled_from(["gpu", "fpga", "nic", "mps"]),
    st.one_of(st.none(), st.sampled_from(["mi300x", "a100", "x"])),
    st.integers(0, 99),
    st.sampled_from(["", "(S:0)", "(S:0-1)", "(S:0,1)", "(IDX:0-1)"]),
)


def _text(entries) -> str:
    return ",".join(f"{name}{':' + kind if kind else ''}:{count}{suffix}" for name, kind, count, suffix in entries)


@settings(max_examples=examples(300))
@given(
    entries=st.lists(gres_entries, max_size=5),
    models=st.dictionaries(st.sampled_from(["mi300x", "mi325x"]), st.integers(0, 64)),
)
def test_rebuild_keeps_every_other_entry_and_says_exactly_the_inventory(entries, models):
    current = _text(entries)

    rebuilt = rebuild_gres(current, models)

    assert "(" not in rebuilt
    others = [(e.name, e.type, e.count) for e in parse_gres(current) if e.name != "gpu"]
    assert [(e.name, e.type, e.count) for e in parse_gres(rebuilt) if e.name != "gpu"] == others
    assert gres_agrees(rebuilt, models) or not any(models.values()) or not rebuilt
    assert sum(gpu_counts(rebuilt).values()) == sum(models.values())


@settings(max_examples=examples(300))
@given(entries=st.lists(gres_entries, max_size=5))
def test_parse_gres_reads_each_entry_whatever_its_suffix(entries):
    parsed = parse_gres(_text(entries))

    assert [(e.name, e.type, e.count) for e in parsed] == [(name, kind, count) for name, kind, count, _ in entries]
    assert used_count(_text(entries)) == sum(count for *_, count, _ in entries)


def test_gpu_counts_add_up_by_type_and_skip_zero_and_other_resources():
    assert gpu_counts("gpu:a100:2,gpu:a100:1(S:0),gpu:v100:0,fpga:4,gpu:3") == {"a100": 3, None: 3}
    assert gpu_counts("gpu") == {None: 1}


def test_gres_agrees_compares_typed_and_untyped_counts():
    assert gres_agrees("gpu:4,fpga:4", {"mi300x": 2, "mi325x": 2})
    assert not gres_agrees("gpu:4", {"mi300x": 3})
    assert gres_agrees("gpu:mi300x:8,gpu:mi325x:0", {"mi300x": 8, "mi325x": 0})
    assert not gres_agrees("gpu:mi300x:8,gpu:4", {"mi300x": 8})
    assert gres_agrees("", {})
    assert not gres_agrees("", {"mi300x": 1})


@pytest.mark.parametrize("count", ["9" * 19, "\u00b2", "\u0663"])
def test_a_malformed_gres_count_is_a_protocol_error(count):
    with pytest.raises(ControllerError) as caught:
        parse_gres(f"gpu:mi300x:{count}")

    assert caught.value.kind == "protocol"


def test_an_eighteen_digit_count_is_still_a_count():
    assert parse_gres("gpu:" + "9" * 18)[0].count == int("9" * 18)


def test_a_bare_number_among_the_gres_entries_is_a_resource_of_that_name_not_a_crash():
    """Slurm never lists one, but a hand-edited node can: it must not end the run with a traceback."""
    assert [(e.name, e.type, e.count) for e in parse_gres("gpu:mi300x:8,4")] == [("gpu", "mi300x", 8), ("4", None, 1)]
    assert gpu_counts("gpu:mi300x:8,4") == {"mi300x": 8}
    assert rebuild_gres("gpu:mi300x:8,4", {"mi300x": 64}) == "gpu:mi300x:64,4"


@settings(max_examples=examples(300))
@given(st.text(alphabet="gpu:mi30x0129,()SIDX-/ ", max_size=40))
def test_any_gres_text_gives_entries_or_a_protocol_error(text):
    kind = None
    try:
        entries = parse_gres(text)
        rebuild_gres(text, {"mi300x": 8})  # and the register body can be built from it
    except ControllerError as exc:
        kind, entries = exc.kind, []
    assert kind in (None, "protocol")
    assert all(entry.count >= 0 for entry in entries)


@pytest.mark.parametrize(
    ("number", "seen"),
    [(0, None), (1, 1), (1_764_700_000, 1_764_700_000), (MAX_EPOCH - 1, MAX_EPOCH - 1), (MAX_EPOCH, None), (-5, None)],
)
def test_when_the_reason_was_set_is_known_for_every_positive_time_and_unknown_for_zero(number, seen):
    """Slurm sends 0 for "never set"; any later moment, however early, is a time ours() can compare."""
    for capture, value in [
        ("24.11/v0.0.42/node-n1-idle.json", {"set": True, "infinite": False, "number": number}),
        ("22.05/v0.0.38/node-n1-idle.json", number),
    ]:
        node = node_of(capture)
        node["reason_changed_at"] = value

        assert parse_node({"nodes": [node]}, "n1").reason_changed_at == seen


@settings(max_examples=examples(200))
@given(
    other=st.one_of(
        st.none(),
        st.just(""),
        st.dictionaries(
            st.text(max_size=6).filter(lambda k: k != "spurinv"), st.one_of(st.integers(), st.text(max_size=6)), max_size=3
        ),
    ),
    fingerprint=st.text(min_size=1, max_size=20),
)
def test_what_a_splice_writes_extra_fingerprint_reads_back(other, fingerprint):
    current = "" if other is None else other if isinstance(other, str) else json.dumps(other)

    merged = splice(current, {"fingerprint": fingerprint, "inventory": "8 × mi300x"})

    assert merged is not None
    assert extra_fingerprint(merged) == fingerprint
    kept = json.loads(merged)
    kept.pop("spurinv")
    assert kept == (json.loads(current) if current else {})


@pytest.mark.parametrize(
    "extra",
    [
        None,
        "",
        "operator note",
        "[1, 2]",
        '{"spurinv": "x"}',
        '{"spurinv": {"fingerprint": 5}}',
        '{"other": {"fingerprint": "f"}}',
        '{"spurinv": {"fingerprint": "f"',  # cut short: not JSON
        '{"a": ' + "[" * 100_000,  # nested past the parser's recursion limit
    ],
)
def test_extra_without_our_record_has_no_fingerprint(extra):
    assert extra_fingerprint(extra) is None


def test_a_splice_leaves_foreign_non_object_json_alone():
    assert splice("[1, 2]", {"fingerprint": "f"}) is None
    assert splice('"text"', {"fingerprint": "f"}) is None


@pytest.mark.parametrize("nodes", ["n1", {"name": "n1", "state": ["IDLE"]}, 5])
def test_nodes_that_are_not_a_list_are_a_protocol_error_not_an_unknown_node(nodes):
    """A wrong shape is the gateway's fault (exit 76), not a node the controller lacks (exit 68)."""
    with pytest.raises(ControllerError) as caught:
        parse_node({"nodes": nodes}, "n1")

    assert caught.value.kind == "protocol"


def test_an_unknown_node_error_carries_the_controllers_first_error_text():
    body = load("24.11/v0.0.42/node-missing.json")
    body["errors"] = [*body["errors"], {"error_number": 9, "description": "a later, unrelated error"}]
    first = slurm_errors(body)[0][1]

    with pytest.raises(ControllerError) as caught:
        parse_node(body, "nosuchnode")

    assert caught.value.kind == "unknown-node"
    assert first
    assert first in caught.value.message
    assert "unrelated" not in caught.value.message


@pytest.mark.parametrize(
    "entry",
    ["gpu:a:x", "gpu:a:2(null)", "gpu:a:4(S:0-1", "gpu:a:2(IDX:0-1)(S:0)", "gpu:a:2(S:(0))", "gpu:a:4(IDX:0-3)x:0"],
)
def test_a_gpu_entry_no_count_can_be_read_from_is_a_protocol_error_not_one_gpu(entry):
    """Slurm prints ``gpu[:type][:count][(binding)]``; anything else from a controller is no
    count to guess at: one GPU would move the node's inventory, or call an idle node busy."""
    with pytest.raises(ControllerError) as caught:
        used_count(f"fpga:2,{entry}")

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GRES entry {entry!r} is not gpu[:type][:count]")


def test_other_resources_keep_their_own_forms():
    """Only GPU entries are read strictly: a site's ``bandwidth:lustre:4G`` is kept and sent back."""
    assert rebuild_gres("bandwidth:lustre:4G,gpu:2", {"mi300x": 4}) == "bandwidth:lustre:4G,gpu:4"


def test_gres_text_of_a_hostile_size_is_split():
    """A hostile controller's GRES text, at a size where a splitter of quadratic cost (a look-ahead
    at every comma: 2 s for 40,000 commas) would take minutes; bench-free, so no time is asserted."""
    assert split_gres("," * 400_000) == []
    assert split_gres("gpu:2," + "(" * 400_000) == ["gpu:2", "(" * 400_000]
    assert split_gres("gpu:a100:2(S:0,1)," * 3 + ",") == ["gpu:a100:2(S:0,1)"] * 3


@pytest.mark.parametrize(
    ("value", "kind"), [(5, "int"), (1.5, "float"), (True, "bool"), ({"a": 1}, "dict"), (["root"], "list"), ([[]], "list")]
)
def test_a_reason_set_by_that_is_not_text_is_a_one_line_error_naming_the_field(value, kind):
    """``reason_set_by_user`` is read as text or not at all: anything else is a protocol error of
    one line that names the field and what came instead (never the value: it is controller text)."""
    with pytest.raises(ControllerError) as caught:
        parse_node({"nodes": [{"name": "n1", "state": ["IDLE"], "reason_set_by_user": value}]}, "n1")

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"node 'n1' has an unexpected shape: reason_set_by_user: {kind} is no text",
    )


@pytest.mark.parametrize(("value", "read"), [("root", "root"), ("", None), (None, None), (0, None), ([], None), ({}, None)])
def test_a_reason_set_by_is_text_or_none(value, read):
    view = parse_node({"nodes": [{"name": "n1", "state": ["IDLE"], "reason_set_by_user": value}]}, "n1")

    assert view.reason_set_by == read


def test_a_count_is_checked_before_who_set_the_reason():
    """One answer, one error: with both unusable, the count is named, as the model's order had it."""
    body = {"nodes": [{"name": "n1", "state": ["IDLE"], "alloc_cpus": "many", "reason_set_by_user": 5}]}

    with pytest.raises(ControllerError, match="alloc_cpus: 'many' is no count"):
        parse_node(body, "n1")


def test_reading_a_node_loads_no_pydantic():
    """The view is a frozen dataclass: parsing a node (and its GRES) takes the standard library only."""
    code = (
        "import sys, json; from spurinv.controller import nodeview;"
        " v = nodeview.parse_node({'nodes': [{'name': 'n1', 'state': ['IDLE'], 'gres': 'gpu:mi300x:8'}]}, 'n1');"
        " nodeview.parse_spur_nodes(''); assert v.gres == 'gpu:mi300x:8';"
        " print(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout == "[]\n"


def test_an_unusable_count_is_shown_by_its_first_twenty_characters():
    """Blanks around a count are allowed, so the text shown can be longer than the 18 characters
    a count may have: the message keeps the first 20 of its repr, quote included."""
    body = {"nodes": [{"name": "n1", "state": ["IDLE"], "alloc_memory": "    abcdefghijklmnopq    "}]}

    with pytest.raises(ControllerError) as caught:
        parse_node(body, "n1")

    assert caught.value.message == "node 'n1' has an unexpected shape: alloc_memory: '    abcdefghijklmno is no count"
