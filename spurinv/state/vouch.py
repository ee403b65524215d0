"""Can the lean path vouch for a state file? Stdlib only (hot path).

``status --json`` and the timer's tick read the state file as raw JSON, without pydantic. Both
must never pass on (or rewrite) a file that the full CLI, through :class:`spurinv.state.file.State`,
calls corrupt (exit 65; ``refresh`` moves it aside). So before using a file they ask
:func:`problem`, and anything but None hands over to the full CLI.

The check is the model's own: ``state.schema.json`` next to this module is
``State.model_json_schema()`` (written by ``scripts/schemas`` from the model;
``tests/test_docs.py`` runs it with ``--check``),
read here by a small checker for the keywords pydantic emits, plus the models' validators
that a JSON Schema cannot say: the rules of :mod:`spurinv.shape`, which
:class:`spurinv.inventory.model.Inventory` and :class:`spurinv.inventory.model.Reading` call too. It is *stricter*
than pydantic's lax mode (``"5"`` is not an integer here, a timestamp must be RFC 3339): a file
it refuses is only handed over, and the full CLI gives the answer. What it accepts, the model
accepts (``tests/test_vouch.py``).
"""

from __future__ import annotations

import os

from spurinv import jsontext, shape
from spurinv.inventory.sources.status import has_surrogate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state.schema.json")
# No re, no datetime: on ``status --json`` importing them cost more than the whole check
# (spurinv.shape's rules use neither).
BIG = 1 << 63
# The keywords this checker understands; a schema using any other (a bound added to the model
# later) is never vouched for until the checker learns it.
KEYWORDS = frozenset({"$defs", "$ref", "additionalProperties", "anyOf", "enum", "format", "items", "maxItems", "properties",
                      "required", "type"})  # fmt: skip


class Unvouched(Exception):
    """Where and why the lean path cannot vouch for the file."""


def problem(state: object) -> str | None:
    """None when the model would accept ``state`` (a parsed state file); else the first reason
    it cannot be vouched for (``readings.0.taken_at: not an RFC 3339 timestamp``)."""
    _seen.clear()
    try:
        return _first(state)
    finally:
        _seen.clear()


