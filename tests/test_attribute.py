"""sysfs/procfs attribute reads and their small parsers, at their boundaries.

The parsers' edges are where a mutation run found room: the exact integer ranges, the size limit,
what counts as absent, the line numbers in errors, values past 20 digits. Real attribute texts
come from the captured sysfs trees in tests/fixtures/real.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
from effort import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spurinv import regularfile
from spurinv.inventory.sources import attribute, drm
from spurinv.inventory.sources.attribute import (
    MAX_ATTRIBUTE,
    ReadError,
    parse_cpulist,
    parse_int,
    parse_keyed_lines,
    parse_properties,
    read_bytes,
    read_optional,
    read_properties,
    read_text,
)

REAL = Path(__file__).parent / "fixtures" / "real"


# ------------------------------------------------------------------------------------- reads


def test_read_bytes_returns_the_whole_file_across_chunks(tmp_path):
    data = bytes(range(256)) * 1000  # 256,000 bytes: several 64 KiB reads
    path = tmp_path / "attr"
    path.write_bytes(data)

    assert read_bytes(str(path)) == data


@pytest.mark.parametrize(
    ("told", "reads"),
    [
        (9, [10]),  # the size fstat gave: one read of a byte more, short, is the whole file
        (4096, [4097, 65536]),  # sysfs's page for a short attribute: read on to the empty read
        (0, [65536, 65536]),  # procfs's 0: as without a size
        (5, [6, 65536, 65536]),  # the file grew past its fstat: read on, nothing lost
        (10000, [65536, 65536]),  # larger than the limit: as without a size
    ],
)
def test_read_bounded_stops_after_one_short_read_of_the_size_told(tmp_path, monkeypatch, told, reads):
    path = tmp_path / "attr"
    path.write_bytes(b"0x120000\n")
    asked = []
    real_read = os.read

    def read(fd, count):
        asked.append(count)
        return real_read(fd, count)

    monkeypatch.setattr(os, "read", read)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert regularfile.read_bounded(fd, 8192, told) == b"0x120000\n"
    finally:
        os.close(fd)
    assert asked == reads


def test_only_the_first_read_may_end_a_file_of_the_size_told(tmp_path, monkeypatch):
    """Told 65535 bytes, the first read asks for 65536: as many as every later read. A file cut
    short and grown back to exactly that size while it is read still ends at an empty read, as
    without a size, not at whichever later read happens to bring the total to the size told."""
    path = tmp_path / "grows"
    path.write_bytes(b"x" * 1000)
    asked = []
    real_read = os.read

    def read(fd, count):
        asked.append(count)
        chunk = real_read(fd, count)
        if len(asked) == 1:
            with path.open("ab") as grown:
                grown.write(b"y" * (65535 - 1000))
        return chunk

    monkeypatch.setattr(os, "read", read)
    fd = os.open(path, os.O_RDONLY)
    try:
        data = regularfile.read_bounded(fd, 1 << 20, 65535)
    finally:
        os.close(fd)
    assert data == b"x" * 1000 + b"y" * 64535
    assert asked == [65536, 65536, 65536]


@pytest.mark.parametrize(("size", "ok"), [(99, True), (100, True), (101, False)])
def test_read_bytes_limit_is_inclusive(tmp_path, size, ok):
    path = tmp_path / "attr"
    path.write_bytes(b"x" * size)

    if ok:
        assert len(read_bytes(str(path), limit=100)) == size
    else:
        with pytest.raises(ReadError) as caught:
            read_bytes(str(path), limit=100)
        assert caught.value.path == str(path)


def test_the_default_limit_admits_one_mebibyte_and_no_more(tmp_path):
    path = tmp_path / "attr"
    path.write_bytes(b"1" * (1 << 20))

    assert MAX_ATTRIBUTE == 1 << 20
    assert len(read_bytes(str(path))) == 1 << 20
    path.write_bytes(b"1" * ((1 << 20) + 1))
    with pytest.raises(ReadError):
        read_bytes(str(path))


def test_a_symlink_is_a_failed_read_never_followed(tmp_path):
    target = tmp_path / "target"
    target.write_text("1\n")
    link = tmp_path / "link"
    link.symlink_to(target)

    with pytest.raises(ReadError) as caught:
        read_bytes(str(link))

    assert caught.value.errno == errno.ELOOP
    assert caught.value.path == str(link)


def test_a_directory_is_a_failed_read(tmp_path):
    with pytest.raises(ReadError) as caught:
        read_bytes(str(tmp_path))

    assert "not a regular file" in str(caught.value)
    assert caught.value.path == str(tmp_path)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    with pytest.raises(ReadError) as caught:
        read_bytes(str(fifo))

    assert "not a regular file" in str(caught.value)


def test_read_text_refuses_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "attr"
    path.write_bytes(b"ok\xff")

    with pytest.raises(ReadError) as caught:
        read_text(str(path))

    assert caught.value.path == str(path)
    assert "2" in caught.value.reason  # the offending byte's offset


def test_read_optional_absent_is_none_and_other_failures_raise(tmp_path):
    present = tmp_path / "present"
    present.write_text("0x1002\n")
    link = tmp_path / "link"
    link.symlink_to(present)

    assert read_optional(str(present)) == "0x1002\n"
    assert read_optional(str(tmp_path / "missing")) is None
    with pytest.raises(ReadError):
        read_optional(str(link))


def test_read_errors_carry_path_reason_and_errno(tmp_path):
    missing = tmp_path / "missing"

    with pytest.raises(ReadError) as caught:
        read_bytes(str(missing))

    assert (caught.value.path, caught.value.errno) == (str(missing), errno.ENOENT)
    assert str(caught.value).startswith(f"{missing}: ")


# --------------------------------------------------------------------------------- parse_int


@pytest.mark.parametrize(
    ("text", "kwargs", "value"),
    [
        ("0x1002\n", {"base": 16}, 0x1002),
        ("-1\n", {"signed": True}, -1),
        (str((1 << 64) - 1), {}, (1 << 64) - 1),
        ("0", {}, 0),
        (str((1 << 63) - 1), {"signed": True}, (1 << 63) - 1),
        (str(-(1 << 63)), {"signed": True}, -(1 << 63)),
        ("255", {"bits": 8}, 255),
        ("-128", {"bits": 8, "signed": True}, -128),
        ("127", {"bits": 8, "signed": True}, 127),
    ],
)
def test_parse_int_accepts_its_whole_range(text, kwargs, value):
    assert parse_int(text, "/sys/x", **kwargs) == value


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        (str(1 << 64), {}),
        ("-1", {}),
        (str(1 << 63), {"signed": True}),
        (str(-(1 << 63) - 1), {"signed": True}),
        ("256", {"bits": 8}),
        ("128", {"bits": 8, "signed": True}),
        ("-129", {"bits": 8, "signed": True}),
        ("", {}),
        ("12abc", {}),
    ],
)
def test_parse_int_refuses_what_is_out_of_range_or_not_a_number(text, kwargs):
    with pytest.raises(ReadError) as caught:
        parse_int(text, "/sys/x", **kwargs)

    assert caught.value.path == "/sys/x"


@settings(max_examples=examples(200))
@given(value=st.integers(-(1 << 70), 1 << 70), bits=st.sampled_from([8, 16, 32, 64]), signed=st.booleans())
def test_parse_int_accepts_exactly_the_range_of_its_width(value, bits, signed):
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if low <= value <= high:
        assert parse_int(f"{value}\n", "/sys/x", bits=bits, signed=signed) == value
    else:
        with pytest.raises(ReadError):
            parse_int(f"{value}\n", "/sys/x", bits=bits, signed=signed)


# -------------------------------------------------------------------------- parse_properties


def test_parse_properties_reads_a_real_kfd_node():
    found = sorted(REAL.rglob("topology/nodes/*/properties"))
    texts = [p.read_text() for p in found if "simd_count" in p.read_text()]
    assert texts, "no captured KFD properties file in tests/fixtures/real"

    parsed = [parse_properties(text, "/sys/x") for text in texts]

    assert any(node["simd_count"] > 0 for node in parsed)  # a GPU node among the CPU ones
    assert all(len(node) == text.count("\n") for node, text in zip(parsed, texts, strict=True))


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a 1\nb x\n", 2),
        ("a 1\n\nb\n", 3),
        ("a 1\n 2\n", 2),
        ("a -1\n", 1),
        ("a \u00b2\n", 1),
        ("a 1\nb 2\na 3\n", 3),
        ("a 1\nb 18446744073709551616\n", 2),
    ],
)
def test_parse_properties_names_the_bad_line(text, line):
    with pytest.raises(ReadError) as caught:
        parse_properties(text, "/sys/x")

    assert caught.value.path == "/sys/x"
    assert f"line {line}:" in caught.value.reason


def test_parse_properties_refuses_an_empty_file():
    with pytest.raises(ReadError):
        parse_properties("\n\n", "/sys/x")


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("18446744073709551615", (1 << 64) - 1),
        ("0" * 30 + "18446744073709551615", (1 << 64) - 1),
        ("0" * 25, 0),
        ("00000000000000000000007", 7),
    ],
)
def test_parse_properties_reads_values_up_to_64_bits_whatever_the_leading_zeros(value, parsed):
    assert parse_properties(f"unique_id {value}\n", "/sys/x") == {"unique_id": parsed}


@pytest.mark.parametrize("value", ["18446744073709551616", "1" * 21, "0" * 5 + "1" * 21, "9" * 5000])
def test_parse_properties_refuses_values_past_64_bits(value):
    with pytest.raises(ReadError):
        parse_properties(f"unique_id {value}\n", "/sys/x")


def _properties_outcome(text: str, keys: tuple[str, ...] | None) -> object:
    try:
        return parse_properties(text, "/sys/x", keys)
    except ReadError as exc:
        return exc.reason


@settings(max_examples=examples(400))
@given(
    st.lists(
        st.sampled_from(
            [
                "a 1",
                "b 2",
                "unique_id 18446744073709551615",
                "unique_id 18446744073709551616",
                "a 3",
                "c x",
                "",
                " 4",
                "b",
                "é 5",
                "d 0007",
                "e " + "0" * 25 + "9",
            ]
        ),
        max_size=8,
    ),
    st.sampled_from([("a",), ("b", "unique_id", "z"), ("unique_id", "d", "e"), ()]),
)
def test_parse_properties_keeps_the_keys_asked_for_and_checks_every_line(lines, keys):
    """With ``keys``: the same verdict on every line (the same error, naming the same line), and of a
    good file the values of those keys only."""
    text = "\n".join(lines) + "\n"
    whole = _properties_outcome(text, None)

    kept = _properties_outcome(text, keys)

    assert kept == ({key: whole[key] for key in keys if key in whole} if isinstance(whole, dict) else whole)


@settings(max_examples=examples(200))
@given(st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), st.integers(0, (1 << 64) - 1), min_size=1, max_size=8))
def test_parse_properties_round_trips(values):
    text = "".join(f"{key} {value}\n" for key, value in values.items())

    assert parse_properties(text, "/sys/x") == values


def _reference(text: str, keys: tuple[str, ...]) -> object:
    """The slow parser's answer, which read_properties must give: the kept dict or the error's reason."""
    try:
        whole = attribute._properties(text, "/sys/x")
    except ReadError as exc:
        return exc.reason
    return {key: whole[key] for key in keys if key in whole}


def _read_outcome(path: Path, keys: tuple[str, ...]) -> object:
    try:
        return read_properties(str(path), keys)
    except ReadError as exc:
        return exc.reason if exc.path == str(path) else f"another path: {exc.path}"


_KEYS_OF_FORM = ["a1", "a2", "a0", "a11", "b", "unique_id", "7", "00"]  # a0, a1 and a2 share a shape
_VALUES_OF_FORM = ["0", "5", "42", "007", "18446744073709551615", "18446744073709551616", "99999999999999999999",
                   "1" * 19, "1" * 21, "0" * 21 + "1"]  # fmt: skip
_ODD_LINES = ["", " 4", "b", "b  5", "a1 5 6", "a1 ", "x\ty 5", "x\ry 5", "é 5", "a1 x", "a1 \u00b2", "a1 5\r", "\ufeffa1 5"]
_KEY_SETS = [
    (),
    ("a1",),
    ("a2", "b", "unique_id"),
    ("a1", "a11", "z", "a2"),
    ("7", "é", "x\ty"),
    ("b", "b"),
    ("a0",),
    ("a0", "00", "b"),
]  # fmt: skip  (a key whose only digit is a 0 still has one)


@st.composite
def _same_shape(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A properties file, mostly of the kernel's form (maybe one odd line, maybe no UTF-8), and
    another of its shape: each ASCII digit, in keys and values alike, maybe another digit."""
    line = st.tuples(st.sampled_from(_KEYS_OF_FORM), st.sampled_from(_VALUES_OF_FORM)).map(" ".join)
    lines = draw(st.lists(line, max_size=6))
    odd = draw(st.none() | st.sampled_from(_ODD_LINES))
    if odd is not None:
        lines.insert(draw(st.integers(0, len(lines))), odd)
    text = ("\n".join(lines) + draw(st.sampled_from(["\n", "\n", "\n", "", "\n\n"]))).encode()
    if draw(st.integers(0, 3)) == 0 and text:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xc3\xa9"])) + text[at:]
    other = bytes(draw(st.sampled_from(b"0123456789")) if c in b"0123456789" else c for c in text)
    return text, other


