"""A run's budget: a wall-clock deadline, and the signals that end a run early. Stdlib only.

``controller.run_deadline`` bounds the whole run (the unit's ``TimeoutStartSec`` must never be
what ends it): no controller request starts after the deadline, and a request under way is cut
at it. SIGTERM (systemd stopping the unit) and SIGINT raise :class:`~spurinv.errors.Interrupted`
in the main thread at once — also in the middle of a request — so the run can save its state,
unsettled intent included, and exit 75 well within the unit's ``TimeoutStopSec``. Saving is
shielded: the signals are blocked while the state file is written, and delivered after.

The per-request SIGALRM guard in :mod:`spurinv.controller.rest` uses another signal and keeps working.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from spurinv.errors import DeadlineError, Interrupted

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Budget:
    """The time left for one run; ``clock`` is monotonic seconds (pass a fake one in tests)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.ends = clock() + seconds

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.ends - self.clock())

    def check(self, what: str) -> None:
        """Raise DeadlineError if the deadline has passed: nothing new may start."""
        if self.remaining() <= 0:
            raise DeadlineError(f"controller.run_deadline ({self.seconds:g} s) reached before {what}")

    def allow(self, seconds: float, what: str) -> float:
        """The seconds ``what``, starting now, may take: ``seconds`` cut to what is left of the
        run; DeadlineError if nothing is (no request or command starts after the deadline)."""
        self.check(what)
        return min(seconds, self.remaining())

    def cut(self, what: str) -> DeadlineError:
        """The error for ``what``, stopped because the deadline cut its own timeout short: the
        deadline's doing, not the controller's (no backoff for it)."""
        return DeadlineError(f"controller.run_deadline ({self.seconds:g} s) reached during {what}")


class Signals:
    """While active, SIGTERM and SIGINT raise Interrupted (once) in the main thread."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, signal._HANDLER] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None:
            return  # the first one is being handled: let the run save and leave
        self.received = signum
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold SIGTERM and SIGINT for the block (a state save); they are delivered after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


__all__ = ["Budget", "Signals", "shielded"]
