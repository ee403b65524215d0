"""Typed shapes of the plain dicts that discovery produces (for mypy only).

Discovery runs on the timer's hot path, where importing pydantic (or even ``dataclasses``)
would cost more than the whole tick. Sources therefore build plain dicts in exactly the JSON
form that :mod:`spurinv.model` validates; these TypedDicts let mypy check them. This module is
imported only under ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TypedDict


class Problem(TypedDict):
    source: str
    path: str
    reason: str


class SourceStatus(TypedDict):
    status: str
    detail: str


class Link(TypedDict):
    device: str
    width: int | None
    max_width: int | None
    speed: str | None
    max_speed: str | None
    state: str


class PciFunction(TypedDict):
    bdf: str
    vendor: str
    vendor_id: int
    device_id: int
    pci_class: int
    driver: str | None
    numa_node: int | None
    product: str | None
    path: str
    link: Link | None


class DrmNode(TypedDict):
    kind: str
    minor: int
    device: str
    bdf: str | None
    xcp: int | None


class KfdNode(TypedDict):
    node: int
    path: str
    properties: dict[str, int]
    vram_bytes: int | None
    links: list[tuple[int, int]] | None


class NvidiaGpu(TypedDict):
    bdf: str
    model: str
    uuid: str | None
    minor: int
    path: str


class MigInstance(TypedDict):
    gi: int
    ci: int
    gi_minor: int
    ci_minor: int


class MigGpu(TypedDict):
    minor: int
    instances: list[MigInstance]
    empty_gis: list[int]


class CdiDevice(TypedDict):
    qualified: str
    name: str
    kind: str
    nodes: list[str]
    file: str


class Partition(TypedDict):
    compute: str | None
    memory: str | None
    index: int


class Device(TypedDict):
    id: str
    vendor: str
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
    peers: list[str]
    cdi_names: list[str]
    link: Link | None


class Inventory(TypedDict):
    cpus: int
    memory_mb: int
    fingerprint: str
    devices: list[Device]
    pci_functions: list[str]


class Discovery(TypedDict):
    ok: bool
    inventory: Inventory | None
    sources: dict[str, SourceStatus]
    errors: list[Problem]
    flags: list[Problem]
