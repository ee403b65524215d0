"""Per-source bookkeeping: status (ok / absent / failed), a one-line detail, and problems.

A *problem* names the source, the path and the reason. ``errors`` make the whole discovery fail;
``flags`` are inconsistencies worth reporting that do not change what can be scheduled (a stale
CDI spec, say); ``evidence`` says a partition switch is in progress (docs/partitions.md §2.4):
the reading is *switching*, not failed, and its problems carry the source ``switch``.
Plain classes and dicts: this runs on the timer's hot path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.records import Problem, SourceStatus

SWITCH = "switch"  # the source of a switch-in-progress problem (its evidence)
OK = "ok"
ABSENT = "absent"
FAILED = "failed"


class Report:
    """What one source found out about itself while reading."""

    __slots__ = ("detail", "errors", "evidence", "flags", "name", "status")

    def __init__(self, name: str) -> None:
        self.name = name
        self.status = OK
        self.detail = ""
        self.errors: list[Problem] = []
        self.flags: list[Problem] = []
        self.evidence: list[Problem] = []

    def fail(self, path: str, reason: str) -> None:
        """Record a read or consistency error: the source, and so the discovery, failed."""
        self.status = FAILED
        self.errors.append({"source": self.name, "path": path, "reason": reason})

    def flag(self, path: str, reason: str) -> None:
        """Record an inconsistency that does not change the schedulable inventory."""
        self.flags.append({"source": self.name, "path": path, "reason": reason})

    def switching(self, path: str, reason: str) -> None:
        """Record evidence that a partition switch is in progress: the reading is not settled."""
        self.evidence.append({"source": SWITCH, "path": path, "reason": f"{self.name}: {reason}"})

    def absent(self, reason: str) -> None:
        """Mark the source as not present on this node, with the reason."""
        self.status = ABSENT
        self.detail = reason

    def as_dict(self) -> SourceStatus:
        """Return the JSON form: ``{"status", "detail"}``; a failure's detail is its first error."""
        detail = self.detail
        if self.status == FAILED and self.errors:
            first = self.errors[0]
            more = f" (+{len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
            detail = f"{first['path']}: {first['reason']}{more}"
        return {"status": self.status, "detail": detail}
