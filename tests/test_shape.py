"""spurinv.shape is the state file's one shape: the TypedDicts of spurinv/inventory/model.py state
its fields, the same dicts every path builds and reads, and the shape's rules are the ones their
validation enforces."""

from __future__ import annotations

import calendar
import re
from datetime import datetime
from typing import Any, NotRequired, get_origin

import pytest
from factories import T0, device, inventory
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from typing_extensions import get_type_hints, is_typeddict  # the ones that know its TypedDict (model.py's) on 3.11

from spurinv import shape
from spurinv.inventory import model


def typed_dicts() -> dict[str, Any]:
    """The TypedDicts of a discovery, a reading and the classifier's values (spurinv.inventory.model)."""
    return {name: value for name, value in vars(model).items() if is_typeddict(value) and value.__module__ == model.__name__}


def required(typed: Any) -> set[str]:
    """A TypedDict's required keys: read from its hints (model.py's annotations are strings, which
    ``__required_keys__`` cannot see through)."""
    hints = get_type_hints(typed, include_extras=True)
    optional: object = NotRequired  # a special form, which mypy will not compare with an origin
    return {key for key, hint in hints.items() if get_origin(hint) is not optional}


def samples() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each TypedDict's validating type, and a record of it with its required keys only (as a file
    written before the optional ones may hold it)."""
    full = inventory([device()])
    bare_device = {key: value for key, value in full["devices"][0].items() if key not in ("peers", "cdi_names", "link")}
    bare_inventory = {"cpus": full["cpus"], "memory_mb": full["memory_mb"], "fingerprint": full["fingerprint"],
                      "devices": [bare_device]}  # fmt: skip
    problem = {"source": "kfd", "path": "/sys/x", "reason": "gone"}
    change = {"id": "node", "field": "cpus", "old": 64, "new": 128}
    package = {"pci_bdf": "0000:05:00.0", "old_mode": "SPX", "new_mode": "CPX", "old_count": 1, "new_count": 8}
    diff = {"added": (bare_device,), "removed": (), "changed": (), "packages": (package,), "node": (change,),
            "old_counts": {}, "new_counts": {"mi300x": 1}}  # fmt: skip
    return {
        "Partition": (model.Partition, {"compute": "SPX", "memory": "NPS1", "index": 0}),
        "Link": (
            model.Link,
            {"device": "0000:05:00.0", "width": 8, "max_width": 16, "speed": None, "max_speed": None, "state": "degraded"},
        ),
        "Device": (model.ValidDevice, bare_device),
        "Inventory": (model.ValidInventory, bare_inventory),
        "Problem": (model.Problem, problem),
        "SourceStatus": (model.SourceStatus, {"status": "ok", "detail": ""}),
        "Discovery": (model.ValidDiscovery, {"ok": True, "inventory": bare_inventory, "sources": {}, "errors": []}),
        "Reading": (
            model.ValidReading,
            {"taken_at": T0, "ok": True, "fingerprint": full["fingerprint"], "inventory": bare_inventory},
        ),
        # the classifier's values: built with every key (classify.verdict, classify.compare)
        "FieldChange": (model.FieldChange, change),
        "PackageChange": (model.PackageChange, package),
        "InventoryDiff": (model.InventoryDiff, diff),
        "Outcome": (
            model.Outcome,
            {"kind": "change-pending", "reason": "first sighting", "fingerprint": None, "diff": diff, "release": None},
        ),
    }


def test_every_typed_dict_has_its_sample():
    assert set(samples()) == set(typed_dicts())


@pytest.mark.parametrize("name", sorted(typed_dicts()))
def test_validation_gives_every_key_of_the_typed_dict(name):
    """A record read with its required keys only comes out with every key: the full run never
    meets a missing one."""
    typed = typed_dicts()[name]
    valid, sample = samples()[name]

    assert set(sample) == required(typed)
    assert set(model.read_only_adapter(valid).validate_python(sample)) == set(typed.__annotations__)


@pytest.mark.parametrize("name", sorted(typed_dicts()))
def test_validation_refuses_an_unknown_key(name):
    """Typos in state files are errors, not silence."""
    valid, sample = samples()[name]

    with pytest.raises(ValidationError, match="typo"):
        model.read_only_adapter(valid).validate_python({**sample, "typo": 1})


# the pattern the sources used before the tick dropped ``re`` (the kernel's ``%04x:%02x:%02x.%d``)
BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")


@given(st.from_regex(r"[0-9a-fA-F:.\n ]{0,14}", fullmatch=True) | st.from_regex(BDF, fullmatch=False))
def test_the_pci_address_key_is_the_patterns(text):
    """``shape.bdf_key`` parses without ``re`` exactly what ``BDF`` matches, to the same numbers."""
    match = BDF.match(text)
    expected = None if match is None else (*(int(part, 16) for part in match.groups()[:3]), int(match[4]))

    assert shape.bdf_key(text) == expected
    assert shape.bdf_key(text) == expected  # the kept answer, as the parse gave it


def test_the_pci_address_keys_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(shape, "_KEYS", {})
    monkeypatch.setattr(shape, "_KEPT_KEYS", 2)
    spellings = ["0000:05:00.0", "zz", "0000:c1:00.7", "0001:05:00.0\n", "0000:05:00.0"]

    assert [shape.bdf_key(text) for text in spellings] == [shape._bdf_key(text) for text in spellings]
    assert shape._KEYS == {"0000:05:00.0": (0, 5, 0, 0), "zz": None}
    assert [shape.bdf_key(text) for text in spellings] == [(0, 5, 0, 0), None, (0, 0xC1, 0, 7), (1, 5, 0, 0), (0, 5, 0, 0)]


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
        TypeAdapter(model.ValidInventory).validate_python(inventory)
    else:
        with pytest.raises(ValueError, match="not sorted"):
            TypeAdapter(model.ValidInventory).validate_python(inventory)


def test_derived_values_are_the_shapes():
    problem = {"source": "kfd", "path": "/sys/x", "reason": "gone"}
    link = {"device": "0000:05:00.0", "width": 8, "max_width": 16, "speed": None, "max_speed": "32.0 GT/s", "state": "degraded"}

    assert shape.problem_line(problem) == "kfd: /sys/x: gone"
    assert shape.problem_line({**problem, "path": ""}) == "kfd: gone"
    assert shape.link_line(link) == "x8 of x16, unknown of 32.0 GT/s"


@given(st.lists(st.sampled_from(["switch", "kfd", "pci", None])))
def test_a_switch_is_errors_that_are_all_its_evidence(sources):
    """Some errors, every one a switch's: anything else (no error, one real failure) is not."""
    assert shape.switch_only(sources) == (bool(sources) and set(sources) == {"switch"})
    assert shape.switch_only(iter(sources)) == shape.switch_only(sources)  # a generator, read once


