"""The JSON documents spurinv prints: one TypedDict each, stated once.

:mod:`spurinv.report.documents` and :mod:`spurinv.report.fleet` build these dicts (mypy checks
them against these types) and ``scripts/schemas`` writes ``schemas/*.json`` from them with
pydantic's ``TypeAdapter``. This module imports pydantic: a module of ``spurinv/`` names these
types under ``if TYPE_CHECKING:`` only, so no run (the timer's tick, ``status --json``) loads it.
"""

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import Field, TypeAdapter, with_config
from typing_extensions import NotRequired, ReadOnly, TypedDict  # noqa: UP035 (pydantic reads a TypedDict of 3.12 or this one)

from spurinv.inventory.model import STRICT, Inventory, InventoryDiff, Outcome, Problem, SourceStatus, read_only_adapter


@with_config(STRICT)
class _Document(TypedDict):
    format_version: Literal[1]
    # read-only: each document narrows it to its own name (pydantic cannot keep it read-only on a
    # dict, and says so: adapter() builds the validators without that warning)
    command: ReadOnly[str]
    ok: bool
    exit_code: int


C = TypeVar("C", bound=str)


class Head(TypedDict, Generic[C]):
    """What every document starts with (:func:`spurinv.report.documents.head`): ``command`` is
    the document's own ``Literal`` (mypy infers it from the document the head goes into)."""

    format_version: Literal[1]
    command: C
    ok: bool
    exit_code: int


@with_config(STRICT)
class DiscoverDocument(_Document):
    """``spurinv discover --json``."""

    command: ReadOnly[Literal["discover"]]
    root: str
    discovery_ok: bool
    inventory: Inventory | None
    sources: dict[str, SourceStatus]
    errors: list[Problem]
    flags: list[Problem]


@with_config(STRICT)
class ReadingSummary(TypedDict):
    taken_at: str
    ok: bool
    fingerprint: str | None
    devices: int | None
    models: dict[str, int]
    cpus: int | None
    memory_mb: int | None
    errors: list[Problem]
    flags: list[Problem]


@with_config(STRICT)
class BaselineSummary(TypedDict):
    fingerprint: str
    since: str
    source: Literal["observed", "adopted", "registered"]
    devices: int
    models: dict[str, int]


# Keys added after format_version 1 was published: spurinv always writes them, and the schema
# still accepts a document of an older spurinv without them (NotRequired, with the default a
# consumer may assume).
@with_config(STRICT)
class StatusDocument(_Document):
    """``spurinv status --json``: what the state file says, without discovering."""

    command: ReadOnly[Literal["status"]]
    state_file: str
    exists: bool
    node: str | None
    readings: list[ReadingSummary]
    baseline: BaselineSummary | None
    pending: dict[str, Any] | None
    last_decision: dict[str, Any] | None
    drain: dict[str, Any] | None
    refusal: dict[str, Any] | None
    backoff: dict[str, Any] | None
    # a partition switch in progress: {"since"}
    switching: NotRequired[Annotated[dict[str, Any] | None, Field(default=None)]]
    # PCIe links narrower than they can be, in two readings
    degraded_links: NotRequired[Annotated[list[dict[str, Any]], Field(default=[])]]
    api: dict[str, Any] | None
    consecutive_failures: int
    controller_errors: int
    last_success: str | None
    errors: list[Problem]
    attention: list[str]


@with_config(STRICT)
class Step(TypedDict):
    """One step of a refresh: the policy's action, and the request it sent (or would send)."""

    action: str
    reason: str
    request: NotRequired[Annotated[str | None, Field(default=None)]]
    sent: NotRequired[Annotated[bool, Field(default=False)]]
    error: NotRequired[Annotated[str | None, Field(default=None)]]


@with_config(STRICT)
class RefreshDocument(_Document):
    """``spurinv refresh --json`` (also the model behind the human rendering)."""

    command: ReadOnly[Literal["refresh"]]
    node: str
    mode: Literal["observe", "controller"]
    dry_run: bool
    state_file: str
    controller: str | None
    reading_ok: bool
    fingerprint: str | None
    inventory: str | None
    outcome: Outcome
    steps: list[Step]
    requests: list[dict[str, Any]]
    errors: list[Problem]
    notes: list[str]


