"""The controller's view of one node, whatever the dialect, and GRES strings. Pure.

Dialects (docs/slurm-rest.md §1, docs/spur.md §2):
* Slurm ≤ 22.05 (v0.0.38): ``state`` is a lower-case base state, flags in ``state_flags``;
* Slurm ≥ 23.02 (v0.0.39+): ``state`` is a list, base state first, then flags (``["IDLE","DRAIN"]``);
* spur's gateway: ``state`` is a display word (``idle``, ``drained``, ``draining`` …), no GRES.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spurinv.controller.ownership import changed_at
from spurinv.errors import ControllerError
from spurinv.secret import printable

BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
# spur's node display words (spur-core node.rs) → (base state, flags)
SPUR_WORDS = {
    "drained": ("IDLE", ("DRAIN",)),
    "draining": ("ALLOCATED", ("DRAIN",)),
    "suspended": ("IDLE", ("SUSPENDED",)),
}
# an entry: text and "(S:0,1)" groups, whose commas do not split; possessive, so a hostile
# string costs one pass, not a look-ahead per comma
_ENTRY = re.compile(r"(?:[^,(]++|\([^)]*+\)?)++")
# the binding after an entry's count, "(S:0-1)" or "(IDX:0-1)"; not the "(null)" Slurm prints as
# the type of an untyped GPU in gres_used ("gpu:(null):0(IDX:N/A)", docs/slurm-rest.md)
_BINDING = re.compile(r"\((?!null\))[^()]*\)$")
UNTYPED = "(null)"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    """What the controller says about the node: a value, built from a checked answer only
    (:func:`parse_node`, :func:`parse_spur_nodes`); a step changes it with ``dataclasses.replace``."""

    name: str
    dialect: str
    base: str
    flags: tuple[str, ...] = ()
    reason: str = ""
    reason_set_by: str | None = None
    reason_changed_at: int | None = None  # epoch seconds, when the controller says (Slurm does)
    alloc_cpus: int = 0
    alloc_memory: int = 0
    gres: str | None = None
    gres_used: str | None = None
    extra: str | None = None

    @property
    def drained(self) -> bool:
        """DRAIN is set (drained or draining); decided from the flag, never from the reason."""
        return "DRAIN" in self.flags

    @property
    def idle(self) -> bool:
        """No allocated CPUs, memory or GRES, and not ALLOCATED/MIXED/COMPLETING."""
        return (
            self.base not in BUSY_STATES
            and "COMPLETING" not in self.flags
            and self.alloc_cpus == 0
            and self.alloc_memory == 0
            and used_count(self.gres_used or "") == 0
        )

    @property
    def gpus_used(self) -> int | None:
        """GPUs allocated to jobs, from ``gres_used``; None when the controller does not say.

        Slurm's single-node GET keeps ``alloc_cpus`` and MIXED/ALLOCATED stale after a job ends
        until someone queries all nodes, but its ``gres_used`` follows jobs both ways
        (docs/busy.md), so this needs no all-nodes query.
        """
        if self.gres_used is None:
            return None
        return sum(entry.count for entry in parse_gres(self.gres_used) if entry.name == "gpu")

    @property
    def gpu_busy(self) -> bool:
        """Busy for a GPU change: GPUs allocated. A CPU-only job holds no GPU and does not count
        (docs/busy.md); without GPU usage data, anything that looks busy counts."""
        used = self.gpus_used
        return (not self.idle) if used is None else used > 0

    def busy_text(self) -> str:
        """What keeps the node busy, for people: ``2 CPUs, gpu:mi300x:2 allocated``."""
        parts = [f"{self.alloc_cpus} CPUs"] if self.alloc_cpus else []
        if self.alloc_memory:
            parts.append(f"{self.alloc_memory} MB")
        if used_count(self.gres_used or ""):
            parts.append(self.gres_used or "")
        return ", ".join(parts) + " allocated" if parts else self.base.lower()


def slurm_errors(body: object) -> list[tuple[int | None, str]]:
    """``[(error_number, message)]`` from a Slurm error body (``errno`` on 22.05)."""
    if not isinstance(body, dict) or not isinstance(body.get("errors"), list):
        return []
    result = []
    for error in body["errors"]:
        if isinstance(error, dict):
            number = error.get("error_number", error.get("errno"))
            message = error.get("description") or error.get("error") or ""
            detail = error.get("error")
            if detail and detail not in (message, "No error"):
                message = f"{message}: {detail}" if message else str(detail)
            result.append((number if isinstance(number, int) else None, str(message)))
    return result


def parse_node(body: object, name: str) -> NodeView:
    """Parse a ``GET …/node/{name}`` body; raise ControllerError("unknown-node" / "protocol")."""
    if not isinstance(body, dict):
        raise ControllerError("protocol", "node response is not a JSON object")
    nodes = body.get("nodes")
    if nodes is None and isinstance(body.get("node"), dict):
        nodes = [body["node"]]
    if nodes is None or nodes == []:
        # 22.05 answers 500 with error 2018; 24.11+ answers 200 with no nodes and an error
        # "Failure to query node X" (error_number 0): docs/slurm-rest.md §1.
        errors = slurm_errors(body)
        if errors or nodes == []:
            detail = errors[0][1] if errors else "no such node"
            raise ControllerError("unknown-node", f"the controller does not know node {name!r} ({detail})")
        raise ControllerError("protocol", "node response has no 'nodes'")
    if not isinstance(nodes, list):
        raise ControllerError("protocol", "'nodes' is not a list")
    node = next((n for n in nodes if isinstance(n, dict) and n.get("name") == name), None)
    if node is None:
        raise ControllerError("unknown-node", f"the controller does not list node {name!r}")
    try:
        return _view(node, name)
    except (TypeError, ValueError, KeyError, OverflowError) as exc:  # 1e999 is an infinite float
        raise ControllerError("protocol", f"node {name!r} has an unexpected shape: {exc}") from None


def node_state(node: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """``(dialect, base state, flags)`` of one node dict in any dialect; ValueError if ``state`` is unusable."""
    state = node.get("state")
    if isinstance(state, list):
        words = _words(state, "state")
        return "slurm-v0.0.39+", (words[0] if words else "UNKNOWN"), tuple(words[1:])
    if isinstance(state, str) and "state_flags" in node:
        return "slurm-v0.0.38", state.upper(), tuple(_words(node["state_flags"], "state_flags"))
    if isinstance(state, str):
        base, flags = SPUR_WORDS.get(state.lower(), (state.upper(), ()))
        return "spur", base, flags
    raise ValueError(f"state is {type(state).__name__}")


def _words(value: object, field: str) -> list[str]:
    """A list of state words, upper case. Anything else is no answer to read: a string would be
    read letter by letter ("DRAIN" as the flags D, R, A, I, N), a number would become a word."""
    if not isinstance(value, list):
        raise ValueError(f"{field} is {type(value).__name__}, not a list")
    for word in value:
        if not isinstance(word, str):
            raise ValueError(f"{field} holds {type(word).__name__} {str(word)[:20]!r}, not a word")
    return [word.upper() for word in value]


def _view(node: dict[str, Any], name: str) -> NodeView:
    dialect, base, flags = node_state(node)
    reason = str(node.get("reason") or "")
    when = changed_at(node.get("reason_changed_at"))
    cpus, memory = _count(node, "alloc_cpus"), _count(node, "alloc_memory")
    # checked last: a node with several bad fields is reported by the first of the others, one error a node
    set_by = _set_by(node.get("reason_set_by_user"))
    return NodeView(
        name=name,
        dialect=dialect,
        base=base,
        flags=flags,
        reason=reason,
        reason_set_by=set_by,
        reason_changed_at=when,
        alloc_cpus=cpus,
        alloc_memory=memory,
        gres=node["gres"] if isinstance(node.get("gres"), str) else None,
        gres_used=node["gres_used"] if isinstance(node.get("gres_used"), str) else None,
        extra=node["extra"] if isinstance(node.get("extra"), str) else None,
    )


def _set_by(value: object) -> str | None:
    """Who set the reason: text, or None for none; anything else is a field error naming it."""
    if not value:
        return None
    if isinstance(value, str):
        return value
    raise ValueError(f"reason_set_by_user: {type(value).__name__} is no text")


def _count(node: dict[str, Any], field: str) -> int:
    """A count the controller sent: a JSON number, or digits; anything else is a field error
    naming the field (``int()`` of 5,000 digits raises, 1e999 is an infinite float)."""
    value = node.get(field) or 0
    if isinstance(value, str) and len(value.strip()) > 18:
        raise ValueError(f"{field}: {len(value.strip())} characters is no count")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        shown = repr(value)[:20] if isinstance(value, (str, float)) else type(value).__name__
        raise ValueError(f"{field}: {shown} is no count") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Gres:
    """One GRES entry: ``gpu:mi300x:8(S:0-1)``."""

    name: str
    type: str | None
    count: int
    text: str


def split_gres(text: str) -> list[str]:
    """The entries of a Slurm GRES string as listed, bindings kept: commas inside ``(S:0,1)`` do
    not split; blanks and Slurm's ``(null)`` are no entry."""
    items = (raw.strip() for raw in _ENTRY.findall(text))
    return [item for item in items if item and item != "(null)"]


