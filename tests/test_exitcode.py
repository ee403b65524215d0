"""Exit statuses come from types and errno numbers, in one place, never from message text."""

from __future__ import annotations

import errno
import os

import pytest

from spurinv import exitcode
from spurinv.state import file as state_file
from spurinv.state import store


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (errno.ENOSPC, exitcode.IOERR),
        (errno.EDQUOT, exitcode.IOERR),
        (errno.EIO, exitcode.IOERR),
        (errno.EFBIG, exitcode.IOERR),
        (errno.EACCES, exitcode.CANTCREAT),
        (errno.ELOOP, exitcode.CANTCREAT),
        (errno.ENOTDIR, exitcode.CANTCREAT),
        (None, exitcode.CANTCREAT),
    ],
)
def test_a_file_error_maps_from_its_errno(number, expected):
    assert exitcode.of_errno(number) == expected
    assert store.StoreError("whatever the words say: symlink, disk full", number).exit_code == expected


def test_the_stdlib_agrees_with_the_sysexits_table():
    for code, name, _meaning in exitcode.TABLE:
        if name.startswith("EX_"):
            assert getattr(os, name) == code, name


def test_state_load_errors_carry_their_status():
    assert state_file.Corrupt("x").exit_code == exitcode.DATAERR
    assert state_file.NewerSchema("x").exit_code == exitcode.DATAERR


def test_a_symlinked_state_file_is_refused_by_errno_not_by_wording(tmp_path, cli, built):
    """``load_state`` used to look for the word "symlink" in the message; the errno decides now."""
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    link = tmp_path / "state" / "state.json"
    link.parent.mkdir()
    link.symlink_to(victim)

    result = cli("refresh", "--root", built("mi300x-spx"), "--state", link, "--confirm-interval", "0")

    assert exitcode.CANTCREAT == result.code, result.err
    assert victim.read_text() == "someone else's file\n"
    assert link.is_symlink()
