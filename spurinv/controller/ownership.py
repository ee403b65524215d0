"""Whose drain it is: the one rule, and the record spurinv keeps on the controller. Pure, stdlib only.

The controller, not the node's state file, carries what spurinv did (the state file is a cache:
stateless nodes lose ``/var`` at every reboot). Every drain spurinv writes says so twice:

* **in its reason**: ``spurinv: [3f9a1c07] mi300x 8→7; re-registers when idle``. The id is four
  hex digits drawn from a random source and four of a digest of the node's name, those four and
  the text after the id (:func:`reason_for`). A reason copied to another node, or edited after the
  id, no longer carries a valid id (:func:`reason_id`); a reason copied verbatim onto the same node
  does, which only the state file (or the controller record) can tell apart. The digest is no
  secret: it tells spurinv's own words from a mistake, not from a forger with admin rights.
* **in the node's ``extra``** (Slurm; spur has none): a JSON object under the ``spurinv`` key —
  the node's name, the drain's id, its exact reason, cause, inventory fingerprint and time, beside
  the registration record (fingerprint, inventory summary, gres). It is written in the same
  update as the drain, so no crash can separate them. Only our key's value is replaced; every
  other byte of the admin's text stays as it was (:func:`splice`). An ``extra`` that is not one
  JSON object, has duplicate keys, non-finite or absurd numbers, is nested too deep, or would not
  fit the transport is never rewritten: the id in the reason is then the record.

Ownership (:func:`owns`): the DRAIN flag, and the reason equal to the one a :class:`Claim` holds
— from the state file (the drain we set, or the write-ahead intent of one), or, when the state
is gone, from the controller (:func:`controller_claim`) — and, where the controller says when the
reason was set, set at the time we first saw it (our text set again after the node was resumed
has a new time and is not ours; an identical re-drain of a drained node is skipped by Slurm
24.11's update_node(), reason time included, so nothing tells it apart: it stays ours).
No clock window decides it: the controller's ``reason_changed_at`` far from our record's time is
clock skew (:func:`skew`), reported, never "not ours".
"""

from __future__ import annotations

import hashlib
import json
import math

from spurinv import shape
from spurinv.secret import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PREFIX = "spurinv:"
KEY = "spurinv"  # our key in the node's ``extra`` JSON object
REPLACEMENT = "\ufffd"  # what answer.py made of text that was not valid UTF-8
MAX_REASON = 240  # short enough for ``sinfo -R``
MAX_EPOCH = shape.PAST_LAST_SECOND  # anything later is no timestamp
SKEW_WARNING = 300  # seconds between the controller's reason time and ours worth a warning
# Linux's MAX_ARG_STRLEN (32 pages): one argv word, its terminating NUL included, must fit.
MAX_ARG_STRLEN = 131072
_NONCE = 4  # hex digits drawn from the random source
_TAG = 4  # hex digits of the digest
_OPEN = f"{PREFIX} ["  # ``spurinv: [`` then the id, ``] `` and the text
_HEX = frozenset("0123456789abcdef")
_SPACE = " \t\n\r"
CAUSES = ("busy", "refused", "suspicious", "link")


# --- the controller's reason time -----------------------------------------------------------------


def changed_at(value: object) -> int | None:
    """Slurm's ``reason_changed_at`` in Unix seconds: a plain int (≤ v0.0.39) or
    ``{"set": true, "infinite": false, "number": N}`` (v0.0.40+).

    None — unknown — for anything else: unset, zero, negative, infinite, a float, a boolean,
    a dict without ``"set": true``, a time after the year 9999. The one parser: ``refresh``,
    reconciliation, ``status`` and ``fleet`` all read the time through it.
    """
    if isinstance(value, dict):
        if value.get("set") is not True or value.get("infinite") is True:
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < MAX_EPOCH:
        return None
    return value


