"""spurinv.shape is the state file's one shape: the TypedDicts of spurinv/records.pyi are generated
from the pydantic models that validate the same JSON (scripts/schemas), and the shape's rules are the
ones the models enforce."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, is_typeddict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from spurinv import shape
from spurinv.inventory import model

RECORDS = Path(shape.__file__).with_name("records.pyi")


def typed_dicts() -> dict[str, Any]:
    """The TypedDicts of spurinv/records.pyi as classes: a stub-only module (no ``typing`` on the
    tick, nothing imports it at run time), so run its text, annotations evaluated."""
    tree = ast.parse(RECORDS.read_text())
    namespace: dict[str, Any] = {}
    exec(compile(tree, str(RECORDS), "exec", dont_inherit=True), namespace)  # noqa: S102
    return {name: value for name, value in namespace.items() if is_typeddict(value)}


def models() -> dict[str, type[BaseModel]]:
    """Every model of a discovery (spurinv.inventory.model): the state file's own records are read as
    plain dicts and checked by spurinv/state/vouch.py, so scripts/schemas writes no TypedDict for them."""
    return {
        name: value
        for name, value in vars(model).items()
        if isinstance(value, type)
        and issubclass(value, model.Frozen)
        and value is not model.Frozen
        and value.__module__ == model.__name__
    }


def test_every_model_has_its_typed_dict_and_no_other():
    assert set(models()) == set(typed_dicts())


@pytest.mark.parametrize("name", sorted(models()))
def test_a_typed_dict_has_its_models_fields_and_required_ones(name):
    typed, validated = typed_dicts()[name], models()[name]

    assert set(typed.__annotations__) == set(validated.model_fields), name
    assert set(typed.__required_keys__) == {key for key, field in validated.model_fields.items() if field.is_required()}


# the pattern the sources used before the tick dropped ``re`` (the kernel's ``%04x:%02x:%02x.%d``)
BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")


@given(st.from_regex(r"[0-9a-fA-F:.\n ]{0,14}", fullmatch=True) | st.from_regex(BDF, fullmatch=False))
def test_the_pci_address_key_is_the_patterns(text):
    """``shape.bdf_key`` parses without ``re`` exactly what ``BDF`` matches, to the same numbers."""
    match = BDF.match(text)
    expected = None if match is None else (*(int(part, 16) for part in match.groups()[:3]), int(match[4]))

    assert shape.bdf_key(text) == expected


@given(st.lists(st.sampled_from(["0000:05:00.0", "0000:c1:00.0", "0001:05:00.0", "AB:CD", "0000:05:00.1"]), max_size=4),
       st.lists(st.integers(0, 7), min_size=4, max_size=4))  # fmt: skip
def test_the_model_orders_devices_by_the_shapes_key(bdfs, indexes):
    """An inventory validates only in :func:`shape.device_key` order (the model calls the shape)."""
    devices = [
        {"id": f"d{n}", "vendor": "amd", "model": "m", "pci_bdf": bdf, "pci_device": "0x74a1", "memory_mb": None,
         "partition": {"compute": None, "memory": None, "index": indexes[n]}, "numa_node": None, "render_minor": None,
         "card": None, "device_node": None, "unique_id": None, "driver": None}
        for n, bdf in enumerate(bdfs)
    ]  # fmt: skip
    from spurinv.inventory.fingerprint import fingerprint

    inventory = {"cpus": 1, "memory_mb": 1, "fingerprint": fingerprint(1, 1, devices), "devices": devices}
    sorted_ = [shape.device_key(d) for d in devices] == sorted(shape.device_key(d) for d in devices)

    assert (shape.inventory_problem(inventory) is None) == sorted_
    if sorted_:
        model.Inventory.model_validate(inventory)
    else:
        with pytest.raises(ValueError, match="not sorted"):
            model.Inventory.model_validate(inventory)


def test_derived_values_are_the_shapes():
    problem = {"source": "kfd", "path": "/sys/x", "reason": "gone"}
    link = {"device": "0000:05:00.0", "width": 8, "max_width": 16, "speed": None, "max_speed": "32.0 GT/s", "state": "degraded"}

    assert model.Problem.model_validate(problem).line() == shape.problem_line(problem) == "kfd: /sys/x: gone"
    assert model.Problem.model_validate({**problem, "path": ""}).line() == "kfd: gone"
    assert model.Link.model_validate(link).line() == shape.link_line(link) == "x8 of x16, unknown of 32.0 GT/s"


@given(st.lists(st.sampled_from(["switch", "kfd", "pci", None])))
def test_a_switch_is_errors_that_are_all_its_evidence(sources):
    """Some errors, every one a switch's: anything else (no error, one real failure) is not."""
    assert shape.switch_only(sources) == (bool(sources) and set(sources) == {"switch"})
    assert shape.switch_only(iter(sources)) == shape.switch_only(sources)  # a generator, read once