def _reference_of(data: bytes, keys: tuple[str, ...]) -> object:
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start})"
    return _reference(text, keys)


@settings(max_examples=examples(500))
@given(_same_shape(), st.sampled_from(_KEY_SETS))
def test_read_properties_gives_the_parsers_answer_for_a_file_of_a_shape_seen_before(tmp_path_factory, texts, keys):
    """A file read by its shape (its digits at the places an earlier file of that shape had them)
    gets exactly what the line-by-line parser says of it: the same values, the same missing keys
    (keys that differ in a digit are compared), the same error naming the same line."""
    attribute._SHAPES.clear()
    folder = tmp_path_factory.mktemp("properties")
    first, second = folder / "first", folder / "second"
    first.write_bytes(texts[0])
    second.write_bytes(texts[1])

    assert _read_outcome(first, keys) == _reference_of(texts[0], keys)
    assert _read_outcome(second, keys) == _reference_of(texts[1], keys)
    assert _read_outcome(first, keys) == _reference_of(texts[0], keys)


@pytest.mark.parametrize(
    "text",
    [b"a1 5\n 4\n", b"a1 111111111111111111111\n", b"a1 000000000000000000001\n", b"\xff 5\n", b"a1 5\na1 6\n",
     b"a1 5\na2 6\n", b"a1 5", b"a1 5\n\n", b"a1 5\nb\n", b"a1 5 6\n", b"a1 \xc2\xb2\n", b"a1 18446744073709551616\n"],
)  # fmt: skip
def test_read_properties_gives_the_parsers_answer_on_the_edges_of_the_kernels_form(tmp_path, text):
    attribute._SHAPES.clear()
    path = tmp_path / "properties"
    path.write_bytes(text)

    for _ in range(2):  # the second read, by its shape if it has one
        assert _read_outcome(path, ("a1", "a2")) == _reference_of(text, ("a1", "a2"))


