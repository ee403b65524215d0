"""JSON text through CPython's C accelerator (``_json``), without importing the ``json`` package.

``import json`` imports ``re`` and with it ``enum``, ``functools`` and ``collections``: about
8 ms of CPU, a sixth of the timer's no-change tick, for two calls the C scanner and encoder do
on their own anyway. These functions call the same C code ``json.loads``/``json.dumps`` call,
configured as those configure it, so a value they return is the one ``json`` returns. Anything
else (an error, text that is not plain UTF-8 starting with ``{`` or ``[``, an interpreter
without ``_json``) goes to the ``json`` package itself, which raises its own error with its
own message: the fast path never decides a failure.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Texts = dict[int, tuple[object, str]]  # id of an object -> (the object, the text it was read from)

_c: "Any"
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


_scan: "Any" = _c.make_scanner(_Decoder()) if _c is not None else None


def loads(data: "bytes | str") -> "Any":
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
        # No markers (json's check_circular): a cycle is a RecursionError here and json's own
        # ValueError below, as with them; keeping them cost a dict entry for every container.
        encode = _c.make_encoder(None, _typeerror, _c.encode_basestring_ascii, None, ":", ",", sort_keys, False, True)
        try:
            return "".join(encode(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass
    import json

    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)


# The state file holds its inventory up to three times, verbatim (two readings and the
# baseline): the two functions below read and write each repeat once. Containers this many
# levels deep or less are walked here, one member at a time; anything deeper is one call of
# the C scanner or encoder, as above.
_WALKED = 3
# Bounds on the work done here rather than in C, whatever the file: members and items walked
# (the state has some forty; past this, loads/dumps do it all), and distinct texts kept to
# compare a repeat with (each comparison stops where the texts differ, and a repeat's text is
# consumed, so a text is compared at most once a kept text: linear in the file).
_MEMBERS = 1024
_KEPT = 4
# Whitespace between the walked tokens is skipped here one character at a time (json skips it in
# C): an indented state has a few hundred such characters, a hostile one megabytes.
_SPACES = 1 << 16


def loads_shared(data: bytes, key: str, texts: "Texts | None" = None, known: "tuple[str, Any] | None" = None) -> "Any":
    """``json.loads(data)``, where an object under ``key`` whose text repeats an earlier one's
    byte for byte is parsed once: the repeat *is* the earlier object (callers must not change
    either in place). An object's text is self-delimiting, so the C scanner would read the repeat
    the same way to the same end. Anything unusual is :func:`loads`'s, which decides.

    ``texts``, if given, gets the text each such object was read from, for :func:`dumps_shared`
    (valid while the objects stay as they were read).

    ``known``: a text :func:`dumps` wrote and the value it wrote it for, made of dicts with
    string keys, lists, strings, integers, bools and None only (the caller's word), which that
    text reads back as, type for type and key for key: an object under ``key`` with that very
    text *is* that value, not parsed at all."""
    if _scan is None or _c is None or data[:1] not in (b"{", b"[") or data[1:2] == b"\0":
        return loads(data)
    text = data.decode("utf-8", "surrogatepass")
    seen: list[tuple[str, Any]] = [known] if known is not None else []
    try:
        value, end = _walk(text, 0, 0, key, seen, [_MEMBERS, _SPACES])
    except (StopIteration, ValueError, SystemError, IndexError, RecursionError, _Unusual):
        return loads(data)  # its own error, or its own answer
    if text[end:].strip(_WHITESPACE):
        return loads(data)
    if texts is not None:
        texts.update((id(member), (member, read)) for read, member in seen)
    return value


def last_member(data: bytes, name: str) -> "Any":
    """The value after the last ``"name":`` in ``data``, as the scanner reads it there, or None.
    A guess (those bytes may sit in a nested object) for the caller to check against the document
    read in full; the document's own last member of that name, in a file :func:`dumps` wrote."""
    start = data.rfind(b'"' + name.encode() + b'":')
    if _scan is None or start < 0:
        return None
    try:  # a quote starts a character in UTF-8: the tail decodes as it does in the whole
        value, _end = _scan(data[start + len(name) + 3 :].decode("utf-8", "surrogatepass"), 0)
    except (StopIteration, ValueError, SystemError, RecursionError):
        return None
    return value


def _skip(text: str, index: int, room: "list[int]") -> int:
    while text[index] in _WHITESPACE:
        index += 1
        room[1] -= 1
        if room[1] < 0:
            raise _Unusual
    return index


def _walk(text: str, index: int, depth: int, key: str, seen: "list[tuple[str, Any]]", room: "list[int]") -> "tuple[Any, int]":
    """The value at ``index`` (no whitespace before it) and where it ends, as ``_scan`` reads
    it; an object or array at most ``_WALKED`` levels deep is read here, member by member, by
    the rules of the C scanner (whitespace, commas, a later duplicate key wins)."""
    first = text[index]
    if depth >= _WALKED or first not in "{[":
        value, end = _scan(text, index)
        return value, end
    index = _skip(text, index + 1, room)
    if first == "[":
        items: list[Any] = []
        if text[index] == "]":
            return items, index + 1
        while True:
            _spend(room)
            item, index = _walk(text, index, depth + 1, key, seen, room)
            items.append(item)
            closed, index = _next(text, index, "]", room)
            if closed:
                return items, index
    members: dict[str, Any] = {}
    if text[index] == "}":
        return members, index + 1
    while True:
        _spend(room)
        if text[index] != '"':
            raise ValueError
        name, index = _c.scanstring(text, index + 1, True)
        index = _skip(text, index, room)
        if text[index] != ":":
            raise ValueError
        index = _skip(text, index + 1, room)
        if name == key and text[index] == "{":
            member, index = _repeated(text, index, seen)
        else:
            member, index = _walk(text, index, depth + 1, key, seen, room)
        members[name] = member
        closed, index = _next(text, index, "}", room)
        if closed:
            return members, index


def _next(text: str, index: int, close: str, room: "list[int]") -> "tuple[bool, int]":
    """After an array's item or an object's member: (True, the index past ``close``) where the
    container ends, else (False, the next item's index past the comma)."""
    index = _skip(text, index, room)
    if text[index] == close:
        return True, index + 1
    if text[index] != ",":
        raise ValueError
    return False, _skip(text, index + 1, room)


def _repeated(text: str, index: int, seen: "list[tuple[str, Any]]") -> "tuple[Any, int]":
    for earlier, value in seen:
        if text.startswith(earlier, index):
            return value, index + len(earlier)
    value, end = _scan(text, index)
    if len(seen) < _KEPT:
        seen.append((text[index:end], value))
    return value, end


def _spend(room: "list[int]") -> None:
    room[0] -= 1
    if room[0] < 0:
        raise _Unusual


def dumps_shared(value: object, key: str, texts: "Texts | None" = None, encoded: "Texts | None" = None) -> str:
    """:func:`dumps` of ``value``, where a value under ``key`` that *is* (the same object) one
    encoded before is encoded once: the same text, as the encoder has no state between values.

    With ``texts`` (from :func:`loads_shared`), an object read from a text is not encoded when
    another under ``key`` encodes to that very text and equals it: the object is that text read
    back, and reading back what the encoder wrote gives a value it writes the same way (for
    equal values: keys that are not strings would not compare equal once read back).

    ``encoded``: objects with the text :func:`dumps` gave for each (unchanged since), which is
    the text this writes for them: not encoded again."""
    if _c is None:
        return dumps(value)
    encode = _c.make_encoder(None, _typeerror, _c.encode_basestring_ascii, None, ":", ",", False, False, True)  # as dumps
    parts: list[str] = []
    slots: list[tuple[int, object]] = []
    try:
        _emit(value, 0, key, encode, slots, parts, [_MEMBERS])
        written: dict[int, str] = {}  # id of an object under key -> its text
        fresh: list[tuple[object, str]] = []  # the objects encoded here, with their text
        read: dict[int, tuple[object, str]] = {}  # the objects known by the text they were read from
        for _slot, member in slots:
            ident = id(member)
            known = texts.get(ident) if texts else None
            if ident in written or ident in read:
                continue
            mine = encoded.get(ident) if encoded else None
            if mine is not None and mine[0] is member:
                written[ident] = mine[1]
                fresh.append((member, mine[1]))
            elif known is not None and known[0] is member:
                read[ident] = known
            else:
                written[ident] = "".join(encode(member, 0))
                fresh.append((member, written[ident]))
        for member, text in read.values():
            for other, again in fresh[:_KEPT]:
                if again == text and other == member:
                    written[id(member)] = again
                    break
            else:
                written[id(member)] = "".join(encode(member, 0))
        for slot, member in slots:
            parts[slot] = written[id(member)]
    except (TypeError, ValueError, RecursionError, _Unusual):
        return dumps(value)  # its own error, or its own answer
    return "".join(parts)


class _Unusual(Exception):
    """A key that is not a string (the encoder's own rules), or more than ``_MEMBERS`` to walk
    (or ``_SPACES`` of whitespace to skip): :func:`loads` or :func:`dumps` does it all."""


def _emit(
    value: object, depth: int, key: str, encode: "Any", slots: "list[tuple[int, object]]", parts: "list[str]", room: "list[int]"
) -> None:
    """``value``'s text into ``parts``, with a slot for each object under ``key`` (its text, later)."""
    kind = value.__class__
    if depth >= _WALKED or (kind is not dict and kind is not list):
        parts.extend(encode(value, 0))
        return
    if kind is list:
        assert isinstance(value, list)
        parts.append("[")
        for number, item in enumerate(value):
            _spend(room)
            if number:
                parts.append(",")
            _emit(item, depth + 1, key, encode, slots, parts, room)
        parts.append("]")
        return
    assert isinstance(value, dict)
    parts.append("{")
    for number, (name, member) in enumerate(value.items()):
        _spend(room)
        if name.__class__ is not str:
            raise _Unusual
        parts.append(f"{',' if number else ''}{_c.encode_basestring_ascii(name)}:")
        if name == key and member.__class__ is dict:
            slots.append((len(parts), member))
            parts.append("")
        else:
            _emit(member, depth + 1, key, encode, slots, parts, room)
    parts.append("}")
