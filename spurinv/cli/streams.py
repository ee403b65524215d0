"""Standard output that fails in one line. Stdlib only (hot path).

``spurinv refresh > /dev/full``, or a reader that closed the pipe, made the first ``write`` or the
final flush raise ``OSError``: a traceback on the lean path, "internal error" (70) on the full one.
The entry point (:func:`spurinv.cli.launch.main`) wraps ``sys.stdout`` in :class:`Guarded`, whose
failures are :class:`OutputError` — deliberately not an ``OSError``, so that neither click's own
broken-pipe handling nor any ``except OSError`` meant for a file on disk mistakes it — and turns
one into a single line on stderr and exit 74 (EX_IOERR), whichever path wrote.
"""

import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO


class OutputError(Exception):
    """Writing to standard output failed; ``reason`` is the system's word for why, ``errno`` its number."""

    def __init__(self, reason: str, number: "int | None" = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.errno = number

    @property
    def closed(self) -> bool:
        """The reader went away (``spurinv discover | head``): its choice, not a failure."""
        return self.errno == errno.EPIPE


class _Wrapped:
    """A text stream with its own ``write`` and ``flush``; everything else (``isatty``,
    ``encoding``, ``fileno`` for rich and click) is the stream's own."""

    def __init__(self, stream: "TextIO | None") -> None:
        self.stream = stream  # None: Python started with the descriptor closed

    def __getattr__(self, name: str) -> "Any":
        if self.stream is None:
            raise AttributeError(name)
        return getattr(self.stream, name)


class Guarded(_Wrapped):
    """Standard output whose ``write`` and ``flush`` raise :class:`OutputError`."""

    def write(self, text: str) -> int:
        if self.stream is None:
            raise OutputError(os.strerror(errno.EBADF))
        try:
            return self.stream.write(text)
        except (OSError, ValueError) as exc:  # ValueError: the stream was closed under us
            raise OutputError(_reason(exc), getattr(exc, "errno", None)) from None

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except (OSError, ValueError) as exc:
            raise OutputError(_reason(exc), getattr(exc, "errno", None)) from None


class Lossy(_Wrapped):
    """Standard error that drops what it cannot write: a log line that cannot be written has
    nowhere to be reported, and must not turn a run's exit status into 1 or abort its save."""

    def write(self, text: str) -> int:
        if self.stream is not None:
            try:
                return self.stream.write(text)
            except (OSError, ValueError):
                pass
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            try:  # noqa: SIM105 (contextlib is not imported on the hot path)
                self.stream.flush()
            except (OSError, ValueError):
                pass


def utf8(stream: "TextIO | None") -> None:
    """Make ``stream`` write UTF-8 whatever the locale says. Under ``LANG=en_US`` (ISO-8859-1 on
    Debian) an arrow in a drain reason could not be written (74) after the drain was sent; what
    spurinv prints is UTF-8, as its files are. A stream that is not a real text file is left as it is."""
    encoding = getattr(stream, "encoding", None)
    if stream is None or not isinstance(encoding, str) or encoding.replace("-", "").lower() == "utf8":
        return
    try:  # noqa: SIM105 (contextlib is not imported on the hot path)
        stream.reconfigure(encoding="utf-8", errors=stream.errors)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        pass


def _reason(exc: "Exception") -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def abandon(stream: "TextIO | None") -> None:
    """After a failed write, point fd 1 at /dev/null so the interpreter's flush at exit cannot fail
    again ("Exception ignored … BrokenPipeError", exit 120) with output nobody can read."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        return
    if fd < 0:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
