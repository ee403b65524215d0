"""The bounded process runner behind ``scontrol``, ``controller.register_command`` and ``check``'s
``systemctl`` (bounded output)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from spurinv.controller import process
from spurinv.errors import ConfigError

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


def test_only_the_tail_of_a_long_output_is_kept_and_it_says_so():
    script = "head -c 3000000 /dev/zero | tr '\\0' x; printf END; printf ERR >&2"

    outcome = process.run(["/bin/sh", "-c", script], ENV, 30, limit=4096)

    assert outcome.truncated
    assert len(outcome.stdout) == 4096
    assert outcome.stdout.endswith("xEND")
    assert outcome.stderr == "ERR"
    assert outcome.status == 0


def test_an_output_under_the_limit_is_kept_whole():
    outcome = process.run(["/bin/sh", "-c", "printf 'a\\nb'; exit 4"], ENV, 30, limit=4096)

    assert (outcome.stdout, outcome.truncated, outcome.status) == ("a\nb", False, 4)


def test_a_command_that_prints_without_end_is_stopped_at_the_limit_when_asked():
    """``stop_over`` (scontrol: an answer over the limit is unusable): killed there, not at the timeout."""
    outcome = process.run(["/usr/bin/yes"], ENV, 60, limit=1 << 20, stop_over=True)

    assert outcome.truncated
    assert outcome.status == -9  # killed by us, long before the 60 s timeout


def test_memory_stays_bounded_while_a_command_prints_half_a_gigabyte():
    """Output is read as it comes (the old ``communicate`` held all of it: 3 GiB for 1.5 GB)."""
    # VmHWM is this process image's own peak; ru_maxrss also counts the forking parent's (a large
    # pytest process in CI read as 284 MiB)
    probe = (
        "import os, re\n"
        "from spurinv.controller import process\n"
        "out = process.run(['/bin/sh', '-c', 'head -c 500000000 /dev/zero'], dict(os.environ), 120)\n"
        "status = open('/proc/self/status').read()\n"
        "print(out.truncated, re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    truncated, peak_kib = done.stdout.split()

    assert truncated == "True"
    assert int(peak_kib) < 200 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"


def test_a_limit_smaller_than_a_read_still_bounds_what_is_held():
    """One read of a pipe may bring 64 KiB, past a 4 KiB limit at once: the buffer is trimmed back
    to the limit whenever it passes twice that, so 8 MiB of output is never held whole."""
    import tracemalloc

    tracemalloc.start()
    try:
        outcome = process.run(["/bin/sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x"], ENV, 60, limit=4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (outcome.truncated, outcome.stdout) == (True, "x" * 4096)
    assert peak < 1 << 20, peak  # a read or two at a time, never the 8 MiB


def test_a_streams_kept_tail_never_holds_more_than_twice_the_limit_between_chunks():
    """The bound behind "at most twice ``limit`` of memory", counted in bytes instead of measured
    (tracemalloc's peak varies by more than the limit between runs): a 10-byte limit, 3-byte
    chunks. The buffer grows to 18, the chunk that takes it to 21 cuts it to the last 10, and so
    on: never more than 20 bytes between chunks, always the stream's last bytes."""
    data = bytes(range(65, 65 + 60))  # A… 60 distinct bytes, so the tail kept can be told apart
    buffer = bytearray()
    held = []
    for start in range(0, 60, 3):
        process._keep(buffer, data[start : start + 3], 10)
        held.append(len(buffer))
        assert bytes(buffer) == data[start + 3 - len(buffer) : start + 3]

    assert held == [3, 6, 9, 12, 15, 18, 10, 13, 16, 19, 10, 13, 16, 19, 10, 13, 16, 19, 10, 13]


def test_a_streams_kept_tail_is_cut_only_past_twice_the_limit_to_exactly_the_limit():
    """One byte at a time, a 10-byte limit: 20 bytes are held as they are, the 21st cuts the
    buffer to its last 10; a single chunk of 100 bytes leaves its last 10."""
    buffer = bytearray(b"a" * 19)
    process._keep(buffer, b"b", 10)
    assert bytes(buffer) == b"a" * 19 + b"b"

    process._keep(buffer, b"c", 10)
    assert bytes(buffer) == b"a" * 8 + b"bc"

    big = bytearray()
    process._keep(big, bytes(range(100)), 10)
    assert bytes(big) == bytes(range(90, 100))


def test_a_streams_tail_is_over_its_limit_from_one_byte_past_it():
    """``_keep`` says whether the buffer now holds more than the limit: 10 of 10 is not over, 11
    is, and so is what is left after a cut (the output was truncated)."""
    buffer = bytearray()
    assert process._keep(buffer, b"x" * 10, 10) is False
    assert process._keep(buffer, b"x", 10) is True
    assert process._keep(buffer, b"x" * 10, 10) is True  # cut to 10 by the trim, still truncated
    assert len(buffer) == 10


def test_a_command_that_closes_its_output_but_keeps_running_is_killed_at_the_timeout():
    with pytest.raises(subprocess.TimeoutExpired):
        process.run(["/bin/sh", "-c", "exec >&- 2>&-; sleep 30"], ENV, 0.5)


def test_a_daemon_the_command_leaves_holding_its_output_neither_fails_it_nor_dies(tmp_path):
    """`spurd &` in a site script: the command exits 0 at once; the daemon keeps the pipes. The
    outcome is the command's own, shortly after it exits, and the daemon is left running."""
    pid_file = tmp_path / "daemon.pid"
    script = f"setsid sleep 30 & echo $! > {pid_file}; echo started; exit 0"
    try:
        outcome = process.run(["/bin/sh", "-c", script], ENV, 20)

        assert (outcome.status, outcome.stdout.strip()) == (0, "started")
        # alive, not a zombie: a runner that waited for the pipes to close returns only once the
        # daemon has ended, and a dead daemon may stay in /proc as a zombie nothing reaps
        assert _alive(int(pid_file.read_text()))
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the daemon we started, by PID


def test_a_command_dies_with_a_spurinv_that_is_killed_outright(tmp_path):
    """SIGKILL (OOM, cron's kill) leaves no register command running to overlap the next run's."""
    pid_file = tmp_path / "child.pid"
    probe = (
        "import os, sys\n"
        "from spurinv.controller import process\n"
        f"process.run(['/bin/sh', '-c', 'echo $$ > {pid_file}; exec sleep 30'], dict(os.environ), 60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", probe]) as parent:
        try:
            deadline = time.monotonic() + 30
            while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.05)
            child = int(pid_file.read_text())
            parent.kill()
        finally:
            parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


