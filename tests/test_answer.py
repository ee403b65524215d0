"""The controller's answers as JSON values: decoded, cleaned, reduced while read.

Properties over arbitrary JSON and arbitrary chunkings: the reader agrees with ``json.loads``
(surrogates cleaned), keeps exactly what ``keep`` returns, and refuses what ``json.loads``
refuses; plus the real 24.11 answer whose reason holds a raw Latin-1 byte.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv.controller import answer

CAPTURES = Path(__file__).parent / "fixtures" / "slurm" / "responses" / "24.11" / "v0.0.42"

# Strings with lone surrogates on purpose: json.dumps writes them as \udXXX escapes.
TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=30)  # fmt: skip
NODE = st.fixed_dictionaries({"name": st.sampled_from(["n1", "n2", "gpu\udc80", ""])}, optional={"reason": TEXT})
ANSWERS = st.fixed_dictionaries({"nodes": st.lists(NODE | VALUES, max_size=6)}, optional={"meta": VALUES, "errors": VALUES})


def _clean_copy(value: Any) -> Any:
    """What the reader should give: ``value`` with every lone surrogate made U+FFFD."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, list):
        return [_clean_copy(item) for item in value]
    if isinstance(value, dict):
        return {_clean_copy(key): _clean_copy(item) for key, item in value.items()}
    return value


def _feed(data: bytes, cuts: list[int], keep: answer.Keep | None = None) -> tuple[Any, answer.Reader]:
    reader = answer.Reader(keep)
    start = 0
    for cut in sorted({min(max(cut, 0), len(data)) for cut in cuts}):
        reader.feed(data[start:cut])
        start = cut
    reader.feed(data[start:])
    return reader.close(), reader


@settings(max_examples=examples(300), deadline=None)
@given(value=VALUES | ANSWERS, cuts=st.lists(st.integers(0, 4000), max_size=8), indent=st.sampled_from([None, 2]))
def test_any_json_in_any_chunks_reads_as_json_loads_with_surrogates_cleaned(value, cuts, indent):
    data = json.dumps(value, indent=indent).encode()

    read, reader = _feed(data, cuts)

    assert read == _clean_copy(json.loads(data))
    assert not reader.replaced
    assert json.dumps(read, ensure_ascii=False).encode()  # encodable: nothing lone is left


def _ours(node: Any) -> Any:
    return node if isinstance(node, dict) and node.get("name") == "n2" else None


@settings(max_examples=examples(200), deadline=None)
@given(value=ANSWERS, cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_keep_sees_every_node_in_order_and_only_what_it_returns_stays(value, cuts):
    data = json.dumps(value).encode()
    seen: list[Any] = []

    def keep(node: Any) -> Any:
        seen.append(copy.deepcopy(node))
        return _ours(node)

    read, _reader = _feed(data, cuts, keep)

    expected = _clean_copy(json.loads(data))
    assert seen == expected["nodes"]
    assert read["nodes"] == [node for node in expected["nodes"] if _ours(node) is not None]
    assert {key: item for key, item in read.items() if key != "nodes"} == {
        key: item for key, item in expected.items() if key != "nodes"
    }


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=200) | st.text(max_size=60).map(str.encode), cuts=st.lists(st.integers(0, 200), max_size=4))
def test_anything_else_is_refused_as_json_loads_refuses_it(data, cuts):
    try:
        expected = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        with pytest.raises((ValueError, RecursionError)):
            _feed(data, cuts)
        return
    read, _reader = _feed(data, cuts)
    assert json.dumps(read) == json.dumps(_clean_copy(expected))  # NaN is not equal to itself; its text is


def test_a_number_cut_by_a_chunk_is_read_whole():
    reader = answer.Reader()
    for piece in (b'{"last_update": 17', b"96316732", b', "nodes": [', b"]}"):
        reader.feed(piece)

    assert reader.close() == {"last_update": 1796316732, "nodes": []}


def test_a_huge_value_is_parsed_a_bounded_number_of_times():
    """A value far larger than a chunk is re-tried only when the unread text has doubled."""
    attempts = 0
    decoder = answer._DECODER
    original = decoder.raw_decode

    def counting(text: str, index: int = 0) -> Any:
        nonlocal attempts
        attempts += 1
        return original(text, index)

    decoder.raw_decode = counting  # type: ignore[method-assign, assignment]
    try:
        reader = answer.Reader()
        data = json.dumps({"meta": "x" * (answer.MAX_VALUE - 100), "nodes": []}).encode()
        for start in range(0, len(data), 65536):
            reader.feed(data[start : start + 65536])
        assert reader.close()["nodes"] == []
    finally:
        del decoder.raw_decode
    assert attempts < 40


