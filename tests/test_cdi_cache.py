"""The tick's cache of parsed CDI specs: a spec is taken from it only while its bytes are the same.

Each change is one that keeps what a cache by file identity would look at (size, mtime, and for
an in-place or mapped write the inode and ctime too), so a cache that trusted the file's
metadata would return the devices of the spec it parsed before.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
from pathlib import Path

import pytest

from spurinv.inventory.root import Root
from spurinv.inventory.sources import cdi, cdispec
from spurinv.inventory.sources.status import Report


def blake(data: bytes) -> str:
    """What the cache keys a spec by (and signs itself with): BLAKE2b, 32 bytes, in hex."""
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def _spec(names: list[str], kind: str = "example.com/gpu") -> str:
    devices = [{"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/dri/renderD{128 + i}"}]}}
               for i, name in enumerate(names)]  # fmt: skip
    return json.dumps({"cdiVersion": "0.6.0", "kind": kind, "devices": devices})


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


def test_an_unchanged_spec_is_not_parsed_again(tmp_path, spec_dir, monkeypatch):
    (spec_dir / "a.json").write_text(_spec(["0", "1"]))
    fresh, fresh_report = _read(tmp_path, None)
    cache = _cached(tmp_path)

    def refuse(*_args: object) -> None:
        raise AssertionError("parsed again")

    monkeypatch.setattr(cdispec, "parse_spec", refuse)  # cdi imports it for each spec it parses
    again, report = _read(tmp_path, cache)

    assert again == fresh == ["example.com/gpu=0", "example.com/gpu=1"]
    assert report.as_dict() == fresh_report.as_dict()
    assert not cache.changed


def test_a_cached_yaml_spec_imports_no_yaml(tmp_path, spec_dir, monkeypatch):
    """Importing PyYAML costs the tick ~10 ms: a YAML spec whose bytes are those cached is hashed,
    not parsed, and the bound on YAML asks nothing of PyYAML within the smaller budget."""
    (spec_dir / "a.yaml").write_text('cdiVersion: "0.6.0"\nkind: example.com/gpu\ndevices:\n- name: "0"\n')
    cache = _cached(tmp_path)
    monkeypatch.setitem(sys.modules, "yaml", None)  # any `import yaml` now raises ImportError

    found, report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0"]
    assert report.flags == []


def _swap_keeping_size_and_mtime(path: Path, text: str) -> None:
    """Replace ``path`` by a new file (a new inode) of the same size and mtime."""
    old = path.stat()
    assert len(text) == old.st_size
    new = path.with_name(path.name + ".new")  # not a spec name: listed, never read
    new.write_text(text)
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(new, path)


def test_a_new_inode_with_the_same_size_and_mtime_is_read_again(tmp_path, spec_dir):
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    cache = _cached(tmp_path)

    _swap_keeping_size_and_mtime(path, _spec(["0", "7"]))
    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=7"]
    assert cache.changed


def test_an_entry_for_other_bytes_is_not_taken(tmp_path, spec_dir):
    """An entry whose digest is not that of the spec's bytes now (an entry of the format that
    named the file by its identity has none): the file is parsed, never the entry."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0"]))
    info = path.stat()
    identity = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    other = blake(_spec(["1"]).encode())
    cache = cdi.SpecCache({
        str(path): [other, "example.com/gpu", [["stale", []]]],
        str(spec_dir / "b.json"): [*identity, "example.com/gpu", [["stale", []]]],
    })  # fmt: skip
    (spec_dir / "b.json").write_text(_spec(["2"], kind="example.com/other"))

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/other=2"]
    assert [entry[0] for entry in cache.entries.values()] == [
        blake(path.read_bytes()),
        blake((spec_dir / "b.json").read_bytes()),
    ]


