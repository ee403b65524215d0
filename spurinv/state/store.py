"""Files on disk: the state file's directory, the run lock, atomic writes (of every file spurinv
writes), quarantine. Where the files live is :mod:`spurinv.state.locations`'s business. Stdlib only.

Never lost, never half-written: write a temporary file in the same directory (``O_EXCL``, mode
0600), fsync, rename over the old file, fsync the directory. A ``kill -9`` at any instant leaves
either the old or the new file. The state path is never followed through a symlink
(``O_NOFOLLOW``); a run holds an ``flock`` on ``<state>.lock`` for its whole duration, and the
kernel drops it when the holder dies, so a stale lock never blocks.
"""

import errno
import fcntl
import os
import stat
import time

from spurinv import regularfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_STATE = 16 << 20
LOCK_POLL = 0.05


class StoreError(OSError):
    """The state could not be read or written; ``errno`` tells which exit status fits.

    An ``OSError``, so callers that report I/O failures (``status``, ``diff``) report this one
    too instead of crashing as an internal error (a symlinked state file).
    """

    def __init__(self, message: str, errno_: "int | None" = None) -> None:
        super().__init__(message)
        self.errno = errno_

    @property
    def exit_code(self) -> int:
        """The exit status this failure calls for (:func:`spurinv.exitcode.of_errno`)."""
        from spurinv import exitcode  # only for a failure: a module fewer on every tick

        return exitcode.of_errno(self.errno)


class Unsafe(StoreError):
    """The state or lock path is a symlink, a FIFO, a directory, a hard link or another user's
    file: never followed, read, truncated or written (exit 73 from ``refresh``)."""


class LockHeld(Exception):
    """Another run holds the lock; the message says who."""


def ensure_directory(path: str, *, create: bool = True) -> None:
    """The state file's directory, ready: created when missing (each missing component mode 0700,
    whatever the umask) unless ``create`` is false (an explicit ``--state``: a typo must not be
    a fresh start, so a missing directory is refused), and refused when another user can write
    it (they could swap the state, or the directory, under us). Unsafe and missing: exit 73."""
    if inspect_directory(path, create=create):
        _make_private(os.path.dirname(path) or ".")
        inspect_directory(path, create=False)


def inspect_directory(path: str, *, create: bool = True) -> bool:
    """:func:`ensure_directory` without the writing (``spurinv check``): raise what it would
    raise; True when the directory is missing and would be created."""
    directory = os.path.dirname(path) or "."
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        if not create:
            raise StoreError(
                f"state directory {directory} does not exist (create it, mode 0700, or correct the state path)",
                errno.ENOENT,
            ) from None
        return True
    except OSError as exc:
        raise StoreError(f"cannot use state directory {directory}: {exc.strerror}", exc.errno) from None
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"state directory {directory} is not a directory", errno.ENOTDIR)
    if info.st_mode & 0o022 or info.st_uid not in (os.geteuid(), 0):
        raise Unsafe(
            f"state directory {directory} can be written by another user (mode {stat.S_IMODE(info.st_mode):04o}, "
            f"owner uid {info.st_uid}); make it the running user's, mode 0700",
            errno.EPERM,
        )
    _check_ancestors(directory)
    return False


def _check_ancestors(directory: str) -> None:
    """Every directory above the state's, up to ``/``, as the path is written and as it resolves,
    must be owned by us or root and writable by no one else unless sticky (sshd's StrictModes,
    with /tmp's sticky bit allowed: it keeps others from renaming what is ours). Whoever can
    write a parent can rename the state directory away and put their own in its place."""
    absolute = os.path.abspath(directory)
    euid = os.geteuid()
    seen: set[str] = set()
    for start in (absolute, os.path.realpath(absolute)):
        current = os.path.dirname(start)
        while current not in seen:
            seen.add(current)
            try:
                info = os.stat(current)
            except OSError as exc:
                raise StoreError(f"cannot use state directory {directory}: {current}: {exc.strerror}", exc.errno) from None
            loose = info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX
            if loose or info.st_uid not in (euid, 0):
                raise Unsafe(
                    f"{current}, above state directory {directory}, can be written by another user "
                    f"(mode {stat.S_IMODE(info.st_mode):04o}, uid {info.st_uid}): "
                    "make it root's or yours, not writable by others",
                    errno.EPERM,
                )
            if current == "/":
                break
            current = os.path.dirname(current)


def _make_private(directory: str) -> None:
    """Create ``directory`` and its missing parents one by one, each 0700 (``os.makedirs`` gives
    the parents 0777 less the umask: 0777 under ``umask 000``)."""
    missing = []
    current = os.path.abspath(directory)
    while not os.path.lexists(current):
        missing.append(current)
        current = os.path.dirname(current)
    for each in reversed(missing):
        try:
            os.mkdir(each, 0o700)
            os.chmod(each, 0o700)  # the umask only narrows what mkdir grants
        except FileExistsError:
            continue  # made meanwhile by someone else: checked like any existing directory
        except OSError as exc:
            raise StoreError(f"cannot create state directory {each}: {exc.strerror}", exc.errno) from None