def test_read_properties_compares_each_files_keys_and_bounds_each_files_values(tmp_path):
    """Two files of one shape: the second's keys differ in a digit, then its 20-digit value passes
    64 bits; the shape says where to look, never what is there."""
    attribute._SHAPES.clear()
    first, second, third = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    first.write_text("a1 5\nunique_id 18446744073709551615\n")
    second.write_text("a2 7\nunique_id 18446744073709551614\n")
    third.write_text("a1 9\nunique_id 18446744073709551616\n")
    keys = ("a1", "unique_id")

    assert read_properties(str(first), keys) == {"a1": 5, "unique_id": (1 << 64) - 1}
    assert read_properties(str(second), keys) == {"unique_id": (1 << 64) - 2}
    assert len(attribute._SHAPES) == 1  # the second was read by its shape
    with pytest.raises(ReadError) as caught:
        read_properties(str(third), keys)
    assert caught.value.reason == "line 2: unique_id overflows 64 bits"


@pytest.mark.parametrize(("text", "keys"), [(b"a5 7\n", ("a0",)), (b"cap2 8\n", ("cap0",)), (b"x 1\n99 3\n", ("00", "x"))])
def test_read_properties_never_answers_a_key_whose_digits_are_zeros_from_another_key(tmp_path, text, keys):
    attribute._SHAPES.clear()
    path = tmp_path / "properties"
    path.write_bytes(text)

    for _ in range(2):
        assert read_properties(str(path), keys) == _reference(text.decode(), keys)


