"""systemd-analyze, run so that it leaves the host's /run alone.

Its manager touches /run/systemd/systemd-units-load whatever ``--root`` says (a write to the
host's /run, which the tests must never make): each call runs in a user and mount namespace of
its own with a tmpfs over /run/systemd.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

import pytest

PRIVATE_RUN = 'mount -t tmpfs tmpfs /run/systemd || exit 125; exec "$@"'


def analyze(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze ARGS`` with a private /run/systemd; skips, saying why, where it cannot."""
    if shutil.which("systemd-analyze") is None or shutil.which("unshare") is None:
        pytest.skip("systemd-analyze or unshare is not installed (scripts/test-setup installs systemd, util-linux)")
    ran = subprocess.run(
        ["unshare", "-m", "-r", "sh", "-c", PRIVATE_RUN, "sh", "systemd-analyze", *args],
        capture_output=True,
        text=True,
        errors="replace",
        env=env,
        timeout=60,
        check=False,
    )
    if ran.returncode == 125 or ran.stderr.startswith("unshare:"):
        pytest.skip(f"no private mount namespace for systemd-analyze here: {ran.stderr.strip()[:200]}")
    return ran
