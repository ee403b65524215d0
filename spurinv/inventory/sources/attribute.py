"""Reading sysfs/procfs attributes, and the small pure parsers for their formats.

Reads are bounded and never follow a symlink at the last component (``O_NOFOLLOW``): sysfs
attributes are regular files, so a symlink, a directory or a dangling link where a file should
be is a failed read, never "absent". Every failure is a :class:`ReadError` naming the path.
"""

import errno
import os
import stat

from spurinv.inventory import root as places
from spurinv.regularfile import read_bounded
from spurinv.shape import bdf_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.status import Report

MAX_ATTRIBUTE = 1 << 20  # sysfs attributes are at most a page; CDI specs and /proc files are small too
MAX_CPUS = 65536  # physical limits: Linux's NR_CPUS tops out at 8192 today

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


class ReadError(Exception):
    """A file that should be readable could not be read or parsed."""

    def __init__(self, path: str, reason: str, errno_: "int | None" = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = errno_


def is_bdf(text: str) -> bool:
    """``text`` is a PCI address as the kernel spells it (:func:`spurinv.shape.bdf_key`)."""
    return bdf_key(text) is not None


def numbered(text: str, prefix: str) -> "str | None":
    """The digits after ``prefix``: ``re.match(prefix + r"(\\d+)$", text)[1]`` (``\\d``: any Unicode
    decimal digit, as ``str.isdecimal``; one final newline allowed, as ``$`` allows it), else None."""
    if not text.startswith(prefix):
        return None
    digits = text[len(prefix) : -1 if text.endswith("\n") else None]
    return digits if digits.isdecimal() else None


def _reason(exc: "OSError") -> str:
    if exc.errno == errno.ELOOP:
        return "is a symlink (or a symlink loop), expected a regular file"
    return exc.strerror or str(exc)


def read_bytes(path: str, limit: int = MAX_ATTRIBUTE) -> bytes:
    """Return the contents of ``path``; raise ReadError on any failure or if it exceeds ``limit``."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise ReadError(path, _reason(exc), exc.errno) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # sysfs and procfs attributes are regular files
            raise ReadError(path, "not a regular file (a FIFO, socket or device)")
        data = read_bounded(fd, limit, info.st_size)
    except OSError as exc:
        raise ReadError(path, _reason(exc), exc.errno) from None
    finally:
        os.close(fd)
    if data is None:
        raise ReadError(path, f"larger than {limit} bytes")
    return data


def read_text(path: str, limit: int = MAX_ATTRIBUTE) -> str:
    """Return ``path`` decoded as UTF-8; raise ReadError when unreadable or not text."""
    return decoded(read_bytes(path, limit), path)


def decoded(data: bytes, path: str) -> str:
    """``data``, read from ``path``, as UTF-8 text; raise ReadError when it is not text."""
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ReadError(path, f"not UTF-8 text (byte {exc.start})") from None


def read_optional(path: str) -> "str | None":
    """Return ``path``'s text, or None when it does not exist (an optional attribute).

    ENODATA counts as absent too: some sysfs attributes exist but have nothing to say
    (procfs ``class_drm_amdgpu.go`` skips such cards the same way).
    """
    try:
        return read_text(path)
    except ReadError as exc:
        if exc.errno in (errno.ENOENT, errno.ENODATA):
            return None
        raise


def sysfs_names(root: "Root", report: "Report", base: str, missing: "Callable[[], None]") -> "list[str] | None":
    """The entries of the sysfs directory ``base``, or None, with why in ``report``: sysfs not
    mounted under the root fails the source, a missing ``base`` in a mounted sysfs is what
    ``missing`` records (absent or failed, as the source decides), any other error fails it."""
    try:
        return os.listdir(base)
    except FileNotFoundError:
        if not os.path.isdir(root.join(places.SYS)):
            report.fail(root.join(places.SYS), "sysfs is not mounted under the root")
        else:
            missing()
        return None
    except OSError as exc:
        report.fail(base, exc.strerror or str(exc))
        return None


def parse_int(text: str, path: str, *, base: int = 10, bits: int = 64, signed: bool = False) -> int:
    """Parse one integer attribute (``"0x1002\\n"``, ``"-1\\n"``); raise ReadError if malformed."""
    word = text.strip()
    try:
        value = int(word, base)
    except ValueError:
        raise ReadError(path, f"not an integer: {word[:40]!r}") from None
    low = -(1 << (bits - 1)) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    if not low <= value <= high:
        raise ReadError(path, f"value out of range: {word[:40]}")
    return value


def parse_properties(text: str, path: str, keys: "Collection[str] | None" = None) -> "dict[str, int]":
    """Parse a KFD ``properties`` file: one ``key value`` pair per line, unsigned decimal.

    Any malformed line fails the whole file (spur's ``split_once(' ')?`` silently dropped the
    node instead: docs/spur.md). 64-bit values such as ``unique_id`` can exceed 2^63. With
    ``keys``, only those are in the result (every line is checked all the same: an int a value
    was a tenth of a tick's discovery, for some forty keys a file of which it reads nine).
    """
    # The kernel's own form, in one pass with fewer checks a line (2,500 lines a tick): ASCII
    # text, "key digits" lines, values of at most 20 digits within 64 bits, keys counted for
    # duplicates at the end. Anything else, :func:`_properties` reads again and names the line.
    if not text.isascii():
        return _kept(_properties(text, path), keys)
    found: dict[str, str] = {}
    lines = text.split("\n")
    for line in lines:
        if line:
            key, sep, value = line.partition(" ")
            if sep and key and value.isdigit() and (len(value) < 20 or (len(value) == 20 and value <= _TOP)):
                found[key] = value
            else:
                return _kept(_properties(text, path), keys)
    if not found or len(found) != len(lines) - lines.count(""):
        return _kept(_properties(text, path), keys)
    if keys is None:
        return {key: int(value) for key, value in found.items()}
    return {key: int(found[key]) for key in keys if key in found}


def _kept(properties: "dict[str, int]", keys: "Collection[str] | None") -> "dict[str, int]":
    return properties if keys is None else {key: properties[key] for key in keys if key in properties}


_TOP = str((1 << 64) - 1)  # 20 digits: a value of 20 ASCII digits is within 64 bits if it sorts below
_TOP_BYTES = _TOP.encode()

# read_properties: the partitions of a package write one properties file that differs only in
# some digits (66 files, 5 shapes on the 64-partition fixture), and parsing each was a third of a
# tick's discovery. A file's shape is its bytes with every digit a "0": the shape of a file checked
# in full says where each line's key and value are, and any file of that shape is a file of the
# kernel's form whose values are the digits there (its keys may differ in digits only: each is
# compared). Kept per process for at most _KEPT_SHAPES shapes of a sysfs page or less.
_DIGITS = b"0123456789"
_ZEROS = bytes.maketrans(_DIGITS, b"0000000000")
_KEPT_SHAPES = 256
_SHAPE_BYTES = 4096
# (shape, keys) -> ((key, its bytes (None without a digit), where its line starts, where its value
# starts, where it ends) for each key of keys the shape has a line for, the start of each 20-digit value)
_SHAPES: "dict[tuple[bytes, tuple[str, ...]], tuple[tuple[tuple[str, bytes | None, int, int, int], ...], tuple[int, ...]]]" = {}


def read_properties(path: str, keys: "tuple[str, ...]") -> "dict[str, int]":
    """``parse_properties(read_text(path), path, keys)``: the same dict or the same ReadError, with
    a file of a shape seen before (see ``_SHAPES``) read where its values are, not parsed again."""
    data = read_bytes(path)
    shape = data.translate(_ZEROS)
    known = _SHAPES.get((shape, keys))
    if known is None and len(data) <= _SHAPE_BYTES and len(_SHAPES) < _KEPT_SHAPES:
        known = _places(data, shape, keys)
        if known is not None:
            _SHAPES[shape, keys] = known
    if known is not None:
        places, twenties = known
        # each value of 20 digits within 64 bits; one past them is parse_properties' to name
        if not twenties or max(data[start : start + 20] for start in twenties) <= _TOP_BYTES:
            return {
                key: int(data[value:end])
                for key, name, start, value, end in places
                if name is None or data[start : value - 1] == name
            }
    return parse_properties(decoded(data, path), path, keys)


def _places(
    data: bytes, shape: bytes, keys: "tuple[str, ...]"
) -> "tuple[tuple[tuple[str, bytes | None, int, int, int], ...], tuple[int, ...]] | None":
    """Where ``keys`` and the 20-digit values are in ``data`` (of ``shape``), a properties file of
    the kernel's form (ASCII "key digits" lines of at most 20 digits, each ending in a newline)
    whose keys differ in more than digits; None for any other file (never read by its shape)."""
    if not data.isascii() or not data.endswith(b"\n"):
        return None
    lines: dict[bytes, tuple[bytes, int, int, int]] = {}  # a key with its digits zeroed -> its line
    twenties = []
    start = 0
    for line, line_shape in zip(data[:-1].split(b"\n"), shape[:-1].split(b"\n"), strict=True):
        name, sep, value = line.partition(b" ")
        if not (sep and name and value.isdigit() and len(value) <= 20):
            return None
        zeroed = line_shape[: len(name)]
        if zeroed in lines:
            return None  # two keys alike but for their digits: a shape cannot tell which is which
        end = start + len(line)
        lines[zeroed] = (name, start, start + len(name) + 1, end)
        if len(value) == 20:
            twenties.append(end - 20)
        start = end + 1
    places = []
    for key in keys:
        raw = key.encode("utf-8", "surrogatepass")
        found = lines.get(raw.translate(_ZEROS))
        if found is not None:  # the one line whose key can be this one: each file's is compared,
            # unless it has no digit (then its shape is the key itself; "a0" has one: "a5" is its shape's too)
            places.append((key, raw if raw.translate(None, _DIGITS) != raw else None, found[1], found[2], found[3]))
    return tuple(places), tuple(twenties)


def _properties(text: str, path: str) -> "dict[str, int]":
    result: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        key, sep, value = line.partition(" ")
        if not (sep and key and value.isdigit() and value.isascii()):
            raise ReadError(path, f"line {number}: expected 'key <decimal>', got {line[:60]!r}")
        if key in result:
            raise ReadError(path, f"line {number}: duplicate key {key!r}")
        # One int() per value: this loop runs for 4,228 files of a CPX node with --json.
        # Past 20 digits, only leading zeros can keep a value in range; int() refuses > 4300 digits.
        if len(value) > 20:
            value = value.lstrip("0") or "0"
        parsed = int(value) if len(value) <= 20 else 1 << 64
        if parsed >= 1 << 64:
            raise ReadError(path, f"line {number}: {key} overflows 64 bits")
        result[key] = parsed
    if not result:
        raise ReadError(path, "empty")
    return result


def parse_cpulist(text: str, path: str) -> "list[int]":
    """Parse a kernel cpulist (``"0-63,128-191\\n"``) into sorted CPU numbers.

    The kernel prints ascending, disjoint ranges (``bitmap_print_to_pagebuf``); anything else is
    refused, which keeps this linear and the result at most ``MAX_CPUS`` long (once,
    ``0-1048576`` repeated 200 times took 9.6 s and counted a million CPUs).
    """
    word = text.strip()
    if not word:
        raise ReadError(path, "empty CPU list")
    ranges: list[range] = []
    below = 0  # the next range must start at or above this
    for part in word.split(","):
        first, sep, last = part.partition("-")
        if not _decimal(first) or (sep and not _decimal(last)):
            raise ReadError(path, f"bad CPU range {part[:40]!r}")
        low = int(first)
        high = int(last) if sep else low
        if high < low:
            raise ReadError(path, f"bad CPU range {part[:40]!r}")
        if high >= MAX_CPUS:
            raise ReadError(path, f"bad CPU range {part[:40]!r}: beyond {MAX_CPUS} CPUs, the physical limit")
        if low < below:
            raise ReadError(path, f"bad CPU range {part[:40]!r}: ranges overlap or are out of order")
        ranges.append(range(low, high + 1))
        below = high + 1
    return [cpu for span in ranges for cpu in span]


def _decimal(word: str) -> bool:
    """ASCII digits, short enough for ``int``."""
    return decimal(word, 20) is not None


def decimal(text: str, digits: int) -> "int | None":
    """``text`` as a number when it is 1 to ``digits`` ASCII digits, else None ("²".isdigit() is
    True but int("²") raises, as does int() of 4,301 digits)."""
    return int(text) if len(text) <= digits and text.isascii() and text.isdigit() else None


def parse_keyed_lines(text: str, separator: str = ":") -> "dict[str, str]":
    """Split ``Key: value`` lines (meminfo, NVIDIA ``information``, uevent with ``=``)."""
    result: dict[str, str] = {}
    for line in text.split("\n"):
        key, sep, value = line.partition(separator)
        if sep and key.strip():
            result.setdefault(key.strip(), value.strip())
    return result
