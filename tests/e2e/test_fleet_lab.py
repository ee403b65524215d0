"""`spurinv fleet` against a real Slurm 24.11 controller (slurmctld + 2 slurmd + slurmrestd/JWT on 127.0.0.1).

The drain and the record are spurinv's own: real ``spurinv refresh`` processes on fixture roots
drain n1 while a job runs on it (n1 under a spurinv drain, n2 free), or re-register an
idle node (which writes our record, with the gres, into ``extra``); then the real
``spurinv fleet`` process reads the fleet with the same configuration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import rootbuilder as rb

from spurinv import exitcode
from spurinv.controller.ownership import changed_at
from spurinv.report import fleet

pytestmark = pytest.mark.e2e


class Node:
    """spurinv on one lab node: config (JWT as root), state file, fixture roots."""

    def __init__(self, lab: Any, tmp: Path, name: str, gpus: int) -> None:
        self.lab, self.name, self.tmp, self.gpus = lab, name, tmp, gpus
        self.state = tmp / "state.json"
        token = tmp / "token"
        token.write_text(lab.token("root") + "\n")
        token.chmod(0o600)
        self.config = tmp / "config.toml"
        self.config.write_text(
            f'[node]\nname = "{name}"\n[controller]\nurl = "{lab.rest_url}"\nauth = "slurm-jwt"\nuser = "root"\n'
            f'token_file = "{token}"\ntimeout = 5\n[policy]\nconfirm_interval = 0\n'
        )
        self.config.chmod(0o600)
        self.roots: dict[str, Path] = {}

    def root(self, label: str, **kwargs: Any) -> Path:
        if label not in self.roots:
            self.roots[label] = rb.build_mi300x(self.tmp / f"root-{label}", "SPX", gpus=self.gpus, **kwargs)
        return self.roots[label]

    def spurinv(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SPURINV_CONFIG": str(self.config)}
        env.pop("JOURNAL_STREAM", None)
        return subprocess.run(
            [sys.executable, "-m", "spurinv", *argv], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    def refresh(self, label: str) -> dict[str, Any]:
        proc = self.spurinv("refresh", "--root", str(self.roots[label]), "--state", str(self.state), "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        document: dict[str, Any] = json.loads(proc.stdout)
        return document

    def fleet(self, *argv: str) -> tuple[int, dict[str, Any]]:
        proc = self.spurinv("fleet", "--json", *argv)
        try:
            return proc.returncode, json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"exit {proc.returncode}, no JSON: {proc.stdout}\n{proc.stderr}") from None


def job_state(lab: Any, job: int) -> str:
    return str(lab.run("squeue", "-h", "-j", str(job), "-o", "%T", check=False).stdout.strip())


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in document["nodes"]}


def test_fleet_lists_our_drain_with_reason_and_age_and_a_free_node_as_unmanaged(clean_lab, tmp_path):
    lab = clean_lab
    n1 = Node(lab, tmp_path, "n1", 8)
    n1.root("spx")
    n1.refresh("spx")
    n1.refresh("spx")  # adopted: the controller already lists gpu:mi300x:8
    job = lab.sbatch("n1", "--gres=gpu:mi300x:1")
    lab.wait_for(lambda: job_state(lab, job) == "RUNNING", 15, "the job running on n1")
    n1.root("nps4", memory_mode="NPS4")
    n1.refresh("nps4")
    before = int(time.time())
    drained = n1.refresh("nps4")  # confirmed change on a busy node: our drain
    assert "drain" in [step["action"] for step in drained["steps"]], drained["steps"]
    our_reason = lab.node_json("n1")["reason"]

    code, document = n1.fleet()
    after = int(time.time())

    assert 0 == code, document
    assert ("fleet", 1, True, "slurm/v0.0.42") == (
        document["command"], document["format_version"], document["ok"], document["api"],
    )  # fmt: skip
    assert {"n1", "n2"} == set(rows(document))
    first, second = rows(document)["n1"], rows(document)["n2"]
    assert (True, "spurinv", True) == (first["drained"], first["drain_owner"], first["managed"])
    assert our_reason == first["reason"]
    assert first["reason"].startswith("spurinv: ")
    assert first["reason_set_by"] == "root"
    assert 0 <= first["reason_age_seconds"] <= after - before + 2
    assert before - 2 <= changed_at(lab.node_json("n1")["reason_changed_at"]) <= after
    assert ["spurinv-drain"] == first["attention"]  # its id and record tie it to n1: not orphaned
    assert first["drain_recorded"] is True
    assert "DRAIN" in first["flags"]
    assert (False, None, False, [], None) == (
        second["drained"], second["drain_owner"], second["managed"], second["attention"], second["registered"],
    )  # fmt: skip
    summary = document["summary"]
    assert (2, 1, 1, 0, 1) == (
        summary["nodes"], summary["managed"], summary["spurinv_drained"], summary["drained_by_others"], summary["attention"],
    )  # fmt: skip
    assert ["n1"] == [drain["name"] for drain in summary["spurinv_drains"]]
    assert exitcode.ATTENTION == n1.fleet("--exit-code")[0]

    table = n1.spurinv("fleet")
    assert 0 == table.returncode
    assert "oldest spurinv drain: n1" in table.stdout
    assert our_reason[:40] in table.stdout


def test_scontrol_show_node_json_gives_the_same_fleet_as_rest(clean_lab, tmp_path):
    """The transport seam: ``scontrol --json show node`` prints the same node dicts as GET …/nodes."""
    lab = clean_lab
    lab.scontrol("update", "nodename=n2", "state=drain", "reason=NHC: bad ECC on GPU 3")
    n1 = Node(lab, tmp_path, "n1", 8)

    _code, document = n1.fleet()
    via_scontrol = fleet.build(lab.nodes(), int(time.time()))

    def stable(view: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{key: value for key, value in row.items() if key != "reason_age_seconds"} for row in view]

    assert stable(document["nodes"]) == stable(via_scontrol["nodes"])
    assert ["drained-by-others"] == rows(document)["n2"]["attention"]


def test_a_registration_records_its_gres_and_a_later_hand_edit_shows(clean_lab, tmp_path):
    """n2 (gpu:4 + count-only fpga:4): a VRAM change re-registers it idle, recording gres in extra;
    then an operator changes the fpga count by hand."""
    lab = clean_lab
    n2 = Node(lab, tmp_path, "n2", 4)
    n2.root("spx")
    n2.root("vram", vram_mb=196592)
    n2.refresh("spx")
    n2.refresh("spx")
    n2.refresh("vram")
    registered = n2.refresh("vram")
    assert "register" in [step["action"] for step in registered["steps"]], registered["steps"]
    record = json.loads(lab.node_json("n2")["extra"])["spurinv"]
    assert "gpu:4,fpga:4" == record["gres"]

    _code, before = n2.fleet()
    lab.scontrol("update", "nodename=n2", "gres=gpu:4,fpga:2")
    code, after = n2.fleet("--exit-code")

    quiet = rows(before)["n2"]
    assert (True, False, [], registered["fingerprint"]) == (
        quiet["managed"], quiet["gres_changed"], quiet["attention"], quiet["registered"]["fingerprint"],
    )  # fmt: skip
    edited = rows(after)["n2"]
    assert (True, ["gres-changed"], "gpu:4,fpga:2") == (edited["gres_changed"], edited["attention"], edited["gres"])
    assert ["n2"] == after["summary"]["gres_changed_nodes"]
    assert exitcode.ATTENTION == code
