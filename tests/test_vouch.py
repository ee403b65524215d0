"""The lean path's check of a state file (spurinv/state/vouch.py) never vouches for a file the
pydantic model refuses, and vouches for every file spurinv itself writes."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spurinv import jsontext
from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root
from spurinv.state import vouch
from spurinv.state.file import Corrupt, NewerSchema, parse, validate

TIMESTAMPS = st.sampled_from([
    "2026-12-02T18:00:00Z", "2026-12-02T18:00:00+00:00", "2026-12-02T18:00:00.5Z", "2026-12-02T18:00:00",
    "2026-13-02T18:00:00Z", "2026-02-30T18:00:00Z", "2026-12-02 18:00:00Z", "20261202T180000Z", "yesterday",
    "2026-12-02T24:00:00Z", "2026-12-02T18:00:00+24:00", "2026-12-02T18:00:00-23:59", "0000-01-01T00:00:00Z",
])  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=8), st.sampled_from(["5", "true", "off", "busy", "observed", "drain", "\ud800", "rest", "1.0"]),
    TIMESTAMPS,
)  # fmt: skip
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def mutated(base: dict[str, Any], draw: Any) -> dict[str, Any]:
    """``base`` with one to three random edits: a value replaced (by a random one or by another
    value of the same file), a key removed, or a key added."""
    state = json.loads(json.dumps(base))  # a deep copy of JSON data; copy.deepcopy costs ten times as much
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(state)
        path = draw(st.sampled_from(paths[1:] or paths))
        if not path:
            continue
        parent = _get(state, path[:-1])
        edit = draw(st.sampled_from(["value", "borrow", "delete", "add"]))
        if edit == "value":
            parent[path[-1]] = draw(VALUES)
        elif edit == "borrow":
            parent[path[-1]] = copy.deepcopy(_get(state, draw(st.sampled_from(paths))))
        elif edit == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["drain", "intent", "extra", "controller_errors", "cause", "index"]))] = draw(VALUES)
    return state


def _accepted(state: object) -> bool:
    try:
        validate(state)
    except (ValidationError, TypeError, ValueError):
        return False
    return True


_WRITTEN: list[list[dict[str, Any]]] = []  # made by the first test that asks, once a worker


@pytest.fixture
def written(cli, built, state_path) -> list[dict[str, Any]]:
    """State files as spurinv writes them: a first reading, a confirmed baseline, a tick's (nine
    in-process runs, once a worker; each test gets its own copy)."""
    if not _WRITTEN:
        files = []
        for root in ("mi300x-dpx", "vega10", "host-node_exporter"):
            state_path.unlink(missing_ok=True)
            for _ in range(3):
                assert cli("refresh", "--root", built(root), "--state", state_path, "--confirm-interval", "0").code == 0
                files.append(json.loads(state_path.read_text()))
        _WRITTEN.append(files)
    return copy.deepcopy(_WRITTEN[0])


def test_every_state_spurinv_writes_is_vouched_for(written):
    for state in written:
        assert _accepted(state)
        assert vouch.problem(state) is None


def test_what_the_lean_check_vouches_for_the_model_accepts(written):
    bases = [written[2], written[5], written[6]]

    @settings(max_examples=examples(600), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        state = mutated(data.draw(st.sampled_from(bases)), data.draw)
        if vouch.problem(state) is None:
            assert _accepted(state), json.dumps(state, default=str)[:2000]

    check()


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda s: s.update(consecutive_failures="many"), "consecutive_failures"),
        (lambda s: s["readings"][-1].update(taken_at="2026-02-30T18:00:00Z"), "readings.1.taken_at"),
        (lambda s: s["baseline"].update(source="guessed"), "baseline.source"),
        (lambda s: s.update(drain={"reason": "spurinv: x", "set_at": "2026-12-02T18:00:00Z", "cause": "bored"}), "drain"),
        (lambda s: s["baseline"]["inventory"].update(cpus=s["baseline"]["inventory"]["cpus"] + 1), "baseline.inventory"),
        (lambda s: s["readings"][-1].update(ok=False), "readings.1"),
        (lambda s: s.update(seal=1), "seal"),
    ],
)
def test_the_first_problem_is_named(written, edit, where):
    state = copy.deepcopy(written[2])
    edit(state)

    found = vouch.problem(state)

    assert found is not None
    assert found.startswith(where), found
    assert not _accepted(state)


@st.composite
def near_timestamps(draw: Any) -> str:
    """RFC 3339-like text with every part possibly out of range or misshapen."""
    year = draw(st.integers(0, 10000))
    parts = [draw(st.integers(0, 61)) for _ in range(5)]  # month, day, hour, minute, second
    text = f"{year:04d}-{parts[0]:02d}-{parts[1]:02d}T{parts[2]:02d}:{parts[3]:02d}:{parts[4]:02d}"
    text += draw(st.sampled_from(["", ".5", ".123456", ".1234567", "."]))
    text += draw(st.sampled_from(["Z", "", "+00:00", "-23:59", "+24:00", "+05:3", "z", "+0530", "+05:60"]))
    return draw(st.sampled_from([text, text.replace("T", " "), text.replace("-", "/", 1), " " + text]))


@pytest.mark.parametrize("where", ["last.at", "readings.1.taken_at", "baseline.since", "last_success"])
def test_a_timestamp_the_lean_check_accepts_the_model_accepts(written, where):
    base = json.dumps(written[2])

    @settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
    @given(near_timestamps())
    def check(text: str) -> None:
        state = json.loads(base)  # a fresh copy: copy.deepcopy of the state costs ten times as much
        *path, name = where.split(".")
        _get(state, tuple(int(part) if part.isdigit() else part for part in path))[name] = text
        if vouch.problem(state) is None:
            assert _accepted(state), text

    check()
    assert vouch.problem({**written[2], "last_success": "2028-02-29T23:59:59.000001-23:59"}) is None


@pytest.mark.parametrize("version", [-1, 0, 1, 2, 3, 4, 2**62])
def test_a_schema_version_the_loader_refuses_is_not_vouched_for(written, version):
    """The loader (file.parse, not the model) refuses a version below 1 or above its own; the lean
    check's answer is the loader's, not only the model's."""
    state = {**written[2], "schema_version": version}

    found = vouch.problem(state)

    try:
        parse(json.dumps(state).encode(), "state.json")
    except (Corrupt, NewerSchema):
        assert found is not None
        assert found.startswith("schema_version"), found
    else:
        assert found is None, found