def test_read_properties_keeps_at_most_256_shapes_of_a_page_at_most(tmp_path):
    """A root of many shapes (a hostile one) costs bounded memory: the 257th shape, and a file
    past 4 KiB, are parsed and not kept; what a file gives never depends on that."""
    attribute._SHAPES.clear()
    letters = "abcdefghijklmnopqrstuvwxyz"
    for number in range(300):  # 300 keys that differ in more than digits: 300 shapes
        key = letters[number % 26] + letters[number // 26]
        path = tmp_path / f"p{number}"
        path.write_text(f"{key} {number}\n")
        assert read_properties(str(path), (key,)) == {key: number}
    assert len(attribute._SHAPES) == 256

    attribute._SHAPES.clear()
    for size, kept in ((4096, 1), (4097, 0)):
        path = tmp_path / f"page{size}"
        line = "a 1\n"
        path.write_text("k" * (size - len(line) - 3) + " 5\n" + line)
        assert path.stat().st_size == size
        assert read_properties(str(path), ("a",)) == {"a": 1}
        assert len(attribute._SHAPES) == kept
        attribute._SHAPES.clear()


def test_read_properties_reads_the_captured_kfd_nodes_as_the_parser_does():
    found = sorted(REAL.rglob("topology/nodes/*/properties"))
    keys = ("cpu_cores_count", "simd_count", "unique_id", "location_id", "drm_render_minor", "missing")
    attribute._SHAPES.clear()

    for path in found * 2:  # the second time, every file is read by its shape
        assert read_properties(str(path), keys) == _reference(path.read_text(), keys)
    assert attribute._SHAPES


# ---------------------------------------------------------------------------- parse_cpulist


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3,8\n", [0, 1, 2, 3, 8]),
        ("5", [5]),
        ("2-2", [2]),
        ("0-1,4", [0, 1, 4]),
        ("65535", [65535]),
    ],
)
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text, "/sys/x") == cpus


