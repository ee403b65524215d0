"""scripts/demo-root: synthetic roots to try spurinv without a GPU, as the README's
"Try it without a GPU" uses them."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from spurinv import exitcode

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "demo-root"
EXPECTED = {"mi300x-spx": 8, "mi300x-cpx": 64, "mi300x-spx-nps4": 8, "h100": 8, "cpu-only": 0}


def demo(target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(target)], capture_output=True, text=True, timeout=300, check=False)


def test_the_demo_roots_are_private_and_discover_as_documented(cli, tmp_path):
    target = tmp_path / "demo"
    ran = demo(target)
    assert ran.returncode == 0, ran.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o700  # its state lives here too
    assert stat.S_IMODE((target / "state").stat().st_mode) == 0o700
    assert sorted(path.name for path in target.iterdir()) == sorted([*EXPECTED, "state"])
    for name, count in EXPECTED.items():
        found = cli("discover", "--json", "--root", target / name)
        assert found.code == exitcode.OK, (name, found.err)
        assert len(found.json()["inventory"]["devices"]) == count, name
    # the README's walk-through: a baseline in SPX, then a memory-mode switch confirmed by two readings
    state = target / "state" / "state.json"
    for root in ("mi300x-spx", "mi300x-spx", "mi300x-spx-nps4"):
        assert cli("refresh", "--root", target / root, "--state", state, "--confirm-interval", "0").code == 0
    confirmed = cli("refresh", "--json", "--root", target / "mi300x-spx-nps4", "--state", state, "--confirm-interval", "0")
    assert "NPS1→NPS4 on 8 devices" in confirmed.out


def test_the_demo_never_overwrites(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep").write_text("mine")
    ran = demo(tmp_path / "busy")
    assert ran.returncode == exitcode.CANTCREAT
    assert "not an empty directory" in ran.stderr
    assert (tmp_path / "busy" / "keep").read_text() == "mine"