def test_the_output_of_a_command_killed_at_its_timeout_is_kept_for_the_log():
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        process.run(["/bin/sh", "-c", "echo restarting spurd; sleep 30"], ENV, 0.5)

    assert b"restarting spurd" in caught.value.output


def test_a_timed_out_commands_stdout_and_stderr_are_kept_each_in_its_own_place():
    """The register command's log line on a timeout quotes both streams: what it printed to each
    stays apart. It closes both and keeps running, so both are read whole before its timeout."""
    script = "printf 'to stdout'; printf 'to stderr' >&2; exec >&- 2>&-; sleep 30"
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        process.run(["/bin/sh", "-c", script], ENV, 2)

    assert (caught.value.output, caught.value.stderr) == (b"to stdout", b"to stderr")


def test_a_command_path_that_is_not_a_regular_file_is_a_config_error_saying_so(tmp_path):
    """A directory is "executable" to ``access(X_OK)``: only the regular-file check names the problem."""
    for program in (tmp_path, tmp_path / "missing"):
        with pytest.raises(ConfigError) as caught:
            process.resolve(str(program), ENV, "controller.register_command")
        assert str(caught.value) == f"controller.register_command: {program} does not exist or is not a regular file"


def test_a_command_path_to_a_file_nobody_may_execute_is_a_config_error_saying_so(tmp_path):
    """A regular file without an execute bit (root too needs one for ``access(X_OK)``) is refused
    before anything runs, by name; the same file made executable is the path itself."""
    program = tmp_path / "register"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o644)

    with pytest.raises(ConfigError) as caught:
        process.resolve(str(program), ENV, "controller.register_command")
    assert str(caught.value) == f"controller.register_command: {program} is not executable"

    program.chmod(0o755)
    assert process.resolve(str(program), ENV, "controller.register_command") == str(program)


def test_a_commands_output_is_kept_up_to_sixty_four_kibibytes_by_default():
    """``MAX_OUTPUT`` pinned with a literal: the register command's tail that the log and the
    refusal quote (only explicit limits were tested)."""
    limit = 64 * 1024

    whole = process.run(["/bin/sh", "-c", f"head -c {limit} /dev/zero | tr '\\0' x"], ENV, 30)
    over = process.run(["/bin/sh", "-c", f"head -c {limit + 1} /dev/zero | tr '\\0' x"], ENV, 30)

    assert (len(whole.stdout), whole.truncated) == (limit, False)
    assert (len(over.stdout), over.truncated) == (limit, True)


