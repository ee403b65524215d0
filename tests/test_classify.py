"""The classifier: a table of rows, then hypothesis properties."""

from __future__ import annotations

import re

import pytest
from effort import examples
from factories import inventory, packages, reading
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv.inventory.classify import Kind, classify, compare, diff_empty, diff_summary, package_line, package_lines
from spurinv.inventory.model import Device, FieldChange, InventoryDiff, Outcome, PackageChange
from spurinv.report.models import adapter

SPX = inventory(packages(8, "SPX"))
CPX = inventory(packages(8, "CPX", per=8))
CPX_PARTIAL = inventory(packages(8, "CPX", per=8)[:-3])
NONE = inventory([], pci=[])
ZERO_BUT_ON_BUS = inventory([], pci=[d["pci_bdf"] for d in SPX["devices"]])
SEVEN = inventory(packages(8, "SPX")[:-1])
SEVEN_ON_BUS = inventory(packages(8, "SPX")[:-1], pci=[d["pci_bdf"] for d in SPX["devices"]])

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

    assert expected == outcome["kind"], outcome["reason"]


def test_confirmed_partition_switch_carries_a_per_gpu_summary():
    diff = classify(SPX, reading(CPX, 0), reading(CPX, 60))["diff"]
    assert diff is not None

    lines = [package_line(p) for p in diff["packages"]]
    assert "0000:05:00.0 SPX→CPX: 1 → 8 devices" in lines
    assert len(lines) == 8
    assert "8 GPUs SPX→CPX (1→8 each)" in diff_summary(diff)
    assert "mi300x 8→64" in diff_summary(diff)
    assert len(diff["added"]) == 64
    assert len(diff["removed"]) == 8


def test_suspicious_says_what_releases_it_and_accept_releases_only_that_reading():
    held = classify(SPX, reading(NONE, 0), reading(NONE, 60))
    accepted = classify(SPX, reading(NONE, 0), reading(NONE, 60), accepted=NONE["fingerprint"])
    other = classify(SPX, reading(NONE, 0), reading(NONE, 60), accepted=CPX["fingerprint"])

    assert "spurinv refresh --accept" in held["release"]
    assert Kind.CHANGE_CONFIRMED == accepted["kind"]
    assert Kind.SUSPICIOUS == other["kind"]


def test_discovery_failure_keeps_the_reasons():
    outcome = classify(SPX, reading(SPX), reading(None, errors=["topology kept changing", "x"]))

    assert "topology kept changing" in outcome["reason"]
    assert "+1 more" in outcome["reason"]


def test_memory_mode_change_is_a_field_change_not_added_or_removed():
    nps4 = inventory(packages(8, "SPX", memory_mode="NPS4"))

    diff = compare(SPX, nps4)

    assert not diff["added"]
    assert not diff["removed"]
    assert {c["field"] for c in diff["changed"]} == {"partition"}
    assert "NPS1→NPS4 on 8 devices" in diff_summary(diff)  # the modes, as SPX→CPX


def test_a_memory_mode_switched_with_the_compute_mode_is_named_with_it():
    """CPX/NPS1 → SPX/NPS4: the summary, the drain reason's text, names both modes."""
    before = inventory(packages(8, "CPX", per=8))
    after = inventory(packages(8, "SPX", memory_mode="NPS4"))

    diff = compare(before, after)

    assert diff_summary(diff) == "8 GPUs CPX/NPS1→SPX/NPS4 (8→1 each); mi300x 64→8"
    assert package_lines(diff)[0] == "0000:05:00.0 CPX/NPS1→SPX/NPS4: 8 → 1 devices"
    assert package_line(diff["packages"][0]) == "0000:05:00.0 CPX→SPX: 8 → 1 devices"  # the modes not given


def test_a_memory_mode_switched_on_partitions_that_stay_is_said_once():
    """DPX/NPS2 → CPX/NPS4: p0 and p1 keep their identity (changed), p2-p7 are new; the package's
    line names the memory switch, not again as "NPS2→NPS4 on 2 devices"."""
    before = inventory(packages(1, "DPX", per=2, memory_mode="NPS2"))
    after = inventory(packages(1, "CPX", per=8, memory_mode="NPS4"))

    diff = compare(before, after)

    assert diff_summary(diff) == "1 GPU DPX/NPS2→CPX/NPS4 (2→8); mi300x 2→8"
    assert package_lines(diff) == ["0000:05:00.0 DPX/NPS2→CPX/NPS4: 2 → 8 devices"]


