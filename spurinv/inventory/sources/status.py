"""Per-source bookkeeping: status (ok / absent / failed), a one-line detail, and problems.

A *problem* names the source, the path and the reason. ``errors`` make the whole discovery fail;
``flags`` are inconsistencies worth reporting that do not change what can be scheduled (a stale
CDI spec, say); ``evidence`` says a partition switch is in progress (docs/partitions.md §2.4):
the reading is *switching*, not failed, and its problems carry the source ``switch``.
Plain classes and dicts: this runs on the timer's hot path.
"""

from spurinv.shape import SWITCH, counted  # SWITCH: the source of a switch-in-progress problem (its evidence)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from re import Match
    from typing import Final

    from spurinv.inventory.model import Problem, SourceState, SourceStatus

# What one source may record: the state file keeps every reading's problems (twice: the current
# and the previous reading), and its loader reads at most store.MAX_STATE (16 MiB); 40,000
# symlinks in a CDI directory were 40,000 flags. Past the bound, one last problem counts the rest.
MAX_PROBLEMS = 100
MAX_TEXT = 1024  # characters of a problem's path or reason

_SURROGATES = "[\ud800-\udfff]"


def has_surrogate(text: str) -> bool:
    """``re.search("[\\ud800-\\udfff]", text)``: strict UTF-8 encodes every code point but these."""
    if text.isascii():
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def escaped(text: str, *, inside_json: bool = False) -> str:
    """Text with its lone surrogates spelled out: ``os.listdir`` gives a name that is not UTF-8
    (``bad\\xff.json``) as ``bad\\udcff.json``, which neither the state file (pydantic) nor a
    UTF-8 output can hold. ``\\udc80``-``\\udcff`` become ``\\x80``-``\\xff`` (the byte), any other
    surrogate ``\\ud800``; text without surrogates is returned as it is (the common case).
    ``inside_json``: ``text`` is JSON text, so the backslash is written escaped (``\\\\xff``)."""
    if not has_surrogate(text):
        return text
    import re  # only for such a name: importing re costs the timer's tick ~8 ms

    if inside_json:
        return re.sub(_SURROGATES, lambda match: "\\" + _spelled(match), text)
    return re.sub(_SURROGATES, _spelled, text)


def _spelled(match: "Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


OK: "Final" = "ok"
ABSENT: "Final" = "absent"
FAILED: "Final" = "failed"


class Report:
    """What one source found out about itself while reading."""

    __slots__ = (
        "detail",
        "errors",
        "evidence",
        "flags",
        "name",
        "status",
        "unlisted_errors",
        "unlisted_flags",
        "unlisted_path",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.status: SourceState = OK
        self.detail = ""
        self.errors: list[Problem] = []
        self.flags: list[Problem] = []
        self.unlisted_errors = 0
        self.unlisted_flags = 0
        self.unlisted_path = ""  # the last problem past the bound names a path for the count
        self.evidence: list[Problem] = []

    def failed(self) -> bool:
        """Whether the source failed (so far: a later read may fail it still)."""
        return self.status == FAILED

    def fail(self, path: str, reason: str) -> None:
        """Record a read or consistency error: the source, and so the discovery, failed."""
        self.status = FAILED
        if not self._listed(self.errors, path, reason):
            self.unlisted_errors += 1

    def flag(self, path: str, reason: str) -> None:
        """Record an inconsistency that does not change the schedulable inventory."""
        if not self._listed(self.flags, path, reason):
            self.unlisted_flags += 1

    def _listed(self, problems: "list[Problem]", path: str, reason: str) -> bool:
        """Add the problem to ``problems`` within the bound; past it, only its path is kept (for
        the count :meth:`listed` ends with) and the caller counts it: False."""
        if len(problems) < MAX_PROBLEMS:
            problems.append(self._problem(path, reason))
            return True
        self.unlisted_path = path
        return False

    def _problem(self, path: str, reason: str) -> "Problem":
        path, reason = escaped(path), escaped(reason)
        if len(path) > MAX_TEXT:
            path = path[: MAX_TEXT - 3] + "..."
        if len(reason) > MAX_TEXT:
            reason = reason[: MAX_TEXT - 3] + "..."
        return {"source": self.name, "path": path, "reason": reason}

    def listed(self) -> "tuple[list[Problem], list[Problem]]":
        """The errors and flags, each ending with a count of those past the bound, if any."""
        errors, flags = list(self.errors), list(self.flags)
        if self.unlisted_errors:
            errors.append(
                self._problem(
                    self.unlisted_path, f"{counted(self.unlisted_errors, 'more error')} not listed, the last of them here"
                )
            )
        if self.unlisted_flags:
            flags.append(
                self._problem(
                    self.unlisted_path, f"{counted(self.unlisted_flags, 'more flag')} not listed, the last of them here"
                )
            )
        return errors, flags

    def switching(self, path: str, reason: str) -> None:
        """Record evidence that a partition switch is in progress: the reading is not settled."""
        if len(self.evidence) < MAX_PROBLEMS:
            problem = self._problem(path, f"{self.name}: {reason}")
            self.evidence.append({**problem, "source": SWITCH})

    def absent(self, reason: str) -> None:
        """Mark the source as not present on this node, with the reason."""
        self.status = ABSENT
        self.detail = escaped(reason)

    def as_dict(self) -> "SourceStatus":
        """Return the JSON form: ``{"status", "detail"}``; a failure's detail is its first error."""
        detail = self.detail
        if self.status == FAILED and self.errors:
            first = self.errors[0]
            others = len(self.errors) - 1 + self.unlisted_errors
            more = f" (+{others} more)" if others else ""
            detail = f"{first['path']}: {first['reason']}{more}"
        return {"status": self.status, "detail": detail}