@pytest.mark.parametrize(
    "text",
    [
        *("", "\n", "3-1", "1-", "-1", "a", "0-1048577", "1,,2", "1-2-3", "\u0663"),
        *("4,0-1", "0-3,2", "1048575-1048576", "65536"),  # out of order, overlapping, beyond MAX_CPUS
    ],
)
def test_parse_cpulist_refuses(text):
    with pytest.raises(ReadError) as caught:
        parse_cpulist(text, "/sys/x")

    assert caught.value.path == "/sys/x"


LONG = "1" * 30 + "a" * 30  # 60 characters: a bad range is quoted by its first 40
BACKWARDS = "0" * 18 + "99-" + "0" * 20  # 41 characters, the longest range of two numbers
BEYOND = "0" * 20 + "-" + "0" * 15 + "65536"
OVERLAP = "0" * 20 + "-" + "0" * 19 + "9"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (LONG, f"bad CPU range {LONG[:40]!r}"),
        (BACKWARDS, f"bad CPU range {BACKWARDS[:40]!r}"),
        (BEYOND, f"bad CPU range {BEYOND[:40]!r}: beyond 65536 CPUs, the physical limit"),
        (f"5,{OVERLAP}", f"bad CPU range {OVERLAP[:40]!r}: ranges overlap or are out of order"),
    ],
)
def test_a_bad_cpu_range_is_quoted_by_its_first_40_characters(text, reason):
    with pytest.raises(ReadError) as caught:
        parse_cpulist(text, "/sys/x")

    assert caught.value.reason == reason


# ------------------------------------------------------------------------- parse_keyed_lines


