"""Shared fixtures: fixture roots (built once per session from the real captures), a clean
environment for the CLI, and helpers to run spurinv in-process or as a real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rootbuilder as rb

REPO = Path(__file__).resolve().parent.parent

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
    **{f"host-{name}": (lambda p, name=name: rb.build_host_only(p, name)) for name in rb.HOST_SETS},
}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Return a read-only fixture root by name, building it on first use."""
    base = tmp_path_factory.mktemp("roots")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = BUILDERS[name](base / name)
        return cache[name]

    return get


@pytest.fixture
def root_copy(built: Callable[[str], Path], tmp_path: Path) -> Callable[[str], Path]:
    """Return a private, mutable copy of a fixture root (for fault injection)."""

    def copy(name: str) -> Path:
        target = tmp_path / f"root-{name}"
        shutil.copytree(built(name), target, symlinks=True)
        return target

    return copy


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A hermetic environment: an empty config file, a state file in tmp, no systemd variables."""
    config = tmp_path / "config.toml"
    config.write_text("")
    config.chmod(0o600)
    for name in ("STATE_DIRECTORY", "CREDENTIALS_DIRECTORY", "JOURNAL_STREAM", "SPURINV_STATE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPURINV_CONFIG", str(config))
    monkeypatch.setenv("COLUMNS", "160")
    return {**os.environ, "SPURINV_CONFIG": str(config)}


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code = code
        self.out = out
        self.err = err

    def json(self) -> dict:
        return json.loads(self.out)


@pytest.fixture
def cli(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run ``spurinv ARGS`` in this process (the same entry point as the console script)."""
    from spurinv.launch import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

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
def state_path(tmp_path: Path) -> Iterator[Path]:
    return tmp_path / "state" / "state.json"
