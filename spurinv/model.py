"""Validated models of what crosses a boundary: discovery results, readings, JSON output.

The discovery sources build plain dicts in exactly this JSON form (see :mod:`spurinv.records`
for why); these pydantic models validate them on every path that is not the timer's no-change
tick, and they are what the rest of the program works with. Invariants live here, in the types:

* a ``Discovery`` or ``Reading`` has an inventory **if and only if** it has no errors, and no
  source of a successful discovery failed — a failed read can never pass for "no GPUs";
* an ``Inventory``'s devices are sorted and unique by identity, and its fingerprint is the one
  :func:`spurinv.fingerprint.fingerprint` computes (so a tampered state file does not validate).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

from spurinv.fingerprint import fingerprint
from spurinv.sources.pci import sort_key

Vendor = Literal["amd", "nvidia", "intel"]
SourceState = Literal["ok", "absent", "failed"]


class Frozen(BaseModel):
    """Immutable, strict about unknown keys: typos in state files are errors, not silence."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Partition(Frozen):
    """A logical partition of an AMD package (SPX = one partition covering all of it)."""

    compute: str | None
    memory: str | None
    index: int


class Link(Frozen):
    """A GPU's PCIe link as read (``device``: the function whose link it is): width judged, speed
    reported (spurinv.sources.link). Not schedulable: never in the fingerprint."""

    device: str
    width: int | None
    max_width: int | None
    speed: str | None
    max_speed: str | None
    state: Literal["ok", "degraded", "down", "unknown", "gone"]

    def line(self) -> str:
        """``x8 of x16, 32.0 GT/s of 32.0 GT/s``."""
        width = f"x{self.width if self.width is not None else '?'} of x{self.max_width if self.max_width is not None else '?'}"
        return f"{width}, {self.speed or 'unknown'} of {self.max_speed or 'unknown'}"


class Device(Frozen):
    """One schedulable GPU (or GPU partition), named by a stable identity."""

    id: str
    vendor: Vendor
    model: str
    pci_bdf: str
    pci_device: str
    memory_mb: int | None
    partition: Partition | None
    numa_node: int | None
    render_minor: int | None
    card: int | None
    device_node: str | None
    unique_id: str | None
    driver: str | None
    peers: tuple[str, ...] = ()
    cdi_names: tuple[str, ...] = ()
    link: Link | None = None


class Inventory(Frozen):
    """The node: CPUs, memory and devices, with the fingerprint of the schedulable set."""

    cpus: int
    memory_mb: int
    fingerprint: str
    devices: tuple[Device, ...]
    pci_functions: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        ids = [device.id for device in self.devices]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate device identity")
        order = sorted(self.devices, key=lambda d: (sort_key(d.pci_bdf), d.partition.index if d.partition else 0))
        if list(self.devices) != order:
            raise ValueError("devices are not sorted by identity")
        expected = fingerprint(self.cpus, self.memory_mb, (d.model_dump() for d in self.devices))
        if self.fingerprint != expected:
            raise ValueError(f"fingerprint {self.fingerprint[:12]} does not match the devices ({expected[:12]})")
        return self

    def gpu_counts(self) -> dict[str, int]:
        """Devices per model, e.g. ``{"mi300x": 64}``."""
        counts: dict[str, int] = {}
        for device in self.devices:
            counts[device.model] = counts.get(device.model, 0) + 1
        return counts

    def summary(self) -> str:
        """One line: ``64 devices (mi300x 64), 192 CPUs, 1547 GiB``."""
        models = ", ".join(f"{model} {count}" for model, count in sorted(self.gpu_counts().items()))
        devices = f"{len(self.devices)} devices ({models})" if self.devices else "no GPUs"
        return f"{devices}, {self.cpus} CPUs, {self.memory_mb} MiB"


class Problem(Frozen):
    """An error or flagged inconsistency: which source, which path, why."""

    source: str
    path: str
    reason: str

    def line(self) -> str:
        """``kfd: /sys/...: reason``, one line for logs and drain reasons."""
        return f"{self.source}: {self.path}: {self.reason}" if self.path else f"{self.source}: {self.reason}"


class SourceStatus(Frozen):
    """One source's status: ``ok``, ``absent`` (with the reason) or ``failed`` (path and error)."""

    status: SourceState
    detail: str


def _check_result(ok: bool, inventory: Inventory | None, errors: tuple[Problem, ...]) -> None:
    if ok != (inventory is not None) or ok == bool(errors):
        raise ValueError("ok must mean: an inventory and no errors; a failure must carry its errors")


class Discovery(Frozen):
    """What one discovery found: an inventory, or the errors that prevented one."""

    ok: bool
    inventory: Inventory | None
    sources: dict[str, SourceStatus]
    errors: tuple[Problem, ...]
    flags: tuple[Problem, ...] = ()

    @model_validator(mode="after")
    def _invariant(self) -> Discovery:
        _check_result(self.ok, self.inventory, self.errors)
        if self.ok and any(source.status == "failed" for source in self.sources.values()):
            raise ValueError("a discovery with a failed source cannot be ok")
        return self


class Reading(Frozen):
    """One discovery as recorded in the state file."""

    taken_at: AwareDatetime
    ok: bool
    fingerprint: str | None
    inventory: Inventory | None
    errors: tuple[Problem, ...] = ()
    flags: tuple[Problem, ...] = ()

    @model_validator(mode="after")
    def _invariant(self) -> Reading:
        _check_result(self.ok, self.inventory, self.errors)
        if (self.inventory.fingerprint if self.inventory else None) != self.fingerprint:
            raise ValueError("fingerprint must be the inventory's")
        return self

    @classmethod
    def of(cls, discovery: Discovery, taken_at: datetime) -> Reading:
        """Record ``discovery`` as taken at ``taken_at``."""
        inventory = discovery.inventory
        return cls(
            taken_at=taken_at,
            ok=discovery.ok,
            fingerprint=inventory.fingerprint if inventory else None,
            inventory=inventory,
            errors=discovery.errors,
            flags=discovery.flags,
        )