def unbound(entry: str) -> str:
    """One GRES entry without its binding: ``gpu:mi300x:8(S:0-1)`` → ``gpu:mi300x:8``,
    ``gpu:(null):2(IDX:0-1)`` → ``gpu:(null):2``."""
    return _BINDING.sub("", entry.strip()).rstrip()  # "fpga:4 (S:0)" is "fpga:4": a blank before the binding


def parse_gres(text: str) -> list[Gres]:
    """Split a Slurm GRES string into entries (:func:`split_gres`) and read each one."""
    entries = []
    for item in split_gres(text):
        parts = unbound(item).split(":")
        count = 1
        if len(parts) > 1 and parts[-1].isdigit():
            # "²".isdigit() is true but int("²") raises; a count of 19+ digits is no GPU count
            if not parts[-1].isascii() or len(parts[-1]) > 18:
                raise ControllerError("protocol", f"GRES entry {item[:40]!r} has a malformed count")
            count = int(parts.pop())
        if parts[0] == "gpu" and (len(parts) > 2 or (any(c in parts[-1] for c in "()") and parts[-1] != UNTYPED)):
            # "gpu:a:x", "gpu:a:2(null)", "gpu:a:4(S:0-1": no GPU count can be read from it, and a
            # guess (1) would move the node's inventory or call it busy
            raise ControllerError("protocol", f"GRES entry {item[:40]!r} is not gpu[:type][:count]")
        kind = parts[1] if len(parts) > 1 and parts[1] != UNTYPED else None
        entries.append(Gres(name=parts[0], type=kind, count=count, text=item))
    return entries


