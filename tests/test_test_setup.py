"""``scripts/test-setup``'s virtualenv step, run on a temporary copy of the script.

What is not real, and why: the Debian packages are reported installed (a ``dpkg-query`` stand-in),
``promtool`` is a stand-in, ``lab/slurm/ensure-slurm.sh`` returns at once, and ``PYTHON`` is a
stand-in that makes a real venv with this interpreter, ``--without-pip``, and puts a ``pip`` in it
that records what it is asked (installing the locked requirements needs PyPI and takes a minute).
The venv logic itself, the ``.venv/bin/python`` it checks and the ``venv`` it runs, is the script's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

PIP = "import sys\nwith open(sys.argv[0] + '.log', 'a') as log:\n    log.write(' '.join(sys.argv[1:]) + '\\n')\n"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A checkout holding only what test-setup reads, with stand-ins on PATH."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "test-setup", repo / "scripts" / "test-setup")
    (repo / "lab" / "slurm").mkdir(parents=True)
    stand_in(repo / "lab" / "slurm" / "ensure-slurm.sh", "exit 0")
    (repo / "requirements").mkdir()
    (repo / "requirements" / "test.lock").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir / "dpkg-query", "echo 'install ok installed'")
    stand_in(bin_dir / "promtool", "exit 0")
    # the venv is real (no pip: a second), its pip a recorder in its site-packages
    site = "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))')"
    stand_in(
        bin_dir / "python-stand-in",
        f'"{sys.executable}" "$@" --without-pip || exit\n'
        f'site={site}\nmkdir -p "$site/pip"\n: > "$site/pip/__init__.py"\n'
        f"cat > \"$site/pip/__main__.py\" <<'EOF'\n{PIP}EOF",
    )
    return repo


def stand_in(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def setup(repo: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    bin_dir = repo.parent / "bin"
    env = {
        **extra,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(repo.parent),
        "PYTHON": str(bin_dir / "python-stand-in"),
        "SLURM_PREFIX": str(repo.parent / "no-slurm"),
        "LANG": "C.UTF-8",
    }
    return subprocess.run(
        [repo / "scripts" / "test-setup"], cwd=repo.parent, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def runs(python: Path) -> bool:
    return subprocess.run([python, "-c", "pass"], capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize(
    "plant",
    ["dangling link", "a python that exits 1"],
)
def test_a_venv_whose_python_does_not_run_is_said_and_made_anew(plant, copy):
    """A ``.venv/bin/python`` linking to an interpreter since removed passed no ``-x`` test, so
    ``venv`` ran over it, which keeps an existing link: pip then failed, "No such file or
    directory". One that is there but does not run was kept, and pip failed with it."""
    python = copy / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    (copy / ".venv" / "leftover").write_text("from the old venv\n")
    python.symlink_to("/nonexistent/python3.9" if plant == "dangling link" else shutil.which("false") or "/bin/false")

    ran = setup(copy)

    assert ran.returncode == 0, ran
    said = [line for line in ran.stderr.splitlines() if ".venv" in line]
    assert said == ["test-setup: .venv/bin/python does not run or is older than 3.11: making .venv anew"], ran.stderr
    assert runs(python)
    assert not (copy / ".venv" / "leftover").exists()
    pip_log = Path(
        subprocess.run(
            [python, "-c", "import pip, os; print(os.path.dirname(pip.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert (pip_log / "__main__.py.log").read_text().count("install") == 3


def test_a_venv_that_runs_is_kept_and_none_is_made_without_a_word(copy):
    python = copy / ".venv" / "bin" / "python"

    first = setup(copy)
    assert first.returncode == 0, first
    assert runs(python)
    (copy / ".venv" / "mine").write_text("kept\n")

    second = setup(copy)

    assert second.returncode == 0, second
    assert ".venv" not in first.stderr + second.stderr
    assert (copy / ".venv" / "mine").exists()


def test_the_stand_in_checkout_holds_what_test_setup_reads():
    """The copy above leaves out the rest of the checkout: test-setup must read nothing else."""
    text = (REPO / "scripts" / "test-setup").read_text()
    assert "lab/slurm/ensure-slurm.sh" in text
    assert "requirements/test.lock" in text
    assert os.access(REPO / "lab" / "slurm" / "ensure-slurm.sh", os.X_OK)


LEFT_ALONE = "left as it is; remove it to rebuild"


@pytest.mark.parametrize("shape", ["a link to another venv", "a file"])
def test_a_venv_that_is_no_directory_of_its_own_is_left_alone(shape, copy):
    """``venv --clear`` through a link empties the link's target (a worktree's .venv linking to
    another checkout's), and over a file it fails with an errno: test-setup says so and stops."""
    other = copy.parent / "other-venv"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").symlink_to("/nonexistent/python3")
    (other / "precious").write_text("not test-setup's to remove\n")
    if shape == "a file":
        (copy / ".venv").write_text("not a venv\n")
    else:
        (copy / ".venv").symlink_to(other)

    ran = setup(copy)

    assert ran.returncode == 1, ran
    assert [line for line in ran.stderr.splitlines() if "test-setup" in line] == [
        "test-setup: .venv is a link or not a directory and its python does not run (or is older than 3.11): " + LEFT_ALONE
    ]
    assert (other / "precious").exists()
    assert (copy / ".venv").is_symlink() if shape != "a file" else (copy / ".venv").read_text() == "not a venv\n"


def test_a_venv_whose_python_hangs_is_left_alone(copy):
    """A check that never answers says nothing of what .venv holds: stop, never wipe it."""
    python = copy / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    stand_in(python, "exec sleep 30")
    (copy / ".venv" / "mine").write_text("kept\n")

    ran = setup(copy, TEST_SETUP_TIMEOUT="1")

    assert ran.returncode == 1, ran
    assert ran.stderr.strip() == f"test-setup: .venv/bin/python did not answer within 1 s: .venv {LEFT_ALONE}"
    assert (copy / ".venv" / "mine").exists()


def test_a_venv_older_than_the_project_is_made_anew(copy):
    """A venv of Python 3.9 runs ``-c pass`` but cannot install spurinv (requires-python)."""
    python = copy / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    stand_in(python, 'case "$*" in *version_info*) exit 1 ;; esac; exit 0')

    ran = setup(copy)

    assert ran.returncode == 0, ran
    assert "making .venv anew" in ran.stderr
    assert runs(python)
