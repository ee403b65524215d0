"""Property: whatever a config file holds, its problems come out as one plain line each, naming
the file and a key, never in pydantic's words and never as a crash."""

from __future__ import annotations

from typing import Any

from effort import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spurinv.config import settings as config
from spurinv.config.problem import Problems

KEYS = sorted({key for model in config.SECTIONS.values() for key in model.model_fields} | {"timout", "x", ""})
NAMES = sorted(set(config.SECTIONS) | {"nonsense", "controler", "Node"})
SCALARS = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.booleans(),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), SCALARS, max_size=2))
SECTION = st.one_of(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6), SCALARS)
FILES = st.dictionaries(st.one_of(st.sampled_from(NAMES), st.sampled_from(KEYS)), SECTION, max_size=6)
WORDS = ("Input should", "Extra inputs", "instance of", "Value error", "valid dictionary", "[type=")


@settings(max_examples=examples(300), deadline=None)
@given(FILES)
def test_every_problem_is_one_plain_line_naming_the_file(raw: dict[str, Any]):
    try:
        config.Config.model_validate(raw)
    except ValidationError as exc:
        lines = Problems(config.Config, "/etc/spurinv/config.toml", {}, {}).lines(exc)
    else:
        return

    assert lines
    for _origin, line in lines:
        assert line.startswith("/etc/spurinv/config.toml: ")
        assert [line] == line.splitlines()
        assert not any(word in line for word in WORDS), line
