"""Exit statuses, following sysexits.h.

Plain integers rather than an IntEnum: this module is imported on the timer's hot path, where
the ``enum`` import alone costs a few milliseconds. ``TABLE`` is the documented contract; the
README, the man page and a test are checked against it.
"""

OK = 0
DIFFERENT = 1  # `spurinv diff --exit-code` found a difference (as `git diff --exit-code`)
ATTENTION = 1  # `spurinv fleet --exit-code`: a node needs attention
SOFTWARE = 70  # EX_SOFTWARE: internal error (a bug); SPURINV_DEBUG=1 shows the traceback
USAGE = 64  # EX_USAGE: bad command line
DATAERR = 65  # EX_DATAERR: corrupt state file in --strict mode, or a state file from a newer spurinv
NOHOST = 68  # EX_NOHOST: the controller does not know this node's name
UNAVAILABLE = 69  # EX_UNAVAILABLE: controller unreachable, or a read-only gateway
CANTCREAT = 73  # EX_CANTCREAT: the state directory or metrics file cannot be created or written
IOERR = 74  # EX_IOERR: discovery failed (or the state file could not be written)
TEMPFAIL = 75  # EX_TEMPFAIL: state lock held by another run, or controller backoff not elapsed
PROTOCOL = 76  # EX_PROTOCOL: the controller refused or did not apply our update, or answered garbage
NOPERM = 77  # EX_NOPERM: authentication or permission refused (by the controller, or unsafe token file)
CONFIG = 78  # EX_CONFIG: configuration error

TABLE: tuple[tuple[int, str, str], ...] = (
    (OK, "EX_OK", "success, or nothing to do"),
    (DIFFERENT, "-", "`diff --exit-code`: the node differs from the baseline; `fleet --exit-code`: a node needs attention"),
    (USAGE, "EX_USAGE", "bad command line"),
    (DATAERR, "EX_DATAERR", "corrupt state file with --strict, or a state file from a newer version"),
    (NOHOST, "EX_NOHOST", "the controller does not know this node"),
    (UNAVAILABLE, "EX_UNAVAILABLE", "controller unreachable, or a read-only gateway"),
    (SOFTWARE, "EX_SOFTWARE", "internal error"),
    (CANTCREAT, "EX_CANTCREAT", "state directory or metrics file not writable"),
    (IOERR, "EX_IOERR", "discovery failed, or the state could not be written"),
    (TEMPFAIL, "EX_TEMPFAIL", "state lock held by another run, or controller backoff not elapsed"),
    (PROTOCOL, "EX_PROTOCOL", "controller refused or did not apply the update, or answered garbage"),
    (NOPERM, "EX_NOPERM", "authentication or permission refused, or an unsafe token file"),
    (CONFIG, "EX_CONFIG", "configuration error"),
)