def test_a_reason_typed_in_latin1_is_read_and_its_node_named():
    """The real 24.11 answer after ``scontrol update nodename=n2 reason=Zo<0xEB>``: not UTF-8."""
    data = (CAPTURES / "nodes-n2-reason-latin1.json").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode()

    read, reader = _feed(data, list(range(0, len(data), 1000)))

    reasons = {node["name"]: node["reason"] for node in read["nodes"]}
    assert reasons["n2"] == "Zo\ufffd"
    assert (reader.replaced, reader.marked, reader.marked_count) == (True, ["n2"], 1)
    assert answer.not_utf8(reader.marked, reader.marked_count).endswith("in node n2")


def test_a_byte_sequence_cut_at_the_end_is_replaced():
    reader = answer.Reader()
    reader.feed(b'{"nodes": [{"name": "n1", "reason": "caf\xc3\xa9"}], "x": "\xc3')

    with pytest.raises(ValueError):
        reader.close()
    assert reader.replaced


@pytest.mark.parametrize("keep", [None, _ours])
def test_nested_deeper_than_the_parser_goes_is_an_error_not_a_crash(keep):
    deep = b'{"nodes": [' + b"[" * 100000 + b"]" * 100000 + b"]}"

    with pytest.raises((ValueError, RecursionError)):
        _feed(deep, [5, 70000], keep)


# --- memory: every answer shape is bounded, not only the real one ----

_NESTED = "[" + ",".join(["[]"] * (answer.MAX_VALUE // 3 + 10)) + "]"  # 22 times its text as objects
_STRING = '{"nodes":[{"name":"n1","reason":"' + "\u00eb" * (answer.MAX_VALUE + 10) + '"}]}'
_MANY = '{"nodes":[' + ",".join(["{}"] * (answer.MAX_NODES + 1)) + "]}"
_KEPT = '{"nodes":[' + ",".join(['{"name":"n","x":"' + "y" * (answer.MAX_VALUE - 100) + '"}'] * 3) + "]}"
SHAPES = {
    "a node nested past the cap": ('{"nodes":[{"name":"n1","junk":' + _NESTED + "}]}", "nodes[0]"),
    "another key past the cap": ('{"x":' + _NESTED + ',"nodes":[]}', "x:"),
    "not an object, past the cap": (_NESTED, "not a JSON object"),
    "a string past the cap": (_STRING, "nodes[0]"),
    "more nodes than a cluster has": (_MANY, f"more than {answer.MAX_NODES} nodes"),
    "more kept whole than an answer holds": (_KEPT, "kept whole"),
}


def _read(reader: answer.Reader, data: bytes, chunk: int) -> None:
    for start in range(0, len(data), chunk):
        reader.feed(data[start : start + chunk])
    reader.close()


@pytest.mark.parametrize("chunk", [65536, None], ids=["streamed", "whole"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_answer_shape_past_a_bound_is_refused_not_built(shape, chunk):
    """A 64 MiB answer of ``[[],[],…]`` under another key, a node, or no object at all cost
    1.6-1.8 GiB; a 64 MiB string 331 MiB (bench/allnodes.py): each bound refuses its shape."""
    text, words = SHAPES[shape]
    data = text.encode()
    keep = None if "kept whole" in words else (lambda node: node if node.get("name") == "n1" else None)
    reader = answer.Reader(keep)
    with pytest.raises(answer.TooLarge, match=re.escape(words)):
        _read(reader, data, chunk or len(data))


def test_a_node_just_inside_the_bounds_is_read_whole():
    """An admin's ``extra`` of 900 KiB (past what scontrol's argv takes) is still read."""
    node = {"name": "n1", "extra": "e" * (900 << 10)}
    data = json.dumps({"nodes": [node, *({"name": f"n{i}"} for i in range(2, 5000))]}).encode()
    reader = answer.Reader(lambda item: item if item["name"] == "n1" else None)
    for start in range(0, len(data), 65536):
        reader.feed(data[start : start + 65536])

    assert reader.close()["nodes"] == [node]


@pytest.mark.parametrize("cut", range(1, 26))
def test_a_number_cut_by_a_chunk_at_its_point_or_exponent_is_read_whole(cut):
    """A chunk may end inside a number just after its "." or "e"/"e+": ``2.5e`` parses as 2.5
    followed by garbage, so the reader waits for the rest (found by the property test above)."""
    data = json.dumps({"nodes": [None, 2.844658021382638e16, -1.5e-07]}).encode()

    read, _reader = _feed(data, [cut], None)

    assert read["nodes"] == [None, 2.844658021382638e16, -1.5e-07]