def skew(controller_time: int | None, our_time: int | None) -> int | None:
    """How far the controller's time for our write is from ours (positive: the controller's clock
    is ahead), when both are known."""
    if controller_time is None or our_time is None:
        return None
    return controller_time - our_time


def drain_skew(drain: object) -> int | None:
    """The skew a saved drain (the state file's ``drain`` as JSON) shows: None until its reason
    time is pinned, and None for a drain recovered from the id in its reason alone, whose
    ``set_at`` is when we found it, not when we wrote it (no time of ours to compare with).
    The one reading of it: ``status``, the metrics and ``refresh``."""
    if not isinstance(drain, dict) or drain.get("recovered") == "reason":
        return None
    return skew(changed_at(drain.get("reason_changed_at")), shape.epoch(drain.get("set_at")))


def skew_warning(seconds: int | None) -> str | None:
    """The sentence for a skew worth reporting (None when there is none)."""
    if seconds is None or abs(seconds) <= SKEW_WARNING:
        return None
    direction = "ahead of" if seconds > 0 else "behind"
    return (
        f"clock skew: the controller's clock is about {abs(seconds)} s {direction} this node's "
        f"(when it set our drain's reason vs when we sent it); ownership does not depend on it, "
        "but check NTP on both"
    )


# --- the id in the reason -------------------------------------------------------------------------


def _tag(node: str, nonce: str, text: str) -> str:
    data = f"{node}\n{nonce}\n{text}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:_TAG]