def test_parse_keyed_lines_reads_a_real_meminfo():
    meminfo = next(p for p in sorted(REAL.rglob("meminfo")) if p.is_file())

    parsed = parse_keyed_lines(meminfo.read_text())

    assert parsed["MemTotal"].endswith("kB")
    assert parsed["MemTotal"] == parsed["MemTotal"].strip()


def test_parse_keyed_lines_keeps_the_first_value_and_skips_keyless_lines():
    text = "A: 1\nA: 2\n: 3\nno separator\n  B = x=y  \n"

    assert parse_keyed_lines(text) == {"A": "1"}
    assert parse_keyed_lines(text, "=") == {"B": "x=y"}


def test_a_failed_read_gives_the_systems_reason_and_a_symlink_says_so(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")

    with pytest.raises(ReadError) as missing:
        read_bytes(str(tmp_path / "missing"))
    with pytest.raises(ReadError) as link:
        read_bytes(str(tmp_path / "link"))

    assert missing.value.reason == os.strerror(errno.ENOENT)
    assert "symlink" in link.value.reason
    assert link.value.reason != os.strerror(errno.ELOOP)


def test_a_file_that_opens_but_fails_to_read_is_a_failed_read_not_an_empty_one():
    """A regular file whose read(2) fails (EIO, as a sysfs attribute whose driver errs does): here
    /proc/self/mem, whose first page is never mapped. Not empty text, and not "absent" either."""
    path = "/proc/self/mem"

    with pytest.raises(ReadError) as failed:
        read_bytes(path)
    with pytest.raises(ReadError) as optional:
        read_optional(path)

    assert (failed.value.path, failed.value.errno, failed.value.reason) == (path, errno.EIO, os.strerror(errno.EIO))
    assert optional.value.errno == errno.EIO


def test_reads_do_not_leak_file_descriptors(tmp_path):
    path = tmp_path / "attr"
    path.write_text("1\n")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 200)
    before = len(os.listdir("/proc/self/fd"))

    for _ in range(50):
        read_bytes(str(path))
        with pytest.raises(ReadError):
            read_bytes(str(big), limit=100)

    assert len(os.listdir("/proc/self/fd")) == before


def test_cpu_numbers_of_up_to_twenty_digits_are_read_and_longer_ones_refused():
    assert parse_cpulist("0" * 19 + "1", "/sys/x") == [1]
    with pytest.raises(ReadError):
        parse_cpulist("0" * 20 + "1", "/sys/x")


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 200_000])
def test_both_bounded_reads_take_exactly_the_limit_and_refuse_one_byte_more(tmp_path, size):
    """attribute.read_bytes and regularfile.read share one loop (regularfile.read_bounded):
    a file of ``limit`` bytes is read whole, one of ``limit + 1`` is refused, each in its own words."""
    from spurinv import regularfile

    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))

    assert read_bytes(str(path), size) == path.read_bytes()
    assert regularfile.read(str(path), size) == path.read_bytes()
    if size:
        with pytest.raises(ReadError, match=rf"^{re.escape(str(path))}: larger than {size - 1} bytes$"):
            read_bytes(str(path), size - 1)
        with pytest.raises(regularfile.Refused, match=rf"^{re.escape(str(path))} is larger than {size - 1} bytes$") as no:
            regularfile.read(str(path), size - 1)
        assert no.value.errno == errno.EFBIG


def test_a_read_that_fails_after_the_open_is_a_read_error_naming_the_path():
    """An attribute that opens but cannot be read (a sysfs file whose driver answers EIO) is a
    failed read with its errno, never an empty value. ``/proc/self/mem`` is a regular file of this
    process that answers EIO at offset 0: read-only, nothing of the host is touched."""
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("no /proc/self/mem on this system to make a read fail after open")

    with pytest.raises(ReadError) as caught:
        read_bytes("/proc/self/mem")

    assert (caught.value.path, caught.value.errno) == ("/proc/self/mem", errno.EIO)
    assert str(caught.value) == "/proc/self/mem: Input/output error"


@pytest.mark.parametrize("digits", [21, 22, 40])
def test_a_value_padded_with_leading_zeros_past_twenty_digits_is_still_its_number(digits):
    """Leading zeros are stripped before the 20-digit bound: 0…018446744073709551615 is 2^64 - 1."""
    value = str((1 << 64) - 1).rjust(digits, "0")

    assert parse_properties(f"unique_id {value}\n", "/sys/x") == {"unique_id": (1 << 64) - 1}