@pytest.mark.parametrize("where", ["baseline", "readings.1"])
def test_a_lone_surrogate_in_a_fingerprint_is_corrupt_not_a_crash(written, where):
    """The model's message quotes the fingerprint; pydantic could not encode a lone surrogate in it
    and raised UnicodeEncodeError (refresh: exit 70 every tick, the file never moved aside)."""
    state = copy.deepcopy(written[2])
    holder = _get(state, tuple(int(part) if part.isdigit() else part for part in where.split(".")))
    holder["inventory"]["fingerprint"] = "\ud800"

    assert vouch.problem(state) is not None
    with pytest.raises(Corrupt, match="does not match the devices"):
        parse(json.dumps(state).encode(), "state.json")


def test_a_baseline_without_an_inventory_is_not_vouched_for_whatever_was_discovered(written):
    """A baseline's inventory is required: a null one is a state the model refuses. Asked without a
    discovered inventory, the check took the null for "the discovered one" and passed it
    (found by the property test below, replaying an example it had kept)."""
    state = copy.deepcopy(written[5])
    assert state["baseline"] is not None
    state["baseline"]["inventory"] = None

    assert not _accepted(state)
    assert vouch.problem(state) == "baseline.inventory: null is not object"
    assert vouch.problem(state, state["readings"][-1]["inventory"]) == "baseline.inventory: null is not object"


def test_the_checker_understands_every_definition_of_the_shipped_schema():
    """Definitions are compiled once a value needs them (an optional member's, most of them None
    on a tick): every one of the shipped schema must be one the checker understands."""
    with open(vouch.SCHEMA_FILE, "rb") as handle:
        root = json.loads(handle.read())
    defs: dict[str, Any] = {}
    for schema in root["$defs"].values():
        vouch._compile(schema, root, defs)  # Unvouched for a keyword or a format it does not know
    vouch._compile(root, root, defs)


def test_an_optional_definition_the_checker_does_not_understand_refuses_every_value_it_judges():
    root = {
        "type": "object",
        "properties": {"extra": {"anyOf": [{"$ref": "#/$defs/Extra"}, {"type": "null"}]}},
        "$defs": {"Extra": {"type": "object", "minProperties": 1}},
    }
    rule = vouch._compile(root, root, {})

    rule({"extra": None}, "", None)  # None is the null branch's, understood
    with pytest.raises(vouch.Unvouched, match="minProperties"):
        rule({"extra": {"a": 1}}, "", None)
    with pytest.raises(vouch.Unvouched, match="minProperties"):
        rule({"extra": {"a": 1}}, "", None)  # every time, not only the first


