"""Exit statuses, following sysexits.h (the stdlib names them: ``os.EX_*``).

Plain integers rather than an IntEnum: this module is imported on the timer's hot path, where
the ``enum`` import alone costs a few milliseconds. ``TABLE`` is the documented contract; the
README, the man page and a test are checked against it.
"""

import os

OK = os.EX_OK
DIFFERENT = 1  # `spurinv diff --exit-code` found a difference (as `git diff --exit-code`)
ATTENTION = 1  # `spurinv fleet --exit-code`: a node needs attention
SOFTWARE = os.EX_SOFTWARE  # internal error (a bug); SPURINV_DEBUG=1 shows the traceback
USAGE = os.EX_USAGE  # bad command line, including a bad value given to a flag that overrides a config key
DATAERR = os.EX_DATAERR  # corrupt state file (refresh only with --strict), or one from a newer spurinv
NOINPUT = os.EX_NOINPUT  # status or diff cannot read the state file (permission, not a regular file)
NOHOST = os.EX_NOHOST  # the controller does not know this node's name
UNAVAILABLE = os.EX_UNAVAILABLE  # controller unreachable, or a read-only gateway
CANTCREAT = os.EX_CANTCREAT  # the state directory or metrics file cannot be created or written, or is unsafe
IOERR = os.EX_IOERR  # discovery failed (or the state file, or stdout, could not be written)
TEMPFAIL = os.EX_TEMPFAIL  # lock held, backoff, run deadline, a partition switch in progress, or a signal
PROTOCOL = os.EX_PROTOCOL  # the controller refused or did not apply our update, or answered garbage
NOPERM = os.EX_NOPERM  # authentication or permission refused (by the controller, or unsafe token file)
CONFIG = os.EX_CONFIG  # configuration error (a bad value in the config file, or the file itself)

TABLE: tuple[tuple[int, str, str], ...] = (
    (OK, "EX_OK", "success, or nothing to do"),
    (DIFFERENT, "-", "`diff --exit-code`: the node differs from the baseline; `fleet --exit-code`: a node needs attention"),
    (USAGE, "EX_USAGE", "bad command line, including a bad value for a flag such as --confirm-interval"),
    (DATAERR, "EX_DATAERR", "corrupt state file (status, diff; refresh only with --strict), or one from a newer version"),
    (NOINPUT, "EX_NOINPUT", "status or diff cannot read the state file"),
    (NOHOST, "EX_NOHOST", "the controller does not know this node"),
    (UNAVAILABLE, "EX_UNAVAILABLE", "controller unreachable, or a read-only gateway"),
    (SOFTWARE, "EX_SOFTWARE", "internal error"),
    (
        CANTCREAT,
        "EX_CANTCREAT",
        "state directory or metrics file not writable (permission, read-only file system), a missing directory for an "
        "explicit --state, or a state directory another user can write",
    ),
    (
        IOERR,
        "EX_IOERR",
        "discovery failed, the state or metrics could not be written (an I/O error, a full disk), "
        "or standard output could not be written",
    ),
    (
        TEMPFAIL,
        "EX_TEMPFAIL",
        "lock held, backoff not elapsed, run deadline reached, a partition switch in progress "
        "(until policy.switch_timeout), or stopped by SIGTERM/SIGINT",
    ),
    (PROTOCOL, "EX_PROTOCOL", "controller refused or did not apply the update, or answered garbage"),
    (NOPERM, "EX_NOPERM", "authentication or permission refused, or an unsafe token file"),
    (CONFIG, "EX_CONFIG", "configuration error: the config file, or a bad value in it"),
)


def of_errno(number: int | None) -> int:
    """The exit status of a file spurinv could not read or write, from its ``errno``: the disk
    (full, over quota, failing, file too large) is 74; anything else — permissions, a symlink
    where the file should be, a missing or foreign directory — is 73."""
    import errno

    return IOERR if number in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG) else CANTCREAT
