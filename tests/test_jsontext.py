"""spurinv.jsontext gives what the json package gives: same values, same text, same errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from effort import examples
from factories import same_json
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv import jsontext

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


def _outcome(function: object, data: object) -> tuple[str, object]:
    try:
        return "value", function(data)
    except (ValueError, RecursionError, TypeError) as exc:
        return type(exc).__name__, str(exc)


@given(VALUES, st.booleans())
@settings(max_examples=examples(150))
def test_dumps_is_json_dumps(value: object, sort_keys: bool) -> None:
    assert jsontext.dumps(value, sort_keys=sort_keys) == json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)


@given(VALUES, st.sampled_from([None, 2]), st.sampled_from(["", " ", "\n", " x", "]", "\t\r\n"]))
@settings(max_examples=examples(150))
def test_loads_reads_what_json_reads(value: object, indent: int | None, tail: str) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=indent is None) + tail
    for data in (text, text.encode("utf-8", "surrogatepass")):
        ours, theirs = _outcome(jsontext.loads, data), _outcome(json.loads, data)
        assert ours[0] == theirs[0]
        assert same_json(ours[1], theirs[1])


@given(st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE+- \t\n\rtrufalsnNIiy\\u\ufeff\ud800\x00é')))
@settings(max_examples=examples(500))
def test_any_text_has_json_outcome(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16", "surrogatepass")):
        ours, theirs = _outcome(jsontext.loads, data), _outcome(json.loads, data)
        assert ours[0] == theirs[0]
        assert same_json(ours[1], theirs[1])


def test_refusals_are_json_refusals() -> None:
    assert _outcome(jsontext.dumps, {"a": {1, 2}}) == _outcome(json.dumps, {"a": {1, 2}})
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    assert _outcome(jsontext.dumps, nested)[0] == "RecursionError"
    cycle: list[object] = [1]
    cycle.append({"a": cycle})
    assert _outcome(jsontext.dumps, cycle) == _outcome(json.dumps, cycle) == ("ValueError", "Circular reference detected")
    assert _outcome(lambda value: jsontext.dumps_shared(value, "a"), {"a": cycle}) == _outcome(json.dumps, cycle)
    assert _outcome(jsontext.loads, "[" * 100_000 + "]" * 100_000)[0] == _outcome(json.loads, "[" * 100_000)[0]


def test_errors_without_the_json_package_imported() -> None:
    """The tick's process has no json.decoder: the C scanner cannot raise its own error there."""
    script = (
        "import sys\n"
        "from spurinv import jsontext\n"
        "assert 'json' not in sys.modules\n"
        "for bad in ('{not json', '{\"a\": 1', '[1, 2', b'{\"readi'):\n"
        "    try:\n"
        "        jsontext.loads(bad)\n"
        "    except ValueError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "print(jsontext.loads(b'{\"a\": [1, 2.5, null]}'), jsontext.dumps({'b': 'é'}))\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "JSONDecodeError Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "JSONDecodeError Expecting ',' delimiter: line 1 column 8 (char 7)",
        "JSONDecodeError Expecting ',' delimiter: line 1 column 6 (char 5)",
        "JSONDecodeError Unterminated string starting at: line 1 column 2 (char 1)",
        '{\'a\': [1, 2.5, None]} {"b":"\\u00e9"}',
    ]


# The state file's shape, near enough: the repeated key under objects and arrays at every depth
# the walk reads member by member, and below it.
KEYED = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["inventory", "readings", "a", "é", "\ud800"]) | st.text(max_size=3), inner, max_size=4
        )
    ),
    max_leaves=20,
)


def _with_repeats(value: object, repeat: object) -> object:
    """``value`` with ``repeat`` under "inventory" at three depths, as the readings and baseline hold it."""
    return {
        "a": value,
        "readings": [{"inventory": repeat, "b": value}, {"inventory": repeat}],
        "baseline": {"inventory": repeat},
    }


@given(KEYED, KEYED, st.sampled_from([None, 0, 2]), st.sampled_from(["", " ", "\n", " x", "]", "\t\r\n", "1"]))
@settings(max_examples=examples(300))
def test_loads_shared_reads_what_json_reads(value: object, repeat: object, indent: int | None, tail: str) -> None:
    for document in (value, _with_repeats(value, repeat)):
        text = json.dumps(document, indent=indent, ensure_ascii=indent is None) + tail
        data = text.encode("utf-8", "surrogatepass")
        ours, theirs = _outcome(lambda d: jsontext.loads_shared(d, "inventory"), data), _outcome(json.loads, data)
        assert ours[0] == theirs[0]
        assert same_json(ours[1], theirs[1])


TOKENS = ['{', '}', '[', ']', '"inventory"', '"readings"', '"a"', ':', ',', '1', '2', ' ', '\n', '{"x":1}', '{"x":12}',
          '{"x":1', '"s"', '\\', '"', 'null', 'NaN', '-', '.5', 'e', '\ud800', '\x00']  # fmt: skip


