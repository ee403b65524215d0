"""The classifier: (reported baseline, previous reading, current reading) → outcome. Pure.

One reading is never enough: a change is confirmed only by two consecutive successful readings
with the same fingerprint (ROCm/spur#898's "seen-twice" on the schedulable-set fingerprint, so two
different partial reads never confirm each other). A confirmed reading that loses every GPU, or
loses a package the PCI bus still shows, is *suspicious* and held back: a driver reload rolling
across a fleet must not report every node as zero-GPU (ROCm/spur#834's blocking review;
ROCm/spur#898, 2026-09-18; docs/spur.md).
"""

from __future__ import annotations

from enum import StrEnum

from spurinv import shape
from spurinv.inventory.fingerprint import SCHEDULABLE
from spurinv.shape import SWITCH

TYPE_CHECKING = False
if TYPE_CHECKING:  # the shapes, for mypy only: their module imports pydantic (and this one, for Kind)
    from spurinv.inventory.model import Device, FieldChange, Inventory, InventoryDiff, Outcome, PackageChange, Reading

COMPARED = tuple(field for field in SCHEDULABLE if field != "id")


class Kind(StrEnum):
    """Outcome kinds; the values are the documented JSON strings."""

    UNCHANGED = shape.UNCHANGED
    DISCOVERY_FAILED = "discovery-failed"
    CHANGE_PENDING = "change-pending"
    CHANGE_CONFIRMED = "change-confirmed"
    SUSPICIOUS = "suspicious"
    SWITCHING = "switching"  # a partition switch in progress: neither a change nor a failure


def switching(reading: Reading) -> bool:
    """Whether ``reading`` caught a partition switch in progress: every error is its evidence (a
    real failure beside a switch is a failure, which counts)."""
    return not reading["ok"] and shape.switch_only(error["source"] for error in reading["errors"])


def verdict(
    kind: Kind, reason: str, fingerprint: str | None = None, diff: InventoryDiff | None = None, release: str | None = None
) -> Outcome:
    """An outcome with every key."""
    return {"kind": kind, "reason": reason, "fingerprint": fingerprint, "diff": diff, "release": release}


def package_line(package: PackageChange, memory: tuple[str, str] | None = None) -> str:
    """``0000:05:00.0 SPX→CPX: 1 → 8 devices``; with the package's memory modes (``memory``, from
    :func:`package_memory`) when they changed too: ``0000:05:00.0 CPX/NPS1→SPX/NPS4: 8 → 1 devices``."""
    old_mode, new_mode = package["old_mode"], package["new_mode"]
    modes = _switch(old_mode, new_mode, memory) if old_mode != new_mode or memory else ""
    return f"{package['pci_bdf']}{modes}: {package['old_count']} → {package['new_count']} devices"


def package_lines(diff: InventoryDiff) -> list[str]:
    """:func:`package_line` for each changed package of ``diff``, memory modes included."""
    memory = package_memory(diff)
    return [package_line(package, memory.get(package["pci_bdf"])) for package in diff["packages"]]


def _switch(old_mode: str | None, new_mode: str | None, memory: tuple[str, str] | None = None) -> str:
    """`` SPX→CPX``, or `` CPX/NPS1→SPX/NPS4`` with the memory modes; ``-`` for a mode not known on that side."""
    if memory is None:
        return f" {old_mode or '-'}→{new_mode or '-'}"
    return f" {old_mode or '-'}/{memory[0]}→{new_mode or '-'}/{memory[1]}"


def package_memory(diff: InventoryDiff) -> dict[str, tuple[str, str]]:
    """``{pci_bdf: (old, new)}``: the memory mode (NPS) of each changed package whose memory mode
    changed with it. Read from the devices the diff holds (a changed package's devices are added,
    removed or changed ones), so a package change keeps its documented shape."""
    bdfs = {package["pci_bdf"] for package in diff["packages"]}
    before: dict[str, set[str | None]] = {}
    after: dict[str, set[str | None]] = {}
    for devices, side in ((diff["removed"], before), (diff["added"], after)):
        for device in devices:
            if device["pci_bdf"] in bdfs and device["partition"] is not None:
                side.setdefault(device["pci_bdf"], set()).add(device["partition"]["memory"])
    for change in diff["changed"]:
        bdf = _package_of(change["id"], bdfs)
        old, new = change["old"], change["new"]
        if change["field"] == "partition" and bdf is not None and isinstance(old, dict) and isinstance(new, dict):
            before.setdefault(bdf, set()).add(old.get("memory"))
            after.setdefault(bdf, set()).add(new.get("memory"))
    result: dict[str, tuple[str, str]] = {}
    for bdf in sorted(bdfs):
        old_modes, new_modes = before.get(bdf, set()), after.get(bdf, set())
        # one mode on each side, or it is not one switch to name (a package half read is no package change)
        if len(old_modes) == 1 and len(new_modes) == 1 and old_modes != new_modes:
            result[bdf] = (str(next(iter(old_modes)) or "-"), str(next(iter(new_modes)) or "-"))
    return result