def used_count(text: str) -> int:
    """Total count in a ``gres_used`` string: ``gpu:mi300x:2(IDX:0-1),fpga:0`` → 2."""
    return sum(entry.count for entry in parse_gres(text))


def gpu_counts(text: str) -> dict[str | None, int]:
    """GPU counts by type in a GRES string (``None`` for untyped)."""
    counts: dict[str | None, int] = {}
    for entry in parse_gres(text):
        if entry.name == "gpu" and entry.count:
            counts[entry.type] = counts.get(entry.type, 0) + entry.count
    return counts


def rebuild_gres(current: str, models: dict[str, int]) -> str:
    """The complete GRES string for the node: GPU entries rebuilt from ``models``, the rest kept.

    A GRES left out of an update is set to 0 by Slurm (docs/slurm-rest.md §2: ``{"gres":"fpga:4"}``
    zeroed the GPUs), so every other entry is sent back exactly as listed. The controller's
    typing convention is kept: untyped ``gpu:4`` stays untyped (a type change is silently not
    applied by Slurm anyway).
    """
    entries = parse_gres(current)
    gpus = [entry for entry in entries if entry.name == "gpu"]
    typed = any(entry.type for entry in gpus) or not gpus
    if typed:
        rebuilt = [f"gpu:{model}:{count}" for model, count in sorted(models.items()) if count]
    else:
        total = sum(models.values())
        rebuilt = [f"gpu:{total}"] if total else []
    result: list[str] = []
    for entry in entries:
        if entry.name != "gpu":
            result.append(unbound(entry.text))
        elif rebuilt:
            result.extend(rebuilt)
            rebuilt = []
    result.extend(rebuilt)
    return ",".join(result)


def unsendable_gres(current: str) -> str | None:
    """The first entry :func:`rebuild_gres` would send back that does not round-trip: text read
    with U+FFFD (bytes that were not UTF-8, a lone surrogate) is not what the controller holds.
    GPU entries are rebuilt from the inventory, so only the others count."""
    if "\ufffd" not in current:
        return None
    return next((entry.text for entry in parse_gres(current) if entry.name != "gpu" and "\ufffd" in entry.text), None)


def gres_agrees(current: str | None, models: dict[str, int]) -> bool:
    """Does the controller's GPU GRES say what the inventory says?"""
    if current is None:
        return False
    counts = gpu_counts(current)
    if None in counts and len(counts) == 1:
        return counts[None] == sum(models.values())
    return counts == {model: count for model, count in models.items() if count}