class Lock:
    """An exclusive ``flock`` on ``<state>.lock``, waited for at most ``timeout`` seconds."""

    def __init__(self, state: str, timeout: float, holder: str, *, create: bool = True) -> None:
        self.path = state + ".lock"
        self.timeout = timeout
        self.holder = holder
        self.create = create  # may the state directory be created (not for an explicit --state)
        self.fd = -1

    def try_acquire(self) -> bool:
        """Take the lock if it is free right now; True on success."""
        ensure_directory(self.path, create=self.create)
        self.fd = open_lock(self.path)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        # The holder's name is a courtesy for the waiters' message; the flock is the lock. On a full
        # disk writing it fails (ENOSPC), and that must not turn into a traceback.
        # Written over the old text, then cut to length: truncating to 0 first made ext4 flush the
        # file on close (auto_da_alloc), ~1 ms of every tick; the text left is the same.
        try:
            holder = f"pid {os.getpid()} ({self.holder}) since {time.strftime('%H:%M:%S')}\n".encode()
            os.pwrite(self.fd, holder, 0)
            os.ftruncate(self.fd, len(holder))
        except OSError:
            pass
        return True

    def acquire(self, sleep: "Callable[[float], None]" = time.sleep, clock: "Callable[[], float]" = time.monotonic) -> None:
        """Wait up to ``timeout`` for the lock; raise LockHeld naming the holder."""
        deadline = clock() + self.timeout
        while not self.try_acquire():
            self._close()
            if clock() >= deadline:
                raise LockHeld(f"state lock {self.path} is held by {self._holder()}; waited {self.timeout:g} s")
            sleep(LOCK_POLL)

    def _holder(self) -> str:
        try:
            text = regularfile.read(self.path, 4096).decode("utf-8", "replace")
        except OSError:
            return "another run"
        return holder_named(text)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        self._close()


def read(path: str, limit: int = MAX_STATE) -> "bytes | None":
    """Return the state file's bytes (or another of spurinv's files, up to ``limit``), or None
    when there is none yet."""
    try:
        return regularfile.read(path, limit)
    except FileNotFoundError:
        return None
    except regularfile.Refused as exc:
        if exc.errno == errno.EFBIG:
            raise StoreError(str(exc), exc.errno) from None
        raise Unsafe(str(exc), exc.errno) from None  # a FIFO here hung status and diff forever
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}", exc.errno) from None


def write_atomic(path: str, data: bytes, mode: int = 0o600, *, make_directory: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably, with exactly ``mode``.

    The one writer of every file spurinv writes: the state (0600, its directory made 0700 if
    missing), the metrics (0644 for node_exporter, in a directory that must exist) and
    ``config init`` (0640).
    """
    if make_directory:
        ensure_directory(path)
    directory = os.path.dirname(path) or "."
    temporary = f"{path}.tmp-{os.getpid()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(temporary, flags, 0o600)
        except FileExistsError:  # our own pid's leftover from a killed run: safe to reuse
            discard(temporary)
            fd = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot write {temporary}: {exc.strerror}", exc.errno) from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode != 0o600:
                os.fchmod(fd, mode)  # the umask only narrows what os.open grants
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        discard(temporary)
        raise StoreError(f"cannot write {path}: {exc.strerror}", exc.errno) from None
    try:
        directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
    except OSError:
        pass  # the rename is done; some filesystems refuse fsync on a directory


def write_state(path: str, data: bytes) -> None:
    """Write the state file, never one its loader (``read``: at most MAX_STATE) would refuse:
    such a file would be moved aside as corrupt by the next run, and the baseline with it."""
    if len(data) > MAX_STATE:
        raise StoreError(
            f"cannot write {path}: the state would be {len(data)} bytes, more than the {MAX_STATE >> 20} MiB "
            "a run reads back; the previous state file is untouched",
            errno.EFBIG,
        )
    write_atomic(path, data)


def discard(path: str) -> None:
    """Remove a temporary file if it is there."""
    try:  # noqa: SIM105  (importing contextlib costs the timer's tick 0.6 ms)
        os.unlink(path)
    except OSError:
        pass


def quarantine(path: str, stamp: str) -> str:
    """Move a corrupt state file aside to ``<path>.corrupt-<stamp>``; return the new name."""
    target = f"{path}.corrupt-{stamp}"
    try:
        os.replace(path, target)
    except OSError as exc:
        raise StoreError(f"cannot move corrupt {path} aside: {exc.strerror}", exc.errno) from None
    return target


# --- the lock file: what may be opened, and who holds it ------------------------------


def open_lock(path: str) -> int:
    """Open (creating 0600) the lock file: a regular, single-link file of ours, or Unsafe.

    The holder's name is written into it, so a hard link planted there would have us truncate
    whatever file it links to, and a FIFO would hang the open.
    """
    try:
        return regularfile.open_fd(path, write=True, create=True)
    except regularfile.Refused as exc:
        raise Unsafe(str(exc), exc.errno) from None
    except OSError as exc:
        raise StoreError(f"cannot open lock {path}: {exc.strerror}", exc.errno) from None


def holder_named(text: str) -> str:
    """The lock file's holder line if that process is alive and is spurinv, else "another run".

    The file keeps the last holder's line after it exits (the flock, not the text, is the lock),
    and its pid may have been reused since: only a live spurinv is named.
    """
    words = text.split()
    if len(words) < 2 or words[0] != "pid" or not words[1].isascii() or not words[1].isdigit():
        return "another run"
    pid = int(words[1][:10])
    if not _is_spurinv(pid):
        return "another run"
    return " ".join(text.strip().splitlines()[0].split())[:200]


def _is_spurinv(pid: int) -> bool:
    from spurinv.inventory.root import PROCESS_COMMAND_LINE

    try:
        with open(PROCESS_COMMAND_LINE.format(pid=pid), "rb") as handle:
            argv = handle.read(4096).split(b"\0")
    except OSError:  # no such process (or no /proc): do not name anyone
        return False
    # `spurinv …`, `python /usr/local/bin/spurinv …`, `python -m spurinv …`
    if os.path.basename(argv[0]) == b"spurinv" or (len(argv) > 1 and os.path.basename(argv[1]) == b"spurinv"):
        return True
    return argv[1:3] == [b"-m", b"spurinv"]
