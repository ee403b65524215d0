"""Can the lean path vouch for a state file? Stdlib only (hot path).

``status --json`` and the timer's tick read the state file as raw JSON, without pydantic. Both
must never pass on (or rewrite) a file that the full CLI, through :class:`spurinv.state.file.State`,
calls corrupt (exit 65; ``refresh`` moves it aside). So before using a file they ask
:func:`problem`, and anything but None hands over to the full CLI.

The check is the model's own: ``state.schema.json`` next to this module is
the JSON Schema of :data:`spurinv.state.file.ValidState` (written by ``scripts/schemas``;
``tests/test_docs.py`` runs it with ``--check``),
read here by a small checker for the keywords pydantic emits, plus the models' validators
that a JSON Schema cannot say: the rules of :mod:`spurinv.shape`, which
:class:`spurinv.inventory.model.Inventory` and :class:`spurinv.inventory.model.Reading` call too. It is *stricter*
than pydantic's lax mode (``"5"`` is not an integer here, a timestamp must be RFC 3339): a file
it refuses is only handed over, and the full CLI gives the answer. What it accepts, the model
accepts (``tests/test_vouch.py``).
"""

import os

from spurinv import jsontext, shape
from spurinv.inventory.sources.status import has_surrogate
from spurinv.regularfile import read_bounded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    # A compiled check: ``check(value, parent, name)`` (see _at)
    Rule = Callable[[Any, str, str | int | None], None]

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


def problem(state: object, discovered: object = None) -> "str | None":
    """None when the model would accept ``state`` (a parsed state file); else the first reason
    it cannot be vouched for (``readings.0.taken_at: not an RFC 3339 timestamp``).

    ``discovered``: an inventory in ``state`` (this very object) that :func:`as_discovered` found
    to be a fresh discovery's, which passes the inventory's rules: each place that holds it is
    taken as checked, as if its check had just passed; every other value is checked as always."""
    _seen.clear()
    _discovered[0] = discovered
    try:
        return _first(state)
    finally:
        _seen.clear()
        _discovered[0] = None


# An integer of 19 digits or more in the encoder's compact text: each digit read as "0", and
# where an integer can start (a member, an item, after a sign) as "!" (10**18 < 2**63 = BIG).
_DIGITS_AND_STARTS = bytes.maketrans(b"123456789:,[-", b"000000000!!!!")
_LONG = b"!" + b"0" * 19


def as_discovered(texts: "jsontext.Texts", text: str) -> "object | None":
    """The object read from a state file (``texts``: :func:`spurinv.jsontext.loads_shared`'s) whose
    text is ``text``, a fresh discovery's inventory as :func:`spurinv.jsontext.dumps` writes it,
    if the inventory's rules pass for it without a walk; else None (check it).

    Discovery builds every inventory in the model's form (spurinv/inventory/discovery.py: the
    keys, types and choices, devices sorted by :func:`spurinv.shape.device_key` with unique
    identities, canonical PCI addresses, the fingerprint of its devices). Two things it copies
    from the node unbounded are tested here on the text: a lone surrogate (a driver link's name
    that is not UTF-8) is spelled ``\\udXXX``, and an integer past 18 digits (a DRM minor) would
    need its bound checked. ``tests/test_vouch.py`` holds discovery's inventories to this."""
    member = next((member for member, read in texts.values() if read == text), None)
    if member is None or "\\ud" in text:
        return None
    if _LONG in text.encode("ascii").translate(_DIGITS_AND_STARTS):  # the encoder's text is ASCII
        return None
    return member


def _first(state: object) -> "str | None":
    try:
        _validator()(state, "", None)
        if not isinstance(state, dict):  # the schema said so already; this is for the type checker
            return "(top): not an object"
        # the schema says "integer"; the loader (spurinv.state.file._decode) also refuses a version
        # below 1 (corrupt) or above ours (a newer spurinv's file)
        if "schema_version" in state and not 1 <= state["schema_version"] <= shape.SCHEMA_VERSION:
            return f"schema_version: {state['schema_version']} is not a version this spurinv reads"
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