def test_a_memory_mode_only_switch_is_named():
    """Compute mode and count unchanged (CPX/NPS1 → CPX/NPS4): no package change, the memory
    switch is still named; a compute switch with the memory mode kept names no memory mode."""
    nps1, nps4 = inventory(packages(8, "CPX", per=8)), inventory(packages(8, "CPX", per=8, memory_mode="NPS4"))

    assert diff_summary(compare(nps1, nps4)) == "NPS1→NPS4 on 64 devices"
    assert diff_summary(compare(SPX, CPX)) == "8 GPUs SPX→CPX (1→8 each); mi300x 8→64"


# ---------------------------------------------------------------- properties

inventories = st.builds(
    lambda n, mode, per, mem: inventory(packages(n, mode, per=per, memory_mb=mem)),
    st.integers(0, 4),
    st.sampled_from(["SPX", "DPX", "CPX"]),
    st.integers(1, 3),
    st.sampled_from([None, 1024, 2048]),
)
maybe = st.one_of(st.none(), inventories)


@settings(max_examples=examples(200))
@given(baseline=maybe, current=maybe)
def test_one_reading_never_confirms(baseline, current):
    """With no previous reading (or a failed one), nothing is ever confirmed."""
    for previous in (None, reading(None)):
        outcome = classify(baseline, previous, reading(current, 60))
        assert outcome["kind"] != Kind.CHANGE_CONFIRMED


@settings(max_examples=examples(200))
@given(baseline=maybe, previous=maybe)
def test_a_failure_never_confirms(baseline, previous):
    outcome = classify(baseline, reading(previous), reading(None, 60))

    assert Kind.DISCOVERY_FAILED == outcome["kind"]


@settings(max_examples=examples(200))
@given(baseline=maybe, previous=maybe, current=inventories, data=st.data())
def test_outcome_never_depends_on_device_order(baseline, previous, current, data):
    shuffled = data.draw(st.permutations(list(current["devices"])))
    again = inventory(list(shuffled), current["cpus"], current["memory_mb"], list(current["pci_functions"]))

    first = classify(baseline, reading(previous), reading(current, 60))
    second = classify(baseline, reading(previous), reading(again, 60))

    assert first == second


@settings(max_examples=examples(200))
@given(baseline=maybe, current=inventories, other=maybe)
def test_a_confirmed_change_stays_confirmed_when_the_reading_repeats(baseline, current, other):
    outcome = classify(baseline, reading(current, 0), reading(current, 60))
    if outcome["kind"] == Kind.CHANGE_CONFIRMED:
        assert Kind.CHANGE_CONFIRMED == classify(baseline, reading(current, 60), reading(current, 120))["kind"]
    # and a different previous reading never confirms it
    if other is not None and other["fingerprint"] != current["fingerprint"]:
        assert classify(baseline, reading(other), reading(current, 60))["kind"] != Kind.CHANGE_CONFIRMED


@settings(max_examples=examples(100))
@given(inv=maybe)
def test_a_reading_equal_to_the_baseline_is_unchanged(inv):
    if inv is not None:
        assert Kind.UNCHANGED == classify(inv, None, reading(inv))["kind"]


# --- pinned by the mutation run -------------------------------------------------------------------
# Classifier behaviour a mutation run found unpinned: package changes only for GPUs
# present before and after, the empty diff, the per-package summary, and which pending reason a person
# reads (the wording is documented output: README's ``status`` example shows it).


ONE = inventory(packages(1, "SPX"))


TWO = inventory(packages(2, "SPX"))


@pytest.mark.parametrize(("old", "new"), [(ONE, TWO), (TWO, ONE), (inventory([], pci=[]), ONE)])
def test_adding_or_removing_a_gpu_is_no_package_change(old, new):
    diff = compare(old, new)

    assert diff["packages"] == ()
    assert len(diff["added"]) + len(diff["removed"]) == 1
    assert "→1)" not in diff_summary(diff)  # no "(1→1)" package line invented for the new GPU


@settings(max_examples=examples(200))
@given(
    old=st.integers(0, 4),
    new=st.integers(0, 4),
    old_mode=st.sampled_from(["SPX", "DPX", "CPX"]),
    new_mode=st.sampled_from(["SPX", "DPX", "CPX"]),
)
def test_package_changes_are_only_for_gpus_present_before_and_after(old, new, old_mode, new_mode):
    per = {"SPX": 1, "DPX": 2, "CPX": 8}
    before = inventory(packages(old, old_mode, per=per[old_mode]))
    after = inventory(packages(new, new_mode, per=per[new_mode]))

    diff = compare(before, after)

    both = {d["pci_bdf"] for d in before["devices"]} & {d["pci_bdf"] for d in after["devices"]}
    assert {p["pci_bdf"] for p in diff["packages"]} == (both if old_mode != new_mode else set())
    for package in diff["packages"]:
        assert (package["old_count"], package["new_count"]) == (per[old_mode], per[new_mode])


