"""The state file's shape: the last two readings, the reported baseline, and the bookkeeping of
drains, refusals and backoff. Loading and saving go through :mod:`spurinv.state.store`.

Plain dicts, as :mod:`spurinv.inventory.model`'s are: the TypedDicts here (with those of the
readings and the inventory they hold) are the one statement of the state file's JSON. The full run
works on the dicts as they are, through the same :mod:`spurinv.state.ledger` the timer's tick keeps
the books with; pydantic validates a file where it is loaded (:func:`parse`, over
:data:`ValidState`), filling in the keys an older file lacks, so every dict the full run holds has
every key. ``scripts/schemas`` generates ``state.schema.json`` from them
(:mod:`spurinv.state.vouch` checks raw files against it); a new field is written here and where
it is used, then ``scripts/schemas`` is run. The records are never changed in place (each step
builds new dicts: the items are ``ReadOnly`` and the arrays tuples, which mypy holds the code to).

Schema history (``schema_version``; from 3 on, the digest of the structure it names: the key
paths and types of ``state.schema.json``, which ``tests/test_state.py`` holds the current one to):
    1 — first version.
    2 — ``drain.recovered`` (a drain rebuilt from the controller) and ``fresh`` (a state started
        afresh that has not yet read the controller). Version 1 lacked them: its model forbids
        unknown keys, so version 1 would call a version 2 file corrupt and move it aside, losing
        the drain it records; it refuses a newer version instead, untouched. A version 1 file
        loads as it is (no drain in it carries an id: it is ours by its exact reason alone) and
        is written back as version 2.
    3 (structure a4068a2fe72ba258) — ``switching`` (a partition switch in progress, since
        when). Version 2 forbids the key, so it refuses a version 3 file instead of calling it
        corrupt.
A file from a newer schema is refused and never overwritten; a corrupt one is moved aside. So a
change of structure is a new version: its line here, with its digest, and ``shape.SCHEMA_VERSION``.
"""

import os
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BeforeValidator, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import NotRequired, ReadOnly, TypedDict  # noqa: UP035 (pydantic reads a TypedDict of 3.12 or this one)

from spurinv import exitcode, jsontext
from spurinv.controller.ownership import Claim, skew
from spurinv.errors import ControllerKind
from spurinv.inventory.classify import switching
from spurinv.inventory.model import STRICT, Inventory, Reading, ValidInventory, ValidReading, read_only_adapter
from spurinv.shape import KEEP_READINGS, SCHEMA_VERSION
from spurinv.state import ledger, store

Cause = Literal["busy", "refused", "suspicious", "link"]


@with_config(STRICT)
class Baseline(TypedDict):
    """The inventory the controller was last told, or adopted from it, or (observe mode) seen."""

    inventory: ReadOnly[ValidInventory]
    since: ReadOnly[AwareDatetime]
    source: ReadOnly[Literal["observed", "adopted", "registered"]]


@with_config(STRICT)
class Switching(TypedDict):
    """A partition switch in progress, since the first reading that caught it."""

    since: ReadOnly[AwareDatetime]


@with_config(STRICT)
class Pending(TypedDict):
    """A change seen but not yet confirmed, and since when."""

    fingerprint: ReadOnly[str]
    since: ReadOnly[AwareDatetime]


@with_config(STRICT)
class Drain(TypedDict):
    """A drain *we* set: only a node whose reason still equals ``reason`` is ours to resume
    (:func:`spurinv.controller.ownership.owns`)."""

    reason: ReadOnly[str]
    set_at: ReadOnly[AwareDatetime]  # our clock when we wrote it (or, recovered, what the record says)
    cause: ReadOnly[Cause]
    fingerprint: NotRequired[ReadOnly[str | None]]
    # When the controller says the reason was set (Slurm's ``reason_changed_at``, epoch seconds),
    # pinned from the first view after our drain: the same text set again after the node was
    # resumed has another time and is not ours (an identical re-drain of a drained node is
    # skipped by Slurm 24.11, time included: it stays ours).
    reason_changed_at: NotRequired[ReadOnly[int | None]]
    # Rebuilt from the controller by a run that had no usable state: from our record in the
    # node's ``extra``, or from the id in the reason alone (a controller without ``extra``).
    recovered: NotRequired[ReadOnly[Literal["controller-record", "reason"] | None]]
    # The last run that read the node held it for an operator (the node also DOWN or flagged by
    # someone else, or slurmctld appended to our reason): spurinv will not lift it as it stands.
    held: NotRequired[ReadOnly[bool]]


