"""JSON for the test doubles' programs, without the import cost of the ``json`` package.

``import json`` imports ``re`` and with it ``enum``, ``functools`` and ``collections``: about
12 ms of CPU, more than the interpreter's own start (about 10 ms with ``-S``), in every call of
a double that the suite runs hundreds of times. The C accelerator that ``json`` itself uses does
the work here, set up as ``json`` sets it up: :func:`loads` and :func:`dumps` give what
``json.loads`` and ``json.dumps`` give with their default arguments (tests/test_doubles.py
compares them); any error is the json package's own, raised by it. Not spurinv.jsontext, which
does the same for spurinv: a double must not change with the code under test (scripts/mutate
rewrites that code). Standard library only.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False  # typing's own import costs more than json's: 15 ms
if TYPE_CHECKING:
    from typing import Any

_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_SPACE = " \t\n\r"  # JSON's whitespace, which json.loads skips before and after the value


class _Decoder:
    """The attributes ``_json``'s scanner reads from a default ``json.JSONDecoder``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


# typeshed wants a JSONDecoder: the scanner reads only these attributes, and json.decoder is
# what this module does not import
_scan = _json.make_scanner(_Decoder())  # type: ignore[arg-type]


def loads(text: str | bytes | bytearray) -> Any:
    if not isinstance(text, str):  # json's to read: it finds UTF-8, -16 or -32 in the bytes (a BOM)
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_SPACE))
    try:
        value, end = _scan(text, start)
    except (StopIteration, ValueError, SystemError):
        # SystemError: the scanner raises its JSONDecodeError only once json.decoder is imported
        end = -1
    if end < 0 or text[end:].strip(_SPACE):
        import json  # only on the way to an error: raised as json words it

        return json.loads(text)
    return value


def _unserializable(value: object) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(value: object) -> str:
    # json.dumps's own one-shot path: circular-reference check on (a fresh markers dict), no
    # indent, ", " and ": ", keys unsorted, no key skipped, NaN allowed, ASCII-only output
    encode = _json.make_encoder({}, _unserializable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    return "".join(encode(value, 0))
