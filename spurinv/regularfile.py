"""Opening our own files (state, lock, config, token) so that what sits there cannot hang or steer us.

Whoever can create a file where spurinv expects one can plant a FIFO (an ``open`` that blocks
forever, while holding the state lock), a symlink (a write that lands elsewhere) or a hard link
to another file (a truncate that destroys it). So every open here is
``O_NOFOLLOW | O_NONBLOCK`` and the descriptor must be a regular file; a file we will write must
also have exactly one link and belong to us. The type is checked with ``lstat`` before opening
(a device node is never opened at all) and again with ``fstat`` on the descriptor (the name may
have been swapped in between). Stdlib only: the timer's tick uses it.
"""

import errno
import os
import stat

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class Refused(OSError):
    """The path exists but is not a file we may use; the message says why, naming the path."""

    def __init__(self, message: str, errno_: int) -> None:
        super().__init__(message)
        self.errno = errno_


def kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _check(path: str, info: "os.stat_result", write: bool) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise Refused(f"{path} is a symlink; refusing to follow it", errno.ELOOP)
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{path} is {kind(info.st_mode)}, not a regular file", errno.EINVAL)
    if write and info.st_nlink != 1:
        raise Refused(f"{path} has {info.st_nlink} hard links; refusing to write it", errno.EMLINK)
    if write and info.st_uid != os.geteuid():
        raise Refused(f"{path} belongs to uid {info.st_uid}, not to us; refusing to write it", errno.EPERM)


def open_fd(path: str, *, write: bool = False, create: bool = False) -> int:
    """Open ``path`` (read-only, or read-write with ``write``); raise Refused or OSError.

    With ``create`` a missing file is created 0600 (the lock file).
    """
    return _opened(path, write, create)[0]


def _opened(path: str, write: bool, create: bool) -> "tuple[int, os.stat_result]":
    """:func:`open_fd`, with the descriptor's ``fstat``."""
    try:
        _check(path, os.lstat(path), write)
    except FileNotFoundError:
        if not create:
            raise
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if create:
        flags |= os.O_CREAT
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{path} is a symlink; refusing to follow it", errno.ELOOP) from None
        raise
    try:
        info = os.fstat(fd)
        _check(path, info, write)
    except Refused:
        os.close(fd)
        raise
    return fd, info


def read(path: str, limit: int) -> bytes:
    """Return the contents of the regular file ``path``; raise Refused, OSError, or Refused
    (``EFBIG``) when it holds more than ``limit`` bytes."""
    fd, info = _opened(path, False, False)
    try:
        data = read_bounded(fd, limit, info.st_size)
    finally:
        os.close(fd)
    if data is None:
        raise Refused(f"{path} is larger than {limit} bytes", errno.EFBIG)
    return data


def read_bounded(fd: int, limit: int, size: int = 0) -> "bytes | None":
    """The rest of ``fd``, or None as soon as it holds more than ``limit`` bytes (then at most one
    64 KiB chunk past the limit has been read). The one bounded read loop: our own files here,
    sysfs attributes in :func:`spurinv.inventory.sources.attribute.read_bytes`; OSError passes through.

    ``size``: the regular file's ``st_size`` (its ``fstat``), for a descriptor at offset 0. The
    first read asks for one byte more; when it returns exactly ``size`` bytes, short of what it
    asked, the file ended there (a regular file's read comes up short only at its end), and the
    empty read that would say so is not made (one system call of five an attribute on a disk
    root). Anything else, such as sysfs's size of a page for an attribute of a few bytes or
    procfs's 0, reads on until the empty read."""
    chunks = []
    total = 0
    first = size + 1 if 0 < size <= limit else 0
    while True:
        chunk = os.read(fd, first or 65536)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
        if first and total == size:
            break  # the whole file, read in one short read
        first = 0  # later reads take 64 KiB chunks, whatever the first asked for
    return b"".join(chunks)
