"""Shared fixtures: fixture roots (built once per session from the real captures), a clean
environment for the CLI, helpers to run spurinv in-process or as a real process, and a port
that closes without a word."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rootbuilder as rb
from doubles import checked_bytecode

# pytest rewrites the asserts of every module of a plugin's distribution, hypothesis's ~90 among
# them; where PYTHONDONTWRITEBYTECODE is set it did so again in every process (the main one and
# each xdist worker, about 1 s of CPU each). Kept beside them, as for the test modules in
# pytest_collection below.
_saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
try:
    from hypothesis import settings
finally:
    sys.dont_write_bytecode = _saved

REPO = Path(__file__).resolve().parent.parent
# no time limit per example: on a loaded machine it fails a property for the load, not the code
# (hypothesis then reports a Flaky deadline); speed is measured by bench/, not asserted.
# scripts/mutate names its own profile (registered before pytest starts), which this keeps.
settings.register_profile("spurinv", deadline=None)
settings.load_profile(os.environ.get("SPURINV_HYPOTHESIS_PROFILE", "spurinv"))
# the reliability ledger and the Slurm lab timings, printed once, also under pytest-xdist
pytest_plugins = ["summaries"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (``-n``), the tests in ``tests/e2e`` run on one worker, one after the
    other, as without xdist: one Slurm lab per run (its munged is shared and stopped by the lab
    that started it), and the lab's resets between tests stay serial. Every other test is its
    own unit of work, as with ``--dist load``; the e2e unit, the largest, is handed out first.
    (``--dist loadgroup`` would do this from a mark, but xdist 3.8 sets a test id attribute that
    pytest 9.2 no longer reads.)

    A worker is kept four tests ahead: with xdist's two (the test running and the next one, which
    pytest must know to run the first) it sat idle after each test until the controller, busy
    with the other workers' reports, sent it another: 2-3 ms a test, some 15 s of the workers'
    time a run. The controller's bookkeeping is kept constant a test (xdist looked each test up
    in the whole collection, and counted a worker's pending tests over every test it had run)."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # xdist ships no types

    ahead = 4

    class OneLab(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self.indexes: dict[Any, dict[str, int]] = {}  # a worker's collection: test id → index

        def _split_scope(self, nodeid: str) -> str:
            return "tests/e2e" if nodeid.startswith("tests/e2e/") else nodeid

        def _assign_work_unit(self, node: Any) -> None:
            scope, work_unit = self.workqueue.popitem(last=False)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            if node not in self.indexes:
                self.indexes[node] = {nodeid: i for i, nodeid in enumerate(self.registered_collections[node])}
            node.send_runtest_some([self.indexes[node][nodeid] for nodeid, completed in work_unit.items() if not completed])

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            nodeid = self.registered_collections[node][item_index]
            scope = self._split_scope(nodeid)
            work_unit = self.assigned_work[node][scope]
            work_unit[nodeid] = True
            if all(work_unit.values()):  # done: only pending work is counted, on each completion
                del self.assigned_work[node][scope]
            self._reschedule(node)

        def _reschedule(self, node: Any) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) < ahead:
                self._assign_work_unit(node)

    return OneLab(config, log)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: two workers a core. Some tests wait on real timeouts (a hung command killed
    at its limit, a lock holder outlasting its waiters: about 75 s of the fast suite's time),
    leaving their core idle; the other worker's tests run meanwhile (on 2 cores: 104 s with three
    workers, 97 s with four, 96 s with five). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    return 2 * len(os.sched_getaffinity(0))


def _compile_spurinv() -> None:
    """Write the imported spurinv's bytecode once, before any test starts a process.

    Where PYTHONDONTWRITEBYTECODE is set, every ``python -m spurinv`` a test starts compiled the
    package again (0.1-0.2 s of CPU each, hundreds of times a run). The bytecode is checked
    against a hash of its source at each import, not the file's mtime (:func:`doubles.checked_bytecode`).
    Only files whose bytecode is missing or stale are compiled."""
    import spurinv

    package = Path(spurinv.__file__).parent
    beside = package.parent / "tests" / "conftest.py"
    # Only a checkout's (this suite beside it; scripts/mutate's copies link it in): never rewrite
    # the bytecode of an installed spurinv that a test run happened to import instead.
    if not (beside.is_file() and beside.samefile(__file__)):
        return
    for source in package.rglob("*.py"):
        checked_bytecode(source)


def pytest_configure(config: pytest.Config) -> None:
    # A worker keeps 300-500 thousand objects alive (hypothesis's caches, pydantic's schemas, the
    # modules the tests import) and the collector's full passes walked them all some 30 times a
    # run: 2-4 s of CPU a worker. One full pass per 100 younger ones, not 10: 0.2-0.6 s; the
    # workers' peak memory stayed 170-470 MB either way.
    gc.set_threshold(*gc.get_threshold()[:2], 100)
    if sys.dont_write_bytecode and not os.environ.get("PYTEST_XDIST_WORKER"):  # the workers start after this
        _compile_spurinv()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Keep the test modules' rewritten asserts (pytest's own bytecode, beside them in
    ``__pycache__``) even where PYTHONDONTWRITEBYTECODE is set: rewriting them all again cost
    each xdist worker some 8 s of CPU per run. Only collection imports them; the setting is
    restored after it."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.txt from the current output instead of comparing with it",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """Compare ``text`` with ``tests/golden/NAME`` (``pytest --update-golden`` rewrites it)."""
    update = bool(request.config.getoption("--update-golden"))

    def check(name: str, text: str) -> None:
        path = REPO / "tests" / "golden" / name
        if update:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"{path} is missing: run pytest --update-golden and review the file"
        assert path.read_text() == text, f"{name} changed: review it, then run pytest --update-golden"

    return check


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "mi300x-cpx": lambda p: rb.build_mi300x(p, "CPX"),
    "mi300x-cpx-captured": lambda p: rb.build_mi300x(p, "CPX", complete=False),
    "mi300x-spx": lambda p: rb.build_mi300x(p, "SPX"),
    "mi300x-dpx": lambda p: rb.build_mi300x(p, "DPX"),
    "mi300x-spx-nps4": lambda p: rb.build_mi300x(p, "SPX", memory_mode="NPS4"),
    "mi300x-spx-vram": lambda p: rb.build_mi300x(p, "SPX", vram_mb=196592),
    "mi300x-spx-vram-nps4": lambda p: rb.build_mi300x(p, "SPX", vram_mb=196592, memory_mode="NPS4"),
    "mi325x-spx": lambda p: rb.build_mi300x(p, "SPX", device_id=0x74A5),
    "mi300x-spx-xcp": lambda p: rb.build_mi300x(p, "SPX", spx_extra_xcp=True),
    "mi308x": rb.build_mi308x,
    "vega10": rb.build_vega10,
    "vega10-duplicate": lambda p: rb.build_vega10(p, keep_synthetic_copy=True),
    "nvidia-8": rb.build_nvidia,
    "nvidia-cdi": rb.build_nvidia_cdi,
    "nvidia-h100-x8": lambda p: rb.materialize_synthetic("pcie-link/h100-x8", rb.build_nvidia(p)),
    "amd-internal-switch": lambda p: rb.materialize_synthetic("pcie-link/amd-internal-switch", p),
    **{
        f"mig-{layout}": (lambda p, layout=layout: rb.build_nvidia_mig(p, f"mig-{layout}"))  # type: ignore[misc]  # a default binds the loop value
        for layout in ("disabled", "all-1g.10gb", "balanced", "3-instances", "mixed", "multi-ci", "applying")
    },
    **{
        f"amd-{name}": (lambda p, name=name: rb.build_amd_switch(p, name))  # type: ignore[misc]  # a default binds the loop value
        for name in ("spx-settled", "cpx-switching", "nps-reloading")
    },
    **{f"host-{name}": (lambda p, name=name: rb.build_host_only(p, name)) for name in rb.HOST_SETS},  # type: ignore[misc]  # as above
}


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Callable[[Path], object]], Path]:
    """``shared(NAME, build)``: a read-only directory made once a run by ``build(path)``.

    Under pytest-xdist the workers of one run share it: the first worker to ask builds it beside
    the others' temporary directories, under a lock, and renames it into place; the others wait
    for it and reuse it. A build that raises puts nothing in place: the next worker to ask
    builds it again."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # the run's own directory (pytest-N), shared by its workers only; without xdist, one per session
    base = tmp_path_factory.getbasetemp().parent / "roots" if worker else tmp_path_factory.mktemp("roots")
    base.mkdir(exist_ok=True)
    cache: dict[str, Path] = {}

    def get(name: str, build: Callable[[Path], object]) -> Path:
        if name not in cache:
            target = base / name
            with open(base / f"{name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not target.exists():
                    building = base / f"{name}.building-{os.getpid()}"
                    build(building)
                    building.rename(target)
            cache[name] = target
        return cache[name]

    return get


@pytest.fixture(scope="session")
def built(shared: Callable[[str, Callable[[Path], object]], Path]) -> Callable[[str], Path]:
    """Return a read-only fixture root by name, building it on first use (once a run: the
    64-partition CPX root costs about 2 s of CPU to build; :func:`shared`)."""

    def build(name: str, path: Path) -> None:
        assert BUILDERS[name](path) == path, f"{name} was built elsewhere"

    return lambda name: shared(name, lambda path: build(name, path))


@pytest.fixture
def root_copy(built: Callable[[str], Path], tmp_path: Path) -> Callable[..., Path]:
    """Return a private, mutable copy of a fixture root (for fault injection); ``times=False``:
    with its own timestamps (:func:`rootbuilder.copy_root`)."""

    def copy(name: str, times: bool = True) -> Path:
        return rb.copy_root(built(name), tmp_path / f"root-{name}", times)

    return copy


_made = itertools.count()


def fresh_directory(factory: pytest.TempPathFactory, name: str) -> Path:
    """A new directory ``NAME<n>`` in the session's temporary directory, as ``factory.mktemp``
    makes, at a constant cost: ``mktemp`` finds its next number by listing every directory made
    before it, which over a worker's ~1500 tests (two directories each) cost some 6 s of CPU."""
    base = factory.getbasetemp()
    while True:
        path = base / f"{name}{next(_made)}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # made by factory.mktemp: take the next number
            continue
        return path


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest's ``tmp_path`` (a new directory named after the test, kept after the run, mode
    0700), without its cost that grows with every test before it (:func:`fresh_directory`)."""
    return fresh_directory(tmp_path_factory, re.sub(r"\W", "_", request.node.name)[:30])


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own default paths and environment, whether or not it asks.

    A run that forgets ``--state`` lands in a private directory, not ``/var/lib/spurinv`` (where it
    would fight the timer for the real lock); ``$SPURINV_CONFIG`` is an empty private file, so an
    installed ``/etc/spurinv/config.toml`` changes nothing; in-process code that asks for the
    built-in defaults gets private paths too. ``scripts/hermetic-check`` proves the result: it
    runs the suite with those host directories read-only and populated as the README installs them.
    """
    home = fresh_directory(tmp_path_factory, "hermetic")
    config = home / "config.toml"
    config.write_text("")
    config.chmod(0o600)
    from spurinv.state import locations

    monkeypatch.setattr(locations, "DEFAULT_STATE", str(home / "default-state" / "state.json"))
    monkeypatch.setattr(locations, "DEFAULT_CONFIG", str(home / "no-default-config.toml"))
    (home / "state").mkdir(mode=0o700)  # $SPURINV_STATE names an existing directory
    monkeypatch.setenv("SPURINV_STATE", str(home / "state" / "state.json"))
    monkeypatch.setenv("SPURINV_CONFIG", str(config))
    for name in ("STATE_DIRECTORY", "CREDENTIALS_DIRECTORY", "JOURNAL_STREAM", "NO_COLOR", "SPURINV_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic: Path) -> dict[str, str]:
    """A hermetic environment: an empty config file, a state file in tmp, no systemd variables."""
    config = tmp_path / "config.toml"
    config.write_text("")
    config.chmod(0o600)
    monkeypatch.setenv("SPURINV_CONFIG", str(config))
    monkeypatch.setenv("COLUMNS", "160")
    return {**os.environ, "SPURINV_CONFIG": str(config)}


class Result:
    def __init__(self, code: int, out: str, err: str, waits: list[float] | None = None) -> None:
        self.code = code
        self.out = out
        self.err = err
        self.waits = waits or []  # the confirm waits the run asked for (in-process runs)

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run ``spurinv ARGS`` in this process (the same entry point as the console script). Its
    wait before the confirming re-read of a first sighting (``policy.confirm_interval``) takes no
    time: it is recorded in the result's ``waits`` instead (every other wait is real)."""
    from spurinv.cli.launch import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        waits: list[float] = []
        code = main([str(a) for a in args], confirm_wait=waits.append)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err, waits)

    return run


