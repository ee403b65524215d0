"""JSON text through CPython's C accelerator (``_json``), without importing the ``json`` package.

``import json`` imports ``re`` and with it ``enum``, ``functools`` and ``collections``: about
8 ms of CPU, a sixth of the timer's no-change tick, for two calls the C scanner and encoder do
on their own anyway. These functions call the same C code ``json.loads``/``json.dumps`` call,
configured as those configure it, so a value they return is the one ``json`` returns. Anything
else (an error, text that is not plain UTF-8 starting with ``{`` or ``[``, an interpreter
without ``_json``) goes to the ``json`` package itself, which raises its own error with its
own message: the fast path never decides a failure.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_c: Any
try:
    import _json as _c
except ImportError:  # another interpreter: the json package does it all
    _c = None

_WHITESPACE = " \t\n\r"  # json.decoder.WHITESPACE
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}  # json.decoder._CONSTANTS


class _Decoder:
    """The attributes ``make_scanner`` reads: those of ``json.JSONDecoder()``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _typeerror(value: object) -> object:
    # json.JSONEncoder.default; only reached on the way to the json package's own error
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_scan = _c.make_scanner(_Decoder()) if _c is not None else None


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``."""
    text: str | None = None
    if _scan is not None:
        if isinstance(data, bytes):
            # json.detect_encoding says UTF-8 for text whose first byte is "{" or "[" and second not NUL
            if data[:1] in (b"{", b"[") and data[1:2] != b"\0":
                text = data.decode("utf-8", "surrogatepass")
        elif data[:1] in ("{", "["):  # no BOM, which json.loads refuses
            text = data
    if text is not None and _scan is not None:
        try:
            value, end = _scan(text, 0)
        except (StopIteration, ValueError, SystemError):
            # SystemError: the scanner raises its JSONDecodeError only once json.decoder is imported
            pass
        else:
            if not text[end:].strip(_WHITESPACE):
                return value
    import json

    return json.loads(data)


def dumps(value: object, *, sort_keys: bool = False) -> str:
    """``json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)``: compact, ASCII."""
    if _c is not None and isinstance(value, str):
        return str(_c.encode_basestring_ascii(value))  # what JSONEncoder.encode does with a str
    if _c is not None:
        encode = _c.make_encoder({}, _typeerror, _c.encode_basestring_ascii, None, ":", ",", sort_keys, False, True)
        try:
            return "".join(encode(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)
