"""A refusal never hides the controller, over Slurm's ``scontrol``.

Slurm refuses a count change of a File-backed GRES (``scontrol update Gres=`` exits 1 with
"Invalid generic resource (gres) specification", tests/e2e/test_converge_scontrol.py on the real
24.11). The operator then fixes slurm.conf/gres.conf and restarts slurmd; the run inside the
refusal's backoff must see it: one ``show node``, our record in ``Extra=`` alone, our drain lifted.

The fake ``scontrol`` (``tests/scontrolfake.py``) is a real executable answering ``--json show node`` from a JSON file in the
shape of the captured slurmrestd 24.11 node; it logs every argv and refuses ``Gres=`` while the
node's ``refuse_gres`` is set (what slurmctld does while slurm.conf still says 8).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scontrolfake import Slurm

from spurinv import exitcode


@pytest.fixture
def slurm(tmp_path, monkeypatch) -> Slurm:
    lab = Slurm(tmp_path, refuse_gres=True)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    return lab


def refresh(cli: Any, slurm: Slurm, root: Path) -> tuple[int, dict[str, Any]]:
    result = cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config, "--json")
    return result.code, result.json()


def refused(cli: Any, built: Any, slurm: Slurm) -> None:
    """SPX adopted; CPX confirmed, its Gres= refused, our drain on the node, the refusal backing off."""
    for _ in range(2):
        assert refresh(cli, slurm, built("mi300x-spx"))[0] == exitcode.OK
    refresh(cli, slurm, built("mi300x-cpx"))
    code, document = refresh(cli, slurm, built("mi300x-cpx"))
    assert code == exitcode.PROTOCOL, document
    assert slurm.node["reason"].startswith("spurinv: [")
    assert "DRAIN" in slurm.node["state"]


def updates_since(slurm: Slurm, before: int) -> list[list[str]]:
    return [call for call in slurm.calls()[before:] if call[:1] == ["update"]]


def test_the_operators_fix_is_taken_as_registered_and_our_drain_lifted_in_the_next_run(cli, built, slurm):
    refused(cli, built, slurm)
    slurm.update(gres="gpu:mi300x:64", refuse_gres=False)  # slurm.conf, gres.conf, reconfigure, slurmd restart
    before = len(slurm.calls())

    code, document = refresh(cli, slurm, built("mi300x-cpx"))

    assert code == exitcode.OK, document
    assert ["read-view", "record", "resume", "none"] == [step["action"] for step in document["steps"]]
    record, resume = updates_since(slurm, before)
    assert [arg.split("=")[0] for arg in record] == ["update", "NodeName", "Extra"]  # the record alone, no Gres=
    assert resume[:3] == ["update", "NodeName=n1", "State=UNDRAIN"]  # DRAIN only, never DOWN
    assert [arg.split("=")[0] for arg in resume[3:]] == ["Extra"]  # our record's drain entry retired
    reads = [call for call in slurm.calls()[before:] if call[:3] == ["--json", "show", "node"]]
    assert all(call[3:] == ["n1"] for call in reads)  # single-node reads only
    assert json.loads(slurm.node["extra"])["spurinv"]["fingerprint"] == document["fingerprint"]
    assert "DRAIN" not in slurm.node["state"]
    assert "the controller now lists gpu:mi300x:64; our drain lifted" in document["steps"][2]["reason"]
    status = cli("status", "--state", slurm.state, "--json").json()
    assert (status["baseline"]["fingerprint"], status["baseline"]["source"]) == (document["fingerprint"], "registered")
    assert (status["drain"], status["refusal"], status["backoff"]) == (None, None, None)


def test_while_nothing_is_fixed_the_run_in_the_backoff_only_reads(cli, built, slurm):
    refused(cli, built, slurm)
    before = len(slurm.calls())

    code, document = refresh(cli, slurm, built("mi300x-cpx"))

    assert code == exitcode.PROTOCOL, document
    assert updates_since(slurm, before) == []
    assert ["read-view", "hold"] == [step["action"] for step in document["steps"]]


def test_an_admins_drain_after_the_fix_is_never_lifted(cli, built, slurm):
    """The operator fixed the GRES but drained the node for their own reason meanwhile: the
    reading is registered (our record written), their drain stays."""
    refused(cli, built, slurm)
    slurm.update(gres="gpu:mi300x:64", refuse_gres=False, reason="admin: burn-in")

    code, document = refresh(cli, slurm, built("mi300x-cpx"))

    assert code == exitcode.OK, document
    assert "resume" not in [step["action"] for step in document["steps"]]
    assert (slurm.node["reason"], "DRAIN" in slurm.node["state"]) == ("admin: burn-in", True)
    # and the output says the node is still out of service, not success alone
    record = next(step for step in document["steps"] if step["action"] == "record")
    assert "stays drained by someone else ('admin: burn-in')" in record["reason"]


def test_a_dry_run_after_the_fix_says_what_it_would_record_and_runs_no_update(cli, built, slurm):
    refused(cli, built, slurm)
    slurm.update(gres="gpu:mi300x:64", refuse_gres=False)
    before = len(slurm.calls())
    state = slurm.state.read_bytes()

    result = cli("refresh", "--root", built("mi300x-cpx"), "--state", slurm.state, "--config", slurm.config, "--json",
                 "--dry-run")  # fmt: skip

    document = result.json()
    assert result.code == exitcode.OK, document
    assert ["read-view", "record", "resume", "none"] == [step["action"] for step in document["steps"]]
    record = document["steps"][1]
    assert record["sent"] is False
    assert "Extra=" in record["request"]
    assert "Gres=" not in record["request"]
    assert updates_since(slurm, before) == []
    assert slurm.state.read_bytes() == state


def test_a_run_killed_before_the_record_was_sent_records_it_next_time(cli, built, slurm):
    """The record's intent is saved before the update; a run that died there leaves it unsettled,
    and the next run (the extra still without our fingerprint) decides afresh and records."""
    refused(cli, built, slurm)
    slurm.update(gres="gpu:mi300x:64", refuse_gres=False)
    saved = json.loads(slurm.state.read_text())
    saved["intent"] = {"kind": "register", "body": {"gres": "gpu:mi300x:64", "extra": "{}"}, "at": saved["refusal"]["at"],
                       "fingerprint": saved["refusal"]["fingerprint"], "cause": None, "transport": "scontrol"}  # fmt: skip
    slurm.state.write_text(json.dumps(saved))

    code, document = refresh(cli, slurm, built("mi300x-cpx"))

    assert code == exitcode.OK, document
    actions = [step["action"] for step in document["steps"]]
    assert actions[:2] == ["read-view", "reconcile"]
    assert "record" in actions
    assert json.loads(slurm.node["extra"])["spurinv"]["fingerprint"] == document["fingerprint"]
