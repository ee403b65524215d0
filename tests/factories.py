"""Small builders of the state file's plain dicts (an inventory, a reading, the state and its
records) for the pure-logic tests (classify, policy, state)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from spurinv import shape
from spurinv.inventory.fingerprint import fingerprint
from spurinv.inventory.model import Device, Discovery, Inventory, Problem, Reading, Vendor
from spurinv.inventory.sources.pci import sort_key
from spurinv.state import file
from spurinv.state.file import Backoff, Baseline, State

T0 = datetime(2026, 12, 2, 18, 0, 0, tzinfo=UTC)


def same_json(left: object, right: object) -> bool:
    """Equal as JSON values read back: type for type, dict keys in the same order, NaN equal to
    NaN (json reads "NaN" as a float that equals nothing)."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same_json(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same_json(left[key], right[key]) for key in left)
    return type(left) is type(right) and left == right


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def device(
    bdf: str = "0000:05:00.0",
    *,
    model: str = "mi300x",
    mode: str | None = "SPX",
    index: int = 0,
    split: bool = False,
    memory_mb: int | None = None,
    numa: int | None = 0,
    memory_mode: str | None = "NPS1",
    vendor: Vendor = "amd",
) -> Device:
    # every key, the optional ones at their defaults: as discovery builds a device and validation
    # fills in one read from a file, so a factory's dict compares equal to either
    return {
        "id": f"{bdf}/p{index}" if split else bdf,
        "vendor": vendor,
        "model": model,
        "pci_bdf": bdf,
        "pci_device": "0x74a1",
        "memory_mb": memory_mb,
        "partition": {"compute": mode, "memory": memory_mode, "index": index} if mode or split else None,
        "numa_node": numa,
        "render_minor": 128 + index,
        "card": 1 + index,
        "device_node": f"/dev/dri/renderD{128 + index}",
        "unique_id": str(abs(hash(bdf)) % 10**12),
        "driver": "amdgpu",
        "peers": [],
        "cdi_names": [],
        "link": None,
    }


def packages(count: int, mode: str = "SPX", per: int = 1, **kwargs) -> list[Device]:
    """``count`` physical GPUs in ``mode`` with ``per`` partitions each."""
    bdfs = [f"0000:{0x05 + 0x20 * i:02x}:00.0" for i in range(count)]
    return [device(bdf, mode=mode, index=p, split=per > 1, **kwargs) for bdf in bdfs for p in range(per)]


def inventory(devices: list[Device], cpus: int = 192, memory_mb: int = 1_500_000, pci: list[str] | None = None) -> Inventory:
    ordered = sorted(devices, key=lambda d: (sort_key(d["pci_bdf"]), d["partition"]["index"] if d["partition"] else 0))
    return {
        "cpus": cpus,
        "memory_mb": memory_mb,
        "fingerprint": fingerprint(cpus, memory_mb, ordered),
        "devices": ordered,
        "pci_functions": sorted(pci if pci is not None else {d["pci_bdf"] for d in devices}),
    }


def reading(inv: Inventory | None, when: int = 0, errors: list[str] | None = None) -> Reading:
    """A reading of ``inv`` (None: a failed one, with ``errors``) taken ``when`` seconds after
    ``T0``, through the shape's own builder (:func:`spurinv.shape.reading`, the one every run
    records with): a reading field derived from a discovery needs no edit here."""
    problems: list[Problem] = [
        {"source": "kfd", "path": "/sys/class/kfd", "reason": r} for r in ([] if inv is not None else errors or ["torn read"])
    ]
    discovery: Discovery = {"ok": inv is not None, "inventory": inv, "sources": {}, "errors": problems, "flags": []}
    built: Reading = shape.reading(discovery, at(when))  # type: ignore[assignment]
    return built


# The state and its records, every key present as validation would fill it in
new_state = file.new
new_drain = file.drain
new_intent = file.intent
new_refusal = file.refusal


def new_baseline(inventory: Inventory, since: datetime, source: str) -> Baseline:
    return {"inventory": inventory, "since": since, "source": source}  # type: ignore[typeddict-item]


def new_backoff(kind: str, failures: int, next_attempt: datetime, error: str) -> Backoff:
    return {"kind": kind, "failures": failures, "next_attempt": next_attempt, "error": error}  # type: ignore[typeddict-item]


def with_reading(state: State, reading: Reading, switch_timeout: float = 600) -> State:
    """``state`` with ``reading`` recorded (:func:`spurinv.state.file.record`)."""
    return file.record(state, reading, switch_timeout)