def test_a_command_that_ends_inside_its_last_second_is_not_killed():
    """The timeout is the timeout: a command that ends 0.8 s before it is not cut off a second early."""
    outcome = process.run(["/bin/sh", "-c", "sleep 2.2; echo done"], ENV, 3)

    assert (outcome.status, outcome.stdout) == (0, "done\n")


def test_a_grandchild_holding_the_pipes_does_not_outlive_the_timeout(tmp_path: Path):
    """A command that leaves a ``setsid`` child holding stdout hung past every timeout."""
    script = tmp_path / "bg.sh"
    script.write_text("#!/bin/sh\nsetsid sleep 30 &\necho $! > " + str(tmp_path / "pid") + "\nsleep 10\n")
    script.chmod(0o755)
    started = time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            process.run([str(script)], dict(os.environ), 1.0)
        assert time.monotonic() - started < 8
    finally:
        pid_file = tmp_path / "pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), 9)  # the grandchild we started, by PID


def test_waiting_for_a_command_that_closed_its_output_costs_no_cpu():
    """A closed pipe stays readable (end of file): it must leave the wait, or every later look
    returns at once and the runner spins until the command ends (the
    ``unregister`` at end of file removed was caught only by the time limit). The command runs
    2 s; the wait takes a few milliseconds of CPU, a spin would take most of the 2 s."""
    started = time.thread_time()

    outcome = process.run(["/bin/sh", "-c", "echo done; exec >&- 2>&-; sleep 2"], ENV, 20)

    assert (outcome.status, outcome.stdout) == (0, "done\n")
    assert time.thread_time() - started < 0.3


def test_a_bare_command_name_is_the_first_executable_file_of_that_name_on_path(tmp_path, monkeypatch):
    """As the shell looks it up, minus the current directory: a relative ``$PATH`` entry, a
    directory or a file without the execute bit of that name are passed over."""
    monkeypatch.chdir(tmp_path)
    for directory, mode in (("relative", 0o755), ("plain", 0o644), ("found", 0o755), ("later", 0o755)):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "tool").write_text("#!/bin/sh\n")
        (tmp_path / directory / "tool").chmod(mode)
    (tmp_path / "dir" / "tool").mkdir(parents=True)
    path = ":".join(["relative", *(str(tmp_path / name) for name in ("plain", "dir", "found", "later"))])

    assert process.resolve("tool", {"PATH": path}, "controller.scontrol") == str(tmp_path / "found" / "tool")
    with pytest.raises(ConfigError) as caught:
        process.resolve("tool", {"PATH": "relative"}, "controller.scontrol")
    assert str(caught.value) == "controller.scontrol: 'tool' is not on PATH"


class _Clock:
    """``time.monotonic`` read from a plan: a read past the plan fails the test (a loop that
    should have ended by then)."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def __call__(self) -> float:
        assert self.readings, "the clock was read after the last planned reading"
        return self.readings.pop(0)


class _Process:
    """A command as ``_collect`` sees it: its two pipes (held open by the test, as a daemon it
    started would) and ``poll``'s answer."""

    def __init__(self, stdout: BinaryIO, stderr: BinaryIO, status: int | None) -> None:
        self.stdout, self.stderr, self.status, self.args = stdout, stderr, status, ["register"]

    def poll(self) -> int | None:
        return self.status


