"""Crash consistency, concurrency and full or read-only disks for the state file.

All through real ``spurinv refresh`` processes on fixture roots: SIGKILL at random points (the
kill delays are spread over the duration of a run measured first), 2 and 10 concurrent runs
against one state file, a lock left by a killed holder, a full tmpfs and a read-only remount.
Every process is stopped by its PID.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import hostile
import pytest

from spurinv.state import file as state_file

TRIALS = int(os.environ.get("SPURINV_CRASH_TRIALS", "300"))
BUDGET = float(os.environ.get("SPURINV_CRASH_SECONDS", "90"))


def start(root: Path, state: Path, config: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "spurinv", "refresh", "--root", str(root), "--state", str(state), "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(process: subprocess.Popen[bytes], timeout: float = 60) -> tuple[int, str]:
    _out, err = process.communicate(timeout=timeout)
    return process.returncode, err.decode()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.communicate()


def is_successor(new: state_file.State, old: state_file.State, since: float) -> bool:
    """``new`` is what one run writes after ``old``: the old newest reading kept, one new reading."""
    return (
        len(new["readings"]) >= 1
        and (not old["readings"] or new["readings"][:-1] == old["readings"][-1:])
        and new["readings"][-1]["taken_at"].timestamp() >= int(since)
        and new["last"] is not None
        and new["last"]["at"].timestamp() >= int(since)
    )


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_the_old_or_the_new_state(built, env, tmp_path, ledger):
    roots = [built("mi300x-spx"), built("mi300x-cpx")]  # 8 and 64 devices: 15 kB and 100 kB states
    config = hostile.config(tmp_path / "config.toml", lock_timeout=10)
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    durations = []
    for root in (roots[0], roots[1], roots[0]):  # also creates the first state
        started = time.monotonic()
        code, err = finish(start(root, state, config, env))
        durations.append(time.monotonic() - started)
        assert code == 0, err
    window = max(durations)  # a full run (the lean tick path is shorter): kills land across it
    rng = random.Random(7)  # noqa: S311 (kill timing, not cryptography)  # fixed seed: a failure is reproducible with the printed trial number
    outcomes = {"old": 0, "new": 0}
    deadline = time.monotonic() + BUDGET
    trials = 0
    while trials < TRIALS and time.monotonic() < deadline:
        trials += 1
        old_bytes = state.read_bytes()
        old = state_file.parse(old_bytes, str(state))
        since = time.time()
        process = start(rng.choice(roots), state, config, env)
        try:
            process.wait(timeout=rng.uniform(0, window * 1.1))
            killed = False
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            killed = True
        code, err = finish(process)
        try:
            new = state_file.load(str(state))
            same = state.read_bytes() == old_bytes
            # A finished run must have written its successor (which may be byte-identical to the old
            # file when two runs fall in the same second); a killed one left the old or the new file.
            kind = "old" if same and killed else ("new" if is_successor(new, old, since) else "neither")  # type: ignore[arg-type]
        except Exception as exc:  # the property under test: this must never happen
            kind = f"unloadable: {exc}"
        if kind in outcomes:
            outcomes[kind] += 1
        label = f"killed → {kind}" if killed else f"finished → {kind}"
        ledger.record("crash (SIGKILL)", "kill -9 during refresh", label, lost=kind not in outcomes)
        assert kind in outcomes, f"trial {trials}: state is {kind}; stderr: {err[-500:]}"
        assert killed or code == 0, err
    spent = BUDGET - max(0, deadline - time.monotonic())
    print(f"\n{trials} SIGKILL trials in {spent:.0f} s, kills spread over a {window:.2f} s run: {outcomes}")
    assert trials >= min(TRIALS, 50), "too few trials in the time budget to mean anything"
    assert outcomes["old"], "kills must land before the write"
    assert outcomes["new"], "kills must land after the write"
    # Temporaries of killed runs are removed by the next full run (a changed reading), under the lock.
    latest = state_file.load(str(state))["readings"][-1]
    code, err = finish(start(roots[0] if len(latest["inventory"]["devices"]) == 64 else roots[1], state, config, env))
    assert code == 0, err
    leftover = list(state.parent.glob("state.json.tmp-*"))
    ledger.record("crash (SIGKILL)", "temporaries left by killed runs", "cleaned" if not leftover else "LEFT",
                  lost=bool(leftover))  # fmt: skip
    assert not leftover


def lock_config(tmp_path: Path, lock_timeout: float, confirm_interval: float) -> Path:
    return hostile.config(tmp_path / "config.toml", lock_timeout=lock_timeout, confirm_interval=confirm_interval)


def primed_state(built, env, tmp_path) -> tuple[Path, Path]:
    """A state whose last reading is SPX; a run on the CPX root then sees a change and, with a
    confirm interval, sleeps under the lock (a holder that deterministically outlasts the waiters)."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    code, err = finish(start(built("mi300x-spx"), state, lock_config(tmp_path, 1, 0), env))
    assert code == 0, err
    return state, built("mi300x-cpx")


