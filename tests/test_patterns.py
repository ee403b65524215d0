"""The str-method matchers on the tick's path accept exactly what their regular expressions did.

The tick imports no ``re`` (it cost ~8 ms of a ~50 ms tick), so the sysfs name shapes are
checked with str methods; each is held here to the pattern it replaced, quirks included
(``$`` before a final newline, ``\\d`` for any Unicode decimal digit).
"""

from __future__ import annotations

import re

from effort import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spurinv.inventory.sources import cdispec, link
from spurinv.inventory.sources.attribute import is_bdf, numbered
from spurinv.inventory.sources.status import escaped, has_surrogate

BDF = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
SPEED = re.compile(r"^([0-9]{1,3}(?:\.[0-9]{1,2})?) GT/s(?: PCIe)?$")
KIND = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$")
NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?$")
VERSION = r"[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}"


def texts(alphabet: str, pieces: list[str]) -> st.SearchStrategy[str]:
    """Text near the shape: random characters, and pieces of valid spellings glued together."""
    return st.text(alphabet=st.sampled_from(list(alphabet)), max_size=16) | st.lists(st.sampled_from(pieces), max_size=6).map(
        "".join
    )


BDFISH = texts("0123456789abcdefABx:.\n ٣", ["0000", ":", "00", ".", "0", "7", "8", "ff", "\n", "000000000", "a"])


@given(BDFISH)
@example("0000:03:00.0\n")
@example("0000:03:00.0\n\n")
@settings(max_examples=examples(1000))
def test_bdf_is_the_pattern(text: str) -> None:
    match = BDF.match(text)
    assert is_bdf(text) == (match is not None)


@given(st.sampled_from(["card", "renderD", "amdgpu_xcp.", "amdgpu_xcp_", "/dev/nvidia"]),
       texts("0123456789٣x-\n", ["1", "28", "\n", "٣", "-DP-1", "x"]))  # fmt: skip
@example("card", "1\n")
@example("card", "")
@settings(max_examples=examples(1000))
def test_numbered_is_the_pattern(prefix: str, tail: str) -> None:
    for text in (prefix + tail, tail):
        match = re.match(re.escape(prefix) + r"(\d+)$", text)
        assert numbered(text, prefix) == (match[1] if match else None)


@given(texts("0123456789. GT/sPCIe\n", ["8", "16.0", "2.5", " GT/s", " PCIe", ".", "1234", "\n", "x"]))
@example("8.0 GT/s PCIe")
@settings(max_examples=examples(1000))
def test_speed_is_the_pattern(text: str) -> None:
    match = SPEED.match(text.strip())
    expected = None if match is None else f"{match[1] if '.' in match[1] else match[1] + '.0'} GT/s"
    assert link.parse_speed(text) == expected


@given(texts("az09.-/_:AZ\n", ["amd.com", "/", "gpu", "nvidia.com", "-", ".", "_", ":", "\n", "A"]))
@example("amd.com/gpu\n")
@settings(max_examples=examples(1000))
def test_cdi_names_are_the_patterns(text: str) -> None:
    assert cdispec.valid_kind(text) == (KIND.match(text) is not None)
    assert cdispec.valid_name(text) == (NAME.match(text) is not None)
    assert cdispec.valid_version(text) == (re.fullmatch(VERSION, text) is not None)


@given(texts("0123456789.x\n", ["0", "1", "123456789", "1234567890", ".", "\n"]))
def test_cdi_version_is_the_pattern(text: str) -> None:
    assert cdispec.valid_version(text) == (re.fullmatch(VERSION, text) is not None)


@given(st.text())
@example("bad\udcff.json")
@example("\ud800")
def test_surrogates_are_the_pattern(text: str) -> None:
    assert has_surrogate(text) == (re.search("[\ud800-\udfff]", text) is not None)
    assert (escaped(text) == text) == (not has_surrogate(text))
