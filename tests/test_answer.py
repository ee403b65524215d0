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


@pytest.mark.parametrize("chunk", [65536, 4096])
def test_a_huge_value_is_parsed_a_bounded_number_of_times(chunk):
    """A value far larger than a chunk is re-tried only when the unread text has doubled (in
    chunks of 4 KiB, a parse at every chunk past the first doubling would be ~250 of them)."""
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
        for start in range(0, len(data), chunk):
            reader.feed(data[start : start + chunk])
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


def _read_text(text: str):
    """``text`` read in chunks of 64 Ki characters, keeping no node."""
    reader = answer.Reader(keep=lambda node: None)
    for start in range(0, len(text), 1 << 16):
        reader.feed(text[start : start + (1 << 16)].encode())
    return reader.close()


@pytest.mark.parametrize(
    "shape",
    [
        "two million keys",
        "1,025 keys",
        "1,000 keys of 4 KiB names",
    ],
)
def test_top_level_keys_are_bounded_in_number_and_text(shape):
    """Two million top-level keys (``{"k0":0,…}``): 271 MB of objects, past the unit's MemoryMax;
    neither their number nor their names counted against MAX_KEPT."""
    from spurinv.controller import answer

    if shape == "two million keys":
        text = "{" + ",".join(f'"k{i}":0' for i in range(2_000_000)) + ',"nodes":[]}'
    elif shape == "1,025 keys":
        text = "{" + ",".join(f'"k{i}":0' for i in range(1025)) + "}"
    else:
        text = "{" + ",".join(f'"{i:04d}{"k" * 4096}":0' for i in range(1000)) + "}"

    with pytest.raises(answer.TooLarge) as raised:
        _read_text(text)

    assert "refused" in str(raised.value)


def test_an_answer_with_slurmrestds_keys_and_repeats_is_read():
    text = '{"meta":{},"errors":[],"warnings":[],"last_update":{"number":1},"nodes":[{"name":"n1"}]}'
    assert set(_read_text(text)) == {"meta", "errors", "warnings", "last_update", "nodes"}
    assert _read_text("{" + ",".join('"a":0' for _ in range(5000)) + "}") == {"a": 0}


@pytest.mark.parametrize("cut", range(1, 26))
def test_a_number_cut_by_a_chunk_at_its_point_or_exponent_is_read_whole(cut):
    """A chunk may end inside a number just after its "." or "e"/"e+": ``2.5e`` parses as 2.5
    followed by garbage, so the reader waits for the rest (found by the property test above)."""
    data = json.dumps({"nodes": [None, 2.844658021382638e16, -1.5e-07]}).encode()

    read, _reader = _feed(data, [cut], None)

    assert read["nodes"] == [None, 2.844658021382638e16, -1.5e-07]


# --- the bounds, the messages and the names they give, with literal values ----


def _string(length: int, char: str = "a") -> str:
    """A JSON string whose text is ``length`` characters, quotes included."""
    return '"' + char * (length - 2) + '"'


def _nodes(*texts: str) -> bytes:
    return ('{"nodes":[' + ",".join(texts) + "]}").encode()


def _read_in_chunks(data: bytes, keep: answer.Keep | None = None) -> answer.Reader:
    reader = answer.Reader(keep)
    for start in range(0, len(data), 65536):
        reader.feed(data[start : start + 65536])
    return reader


def _every(node: Any) -> Any:
    return node


def test_two_mebibytes_of_json_are_kept_whole_and_one_character_more_is_refused():
    # kept whole: the key's text '"nodes"' (7) and every node's (no keep); one value at most 1 MiB
    fits = _nodes(_string(1048576), _string(2097152 - 7 - 1048576, "b"))
    over = _nodes(_string(1048576), _string(2097152 - 7 - 1048576 + 1, "b"))

    read = _read_in_chunks(fits).close()
    assert [len(node) for node in read["nodes"]] == [1048574, 1048567]
    with pytest.raises(answer.TooLarge, match=r"^nodes\[1\]: more than 2 MiB of JSON kept whole \(refused\)$"):
        _read_in_chunks(over).close()


def test_one_value_of_one_mebibyte_is_read_and_one_character_more_is_refused():
    assert answer.loads(_nodes(_string(1048576)))["nodes"] == ["a" * 1048574]
    with pytest.raises(answer.TooLarge, match=r"^nodes\[0\]: larger than 1 MiB of JSON \(refused\)$"):
        _read_in_chunks(_nodes(_string(1048577)), _every).close()


