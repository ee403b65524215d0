"""The state file's JSON shape, once: its rules. Stdlib only (hot path).

Everything spurinv keeps or prints about the node is plain JSON: the discovery sources build
dicts in exactly this form, the timer's tick (:mod:`spurinv.cli.tick`) reads and writes the state
file as it is, and the full run validates the same dicts (:mod:`spurinv.inventory.model`, whose
TypedDicts state their fields once, and :mod:`spurinv.state.file`) with the rules here, never
stated again. The rules:

* a discovery or a reading has an inventory **if and only if** it has no errors
  (:func:`result_problem`), and a reading's fingerprint is its inventory's;
* an inventory's devices are unique and sorted by :func:`device_key`, and its fingerprint is
  the one :func:`spurinv.inventory.fingerprint.fingerprint` computes (:func:`inventory_problem`);
* a timestamp is RFC 3339 with a zone (:func:`timestamp_problem`); spurinv writes its own in UTC
  (:func:`stamp`) and reads them back with :func:`epoch`;
* derived values: :func:`gpu_counts`, :func:`summary`, :func:`problem_line`, :func:`link_line`.

The types of these dicts (TypedDicts: ``Device``, ``Inventory``, ``Discovery``…) are in
:mod:`spurinv.inventory.model`, which this module and the tick's modules import under
``if TYPE_CHECKING:`` only: importing ``typing`` at run time costs the tick more than it saves
(``tests/test_architecture.py``).
"""

from spurinv.inventory.fingerprint import fingerprint

SCHEMA_VERSION = 3  # of the state file (history: spurinv/state/file.py)
KEEP_READINGS = 2  # the readings a state file keeps: the last two, which confirm a change

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


# The words a decision (``last``) is written in, one home for the full run's classifier and
# policy and the tick's replay (which writes the same books without importing either).
UNCHANGED = "unchanged"  # classify.Kind.UNCHANGED
NO_ACTION = "none"  # policy.Do.NONE
UNCHANGED_REASON = "matches the reported baseline"  # classify's reason for an unchanged reading
QUIET = "unchanged; no controller request needed"  # policy's reason for doing nothing
QUIET_OBSERVE = "unchanged (observe mode)"  # the same, in observe mode

SWITCH = "switch"  # the source of a partition switch's evidence (spurinv.inventory.sources.status)

HEX = frozenset("0123456789abcdef")
DIGITS = frozenset("0123456789")
UNPARSED = (1 << 32, 0, 0, 0)  # a PCI address of another spelling sorts last


# bdf_key's answers: a tick asks ~320 times about a dozen addresses (discovery's readers and
# sorts, the state check), and the parse was ~5 k instructions an answer. Bounded: past it, parsed.
_KEYS: "dict[str, tuple[int, int, int, int] | None]" = {}
_KEPT_KEYS = 4096


def bdf_key(bdf: str) -> "tuple[int, int, int, int] | None":
    """``0000:05:00.0`` → ``(0, 5, 0, 0)``: numeric order (a domain can have up to 8 hex digits:
    hwloc 2pa-pcidomain32bits); None for any other spelling (``spurinv.inventory.sources.pci.BDF``'s
    pattern, without ``re``: the tick and ``status --json`` do not import it for this)."""
    if bdf.__class__ is str:
        known = _KEYS.get(bdf, UNPARSED)
        if known is not UNPARSED:
            return known
        key = _bdf_key(bdf)
        if len(_KEYS) < _KEPT_KEYS:
            _KEYS[bdf] = key
        return key
    return _bdf_key(bdf)


def _bdf_key(bdf: str) -> "tuple[int, int, int, int] | None":
    if bdf.endswith("\n"):  # as the pattern's ``$``
        bdf = bdf[:-1]
    parts = bdf.split(":")
    if len(parts) == 3 and len(parts[2]) == 4 and parts[2][2] == ".":
        domain, bus, device, function = parts[0], parts[1], parts[2][:2], parts[2][3]
        if 4 <= len(domain) <= 8 and len(bus) == 2 and set(domain + bus + device) <= HEX and function in "01234567":
            return (int(domain, 16), int(bus, 16), int(device, 16), int(function))
    return None


def device_key(device: "Mapping[str, Any]") -> "tuple[tuple[int, int, int, int], int]":
    """The order of an inventory's devices: PCI address, then partition index."""
    partition = device["partition"]
    return bdf_key(device["pci_bdf"]) or UNPARSED, partition["index"] if partition else 0


