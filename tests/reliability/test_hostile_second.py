"""Hostile input, second follow-up (issue #21, a second attacker): each test reproduces one
problem found after the two fix rounds and failed before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

# --- a name that is not UTF-8 under a CDI directory or sysfs (F1) ---------------------------------


def _non_utf8(directory: Path, stem: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + stem


# A bad CDI spec is a flag (the run goes on); a sysfs name that is not a PCI address fails the
# discovery (74, as an ASCII one does), but the failed reading is saved and the run says why.
EXPECTED = {"cdi-file": 0, "sysfs-dangling-link": 74}


@pytest.mark.parametrize("where", sorted(EXPECTED))
def test_a_name_that_is_not_utf8_is_escaped_and_the_run_saves(where, root_copy, state_path, spurinv):
    """``os.listdir`` gives ``bad\\udcff.json``; the problem naming it reached the state and the
    output, and every run exited 70 (PydanticSerializationError) with nothing saved."""
    root = root_copy("mi300x-spx")
    if where == "cdi-file":
        (root / "etc" / "cdi").mkdir(parents=True, exist_ok=True)
        with open(_non_utf8(root / "etc" / "cdi", b"bad\xff.json"), "w") as spec:
            spec.write("{not json")
    else:
        os.symlink(b"../../../devices/nowhere", _non_utf8(root / "sys" / "bus" / "pci" / "devices", b"0000:ff:00.\xff"))

    discovered = spurinv("discover", "--json", "--root", root)
    ran = spurinv("refresh", "--json", "--root", root, "--state", state_path)

    assert ran.code == EXPECTED[where], ran
    assert discovered.code in (0, 65, 74), discovered
    assert "Traceback" not in ran.err + discovered.err
    saved = state_path.read_bytes().decode("utf-8")  # saved, and valid UTF-8
    assert "\\xff" in saved, saved[:2000]
    assert "\\xff" in discovered.out


@given(st.text())
def test_escaped_text_is_always_valid_utf8_and_plain_text_is_untouched(text):
    from spurinv.sources.report import escaped

    shown = escaped(text)
    shown.encode("utf-8")
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        assert shown == text
