"""The state file's model: the last two readings, the reported baseline, and the bookkeeping of
drains, refusals and backoff. Loading and saving go through :mod:`spurinv.state.store`.

The fields here (and those of :mod:`spurinv.inventory.model`'s TypedDicts, the readings and the
inventory they hold) are the one statement of the state file's JSON: ``scripts/schemas`` generates
from them ``state.schema.json`` (:mod:`spurinv.state.vouch` checks raw files against it); a new
field is written here and where it is used, then ``scripts/schemas`` is run.

Schema history (``schema_version``):
    1 — first version.
    2 — ``drain.recovered`` (a drain rebuilt from the controller) and ``fresh`` (a state started
        afresh that has not yet read the controller). Version 1 lacked them: its model forbids
        unknown keys, so version 1 would call a version 2 file corrupt and move it aside, losing
        the drain it records; it refuses a newer version instead, untouched. A version 1 file
        loads as it is (no drain in it carries an id: it is ours by its exact reason alone) and
        is written back as version 2.
    3 — ``switching`` (a partition switch in progress, since when). Version 2 forbids the key,
        so it refuses a version 3 file instead of calling it corrupt.
A file from a newer schema is refused and never overwritten; a corrupt one is moved aside.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from spurinv import exitcode, jsontext
from spurinv.controller.ownership import Claim, skew
from spurinv.errors import ControllerKind
from spurinv.inventory import model
from spurinv.inventory.classify import switching
from spurinv.inventory.model import Reading, ValidInventory, ValidReading
from spurinv.shape import KEEP_READINGS, SCHEMA_VERSION
from spurinv.state import ledger, store


class Frozen(BaseModel):
    """Immutable, strict about unknown keys: typos in state files are errors, not silence."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Baseline(Frozen):
    """The inventory the controller was last told, or adopted from it, or (observe mode) seen."""

    inventory: ValidInventory
    since: AwareDatetime
    source: Literal["observed", "adopted", "registered"]

    @property
    def fingerprint(self) -> str:
        """The baseline inventory's fingerprint."""
        return self.inventory["fingerprint"]


class Switching(Frozen):
    """A partition switch in progress, since the first reading that caught it."""

    since: AwareDatetime


class Pending(Frozen):
    """A change seen but not yet confirmed, and since when."""

    fingerprint: str
    since: AwareDatetime


class Drain(Frozen):
    """A drain *we* set: only a node whose reason still equals ``reason`` is ours to resume
    (:func:`spurinv.controller.ownership.owns`)."""

    reason: str
    set_at: AwareDatetime  # our clock when we wrote it (or, recovered, what the record says)
    cause: Literal["busy", "refused", "suspicious", "link"]
    fingerprint: str | None = None
    # When the controller says the reason was set (Slurm's ``reason_changed_at``, epoch seconds),
    # pinned from the first view after our drain: the same text set again after the node was
    # resumed has another time and is not ours (an identical re-drain of a drained node is
    # skipped by Slurm 24.11, time included: it stays ours).
    reason_changed_at: int | None = None
    # Rebuilt from the controller by a run that had no usable state: from our record in the
    # node's ``extra``, or from the id in the reason alone (a controller without ``extra``).
    recovered: Literal["controller-record", "reason"] | None = None
    # The last run that read the node held it for an operator (the node also DOWN or flagged by
    # someone else, or slurmctld appended to our reason): spurinv will not lift it as it stands.
    held: bool = False

    @property
    def claim(self) -> Claim:
        """The drain as the ownership rule reads it."""
        return Claim(
            self.reason, "state", at=int(self.set_at.timestamp()), pinned=self.reason_changed_at, cause=self.cause,
            fingerprint=self.fingerprint,
        )  # fmt: skip

    @property
    def skew(self) -> int | None:
        """The controller's reason time minus ours (clock skew), once pinned; None for a drain
        recovered from the id in its reason alone (its ``set_at`` is when we found it, not when
        we wrote it: no time of ours to compare with)."""
        return None if self.recovered == "reason" else skew(self.reason_changed_at, int(self.set_at.timestamp()))


