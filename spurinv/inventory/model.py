"""The shape of a discovery and of a reading, and of what the classifier makes of two: plain dicts,
described once.

These TypedDicts are what the discovery sources build, what the timer's tick replays and what the
full run works with: one runtime shape, no model objects around it. pydantic validates the same
dicts where they cross a boundary (a state file, a discovery's result) through the annotated types
below (:data:`ValidInventory`, :data:`ValidDiscovery`, :data:`ValidReading`), whose checks are
:mod:`spurinv.shape`'s rules, never stated twice; ``scripts/schemas`` writes the state file's
JSON Schema from them. The classifier's outcome and inventory diff (:class:`Outcome`,
:class:`InventoryDiff`) are built by :mod:`spurinv.inventory.classify` and held as they are by the
``refresh`` and ``diff`` documents, whose schemas ``scripts/schemas`` writes.
"""

import warnings
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, ConfigDict, Field, TypeAdapter, with_config
from typing_extensions import NotRequired, ReadOnly, TypedDict  # noqa: UP035 (pydantic reads a TypedDict of 3.12 or this one)

from spurinv import shape
from spurinv.inventory.classify import Kind

Vendor = Literal["amd", "nvidia", "intel"]
SourceState = Literal["ok", "absent", "failed"]
LinkState = Literal["ok", "degraded", "down", "unknown", "gone"]
STRICT = ConfigDict(extra="forbid")  # typos in a state file or a document are errors, not silence