# A compiled check is called as ``check(value, parent, name)``: the value, where its container is
# (``readings.0``), and its key or index there (None for the container itself). The name of the
# place (``readings.0.taken_at``) is spelled out only for a failure or a container: building it for
# every value was a third of the check's time on a tick.
_compiled: "Rule | None" = None
# Rules whose every acceptance is one of these at a glance (a bit each): an ASCII str (no
# surrogate can hide in it), an int within the bounds, None.
_STRING, _INTEGER, _NONE = 1, 2, 4
_SIMPLE: "dict[Rule, int]" = {}
# Definitions a state file holds several equal copies of: the baseline's inventory and the two
# readings' are usually one and the same; each distinct copy is checked once.
REPEATED = frozenset({"Inventory"})
_seen: "dict[str, list[Any]]" = {}
_discovered: "list[object]" = [None]  # problem()'s ``discovered``, for the repeated definitions' checks


def _validator() -> "Rule":
    """The schema compiled once per process into nested checks (a walk of the schema per value
    cost 10 ms on a 64-device state; the compiled checks, about a tenth)."""
    global _compiled  # noqa: PLW0603 — built once per process, and only when a state file is checked
    if _compiled is None:
        # os.open, not open(): the io layer's fstat, ioctl and seeks are five system calls of nine
        fd = os.open(SCHEMA_FILE, os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = read_bounded(fd, BIG, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        root = jsontext.loads(text or b"")
        _compiled = _compile(root, root, {})
    return _compiled


def _at(parent: str, name: object) -> str:
    """Where a value is: ``parent`` itself (None), an item of an array (``readings.0``: an index)
    or a member of an object (``readings.0.taken_at``, ``schema_version`` at the top; a state
    file's keys are text, a caller's dict may hold others)."""
    if name is None:
        return parent
    return f"{parent}.{name}" if parent else str(name)


def _fail(where: str, why: str) -> "Unvouched":
    return Unvouched(f"{where or '(top)'}: {why}")


def _compile(schema: "Mapping[str, Any]", root: "Mapping[str, Any]", defs: "dict[str, Rule]") -> "Rule":
    unknown = set(schema) - KEYWORDS
    if unknown:  # never vouch with a rule half-understood
        raise Unvouched(f"(schema): {sorted(unknown)} unknown to this checker")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in REPEATED:
            return _once(name, root, defs)
        return _definition(name, root, defs)
    if "anyOf" in schema:
        choices = schema["anyOf"]
        if len(choices) == 2 and choices[1] == {"type": "null"}:  # "X | None", pydantic's way
            name = choices[0].get("$ref", "").rsplit("/", 1)[-1]
            if name and name not in defs and name not in REPEATED and len(choices[0]) == 1:
                return _optional_definition(name, root, defs)
            return _optional(_compile(choices[0], root, defs))
        return _any_of([_compile(choice, root, defs) for choice in choices], {"type": "null"} in choices)
    checks: list[Rule] = []
    kind = schema.get("type")
    if kind is not None and kind not in ("array", "object"):  # the container checks test their own type
        checks.append(_type(kind))
    if "enum" in schema:
        choices = list(schema["enum"])

        def enum(value: "Any", parent: str, name: "str | int | None") -> None:
            if value not in choices:
                raise _fail(_at(parent, name), f"{_shown(value)} is not one of {choices}")

        checks.append(enum)
        if kind == "string" and len(checks) == 2 and "format" not in schema:
            return _string_enum(checks[0], enum, frozenset(choice for choice in choices if choice.__class__ is str))
    if "format" in schema:
        if schema["format"] != "date-time":
            raise Unvouched(f"(schema): format {schema['format']} unknown to this checker")
        checks.append(_timestamp)
    if kind == "array":
        items = _compile(schema["items"], root, defs) if "items" in schema else _free
        checks.insert(0, _array(items, schema.get("maxItems")))
    if kind == "object":
        properties = {name: _compile(item, root, defs) for name, item in schema.get("properties", {}).items()}
        checks.insert(0, _object(properties, tuple(schema.get("required", ())), schema.get("additionalProperties", True)))
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks

        def both(value: "Any", parent: str, name: "str | int | None") -> None:
            first(value, parent, name)
            second(value, parent, name)

        return both

    def check(value: "Any", parent: str, name: "str | int | None") -> None:
        for step in checks:
            step(value, parent, name)

    return check


def _anything(value: "Any", parent: str, name: "str | int | None") -> None:
    """A schema with no rule this checker applies (``{}``)."""


def _string_enum(text: "Rule", enum: "Rule", choices: "frozenset[str]") -> "Rule":
    """``type: string`` with an ``enum``: a str that is one of the choices passes both at a glance
    (one call for a device's vendor, not three); anything else gets both checks, in order."""

    def check(value: "Any", parent: str, name: "str | int | None") -> None:
        if value.__class__ is str and value in choices:
            return
        text(value, parent, name)
        enum(value, parent, name)

    return check


def _definition(name: str, root: "Mapping[str, Any]", defs: "dict[str, Rule]") -> "Rule":
    """The rule of the schema's definition ``name``, compiled the first time it is asked for."""
    if name not in defs:  # the state's models do not nest themselves, so this ends
        defs[name] = _compile(root["$defs"][name], root, defs)
    return defs[name]


def _once(name: str, root: "Mapping[str, Any]", defs: "dict[str, Rule]") -> "Rule":
    """A repeated definition's rule, compiled when a value first needs it (as
    :func:`_optional_definition`): a tick whose inventory is the fresh discovery's never does."""
    inventory = name == "Inventory"

    def check(value: "Any", parent: str, where: "str | int | None") -> None:
        seen = _seen.setdefault(name, [])
        if value in seen:  # equal to one checked in this file (a comparison in C): the same answer
            return
        # that one passes (as_discovered); None is no inventory, even when nothing was discovered
        if not (inventory and value is not None and value is _discovered[0]):
            _definition(name, root, defs)(value, parent, where)
        seen.append(value)

    return check


def _optional(rule: "Rule") -> "Rule":
    """``anyOf: [X, {"type": "null"}]``: None, or what X accepts (X's refusal, as :func:`_any_of` says it)."""

    def check(value: "Any", parent: str, name: "str | int | None") -> None:
        if value is not None:
            rule(value, parent, name)

    if rule in _SIMPLE:
        _SIMPLE[check] = _SIMPLE[rule] | _NONE
    return check


def _optional_definition(name: str, root: "Mapping[str, Any]", defs: "dict[str, Rule]") -> "Rule":
    """``anyOf: [{"$ref": name}, {"type": "null"}]``, as :func:`_optional`, with the definition
    compiled when a value first needs it: most such members are None on a tick, and compiling
    them all was half of the compiling. None is accepted without the definition's rule, so no
    verdict changes; a rule this checker does not understand still refuses every value it is
    asked to judge (``tests/test_vouch.py`` compiles every definition of the shipped schema)."""
    rule: Rule | None = None

    def check(value: "Any", parent: str, where: "str | int | None") -> None:
        nonlocal rule
        if value is not None:
            if rule is None:
                rule = _definition(name, root, defs)
            rule(value, parent, where)

    _SIMPLE[check] = _NONE  # None needs no call (a device's link, a tick: 64 calls)
    return check


def _any_of(choices: "list[Rule]", nullable: bool) -> "Rule":
    def check(value: "Any", parent: str, name: "str | int | None") -> None:
        if value is None and nullable:
            return
        refused = None
        for choice in choices:
            try:
                choice(value, parent, name)
            except Unvouched as exc:
                refused = refused or exc  # "X | None": say why it is no X
                continue
            return
        assert refused is not None
        raise refused

    return check


def _type(kind: str) -> "Rule":
    test = KINDS[kind]
    if kind == "string":  # most values: the test spelled out, no call

        def text(value: "Any", parent: str, name: "str | int | None") -> None:
            if not isinstance(value, str) or (not value.isascii() and has_surrogate(value)):
                raise _fail(_at(parent, name), f"{_shown(value)} is not {kind}")

        _SIMPLE[text] = _STRING
        return text
    if kind == "integer":

        def integer(value: "Any", parent: str, name: "str | int | None") -> None:
            if type(value) is not int or not -BIG < value < BIG:
                raise _fail(_at(parent, name), f"{_shown(value)} is not {kind}")

        _SIMPLE[integer] = _INTEGER
        return integer

    def check(value: "Any", parent: str, name: "str | int | None") -> None:
        if not test(value):
            raise _fail(_at(parent, name), f"{_shown(value)} is not {kind}")

    return check


def _at_a_glance(simple: int, item: object) -> bool:
    """Whether ``item`` passes a rule that accepts these kinds at a glance (:data:`_SIMPLE`): an
    integer well within range (not a bool), or None. ASCII text, the common case, the callers
    test inline. False sends the item to its rule, which judges it in full."""
    if type(item) is int:
        return bool(simple & _INTEGER) and -BIG < item < BIG
    return item is None and bool(simple & _NONE)


def _array(items: "Rule", most: "int | None") -> "Rule":
    simple = _SIMPLE.get(items, 0)  # as _object's members: an item accepted at a glance needs no call

    def check(value: "list[Any]", parent: str, name: "str | int | None") -> None:
        if not isinstance(value, list):
            raise _fail(_at(parent, name), f"{_shown(value)} is not array")
        if most is not None and len(value) > most:
            raise _fail(_at(parent, name), f"more than {most} items")
        where = None  # spelled out for the first item that needs a call (a device's names: none)
        for index, item in enumerate(value):
            if simple and ((simple & _STRING and item.__class__ is str and item.isascii()) or _at_a_glance(simple, item)):
                continue  # the common case inline: a call an item cost 0.6 M of a tick
            if where is None:
                where = _at(parent, name)
            items(item, where, index)

    return check


def _object(properties: "dict[str, Rule]", required: "tuple[str, ...]", additional: bool) -> "Rule":
    needed = frozenset(required)
    # Each member's rule, with what it accepts at a glance (:data:`_SIMPLE`): most members are a
    # short ASCII string, an integer or None, accepted here without a call; anything else is
    # the rule's to judge, as it always was.
    table = {field: (_SIMPLE.get(rule, 0), rule) for field, rule in properties.items()}

    def check(value: "dict[Any, Any]", parent: str, name: "str | int | None") -> None:
        if not isinstance(value, dict):
            raise _fail(_at(parent, name), f"{_shown(value)} is not object")
        if not needed <= value.keys():
            for field in required:  # the first one missing, in the schema's order
                if field not in value:
                    raise _fail(_at(_at(parent, name), field), "missing")
        where = None  # spelled out for the first member that needs a call (a partition's: none)
        for key, item in value.items():
            entry = table.get(key)
            if entry is not None:
                simple = entry[0]
                if simple and ((simple & _STRING and item.__class__ is str and item.isascii()) or _at_a_glance(simple, item)):
                    continue  # as in _array
                if where is None:
                    where = _at(parent, name)
                entry[1](item, where, key)
            elif additional is False:
                raise _fail(_at(_at(parent, name), key), "not a field of the state file")
            else:  # a free-form value (the intent's body): only its strings are checked
                _text(key, _at(_at(parent, name), key))
                _text(item, _at(_at(parent, name), key))

    return check


KINDS: "dict[str, Callable[[Any], bool]]" = {
    # json.loads turns "\ud800" into a lone surrogate, which pydantic refuses as a string
    "string": lambda value: isinstance(value, str) and not has_surrogate(value),
    # strict: not a bool, not 5.0, not "5", and within what the model keeps exactly
    "integer": lambda value: type(value) is int and -BIG < value < BIG,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def _free(value: object, parent: str, name: "str | int | None") -> None:
    """An array's items with no schema: only their strings are checked."""
    _text(value, _at(parent, name))


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


def _timestamp(value: object, parent: str, name: "str | int | None") -> None:
    """:func:`spurinv.shape.timestamp_problem`: anything else is handed over, even what pydantic
    might accept."""
    problem = shape.timestamp_problem(value)
    if problem is not None:
        raise _fail(_at(parent, name), f"{_shown(value)} is {problem}")


def _reading(reading: "Mapping[str, Any]", where: str, checked: "list[object]") -> None:
    """:func:`spurinv.shape.reading_problem` (the model's :class:`spurinv.inventory.model.Reading`)."""
    problem = shape.reading_problem(reading)
    if problem is not None:
        raise _fail(where, problem)
    if reading["inventory"] is not None:
        _inventory(reading["inventory"], f"{where}.inventory", checked)


def _inventory(inventory: "Mapping[str, Any]", where: str, checked: "list[object]") -> None:
    """:func:`spurinv.shape.inventory_problem` (the model's :class:`spurinv.inventory.model.Inventory`), and
    PCI addresses in the canonical form discovery writes (any other spelling is handed over)."""
    if inventory in checked:  # equal to one already checked (a comparison in C, no hashing)
        return
    if inventory is _discovered[0]:  # as_discovered: it passes
        checked.append(inventory)
        return
    keys = [shape.device_key(device) for device in inventory["devices"]]
    for device, key in zip(inventory["devices"], keys, strict=True):
        if key[0] == shape.UNPARSED:  # bdf_key said None: no address reaches 1 << 32
            raise _fail(where, f"{_shown(device['pci_bdf'])} is not a PCI address as discovery writes it")
    problem = shape.inventory_problem(inventory, keys)
    if problem is not None:
        raise _fail(where, problem)
    checked.append(inventory)


def _shown(value: object) -> str:
    import json  # only for a message: importing json imports re, which the tick avoids

    return json.dumps(value, ensure_ascii=True, default=str)[:40] if not isinstance(value, dict) else "an object"