def test_an_answer_that_is_no_object_is_refused_past_one_mebibyte_in_those_words():
    fits = ("[" + _string(1048574) + "]").encode()
    assert answer.loads(fits) == ["a" * 1048572]
    with pytest.raises(answer.TooLarge, match=r"^an answer that is not a JSON object, larger than 1 MiB$"):
        _read_in_chunks(("[" + _string(1048575) + "]").encode()).close()


def test_a_top_level_key_past_the_bound_is_named_by_its_first_forty_characters():
    key = "k" * 39 + "XYZ"
    data = ('{"nodes":[' + _string(1048576) + "," + _string(1048569 - 30) + '],"' + key + '":1}').encode()

    with pytest.raises(answer.TooLarge, match=r"^k{39}X: more than 2 MiB of JSON kept whole \(refused\)$"):
        _read_in_chunks(data).close()


def test_nodes_with_bytes_that_are_not_utf8_are_named_up_to_ten_and_eighty_characters():
    long = "g" * 100
    nodes = [
        {"name": long, "reason": "Zo\udceb"},
        {"reason": "x\udceb"},
        {"name": "n3"},
        *({"name": f"m{i}", "r": "\udceb"} for i in range(12)),
    ]
    data = json.dumps({"nodes": nodes}, ensure_ascii=False).encode("utf-8", "surrogateescape")
    reader = _read_in_chunks(data)
    reader.close()

    assert reader.replaced
    assert reader.marked == ["g" * 80, "nodes[1]", *(f"m{i}" for i in range(8))]
    assert reader.marked_count == 14
    assert answer.not_utf8(reader.marked, reader.marked_count) == (
        "text that is not UTF-8 (read as U+FFFD) in node " + ", ".join(reader.marked) + " and 4 more"
    )
    assert answer.not_utf8([], 0) == "the answer holds bytes that are not UTF-8 outside any node (read as U+FFFD)"


def test_a_number_longer_than_python_reads_is_refused_naming_its_node_and_field():
    data = ('{"nodes":[{"name":"n1"},{"name":"n2","weight":' + "9" * 5000 + "}]}").encode()

    with pytest.raises(answer.Unusable, match=r"^nodes\[1\]: 'weight': a number of more than 4300 digits \(refused\)$"):
        _read_in_chunks(data).close()
    with pytest.raises(answer.Unusable, match=r"^a number of more than 4300 digits \(refused\)$"):
        answer.loads(b"[" + b"9" * 5000 + b"]")


