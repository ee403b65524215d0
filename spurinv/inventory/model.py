"""Validated models of what crosses a boundary: discovery results and readings.

The fields here are the one statement of a discovery's and a reading's JSON: ``scripts/schemas``
generates from them the TypedDicts of ``spurinv/records.pyi`` (mypy's view of the plain dicts the
discovery sources build) and the state file's JSON Schema. These pydantic models validate those
dicts on every path that is not the timer's no-change tick; they are what the rest of the full
run works with. Their rules are :mod:`spurinv.shape`'s (an inventory if and only if no errors;
sorted, unique devices with the right fingerprint), called from the validators here, never
stated twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

from spurinv import shape

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
    reported (spurinv.inventory.sources.link). Not schedulable: never in the fingerprint."""

    device: str
    width: int | None
    max_width: int | None
    speed: str | None
    max_speed: str | None
    state: Literal["ok", "degraded", "down", "unknown", "gone"]

    def line(self) -> str:
        """``x8 of x16, 32.0 GT/s of 32.0 GT/s``."""
        return shape.link_line(self.model_dump())


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
        _check(shape.inventory_problem(self.model_dump()))
        return self

    def gpu_counts(self) -> dict[str, int]:
        """Devices per model, e.g. ``{"mi300x": 64}`` (:func:`spurinv.shape.gpu_counts`)."""
        return shape.gpu_counts(self._models())

    def summary(self) -> str:
        """One line: ``64 devices (mi300x 64), 192 CPUs, 1547 GiB`` (:func:`spurinv.shape.summary`)."""
        return shape.summary(self._models())

    def _models(self) -> dict[str, Any]:
        """What the counts and the summary read, without dumping every device."""
        return {"cpus": self.cpus, "memory_mb": self.memory_mb, "devices": [{"model": d.model} for d in self.devices]}


class Problem(Frozen):
    """An error or flagged inconsistency: which source, which path, why."""

    source: str
    path: str
    reason: str

    def line(self) -> str:
        """``kfd: /sys/...: reason``, one line for logs and drain reasons."""
        return shape.problem_line(self.model_dump())


class SourceStatus(Frozen):
    """One source's status: ``ok``, ``absent`` (with the reason) or ``failed`` (path and error)."""

    status: SourceState
    detail: str


def _check(problem: str | None) -> None:
    if problem is not None:
        # pydantic cannot encode a lone surrogate (a hand-edited fingerprint) in its error: escaped,
        # the file is a corrupt state like any other
        raise ValueError(problem.encode("utf-8", "backslashreplace").decode())


class Discovery(Frozen):
    """What one discovery found: an inventory, or the errors that prevented one."""

    ok: bool
    inventory: Inventory | None
    sources: dict[str, SourceStatus]
    errors: tuple[Problem, ...]
    flags: tuple[Problem, ...] = ()

    @model_validator(mode="after")
    def _invariant(self) -> Discovery:
        sources = {name: {"status": source.status} for name, source in self.sources.items()}
        _check(shape.discovery_problem({"ok": self.ok, "inventory": self.inventory, "errors": self.errors, "sources": sources}))
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
        _check(shape.reading_problem({"ok": self.ok, "inventory": self._fingerprinted(), "errors": self.errors,
                                      "fingerprint": self.fingerprint}))  # fmt: skip
        return self

    def _fingerprinted(self) -> dict[str, str] | None:
        return None if self.inventory is None else {"fingerprint": self.inventory.fingerprint}

    @classmethod
    def of(cls, discovery: Mapping[str, Any], taken_at: datetime) -> Reading:
        """Record discovery's result (its plain dict) as taken at ``taken_at``: the record
        :func:`spurinv.shape.reading` builds (the tick's too), validated."""
        return cls.model_validate(shape.reading(discovery, taken_at))