@given(st.lists(st.sampled_from(TOKENS), max_size=40))
@settings(max_examples=examples(1000))
def test_any_token_text_has_json_outcome(tokens: list[str]) -> None:
    """Texts of JSON's tokens and an object repeated or nearly (``{"x":1}`` then ``{"x":12}``):
    every text reads as json reads it, or fails as json fails."""
    for text in ("".join(tokens), '{"readings":[{"inventory":{"x":1}}],"inventory":' + "".join(tokens)):
        data = text.encode("utf-8", "surrogatepass")
        ours, theirs = _outcome(lambda d: jsontext.loads_shared(d, "inventory"), data), _outcome(json.loads, data)
        assert ours[0] == theirs[0], text
        assert same_json(ours[1], theirs[1]), text


def test_loads_shared_reads_a_repeat_once() -> None:
    inventory = {"devices": [{"id": "0000:05:00.0", "partition": {"index": 0}}], "cpus": 8}
    text = json.dumps(_with_repeats([1, {"inventory": inventory}], inventory), separators=(",", ":"))

    state = jsontext.loads_shared(text.encode(), "inventory")

    assert state == json.loads(text)
    assert state["readings"][0]["inventory"] is state["readings"][1]["inventory"] is state["baseline"]["inventory"]
    assert state["a"][1]["inventory"] is state["baseline"]["inventory"]
    # a number is not self-delimiting: "1" then "12" are two values, never a repeat
    assert jsontext.loads_shared(b'{"inventory":{"a":1},"b":{"inventory":{"a":12}}}', "inventory") == {
        "inventory": {"a": 1},
        "b": {"inventory": {"a": 12}},
    }


@given(KEYED, KEYED)
@settings(max_examples=examples(300))
def test_dumps_shared_is_json_dumps(value: object, repeat: object) -> None:
    for document in (value, _with_repeats(value, repeat), _with_repeats(value, {"x": repeat})):
        assert _outcome(lambda v: jsontext.dumps_shared(v, "inventory"), document) == _outcome(
            lambda v: json.dumps(v, separators=(",", ":")), document
        )


def test_dumps_shared_writes_each_object_as_itself() -> None:
    """Equal is not enough to share a text: key order and ``1``/``True``/``1.0`` tell them apart."""
    first, second, third = {"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": True, "b": 2.0}
    document = {"readings": [{"inventory": first}, {"inventory": second}], "baseline": {"inventory": third}}

    assert jsontext.dumps_shared(document, "inventory") == json.dumps(document, separators=(",", ":"))
    numbered = {"readings": [{"inventory": first}], "x": {1: first, 2.5: None, None: True}}  # the encoder's own keys
    assert jsontext.dumps_shared(numbered, "inventory") == json.dumps(numbered, separators=(",", ":"))
    looped: dict[str, object] = {"inventory": {}}
    looped["readings"] = [looped]
    assert _outcome(lambda v: jsontext.dumps_shared(v, "inventory"), looped) == _outcome(json.dumps, looped)


def _replayed(text: str, fresh: object, encoded: bool = False) -> tuple[object, str]:
    """What the tick does: read a state, put a new reading holding ``fresh`` after the last one, write
    it with the texts the read gave (and, ``encoded``, with ``fresh``'s own text, as
    :func:`spurinv.jsontext.dumps` writes it); and what json writes for the same value."""
    texts: jsontext.Texts = {}
    state = jsontext.loads_shared(text.encode("utf-8", "surrogatepass"), "inventory", texts)
    after = {**state, "readings": [state["readings"][-1], {"inventory": fresh}]}
    mine: jsontext.Texts = {id(fresh): (fresh, jsontext.dumps(fresh))} if encoded else {}
    return jsontext.dumps_shared(after, "inventory", texts, mine), json.dumps(after, separators=(",", ":"))


@given(KEYED, st.sampled_from([None, 0]), st.sampled_from(["same", "copy", "loose"]))
@settings(max_examples=examples(300))
def test_dumps_shared_with_the_texts_read_is_json_dumps(repeat: object, indent: int | None, fresh: str) -> None:
    inventory = {"devices": [repeat], "cpus": 8}
    text = json.dumps(_with_repeats([1], inventory), indent=indent)
    new = {
        "same": inventory,
        "copy": json.loads(json.dumps(inventory)),
        "loose": {"cpus": 8.0 if fresh else True, "devices": [repeat]},  # equal, written otherwise
    }[fresh]
    for encoded in (False, True):
        ours, theirs = _replayed(text, new, encoded)
        assert ours == theirs