@pytest.mark.parametrize("runs", [2, 10])
def test_concurrent_refreshes_one_works_the_others_exit_75_naming_the_holder(built, env, tmp_path, ledger, runs):
    state, cpx = primed_state(built, env, tmp_path)
    # the holder's wait before its re-read only has to outlast freeze_the_holder's look (every
    # 20 ms): frozen, it holds the lock however long the others take to answer
    config = lock_config(tmp_path, lock_timeout=1, confirm_interval=2)

    processes = [start(cpx, state, config, env) for _ in range(runs)]
    started = time.monotonic()
    try:
        # the first to take the lock is held there (SIGSTOP) until every other run has answered: on
        # a loaded machine a run can otherwise start after the winner's 2 s and win in its turn
        holder = freeze_the_holder(processes, Path(f"{state}.lock"))
        others = [(process.pid, *finish(process)) for process in processes if process is not holder]
        os.kill(holder.pid, signal.SIGCONT)
        results = [(holder.pid, *finish(holder)), *others]
    finally:
        for process in processes:
            stop(process)
    elapsed = time.monotonic() - started

    winners = [pid for pid, code, _err in results if code == 0]
    for _pid, code, err in results:
        named = any(f"pid {winner} (refresh)" in err for winner in winners)
        ledger.record("concurrency", f"{runs} concurrent refreshes", f"exit {code}", lost=code not in (0, 75))
        assert code in (0, 75), err
        if code == 75:
            assert named, f"the message must name the holder {winners}: {err}"
            assert len(err.strip().splitlines()) == 1, err
    assert len(winners) == 1, results
    loaded = state_file.load(str(state))
    assert loaded is not None
    assert loaded["readings"][-1]["inventory"]["cpus"] == 192
    assert len(loaded["readings"][-1]["inventory"]["devices"]) == 64
    assert loaded["pending"] is None
    assert elapsed < 2 + 30


def test_ten_concurrent_refreshes_all_finish_when_the_wait_is_long_enough(built, env, tmp_path, ledger):
    """Runs that do not outlast the others' wait: all ten wait their turn and succeed."""
    state, _cpx = primed_state(built, env, tmp_path)
    config = lock_config(tmp_path, lock_timeout=60, confirm_interval=0)

    processes = [start(built("mi300x-spx"), state, config, env) for _ in range(10)]
    try:
        results = [finish(process) for process in processes]
    finally:
        for process in processes:
            stop(process)

    for code, err in results:
        ledger.record("concurrency", "10 concurrent refreshes, long wait", f"exit {code}", lost=code != 0)
        assert code == 0, err
    loaded = state_file.load(str(state))
    assert loaded is not None
    assert loaded["baseline"] is not None
    assert loaded["pending"] is None


def test_a_lock_left_by_a_killed_holder_never_blocks(built, env, tmp_path, ledger):
    state, cpx = primed_state(built, env, tmp_path)
    lock = Path(f"{state}.lock")
    # confirm_interval under controller.run_deadline (60 s): a re-read that would not fit is left to the next tick
    holder = start(cpx, state, lock_config(tmp_path, lock_timeout=1, confirm_interval=30), env)
    try:
        deadline = time.monotonic() + 30
        # (its lean fast path takes and drops the lock first: wait until the full run holds it)
        while f"pid {holder.pid} " not in (lock.read_text() if lock.exists() else "") or try_flock(lock):
            assert time.monotonic() < deadline, "the holder never took the lock"
            assert holder.poll() is None, holder.communicate()
            time.sleep(0.05)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        stop(holder)

    assert f"pid {holder.pid} " in lock.read_text()  # the file (and the dead pid in it) stays...
    assert try_flock(lock)  # ...but the kernel released the flock with the process
    started = time.monotonic()
    code, err = finish(start(cpx, state, lock_config(tmp_path, lock_timeout=1, confirm_interval=0), env))
    ledger.record("concurrency", "stale lock of a SIGKILLed holder", f"exit {code}", lost=code != 0)
    assert code == 0, err
    assert time.monotonic() - started < 30


