"""The classifier: a table of rows, then hypothesis properties."""

from __future__ import annotations

import pytest
from factories import inventory, packages, reading
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv.classify import Kind, classify, compare

SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))
CPX_PARTIAL = inventory(packages(8, "CPX", per=8)[:-3])
NONE = inventory([], pci=[])
ZERO_BUT_ON_BUS = inventory([], pci=[d.pci_bdf for d in SPX.devices])
SEVEN = inventory(packages(8, "SPX")[:-1])
SEVEN_ON_BUS = inventory(packages(8, "SPX")[:-1], pci=[d.pci_bdf for d in SPX.devices])

ROWS = [
    # (name, baseline, previous, current, expected kind)
    ("matches baseline", SPX, SPX, SPX, Kind.UNCHANGED),
    ("matches baseline after a failure", SPX, None, SPX, Kind.UNCHANGED),
    ("failed read", SPX, SPX, None, Kind.DISCOVERY_FAILED),
    ("failed read, no baseline", None, None, None, Kind.DISCOVERY_FAILED),
    ("first sighting", SPX, SPX, CPX, Kind.CHANGE_PENDING),
    ("first reading ever", None, "none", SPX, Kind.CHANGE_PENDING),
    ("after a failed reading", SPX, None, CPX, Kind.CHANGE_PENDING),
    ("two different partial reads", SPX, CPX_PARTIAL, CPX, Kind.CHANGE_PENDING),
    ("confirmed", SPX, CPX, CPX, Kind.CHANGE_CONFIRMED),
    ("confirmed, no baseline", None, SPX, SPX, Kind.CHANGE_CONFIRMED),
    ("confirmed back", CPX, SPX, SPX, Kind.CHANGE_CONFIRMED),
    ("every GPU gone", SPX, NONE, NONE, Kind.SUSPICIOUS),
    ("every GPU gone, bus still shows them", SPX, ZERO_BUT_ON_BUS, ZERO_BUT_ON_BUS, Kind.SUSPICIOUS),
    ("one GPU lost but still on the bus", SPX, SEVEN_ON_BUS, SEVEN_ON_BUS, Kind.SUSPICIOUS),
    ("one GPU gone from the bus too", SPX, SEVEN, SEVEN, Kind.CHANGE_CONFIRMED),
    ("a node without GPUs stays without", NONE, NONE, NONE, Kind.UNCHANGED),
    ("GPUs appear on a GPU-less node", NONE, SPX, SPX, Kind.CHANGE_CONFIRMED),
]


@pytest.mark.parametrize(("name", "baseline", "previous", "current", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_classifier_table(name, baseline, previous, current, expected):
    prev = None if previous == "none" else reading(previous, 0)
    outcome = classify(baseline, prev, reading(current, 60))

    assert expected == outcome.kind, outcome.reason


def test_confirmed_partition_switch_carries_a_per_gpu_summary():
    outcome = classify(SPX, reading(CPX, 0), reading(CPX, 60))

    lines = [p.line() for p in outcome.diff.packages]
    assert "0000:05:00.0 SPX→CPX: 1 → 8 devices" in lines
    assert len(lines) == 8
    assert "8 GPUs SPX→CPX (1→8 each)" in outcome.diff.summary()
    assert "mi300x 8→64" in outcome.diff.summary()
    assert len(outcome.diff.added) == 64
    assert len(outcome.diff.removed) == 8


def test_suspicious_says_what_releases_it_and_accept_releases_only_that_reading():
    held = classify(SPX, reading(NONE, 0), reading(NONE, 60))
    accepted = classify(SPX, reading(NONE, 0), reading(NONE, 60), accepted=NONE.fingerprint)
    other = classify(SPX, reading(NONE, 0), reading(NONE, 60), accepted=CPX.fingerprint)

    assert "spurinv refresh --accept" in held.release
    assert Kind.CHANGE_CONFIRMED == accepted.kind
    assert Kind.SUSPICIOUS == other.kind


def test_discovery_failure_keeps_the_reasons():
    outcome = classify(SPX, reading(SPX), reading(None, errors=["topology kept changing", "x"]))

    assert "topology kept changing" in outcome.reason
    assert "+1 more" in outcome.reason


def test_memory_mode_change_is_a_field_change_not_added_or_removed():
    nps4 = inventory(packages(8, "SPX", memory_mode="NPS4"))

    diff = compare(SPX, nps4)

    assert not diff.added
    assert not diff.removed
    assert {c.field for c in diff.changed} == {"partition"}
    assert "NPS1→NPS4 on 8 devices" in diff.summary()  # issue #25: the modes, as SPX→CPX


# ---------------------------------------------------------------- properties

inventories = st.builds(
    lambda n, mode, per, mem: inventory(packages(n, mode, per=per, memory_mb=mem)),
    st.integers(0, 4),
    st.sampled_from(["SPX", "DPX", "CPX"]),
    st.integers(1, 3),
    st.sampled_from([None, 1024, 2048]),
)
maybe = st.one_of(st.none(), inventories)


@settings(max_examples=200)
@given(baseline=maybe, current=maybe)
def test_one_reading_never_confirms(baseline, current):
    """With no previous reading (or a failed one), nothing is ever confirmed."""
    for previous in (None, reading(None)):
        outcome = classify(baseline, previous, reading(current, 60))
        assert outcome.kind != Kind.CHANGE_CONFIRMED


@settings(max_examples=200)
@given(baseline=maybe, previous=maybe)
def test_a_failure_never_confirms(baseline, previous):
    outcome = classify(baseline, reading(previous), reading(None, 60))

    assert Kind.DISCOVERY_FAILED == outcome.kind


@settings(max_examples=200)
@given(baseline=maybe, previous=maybe, current=inventories, data=st.data())
def test_outcome_never_depends_on_device_order(baseline, previous, current, data):
    shuffled = data.draw(st.permutations(list(current.devices)))
    again = inventory(list(shuffled), current.cpus, current.memory_mb, list(current.pci_functions))

    first = classify(baseline, reading(previous), reading(current, 60))
    second = classify(baseline, reading(previous), reading(again, 60))

    assert first == second


@settings(max_examples=200)
@given(baseline=maybe, current=inventories, other=maybe)
def test_a_confirmed_change_stays_confirmed_when_the_reading_repeats(baseline, current, other):
    outcome = classify(baseline, reading(current, 0), reading(current, 60))
    if outcome.kind == Kind.CHANGE_CONFIRMED:
        assert Kind.CHANGE_CONFIRMED == classify(baseline, reading(current, 60), reading(current, 120)).kind
    # and a different previous reading never confirms it
    if other is not None and other.fingerprint != current.fingerprint:
        assert classify(baseline, reading(other), reading(current, 60)).kind != Kind.CHANGE_CONFIRMED


@settings(max_examples=100)
@given(inv=maybe)
def test_a_reading_equal_to_the_baseline_is_unchanged(inv):
    if inv is not None:
        assert Kind.UNCHANGED == classify(inv, None, reading(inv)).kind