@with_config(STRICT)
class DiffDocument(_Document):
    """``spurinv diff --json``: what differs now from the baseline and from the last reading."""

    command: ReadOnly[Literal["diff"]]
    state_file: str
    discovery_ok: bool
    errors: list[Problem]
    current: str | None
    baseline: str | None
    different: bool
    vs_baseline: InventoryDiff | None
    vs_latest_reading: InventoryDiff | None
    # PCIe link health against the baseline (not schedulable: not in the diff)
    links: NotRequired[Annotated[list[str], Field(default=[])]]


@with_config(STRICT)
class ConfigDocument(_Document):
    """``spurinv config show --json``: effective values and where each came from."""

    command: ReadOnly[Literal["config"]]
    file: str
    file_exists: bool
    values: dict[str, Any]
    origins: dict[str, str]


CheckName = Literal[
    "config", "node", "state", "lock", "metrics", "token", "controller", "permission", "register_command", "schedule", "udev"
]
CheckStatus = Literal["ok", "warn", "fail", "skip"]


@with_config(STRICT)
class CheckResult(TypedDict):
    """One check of ``spurinv check``: every document lists all of them, in the same order."""

    name: CheckName
    status: CheckStatus
    detail: str
    fix: str  # the command to run or the key to change; "" for ok and skip
    exit_code: int  # what refresh would exit with for this problem; 0 unless failed


@with_config(STRICT)
class CheckDocument(_Document):
    """``spurinv check --json``: ``exit_code`` is the first failed check's, 75 when a signal or
    the deadline stopped it, else 0 (warnings do not fail)."""

    command: ReadOnly[Literal["check"]]
    root: str
    checks: list[CheckResult]


@with_config(STRICT)
class ErrorDocument(_Document):
    """Any command that failed before producing its own document (pipx's rule: once JSON is
    asked for, even a failure is an envelope)."""

    error: dict[str, str]


@with_config(STRICT)
class FleetRecord(TypedDict):
    """What spurinv last wrote into the node's ``extra`` (``gres`` is missing from records before 0.2)."""

    fingerprint: str | None
    inventory: str | None
    gres: str | None


FleetAttention = Literal["spurinv-drain", "spurinv-drain-orphaned", "drained-by-others", "gres-changed"]


@with_config(STRICT)
class FleetNode(TypedDict):
    """One node as ``spurinv fleet`` sees it."""

    name: str
    state: str
    flags: list[str]
    drained: bool
    drain_owner: Literal["spurinv", "other"] | None
    # a spurinv drain: does the controller alone show it is spurinv's (a valid id, our record)?
    # False: orphaned, only a state file that still knows it lifts it. None: no spurinv drain.
    drain_recorded: bool | None
    reason: str
    reason_set_by: str | None
    reason_since: str | None
    reason_age_seconds: int | None
    managed: bool
    registered: FleetRecord | None
    gres: str | None
    gres_changed: bool | None
    attention: list[FleetAttention]


@with_config(STRICT)
class FleetDrain(TypedDict):
    name: str
    reason: str
    since: str | None
    age_seconds: int | None


@with_config(STRICT)
class FleetSummary(TypedDict):
    nodes: int
    managed: int
    spurinv_drained: int
    orphaned_drained: int
    drained_by_others: int
    gres_changed: int
    attention: int
    spurinv_drains: list[FleetDrain]
    orphaned_drains: list[FleetDrain]
    gres_changed_nodes: list[str]


class FleetView(TypedDict):
    """The rows and the summary, before the document frames them (:func:`spurinv.report.fleet.build`)."""

    nodes: list[FleetNode]
    summary: FleetSummary


@with_config(STRICT)
class FleetDocument(_Document):
    """``spurinv fleet --json``: every node the controller lists, and a summary."""

    command: ReadOnly[Literal["fleet"]]
    taken_at: str
    controller: str
    api: str | None
    transport: Literal["rest", "scontrol"]
    nodes: list[FleetNode]
    summary: FleetSummary


D = TypeVar("D")
_ADAPTERS: dict[object, TypeAdapter[Any]] = {}  # building one takes milliseconds; tests validate every run


def adapter(document: type[D]) -> TypeAdapter[D]:
    """A validator and schema generator for one document (without pydantic's warning that it
    does not keep ``command`` read-only on the dicts it returns: it is so for mypy only)."""
    found = _ADAPTERS.get(document)
    if found is None:
        found = _ADAPTERS[document] = read_only_adapter(document)
    return found