# --- a source's sysfs directory: listed, absent or failed (pci and drm share the rule) ------------


NOT_MOUNTED = ("failed", "sys: sysfs is not mounted under the root")
NO_DRM = ("absent", "no DRM devices (no GPU driver loaded)")


@pytest.mark.parametrize(
    ("made", "pci", "drm"),
    [
        ((), NOT_MOUNTED, NOT_MOUNTED),
        (("sys",), ("absent", "no PCI bus in sysfs"), NO_DRM),
        (("sys/bus/pci",), ("failed", "sys/bus/pci/devices: missing"), NO_DRM),
    ],
)
def test_a_missing_sysfs_directory_is_absent_or_failed_as_the_source_says(tmp_path, made, pci, drm):
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.drm import read_drm
    from spurinv.inventory.sources.pci import read_pci
    from spurinv.inventory.sources.status import Report

    for directory in made:
        (tmp_path / directory).mkdir(parents=True)
    root = Root(str(tmp_path))
    reports = Report("pci"), Report("drm")

    assert read_pci(root, reports[0]) == ([], frozenset())
    assert read_drm(root, reports[1]) == []

    found = [(report.as_dict()["status"], report.as_dict()["detail"].replace(f"{tmp_path}/", "")) for report in reports]
    assert found == [pci, drm]


def test_a_sysfs_directory_that_cannot_be_listed_fails_the_source_naming_it(tmp_path):
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.drm import read_drm
    from spurinv.inventory.sources.status import Report

    (tmp_path / "sys/class").mkdir(parents=True)
    (tmp_path / "sys/class/drm").write_text("not a directory")
    report = Report("drm")

    assert read_drm(Root(str(tmp_path)), report) == []
    assert report.as_dict() == {"status": "failed", "detail": f"{tmp_path}/sys/class/drm: Not a directory"}


def test_a_kfd_node_keeps_every_key_discovery_reads():
    """``kfd.NODE_KEYS`` names what is kept of a node's properties: every key the code reads of
    them (``properties["x"]``, ``properties.get("x"``, the list of keys that must be there)."""
    from spurinv.inventory import discovery
    from spurinv.inventory.sources import kfd

    read: set[str] = set()
    for module in (discovery, kfd):
        source = Path(module.__file__ or "").read_text()
        read |= set(re.findall(r"""\bproperties(?:\.get\(|\[)["']([a-z_]+)["']""", source))
        for listed in re.findall(r"for key in \(([^)]*)\) if key not in properties", source):
            read |= set(re.findall(r'"([a-z_]+)"', listed))

    assert {"domain", "unique_id", "location_id", "simd_count"} <= read  # the scan finds them
    assert read <= set(kfd.NODE_KEYS)


DRM_NAMES = st.one_of(
    st.text(max_size=12),
    st.builds(
        "".join,
        st.lists(st.sampled_from(["card", "renderD", "amdgpu_xcp", ".", "_", "0", "12", "\n", "٣", "-", "c", "r"]), max_size=5),
    ),
)


@given(DRM_NAMES)
@settings(max_examples=examples(600))
@example("card12\n")
@example("renderD128\n")
@example("card٣")
@example("cardD1")
@example("amdgpu_xcp_3\n")
@example("amdgpu_xcp.3")
@example("amdgpu_xcp3")
def test_a_drm_entry_and_a_partition_device_are_named_as_numbered_names_them(name: str) -> None:
    """drm's one-call spellings of numbered(): a node's kind and minor, an amdgpu_xcp device's index."""
    minor = attribute.numbered(name, "card") if name[:1] == "c" else attribute.numbered(name, "renderD")
    kind = "card" if name[:1] == "c" else "render"
    assert drm._node(name) == ((kind, minor) if minor is not None else (drm._node(name)[0], None))
    assert drm._xcp(name) == (attribute.numbered(name, "amdgpu_xcp.") or attribute.numbered(name, "amdgpu_xcp_"))