def _package_of(ident: str, bdfs: set[str]) -> str | None:
    """The changed package a device identity belongs to: discovery names a device by its PCI
    function, or a partition of it as ``<function>/<partition>`` (``0000:05:00.0/p3``)."""
    bdf = ident.split("/", 1)[0]
    return bdf if bdf in bdfs else None


def diff_empty(diff: InventoryDiff) -> bool:
    """True when nothing schedulable differs."""
    return not (diff["added"] or diff["removed"] or diff["changed"] or diff["node"])


def diff_summary(diff: InventoryDiff) -> str:
    """One line for a drain reason or a log: ``8 GPUs SPX→CPX (1→8 each); mi300x 8→64``; a memory
    mode that changed with the compute mode is named with it: ``8 GPUs CPX/NPS1→SPX/NPS4 (8→1 each)``."""
    parts = []
    memory = package_memory(diff)
    groups: dict[tuple[str | None, str | None, tuple[str, str] | None, int, int], int] = {}
    for package in diff["packages"]:
        switched = memory.get(package["pci_bdf"])
        key = (package["old_mode"], package["new_mode"], switched, package["old_count"], package["new_count"])
        groups[key] = groups.get(key, 0) + 1
    for (old_mode, new_mode, switched, old_count, new_count), number in sorted(groups.items(), key=str):
        gpus = f"{number} GPU{'s' if number > 1 else ''}"
        # Same mode, other count (a MIG layout: "MIG (7→3 each)"): the mode still says what moved.
        if old_mode != new_mode or switched:
            modes = _switch(old_mode, new_mode, switched)
        else:
            modes = f" {old_mode}" if old_mode else ""
        parts.append(
            f"{gpus}{modes} ({old_count}→{new_count} each)" if number > 1 else f"{gpus}{modes} ({old_count}→{new_count})"
        )
    old_counts, new_counts = diff["old_counts"], diff["new_counts"]
    for model in sorted(set(old_counts) | set(new_counts)):
        old, new = old_counts.get(model, 0), new_counts.get(model, 0)
        if old != new:
            parts.append(f"{model} {old}→{new}")
    fields: dict[str, int] = {}
    switches: dict[tuple[str, str], int] = {}
    for change in diff["changed"]:
        if switched := _memory_modes(change):  # a memory-mode switch says which (NPS1→NPS4), as SPX→CPX does
            if _package_of(change["id"], set(memory)) is None:  # else its package's line above names it
                switches[switched] = switches.get(switched, 0) + 1
            continue
        fields[change["field"]] = fields.get(change["field"], 0) + 1
    parts.extend(f"{old}→{new} on {count} device{'s' if count > 1 else ''}" for (old, new), count in sorted(switches.items()))
    parts.extend(f"{field} changed on {count} device{'s' if count > 1 else ''}" for field, count in sorted(fields.items()))
    parts.extend(f"{change['field']} {change['old']}→{change['new']}" for change in diff["node"])
    return "; ".join(parts) or "no schedulable difference"


def _memory_modes(change: FieldChange) -> tuple[str, str] | None:
    """(old, new) memory modes of a partition change that switched the memory mode, else None."""
    before, after = change["old"], change["new"]
    if change["field"] != "partition" or not isinstance(before, dict) or not isinstance(after, dict):
        return None
    old, new = before.get("memory"), after.get("memory")
    if old == new:
        return None
    return str(old or "-"), str(new or "-")