def read_only_adapter(kind: Any) -> TypeAdapter[Any]:
    """pydantic's validator and schema generator for ``kind``, whose TypedDicts may mark items
    ``ReadOnly``: without pydantic's warning that it does not keep them read-only on the dicts it
    returns (nothing at run time does; mypy does, which is their use here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r".*`ReadOnly` qualifier", UserWarning)
        return TypeAdapter(kind)


@with_config(STRICT)
class Partition(TypedDict):
    """A logical partition of an AMD package (SPX = one partition covering all of it)."""

    compute: str | None
    memory: str | None
    index: int


@with_config(STRICT)
class Link(TypedDict):
    """A GPU's PCIe link as read (``device``: the function whose link it is): width judged, speed
    reported (spurinv.inventory.sources.link). Not schedulable: never in the fingerprint."""

    device: str
    width: int | None
    max_width: int | None
    speed: str | None
    max_speed: str | None
    state: LinkState


def _defaults(**missing: Any) -> BeforeValidator:
    """Keys a record written before them may lack, filled in as validation reads it (what the
    models' defaults did): the dicts the full run works with always have them."""

    def fill(value: Any) -> Any:
        return {**missing, **value} if isinstance(value, dict) else value

    return BeforeValidator(fill)


@with_config(STRICT)
class Device(TypedDict):
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
    peers: NotRequired[list[str]]
    cdi_names: NotRequired[list[str]]
    link: NotRequired[Link | None]


ValidDevice = Annotated[Device, _defaults(peers=[], cdi_names=[], link=None)]


@with_config(STRICT)
class Inventory(TypedDict):
    """The node: CPUs, memory and devices, with the fingerprint of the schedulable set."""

    cpus: int
    memory_mb: int
    fingerprint: str
    devices: list[ValidDevice]
    pci_functions: NotRequired[list[str]]


@with_config(STRICT)
class Problem(TypedDict):
    """An error or flagged inconsistency: which source, which path, why."""

    source: str
    path: str
    reason: str


@with_config(STRICT)
class SourceStatus(TypedDict):
    """One source's status: ``ok``, ``absent`` (with the reason) or ``failed`` (path and error)."""

    status: SourceState
    detail: str


def _rule(problem: Callable[[Any], str | None]) -> AfterValidator:
    """One of :mod:`spurinv.shape`'s rules, checked once the record's fields are valid."""

    def check(record: Any) -> Any:
        why = problem(record)
        if why is not None:
            # pydantic cannot encode a lone surrogate (a hand-edited fingerprint) in its error:
            # escaped, the file is a corrupt state like any other
            raise ValueError(why.encode("utf-8", "backslashreplace").decode())
        return record

    return AfterValidator(check)


ValidInventory = Annotated[Inventory, _defaults(pci_functions=[]), _rule(shape.inventory_problem)]


@with_config(STRICT)
class Discovery(TypedDict):
    """What one discovery found: an inventory, or the errors that prevented one."""

    ok: bool
    inventory: ValidInventory | None
    sources: dict[str, SourceStatus]
    errors: list[Problem]
    flags: NotRequired[list[Problem]]


ValidDiscovery = Annotated[Discovery, _defaults(flags=[]), _rule(shape.discovery_problem)]


@with_config(STRICT)
class Reading(TypedDict):
    """One discovery as recorded in the state file."""

    taken_at: AwareDatetime
    ok: bool
    fingerprint: str | None
    inventory: ValidInventory | None
    errors: NotRequired[list[Problem]]
    flags: NotRequired[list[Problem]]


ValidReading = Annotated[Reading, _defaults(errors=[], flags=[]), _rule(shape.reading_problem)]


# The classifier's values: spurinv/inventory/classify.py builds them (every key, always), policy and
# refresh read them, and the refresh and diff documents hold them as they are; the defaults are for
# a consumer of those documents, which may assume them where a key is missing. Never changed in place.


@with_config(STRICT)
class FieldChange(TypedDict):
    """One field of one device (or of the node, ``id`` = ``"node"``) that differs."""

    id: ReadOnly[str]
    field: ReadOnly[str]
    old: ReadOnly[Any]
    new: ReadOnly[Any]


@with_config(STRICT)
class PackageChange(TypedDict):
    """A physical GPU whose partition mode or device count changed."""

    pci_bdf: ReadOnly[str]
    old_mode: ReadOnly[str | None]
    new_mode: ReadOnly[str | None]
    old_count: ReadOnly[int]
    new_count: ReadOnly[int]


@with_config(STRICT)
class InventoryDiff(TypedDict):
    """What differs between two inventories, by device identity."""

    added: ReadOnly[Annotated[tuple[Device, ...], Field(default=())]]
    removed: ReadOnly[Annotated[tuple[Device, ...], Field(default=())]]
    changed: ReadOnly[Annotated[tuple[FieldChange, ...], Field(default=())]]
    packages: ReadOnly[Annotated[tuple[PackageChange, ...], Field(default=())]]
    node: ReadOnly[Annotated[tuple[FieldChange, ...], Field(default=())]]
    old_counts: ReadOnly[Annotated[dict[str, int], Field(default={})]]
    new_counts: ReadOnly[Annotated[dict[str, int], Field(default={})]]


@with_config(STRICT)
class Outcome(TypedDict):
    """The classifier's verdict, with the reason a person reads and the diff to act on."""

    kind: ReadOnly[Kind]
    reason: ReadOnly[str]
    fingerprint: ReadOnly[Annotated[str | None, Field(default=None)]]
    diff: ReadOnly[Annotated[InventoryDiff | None, Field(default=None)]]
    release: ReadOnly[Annotated[str | None, Field(default=None)]]


_READING: TypeAdapter[Reading] = TypeAdapter(ValidReading)
_DISCOVERY: TypeAdapter[Discovery] = TypeAdapter(ValidDiscovery)


def reading(discovery: Mapping[str, Any], taken_at: datetime) -> Reading:
    """Record discovery's result (its plain dict) as taken at ``taken_at``: the record
    :func:`spurinv.shape.reading` builds (the tick's too), validated."""
    return _READING.validate_python(shape.reading(discovery, taken_at))


def discovery(raw: Mapping[str, Any]) -> Discovery:
    """A discovery's result, validated."""
    return _DISCOVERY.validate_python(raw)


def reading_json(reading: Reading) -> dict[str, Any]:
    """``reading`` as the state file holds it (its time as RFC 3339 text; the validators of
    :data:`ValidReading` take no part in writing)."""
    dumped: dict[str, Any] = _READING.dump_python(reading, mode="json")
    return dumped