def test_a_rewrite_in_place_with_the_mtime_put_back_is_read_again(tmp_path, spec_dir):
    """The same inode, size and mtime; only the bytes differ (and whatever the ctime says)."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    cache = _cached(tmp_path)
    before = path.stat()
    with open(path, "r+") as handle:
        handle.write(_spec(["0", "8"]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=8"]


def test_a_spec_changed_through_a_shared_mapping_is_read_again(tmp_path, spec_dir):
    """A write through a writable shared mapping to a page already dirty moves no timestamp (ext4,
    tmpfs where /run/cdi lives): the inode, size, mtime and ctime all stay, the bytes change."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    data = path.read_bytes()
    edited = data.replace(b'"1"', b'"7"')
    assert len(edited) == len(data)
    assert edited != data
    with open(path, "r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapping:
        mapping[:] = data  # every page dirty: the one time update the mapping's writes get
        cache = _cached(tmp_path)
        before = path.stat()
        mapping[:] = edited
    after = path.stat()
    assert path.read_bytes() == edited
    assert (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )  # fmt: skip  (the premise: nothing but the bytes tells the two specs apart)

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=7"]
    assert cache.changed


def test_a_spec_swapped_for_a_symlink_is_flagged_not_served_from_the_cache(tmp_path, spec_dir):
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


def test_a_removed_spec_is_gone_and_leaves_the_cache(tmp_path, spec_dir):
    (spec_dir / "a.json").write_text(_spec(["0"]))
    (spec_dir / "b.json").write_text(_spec(["1"], kind="example.com/other"))
    cache = _cached(tmp_path)
    (spec_dir / "a.json").unlink()

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/other=1"]
    assert list(cache.entries) == [str(spec_dir / "b.json")]
    assert cache.changed


def test_a_spec_just_written_is_cached(tmp_path, spec_dir):
    """Its bytes are what was parsed, however recent its times: no settling time to wait out."""
    (spec_dir / "a.json").write_text(_spec(["0"]))
    cache = cdi.SpecCache()

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0"]
    assert list(cache.entries) == [str(spec_dir / "a.json")]


def test_a_spec_with_a_problem_is_not_cached(tmp_path, spec_dir):
    (spec_dir / "a.json").write_text('{"cdiVersion": "0.6.0", "kind": "example.com/gpu", "devices": []}')
    cache = cdi.SpecCache()

    _found, report = _read(tmp_path, cache)

    assert [flag["reason"] for flag in report.flags] == ["no devices"]
    assert cache.entries == {}


def test_a_spec_that_is_not_utf8_is_flagged_and_not_cached(tmp_path, spec_dir):
    data = _spec(["0"]).encode().replace(b'"0"', b'"\xff"')
    (spec_dir / "a.json").write_bytes(data)
    cache = cdi.SpecCache()

    found, report = _read(tmp_path, cache)

    assert found == []
    assert [flag["reason"] for flag in report.flags] == [f"not UTF-8 text (byte {data.index(0xFF)})"]
    assert cache.entries == {}


@pytest.mark.parametrize("damage", ["a byte", "truncated", "no digest", "not ours"])
def test_a_damaged_cache_file_is_no_cache(tmp_path, spec_dir, damage):
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


def test_a_spec_replaced_while_it_is_read_is_read_again_next_time(tmp_path, spec_dir, monkeypatch):
    """The entry names the bytes that were parsed, whichever file they came from: the spec there
    after the swap hashes otherwise, and the next read parses it."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0"]))
    from spurinv.inventory.sources.attribute import read_bytes as real

    def read_then_replace(file_path: str, limit: int) -> bytes:
        data = real(file_path, limit)
        _swap_keeping_size_and_mtime(path, _spec(["5"]))
        return data

    monkeypatch.setattr(cdi, "read_bytes", read_then_replace)
    cache = cdi.SpecCache()
    found, _report = _read(tmp_path, cache)
    assert found == ["example.com/gpu=0"]
    monkeypatch.undo()

    again, _report = _read(tmp_path, cdi.SpecCache.from_text(cache.text()))

    assert again == ["example.com/gpu=5"]


def test_a_cache_too_large_to_be_read_back_is_not_written(tmp_path, spec_dir, monkeypatch):
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


@pytest.mark.parametrize(
    "entry",
    [
        ["example.com/gpu", []],  # no device: a spec that parsed has one or more
        [5, [["0", []]]],  # a kind that is no text
        ["", [["0", []]]],
        ["example.com/gpu", [["0"]]],
        ["example.com/gpu", [[0, []]]],
        ["example.com/gpu", [["0", [7]]]],
        ["example.com/gpu", [["0", "/dev/x"]]],
        ["example.com/gpu", "0"],
    ],
)
def test_an_entry_that_is_not_what_a_parse_keeps_is_parsed_again(tmp_path, spec_dir, entry):
    """A cache whose own digest holds and whose entry carries the spec's digest, but not the
    shape a parse keeps (a hand edit): never served, the spec is parsed."""
    path = spec_dir / "a.json"
    path.write_text(_spec(["0", "1"]))
    writer = cdi.SpecCache()
    writer.entries = {str(path): [blake(path.read_bytes()), *entry]}
    text = writer.text()
    assert text is not None
    cache = cdi.SpecCache.from_text(text)
    assert cache.known == writer.entries

    found, _report = _read(tmp_path, cache)

    assert found == ["example.com/gpu=0", "example.com/gpu=1"]
    assert cache.entries[str(path)][1:] == ["example.com/gpu", [["0", ["/dev/dri/renderD128"]], ["1", ["/dev/dri/renderD129"]]]]


def test_a_cache_written_by_another_release_is_no_cache(tmp_path, spec_dir):
    """The digest covers the writer's version: another release's parse may differ, so its file
    (here the same body under a digest of the body alone) is no cache, and is still replaced."""
    (spec_dir / "a.json").write_text(_spec(["0"]))
    cache = cdi.SpecCache()
    _read(tmp_path, cache)
    text = cache.text()
    assert text is not None
    body = text.partition(b"\n")[2]
    other = blake(b"spurinv 0.0.1 CDI spec cache\n" + body).encode() + b"\n" + body

    assert cdi.SpecCache.from_text(other).known == {}
    assert cdi.SpecCache.from_text(blake(body).encode() + b"\n" + body).known == {}
    assert cdi.SpecCache.is_cache(other)


@pytest.mark.parametrize(
    "written",
    [
        pytest.param(lambda body: blake(b"spurinv 0.0.1 CDI spec cache\n" + body), id="another-release"),
        pytest.param(lambda body: hashlib.sha256(cdi._WRITER + body).hexdigest(), id="sha256-signed"),
        pytest.param(lambda body: blake(cdi._WRITER + body)[::-1], id="damaged"),  # a palindrome it is not
    ],
)
def test_a_file_that_is_no_cache_of_ours_is_replaced_even_with_no_spec_left(tmp_path, spec_dir, written):
    """A cache this release cannot read (another release's, signed with SHA-256 before BLAKE2b,
    damaged) is rewritten at the next read even when no spec is left to keep: it would otherwise
    outlive every spec. No file, or one of ours that says the same, is not rewritten."""
    (spec_dir / "a.json").write_text(_spec(["0"]))
    writer = cdi.SpecCache()
    _read(tmp_path, writer)
    body = (writer.text() or b"").partition(b"\n")[2]
    (spec_dir / "a.json").unlink()  # the spec is gone

    cache = cdi.SpecCache.from_text(written(body).encode() + b"\n" + body)
    found, _report = _read(tmp_path, cache)

    assert (found, cache.known, cache.entries, cache.changed) == ([], {}, {}, True)
    again = cdi.SpecCache.from_text(cache.text())
    _read(tmp_path, again)
    assert (again.stale, again.changed) == (False, False)
    for nothing in (None, b""):
        empty = cdi.SpecCache.from_text(nothing)
        _read(tmp_path, empty)
        assert not empty.changed


@pytest.mark.parametrize(
    ("data", "ours"),
    [
        (b"0" * 64 + b"\n{}", True),
        (b"0123456789abcdef" * 4 + b"\n{", True),
        (b"0123456789abcdef" * 4 + b"\n", False),  # a hex secret (openssl rand -hex 32)
        (b"0" * 64 + b"\n[controller]\n", False),
        (b"0" * 63 + b"\n{}", False),
        (b"0" * 65 + b"\n{}", False),
        (b"0" * 63 + b"g\n{}", False),
        (b"0" * 63 + b"A\n{}", False),
        (b"secret-token\n", False),
        (b"# my config\n[discovery]\n", False),
        (b"", False),
    ],
)
def test_a_file_is_taken_for_a_cache_only_by_a_hex_digest_then_a_json_object(data, ours):
    assert cdi.SpecCache.is_cache(data) is ours


def _steady(cli, root: Path, state: Path) -> None:
    for _ in range(2):
        result = cli("refresh", "--quiet", "--root", root, "--state", state, "--confirm-interval", "0")
        assert result.code == 0, result.err


def test_the_tick_never_writes_over_a_file_of_the_operators_at_the_cache_path(cli, tmp_path, monkeypatch):
    """The full run refuses a config file at ``<state>.cdi``; a state file moved to the name
    whose cache path is the config file is ticked without that run, and must leave it alone."""
    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    config = directory / "b.json.cdi"
    config.write_text("# my config\n[discovery]\n")
    config.chmod(0o600)
    monkeypatch.setenv("SPURINV_CONFIG", str(config))
    _steady(cli, root, directory / "a.json")
    assert cli("refresh", "--quiet", "--root", root, "--state", directory / "a.json").code == 0
    assert cdi.SpecCache.from_text((directory / "a.json.cdi").read_bytes()).known  # a tick writes one
    os.replace(directory / "a.json", directory / "b.json")

    result = cli("refresh", "--root", root, "--state", directory / "b.json")

    assert result.code == 0, result.err
    assert "unchanged" in result.out  # the tick ran
    assert config.read_text() == "# my config\n[discovery]\n"


@pytest.mark.parametrize(
    "planted",
    [
        b"0123456789abcdef" * 4 + b"\n",  # a hex secret, as `openssl rand -hex 32` prints it
        b"0123456789abcdef" * 4 + b"\n" + b"[controller]\n",
        b"0" * 64 + b"\n{" + b" " * cdi.MAX_CACHE,  # a cache's head, but more than the tick ever writes
    ],
    ids=["hex-secret", "hex-then-toml", "larger-than-a-cache"],
)
def test_the_tick_leaves_a_file_that_only_starts_like_a_cache(cli, tmp_path, planted):
    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    _steady(cli, root, state)
    cache = Path(f"{state}.cdi")
    cache.unlink(missing_ok=True)
    cache.write_bytes(planted)

    result = cli("refresh", "--root", root, "--state", state)

    assert result.code == 0, result.err
    assert "unchanged" in result.out  # the tick ran
    assert cache.read_bytes() == planted


def test_a_token_file_at_the_cache_path_is_refused_by_name(cli, tmp_path, monkeypatch):
    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    token = Path(f"{state}.cdi")
    token.write_text("secret-token\n")
    token.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f'[controller]\nurl = "http://127.0.0.1:9"\ntoken_file = "{token}"\n')
    config.chmod(0o600)
    monkeypatch.setenv("SPURINV_CONFIG", str(config))

    result = cli("refresh", "--quiet", "--root", root, "--state", state, "--confirm-interval", "0")

    assert result.code == 78
    assert f"token file {token}: that is the tick's CDI spec cache {token}; name a file of its own" in result.err
    assert token.read_text() == "secret-token\n"


def test_the_full_run_removes_only_the_temporaries_it_names(cli, tmp_path):
    """``store.write_atomic`` names a temporary ``<file>.tmp-<pid>``: a killed tick's is removed,
    an operator's file that only starts so is not."""
    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    kept = [Path(f"{state}.cdi.tmp-token"), Path(f"{state}.cdi.tmp-12x"), Path(f"{state}.tmp-1.toml")]
    gone = [Path(f"{state}.cdi.tmp-4242"), Path(f"{state}.tmp-77")]
    for path in kept + gone:
        path.write_text("x\n")

    result = cli("refresh", "--quiet", "--root", root, "--state", state, "--confirm-interval", "0")

    assert result.code == 0, result.err
    assert [path.exists() for path in kept + gone] == [True, True, True, False, False]
