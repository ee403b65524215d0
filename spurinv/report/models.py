"""Models of the JSON documents spurinv prints. They pin the shapes (contract tests validate the
lean builders in :mod:`spurinv.report.documents` against them) and generate ``schemas/*.json``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from spurinv.inventory.classify import InventoryDiff, Outcome
from spurinv.inventory.model import Inventory, Problem, SourceStatus


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1]
    command: str
    ok: bool
    exit_code: int


class DiscoverDocument(_Document):
    """``spurinv discover --json``."""

    command: Literal["discover"]
    root: str
    discovery_ok: bool
    inventory: Inventory | None
    sources: dict[str, SourceStatus]
    errors: list[Problem]
    flags: list[Problem]


class ReadingSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    taken_at: str
    ok: bool
    fingerprint: str | None
    devices: int | None
    models: dict[str, int]
    cpus: int | None
    memory_mb: int | None
    errors: list[Problem]
    flags: list[Problem]


class BaselineSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fingerprint: str
    since: str
    source: Literal["observed", "adopted", "registered"]
    devices: int
    models: dict[str, int]


class StatusDocument(_Document):
    """``spurinv status --json``: what the state file says, without discovering."""

    command: Literal["status"]
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
    switching: dict[str, Any] | None = None  # a partition switch in progress: {"since"}
    degraded_links: list[dict[str, Any]] = []  # PCIe links narrower than they can be, in two readings
    api: dict[str, Any] | None
    consecutive_failures: int
    controller_errors: int
    last_success: str | None
    errors: list[Problem]
    attention: list[str]


class Step(BaseModel):
    """One step of a refresh: the policy's action, and the request it sent (or would send)."""

    model_config = ConfigDict(extra="forbid")

    action: str
    reason: str
    request: str | None = None
    sent: bool = False
    error: str | None = None


class RefreshDocument(_Document):
    """``spurinv refresh --json`` (also the model behind the human rendering)."""

    command: Literal["refresh"]
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


class DiffDocument(_Document):
    """``spurinv diff --json``: what differs now from the baseline and from the last reading."""

    command: Literal["diff"]
    state_file: str
    discovery_ok: bool
    errors: list[Problem]
    current: str | None
    baseline: str | None
    different: bool
    vs_baseline: InventoryDiff | None
    vs_latest_reading: InventoryDiff | None
    links: list[str] = []  # PCIe link health against the baseline (not schedulable: not in the diff)


class ConfigDocument(_Document):
    """``spurinv config show --json``: effective values and where each came from."""

    command: Literal["config"]
    file: str
    file_exists: bool
    values: dict[str, Any]
    origins: dict[str, str]


class CheckResult(BaseModel):
    """One check of ``spurinv check``: every document lists all of them, in the same order."""

    model_config = ConfigDict(extra="forbid")

    name: Literal[
        "config", "node", "state", "lock", "metrics", "token", "controller", "permission", "register_command",
        "schedule", "udev",
    ]  # fmt: skip
    status: Literal["ok", "warn", "fail", "skip"]
    detail: str
    fix: str  # the command to run or the key to change; "" for ok and skip
    exit_code: int  # what refresh would exit with for this problem; 0 unless failed


class CheckDocument(_Document):
    """``spurinv check --json``: ``exit_code`` is the first failed check's, 75 when a signal or
    the deadline stopped it, else 0 (warnings do not fail)."""

    command: Literal["check"]
    root: str
    checks: list[CheckResult]


class ErrorDocument(_Document):
    """Any command that failed before producing its own document (pipx's rule: once JSON is
    asked for, even a failure is an envelope)."""

    error: dict[str, str]


class FleetRecord(BaseModel):
    """What spurinv last wrote into the node's ``extra`` (``gres`` is missing from records before 0.2)."""

    model_config = ConfigDict(extra="forbid")

    fingerprint: str | None
    inventory: str | None
    gres: str | None


class FleetNode(BaseModel):
    """One node as ``spurinv fleet`` sees it."""

    model_config = ConfigDict(extra="forbid")

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
    attention: list[Literal["spurinv-drain", "spurinv-drain-orphaned", "drained-by-others", "gres-changed"]]


class FleetDrain(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    reason: str
    since: str | None
    age_seconds: int | None


class FleetSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class FleetDocument(_Document):
    """``spurinv fleet --json``: every node the controller lists, and a summary."""

    command: Literal["fleet"]
    taken_at: str
    controller: str
    api: str | None
    transport: Literal["rest", "scontrol"]
    nodes: list[FleetNode]
    summary: FleetSummary
