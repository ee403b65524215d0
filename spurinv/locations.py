"""Where the state and config files are. Stdlib only (used by the lean entry point).

State: ``--state`` > ``$SPURINV_STATE`` > ``$STATE_DIRECTORY/state.json`` (systemd's
``StateDirectory=``) > ``/var/lib/spurinv/state.json``; the first two must name an existing
directory, the others are created (0700) when missing.
Config: ``--config`` > ``$SPURINV_CONFIG`` > ``/etc/spurinv/config.toml``.
"""

from __future__ import annotations

import os

DEFAULT_STATE = "/var/lib/spurinv/state.json"
DEFAULT_CONFIG = "/etc/spurinv/config.toml"


def state_path(flag: str | None, environ: dict[str, str]) -> str:
    """Resolve the state file's path."""
    if flag:
        return os.path.abspath(flag)
    if environ.get("SPURINV_STATE"):
        return os.path.abspath(environ["SPURINV_STATE"])
    if environ.get("STATE_DIRECTORY"):
        return os.path.join(environ["STATE_DIRECTORY"].split(":")[0], "state.json")
    return DEFAULT_STATE


def state_named(flag: str | None, environ: dict[str, str]) -> bool:
    """Was the state file named by the operator (``--state``, ``$SPURINV_STATE``)? Then its
    directory must exist: a typo must not be a fresh start. The default directory comes from the
    unit's ``StateDirectory=``, or is created."""
    return bool(flag or environ.get("SPURINV_STATE"))


def config_path(flag: str | None, environ: dict[str, str]) -> tuple[str, bool]:
    """Resolve the config file's path; the bool says whether it was asked for explicitly."""
    if flag:
        return os.path.abspath(flag), True
    if environ.get("SPURINV_CONFIG"):
        return os.path.abspath(environ["SPURINV_CONFIG"]), True
    return DEFAULT_CONFIG, False


def clash(other: str, state: str) -> str | None:
    """Which of spurinv's own files writing ``other`` would replace (the state file or its
    lock), named for a message; None when it is neither."""
    target = _landing(other)
    for what, path in (("the state file", state), ("the state file's lock", state + ".lock")):
        if target == _landing(path):
            return f"{what} {path}"
    return None


def _landing(path: str) -> str:
    """Where a file renamed to ``path`` lands: its directory resolved, its own name as it is."""
    absolute = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


def identity(path: str) -> str:
    """What changes when the file changes: inode, size, mtime — or ``none``."""
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:none"
    return f"{path}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