def test_dumps_shared_writes_a_read_object_as_itself() -> None:
    """A text read is reused only when it is the encoder's text of an equal value: not for
    keys in another order, nor for a text whose duplicate key the read dropped."""
    for stored, fresh in (
        ('{"b":2,"a":1}', {"a": 1, "b": 2}),  # equal, not the same text
        ('{"1":"a","1":"b"}', {1: "a", "1": "b"}),  # the same text, not equal
        ('{"a":1}', {"a": 1}),  # both: shared
    ):
        text = f'{{"readings":[{{"inventory":{stored}}}],"baseline":{{"inventory":{stored}}}}}'
        for encoded in (False, True):
            ours, theirs = _replayed(text, fresh, encoded)
            assert ours == theirs


def test_dumps_shared_takes_an_encoded_text_for_that_object_only() -> None:
    """``encoded`` names each object with its text; an entry whose object is not the one at that
    id (another that lived there) is not its text."""
    fresh, other = {"a": 1}, {"a": 2}
    document = {"readings": [{"inventory": fresh}], "baseline": {"inventory": fresh}}

    assert jsontext.dumps_shared(document, "inventory", None, {id(fresh): (other, '{"a":2}')}) == json.dumps(
        document, separators=(",", ":")
    )
    assert jsontext.dumps_shared(document, "inventory", None, {id(fresh): (fresh, '{"a":1}')}) == json.dumps(
        document, separators=(",", ":")
    )


def test_shared_walks_a_bounded_part_of_any_file(monkeypatch) -> None:
    """Past a thousand members walked here (a state has some forty), the C scanner and encoder do
    it all: a 16 MiB file of small members costs what json costs, not a Python loop each."""
    small = {"readings": [{"inventory": {"a": 1}}] * 2, "baseline": {"inventory": {"a": 1}}}
    large = {"readings": [{"inventory": {"a": number}} for number in range(3000)], "x": list(range(3000))}
    whole: list[object] = []

    def loads(data: bytes) -> object:
        whole.append(data)
        return json.loads(data)

    def dumps(value: object) -> str:
        whole.append(value)
        return json.dumps(value, separators=(",", ":"))

    monkeypatch.setattr(jsontext, "loads", loads)
    monkeypatch.setattr(jsontext, "dumps", dumps)

    for document in (small, large):
        text = json.dumps(document, separators=(",", ":"))
        assert jsontext.loads_shared(text.encode(), "inventory") == document
        assert jsontext.dumps_shared(document, "inventory") == text

    assert whole == [json.dumps(large, separators=(",", ":")).encode(), large]


def test_shared_skips_a_bounded_run_of_whitespace(monkeypatch) -> None:
    """The walk skips whitespace between tokens in Python, a character at a time: past
    ``_SPACES`` of it (an indented state has a few hundred), json does it all. A 16 MiB state of
    spaces took 1 s of CPU in that loop, against json's 10 ms."""
    whole: list[bytes] = []

    def loads(data: bytes) -> object:
        whole.append(data)
        return json.loads(data)

    monkeypatch.setattr(jsontext, "loads", loads)
    document = {"readings": [{"inventory": {"a": 1}}] * 2, "baseline": {"inventory": {"a": 1}}}
    indented = json.dumps(document, indent=8).encode()
    padded = b"{" + b" \t\r\n" * (jsontext._SPACES // 4 + 1) + json.dumps(document).encode()[1:]

    assert jsontext.loads_shared(indented, "inventory") == document
    assert whole == []
    assert jsontext.loads_shared(padded, "inventory") == document
    assert whole == [padded]


def test_loads_shared_takes_a_known_text_as_its_value_unparsed() -> None:
    """``known``: an object under the key with that very text is the value given, the same
    object; any other text (one it begins, one that begins with it) is read as always."""
    value = {"a": 1, "b": [None, "x"]}
    text = jsontext.dumps(value)
    document = f'{{"r":[{{"inventory":{text}}},{{"inventory":{{"a":12}}}}],"baseline":{{"inventory":{text[:-1]},"c":2}}}}}}'
    texts: jsontext.Texts = {}

    read = jsontext.loads_shared(document.encode(), "inventory", texts, (text, value))

    assert read == json.loads(document)
    assert read["r"][0]["inventory"] is value
    assert read["r"][1]["inventory"] == {"a": 12}
    assert read["baseline"]["inventory"] == {"a": 1, "b": [None, "x"], "c": 2}
    assert texts[id(value)] == (value, text)


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b'{"steady":{"a":1},"x":{"steady":[2]}}', [2]),  # the last one, wherever it is
        (b'{"steady":{"a":"\\u00e9"}}', {"a": "\u00e9"}),
        (b'{"steady": {"a":1}}', None),  # the scanner starts at the value: no whitespace before it
        (b'{"steady":{"a":1', None),
        (b'{"steadyx":1}', None),
        (b'{"steady":\xff}', None),
        (b"", None),
        (b"[12345678]", None),  # no such name: nothing, not what a read past where it would end finds
        (b'"steady":{"a":1}', {"a": 1}),  # at the very start
    ],
)
def test_last_member_reads_the_value_after_the_last_name(data: bytes, found: object) -> None:
    assert jsontext.last_member(data, "steady") == found
