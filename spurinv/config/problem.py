"""Configuration problems in an operator's words, every one at once.

pydantic reports what failed in its own vocabulary ("Extra inputs are not permitted", "Input
should be a valid dictionary or instance of ControllerSection"). Here each error becomes one
line ``WHERE: key: what is wrong; expected …``, where WHERE is the file or the command-line flag
the value came from. The expectations are read from the models (annotation, bounds, literal
choices), so keys added to a section later are described without touching this module.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from spurinv.secret import blank, blank_argv

TOML_TYPES = {str: "a string", bool: "a boolean", int: "an integer", float: "a float", list: "an array", dict: "a table"}


def toml_type(value: Any) -> str:
    """What a TOML reader would call ``value`` (``5`` is an integer, ``"x"`` a string)."""
    for kind, name in TOML_TYPES.items():
        if type(value) is kind:
            return name
    return "a " + type(value).__name__


def literal(value: Any) -> str:
    """``value`` as it would be written in TOML (strings quoted, booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # escaped (as TOML allows) so no control or line-separator character breaks the line
        return json.dumps(blank(value[:80]))  # an error echoes the value: never a credential in it
    if isinstance(value, (list, tuple)):
        shown = blank_argv(list(value)) if all(isinstance(item, str) for item in value) else value  # ["--token", "x"]
        return "[" + ", ".join(literal(item) for item in shown) + "]"
    if isinstance(value, dict):
        return "a table"
    return str(value)[:80]


def name(text: str) -> str:
    """A key or table name as TOML would need it written (bare when it can be)."""
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else json.dumps(text[:80])


def expectation(info: FieldInfo) -> str:
    """``a number >= 0 and <= 300``, ``one of "none", "bearer"``, … from the field itself."""
    annotation = info.annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(literal(choice) for choice in typing.get_args(annotation))
    if origin in (tuple, list):
        return "an array of strings" if str in typing.get_args(annotation) else "an array"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(
            expectation(FieldInfo(annotation=arg)) for arg in typing.get_args(annotation) if arg is not type(None)
        )
    names: dict[object, str] = {str: "a string", bool: "true or false", int: "a whole number", float: "a number"}
    words = names.get(annotation, "a value")
    bounds = []
    for rule in info.metadata:
        for attribute, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            if isinstance(rule, getattr(annotated_types, attribute.capitalize())):
                bounds.append(f"{sign} {getattr(rule, attribute):g}")
    return f"{words} {' and '.join(bounds)}" if bounds else words


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


class Problems:
    """Turns a :class:`ValidationError` of ``model`` (sections of fields) into lines."""

    def __init__(self, model: type[BaseModel], path: str, origins: dict[str, str], flags: dict[str, str]) -> None:
        self.sections: dict[str, type[BaseModel]] = {
            name: info.annotation  # type: ignore[misc]
            for name, info in model.model_fields.items()
        }
        self.path = path
        self.origins = origins
        self.flags = flags

    def where(self, dotted: str) -> str:
        """The file, or ``--flag`` when the value came from the command line."""
        if self.origins.get(dotted) == "command line":
            return self.flags.get(dotted, "command line")
        return self.path

    def lines(self, error: ValidationError) -> list[tuple[str, str]]:
        """``(origin, line)`` per problem, in the file's order of sections and keys."""
        found: list[tuple[str, str]] = []
        seen: set[tuple[str, ...]] = set()
        for item in error.errors():
            loc = tuple(name(str(part)) for part in item["loc"])
            if loc[:2] in seen:  # one line per key (a list with two bad items is one problem)
                continue
            seen.add(loc[:2])
            dotted = ".".join(loc[:2])
            where = self.where(dotted)
            found.append((self.origins.get(dotted, "file"), f"{where}: {self._describe(loc, item)}"))
        return found

    def _describe(self, loc: tuple[str, ...], item: Any) -> str:
        kind, value = item["type"], item["input"]
        if len(loc) == 1:
            return self._top(loc[0], kind, value)
        section, key = loc[0], loc[1]
        model = self.sections[section]
        if kind == "extra_forbidden":
            known = list(model.model_fields)
            return f"{section}.{key}: unknown key in [{section}]{_suggest(key, known)} (known: {', '.join(known)})"
        info = model.model_fields[key]
        expected = expectation(info)
        if kind == "value_error":  # our validators say what they expect
            reason = str(item["ctx"]["error"])
            shown = literal(value[int(loc[2])]) if len(loc) > 2 and isinstance(value, (list, tuple)) else literal(value)
            if reason.startswith("expected "):
                return f"{section}.{key}: {shown} is not valid; {reason}"
            return f"{section}.{key}: {reason}"
        if len(loc) > 2:
            return f"{section}.{key}: item {int(loc[2]) + 1} is {toml_type(value)} ({literal(value)}); expected {expected}"
        if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            return f"{section}.{key}: {literal(value)} is out of range; expected {expected}"
        if kind == "literal_error":
            return f"{section}.{key}: {literal(value)} is not allowed; expected {expected}"
        if kind == "finite_number":  # inf or nan: refused in every number field
            return f"{section}.{key}: {literal(value)} is not a finite number; expected {expected}"
        if kind == "int_from_float" or (kind == "int_type" and isinstance(value, float) and not value.is_integer()):
            return f"{section}.{key}: {literal(value)} has a fraction; expected {expected}"
        if kind.endswith("_parsing"):
            return f"{section}.{key}: {literal(value)} is not {expected.split(' >')[0].split(' <')[0]}; expected {expected}"
        if kind.endswith("_type"):
            return f"{section}.{key}: {literal(value)} is {toml_type(value)}; expected {expected}"
        return f"{section}.{key}: {literal(value)} is not valid ({item['msg']}); expected {expected}"

    def _top(self, name: str, kind: str, value: Any) -> str:
        if kind == "extra_forbidden" and isinstance(value, dict):
            return f"[{name}]: unknown table{_suggest(name, list(self.sections))} (known: {', '.join(self.sections)})"
        if kind == "extra_forbidden":
            owners = [section for section, model in self.sections.items() if name in model.model_fields]
            hint = f"; did you mean to put it under [{owners[0]}]?" if owners else _suggest(name, list(self.sections))
            return f"{name}: a key outside any table{hint}"
        keys = ", ".join(self.sections[name].model_fields) if name in self.sections else ""
        return f"[{name}]: {literal(value)} is {toml_type(value)}; expected a table with keys {keys}"
