"""spurinv.jsontext gives what the json package gives: same values, same text, same errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv import jsontext

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=30)


def _same(left: object, right: object) -> bool:
    """Equal, counting NaN equal to NaN (json reads "NaN" as a float that equals nothing)."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left) and math.isnan(right):
        return True
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[key], right[key]) for key in left)
    return type(left) is type(right) and left == right


def _outcome(function: object, data: object) -> tuple[str, object]:
    try:
        return "value", function(data)
    except (ValueError, RecursionError, TypeError) as exc:
        return type(exc).__name__, str(exc)


@given(VALUES, st.booleans())
@settings(max_examples=150)
def test_dumps_is_json_dumps(value: object, sort_keys: bool) -> None:
    assert jsontext.dumps(value, sort_keys=sort_keys) == json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)


@given(VALUES, st.sampled_from([None, 2]), st.sampled_from(["", " ", "\n", " x", "]", "\t\r\n"]))
@settings(max_examples=150)
def test_loads_reads_what_json_reads(value: object, indent: int | None, tail: str) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=indent is None) + tail
    for data in (text, text.encode("utf-8", "surrogatepass")):
        ours, theirs = _outcome(jsontext.loads, data), _outcome(json.loads, data)
        assert ours[0] == theirs[0]
        assert _same(ours[1], theirs[1])


@given(st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE+- \t\n\rtrufalsnNIiy\\u\ufeff\ud800\x00é')))
@settings(max_examples=500)
def test_any_text_has_json_outcome(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16", "surrogatepass")):
        ours, theirs = _outcome(jsontext.loads, data), _outcome(json.loads, data)
        assert ours[0] == theirs[0]
        assert _same(ours[1], theirs[1])


def test_refusals_are_json_refusals() -> None:
    assert _outcome(jsontext.dumps, {"a": {1, 2}}) == _outcome(json.dumps, {"a": {1, 2}})
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    assert _outcome(jsontext.dumps, nested)[0] == "RecursionError"
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