def test_blanks_after_the_answer_are_checked_and_dropped_not_gathered():
    """What follows the JSON value may only be blanks, up to the request's byte limit (64 MiB for
    every node): each slice is checked and dropped as it arrives. Gathered instead, every slice
    would copy all the blanks before it (quadratic) and hold them all."""
    import tracemalloc

    reader = answer.Reader()
    reader.feed(b'{"nodes": []}')
    blanks = b" \n" * (1 << 15)  # 64 KiB a chunk
    tracemalloc.start()
    try:
        for _ in range(64):  # 4 MiB
            reader.feed(blanks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert reader.close() == {"nodes": []}
    assert peak < 1 << 20, peak  # a chunk or two at a time, never the 4 MiB


@pytest.mark.parametrize(
    "text",
    [
        '{"meta": 1 "nodes": []}',  # no comma between two top-level members
        '{"meta" 1, "nodes": []}',  # no colon after a top-level key
        '{"nodes" []}',  # no colon before the nodes list
        '{"nodes": [] "meta": 1}',  # no comma after the nodes list
    ],
)
@pytest.mark.parametrize("cut", [None, 1, 9])
def test_a_top_level_object_without_its_comma_or_colon_is_refused_as_json_loads_refuses_it(text, cut):
    with pytest.raises(ValueError, match=r"^Expecting '[,:]' delimiter"):
        json.loads(text)
    with pytest.raises(ValueError, match=r"^expected '[,:]'|^expected ',' or"):
        _feed(text.encode(), [] if cut is None else [cut])


def test_65536_nodes_are_read_and_one_more_is_refused():
    assert answer.loads(_nodes(*["0"] * 65536))["nodes"] == [0] * 65536
    with pytest.raises(answer.TooLarge, match=r"^more than 65536 nodes in one answer$"):
        answer.loads(_nodes(*["0"] * 65537))


def test_1024_keys_at_the_top_are_read_and_a_new_one_more_is_refused_but_a_repeated_one_is_not():
    keys = [f'"k{i}":0' for i in range(1024)]

    assert answer.loads("{" + ",".join(keys) + "}") == {f"k{i}": 0 for i in range(1024)}
    # a key already there takes its new value, as in json.loads, and adds no key
    assert answer.loads("{" + ",".join([*keys, '"k5":1']) + "}")["k5"] == 1
    with pytest.raises(answer.TooLarge, match=r"^more than 1024 keys at the top of the answer \(refused\)$"):
        answer.loads("{" + ",".join([*keys, '"k1024":0']) + "}")


@pytest.mark.parametrize("cut", ["1e", "1e+", "2.5E", "2.5E-", "-7.", "-7.0e", "-7.0e+"])
def test_a_number_cut_just_after_its_exponent_and_sign_is_read_whole(cut):
    """Two characters a chunk may leave after a number that goes on: ``1e+`` parses as 1, then
    ``e+``; the reader waits for the rest instead of refusing ``e`` after a value."""
    text = '{"nodes": [1e+5, 2.5E-3, -7.0e+1]}'
    at = text.index(cut) + len(cut)

    read, _reader = _feed(text.encode(), [at])

    assert read == {"nodes": [100000.0, 0.0025, -70.0]}


@pytest.mark.parametrize(
    "text",
    [
        '{"nodes": [nul]}',  # an object's value, read as the answer streams
        '{"meta": {"a" 1}, "nodes": []}',
        "[1, nul]",  # not an object: parsed whole at close
        '"abc',
    ],
)
def test_text_that_is_no_json_is_refused_in_the_json_decoders_words(text):
    """Not "the answer ends before its JSON does": the decoder's words say what and where."""
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as refused:
        answer.loads(text)

    assert str(refused.value) == str(expected.value)


@pytest.mark.parametrize("data", [b'{"nodes": []}\xc3', b'{"nodes": []} \xe2\x82', b"[1]\xf0\x9f"])
def test_a_byte_sequence_cut_short_after_the_json_is_refused_as_extra_data(data):
    """The cut bytes are read as U+FFFD at close, as json.loads of the replaced text reads them."""
    with pytest.raises(json.JSONDecodeError, match=r"^Extra data"):
        json.loads(data.decode("utf-8", "replace"))
    reader = answer.Reader()
    reader.feed(data)

    with pytest.raises(ValueError, match=r"^extra data after the JSON value$|^Extra data"):
        reader.close()
    assert reader.replaced


@pytest.mark.parametrize("cut", [12, 13, 14, 15, 16])
@pytest.mark.parametrize("text", ['{"nodes": []} \nx', '{"nodes": []}x ', "{}x", "{} x"])
def test_text_after_the_answer_in_its_chunk_or_a_later_one_is_refused_as_extra_data(text, cut):
    data = text.encode()
    with pytest.raises(json.JSONDecodeError, match=r"^Extra data"):
        json.loads(data)

    with pytest.raises(ValueError, match=r"^extra data after the JSON value$"):
        _feed(data, [cut])


@pytest.mark.parametrize("text", ['{1: 2, "nodes": []}', '{"nodes": [], null: 1}', '{["a"]: 1}', "{{}: 1}", "{1.5: 1}"])
def test_a_top_level_key_that_is_no_string_is_refused_as_not_json(text):
    """Refused as a ValueError, like all that is not JSON, not a TypeError from the key's use."""
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)

    with pytest.raises(ValueError, match=r"^an object key that is not a string$"):
        answer.loads(text)


def test_an_answer_that_is_no_object_is_held_once_while_it_arrives():
    """Its slices wait in one list for close(); gathered into the parser's buffer as well, they
    would be held twice, and copied again at every slice."""
    import tracemalloc

    data = "[" + _string(999_998) + "]"  # 1,000,000 characters, ASCII: a byte each
    reader = answer.Reader()
    tracemalloc.start()
    try:
        for start in range(0, len(data), 65536):
            reader.feed(data[start : start + 65536])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert reader.close() == ["a" * 999_996]
    assert peak < 1_500_000, peak


