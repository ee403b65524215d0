"""`spurinv check` against a real Slurm 24.11 controller: slurmrestd with JWT, and
Slurm's own scontrol with munge, on 127.0.0.1.

A ready node passes with one authenticated read; a token slurmrestd refuses, a node name the
controller does not know and a missing scontrol each fail with refresh's exit status and a fix;
nothing is written to the controller or to the node's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spurinv import exitcode

pytestmark = pytest.mark.e2e


def run_check(lab: Any, tmp: Path, config: str, *extra: str) -> tuple[int, dict[str, dict[str, Any]]]:
    (tmp / "host" / "etc" / "cron.d").mkdir(parents=True, exist_ok=True)
    (tmp / "host" / "etc" / "cron.d" / "spurinv").write_text("* * * * * root spurinv refresh --quiet\n")
    installed = tmp / "host" / "usr" / "bin" / "spurinv"  # the program cron starts, on its PATH /usr/bin:/bin
    installed.parent.mkdir(parents=True, exist_ok=True)
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    (tmp / "st").mkdir(mode=0o700, exist_ok=True)
    path = tmp / "config.toml"
    path.write_text(config)
    path.chmod(0o600)
    env = {**lab.env, "SPURINV_CONFIG": str(path)}
    env.pop("JOURNAL_STREAM", None)
    argv = [sys.executable, "-m", "spurinv", "check", "--json", "--root", str(tmp / "host"),
            "--state", str(tmp / "st" / "state.json"), *extra]  # fmt: skip
    ran = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    try:
        document = json.loads(ran.stdout)
    except ValueError:
        raise AssertionError(f"exit {ran.returncode}: {ran.stdout}\n{ran.stderr}") from None
    assert document["exit_code"] == ran.returncode
    return ran.returncode, {item["name"]: item for item in document["checks"]}


def rest_config(lab: Any, tmp: Path, token: str, node: str = "n1") -> str:
    path = tmp / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return (
        f'[node]\nname = "{node}"\n[controller]\nurl = "{lab.rest_url}"\nauth = "slurm-jwt"\nuser = "root"\n'
        f'token_file = "{path}"\ntimeout = 5\n'
    )


def test_check_over_slurmrestd(clean_lab, tmp_path):
    lab = clean_lab
    before = lab.node_json("n1")
    code, checks = run_check(lab, tmp_path, rest_config(lab, tmp_path, lab.token("root")))
    assert code == 0, checks
    assert checks["controller"]["status"] == "ok"
    assert "slurm/v0.0.4" in checks["controller"]["detail"]
    assert "node n1" in checks["controller"]["detail"]
    assert checks["permission"]["status"] == "ok"
    # Slurm's JWT carries exp: the lab's lives an hour, which check calls out (a warning, exit 0)
    assert checks["token"]["status"] == "warn"
    assert "expires" in checks["token"]["detail"]
    assert "scontrol token" in checks["token"]["fix"]
    after = lab.node_json("n1")
    assert (before.get("reason"), before.get("extra"), before.get("state")) == (
        after.get("reason"), after.get("extra"), after.get("state")
    )  # fmt: skip

    code, checks = run_check(lab, tmp_path, rest_config(lab, tmp_path, "eyJhbGciOiJIUzI1NiJ9.e30.bm90LXNsdXJtcw"))
    assert code == exitcode.NOPERM
    assert checks["controller"]["status"] == "fail"
    assert "scontrol token" in checks["controller"]["fix"]

    code, checks = run_check(lab, tmp_path, rest_config(lab, tmp_path, lab.token("root"), node="n9"))
    assert code == exitcode.NOHOST
    assert "node.name" in checks["controller"]["fix"]


def test_check_over_scontrol(clean_lab, tmp_path):
    lab = clean_lab
    scontrol = lab.prefix / "bin" / "scontrol"
    config = f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\ntimeout = 10\n'
    code, checks = run_check(lab, tmp_path, config)
    assert code == 0, checks
    detail = checks["controller"]["detail"]
    assert str(scontrol) in detail
    assert "slurm 24.11" in detail
    assert "munge" in detail
    assert checks["token"]["status"] == "skip"

    missing = config.replace(str(scontrol), "/nonexistent/scontrol")
    code, checks = run_check(lab, tmp_path, missing)
    assert code == exitcode.CONFIG
    assert checks["controller"]["status"] == "fail"
    assert "controller.scontrol" in checks["controller"]["detail"]
    assert os.path.exists(scontrol)