@contextlib.contextmanager
def _held_pipes() -> Iterator[tuple[BinaryIO, BinaryIO, int]]:
    """Two pipes whose write ends stay open until the block ends; the third value writes stdout."""
    (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
    try:
        with open(out_read, "rb", buffering=0) as out, open(err_read, "rb", buffering=0) as err:
            yield out, err, out_write
    finally:
        os.close(out_write)
        os.close(err_write)


def test_output_is_read_for_half_a_second_after_the_command_exits_and_no_more():
    """The grace after exit, on a planned clock (a wall-clock bound would be flaky under load):
    output is still read at 0.49 s after the exit, the reading stops at 0.5 s."""
    clock = _Clock(100.0, 100.49, 100.5)
    kept = [bytearray(), bytearray()]
    with _held_pipes() as (out, err, write_out):
        os.write(write_out, b"late line\n")
        exited = _Process(out, err, status=0)

        truncated = process._collect(exited, 200.0, 4096, False, kept, clock)  # type: ignore[arg-type]

    assert (truncated, bytes(kept[0]), bytes(kept[1])) == (False, b"late line\n", b"")
    assert clock.readings == []  # stopped at the 0.5 s reading, not before it, not after


def test_a_command_still_running_at_its_deadline_is_timed_out_then_and_not_a_second_later():
    """The timeout on a planned clock: 0.01 s before the deadline the command still runs; at the
    deadline it is timed out (its pipes open, its output so far kept)."""
    clock = _Clock(9.0, 9.99, 10.0)
    kept = [bytearray(), bytearray()]
    with _held_pipes() as (out, err, write_out):
        os.write(write_out, b"working")
        running = _Process(out, err, status=None)

        with pytest.raises(subprocess.TimeoutExpired) as caught:
            process._collect(running, 10.0, 4096, False, kept, clock)  # type: ignore[arg-type]

    assert clock.readings == []  # timed out at the 10.0 reading, not before it, not after
    assert (caught.value.cmd, bytes(kept[0])) == (["register"], b"working")


@pytest.mark.parametrize("where", ["argument", "environment"])
def test_a_nul_in_a_command_is_refused_before_it_runs_naming_its_first_three_words(tmp_path, where):
    """A NUL cannot reach exec (the kernel would cut the word there): the command is not run, and
    the error names it by its first three words."""
    from spurinv.errors import ControllerError

    marker = tmp_path / "ran"
    argv = ["/bin/sh", "-c", f"touch {marker}", "spurinv", "fourth\0word" if where == "argument" else "fourth"]
    environ = {**ENV, "SPURINV_GRES": "gpu:a:1,x\0y:1"} if where == "environment" else ENV

    with pytest.raises(ControllerError) as caught:
        process.run(argv, environ, 30)

    assert caught.value.kind == "protocol"
    assert caught.value.message.startswith(f"`/bin/sh -c 'touch {marker}' …`: ")
    assert caught.value.message.endswith("; not run")
    assert ("`x\\0y:1`" if where == "environment" else "argument `fourth\\0word`") in caught.value.message
    assert not marker.exists()


def test_an_entry_holding_a_nul_is_quoted_by_its_first_120_characters():
    """The refusal names the entry that holds the NUL (``\\0`` escaped), cut at 120 characters:
    enough to find it in a controller's GRES, short enough for one log line."""
    entry = "x" * 119 + "\0" + "y" * 200

    assert process.nul_entry(f"Gres=gpu:8,{entry},nic:2") == (
        f"Gres= entry `{'x' * 119}\\` holds a NUL byte, which no command line can carry"
    )
    assert process.nul_entry("plain\0word") == "argument `plain\\0word` holds a NUL byte, which no command line can carry"


def test_a_nul_before_the_equals_sign_is_named_in_the_whole_argument_not_in_an_entry():
    """``Key=value`` is read as a key and its entries only when the key is clean: a NUL in the key
    makes it a plain argument, its comma-separated part holding the NUL named (not the key with
    an entry of the value, which holds none)."""
    assert process.nul_entry("Node\0Name=n1,n2") == (
        "argument `Node\\0Name=n1` holds a NUL byte, which no command line can carry"
    )


def test_output_that_is_not_utf8_is_read_as_replacement_characters_and_said():
    """A controller's bytes that are not UTF-8 (a Latin-1 reason): read, each bad byte as U+FFFD,
    and ``replaced`` set for stdout, so the caller can warn; stderr is read the same way."""
    done = process.run(["/bin/sh", "-c", r"printf 'Zo\351 ok'; printf 'err\377' >&2"], ENV, 30)

    assert (done.status, done.stdout, done.stderr, done.replaced) == (0, "Zo\ufffd ok", "err\ufffd", True)
    clean = process.run(["/bin/sh", "-c", "printf 'plain'"], ENV, 30)
    assert (clean.stdout, clean.replaced) == ("plain", False)


def test_a_command_that_leads_no_process_group_is_killed_by_itself():
    """``_kill_group`` kills the command's process group; a process that leads none (``killpg``
    finds no such group: ESRCH) is killed by itself instead of being left running."""
    with subprocess.Popen(["/bin/sleep", "30"]) as child:  # in pytest's group, not one of its own
        try:
            process._kill_group(child)

            assert child.wait(timeout=10) == -signal.SIGKILL  # at once; the 10 s only bound a failure
        finally:
            if child.poll() is None:
                child.kill()  # the sleep we started, by its Popen
