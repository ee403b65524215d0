"""Where the state and config files are. Stdlib only (used by the lean entry point).

State: ``--state`` > ``$SPURINV_STATE`` > ``$STATE_DIRECTORY/state.json`` (systemd's
``StateDirectory=``) > ``/var/lib/spurinv/state.json``; the first two must name an existing
directory, the others are created (0700) when missing.
Config: ``--config`` > ``$SPURINV_CONFIG`` > ``/etc/spurinv/config.toml``.
"""

import os

DEFAULT_STATE = "/var/lib/spurinv/state.json"
DEFAULT_CONFIG = "/etc/spurinv/config.toml"


def state_path(flag: "str | None", environ: "dict[str, str]") -> str:
    """Resolve the state file's path."""
    if flag:
        return os.path.abspath(flag)
    if environ.get("SPURINV_STATE"):
        return os.path.abspath(environ["SPURINV_STATE"])
    if environ.get("STATE_DIRECTORY"):
        return os.path.join(environ["STATE_DIRECTORY"].split(":")[0], "state.json")
    return DEFAULT_STATE


def state_named(flag: "str | None", environ: "dict[str, str]") -> bool:
    """Was the state file named by the operator (``--state``, ``$SPURINV_STATE``)? Then its
    directory must exist: a typo must not be a fresh start. The default directory comes from the
    unit's ``StateDirectory=``, or is created."""
    return bool(flag or environ.get("SPURINV_STATE"))


def config_path(flag: "str | None", environ: "dict[str, str]") -> "tuple[str, bool]":
    """Resolve the config file's path; the bool says whether it was asked for explicitly."""
    if flag:
        return os.path.abspath(flag), True
    if environ.get("SPURINV_CONFIG"):
        return os.path.abspath(environ["SPURINV_CONFIG"]), True
    return DEFAULT_CONFIG, False


# Beside the state file, under its lock: the CDI specs the ticks parsed, by the BLAKE2b of their
# bytes (:class:`spurinv.inventory.sources.cdi.SpecCache`). Only the tick reads and writes it.
CDI_CACHE = ".cdi"


def clash(other: str, state: str, config: "str | None" = None, tokens: "tuple[str, ...]" = ()) -> "str | None":
    """Which of spurinv's own files writing ``other`` would land on (the state file, its lock, the
    tick's CDI spec cache, the config file, the token file or credential), named for a message;
    None when it is none of them.

    The same file has many names: ``..`` after a symbolic link (the kernel resolves the link
    first, ``os.path.abspath`` does not), a bind mount of the directory, a hard link. So the
    directory is resolved as the kernel would and compared by device and inode, and where the
    target exists, the file itself is compared by device and inode too.
    """
    target = _landing(other)
    mine = [("the state file", state), ("the state file's lock", state + ".lock"),
            ("the tick's CDI spec cache", state + CDI_CACHE)]  # fmt: skip
    if config:
        mine.append(("the config file", config))
    mine += [("the token file", token) for token in tokens if token]
    for what, path in mine:
        if _same(target, _landing(path)):
            return f"{what} {path}"
    return None


Landing = tuple[str, "tuple[int, int] | None", str, "tuple[int, int] | None"]


def _landing(path: str) -> "Landing":
    """Where a file renamed to ``path`` lands: its directory (resolved, and its device and inode
    if it exists), its own name, and the device and inode of what is there now (or None)."""
    joined = path if path.startswith("/") else os.path.join(os.getcwd(), path)  # not normalised: see clash
    directory, name = joined.rsplit("/", 1)
    resolved = os.path.realpath(directory or "/")
    return resolved, _inode(resolved), name, _inode(joined)


def _inode(path: str) -> "tuple[int, int] | None":
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _same(one: "Landing", other: "Landing") -> bool:
    if one[3] is not None and one[3] == other[3]:
        return True  # the same file now: a hard link, a bind mount, a link to it
    if one[2] != other[2]:
        return False
    return one[0] == other[0] or (one[1] is not None and one[1] == other[1])


def not_regular(path: str) -> "str | None":
    """What is at ``path`` when it is there and not a regular file (a device node, a FIFO, a
    symbolic link — to /dev/stdout, say), named for a message: the metrics file replaces its
    target, so only a regular file (or none yet) may be there."""
    import stat

    from spurinv import regularfile

    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) else regularfile.kind(mode)


def same_file(one: str, other: str) -> bool:
    """Are both names the same existing file (device and inode, links followed)?"""
    if not one or not other:
        return False
    mine = _inode(one)
    return mine is not None and mine == _inode(other)


def token_files(token_file: str, credential: str, environ: "dict[str, str]") -> "tuple[str, ...]":
    """Where the controller token may be read from: the systemd credential and the token file."""
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    return tuple(path for path in (os.path.join(credentials, credential) if credentials else "", token_file) if path)


def identity(path: str) -> str:
    """What changes when the file changes: inode, size, mtime — or ``none``."""
    try:
        info = os.stat(path)
    except OSError:
        return f"{path}:none"
    return f"{path}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"