# --- spurinv's times: written by shape.stamp, read back by shape.epoch ----------------------------

AT = 1796288400  # 2026-12-03T09:00:00Z
FIRST, LAST = -30610224000, 253402300799  # 1000-01-01T00:00:00Z, 9999-12-31T23:59:59Z: four-digit years


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-12-03T09:00:00Z", AT),
        ("2026-12-03T09:00:00.5Z", AT),
        ("2026-12-03T09:00:00.123456+00:00", AT),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59.5Z", -1),  # the fraction dropped, as strptime did: floor, not towards zero
        ("2000-02-29T00:00:00Z", 951782400),
        ("2026-12-03T09:00:00.Z", None),
        ("2026-12-03T09:00:00.5x5Z", None),
        ("2026-12-03T09:00:00.٣Z", None),  # an Arabic-Indic digit: isdigit, not ASCII
        ("٢026-12-03T09:00:00Z", None),  # strptime's \d took it as a year
        ("2026-12-03T10:00:00+01:00", AT),  # another zone (a hand-edited state file): the offset applied
        ("2026-12-03T03:30:00-05:30", AT),
        ("2026-12-03T09:00:00-00:00", AT),  # RFC 3339's "offset unknown": the time is UTC
        ("9999-12-31T22:59:59-01:00", 253402300799),  # the last second a datetime holds
        ("9999-12-31T23:00:00-01:00", None),  # the year 10000: no datetime holds it (it raised)
        ("0001-01-01T00:00:00+01:00", None),  # the year 0, likewise
        ("0001-01-01T00:00:00-01:00", -62135593200),
        ("2026-12-03 09:00:00Z", None),
        ("2026-12-03t09:00:00Z", None),  # strptime matched case-insensitively
        ("2026-12-03T09:00:00", None),  # no zone at all
        ("2026-02-29T00:00:00Z", None),  # no such day
        ("2026-12-03T24:00:00Z", None),
        ("2026-12-03T09:00:60Z", None),  # a leap second: timestamp_problem's rule too
        ("2026-1-03T09:00:00Z", None),
        ("", None),
        (None, None),
        (AT, None),
    ],
)
def test_a_time_we_wrote_is_read_back_with_fractions_of_a_second(text, seconds):
    assert shape.epoch(text) == seconds


@given(st.integers(FIRST, LAST))
def test_every_second_we_write_reads_back_as_itself(seconds):
    assert shape.epoch(shape.stamp(seconds)) == seconds


@example(datetime.min, "+02:00", "seconds")  # noqa: DTZ901  (naive, as the strategy draws them)
@example(datetime.max.replace(microsecond=0), "-05:30", "seconds")  # noqa: DTZ901
@given(
    st.datetimes(),  # naive, years 1 to 9999: the zone is the text's
    st.sampled_from(["Z", "+00:00", "+02:00", "-05:30", "-00:00"]),
    st.sampled_from(["seconds", "milliseconds", "microseconds"]),
)
def test_a_time_reads_as_the_standard_library_reads_it_in_its_zone(moment, zone, spelling):
    """Any RFC 3339 time timestamp_problem vouches for: the seconds ``calendar.timegm`` gives
    (the fraction dropped) less the zone's offset, as ``datetime`` reads it."""
    text = moment.isoformat(timespec=spelling) + zone
    assert shape.timestamp_problem(text) is None
    offset = {"+02:00": 7200, "-05:30": -19800}.get(zone, 0)
    seconds = calendar.timegm(moment.timetuple()) - offset

    # past the years 1 and 9999 (an offset carries it there): no datetime holds it, so none
    assert shape.epoch(text) == (seconds if -62135596800 <= seconds < 253402300800 else None)


def test_counts_are_singular_for_one():
    one = inventory([device()])

    assert shape.summary(one).startswith("1 device (mi300x 1), ")
    assert shape.summary(inventory([device(), device("0000:27:00.0")])).startswith("2 devices (mi300x 2), ")
    assert (shape.counted(1, "spec"), shape.counted(0, "spec"), shape.counted(3, "render node")) == (
        "1 spec",
        "0 specs",
        "3 render nodes",
    )