def _first(state: object) -> str | None:
    try:
        _validator()(state, "")
        if not isinstance(state, dict):  # the schema said so already; this is for the type checker
            return "(top): not an object"
        checked: list[object] = []  # the readings and the baseline usually hold one inventory three times
        for index, reading in enumerate(state.get("readings") or ()):
            _reading(reading, f"readings.{index}", checked)
        if state.get("baseline") is not None:
            _inventory(state["baseline"]["inventory"], "baseline.inventory", checked)
    except Unvouched as exc:
        return str(exc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        return f"(unexpected shape: {type(exc).__name__})"
    except OSError as exc:  # the schema file is missing from the installation: vouch for nothing
        return f"{SCHEMA_FILE}: {exc.strerror}"
    return None


_compiled: Callable[[Any, str], None] | None = None
# Definitions a state file holds several equal copies of: the baseline's inventory and the two
# readings' are usually one and the same; each distinct copy is checked once.
REPEATED = frozenset({"Inventory"})
_seen: dict[str, list[Any]] = {}


def _validator() -> Callable[[Any, str], None]:
    """The schema compiled once per process into nested checks (a walk of the schema per value
    cost 10 ms on a 64-device state; the compiled checks, about a tenth)."""
    global _compiled  # noqa: PLW0603 — built once per process, and only when a state file is checked
    if _compiled is None:
        with open(SCHEMA_FILE, "rb") as handle:
            root = jsontext.loads(handle.read())
        _compiled = _compile(root, root, {})
    return _compiled


def _fail(where: str, why: str) -> Unvouched:
    return Unvouched(f"{where or '(top)'}: {why}")


def _compile(
    schema: Mapping[str, Any], root: Mapping[str, Any], defs: dict[str, Callable[[Any, str], None]]
) -> Callable[[Any, str], None]:
    unknown = set(schema) - KEYWORDS
    if unknown:  # never vouch with a rule half-understood
        raise Unvouched(f"(schema): {sorted(unknown)} unknown to this checker")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in defs:  # the state's models do not nest themselves, so this ends
            defs[name] = _compile(root["$defs"][name], root, defs)
        return _once(name, defs[name]) if name in REPEATED else defs[name]
    if "anyOf" in schema:
        return _any_of([_compile(choice, root, defs) for choice in schema["anyOf"]], {"type": "null"} in schema["anyOf"])
    checks: list[Callable[[Any, str], None]] = []
    kind = schema.get("type")
    if kind is not None:
        checks.append(_type(kind))
    if "enum" in schema:
        choices = list(schema["enum"])

        def enum(value: Any, where: str) -> None:
            if value not in choices:
                raise _fail(where, f"{_shown(value)} is not one of {choices}")

        checks.append(enum)
    if "format" in schema:
        if schema["format"] != "date-time":
            raise Unvouched(f"(schema): format {schema['format']} unknown to this checker")
        checks.append(_timestamp)
    if kind == "array":
        checks.append(_array(_compile(schema["items"], root, defs) if "items" in schema else _text, schema.get("maxItems")))
    if kind == "object":
        properties = {name: _compile(item, root, defs) for name, item in schema.get("properties", {}).items()}
        checks.append(_object(properties, tuple(schema.get("required", ())), schema.get("additionalProperties", True)))

    def check(value: Any, where: str) -> None:
        for step in checks:
            step(value, where)

    return checks[0] if len(checks) == 1 else check


def _once(name: str, rule: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    def check(value: Any, where: str) -> None:
        seen = _seen.setdefault(name, [])
        if value in seen:  # equal to one checked in this file (a comparison in C): the same answer
            return
        rule(value, where)
        seen.append(value)

    return check


def _any_of(choices: list[Callable[[Any, str], None]], nullable: bool) -> Callable[[Any, str], None]:
    def check(value: Any, where: str) -> None:
        if value is None and nullable:
            return
        refused = None
        for choice in choices:
            try:
                choice(value, where)
            except Unvouched as exc:
                refused = refused or exc  # "X | None": say why it is no X
                continue
            return
        assert refused is not None
        raise refused

    return check


def _type(kind: str) -> Callable[[Any, str], None]:
    test = KINDS[kind]

    def check(value: Any, where: str) -> None:
        if not test(value):
            raise _fail(where, f"{_shown(value)} is not {kind}")

    return check


def _array(items: Callable[[Any, str], None], most: int | None) -> Callable[[Any, str], None]:
    def check(value: list[Any], where: str) -> None:
        if most is not None and len(value) > most:
            raise _fail(where, f"more than {most} items")
        for index, item in enumerate(value):
            items(item, f"{where}.{index}")

    return check


def _object(
    properties: dict[str, Callable[[Any, str], None]], required: tuple[str, ...], additional: bool
) -> Callable[[Any, str], None]:
    def check(value: dict[Any, Any], where: str) -> None:
        prefix = f"{where}." if where else ""
        for name in required:
            if name not in value:
                raise _fail(prefix + name, "missing")
        for name, item in value.items():
            rule = properties.get(name)
            if rule is not None:
                rule(item, prefix + str(name))
            elif additional is False:
                raise _fail(prefix + str(name), "not a field of the state file")
            else:  # a free-form value (the intent's body): only its strings are checked
                _text(name, prefix + str(name))
                _text(item, prefix + str(name))

    return check


KINDS: dict[str, Callable[[Any], bool]] = {
    # json.loads turns "\ud800" into a lone surrogate, which pydantic refuses as a string
    "string": lambda value: isinstance(value, str) and not has_surrogate(value),
    # strict: not a bool, not 5.0, not "5", and within what the model keeps exactly
    "integer": lambda value: type(value) is int and -BIG < value < BIG,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def _text(value: object, where: str) -> None:
    """Every string inside a free-form value must be valid Unicode (no lone surrogate)."""
    if isinstance(value, str):
        if has_surrogate(value):
            raise _fail(where, "not valid Unicode")
    elif isinstance(value, list):
        for item in value:
            _text(item, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            _text(key, where)
            _text(item, where)


def _timestamp(value: object, where: str) -> None:
    """:func:`spurinv.shape.timestamp_problem`: anything else is handed over, even what pydantic
    might accept."""
    problem = shape.timestamp_problem(value)
    if problem is not None:
        raise _fail(where, f"{_shown(value)} is {problem}")


def _reading(reading: Mapping[str, Any], where: str, checked: list[object]) -> None:
    """:func:`spurinv.shape.reading_problem` (the model's :class:`spurinv.inventory.model.Reading`)."""
    problem = shape.reading_problem(reading)
    if problem is not None:
        raise _fail(where, problem)
    if reading["inventory"] is not None:
        _inventory(reading["inventory"], f"{where}.inventory", checked)


def _inventory(inventory: Mapping[str, Any], where: str, checked: list[object]) -> None:
    """:func:`spurinv.shape.inventory_problem` (the model's :class:`spurinv.inventory.model.Inventory`), and
    PCI addresses in the canonical form discovery writes (any other spelling is handed over)."""
    if inventory in checked:  # equal to one already checked (a comparison in C, no hashing)
        return
    for device in inventory["devices"]:
        if shape.bdf_key(device["pci_bdf"]) is None:
            raise _fail(where, f"{_shown(device['pci_bdf'])} is not a PCI address as discovery writes it")
    problem = shape.inventory_problem(inventory)
    if problem is not None:
        raise _fail(where, problem)
    checked.append(inventory)


def _shown(value: object) -> str:
    import json  # only for a message: importing json imports re, which the tick avoids

    return json.dumps(value, ensure_ascii=True, default=str)[:40] if not isinstance(value, dict) else "an object"