def test_an_empty_diff_is_empty_and_any_difference_is_not():
    nps4 = inventory(packages(8, "SPX", memory_mode="NPS4"))
    more_memory = inventory(packages(8, "SPX"), memory_mb=2_000_000)

    assert diff_empty(compare(SPX, SPX))
    assert not diff_empty(compare(SPX, inventory(packages(9, "SPX"))))  # added
    assert not diff_empty(compare(SPX, inventory(packages(7, "SPX"))))  # removed
    assert not diff_empty(compare(SPX, nps4))  # changed
    assert not diff_empty(compare(SPX, more_memory))  # node
    assert diff_summary(compare(SPX, more_memory)) == "memory_mb 1500000→2000000"


def test_the_summary_counts_packages_and_says_each_only_for_several():
    one_cpx = inventory(packages(1, "CPX", per=8))
    two_cpx = inventory(packages(2, "CPX", per=8))

    assert diff_summary(compare(ONE, one_cpx)) == "1 GPU SPX→CPX (1→8); mi300x 1→8"
    assert diff_summary(compare(TWO, two_cpx)) == "2 GPUs SPX→CPX (1→8 each); mi300x 2→16"


def test_the_summary_counts_each_changed_field_by_its_devices():
    """A field that changed in place (a NUMA node, a unique id) says on how many devices; the
    operator reads this in a drain reason and in ``diff``."""
    moved: list[Device] = [{**device, "numa_node": 3} if index < 2 else device for index, device in enumerate(SPX["devices"])]
    renamed: list[Device] = [{**device, "unique_id": "0xfeed"} if index == 0 else device for index, device in enumerate(moved)]

    assert diff_summary(compare(SPX, inventory(moved))) == "numa_node changed on 2 devices"
    assert diff_summary(compare(SPX, inventory(renamed))) == "numa_node changed on 2 devices; unique_id changed on 1 device"


@pytest.mark.parametrize(
    ("previous", "why"),
    [
        (None, "first sighting"),
        (reading(None, 0), "first sighting"),  # a failed reading confirms nothing: start again
        (reading(TWO, 0), "differs from the previous reading"),
    ],
)
def test_a_pending_change_says_why_it_waits(previous, why):
    outcome = classify(ONE, previous, reading(SPX, 60))

    assert outcome["kind"] == Kind.CHANGE_PENDING
    assert outcome["reason"].startswith(why)


def test_a_lost_package_still_on_the_bus_is_suspicious_and_one_gone_from_the_bus_is_not():
    seven = packages(8, "SPX")[:-1]
    on_bus = inventory(seven, pci=[d["pci_bdf"] for d in SPX["devices"]])
    gone = inventory(seven)

    held = classify(SPX, reading(on_bus, 0), reading(on_bus, 60))
    confirmed = classify(SPX, reading(gone, 0), reading(gone, 60))

    assert held["kind"] == Kind.SUSPICIOUS
    assert SPX["devices"][-1]["pci_bdf"] in held["reason"]
    assert confirmed["kind"] == Kind.CHANGE_CONFIRMED
    assert confirmed["release"] is None


def test_field_changes_are_counted_per_device():
    one_nps4 = inventory(packages(1, "SPX", memory_mode="NPS4"))
    two_nps4 = inventory(packages(2, "SPX", memory_mode="NPS4"))

    assert diff_summary(compare(ONE, one_nps4)) == "NPS1→NPS4 on 1 device"
    assert diff_summary(compare(TWO, two_nps4)) == "NPS1→NPS4 on 2 devices"
    assert diff_summary(compare(two_nps4, TWO)) == "NPS4→NPS1 on 2 devices"


def test_only_an_accepted_suspicious_reading_says_it_was_accepted():
    none = inventory([], pci=[])
    accepted = classify(SPX, reading(none, 0), reading(none, 60), accepted=none["fingerprint"])
    plain = classify(SPX, reading(TWO, 0), reading(TWO, 60))

    assert (accepted["kind"], plain["kind"]) == (Kind.CHANGE_CONFIRMED, Kind.CHANGE_CONFIRMED)
    assert "accepted" in accepted["reason"]
    assert "accepted" not in plain["reason"]


def test_a_changed_field_carries_its_values_before_and_after():
    """What `spurinv diff` shows in its before/after columns (and --json lists): the values themselves,
    a partition as plain data."""
    one_nps4 = inventory(packages(1, "SPX", memory_mode="NPS4"))
    other_numa = inventory(packages(1, "SPX", numa=1))
    ident = ONE["devices"][0]["id"]

    assert compare(ONE, one_nps4)["changed"] == (
        FieldChange(
            id=ident,
            field="partition",
            old={"compute": "SPX", "memory": "NPS1", "index": 0},
            new={"compute": "SPX", "memory": "NPS4", "index": 0},
        ),
    )
    assert compare(ONE, other_numa)["changed"] == (FieldChange(id=ident, field="numa_node", old=0, new=1),)