@pytest.mark.parametrize(
    ("field", "value", "model"),
    [
        ("cdi_names", ["\ud800"], True),  # the model takes a lone surrogate from a dict; no JSON text holds one
        ("cdi_names", ["amd.com/gpu=0", 5], False),
        ("cdi_names", [None], False),
        ("peers", ["0000:05:00.0", "x\udcff"], True),
        ("vendor", "AMD", False),
        ("vendor", "\ud800", False),
        ("vendor", 5, False),
        ("vendor", None, False),
    ],
)
def test_a_strings_array_or_a_choice_the_model_refuses_is_not_vouched_for(written, field, value, model):
    """An array of strings and a string enum (a device's vendor) are accepted at a glance only when
    every item is ASCII text or the value one of the choices; anything else gets the full checks."""
    state = copy.deepcopy(written[2])
    state["readings"][-1]["inventory"]["devices"][0][field] = value

    found = vouch.problem(state)

    assert found is not None
    assert found.startswith(f"readings.1.inventory.devices.0.{field}"), found
    assert _accepted(state) is model


@pytest.mark.parametrize("value", [1 << 63, -(1 << 63), 1 << 200])
@pytest.mark.parametrize("field", ["render_minor", "numa_node"])
def test_an_integer_past_64_bits_is_not_vouched_for_though_members_pass_at_a_glance(written, field, value):
    """Integers within 64 bits pass at a glance; one past them gets the integer rule, which says so."""
    state = copy.deepcopy(written[2])
    state["readings"][-1]["inventory"]["devices"][0][field] = value

    found = vouch.problem(state)

    assert found is not None
    assert found.startswith(f"readings.1.inventory.devices.0.{field}"), found


def test_an_array_of_text_and_a_choice_the_model_accepts_are_vouched_for(written):
    state = copy.deepcopy(written[2])
    device = state["readings"][-1]["inventory"]["devices"][0]
    device["cdi_names"] = ["amd.com/gpu=0", "é"]  # outside the fingerprint, as the peers are
    device["peers"] = ["0000:05:00.0"]

    assert vouch.problem(state) is None
    assert _accepted(state)


# as_discovered: an inventory stored as the very text of a fresh discovery's is not walked again.


def _holding(base: dict[str, Any], inventory: Any) -> tuple[Any, dict[int, tuple[object, str]], str]:
    """``base`` with ``inventory`` as its readings' and baseline's, written and read back as the
    tick reads a state file; with the texts it was read from and the inventory's own text."""
    state = copy.deepcopy(base)
    for holder in (*state["readings"], state["baseline"]):
        holder["inventory"] = inventory
        if "fingerprint" in holder:
            holder["fingerprint"] = inventory["fingerprint"]
    texts: dict[int, tuple[object, str]] = {}
    read = jsontext.loads_shared(jsontext.dumps(state).encode(), "inventory", texts)
    return read, texts, jsontext.dumps(inventory)


def _verdicts(state: Any, texts: dict[int, tuple[object, str]], text: str) -> tuple[object, str | None, str | None]:
    """What as_discovered says of ``text``, and the check's answer with it and without it."""
    known = vouch.as_discovered(texts, text)
    return known, vouch.problem(state, known), vouch.problem(state)


@pytest.mark.parametrize(
    "name",
    ["mi300x-cpx", "mi300x-dpx", "mi300x-spx-vram", "mi308x", "vega10", "nvidia-8", "nvidia-cdi", "nvidia-h100-x8",
     "mi300x-spx-xcp", "mig-balanced", "mig-multi-ci", "host-node_exporter"],
)  # fmt: skip
def test_a_discovered_inventory_as_discovered_trusts_is_one_the_full_check_accepts(written, built, name):
    """The shortcut's premise, on what discovery really writes: an inventory as_discovered takes
    as checked is one the full check accepts, so the answer is the same either way."""
    found = discover(Root(str(built(name))))
    assert found["inventory"] is not None, found["errors"]

    state, texts, text = _holding(written[2], found["inventory"])
    known, fast, full = _verdicts(state, texts, text)

    assert known is state["readings"][-1]["inventory"]
    assert fast is None
    assert full is None
    # the tick takes the inventory itself for its text, unparsed (jsontext.loads_shared's known)
    assert _exactly(jsontext.loads(text), found["inventory"])