def result_problem(ok: bool, inventory: object, errors: object) -> "str | None":
    """A discovery's or a reading's rule: ``ok`` means an inventory and no errors (a failed read
    can never pass for "no GPUs"), and a failure carries its errors."""
    if ok != (inventory is not None) or ok == bool(errors):
        return "ok must mean: an inventory and no errors; a failure must carry its errors"
    return None


def discovery_problem(discovery: "Mapping[str, Any]") -> "str | None":
    """:func:`result_problem`, and no source of a successful discovery failed."""
    problem = result_problem(discovery["ok"], discovery["inventory"], discovery["errors"])
    if problem is None and discovery["ok"] and any(source["status"] == "failed" for source in discovery["sources"].values()):
        return "a discovery with a failed source cannot be ok"
    return problem


def reading_problem(reading: "Mapping[str, Any]") -> "str | None":
    """:func:`result_problem`, and the reading's fingerprint is its inventory's."""
    inventory = reading["inventory"]
    problem = result_problem(reading["ok"], inventory, reading.get("errors"))
    if problem is None and (inventory["fingerprint"] if inventory else None) != reading["fingerprint"]:
        return "fingerprint must be the inventory's"
    return problem


def inventory_problem(
    inventory: "Mapping[str, Any]", keys: "list[tuple[tuple[int, int, int, int], int]] | None" = None
) -> "str | None":
    """An inventory's rule: devices unique by identity and sorted by :func:`device_key`, and the
    fingerprint the one they give (a tampered state file does not pass). ``keys``: the devices'
    :func:`device_key`, when the caller has them already."""
    devices = inventory["devices"]
    ids = [device["id"] for device in devices]
    if len(set(ids)) != len(ids):
        return "duplicate device identity"
    if keys is None:
        keys = [device_key(device) for device in devices]
    if keys != sorted(keys):
        return "devices are not sorted by identity"
    expected = fingerprint(inventory["cpus"], inventory["memory_mb"], devices)
    if inventory["fingerprint"] != expected:
        return f"fingerprint {inventory['fingerprint'][:12]} does not match the devices ({expected[:12]})"
    return None


def switch_only(sources: "Iterable[object]") -> bool:
    """Whether a failed result's errors (given by their ``source``) are all a partition switch's
    evidence, and there is some: a switch in progress, not a failure (a real failure beside a
    switch is a failure)."""
    seen = False
    for source in sources:
        if source != SWITCH:
            return False
        seen = True
    return seen


def gpu_counts(inventory: "Mapping[str, Any] | None") -> "dict[str, int]":
    """Devices per model, e.g. ``{"mi300x": 64}`` (none without an inventory)."""
    counts: dict[str, int] = {}
    for device in inventory["devices"] if inventory else ():
        counts[device["model"]] = counts.get(device["model"], 0) + 1
    return counts


