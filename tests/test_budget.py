"""The run's signals: what ``Signals`` and ``shielded`` leave behind (spurinv/budget.py)."""

from __future__ import annotations

import signal
import threading

from spurinv.budget import Signals, shielded


def _mine(_signum: int, _frame: object) -> None:
    """A handler someone else installed before the run."""


def test_the_handlers_in_place_before_the_run_are_back_after_it():
    before = signal.signal(signal.SIGTERM, _mine)
    try:
        with Signals():
            assert signal.getsignal(signal.SIGTERM) is not _mine
        assert signal.getsignal(signal.SIGTERM) is _mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_handler_installed_outside_python_comes_back_as_the_default():
    """``signal.signal`` answers None for a handler not set from Python: restore SIG_DFL, never None."""
    signals = Signals()
    before = signal.getsignal(signal.SIGTERM)
    try:
        with signals:
            signals._previous[signal.SIGTERM] = None
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_shielded_block_runs_in_another_thread_too():
    """Only the main thread can change the signal mask of the run; elsewhere the block still runs."""
    ran: list[str] = []

    def work() -> None:
        with shielded():
            ran.append("saved")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()

    assert ran == ["saved"]