@pytest.mark.parametrize("chunk", [65536, 1000, None], ids=["streamed", "small", "whole"])
def test_an_answer_cut_short_inside_a_value_one_character_past_the_cap_is_refused_as_too_large(chunk):
    """The parser is resumed as soon as the value's text passes 1 MiB, not one character later:
    1,048,577 characters of an unterminated string are too large, not "Unterminated string"."""
    data = ('{"a":"' + "x" * 1048576).encode()  # the value's text: its quote and 1,048,576 characters

    with pytest.raises(answer.TooLarge, match=r"^a: larger than 1 MiB of JSON \(refused\)$"):
        _read(answer.Reader(), data, chunk or len(data))


def test_values_at_the_top_count_against_the_two_mebibytes_kept_whole():
    # kept whole: each key's text ('"a"', '"b"': 3 each) and each value's; one value at most 1 MiB
    fits = '{"a":' + _string(1048576) + ',"b":' + _string(2097152 - 3 - 1048576 - 3, "b") + "}"
    over = '{"a":' + _string(1048576) + ',"b":' + _string(2097152 - 3 - 1048576 - 3 + 1, "b") + "}"

    assert [len(value) for value in answer.loads(fits).values()] == [1048574, 1048568]
    with pytest.raises(answer.TooLarge, match=r"^b: more than 2 MiB of JSON kept whole \(refused\)$"):
        answer.loads(over)


@pytest.mark.parametrize(
    ("text", "found"), [('{"nodes": [1;2]}', "';'"), ('{"nodes": [1 2]}', "'2'"), ('{"nodes": [{} {}]}', "'{'")]
)
@pytest.mark.parametrize("cut", [None, 12, 13])
def test_nodes_without_the_comma_between_them_are_refused_as_json_loads_refuses_them(text, found, cut):
    with pytest.raises(json.JSONDecodeError, match=r"^Expecting ',' delimiter"):
        json.loads(text)

    with pytest.raises(ValueError, match=rf"^expected ',' or '\]' in the nodes list, found {found}$"):
        _feed(text.encode(), [] if cut is None else [cut])


def test_a_value_of_one_mebibyte_that_ends_its_chunk_is_read_not_refused():
    """Fed from its first character in 64 KiB slices, the string is whole when the buffer holds
    exactly 1 MiB of it, and the reader waits for what follows: 1 MiB is not past the cap."""
    reader = answer.Reader()
    reader.feed('{"nodes":[')
    reader.feed(_string(1048576))
    reader.feed("]}")

    assert reader.close() == {"nodes": ["a" * 1048574]}


def test_an_unterminated_value_is_refused_at_the_first_character_past_the_cap():
    """Fed from its first character in 64 KiB slices, the buffer holds exactly 1 MiB of the
    string at one parse; the next single character is past the cap and refused there, not
    only at close() as JSON that ends too soon."""
    reader = answer.Reader()
    reader.feed('{"nodes":[')
    reader.feed('"' + "a" * 1048575)

    with pytest.raises(answer.TooLarge, match=r"^nodes\[0\]: larger than 1 MiB of JSON \(refused\)$"):
        reader.feed("a")


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ('"\\ud800x"', "\ufffdx"),  # a string is the whole answer
        ('["\\ud800", ["x\\udfff"], {"k": "\\udc80"}]', ["\ufffd", ["x\ufffd"], {"k": "\ufffd"}]),
        ('{"k\\ud800": "v\\udc80", "nodes": []}', {"k\ufffd": "v\ufffd", "nodes": []}),  # a key, then its value
        ('{"meta": {"k\\ud800": "v", "w": 1}}', {"meta": {"k\ufffd": "v", "w": 1}}),
        ('{"nodes": ["\\ud800", {"name": "n\\udfff"}]}', {"nodes": ["\ufffd", {"name": "n\ufffd"}]}),
    ],
)
def test_every_lone_surrogate_is_cleaned_once_in_strings_keys_and_lists(text, read):
    """Each key once, fixed in place: a value under a fixed key is not left under the old one."""
    assert answer.loads(text) == read
    assert json.dumps(answer.loads(text), ensure_ascii=False).encode()  # nothing lone is left