def freeze_the_holder(processes: list[subprocess.Popen[bytes]], lock: Path) -> subprocess.Popen[bytes]:
    """Stop (SIGSTOP) the one of ``processes`` that holds ``lock``'s flock, once it has written its
    pid into the file, and return it; the flock stays held while it is stopped. The holder is the
    kernel's word (``/proc/locks``): the file names the last holder until the next one writes."""
    ours = {process.pid: process for process in processes}
    deadline = time.monotonic() + 30
    while True:
        pid = flock_holder(lock)
        if pid in ours:
            os.kill(pid, signal.SIGSTOP)
            # held, and its pid written (a holder stopped between the two would leave the file
            # naming the one before it, and the others would rightly say so)
            if flock_holder(lock) == pid and f"pid {pid} " in lock.read_text():
                return ours[pid]
            os.kill(pid, signal.SIGCONT)  # let go already, or not yet written: look again
        assert time.monotonic() < deadline, "no run took the lock"
        time.sleep(0.02)


def flock_holder(lock: Path) -> int | None:
    """The pid holding a flock on ``lock``, from ``/proc/locks`` (``1: FLOCK ADVISORY WRITE pid
    maj:min:inode 0 EOF``; a waiter's line has ``->`` and is skipped)."""
    try:
        inode = os.stat(lock).st_ino
    except FileNotFoundError:
        return None
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
            return int(fields[4])
    return None


def try_flock(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops our flock at once
    return True


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 512 KiB tmpfs, unmounted afterwards (needs root and mount(2))."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the full-disk and read-only tests needs root")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(directory: Path) -> None:
    """Write until ENOSPC (unbuffered, so the error is ours to swallow, not close()'s)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def refresh_on(root: Path, state: Path, config: Path, spurinv_here: Any) -> tuple[int, str]:
    """One refresh in this process: what a run does with the disk's errno, not how a process ends."""
    ran = spurinv_here("refresh", "--root", root, "--state", state, "--config", config)
    return ran.code, ran.err


@pytest.mark.parametrize("lock_exists", [True, False], ids=["lock-file-exists", "no-lock-file-yet"])
def test_a_full_disk_is_exit_74_with_one_clear_line_and_the_old_state_untouched(
    built, spurinv_here, tmp_path, small_tmpfs, ledger, lock_exists
):
    state = small_tmpfs / "state.json"
    config = lock_config(tmp_path, lock_timeout=1, confirm_interval=0)
    code, err = refresh_on(built("mi300x-spx"), state, config, spurinv_here)
    assert code == 0, err
    before = state.read_bytes()
    if not lock_exists:
        Path(f"{state}.lock").unlink()  # first run on a full disk: the lock file must be created too
    fill(small_tmpfs)

    code, err = refresh_on(built("mi300x-cpx"), state, config, spurinv_here)  # a 100 kB state: cannot fit

    lost = state.read_bytes() != before
    ledger.record("disk", f"full disk (ENOSPC), {'lock present' if lock_exists else 'no lock file'}", f"exit {code}",
                  lost=lost)  # fmt: skip
    assert not lost
    assert code == 74, err
    assert len(err.strip().splitlines()) == 1, err
    assert "No space left on device" in err
    assert not list(small_tmpfs.glob("state.json.tmp-*"))


def test_a_read_only_state_directory_is_exit_73_and_the_old_state_untouched(built, spurinv_here, tmp_path, small_tmpfs, ledger):
    state = small_tmpfs / "state.json"
    config = lock_config(tmp_path, lock_timeout=1, confirm_interval=0)
    code, err = refresh_on(built("mi300x-spx"), state, config, spurinv_here)
    assert code == 0, err
    before = state.read_bytes()
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)

    code, err = refresh_on(built("mi300x-cpx"), state, config, spurinv_here)

    lost = state.read_bytes() != before
    ledger.record("disk", "read-only state directory (EROFS)", f"exit {code}", lost=lost)
    assert not lost
    assert code == 73, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Read-only file system" in err


def test_a_deeply_nested_state_file_is_moved_aside_like_any_corrupt_one(built, spurinv_here, tmp_path):
    state = tmp_path / "state.json"
    # a state's own object holding the nesting: bare brackets are not a state at all, refused (65)
    state.write_text('{"schema_version": 3, "node": ' + "[" * 100000 + "]" * 100000 + "}")

    code, err = refresh_on(built("mi300x-spx"), state, hostile.config(tmp_path / "c.toml"), spurinv_here)

    assert code == 0, err
    assert "moved aside" in err
    assert list(tmp_path.glob("state.json.corrupt-*"))