# spur's `scontrol show node` text (ROCm/spur crates/spur-cli/src/scontrol.rs at 4cc3da8, `show`):
# "NodeName=n1", then indented "State=WORD Reason=<free text to the end of the line>" and
# "Key=value" lines; `Gres=gpu:TYPE:1,…` has one entry per GPU and is left out with no GPUs.
SPUR_KEYS = ("Partitions=", "CPUTot=", "Gres=", "Arch=", "Labels=", "ActiveReservation=", "CpuLoad=")
_SPUR_STATE = re.compile(r"^State=(\S*) Reason=(.*)$")
_LOOKS_LIKE_KEY = re.compile(r"^\s*[A-Za-z][A-Za-z_]*=")
_SPUR_CPUALLOC = re.compile(r"(?:^| )CPUAlloc=(\d{1,9})(?: |$)")


def parse_spur_nodes(text: str, only: str | None = None) -> list[NodeView]:
    """Every node block in spur's ``scontrol show node`` output (none for an unknown node).

    ``only``: the one node asked for; a second block can then only come from text in a reason.
    """
    lines = text.split("\n")
    if only is not None and (blocks := sum(line.startswith("NodeName=") for line in lines)) > 1:
        raise _ambiguous(only, f"{blocks} node blocks for one node")
    views: list[NodeView] = []
    block: list[str] | None = None
    for line in [*lines, "NodeName="]:
        if line.startswith("NodeName="):
            if block is not None:
                views.append(_spur_view(block))
            block = [line]
        elif block is not None:
            block.append(line)
    names = [view.name for view in views]
    if len(set(names)) != len(names):  # a reason's line break followed by "NodeName=…"
        twice = next(name for name in names if names.count(name) > 1)
        raise _ambiguous(twice, "the node is listed twice")
    return views


def _ambiguous(name: str, why: str) -> ControllerError:
    """spur prints a reason as it is, line breaks included: text after one that reads as spur's
    own lines cannot be told from them, so the answer is not read at all (never a guess)."""
    return ControllerError(
        "protocol", f"spur's scontrol output for node {name!r} is ambiguous ({why}; a reason holding a line break?): not read"
    )


def _spur_view(block: list[str]) -> NodeView:
    name = block[0].removeprefix("NodeName=").strip()
    if not name:
        raise ControllerError("protocol", "spur's scontrol printed a node block without a name")
    state = _SPUR_STATE.match(block[1].lstrip(" ")) if len(block) > 1 else None
    if state is None:
        raise ControllerError("protocol", f"spur's scontrol printed no 'State=… Reason=…' line for node {name!r}")
    word, reason = state.group(1).upper(), state.group(2)
    fields: dict[str, str] = {}
    continued = True  # lines before the first known key continue a multi-line reason
    last = -1  # spur prints its keys once each, in SPUR_KEYS order (scontrol.rs `show`)
    for line in block[2:]:
        stripped = line.strip()
        if stripped.startswith(SPUR_KEYS):
            continued = False
            key, _, value = stripped.partition("=")
            order = next(index for index, known in enumerate(SPUR_KEYS) if stripped.startswith(known))
            if order <= last:
                raise _ambiguous(name, f"{key}= out of spur's order or twice")
            last = order
            fields[key] = value
        elif continued and line:
            if _LOOKS_LIKE_KEY.match(line) or _SPUR_STATE.match(stripped):
                raise _ambiguous(name, f"a reason line that reads as a field: {printable(stripped[:40])!r}")
            reason += "\n" + line
    # "idle" rests on CPUAlloc (spur shows no GPU allocation): without it the node is not idle
    cpus = _SPUR_CPUALLOC.search("CPUTot=" + fields["CPUTot"]) if "CPUTot" in fields else None
    if cpus is None:
        raise ControllerError("protocol", f"spur's scontrol printed no CPUAlloc= for node {name!r}")
    # a later spur composes the word as Slurm does (DRAINED+RESERVED, IDLE+MAINTENANCE+RESERVED):
    # the first part is the state, the rest are flags
    word, *overlay = word.split("+")
    base, flags = SPUR_WORDS.get("drained" if word == "DRAIN" else word.lower(), (word or "UNKNOWN", ()))
    flags = (*flags, *(part for part in overlay if part))
    return NodeView(
        name=name,
        dialect="spur-scontrol",
        base=base,
        flags=flags,
        reason=reason,
        alloc_cpus=int(cpus.group(1)),
        # spur prints no Gres= line for a node without GPUs: that is "no GPUs", not "unknown"
        gres=fields.get("Gres", ""),
    )
