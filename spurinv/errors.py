"""Typed errors that carry their exit status; only the CLI turns them into messages."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from spurinv import exitcode

ControllerKind = Literal["unreachable", "auth", "refused", "protocol", "unknown-node", "read-only"]
"""What went wrong with the controller: decides the exit status and the backoff (the state file's
``backoff.kind``). A ``Literal`` rather than an enum: one type for mypy, plain strings in JSON."""


class SpurinvError(Exception):
    """Base class: ``code`` is a stable identifier for JSON output, ``exit_code`` from sysexits.
    A subclass names both in its header, the one place they are said."""

    exit_code = exitcode.SOFTWARE
    code = "error"

    def __init_subclass__(cls, *, code: str = "", exit_code: int = 0) -> None:
        super().__init_subclass__()
        cls.code = code or cls.code
        cls.exit_code = exit_code or cls.exit_code

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(SpurinvError, code="usage", exit_code=exitcode.USAGE):
    """The command line is wrong: a flag, its value, or two flags that clash."""


class ConfigError(SpurinvError, code="config", exit_code=exitcode.CONFIG):
    """The configuration (file, environment) is wrong, named by its file and key."""


class TokenError(SpurinvError, code="token", exit_code=exitcode.NOPERM):
    """The controller token is missing or its file is unsafe."""


class StateError(SpurinvError, code="state"):
    """The state file cannot be used (newer schema, corrupt in strict mode, unwritable)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LockError(SpurinvError, code="locked", exit_code=exitcode.TEMPFAIL):
    """Another run holds the lock (exit 75: try again later)."""


class Stopped(SpurinvError):
    """A run ended early, not by a fault (exit 75). ``what`` says what stopped it; the message
    adds what became of the state, "state saved" unless told otherwise: only the run knows
    whether it saves (a dry run never does, nor a run stopped before it had a reading), so it
    words it with :meth:`saving`, and every message tells the truth about the state file."""

    def __init__(self, what: str, saved: str = "state saved") -> None:
        super().__init__(f"{what}; {saved}")
        self.what = what

    def saving(self, saved: str) -> Self:
        """The same stop, saying ``saved`` of the state instead."""
        return type(self)(self.what, saved)


class Interrupted(Stopped, code="interrupted", exit_code=exitcode.TEMPFAIL):
    """SIGTERM or SIGINT ended the run (exit 75: try again later)."""


class DeadlineError(Stopped, code="deadline", exit_code=exitcode.TEMPFAIL):
    """``controller.run_deadline`` passed: no further request (exit 75)."""


class ControllerError(SpurinvError):
    """A controller call failed; ``kind`` decides the exit status and the backoff."""

    KINDS: ClassVar[dict[ControllerKind, int]] = {
        "unreachable": exitcode.UNAVAILABLE,
        "read-only": exitcode.UNAVAILABLE,
        "unknown-node": exitcode.NOHOST,
        "auth": exitcode.NOPERM,
        "refused": exitcode.PROTOCOL,
        "protocol": exitcode.PROTOCOL,
    }

    def __init__(self, kind: ControllerKind, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.kind: ControllerKind = kind
        # False when the request never reached the controller (a refused or timed-out connection):
        # the run's output must not say it was sent
        self.sent = sent
        self.code = f"controller-{kind}"
        self.exit_code = self.KINDS[kind]
