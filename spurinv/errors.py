"""Typed errors that carry their exit status; only the CLI turns them into messages."""

from __future__ import annotations

from typing import ClassVar, Literal

from spurinv import exitcode

ControllerKind = Literal["unreachable", "auth", "refused", "protocol", "unknown-node", "read-only"]
"""What went wrong with the controller: decides the exit status and the backoff (the state file's
``backoff.kind``). A ``Literal`` rather than an enum: one type for mypy, plain strings in JSON."""


class SpurinvError(Exception):
    """Base class: ``code`` is a stable identifier for JSON output, ``exit_code`` from sysexits."""

    exit_code = exitcode.SOFTWARE
    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(SpurinvError):
    exit_code = exitcode.USAGE
    code = "usage"


class ConfigError(SpurinvError):
    exit_code = exitcode.CONFIG
    code = "config"


class TokenError(SpurinvError):
    """The controller token is missing or its file is unsafe."""

    exit_code = exitcode.NOPERM
    code = "token"


class StateError(SpurinvError):
    """The state file cannot be used (newer schema, corrupt in strict mode, unwritable)."""

    code = "state"

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LockError(SpurinvError):
    exit_code = exitcode.TEMPFAIL
    code = "locked"


class Interrupted(SpurinvError):
    """SIGTERM or SIGINT ended the run; the state was saved (exit 75: try again later)."""

    exit_code = exitcode.TEMPFAIL
    code = "interrupted"


class DeadlineError(SpurinvError):
    """``controller.run_deadline`` passed: no further request; the state was saved (exit 75)."""

    exit_code = exitcode.TEMPFAIL
    code = "deadline"


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

    def __init__(self, kind: ControllerKind, message: str) -> None:
        super().__init__(message)
        self.kind: ControllerKind = kind
        self.code = f"controller-{kind}"
        self.exit_code = self.KINDS[kind]
