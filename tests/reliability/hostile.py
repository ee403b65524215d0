"""Helpers shared by the reliability tests: config and token files, state surgery, discovery runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root

# A distinctive fake JWT: grep-able in every output, never a real credential.
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c3B1cmludi10ZXN0.TOKEN-7f3a9c0e-never-print-me"
NODE = "n1"
API = "slurm/v0.0.42"


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    """Write ``text`` to ``path`` with exactly ``mode`` (whatever the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def config(
    path: Path,
    url: str = "",
    *,
    token_file: Path | None = None,
    timeout: float = 1.0,
    api: str = API,
    lock_timeout: float = 1.0,
    confirm_interval: float = 0.0,
    backoff_initial: int = 60,
    backoff_max: int = 3600,
    extra: str = "",
    mode: int = 0o600,
) -> Path:
    """A config file; with ``url`` a controller with slurm-jwt auth (``token_file``)."""
    lines = [
        "[node]",
        f'name = "{NODE}"',
        "[policy]",
        f"confirm_interval = {confirm_interval}",
        f"backoff_initial = {backoff_initial}",
        f"backoff_max = {backoff_max}",
        "[state]",
        f"lock_timeout = {lock_timeout}",
    ]
    if url:
        lines += ["[controller]", f'url = "{url}"', f'api = "{api}"', f"timeout = {timeout}"]
        if token_file is not None:
            lines += ['auth = "slurm-jwt"', 'user = "root"', f'token_file = "{token_file}"']
    return write_private(path, "\n".join(lines) + "\n" + extra, mode)


def controller_config(tmp_path: Path, url: str, token: Path | str, extra: str = "") -> Path:
    """``tmp_path/config.toml``: node n1, a controller at ``url`` with slurm-jwt auth reading ``token``."""
    text = (
        f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
        f'auth = "slurm-jwt"\nuser = "root"\ntoken_file = "{token}"\n{extra}'
    )
    return write_private(tmp_path / "config.toml", text)


def token(path: Path, mode: int = 0o600) -> Path:
    return write_private(path, TOKEN + "\n", mode)


def state_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def rewind_backoff(path: Path) -> None:
    """Let time pass for the backoff: move ``backoff.next_attempt`` into the past (the state is
    external data to spurinv; the clock of a real process cannot be moved otherwise)."""
    state = state_json(path)
    state["backoff"]["next_attempt"] = "2000-01-01T00:00:00Z"
    path.write_text(json.dumps(state, indent=1) + "\n")
    path.chmod(0o600)


def devices(root: Path, **kwargs: Any) -> dict[str, Any]:
    """Discover ``root`` in-process; the raw JSON form (ok, inventory, errors, flags)."""
    return discover(Root(str(root)), **kwargs)  # type: ignore[return-value]


def files_under(*paths: Path) -> list[Path]:
    """Every regular file below ``paths`` (for token greps)."""
    found = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [Path(d, f) for d, _, names in os.walk(path) for f in names if Path(d, f).is_file()]
    return found
