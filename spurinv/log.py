"""One line per event to stderr; journald-friendly. Stdlib only.

Under systemd (``$JOURNAL_STREAM`` set) lines carry a syslog priority prefix (``<4>``), which
journald turns into the entry's priority (sd-daemon(3)). Messages never contain the token:
nothing that holds it is ever formatted into a message.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import TextIO

ERROR, WARNING, NOTICE, INFO = 3, 4, 5, 6
NAMES = {ERROR: "error", WARNING: "warning", NOTICE: "notice", INFO: "info"}


class Log:
    """Where diagnostics go; built from the environment, passed in."""

    def __init__(self, environ: Mapping[str, str], stream: TextIO | None = None, quiet: bool = False) -> None:
        self.journal = bool(environ.get("JOURNAL_STREAM"))
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet

    def emit(self, priority: int, message: str) -> None:
        """Write one event as one line."""
        if self.quiet and priority > WARNING:
            return
        line = " ".join(message.split())
        if not line.isprintable():  # controller text in a message must not steer a terminal
            from spurinv.secret import printable

            line = printable(line)
        prefix = f"<{priority}>" if self.journal else f"spurinv: {NAMES[priority]}: " if priority <= WARNING else "spurinv: "
        self.stream.write(f"{prefix}{line}\n")
        self.stream.flush()

    def error(self, message: str) -> None:
        self.emit(ERROR, message)

    def warning(self, message: str) -> None:
        self.emit(WARNING, message)

    def info(self, message: str) -> None:
        self.emit(INFO, message)
