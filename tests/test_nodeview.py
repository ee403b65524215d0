"""The controller view parser and GRES handling, on real captured slurmrestd responses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spurinv.errors import ControllerError
from spurinv.nodeview import NodeView, gres_agrees, parse_gres, parse_node, rebuild_gres, slurm_errors, used_count
from spurinv.ownership import splice

RESPONSES = Path(__file__).parent / "fixtures" / "slurm" / "responses"


def state_text(view: NodeView) -> str:
    """``IDLE+DRAIN``, as sinfo writes it."""
    return "+".join((view.base, *view.flags))


def load(relative: str) -> object:
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
    ],
)
def test_parse_gres(text, entries):
    assert entries == [(e.name, e.type, e.count) for e in parse_gres(text)]


def test_used_count():
    assert 2 == used_count("gpu:mi300x:2(IDX:0-1)")
    assert 0 == used_count("gpu:mi300x:0(IDX:N/A)")
    assert 4 == used_count("gpu:1,fpga:3")


@pytest.mark.parametrize(
    ("current", "models", "expected"),
    [
        ("gpu:mi300x:8", {"mi300x": 64}, "gpu:mi300x:64"),
        ("gpu:4,fpga:4", {"mi300x": 8}, "gpu:8,fpga:4"),  # untyped stays untyped, fpga kept
        ("fpga:4,gpu:mi300x:8(S:0-1)", {"mi300x": 8}, "fpga:4,gpu:mi300x:8"),
        ("fpga:2", {"mi300x": 8}, "fpga:2,gpu:mi300x:8"),
        ("gpu:mi300x:8", {}, ""),
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
    from spurinv.nodeview import node_state

    with pytest.raises(ValueError, match="^" + re.escape(said) + "$"):
        node_state({"name": "n1", **node})
    with pytest.raises(ControllerError, match=re.escape(said)) as caught:
        parse_node({"nodes": [{"name": "n1", **node}]}, "n1")
    assert caught.value.kind == "protocol"


def test_state_words_are_read_upper_case_in_both_dialects():
    from spurinv.nodeview import node_state

    assert node_state({"state": ["idle", "drain"]}) == ("slurm-v0.0.39+", "IDLE", ("DRAIN",))
    flagged = {"state": "idle", "state_flags": ["drain", "Completing"]}
    assert node_state(flagged) == ("slurm-v0.0.38", "IDLE", ("DRAIN", "COMPLETING"))
    assert node_state({"state": "idle", "state_flags": []}) == ("slurm-v0.0.38", "IDLE", ())
    assert node_state({"state": []}) == ("slurm-v0.0.39+", "UNKNOWN", ())
