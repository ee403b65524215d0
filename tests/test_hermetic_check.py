"""``scripts/hermetic-check``, the suite's runner in CI, fails when a test rewrites the machine's
accounts (a test once ran useradd/userdel), and keeps the rewrite from the host: it runs a probe
test that appends a user to /etc/passwd, and the same probe reading it only, as the control."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PROBE = """
from pathlib import Path


def test_probe():
    etc = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    # Never on the host: only where /etc is hermetic-check's private overlay.
    assert any(fields[4] == "/etc" and fields[fields.index("-") + 1] == "overlay" for fields in etc)
    if WRITE:
        with open("/etc/passwd", "a") as passwd:
            passwd.write("hermetic-probe:x:4242:4242::/nonexistent:/usr/sbin/nologin\\n")
    assert Path("/etc/passwd").read_text()
"""


@pytest.mark.parametrize(("write", "status"), [(True, 1), (False, 0)], ids=["appends a user", "reads only"])
def test_a_test_that_rewrites_etc_passwd_fails_the_run_and_the_host_keeps_its_own(tmp_path, write, status):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hermetic-check needs root and unshare(1)")
    probe = tmp_path / "test_probe.py"
    probe.write_text(f"WRITE = {write}\n{PROBE}")
    before = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()

    run = subprocess.run(
        [REPO / "scripts" / "hermetic-check", "-n", "0", "-q", probe],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip

    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == before
    assert run.returncode == status, run.stdout + run.stderr
    assert ("1 passed" in run.stdout) is True, run.stdout
    if write:
        assert "hermetic-check: FAILED: the tests changed /etc/passwd (kept from the host" in run.stderr
        assert "hermetic-probe" not in run.stdout + run.stderr  # names the file, never prints the accounts
    else:
        assert "hermetic-check: ok" in run.stdout


def test_bytecode_is_written_for_a_checkout_only(tmp_path, monkeypatch, pytestconfig):
    """conftest compiles the imported spurinv's bytecode where PYTHONDONTWRITEBYTECODE is set:
    a checkout's (or scripts/mutate's copy, its tests linked in), never an installed spurinv's
    that a test run imported instead (as root, that rewrote site-packages on the host)."""
    # tests/conftest.py as pytest loaded it (a plugin): another directory's conftest may hold the
    # plain name "conftest" in sys.modules
    here = (Path(__file__).parent / "conftest.py").resolve()
    plugins = [plugin for plugin in pytestconfig.pluginmanager.get_plugins() if getattr(plugin, "__file__", None)]
    conftest = next(plugin for plugin in plugins if Path(str(plugin.__file__)).resolve() == here)

    pycs = {}
    for name, linked in (("site-packages", False), ("checkout", True)):
        package = tmp_path / name / "spurinv"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("VALUE = 1\n")
        if linked:
            (tmp_path / name / "tests").mkdir()
            (tmp_path / name / "tests" / "conftest.py").symlink_to(here)
        module = types.ModuleType("spurinv")
        module.__file__ = str(package / "__init__.py")
        monkeypatch.setitem(sys.modules, "spurinv", module)
        conftest._compile_spurinv()
        pycs[name] = sorted(path.name for path in package.rglob("*.pyc"))

    assert pycs == {"site-packages": [], "checkout": [f"__init__.{sys.implementation.cache_tag}.pyc"]}
