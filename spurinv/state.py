"""The state file's model: the last two readings, the reported baseline, and the bookkeeping of
drains, refusals and backoff. Loading and saving go through :mod:`spurinv.store`.

Schema history (``schema_version``):
    1 — first version.
A file from a newer schema is refused and never overwritten; a corrupt one is moved aside.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, Field, ValidationError

from spurinv import store
from spurinv.documents import KEEP_READINGS, SCHEMA_VERSION
from spurinv.model import Frozen, Inventory, Reading


class Baseline(Frozen):
    """The inventory the controller was last told, or adopted from it, or (observe mode) seen."""

    inventory: Inventory
    since: AwareDatetime
    source: Literal["observed", "adopted", "registered"]

    @property
    def fingerprint(self) -> str:
        """The baseline inventory's fingerprint."""
        return self.inventory.fingerprint


class Pending(Frozen):
    """A change seen but not yet confirmed, and since when."""

    fingerprint: str
    since: AwareDatetime


class Drain(Frozen):
    """A drain *we* set: only a node whose reason still equals ``reason`` is ours to resume."""

    reason: str
    set_at: AwareDatetime
    cause: Literal["busy", "refused", "suspicious"]
    fingerprint: str | None = None


class Refusal(Frozen):
    """The controller refused (or silently ignored) the update for ``fingerprint``."""

    fingerprint: str
    at: AwareDatetime
    error: str


class Backoff(Frozen):
    """Bounded exponential backoff across runs, after a controller error."""

    kind: Literal["unreachable", "auth", "refused", "protocol", "unknown-node", "read-only"]
    failures: int
    next_attempt: AwareDatetime
    error: str


class Decision(Frozen):
    """What the last run found (``outcome``, ``reason``) and did (``actions``, one line per step;
    ``action`` is the last step's kind)."""

    at: AwareDatetime
    outcome: str
    action: str
    reason: str
    exit_code: int
    requests: int = 0
    actions: tuple[str, ...] = ()


class Api(Frozen):
    """The controller API version detected for ``url`` (``api = "auto"``)."""

    url: str
    version: str
    detected_at: AwareDatetime


class Steady(Frozen):
    """Memo of a run that found nothing to do, for the next tick's fast path.

    Written only when the full path classified *unchanged* and the policy found nothing to do
    with no drain, refusal, backoff or pending change outstanding. ``key`` covers the root, the
    config file's identity (path, inode, size, mtime) and the discovery settings; a tick whose
    key and fingerprint match is the same situation and needs neither pydantic nor the network.
    """

    fingerprint: str
    key: str
    cdi_dirs: tuple[str, ...] = ()
    ignore_pci: tuple[str, ...] = ()
    metrics_file: str | None = None
    node: str = ""
    controller_errors: int = 0


class State(Frozen):
    """Everything spurinv remembers between runs."""

    schema_version: int = SCHEMA_VERSION
    node: str | None = None
    readings: tuple[Reading, ...] = Field(default=(), max_length=KEEP_READINGS)
    baseline: Baseline | None = None
    pending: Pending | None = None
    last: Decision | None = None
    drain: Drain | None = None
    refusal: Refusal | None = None
    backoff: Backoff | None = None
    accepted: str | None = None
    api: Api | None = None
    consecutive_failures: int = 0
    controller_errors: int = 0
    last_success: AwareDatetime | None = None
    steady: Steady | None = None

    @property
    def latest(self) -> Reading | None:
        """The newest reading (after :meth:`record`, the one being acted on)."""
        return self.readings[-1] if self.readings else None

    def record(self, reading: Reading) -> State:
        """Return the state with ``reading`` appended, keeping the last two, and counters updated."""
        pending = self.pending
        if reading.ok and (self.baseline is None or reading.fingerprint != self.baseline.fingerprint):
            if pending is None or pending.fingerprint != reading.fingerprint:
                pending = Pending(fingerprint=reading.fingerprint or "", since=reading.taken_at)
        elif reading.ok:
            pending = None
        return self.model_copy(
            update={
                "readings": (*self.readings, reading)[-KEEP_READINGS:],
                "pending": pending,
                "consecutive_failures": 0 if reading.ok else self.consecutive_failures + 1,
                "last_success": reading.taken_at if reading.ok else self.last_success,
            }
        )


class NewerSchema(Exception):
    """The state file was written by a newer spurinv; we must not touch it."""


class Corrupt(Exception):
    """The state file does not parse or validate."""


def parse(data: bytes, path: str) -> State:
    """Validate state-file bytes; raise NewerSchema or Corrupt (with a one-line reason)."""
    return _validate(_decode(data, path), path)


def load_raw(path: str) -> dict[str, Any] | None:
    """The state file as plain JSON, validated first (``status`` builds its document from it);
    None when there is none yet."""
    data = store.read(path)
    if data is None:
        return None
    raw = _decode(data, path)
    _validate(raw, path)
    return raw


def _decode(data: bytes, path: str) -> dict[str, Any]:
    import json

    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: brackets nested 100,000 deep
        raise Corrupt(f"{path}: not JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(raw, dict):
        raise Corrupt(f"{path}: not a JSON object")
    version = raw.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise NewerSchema(f"{path} has schema_version {version}; this spurinv understands {SCHEMA_VERSION}")
    return raw


def _validate(raw: dict[str, Any], path: str) -> State:
    try:
        return State.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise Corrupt(f"{path}: {where}: {first['msg']}") from None


def dump(state: State) -> bytes:
    """Serialise ``state`` as compact JSON, as the fast path writes it (``jq .`` reads it)."""
    return state.model_dump_json().encode() + b"\n"


def load(path: str) -> State | None:
    """Read and validate the state file; None when there is none yet."""
    data = store.read(path)
    return None if data is None else parse(data, path)


def save(path: str, state: State) -> None:
    """Write ``state`` atomically."""
    store.write_atomic(path, dump(state))


def stamp(moment: datetime) -> str:
    """Timestamp for quarantined file names: ``20261202T181500Z``."""
    return moment.strftime("%Y%m%dT%H%M%SZ")