@with_config(STRICT)
class Intent(TypedDict):
    """A controller write about to be sent (write-ahead): saved durably *before* the request, cleared
    when its outcome is known. A run that dies in between leaves it here, and the next run decides
    from the controller's view whether it was applied (:mod:`spurinv.state.intent`)."""

    kind: ReadOnly[Literal["drain", "resume", "register"]]
    body: ReadOnly[dict[str, Any]]
    at: ReadOnly[AwareDatetime]
    fingerprint: NotRequired[ReadOnly[str | None]]
    cause: NotRequired[ReadOnly[Cause | None]]
    transport: NotRequired[ReadOnly[str]]


@with_config(STRICT)
class Refusal(TypedDict):
    """The controller refused (or silently ignored) the update for ``fingerprint``."""

    fingerprint: ReadOnly[str]
    at: ReadOnly[AwareDatetime]
    error: ReadOnly[str]
    remedy: NotRequired[ReadOnly[str | None]]  # what an operator must do (by transport); None in older files
    # an operator resumed the node from our drain for this refusal: not drained again for it
    # (a new refusal, after the backoff's retry, or another inventory drains again)
    resumed: NotRequired[ReadOnly[bool]]


@with_config(STRICT)
class Backoff(TypedDict):
    """Bounded exponential backoff across runs, after a controller error."""

    kind: ReadOnly[ControllerKind]
    failures: ReadOnly[int]
    next_attempt: ReadOnly[AwareDatetime]
    error: ReadOnly[str]


@with_config(STRICT)
class Decision(TypedDict):
    """What the last run found (``outcome``, ``reason``) and did (``actions``, one line per step;
    ``action`` is the last step's kind)."""

    at: ReadOnly[AwareDatetime]
    outcome: ReadOnly[str]
    action: ReadOnly[str]
    reason: ReadOnly[str]
    exit_code: ReadOnly[int]
    requests: NotRequired[ReadOnly[int]]
    actions: NotRequired[ReadOnly[tuple[str, ...]]]


@with_config(STRICT)
class Api(TypedDict):
    """The controller API version detected for ``url`` (``api = "auto"``)."""

    url: ReadOnly[str]
    version: ReadOnly[str]
    detected_at: ReadOnly[AwareDatetime]


@with_config(STRICT)
class Steady(TypedDict):
    """Memo of a run that found nothing to do, for the next tick's fast path.

    Written only when the full path classified *unchanged* with no drain, refusal, backoff or
    pending change outstanding (:func:`spurinv.state.ledger.settled`). ``key`` covers the root, the config
    file's identity (path, inode, size, mtime), the ``--metrics-file`` and ``--node`` flags and the
    host name (:func:`spurinv.state.ledger.steady_key`); the discovery settings are stored here, so a tick
    needs no config. A tick whose key and fingerprint match is the same situation and needs
    neither pydantic nor the network.
    """

    fingerprint: ReadOnly[str]
    key: ReadOnly[str]
    cdi_dirs: NotRequired[ReadOnly[tuple[str, ...]]]
    ignore_pci: NotRequired[ReadOnly[tuple[str, ...]]]
    metrics_file: NotRequired[ReadOnly[str | None]]
    node: NotRequired[ReadOnly[str]]
    observe: NotRequired[ReadOnly[bool]]  # the run was in observe mode: the replayed decision says so, as a full run would
    drain_links: NotRequired[ReadOnly[bool]]  # policy.drain_on_degraded_link: a degraded link hands the tick over


