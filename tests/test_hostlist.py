"""Slurm's hostlist syntax: the one split at the commas outside brackets (gres.conf's NodeName=,
our File= ranges)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spurinv import hostlist, slurmdynamic
from spurinv.inventory import slurmconf


def _depth_zero_commas(text: str) -> int:
    depth, count = 0, 0
    for c in text:
        depth += (c == "[") - (c == "]")
        count += c == "," and depth == 0
    return count


@given(st.text(alphabet="ab01-,[]", max_size=30))
def test_the_parts_join_back_to_the_text_and_hold_no_outer_comma(text):
    parts = hostlist.split(text)

    assert ",".join(parts) == text
    assert len(parts) == _depth_zero_commas(text) + 1


def test_brackets_keep_their_commas():
    assert hostlist.split("d[1-4,7],e,,f[01-02]") == ["d[1-4,7]", "e", "", "f[01-02]"]
    assert slurmdynamic.in_hostlist("d7", "x,d[1-4,7]")
    assert slurmconf.expand_all("/dev/nvidia[0-1],/dev/x") == ["/dev/nvidia0", "/dev/nvidia1", "/dev/x"]