def nonce_of(entropy: bytes) -> str:
    """The random part of a drain id, from ``entropy`` (two bytes or more)."""
    if len(entropy) < _NONCE // 2:
        raise ValueError(f"a drain id needs {_NONCE // 2} bytes of entropy, got {len(entropy)}")
    return entropy[: _NONCE // 2].hex()


def reason_for(node: str, nonce: str, text: str) -> str:
    """``spurinv: [<id>] <text>`` on one line, printable, at most :data:`MAX_REASON` characters;
    the id covers the node's name and the text as sent (after shortening)."""
    # every `sinfo -R` prints the reason: no control character reaches a terminal from it
    line = printable(" ".join(text.split()))
    room = MAX_REASON - len(_OPEN) - _NONCE - _TAG - 2
    if len(line) > room:
        line = line[: room - 1] + "…"
    head = f"{_OPEN}{nonce}{_tag(node, nonce, line)}]"
    return f"{head} {line}" if line else head


def _split(reason: str) -> tuple[str, str, str] | None:
    """``(nonce, tag, text)`` of a reason in our format, else None."""
    start, end = len(_OPEN), len(_OPEN) + _NONCE + _TAG
    if not reason.startswith(_OPEN) or not (reason[end : end + 2] == "] " or reason[end:] == "]"):
        return None
    digits = reason[start:end]
    if not set(digits) <= _HEX:
        return None
    return digits[:_NONCE], digits[_NONCE:], reason[end + 2 :]


def reason_id(reason: str, node: str) -> str | None:
    """The drain id ``reason`` carries, if it is one spurinv wrote for ``node`` with exactly this
    text; None for any other reason (no id, another node's, edited after the id)."""
    parts = _split(reason)
    if parts is None:
        return None
    nonce, tag, text = parts
    return nonce + tag if _tag(node, nonce, text) == tag else None


def text_of(reason: str) -> str:
    """What a reason of ours says, without the prefix and the id (an older one has no id)."""
    parts = _split(reason)
    return parts[2] if parts is not None else reason.removeprefix(PREFIX).lstrip(" ")


# --- the record in extra ----------------------------------------------------------------------------


class _Refused(ValueError):
    """Text spurinv does not rewrite (and does not read a record from)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            raise _Refused(f"duplicate key {key[:40]!r}")
        seen.add(key)
    return dict(pairs)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: re-serialised it would become Infinity, which is no JSON
        raise _Refused(f"number {text[:40]} is not finite")
    return value


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant)


class Extra:
    """A node's ``extra`` that spurinv may read its record from and splice its key into.

    ``members``: the top-level object; ``span``: where our key's value is in ``text``;
    ``after``: where a new member goes (after the last value); ``empty``: the object has none.
    """

    __slots__ = ("after", "empty", "members", "span", "text")

    def __init__(self, text: str, members: dict[str, Any], span: tuple[int, int] | None, after: int, empty: bool) -> None:
        self.text = text
        self.members = members
        self.span = span
        self.after = after
        self.empty = empty

    @property
    def record(self) -> dict[str, Any] | None:
        """Our record, when our key holds an object."""
        value = self.members.get(KEY)
        return value if isinstance(value, dict) else None


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _SPACE:
        index += 1
    return index


def parse_extra(text: object) -> Extra | None:
    """``extra`` as one JSON object spurinv may use, else None (for text that is no such object,
    or holds a duplicate key, ``NaN``/``Infinity``, a number beyond a float, an integer too long
    to read, a lone surrogate, or nesting deeper than the parser goes).

    ``""`` (nothing set) is an empty object with nowhere to splice: :func:`splice` handles it.
    """
    if not isinstance(text, str):
        return None
    try:
        text.encode("utf-8")
        return _object(text)
    except (ValueError, RecursionError, UnicodeError):  # _Refused and JSONDecodeError are ValueErrors
        return None


def _object(text: str) -> Extra | None:
    index = _skip(text, 0)
    if text[index : index + 1] != "{":
        return None
    members: dict[str, Any] = {}
    span = None
    index = _skip(text, index + 1)
    after = index
    empty = text[index : index + 1] == "}"
    while not empty:
        if text[index : index + 1] != '"':
            return None
        key, index = _DECODER.raw_decode(text, index)  # a JSON string, escapes decoded
        if key in members:
            raise _Refused(f"duplicate key {key[:40]!r}")
        index = _skip(text, index)
        if text[index : index + 1] != ":":
            return None
        start = _skip(text, index + 1)
        members[key], index = _DECODER.raw_decode(text, start)
        if key == KEY:
            span = (start, index)
        after = index
        index = _skip(text, index)
        if text[index : index + 1] == ",":
            index = _skip(text, index + 1)
            continue
        if text[index : index + 1] != "}":
            return None
        break
    if _skip(text, index + 1) != len(text):
        return None  # something after the object: not one JSON object
    return Extra(text, members, span, after, empty)


def encode(value: dict[str, Any]) -> str:
    """Our record as it goes into ``extra``: compact, sorted, ASCII (any locale, any transport)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def splice(text: str | None, value: dict[str, Any], limit: int | None = None) -> str | None:
    """``text`` with our key's value set to ``value``, every other byte unchanged; None when the
    controller has no ``extra`` (``text`` None), when it is not text we may rewrite
    (:func:`parse_extra`), when it holds U+FFFD (text cleaned on input), or when the result would be
    longer than ``limit`` bytes (UTF-8)."""
    if text is None or REPLACEMENT in text:
        # U+FFFD: bytes that were not UTF-8, or a lone surrogate, cleaned when read (answer.py);
        # what the admin wrote cannot be reproduced, so it is not written back at all
        return None
    ours = encode(value)
    if not text.strip():
        result = f'{{"{KEY}":{ours}}}'
    else:
        extra = parse_extra(text)
        if extra is None:
            return None
        if extra.span is not None:
            result = text[: extra.span[0]] + ours + text[extra.span[1] :]
        elif extra.empty:
            result = text[: extra.after] + f'"{KEY}":{ours}' + text[extra.after :]
        else:
            result = text[: extra.after] + f',"{KEY}":{ours}' + text[extra.after :]
    if limit is not None and len(result.encode("utf-8")) > limit:
        return None
    return result


def extra_record(extra: object) -> dict[str, Any] | None:
    """Our record in a node's ``extra`` (``{"fingerprint", "inventory", "gres"}`` of the last
    registration; ``node`` and ``drain`` for the drain it set), if it holds one we may read."""
    if not isinstance(extra, str) or not extra.lstrip().startswith("{"):
        return None  # empty, or someone's plain text: not worth a failed parse per node of a fleet
    parsed = parse_extra(extra)
    return parsed.record if parsed is not None else None


def extra_fingerprint(extra: str | None) -> str | None:
    """The fingerprint of the registration we recorded in ``extra``, if any."""
    value = (extra_record(extra) or {}).get("fingerprint")
    return value if isinstance(value, str) else None


# every key a record of ours has held (older ones lack ``node``)
RECORD_KEYS = frozenset({"node", "drain", "lifted", "fingerprint", "inventory", "gres"})


_DRAIN_KEYS = frozenset({"id", "reason", "cause", "fingerprint", "at"})
_LIFTED_KEYS = frozenset({"id", "at"})


def _typed(value: dict[str, Any], key: str, *types: type) -> bool:
    return key not in value or isinstance(value[key], types)


def is_record(value: object) -> bool:
    """Has ``value`` the exact shape of a record spurinv writes? Its keys, each of its type: the
    node's name, the registration's fingerprint, inventory and gres (text), a drain entry (its id
    and reason, cause, fingerprint, time) and a lifted entry (id, time). One from before records
    named their node has at least its registration's fingerprint. Anything else under our key —
    ``{}``, ``{"gres": "admin-note"}``, ``{"drain": "manual hold"}`` — is the admin's."""
    if not isinstance(value, dict) or not value or not set(value) <= RECORD_KEYS:
        return False
    if not all(_typed(value, key, str) for key in ("node", "fingerprint", "inventory", "gres")):
        return False
    if "node" not in value and not isinstance(value.get("fingerprint"), str):
        return False
    drain, lifted = value.get("drain"), value.get("lifted")
    if "drain" in value and not (
        isinstance(drain, dict)
        and set(drain) <= _DRAIN_KEYS
        and isinstance(drain.get("id"), str)
        and isinstance(drain.get("reason"), str)
        and (drain.get("cause") is None or drain.get("cause") in CAUSES)
        and _typed(drain, "fingerprint", str, type(None))
        and _typed(drain, "at", str)
    ):
        return False
    return "lifted" not in value or (
        isinstance(lifted, dict)
        and set(lifted) <= _LIFTED_KEYS
        and _typed(lifted, "id", str, type(None))
        and _typed(lifted, "at", str)
    )


def foreign_key(extra: str | None, node: str) -> str | None:
    """Why our key in ``extra`` is not ours to rewrite, or None when it is (absent, or a record
    of ours for ``node``, or one from before records named their node).

    An admin's own value under ``spurinv`` (text, a number, an object of another shape) is their
    data; a record naming another node (a renamed node's, or one copied with the admin's
    ``extra``) is that node's evidence of its drain (``fleet`` reads it). Neither is rewritten:
    the id in the reason is then the record.
    """
    if not isinstance(extra, str) or not extra.lstrip().startswith("{"):
        return None
    parsed = parse_extra(extra)
    if parsed is None or KEY not in parsed.members:
        return None
    value = parsed.members[KEY]
    if not is_record(value):
        return (
            f"the node's extra holds a {KEY!r} key that is not spurinv's record: left as it is "
            "(the id in the reason is the record)"
        )
    if value.get("node", node) != node:
        return (
            f"the node's extra holds spurinv's record for node {value['node']!r} (renamed, or copied?): left as it is "
            f"(the id in the reason is the record; remove the key by hand if {value['node']!r} is gone)"
        )
    return None


def record_value(extra: str | None, node: str, update: dict[str, Any]) -> dict[str, Any] | None:
    """Our key's new value: the record ``extra`` holds for ``node`` with ``update`` applied; None
    when our key holds something that is not ours to rewrite (:func:`foreign_key`)."""
    if foreign_key(extra, node) is not None:
        return None
    return {**(extra_record(extra) or {}), **update, "node": node}


def retired_value(extra: str | None, node: str, drain_id: str | None, at: str) -> dict[str, Any] | None:
    """Our key's new value once our drain is gone: the record for ``node`` without its drain
    entry, saying which drain was lifted and when; None when ``extra`` holds no drain entry of
    ours for ``node`` (nothing to retire)."""
    current = extra_record(extra)
    if current is None or current.get("node") != node or "drain" not in current or not is_record(current):
        return None
    kept = {key: value for key, value in current.items() if key != "drain"}
    return {**kept, "lifted": {"id": drain_id, "at": at}, "node": node}


def stale_drain(extra: str | None, node: str, drained: bool, reason: str) -> str | None:
    """The id of the drain entry our record in ``extra`` still holds for ``node`` although the
    node no longer carries that drain (resumed, re-worded, or lifted by a run that died before
    the record followed); None when the entry is current, or there is none."""
    record = extra_record(extra)
    drain = record.get("drain") if record is not None else None
    if record is None or record.get("node") != node or not isinstance(drain, dict):
        return None
    ours = drain.get("reason")
    if drained and isinstance(ours, str) and (reason == ours or amended(reason, ours) is not None):
        return None
    drain_id = drain.get("id")
    return drain_id if isinstance(drain_id, str) else ""


def amended(reason: str, ours: str) -> str | None:
    """What slurmctld appended to our reason, if ``reason`` is ``ours`` plus `` : <message>``.

    slurmctld's ``set_node_reason()`` (src/slurmctld/node_mgr.c) appends " : <message>" to a
    node's existing reason when it sets the node DOWN ("Not responding", a failed registration
    such as "gres/gpu count reported lower than configured", "reboot issued"), and stamps a new
    reason time. The drain is still the one we set; the node now needs more than our lift
    (docs/security.md, "When Slurm rewrites our reason").
    """
    head = f"{ours} : "
    if not ours.startswith(PREFIX) or not reason.startswith(head) or len(reason) == len(head):
        return None
    return reason[len(head) :]


def unamended(reason: str, node: str) -> tuple[str, str] | None:
    """``(our reason, what slurmctld appended)`` when ``reason`` is a reason spurinv wrote for
    ``node`` (a valid id) with `` : <message>`` appended (:func:`amended`); None otherwise.
    How a run with no state still knows such a drain is ours."""
    index = reason.find(" : ")
    while index != -1:
        head = reason[:index]
        if reason_id(head, node) is not None:
            added = amended(reason, head)
            return (head, added) if added is not None else None
        index = reason.find(" : ", index + 1)
    return None


# --- lifting ----------------------------------------------------------------------------------------

# Flags a drained node may carry that are no reason to keep our drain: a job still completing,
# a reservation, a dynamic or cloud node. Anything else (NOT_RESPONDING, FAIL, REBOOT_*,
# INVALID_REG, POWER*, an unknown word) was set by Slurm or an operator for its own reason.
HARMLESS_FLAGS = frozenset({"DRAIN", "COMPLETING", "RESERVED", "MAINTENANCE", "PLANNED", "DYNAMIC_NORM", "CLOUD"})
LIFTABLE_BASES = frozenset({"IDLE", "ALLOCATED", "MIXED"})


def lift_blockers(base: str, flags: tuple[str, ...]) -> list[str]:
    """Why our drain must stay although it is ours: the node is DOWN (or in another base state
    than IDLE/ALLOCATED/MIXED) or carries a flag someone else set. Empty: it may be lifted."""
    found = [] if base.upper() in LIFTABLE_BASES else [base.upper()]
    return found + [flag for flag in flags if flag.upper() not in HARMLESS_FLAGS]


# --- the rule ---------------------------------------------------------------------------------------


class Claim:
    """A drain spurinv believes it set: the exact ``reason``, our time of the write (Unix seconds,
    if known), the controller's reason time pinned at first sight (if any) and where the belief
    comes from (``state``, ``intent``, ``controller-record``, ``reason``)."""

    __slots__ = ("at", "cause", "fingerprint", "pinned", "reason", "source")

    def __init__(
        self,
        reason: str,
        source: str,
        *,
        at: int | None = None,
        pinned: int | None = None,
        cause: str = "busy",
        fingerprint: str | None = None,
    ) -> None:
        self.reason = reason
        self.source = source
        self.at = at
        self.pinned = pinned
        self.cause = cause
        self.fingerprint = fingerprint

    def __repr__(self) -> str:
        return f"Claim({self.reason!r}, {self.source!r}, at={self.at}, pinned={self.pinned})"


def owns(drained: bool, reason: str, reason_changed_at: int | None, claim: Claim | None) -> bool:
    """Is the node's drain the one ``claim`` describes? DRAIN set, exactly the claimed reason,
    and, when both the claim and the controller know when it was set, the same time."""
    if claim is None or not drained or reason != claim.reason:
        return False
    return claim.pinned is None or reason_changed_at is None or reason_changed_at == claim.pinned


def controller_claim(node: str, reason: str, extra: object) -> Claim | None:
    """What the controller alone says is spurinv's drain on ``node`` (no state file needed):
    a reason carrying a valid id for this node and this text, with what our record in ``extra``
    adds about it (our time, cause, fingerprint) when the record names this node and this drain.

    A record that contradicts the reason gives no claim: one that names this drain's id with
    other words, or another node; and one for this node that says this drain was lifted, names
    another drain as current, or no drain at all. After our lift Slurm keeps the reason text, so
    a later drain without a reason of its own (``State=DRAIN`` alone, slurmctld's drain_nodes(),
    a health check) shows our old words and id: only the record tells it is not ours. (A drain
    whose record could not be written, ``extra`` grown too long for the transport, is then not
    recovered after a state loss: ``fleet`` reports it, nothing lifts it.)
    """
    drain_id = reason_id(reason, node)
    if drain_id is None:
        return None
    record = extra_record(extra)
    drain = record.get("drain") if record is not None else None
    lifted = record.get("lifted") if record is not None else None
    if isinstance(lifted, dict) and lifted.get("id") == drain_id:
        return None  # we lifted this drain; what shows its words now is someone else's
    if record is not None and record.get("node") == node and (not isinstance(drain, dict) or drain.get("id") != drain_id):
        return None  # our record for this node knows of no such drain
    if not isinstance(drain, dict) or drain.get("id") != drain_id:
        return Claim(reason, "reason", cause=cause_in(reason))
    if record is None or record.get("node") != node or drain.get("reason") != reason:
        return None
    cause = drain.get("cause")
    fingerprint = drain.get("fingerprint")
    return Claim(
        reason,
        "controller-record",
        at=shape.epoch(drain.get("at")),
        cause=cause if cause in CAUSES else cause_in(reason),
        fingerprint=fingerprint if isinstance(fingerprint, str) else None,
    )


def cause_in(reason: str) -> str:
    """Why spurinv set a drain, from its own words (a reason without a record says no more)."""
    text = (_split(reason) or ("", "", reason))[2]
    if text.startswith("suspicious reading"):
        return "suspicious"
    if text.startswith("controller refused"):
        return "refused"
    if " PCIe x" in text and "→x" in text:
        return "link"
    return "busy"


__all__ = [
    "KEY",
    "MAX_ARG_STRLEN",
    "MAX_REASON",
    "PREFIX",
    "SKEW_WARNING",
    "Claim",
    "Extra",
    "amended",
    "changed_at",
    "controller_claim",
    "drain_skew",
    "extra_fingerprint",
    "extra_record",
    "foreign_key",
    "is_record",
    "lift_blockers",
    "owns",
    "parse_extra",
    "reason_for",
    "reason_id",
    "record_value",
    "retired_value",
    "skew",
    "splice",
    "stale_drain",
    "unamended",
]
