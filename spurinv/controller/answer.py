"""The controller's answers as JSON values: decoded, cleaned, and reduced while they are read.

Stdlib only, no I/O: the transports feed it what they received.

* **Bytes that are not UTF-8.** Slurm passes a reason typed in Latin-1 through as raw bytes
  (``scontrol update nodename=n2 reason=Zo<0xEB>``; the captured answer is
  ``tests/fixtures/slurm/responses/24.11/v0.0.42/node-n2-reason-latin1.json``), so slurmrestd's
  JSON is not valid UTF-8. It is decoded with U+FFFD for what is not, as the ``scontrol`` path
  decodes a command's output, and the reader names the nodes that carried such bytes.
* **Lone surrogates.** ``"\\ud800"`` is valid JSON, and the ``str`` it becomes cannot be encoded
  as UTF-8: not saved in the state file, not printed, not written to the metrics. Every string
  and key is cleaned to U+FFFD as it is read.
* **Size.** An all-nodes answer may be as large as the transport accepts (64 MiB), and parsed
  whole its objects cost several times that, more than the unit's ``MemoryMax``. The reader
  parses it as it arrives: the ``nodes`` list one node at a time, each handed to ``keep``, and
  only what ``keep`` returns stays (the node under test; a fleet row's fields). Text waits in a
  buffer only until the value it holds is complete.
* **Shape.** Objects cost up to 22 times their JSON text (``[[],[],…]``: a 56-byte list and an
  8-byte reference for 3 bytes), so the bytes the transport accepts do not bound the memory by
  themselves: one value (a node, or another top-level key) is at most ``MAX_VALUE`` of text,
  the ``nodes`` list at most ``MAX_NODES`` long, and what is kept whole (top-level values, and
  every node when there is no ``keep``) at most ``MAX_KEPT`` of text. Past any of them the
  answer is refused (:class:`TooLarge`), never truncated: a shortened ``extra`` written back
  would lose the admin's bytes. A string is one value, so it is bounded the same way.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from typing import Any

Keep = Callable[[Any], Any]  # a node in, what to keep of it out (None: nothing)
NODES = "nodes"
MARKED = 10  # node names kept for the message about bytes that are not UTF-8
REPLACEMENT = "\ufffd"
WHOLE = "whole"  # what the parser returns for an answer that is not an object
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how a surrogate gets into JSON text
_SURROGATE = re.compile("[\ud800-\udfff]")
_DECODER = json.JSONDecoder()
# A real node is 1.6-2.1 kB of JSON (slurmrestd 24.11); an admin's `extra` over 128 KiB already
# cannot pass through scontrol's argv. 1 MiB a value is generous and costs at most ~22 MiB of
# objects; 64 MiB (controller.MAX_NODES_BODY) of real nodes is ~42,000 of them.
MAX_VALUE = 1 << 20
MAX_NODES = 65536
MAX_KEPT = 2 << 20
# slurmrestd's answer has five top-level keys (meta, errors, warnings, last_update, nodes); two
# million of them (`{"k0":0,"k1":0,…}`, each a value well under the bounds) were 271 MB of
# objects. Their names count against MAX_KEPT too.
MAX_KEYS = 1024
_SLICE = 1 << 16  # text is taken in slices so a value's cap holds however the answer is fed


_NUMBER_TAIL = frozenset(".eE+-0123456789")


def _number_cut(text: str, end: int, value: Any) -> bool:
    """Could the number that ends at ``end`` go on past the end of the buffer?"""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and len(text) - end <= 2
        and all(c in _NUMBER_TAIL for c in text[end:])
    )


class Unusable(ValueError):
    """An answer that is JSON but cannot be used, with where and why (one line)."""


class TooLarge(Unusable):
    """An answer past one of the bounds above: refused, with the bound in the message."""


_LONG_NUMBER = re.compile(r'"([^"\\]{0,60})"\s*:\s*-?[0-9]{4000}')


class Reader:
    """An answer fed in chunks (bytes, or text a command printed); :meth:`close` gives the value.

    Raises ValueError (or RecursionError) for what is not JSON, as :func:`json.loads` would.
    With ``keep``, the ``nodes`` list of a top-level object holds what ``keep`` returned for
    each element, in order, leaving out None.
    """

    def __init__(self, keep: Keep | None = None, *, replaced: bool = False) -> None:
        self.keep = keep
        self.replaced = replaced  # some bytes were not UTF-8 (read as U+FFFD; True: text fed was decoded so)
        self.marked: list[str] = []  # nodes whose text holds U+FFFD once bytes were replaced
        self.marked_count = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._text = ""
        self._pos = 0
        self._pending: list[str] = []
        self._pending_size = 0
        self._wanted = 1  # characters to gather before the parser is worth resuming
        self._final = False
        self._whole: list[str] | None = None  # not an object: parsed whole at close
        self._escapes = False  # the buffer may hold a surrogate escape
        self._value: Any = None
        self._last = 0  # characters of the last value parsed
        self._kept = 0  # characters of JSON text kept whole (MAX_KEPT)
        self._whole_size = 0
        self._finished = False
        self._steps = self._parse()

    # --- input ------------------------------------------------------------------------------
    def feed(self, chunk: bytes | str) -> None:
        """Take the next piece of the answer."""
        text = chunk if isinstance(chunk, str) else self._decode(chunk, final=False)
        for start in range(0, len(text), _SLICE):
            self._take(text[start : start + _SLICE])

    def close(self) -> Any:
        """The whole answer has been fed: parse what is left and return the value."""
        tail = self._decode(b"", final=True)  # bytes cut short at the end become U+FFFD
        self._final = True
        if tail:
            self._take(tail)
        if self._whole is None:
            self._resume()
        if self._whole is not None:
            try:
                return clean(json.loads("".join(self._whole)))
            except json.JSONDecodeError:
                raise
            except ValueError:
                raise Unusable("a number of more than 4300 digits (refused)") from None
        if not self._finished:
            raise ValueError("the answer ends before its JSON does")
        return self._value

    def _decode(self, chunk: bytes, final: bool) -> str:
        try:
            return self._decoder.decode(chunk, final)
        except UnicodeDecodeError:
            # the decoder keeps what it had not consumed: the same chunk again, with replacement
            self.replaced = True
            self._decoder.errors = "replace"
            return self._decoder.decode(chunk, final)

    def _take(self, text: str) -> None:
        if self._whole is not None:
            self._whole.append(text)
            self._whole_size += len(text)
            if self._whole_size > MAX_VALUE:
                raise TooLarge(f"an answer that is not a JSON object, larger than {MAX_VALUE >> 20} MiB")
            return
        if self._finished:
            if text.strip(" \t\n\r"):
                raise ValueError("extra data after the JSON value")
            return
        self._pending.append(text)
        self._pending_size += len(text)
        if self._pending_size >= self._wanted:
            self._resume()

    def _resume(self) -> None:
        if self._pending:
            self._text = self._text[self._pos :] + "".join(self._pending)
            self._pos = 0
            self._pending.clear()
            self._pending_size = 0
            self._escapes = bool(_SURROGATE_ESCAPE.search(self._text))
        if self._finished or self._whole is not None:
            return
        try:
            self._wanted = next(self._steps)
        except StopIteration as stop:
            if stop.value == WHOLE:  # not an object: close() parses it
                return
            self._finished = True
            if self._text[self._pos :].strip(" \t\n\r"):
                raise ValueError("extra data after the JSON value") from None

    # --- parsing (a generator that yields how many more characters it needs) ----------------
    def _parse(self) -> Any:
        first = yield from self._char()
        if first != "{":  # not an object: no nodes to reduce, parse it whole
            self._whole = [self._text[self._pos :]]
            self._whole_size = len(self._whole[0])
            return WHOLE
        self._pos += 1
        top: dict[str, Any] = {}
        if (yield from self._char()) == "}":
            self._pos += 1
            self._value = top
            return None
        while True:
            key = yield from self._json()
            if not isinstance(key, str):
                raise ValueError("an object key that is not a string")
            if len(top) >= MAX_KEYS and key not in top:
                raise TooLarge(f"more than {MAX_KEYS} keys at the top of the answer (refused)")
            self._keep_whole(key[:40])  # the key's own text is kept too
            yield from self._expect(":")
            if key == NODES and (yield from self._char()) == "[":
                self._pos += 1
                top[key] = yield from self._nodes()
            else:
                top[key] = yield from self._json(key)
                self._keep_whole(key)
            following = yield from self._char()
            self._pos += 1
            if following == "}":
                break
            if following != ",":
                raise ValueError(f"expected ',' or '}}' in the answer, found {following!r}")
        self._value = top
        return None

    def _nodes(self) -> Any:
        kept: list[Any] = []
        if (yield from self._char()) == "]":
            self._pos += 1
            return kept
        count = 0
        while True:
            count += 1
            if count > MAX_NODES:
                raise TooLarge(f"more than {MAX_NODES} nodes in one answer")
            node = yield from self._json(f"nodes[{count - 1}]")
            if self.replaced:
                self._mark(node)
            if self.keep is None:
                self._keep_whole(f"nodes[{count - 1}]")
                kept.append(node)
            elif (chosen := self.keep(node)) is not None:
                kept.append(chosen)
            following = yield from self._char()
            self._pos += 1
            if following == "]":
                return kept
            if following != ",":
                raise ValueError(f"expected ',' or ']' in the nodes list, found {following!r}")

    def _char(self) -> Any:
        """The next character that is not white space (not consumed)."""
        while True:
            self._pos = _WHITESPACE.match(self._text, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._text):
                return self._text[self._pos]
            if self._final:
                raise ValueError("the answer ends before its JSON does")
            yield 1

    def _expect(self, wanted: str) -> Any:
        if (yield from self._char()) != wanted:
            raise ValueError(f"expected {wanted!r} in the answer, found {self._text[self._pos]!r}")
        self._pos += 1

    def _json(self, where: str = "") -> Any:
        """One complete JSON value at the current position, cleaned (at most MAX_VALUE of text)."""
        yield from self._char()
        while True:
            have = len(self._text) - self._pos
            try:
                value, end = _DECODER.raw_decode(self._text, self._pos)
            except json.JSONDecodeError:
                if self._final:
                    raise
            except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
                raise self._long_number(where) from None
            else:
                # a number or literal that ends the buffer may go on in the next chunk, also
                # where the chunk cut it at its "." or exponent ("2.5e" parses as 2.5, then "e")
                if self._final or (end < len(self._text) and not _number_cut(self._text, end, value)):
                    self._last = end - self._pos
                    if self._last > MAX_VALUE:
                        raise self._too_large(where)
                    self._pos = end
                    return clean(value) if self._escapes else value
            if have > MAX_VALUE:
                raise self._too_large(where)
            # try again once the unparsed text has doubled (a huge value costs O(n), not O(n²)),
            # and no later than just past the cap
            yield max(1, min(have, MAX_VALUE + 1 - have))

    def _long_number(self, where: str) -> Unusable:
        found = _LONG_NUMBER.search(self._text, self._pos)
        field = f"{found.group(1)!r}: " if found else ""
        return Unusable(f"{where or 'a value'}: {field}a number of more than 4300 digits (refused)")

    def _too_large(self, where: str) -> TooLarge:
        return TooLarge(f"{where or 'a value'}: larger than {MAX_VALUE >> 20} MiB of JSON (refused)")

    def _keep_whole(self, where: str) -> None:
        self._kept += self._last
        if self._kept > MAX_KEPT:
            raise TooLarge(f"{where}: more than {MAX_KEPT >> 20} MiB of JSON kept whole (refused)")

    def _mark(self, node: Any) -> None:
        if not holds_replacement(node):
            return
        self.marked_count += 1
        if len(self.marked) < MARKED:
            name = node.get("name") if isinstance(node, dict) else None
            self.marked.append(str(name)[:80] if isinstance(name, str) else f"nodes[{self.marked_count - 1}]")


def loads(data: bytes | str) -> Any:
    """A whole answer at once (``json.loads`` with the decoding and cleaning above)."""
    reader = Reader()
    reader.feed(data)
    return reader.close()


def clean(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings and keys replaced by U+FFFD (in place
    for containers; iterative, so a deep value costs no recursion)."""
    if isinstance(value, str):
        return _fix(value)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            pairs = list(item.items())
            if any(isinstance(key, str) and _SURROGATE.search(key) for key, _ in pairs):
                item.clear()
                item.update((_fix(key) if isinstance(key, str) else key, entry) for key, entry in pairs)
                pairs = list(item.items())
            for key, entry in pairs:
                if isinstance(entry, str):
                    item[key] = _fix(entry)
                elif isinstance(entry, (dict, list)):
                    stack.append(entry)
        elif isinstance(item, list):
            for index, entry in enumerate(item):
                if isinstance(entry, str):
                    item[index] = _fix(entry)
                elif isinstance(entry, (dict, list)):
                    stack.append(entry)
    return value


def _fix(text: str) -> str:
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)


def holds_replacement(value: Any) -> bool:
    """Does any string in ``value`` hold U+FFFD?"""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if REPLACEMENT in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def not_utf8(marked: list[str], count: int) -> str:
    """The message for an answer whose bytes were not all UTF-8, naming the nodes that held them."""
    if not count:
        return "the answer holds bytes that are not UTF-8 outside any node (read as U+FFFD)"
    more = f" and {count - len(marked)} more" if count > len(marked) else ""
    return f"text that is not UTF-8 (read as U+FFFD) in node {', '.join(marked)}{more}"