class Intent(Frozen):
    """A controller write about to be sent (write-ahead): saved durably *before* the request, cleared
    when its outcome is known. A run that dies in between leaves it here, and the next run decides
    from the controller's view whether it was applied (:mod:`spurinv.state.intent`)."""

    kind: Literal["drain", "resume", "register"]
    body: dict[str, Any]
    at: AwareDatetime
    fingerprint: str | None = None
    cause: Literal["busy", "refused", "suspicious", "link"] | None = None
    transport: str = "rest"

    @property
    def reason(self) -> str | None:
        """The drain reason this write sets, if any."""
        reason = self.body.get("reason")
        return reason if isinstance(reason, str) else None


class Refusal(Frozen):
    """The controller refused (or silently ignored) the update for ``fingerprint``."""

    fingerprint: str
    at: AwareDatetime
    error: str
    remedy: str | None = None  # what an operator must do (by transport); None in older files
    # an operator resumed the node from our drain for this refusal: not drained again for it
    # (a new refusal, after the backoff's retry, or another inventory drains again)
    resumed: bool = False


class Backoff(Frozen):
    """Bounded exponential backoff across runs, after a controller error."""

    kind: ControllerKind
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

    Written only when the full path classified *unchanged* with no drain, refusal, backoff or
    pending change outstanding (:func:`spurinv.state.ledger.settled`). ``key`` covers the root, the config
    file's identity (path, inode, size, mtime), the ``--metrics-file`` and ``--node`` flags and the
    host name (:func:`spurinv.state.ledger.steady_key`); the discovery settings are stored here, so a tick
    needs no config. A tick whose key and fingerprint match is the same situation and needs
    neither pydantic nor the network.
    """

    fingerprint: str
    key: str
    cdi_dirs: tuple[str, ...] = ()
    ignore_pci: tuple[str, ...] = ()
    metrics_file: str | None = None
    node: str = ""
    observe: bool = False  # the run was in observe mode: the replayed decision says so, as a full run would
    drain_links: bool = False  # policy.drain_on_degraded_link: a degraded link hands the tick over

    @model_validator(mode="before")
    @classmethod
    def _unused(cls, data: Any) -> Any:
        # 0.1.0 wrote a ``controller_errors`` here that nothing read; accept such a file, drop it
        if isinstance(data, dict) and "controller_errors" in data:
            data = {key: value for key, value in data.items() if key != "controller_errors"}
        return data


class State(Frozen):
    """Everything spurinv remembers between runs."""

    schema_version: int = SCHEMA_VERSION
    node: str | None = None
    readings: tuple[ValidReading, ...] = Field(default=(), max_length=KEEP_READINGS)
    baseline: Baseline | None = None
    pending: Pending | None = None
    last: Decision | None = None
    drain: Drain | None = None
    refusal: Refusal | None = None
    backoff: Backoff | None = None
    accepted: str | None = None
    # Degraded links (``"<BDF> x<width>"``) whose link drain an operator lifted: not drained again
    # while the link stays at that width (dropped at the first reading that shows it otherwise).
    accepted_links: tuple[str, ...] = Field(default=(), max_length=64)
    api: Api | None = None
    consecutive_failures: int = 0
    controller_errors: int = 0
    last_success: AwareDatetime | None = None
    steady: Steady | None = None
    intent: Intent | None = None
    busy_checked_at: AwareDatetime | None = None  # the last all-nodes query confirming "busy"
    # Started afresh (no file, or a corrupt one moved aside) and the controller not yet read: the
    # first view looks for a drain the lost state knew (the controller's record of it).
    fresh: bool = False
    switching: Switching | None = None  # a partition switch in progress (readings with its evidence)
    # The boot it was written under (/proc/sys/kernel/random/boot_id under --root): a state from
    # another boot (a golden image, a snapshot rolled back) is checked against the controller.
    boot_id: str | None = None

    @property
    def latest(self) -> Reading | None:
        """The newest reading (after :meth:`record`, the one being acted on)."""
        return self.readings[-1] if self.readings else None

    def overdue(self, reading: Reading, switch_timeout: float) -> bool:
        """Whether ``reading``, a switch in progress, caught one older than ``switch_timeout`` seconds."""
        if not switching(reading):
            return False
        if switch_timeout <= 0:
            return True  # policy.switch_timeout = 0: no switch is waited for
        taken_at: datetime = reading["taken_at"]
        if self.switching is None or self.switching.since > taken_at:
            return False  # the first sighting, or one stamped by a clock ahead (restarted at this reading)
        return (taken_at - self.switching.since).total_seconds() > switch_timeout

    def record(self, reading: Reading, switch_timeout: float = 600) -> State:
        """Return the state with ``reading`` appended, keeping the last two, and counters updated
        (the rule is :func:`spurinv.state.ledger.record`'s, which the timer's tick applies to the raw file)."""
        update = ledger.record(
            {
                "readings": self.readings,
                "pending": self.pending.model_dump() if self.pending else None,
                "consecutive_failures": self.consecutive_failures,
                "last_success": self.last_success,
                "switching": self.switching.model_dump() if self.switching else None,
            },
            reading,
            ok=reading["ok"],
            fingerprint=reading["fingerprint"],
            taken_at=reading["taken_at"],
            baseline=self.baseline.fingerprint if self.baseline else None,
            switching=switching(reading),
            overdue=self.overdue(reading, switch_timeout),
            previous_switching=self.latest is not None and switching(self.latest),
        )
        pending = update["pending"]
        update["pending"] = None if pending is None else Pending(**pending)
        switch = update["switching"]
        update["switching"] = None if switch is None else Switching(**switch)
        update["readings"] = tuple(update["readings"])
        if self.accepted_links:
            from spurinv.inventory.sources import link

            readings = [model.reading_json(r) for r in update["readings"]]
            update["accepted_links"] = tuple(link.still_accepted(self.accepted_links, readings))
        return self.model_copy(update=update)


class NewerSchema(Exception):
    """The state file was written by a newer spurinv; we must not touch it."""

    exit_code = exitcode.DATAERR


class Corrupt(Exception):
    """The state file does not parse or validate (exit 65 where it is not moved aside)."""

    exit_code = exitcode.DATAERR


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
    # "2", 2.0, true: never coerced to a version (a rewrite would then stamp it as ours)
    if "schema_version" in raw and (type(version) is not int or version < 1):
        raise Corrupt(f"{path}: schema_version {str(version)[:20]!r} is not a version number")
    if type(version) is int and version > SCHEMA_VERSION:
        raise NewerSchema(f"{path} has schema_version {version}; this spurinv understands {SCHEMA_VERSION}")
    return raw


def _validate(raw: dict[str, Any], path: str) -> State:
    try:
        # an older version's file is read as it is and written back as this version's
        return State.model_validate(raw).model_copy(update={"schema_version": SCHEMA_VERSION})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise Corrupt(f"{path}: {where}: {first['msg']}") from None


def foreign(path: str) -> str | None:
    """Why the file at ``path`` does not look like a spurinv state at all (None when it might be
    one, damaged): a state is a JSON object with ``schema_version`` or ``node``. A JSON object cut
    short (text starting with ``{`` that does not parse) and an empty file are taken for damaged
    states, moved aside; the config, a token, ``/etc/hosts`` or some other program's JSON are not."""
    import json

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # moving it aside will say what is wrong
    with os.fdopen(fd, "rb") as opened:
        data = opened.read(store.MAX_STATE + 1)
    text = data.lstrip()
    if not text:
        return None
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        return None if text.startswith(b"{") else "not JSON"
    if not isinstance(raw, dict):
        return "JSON, but not an object"
    if "schema_version" not in raw and "node" not in raw:
        return "a JSON object without schema_version or node"
    return None


def dump(state: State) -> bytes:
    """Serialise ``state`` as compact ASCII JSON, the encoder the fast path writes it with (``jq .``
    reads it): a lone surrogate a hand edit left in a string goes out as its ``\\u`` escape, as it
    came in, where UTF-8 cannot hold it."""
    return (jsontext.dumps(state.model_dump(mode="json")) + "\n").encode()


def load(path: str) -> State | None:
    """Read and validate the state file; None when there is none yet."""
    data = store.read(path)
    return None if data is None else parse(data, path)


def save(path: str, state: State) -> None:
    """Write ``state`` atomically."""
    store.write_state(path, dump(state))


def stamp(moment: datetime) -> str:
    """Timestamp for quarantined file names: ``20261202T181500Z``."""
    return moment.strftime("%Y%m%dT%H%M%SZ")