# The keys a record written before them may lack, at the values the models' defaults had: validation
# fills them in (:func:`_defaults`), and :func:`new`, :func:`drain`, :func:`intent` and
# :func:`refusal` build every record with all of them, so the full run never meets a missing key.
DEFAULTS: dict[type, dict[str, Any]] = {
    Drain: {"fingerprint": None, "reason_changed_at": None, "recovered": None, "held": False},
    Intent: {"fingerprint": None, "cause": None, "transport": "rest"},
    Refusal: {"remedy": None, "resumed": False},
    Decision: {"requests": 0, "actions": ()},
    Steady: {"cdi_dirs": (), "ignore_pci": (), "metrics_file": None, "node": "", "observe": False, "drain_links": False},
}


def _defaults(kind: type, drop: str | None = None) -> BeforeValidator:
    """Fill in the keys of ``kind`` a file may lack (``drop``: a key an old version wrote that
    nothing reads, accepted and dropped)."""
    missing = DEFAULTS[kind]

    def fill(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if drop is not None and drop in value:
            value = {key: item for key, item in value.items() if key != drop}
        return {**missing, **value}

    return BeforeValidator(fill)


ValidDrain = Annotated[Drain, _defaults(Drain)]
ValidIntent = Annotated[Intent, _defaults(Intent)]
ValidRefusal = Annotated[Refusal, _defaults(Refusal)]
ValidDecision = Annotated[Decision, _defaults(Decision)]
# 0.1.0 wrote a ``controller_errors`` in the memo that nothing read: such a file is accepted, the key dropped
ValidSteady = Annotated[Steady, _defaults(Steady, drop="controller_errors")]


@with_config(STRICT)
class State(TypedDict):
    """Everything spurinv remembers between runs."""

    schema_version: NotRequired[ReadOnly[int]]
    node: NotRequired[ReadOnly[str | None]]
    readings: NotRequired[ReadOnly[Annotated[tuple[ValidReading, ...], Field(max_length=KEEP_READINGS)]]]
    baseline: NotRequired[ReadOnly[Baseline | None]]
    pending: NotRequired[ReadOnly[Pending | None]]
    last: NotRequired[ReadOnly[ValidDecision | None]]
    drain: NotRequired[ReadOnly[ValidDrain | None]]
    refusal: NotRequired[ReadOnly[ValidRefusal | None]]
    backoff: NotRequired[ReadOnly[Backoff | None]]
    accepted: NotRequired[ReadOnly[str | None]]
    # Degraded links (``"<BDF> x<width>"``) whose link drain an operator lifted: not drained again
    # while the link stays at that width (dropped at the first reading that shows it otherwise).
    accepted_links: NotRequired[ReadOnly[Annotated[tuple[str, ...], Field(max_length=64)]]]
    api: NotRequired[ReadOnly[Api | None]]
    consecutive_failures: NotRequired[ReadOnly[int]]
    controller_errors: NotRequired[ReadOnly[int]]
    last_success: NotRequired[ReadOnly[AwareDatetime | None]]
    steady: NotRequired[ReadOnly[ValidSteady | None]]
    intent: NotRequired[ReadOnly[ValidIntent | None]]
    busy_checked_at: NotRequired[ReadOnly[AwareDatetime | None]]  # the last all-nodes query confirming "busy"
    # Started afresh (no file, or a corrupt one moved aside) and the controller not yet read: the
    # first view looks for a drain the lost state knew (the controller's record of it).
    fresh: NotRequired[ReadOnly[bool]]
    switching: NotRequired[ReadOnly[Switching | None]]  # a partition switch in progress (readings with its evidence)
    # The boot it was written under (/proc/sys/kernel/random/boot_id under --root): a state from
    # another boot (a golden image, a snapshot rolled back) is checked against the controller.
    boot_id: NotRequired[ReadOnly[str | None]]


DEFAULTS[State] = {
    "schema_version": SCHEMA_VERSION, "node": None, "readings": (), "baseline": None, "pending": None, "last": None,
    "drain": None, "refusal": None, "backoff": None, "accepted": None, "accepted_links": (), "api": None,
    "consecutive_failures": 0, "controller_errors": 0, "last_success": None, "steady": None, "intent": None,
    "busy_checked_at": None, "fresh": False, "switching": None, "boot_id": None,
}  # fmt: skip
ValidState = Annotated[State, _defaults(State)]
# what the state's keys hold, for :func:`dump`'s order
RECORDS: dict[str, type] = {
    "baseline": Baseline, "pending": Pending, "last": Decision, "drain": Drain, "refusal": Refusal, "backoff": Backoff,
    "api": Api, "steady": Steady, "intent": Intent, "switching": Switching,
}  # fmt: skip
_STATE: TypeAdapter[State] = read_only_adapter(ValidState)
_STEADY: TypeAdapter[Steady] = read_only_adapter(ValidSteady)
_DECISION: TypeAdapter[Decision] = read_only_adapter(ValidDecision)


def new(**fields: Any) -> State:
    """A state with every key, ``fields`` over the defaults (``new(fresh=True)``: a state started afresh)."""
    unknown = set(fields) - set(DEFAULTS[State])
    if unknown:
        raise TypeError(f"not a state field: {', '.join(sorted(unknown))}")
    state: State = {**DEFAULTS[State], **fields}  # type: ignore[typeddict-item]
    return state


def drain(
    reason: str,
    set_at: datetime,
    cause: Cause,
    fingerprint: str | None = None,
    reason_changed_at: int | None = None,
    recovered: Literal["controller-record", "reason"] | None = None,
    held: bool = False,
) -> Drain:
    """A drain record with every key."""
    return {"reason": reason, "set_at": set_at, "cause": cause, "fingerprint": fingerprint,
            "reason_changed_at": reason_changed_at, "recovered": recovered, "held": held}  # fmt: skip


def intent(
    kind: Literal["drain", "resume", "register"],
    body: dict[str, Any],
    at: datetime,
    fingerprint: str | None = None,
    cause: Cause | None = None,
    transport: str = "rest",
) -> Intent:
    """A write-ahead intent with every key."""
    return {"kind": kind, "body": body, "at": at, "fingerprint": fingerprint, "cause": cause, "transport": transport}


def refusal(fingerprint: str, at: datetime, error: str, remedy: str | None = None, resumed: bool = False) -> Refusal:
    """A refusal record with every key."""
    return {"fingerprint": fingerprint, "at": at, "error": error, "remedy": remedy, "resumed": resumed}


def steady(memo: Mapping[str, Any]) -> Steady:
    """:func:`spurinv.state.ledger.memo`'s dict as the state holds it (validated: its keys in order)."""
    return _STEADY.validate_python(memo)


def decision(last: Mapping[str, Any]) -> Decision:
    """:func:`spurinv.state.ledger.decision`'s dict as the state holds it (validated)."""
    return _DECISION.validate_python(last)


def claim(drain: Drain) -> Claim:
    """The drain as the ownership rule reads it."""
    return Claim(
        drain["reason"], "state", at=int(drain["set_at"].timestamp()), pinned=drain["reason_changed_at"],
        cause=drain["cause"], fingerprint=drain["fingerprint"],
    )  # fmt: skip


def drain_skew(drain: Drain) -> int | None:
    """The controller's reason time minus ours (clock skew), once pinned; None for a drain
    recovered from the id in its reason alone (its ``set_at`` is when we found it, not when
    we wrote it: no time of ours to compare with)."""
    return None if drain["recovered"] == "reason" else skew(drain["reason_changed_at"], int(drain["set_at"].timestamp()))


def intent_reason(intent: Intent) -> str | None:
    """The drain reason an intended write sets, if any."""
    reason = intent["body"].get("reason")
    return reason if isinstance(reason, str) else None


def latest(state: State) -> Reading | None:
    """The newest reading (after :func:`record`, the one being acted on)."""
    readings = state["readings"]
    return readings[-1] if readings else None


def latest_inventory(state: State) -> Inventory | None:
    """The newest reading's inventory (None: no reading, or a failed one)."""
    readings = state["readings"]
    return readings[-1]["inventory"] if readings else None


def overdue(state: State, reading: Reading, switch_timeout: float) -> bool:
    """Whether ``reading``, a switch in progress, caught one older than ``switch_timeout`` seconds."""
    if not switching(reading):
        return False
    if switch_timeout <= 0:
        return True  # policy.switch_timeout = 0: no switch is waited for
    taken_at: datetime = reading["taken_at"]
    switch = state["switching"]
    if switch is None or switch["since"] > taken_at:
        return False  # the first sighting, or one stamped by a clock ahead (restarted at this reading)
    return (taken_at - switch["since"]).total_seconds() > switch_timeout


def record(state: State, reading: Reading, switch_timeout: float = 600) -> State:
    """Return the state with ``reading`` appended, keeping the last two, and counters updated
    (the rule is :func:`spurinv.state.ledger.record`'s, which the timer's tick applies to the raw file)."""
    previous = latest(state)
    update = ledger.record(
        state,
        reading,
        ok=reading["ok"],
        fingerprint=reading["fingerprint"],
        taken_at=reading["taken_at"],
        baseline=state["baseline"]["inventory"]["fingerprint"] if state["baseline"] else None,
        switching=switching(reading),
        overdue=overdue(state, reading, switch_timeout),
        previous_switching=previous is not None and switching(previous),
    )
    readings = tuple(update.pop("readings"))
    accepted = state["accepted_links"]
    if accepted:
        from spurinv.inventory import model
        from spurinv.inventory.sources import link

        shown = [model.reading_json(each) for each in readings]
        accepted = tuple(link.still_accepted(accepted, shown))
    return {**state, **update, "readings": readings, "accepted_links": accepted}  # type: ignore[typeddict-item]


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


def validate(raw: object) -> State:
    """``raw`` as a state, validated, the keys it lacks filled in (pydantic's ValidationError when it is none)."""
    return _STATE.validate_python(raw)


def _validate(raw: dict[str, Any], path: str) -> State:
    try:
        state = validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        message = first["msg"]
        if first["type"] == "dict_type" and len(first["loc"]) == 1 and first["loc"][0] in RECORDS:
            # the words the models these records were said with gave (kept for whoever reads them)
            message = f"{message} or instance of {RECORDS[str(first['loc'][0])].__name__}"
        raise Corrupt(f"{path}: {where}: {message}") from None
    # an older version's file is read as it is and written back as this version's
    return {**state, "schema_version": SCHEMA_VERSION}


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


def _ordered(record: Mapping[str, Any], kind: type) -> dict[str, Any]:
    """``record`` with the keys of ``kind`` in their declared order, a missing one at its default:
    the bytes written never depend on how a dict was built."""
    defaults = DEFAULTS.get(kind, {})
    return {key: record[key] if key in record else defaults[key] for key in kind.__annotations__}


def as_json(state: State) -> dict[str, Any]:
    """``state`` as the state file holds it: every key in order, times as RFC 3339 text."""
    ordered = _ordered(state, State)
    for key, kind in RECORDS.items():
        if ordered[key] is not None:
            ordered[key] = _ordered(ordered[key], kind)
    dumped: dict[str, Any] = _STATE.dump_python(ordered, mode="json")  # type: ignore[arg-type]
    return dumped


def dump(state: State) -> bytes:
    """Serialise ``state`` as compact ASCII JSON, the encoder the fast path writes it with (``jq .``
    reads it): a lone surrogate a hand edit left in a string goes out as its ``\\u`` escape, as it
    came in, where UTF-8 cannot hold it."""
    return (jsontext.dumps(as_json(state)) + "\n").encode()


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


def schema() -> dict[str, Any]:
    """The state file's JSON Schema, as pydantic writes it from :data:`ValidState` (``scripts/schemas``)."""
    return _STATE.json_schema()