def test_a_confirmed_change_says_whether_there_was_a_baseline():
    """The operator reads whether this is a change of a known inventory or the node's first one."""
    changed = classify(ONE, reading(SPX, 0), reading(SPX, 60))
    first = classify(None, reading(SPX, 0), reading(SPX, 60))

    assert (changed["kind"], first["kind"]) == (Kind.CHANGE_CONFIRMED, Kind.CHANGE_CONFIRMED)
    assert "differ from the baseline" in changed["reason"]
    assert "no baseline" not in changed["reason"]
    assert "no baseline yet" in first["reason"]
    assert "differ" not in first["reason"]


def test_a_held_reading_names_the_accept_command_with_the_fingerprint_as_status_shows_it():
    """The release quotes the fingerprint the way `spurinv status` and `refresh` print it (12 hex
    digits), so an operator can match the held reading before accepting it."""
    on_bus = inventory(packages(8, "SPX")[:-1], pci=[d["pci_bdf"] for d in SPX["devices"]])

    held = classify(SPX, reading(on_bus, 0), reading(on_bus, 60))

    command = re.search(r"`spurinv refresh --accept ([0-9a-f]+)`", held["release"] or "")
    assert command is not None
    assert command.group(1) == on_bus["fingerprint"][:12]


def test_a_model_that_appears_or_disappears_is_counted_from_or_to_zero():
    """The drain reason says how many GPUs of each model there were and are: none is 0, not less."""
    mi325x = inventory(packages(8, "SPX", model="mi325x"))

    assert diff_summary(compare(SPX, mi325x)).split("; ")[:2] == ["mi300x 8→0", "mi325x 0→8"]
    assert diff_summary(compare(None, SPX)) == "mi300x 0→8"


@pytest.mark.parametrize("shape", [Outcome, InventoryDiff, FieldChange, PackageChange])
def test_an_outcome_is_an_immutable_value(shape):
    """The outcome a run classified is what its steps and its record say: nothing may change it
    in between (every item is read-only, which mypy holds the code to), or add to it."""
    from pydantic import ValidationError

    outcome = classify(SPX, reading(CPX, 0), reading(CPX, 60))
    value = {Outcome: outcome, InventoryDiff: outcome["diff"], FieldChange: FieldChange(id="node", field="cpus", old=1, new=2),
             PackageChange: outcome["diff"]["packages"][0]}[shape]  # fmt: skip

    assert shape.__readonly_keys__ == frozenset(shape.__annotations__)
    assert adapter(shape).validate_python(value) == value
    with pytest.raises(ValidationError):
        adapter(shape).validate_python({**value, "extra": 1})


def test_a_partition_that_appears_or_vanishes_is_a_partition_change_not_a_memory_mode_switch():
    """A kernel that starts (or stops) showing a GPU's partition files: the same device, its
    partition None on one side, is counted as a changed partition; no memory modes are read from None."""
    from factories import device

    unread = inventory([device("0000:05:00.0", mode=None)])
    read = inventory([device("0000:05:00.0", mode="SPX", memory_mode="NPS1")])

    assert diff_summary(compare(unread, read)) == "1 GPU -→SPX (1→1); partition changed on 1 device"
    assert diff_summary(compare(read, unread)) == "1 GPU SPX→- (1→1); partition changed on 1 device"


def test_a_compute_mode_change_in_the_same_memory_mode_is_no_memory_mode_switch():
    from factories import device

    before = inventory([device("0000:05:00.0", mode="SPX", memory_mode="NPS1")])
    after = inventory([device("0000:05:00.0", mode="TPX", memory_mode="NPS1")])

    assert diff_summary(compare(before, after)) == "1 GPU SPX→TPX (1→1); partition changed on 1 device"


@pytest.mark.parametrize(
    ("count", "said"),
    [(1, "partition switch in progress: r0"), (2, "partition switch in progress: r0 (+1 more)"),
     (3, "partition switch in progress: r0 (+2 more)")],
)  # fmt: skip
def test_a_switch_in_progress_names_its_first_evidence_and_counts_the_rest(count, said):
    caught = reading(None)
    caught = {**caught, "errors": [{"source": "switch", "path": f"/sys/p{i}", "reason": f"r{i}"} for i in range(count)]}

    outcome = classify(None, None, caught)

    assert (outcome["kind"], outcome["reason"]) == (Kind.SWITCHING, said)