@pytest.fixture
def spurinv_process(env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run spurinv as a real process (for exit codes, imports, signals)."""

    def run(*args: str, extra_env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "spurinv", *map(str, args)],
            env={**env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


@pytest.fixture
def state_path(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    return tmp_path / "state" / "state.json"


@pytest.fixture
def lock_holder(env: dict[str, str], built: Callable[[str], Path]) -> Callable[[Path], Any]:
    """A real ``spurinv refresh`` holding the state lock: it sees a first reading and waits
    ``confirm_interval`` (30 s, inside the 60 s run deadline) for the second with the lock held. Stopped by PID afterwards."""

    @contextlib.contextmanager
    def hold(state: Path) -> Iterator[subprocess.Popen[bytes]]:
        process = subprocess.Popen(
            [sys.executable, "-m", "spurinv", "refresh", "--quiet", "--root", str(built("mi300x-spx")),
             "--state", str(state), "--confirm-interval", "30"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        lock = Path(f"{state}.lock")
        try:
            deadline = time.monotonic() + 60
            while not (lock.exists() and lock.read_text().startswith(f"pid {process.pid} ")):
                assert process.poll() is None, "the holder exited before taking the lock"
                assert time.monotonic() < deadline, "the holder never took the lock"
                time.sleep(0.05)  # polling for a condition, not papering over a race
            yield process
        finally:
            process.terminate()
            process.wait(30)

    return hold


@pytest.fixture
def closes_at_once() -> Iterator[int]:
    """A TCP port that accepts and closes without a word (slurmctld's port to an HTTP client)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            connection.recv(65536)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
