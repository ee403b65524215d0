"""Running a command, bounded: the one process runner (``scontrol``, ``register_command``,
``check``'s ``systemctl``).

A command runs as an argv list (no shell) with the environment passed in, stdin closed, its
output read as it comes with only a bounded tail kept, and a timeout after which its process
group is killed; it dies with spurinv (PDEATHSIG). ``resolve`` finds the program first, so a
missing one is a configuration error (78) before anything runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping

from spurinv.errors import ConfigError, ControllerError
from spurinv.secret import printable

MAX_OUTPUT = 64 << 10  # bytes kept from the command's output (the tail)


def resolve(program: str, environ: Mapping[str, str], what: str) -> str:
    """The absolute path of ``program`` (a bare name is looked up on ``$PATH``); ConfigError (78)
    when it is missing or not executable."""
    if "/" not in program:
        for directory in (environ.get("PATH") or os.defpath).split(os.pathsep):
            candidate = os.path.join(directory or ".", program)
            if directory.startswith("/") and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        raise ConfigError(f"{what}: {program!r} is not on PATH")
    if not os.path.isfile(program):
        raise ConfigError(f"{what}: {program} does not exist or is not a regular file")
    if not os.access(program, os.X_OK):
        raise ConfigError(f"{what}: {program} is not executable")
    return program


class Finished:
    """A finished command: exit status, its output (the last ``limit`` bytes of each stream),
    whether more was written than kept, and whether its stdout held bytes that are not UTF-8
    (read as U+FFFD)."""

    def __init__(self, status: int, stdout: str, stderr: str, truncated: bool = False, replaced: bool = False) -> None:
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.truncated = truncated
        self.replaced = replaced


def run(
    argv: list[str], environ: Mapping[str, str], timeout: float, *, limit: int = MAX_OUTPUT, stop_over: bool = False
) -> Finished:
    """Run ``argv`` without a shell; raise ``subprocess.TimeoutExpired`` (after killing its
    process group; its ``output``/``stderr`` hold what was read) or ``OSError`` (it could not start).

    Output is read as it comes and only the last ``limit`` bytes of each stream are kept, so a
    command that prints gigabytes costs at most twice ``limit`` of memory; ``stop_over``: kill
    it as soon as a stream passes ``limit`` (its answer is unusable anyway). Once the command
    itself has exited, its output is read for at most ``GRACE`` seconds more: a daemon it started
    may hold the pipes for ever, and is left running. The command itself dies with us
    (PDEATHSIG): a SIGKILLed run does not leave it to overlap the next run's (what it started
    may live on).
    """
    _refuse_nul(argv, environ)
    with subprocess.Popen(
        _encoded(argv),
        env=dict(environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: a timeout kills its children too
        preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads here; the run is single-threaded)
    ) as process:
        ends = time.monotonic() + timeout
        kept = [bytearray(), bytearray()]
        try:
            truncated = _collect(process, ends, limit, stop_over, kept)
            process.wait(timeout=max(0.0, ends - time.monotonic()))
        except BaseException as exc:  # the timeout, SIGTERM, Ctrl-C: never leave the child running
            _kill_group(process)
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            process.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                exc.output, exc.stderr = bytes(kept[0][-limit:]), bytes(kept[1][-limit:])
            raise
    (out, replaced), (err, _) = (_text(bytes(kept[stream]), limit) for stream in (0, 1))
    return Finished(process.returncode, out, err, truncated, replaced)


GRACE = 0.5  # seconds output is still read after the command exited


def nul_entry(word: str) -> str:
    """Name the entry of ``Key=a,b\\0c,…`` that holds a NUL (a controller's GRES, say), escaped."""
    key, equals, value = word.partition("=")
    if not equals or "\0" in key:
        key, value = "", word
    entry = next((part for part in value.split(",") if "\0" in part), value)
    shown = printable(entry.replace("\0", "\\0"))[:120]
    return f"{key + '= entry ' if key else 'argument '}`{shown}` holds a NUL byte, which no command line can carry"


def _refuse_nul(argv: list[str], environ: Mapping[str, str]) -> None:
    for word in [*argv, *environ.keys(), *environ.values()]:
        if "\0" in word:
            raise ControllerError("protocol", f"`{shlex.join(argv[:3])} …`: {nul_entry(word)}; not run")


def _encoded(argv: list[str]) -> list[bytes]:
    """The program as the file system names it (it was found through ``$PATH`` or checked with
    the locale's encoding); its arguments as UTF-8 whatever the locale, so a drain reason reads
    back as it was sent, as over REST (a Latin-1 locale could not encode "→": exit 70)."""
    return [os.fsencode(argv[0]), *(argument.encode("utf-8", "surrogateescape") for argument in argv[1:])]


def _collect(
    process: subprocess.Popen[bytes],
    ends: float,
    limit: int,
    stop_over: bool,
    kept: list[bytearray],
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Read both streams' tails (``limit`` bytes each) into ``kept`` until both close (or
    ``GRACE`` after the command exited); TimeoutExpired at ``ends``. True if output was cut.
    ``clock`` is ``ends``' clock (a parameter so a test can drive the grace and the timeout)."""
    assert process.stdout is not None
    assert process.stderr is not None
    truncated = False
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ, 0)
        selector.register(process.stderr, selectors.EVENT_READ, 1)
        exited: float | None = None
        while selector.get_map():
            now = clock()
            if process.poll() is not None:  # it exited: what still holds the pipes is not it
                exited = now if exited is None else exited
                left = exited + GRACE - now
                if left <= 0:
                    break
            else:
                left = ends - now
                if left <= 0:
                    raise subprocess.TimeoutExpired(process.args, 0)
            for key, _ in selector.select(min(left, 0.2)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                if _keep(kept[key.data], chunk, limit):
                    truncated = True
                    if stop_over:
                        _kill_group(process)
                        return truncated
    return truncated


def _keep(buffer: bytearray, chunk: bytes, limit: int) -> bool:
    """Append ``chunk`` to ``buffer``, a stream's tail; True if it now holds more than ``limit``.
    Past twice ``limit`` it is cut back to its last ``limit`` bytes, so between chunks it never
    holds more than twice ``limit`` (trimmed now and then, not on every chunk: each trim moves
    the ``limit`` bytes kept)."""
    buffer += chunk
    if len(buffer) <= limit:
        return False
    if len(buffer) > 2 * limit:
        del buffer[: len(buffer) - limit]
    return True


def _die_with_parent() -> None:
    """In the child: get SIGKILL when spurinv dies (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _text(data: bytes, limit: int) -> tuple[str, bool]:
    """The tail as text, and whether some of it was not UTF-8 (then read as U+FFFD)."""
    try:
        return data[-limit:].decode("utf-8"), False
    except UnicodeDecodeError:
        return data[-limit:].decode("utf-8", errors="replace"), True
