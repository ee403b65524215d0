"""The test doubles' plumbing (tests/doubles.py, tests/jsonlite.py) changes nothing they do: the
JSON they read and write is json's, byte for byte, and a program runs its double's current code."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonlite
import pytest
from doubles import TESTS, checked_bytecode, program
from effort import examples
from factories import same_json
from hypothesis import given, settings
from hypothesis import strategies as st

# text with lone surrogates too: scontrolfake logs argv decoded with surrogateescape
TEXT = st.text(st.characters(exclude_categories=()))
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner) | st.dictionaries(TEXT, inner), max_leaves=30)


@given(VALUES)
@settings(max_examples=examples(150))
def test_dumps_is_json_dumps(value: object) -> None:
    assert jsonlite.dumps(value) == json.dumps(value)


@given(VALUES, st.sampled_from([None, 2]), st.sampled_from(["", " ", "\n", "\t\r\n "]))
@settings(max_examples=examples(150))
def test_loads_reads_what_json_reads(value: object, indent: int | None, space: str) -> None:
    text = space + json.dumps(value, indent=indent) + space

    assert same_json(jsonlite.loads(text), json.loads(text))


@pytest.mark.parametrize(
    "data",
    [b'{"a": [1]}', bytearray(b" [2.5] "), b'\xef\xbb\xbf{"b": null}', '["\u00e9"]'.encode("utf-16"), b"{not json", None, 7],
)
def test_loads_takes_what_json_loads_takes(data: object) -> None:
    """json.loads reads bytes and bytearray too (UTF-8, -16 or -32, found from the first bytes),
    and refuses another type with its own TypeError: jsonlite said "a bytes-like object is
    required" of every bytes, and "has no len()" of None."""

    def outcome(loads: Any) -> object:
        try:
            return loads(data)
        except (TypeError, ValueError) as exc:
            return type(exc).__name__, str(exc)

    assert outcome(jsonlite.loads) == outcome(json.loads)


def test_errors_are_jsons_own_where_json_was_never_imported() -> None:
    """A double's process has no json.decoder, which the C scanner needs to raise its error."""
    script = (
        "import sys\n"
        f"sys.path.append({str(TESTS)!r})\n"
        "import jsonlite\n"
        'print(jsonlite.dumps(jsonlite.loads(\' {"a": [1, 2.5, null, "\\\\u00e9"]}\\n\')))\n'
        "print('json' in sys.modules, 're' in sys.modules)\n"
        "for bad in ('{not json', '{\"a\": 1', '', ' [1] x', '\\ufeff{}'):\n"
        "    for name in [name for name in sys.modules if name.split('.')[0] == 'json']:\n"
        "        del sys.modules[name]\n"
        "    try:\n"
        "        jsonlite.loads(bad)\n"
        "    except ValueError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "try:\n"
        "    jsonlite.dumps({'a': {1}})\n"
        "except TypeError as exc:\n"
        "    print(exc)\n"
    )
    ran = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, check=False)

    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        '{"a": [1, 2.5, null, "\\u00e9"]}',
        "False False",  # what the doubles' JSON is for: neither json nor re imported
        "JSONDecodeError Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "JSONDecodeError Expecting ',' delimiter: line 1 column 8 (char 7)",
        "JSONDecodeError Expecting value: line 1 column 1 (char 0)",
        "JSONDecodeError Extra data: line 1 column 6 (char 5)",
        "JSONDecodeError Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
        "Object of type set is not JSON serializable",
    ]


def test_a_program_runs_its_double_with_argv_and_without_a_shell(tmp_path: Path) -> None:
    scontrol = program(tmp_path / "scontrol", "spurstandin", "scontrol")
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"version": "spur 9.9.9 (abc)", "nodes": {}}))

    ran = subprocess.run([scontrol, "--version"], capture_output=True, text=True, check=False,
                         env={**os.environ, "SPUR_STANDIN_STATE": str(cluster)})  # fmt: skip

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "spur 9.9.9 (abc)\n", "")
    assert scontrol.read_text().startswith(f"#!{sys.executable} -S\n")  # exec'd by the kernel, as the real one
    assert os.access(scontrol, os.X_OK)


def test_bytecode_is_checked_against_the_source_not_its_mtime(tmp_path: Path) -> None:
    """An edit of the same size in the same second (scripts/mutate's) runs the edit, not the old code."""
    source = tmp_path / "double.py"
    source.write_text("ANSWER = 1\n")
    checked_bytecode(source)
    pyc = Path(importlib.util.cache_from_source(str(source)))
    stat = source.stat()
    source.write_text("ANSWER = 2\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    probe = [sys.executable, "-S", "-c", f"import sys; sys.path.append({str(tmp_path)!r}); import double; print(double.ANSWER)"]

    assert subprocess.run(probe, capture_output=True, text=True, check=True, env=env).stdout == "2\n"
    before = pyc.read_bytes()
    checked_bytecode(source)
    assert pyc.read_bytes() != before  # rewritten for the new source
    assert subprocess.run(probe, capture_output=True, text=True, check=True, env=env).stdout == "2\n"
