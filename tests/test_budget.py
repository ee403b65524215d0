"""The run's signals: what ``Signals`` and ``shielded`` leave behind (spurinv/budget.py)."""

from __future__ import annotations

import signal
import threading

import pytest

from spurinv.budget import Budget, Signals, shielded
from spurinv.errors import DeadlineError, Interrupted


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


# --- the run's deadline and its signals, pinned ---------------------------


def test_the_deadline_allows_work_until_its_last_instant_and_none_from_it():
    now = [1000.0]
    budget = Budget(10, clock=lambda: now[0])

    assert budget.allow(30, "the GET") == 10.0
    now[0] = 1009.5
    budget.check("the POST")  # half a second left: a request may still start
    assert budget.allow(30, "the POST") == 0.5
    now[0] = 1010.0
    with pytest.raises(DeadlineError) as caught:
        budget.check("the POST")
    assert str(caught.value) == "controller.run_deadline (10 s) reached before the POST; state saved"
    now[0] = 1011.0
    assert budget.remaining() == 0.0  # never negative
    with pytest.raises(DeadlineError):
        budget.allow(1, "the read-back")


def test_a_sigterm_in_a_run_is_an_interruption_and_a_second_one_waits_for_it():
    """The first SIGTERM stops the run (its state is saved on the way out); one more, while that
    happens, is absorbed rather than cutting the save short."""
    before = signal.getsignal(signal.SIGTERM)
    try:
        with Signals() as signals:
            with pytest.raises(Interrupted) as caught:
                signal.raise_signal(signal.SIGTERM)
            assert str(caught.value) == "stopped by SIGTERM; state saved"
            assert signals.received == signal.SIGTERM
            signal.raise_signal(signal.SIGTERM)  # the handler returns: nothing raised
            signal.raise_signal(signal.SIGINT)
            assert signals.received == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, before)


def test_signals_outside_the_main_thread_change_no_handler():
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def work() -> None:
        with Signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()

    assert seen == [before]


def test_a_sigterm_during_a_shielded_block_arrives_after_it():
    order: list[str] = []

    def note(_signum: int, _frame: object) -> None:
        order.append("SIGTERM")

    before = signal.signal(signal.SIGTERM, note)
    try:
        with shielded():
            signal.raise_signal(signal.SIGTERM)
            order.append("saved")
        order.append("after")
    finally:
        signal.signal(signal.SIGTERM, before)

    assert order == ["saved", "SIGTERM", "after"]


def test_a_shielded_block_outside_the_main_thread_holds_nothing_and_ends_cleanly():
    """Outside the main thread no signal is held (only the main thread gets them): the block runs
    once, with the thread's signal mask untouched inside it, and leaves as it came."""
    seen: list[object] = []

    def work() -> None:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        try:
            with shielded():
                seen.append(("inside", signal.pthread_sigmask(signal.SIG_BLOCK, []) == before))
            seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, []) == before)
        except BaseException as exc:  # handed to the test's thread
            seen.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)

    assert seen == [("inside", True), True]