def counted(count: int, noun: str) -> str:
    """``1 spec``, ``2 specs``: a count and its noun, plural unless one."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def summary(inventory: "Mapping[str, Any]") -> str:
    """One line: ``64 devices (mi300x 64), 192 CPUs, 1547 GiB``."""
    models = ", ".join(f"{model} {count}" for model, count in sorted(gpu_counts(inventory).items()))
    devices = f"{counted(len(inventory['devices']), 'device')} ({models})" if inventory["devices"] else "no GPUs"
    return f"{devices}, {inventory['cpus']} CPUs, {inventory['memory_mb']} MiB"


def problem_line(problem: "Mapping[str, Any]") -> str:
    """``kfd: /sys/...: reason``, one line for logs and drain reasons."""
    source, path, reason = problem["source"], problem["path"], problem["reason"]
    return f"{source}: {path}: {reason}" if path else f"{source}: {reason}"


def link_line(link: "Mapping[str, Any]") -> str:
    """``x8 of x16, 32.0 GT/s of 32.0 GT/s``."""
    width, most = link["width"], link["max_width"]
    shown = f"x{width if width is not None else '?'} of x{most if most is not None else '?'}"
    return f"{shown}, {link['speed'] or 'unknown'} of {link['max_speed'] or 'unknown'}"


def accepted_link(found: "Mapping[str, Any]") -> str:
    """How an accepted degraded link is named in the state (``accepted_links``): ``"<BDF> x<width>"``
    for a link as :func:`spurinv.inventory.sources.link.confirmed` gives it."""
    return f"{found['pci_bdf']} x{found['width']}"


def timestamp_problem(value: object) -> "str | None":
    """RFC 3339 as pydantic writes it: ``2026-12-02T18:00:00Z``, optionally ``.123456``, a zone
    ``Z`` or ``+hh:mm``; a real date and time. None when it is one; else why not (anything else,
    even what pydantic might accept, is not vouched for). No ``datetime``: it costs the tick more
    than this."""
    text = value if isinstance(value, str) else ""
    date, _t, rest = text.partition("T")
    clock, zone = (rest[:-1], "Z") if rest.endswith("Z") else (rest[:-6], rest[-6:])
    whole, dot, fraction = clock.partition(".")
    try:
        year, month, day = _numbers(date, "-", (4, 2, 2))
        hour, minute, second = _numbers(whole, ":", (2, 2, 2))
        if zone != "Z":
            if zone[0] not in "+-" or zone[3] != ":":
                raise ValueError(zone)
            offset = _numbers(zone[1:], ":", (2, 2))
            if offset[0] > 23 or offset[1] > 59:
                raise ValueError(zone)
        if dot and not (1 <= len(fraction) <= 6 and set(fraction) <= DIGITS):
            raise ValueError(fraction)
    except (ValueError, IndexError):
        return "not an RFC 3339 timestamp with a zone"
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= days[month - 1] and hour < 24 and minute < 60 and second < 60):
        return "not a valid date and time"
    return None


def stamp(seconds: int) -> str:
    """``2026-12-02T18:00:00Z``: how spurinv writes a time (UTC, whole seconds); :func:`epoch` reads it back."""
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


_FIRST_SECOND = -62135596800  # 0001-01-01T00:00:00Z
PAST_LAST_SECOND = 253402300800  # 10000-01-01T00:00:00Z: no RFC 3339 time is this late


def epoch(text: object) -> "int | None":
    """A time as :func:`stamp` writes it (``2026-12-02T18:00:00Z``; a fraction of a second, dropped)
    → Unix seconds; None for what :func:`timestamp_problem` refuses. spurinv writes UTC only, but
    a hand-edited state file may say ``+02:00``, which the state's model reads as that instant:
    the offset is applied (``-00:00``, RFC 3339's "offset unknown", is UTC), never ignored (hours
    off) nor read as none (the metrics said "no drain" of one that was on). The one reader of
    spurinv's times: ownership and the metrics. Plain arithmetic: ``calendar`` and
    ``time.strptime`` import ``datetime``, ``re`` and ``locale``, some 25 modules the tick would
    load for its metrics."""
    if not isinstance(text, str) or timestamp_problem(text) is not None:
        return None
    offset = 0
    if not text.endswith("Z"):  # timestamp_problem vouched for ``+hh:mm`` or ``-hh:mm``
        offset = (int(text[-5:-3]) * 60 + int(text[-2:])) * 60 * (-1 if text[-6] == "-" else 1)
    # timestamp_problem vouched for the layout: ``YYYY-MM-DDTHH:MM:SS``, ASCII digits, a real date
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    # days since 1970-01-01 in the proleptic Gregorian calendar, counted from March (the leap day
    # last): Howard Hinnant's days_from_civil
    march = year - (month <= 2)
    era, year_of_era = divmod(march, 400)
    day_of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    days = era * 146097 + year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year - 719468
    seconds = ((days * 24 + int(text[11:13])) * 60 + int(text[14:16])) * 60 + int(text[17:19]) - offset
    # an offset may carry a time of the years 1 or 9999 past them: no ``datetime`` holds that
    return seconds if _FIRST_SECOND <= seconds < PAST_LAST_SECOND else None


def _numbers(text: str, separator: str, widths: "tuple[int, ...]") -> "list[int]":
    """``2026-12-02`` with widths (4, 2, 2) → [2026, 12, 2]: fixed widths, ASCII digits only."""
    parts = text.split(separator)
    if len(parts) != len(widths) or any(
        len(part) != width or not set(part) <= DIGITS for part, width in zip(parts, widths, strict=True)
    ):
        raise ValueError(text)
    return [int(part) for part in parts]


def reading(discovery: "Mapping[str, Any]", taken_at: "Any") -> "dict[str, Any]":
    """A discovery result (discovery's dict) as the state file records it: the one builder, which
    ``model.reading`` validates on the full run, and ``ledger.replay`` records on the tick."""
    inventory = discovery["inventory"]
    return {
        "taken_at": taken_at,
        "ok": discovery["ok"],
        "fingerprint": inventory["fingerprint"] if inventory else None,
        "inventory": inventory,
        "errors": list(discovery["errors"]),
        "flags": list(discovery["flags"]),
    }