def _exactly(read: object, value: object) -> bool:
    """Equal type for type and key for key (``1 == 1.0 == True`` and ``[1] == [1]`` for a tuple's are not)."""
    if type(read) is not type(value):
        return False
    if isinstance(read, dict) and isinstance(value, dict):
        return list(read) == list(value) and all(_exactly(read[key], value[key]) for key in read)
    if isinstance(read, list) and isinstance(value, list):
        return len(read) == len(value) and all(_exactly(one, other) for one, other in zip(read, value, strict=True))
    return read == value


def _hostile(root: Path, edit: str) -> None:
    devices = root / "sys/bus/pci/devices"
    function = Path(os.path.realpath(devices / "0000:07:00.0"))
    if edit == "driver":  # a driver link whose name is not UTF-8: a lone surrogate in the inventory
        (function / "driver").unlink()
        os.symlink(b"../../../bus/pci/drivers/nv\xffidia", bytes(function / "driver"))
    else:  # a DRM card minor of 19 or 20 digits: past 64 bits, or within them and still refused a glance
        drm = root / "sys/class/drm"
        os.rename(drm / "card1", drm / f"card{edit}")


@pytest.mark.parametrize(
    ("edit", "accepted"), [("driver", False), ("99999999999999999999", False), ("1000000000000000000", True)]
)
def test_what_discovery_copies_unbounded_is_checked_in_full(written, root_copy, edit, accepted):
    """A driver name that is not UTF-8, a DRM minor of 19 digits or more: discovery writes them
    as they are, so as_discovered leaves them to the full check, which refuses the first two."""
    root = root_copy("nvidia-8")
    _hostile(root, edit)
    found = discover(Root(str(root)))
    assert found["inventory"] is not None, found["errors"]

    state, texts, text = _holding(written[2], found["inventory"])
    known, fast, full = _verdicts(state, texts, text)

    assert known is None
    assert fast == full
    assert (full is None) is accepted, full


@pytest.mark.parametrize("change", ["float", "bool", "text"])
def test_an_inventory_equal_to_the_discovered_one_is_answered_as_before(written, built, change):
    """The check judges equal inventories once, the first it meets (1.0 == 1 == True): the one
    as_discovered names counts as judged where it is met, so an equal one after it (the baseline)
    is not judged, and one before it (an older reading) is, as without it."""
    found = discover(Root(str(built("vega10"))))["inventory"]
    state, texts, text = _holding(written[2], found)
    other = json.loads(text)
    if change == "float":
        other["cpus"] = float(other["cpus"])
    elif change == "bool":
        other["devices"][0]["numa_node"] = bool(other["devices"][0]["numa_node"])
    else:
        other["devices"][0]["driver"] = "x\udcff"  # not equal: judged wherever it is
    assert (other == found) is (change != "text")

    for holder in ("baseline", "first reading"):
        place = state["baseline"] if holder == "baseline" else state["readings"][0]
        kept = place["inventory"]
        place["inventory"] = other
        known, fast, full = _verdicts(state, texts, text)
        place["inventory"] = kept
        assert known is state["readings"][-1]["inventory"]
        assert fast == full, holder


@pytest.mark.parametrize("spelling", [str.upper, lambda bdf: bdf.removeprefix("0000:"), lambda bdf: bdf + " "])
def test_a_pci_address_spelled_otherwise_than_discovery_writes_it_is_handed_over(written, spelling):
    """Discovery writes every address canonically (``0000:c1:00.0``); an inventory holding another
    spelling was not written by it. Such an address sorts last and can carry a fingerprint of its
    own, so only this rule stands between it and the tick carrying the file on."""
    from spurinv.inventory.fingerprint import fingerprint

    state = copy.deepcopy(written[2])
    for inventory in [reading["inventory"] for reading in state["readings"]] + [state["baseline"]["inventory"]]:
        last = inventory["devices"][-1]
        last["pci_bdf"] = spelling(last["pci_bdf"])
        inventory["fingerprint"] = fingerprint(inventory["cpus"], inventory["memory_mb"], inventory["devices"])

    found = vouch.problem(state)

    assert found is not None
    assert found.startswith("readings.0.inventory: "), found
    assert found.endswith(" is not a PCI address as discovery writes it"), found