def compare(old: Inventory | None, new: Inventory) -> InventoryDiff:
    """Return the difference from ``old`` to ``new`` by device identity (``old`` None: all added)."""
    before = {device["id"]: device for device in old["devices"]} if old else {}
    after = {device["id"]: device for device in new["devices"]}
    changed: list[FieldChange] = [
        {"id": ident, "field": field, "old": before[ident].get(field), "new": device.get(field)}
        for ident, device in after.items()
        if ident in before
        for field in COMPARED
        if before[ident].get(field) != device.get(field)
    ]
    node: list[FieldChange] = [
        {"id": "node", "field": field, "old": old[field], "new": new[field]}
        for field in ("cpus", "memory_mb")
        if old is not None and old[field] != new[field]
    ]
    return {
        "added": tuple(device for ident, device in after.items() if ident not in before),
        "removed": tuple(device for ident, device in before.items() if ident not in after),
        "changed": tuple(changed),
        "packages": _packages(old["devices"] if old else [], new["devices"]),
        "node": tuple(node),
        "old_counts": shape.gpu_counts(old),
        "new_counts": shape.gpu_counts(new),
    }


def _packages(old: list[Device], new: list[Device]) -> tuple[PackageChange, ...]:
    def modes(devices: list[Device]) -> dict[str, tuple[str | None, int]]:
        result: dict[str, tuple[str | None, int]] = {}
        for device in devices:
            partition, bdf = device["partition"], device["pci_bdf"]
            mode = partition["compute"] if partition else None
            result[bdf] = (mode, result.get(bdf, (mode, 0))[1] + 1)
        return result

    before, after = modes(old), modes(new)
    changes: list[PackageChange] = []
    for bdf in sorted(set(before) | set(after)):
        old_mode, old_count = before.get(bdf, (None, 0))
        new_mode, new_count = after.get(bdf, (None, 0))
        if (old_mode, old_count) != (new_mode, new_count) and old_count and new_count:
            changes.append(
                {"pci_bdf": bdf, "old_mode": old_mode, "new_mode": new_mode, "old_count": old_count, "new_count": new_count}
            )
    return tuple(changes)


def classify(
    baseline: Inventory | None,
    previous: Reading | None,
    current: Reading,
    accepted: str | None = None,
) -> Outcome:
    """Classify ``current`` against the baseline and the reading before it.

    ``accepted`` is a fingerprint an operator accepted with ``refresh --accept``: it releases a
    suspicious reading with exactly that fingerprint, and nothing else.
    """
    if switching(current):
        evidence = [error for error in current["errors"] if error["source"] == SWITCH]
        more = f" (+{len(evidence) - 1} more)" if len(evidence) > 1 else ""
        return verdict(Kind.SWITCHING, f"partition switch in progress: {evidence[0]['reason']}{more}")
    errors = current["errors"]
    inventory = current["inventory"]
    if not current["ok"] or inventory is None:
        first = shape.problem_line(errors[0]) if errors else "no inventory"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return verdict(Kind.DISCOVERY_FAILED, f"discovery failed: {first}{more}")
    fingerprint = inventory["fingerprint"]
    if baseline is not None and fingerprint == baseline["fingerprint"]:
        return verdict(Kind.UNCHANGED, shape.UNCHANGED_REASON, fingerprint)
    diff = compare(baseline, inventory)
    if previous is None or not previous["ok"] or previous["fingerprint"] != fingerprint:
        why = "first sighting" if previous is None or not previous["ok"] else "differs from the previous reading"
        return verdict(Kind.CHANGE_PENDING, f"{why}; a second identical reading confirms it", fingerprint, diff)
    suspicion = _suspicion(baseline, inventory, diff)
    if suspicion and accepted != fingerprint:
        return verdict(
            Kind.SUSPICIOUS,
            suspicion,
            fingerprint,
            diff,
            release=(
                "held until the devices come back; if the loss is real, accept it with "
                f"`spurinv refresh --accept {fingerprint[:12]}`"
            ),
        )
    reason = "two identical readings differ from the baseline" if baseline else "two identical readings; no baseline yet"
    if suspicion:
        reason += " (suspicious, accepted by an operator)"
    return verdict(Kind.CHANGE_CONFIRMED, reason, fingerprint, diff)


def _suspicion(baseline: Inventory | None, current: Inventory, diff: InventoryDiff) -> str | None:
    if baseline is None or not baseline["devices"]:
        return None
    if not current["devices"]:
        return f"every GPU vanished ({len(baseline['devices'])} → 0)"
    remaining = {device["pci_bdf"] for device in current["devices"]}
    on_bus = set(current.get("pci_functions", []))
    lost = sorted({d["pci_bdf"] for d in diff["removed"] if d["pci_bdf"] not in remaining and d["pci_bdf"] in on_bus})
    if lost:
        return f"{', '.join(lost)} still on the PCI bus but lost all devices"
    return None
