"""The tick's cache of parsed CDI specs: a spec is taken from it only while it is the same file.

Each invalidation is tested by a change that keeps everything else of the file's identity, so a
cache that ignored that one field would return the devices of the file it parsed before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spurinv.inventory.root import Root
from spurinv.inventory.sources import cdi
from spurinv.inventory.sources.status import Report


def _spec(names: list[str], kind: str = "example.com/gpu") -> str:
    devices = [{"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/dri/renderD{128 + i}"}]}}
               for i, name in enumerate(names)]  # fmt: skip
    return json.dumps({"cdiVersion": "0.6.0", "kind": kind, "devices": devices})


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as settled (written long enough ago): a test cannot wait two seconds."""
    monkeypatch.setattr(cdi, "SETTLED_NS", -(10**12))


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "etc" / "cdi"
    directory.mkdir(parents=True)
    return directory


def _read(root: Path, cache: cdi.SpecCache | None) -> tuple[list[str], Report]:
    report = Report("cdi")
    found = cdi.read_cdi(Root(str(root)), report, (), cache)
    return sorted(device["qualified"] for device in found), report


def _cached(root: Path) -> cdi.SpecCache:
    """A cache filled by one read, as the next tick loads it from the file."""
    cache = cdi.SpecCache()
    _read(root, cache)
    assert cache.entries, "nothing was cached"
    text = cache.text()
    assert text is not None
    return cdi.SpecCache.from_text(text)


def test_an_unchanged_spec_is_not_parsed_again(tmp_path, spec_dir, settled, monkeypatch):
    (spec_dir / "a.json").write_text(_spec(["0", "1"]))
    fresh, fresh_report = _read(tmp_path, None)
    cache = _cached(tmp_path)

    def refuse(*_args: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(cdi, "parse_spec", refuse)
    again, report = _read(tmp_path, cache)

    assert again == fresh == ["example.com/gpu=0", "example.com/gpu=1"]
    assert report.as_dict() == fresh_report.as_dict()
    assert not cache.changed


def _swap_keeping_size_and_mtime(path: Path, text: str) -> None:
    """Replace ``path`` by a new file (a new inode) of the same size and mtime."""
    old = path.stat()
    assert len(text) == old.st_size
    new = path.with_name(path.name + ".new")  # not a spec name: listed, never read
    new.write_text(text)
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(new, path)


def test_a_new_inode_with_the_same_size_and_mtime_is_read_again(tmp_path, spec_dir, settled):
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    cache = _cached(tmp_path)

    _swap_keeping_size_and_mtime(path, _spec(["0", "7"]))
    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=7"]
    assert cache.changed


def _identity(path: Path) -> list[int]:
    info = os.lstat(path)
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


@pytest.mark.parametrize("field", ["dev", "ino", "size", "mtime", "ctime"])
def test_any_field_of_the_identity_that_differs_reads_the_file(tmp_path, spec_dir, field):
    """An entry made when the file had another ``field`` (a rewrite in place with the size and
    mtime put back leaves only the ctime changed): the file is read, never the entry."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0"]))
    identity = _identity(path)
    identity[["dev", "ino", "size", "mtime", "ctime"].index(field)] -= 1
    stale = [*identity, "example.com/gpu", [["stale", []]]]
    cache = cdi.SpecCache({str(path): stale})

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0"]


def test_a_rewrite_in_place_gets_a_new_ctime_and_is_read_again(tmp_path, spec_dir, settled):
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    cache = _cached(tmp_path)
    before = path.stat()
    text = _spec(["0", "8"])
    for _attempt in range(100_000):  # until the coarse clock the kernel stamps ctime with moves on
        with open(path, "w") as handle:
            handle.write(text)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if path.stat().st_ctime_ns != before.st_ctime_ns:
            break
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns  # only the ctime tells the two files apart

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=8"]


def test_a_spec_swapped_for_a_symlink_is_flagged_not_served_from_the_cache(tmp_path, spec_dir, settled):
    path = spec_dir / "a.json"
    path.write_text(_spec(["0"]))
    cache = _cached(tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    os.replace(path, elsewhere)  # the same inode, now behind a link
    path.symlink_to(elsewhere)

    found, report = _read(tmp_path, cache)

    assert found == []
    assert ["not a regular file" in flag["reason"] for flag in report.flags] == [True]
    assert cache.entries == {}


def test_a_removed_spec_is_gone_and_leaves_the_cache(tmp_path, spec_dir, settled):
    (spec_dir / "a.json").write_text(_spec(["0"]))
    (spec_dir / "b.json").write_text(_spec(["1"], kind="example.com/other"))
    cache = _cached(tmp_path)
    (spec_dir / "a.json").unlink()

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/other=1"]
    assert list(cache.entries) == [str(spec_dir / "b.json")]
    assert cache.changed


def test_a_file_written_within_the_settling_time_is_not_cached(tmp_path, spec_dir):
    """Its ctime is too close to the clock: a second write in the same tick of a coarse clock
    could leave the whole identity as it is (git's racy-clean case)."""
    (spec_dir / "a.json").write_text(_spec(["0"]))
    cache = cdi.SpecCache()

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0"]
    assert cache.entries == {}


def test_a_spec_with_a_problem_is_not_cached(tmp_path, spec_dir, settled):
    (spec_dir / "a.json").write_text('{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": []}')
    cache = cdi.SpecCache()

    _found, report = _read(tmp_path, cache)

    assert [flag["reason"] for flag in report.flags] == ["no devices"]
    assert cache.entries == {}


@pytest.mark.parametrize("damage", ["a byte", "truncated", "no digest", "not ours"])
def test_a_damaged_cache_file_is_no_cache(tmp_path, spec_dir, settled, damage):
    (spec_dir / "a.json").write_text(_spec(["0"]))
    cache = cdi.SpecCache()
    _read(tmp_path, cache)
    text = cache.text()
    assert text is not None
    assert cdi.SpecCache.from_text(text).known == cache.entries
    damaged = {
        "a byte": text.replace(b'"0"', b'"9"'),
        "truncated": text[:-20],
        "no digest": text.partition(b"\n")[2],
        "not ours": b"{}",
    }[damage]

    assert cdi.SpecCache.from_text(damaged).known == {}


def test_a_spec_replaced_while_it_is_read_is_not_cached(tmp_path, spec_dir, settled, monkeypatch):
    """What was read may be the old file or the new one: neither is the file the entry would name."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0"]))
    from spurinv.inventory.sources.attribute import read_text as real

    def read_then_replace(file_path: str, limit: int) -> str:
        text = real(file_path, limit)
        _swap_keeping_size_and_mtime(path, _spec(["5"]))
        return text

    monkeypatch.setattr(cdi, "read_text", read_then_replace)
    cache = cdi.SpecCache()

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0"]
    assert cache.entries == {}


def test_a_cache_too_large_to_be_read_back_is_not_written(tmp_path, spec_dir, settled, monkeypatch):
    """From_text reads at most MAX_CACHE bytes: a larger file would be written on every tick and
    never read (names escaped in JSON can be three times their spec's bytes)."""
    (spec_dir / "a.json").write_text(_spec(["0"]))
    cache = cdi.SpecCache()
    _read(tmp_path, cache)
    text = cache.text()
    assert text is not None

    monkeypatch.setattr(cdi, "MAX_CACHE", len(text) - 1)

    assert cache.text() is None
    assert cdi.SpecCache.from_text(text).known == {}
