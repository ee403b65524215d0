"""Our record through Slurm's ``scontrol``: ``Extra=`` is one argument, and Linux caps one
argument at MAX_ARG_STRLEN (128 KiB with its NUL). An admin's ``extra`` over that
made every registration a configuration error (78) and the node was never registered.

The fake ``scontrol`` (``tests/scontrolfake.py``) is a real executable (so an argument the kernel refuses would fail
the exec, as it does for the real one) that answers ``--json show node`` from a JSON file in the
shape of the captured slurmrestd 24.11 node (``scontrol --json`` prints the same data parser
output) and applies ``update NodeName=… Gres=/Extra=/State=/Reason=`` to it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from scontrolfake import Slurm

from spurinv import exitcode
from spurinv.config.settings import ControllerSection
from spurinv.controller.ownership import MAX_ARG_STRLEN, extra_record
from spurinv.controller.scontrol import Scontrol
from spurinv.controller.transport import extra_limit
from spurinv.errors import ControllerError


@pytest.fixture
def slurm(tmp_path, monkeypatch) -> Slurm:
    lab = Slurm(tmp_path, json.dumps({"inventory_notes": "x" * (200 << 10)}))  # 200 KiB: over the limit
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    return lab


def refresh(cli: Any, slurm: Slurm, root: Path) -> tuple[int, dict[str, Any]]:
    result = cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config, "--json")
    return result.code, result.json()


def test_extra_beyond_the_argument_limit_registers_without_our_record(cli, built, slurm):
    """SPX/NPS1 → NPS4: the GRES is registered (exit 0), our record is left out, the admin's
    extra is untouched, and no argument ever came near the kernel's limit."""
    before = slurm.node["extra"]
    for _ in range(2):
        assert refresh(cli, slurm, built("mi300x-spx"))[0] == exitcode.OK
    refresh(cli, slurm, built("mi300x-spx-nps4"))

    code, document = refresh(cli, slurm, built("mi300x-spx-nps4"))

    assert code == exitcode.OK, document
    assert ["read-view", "register", "none"] == [step["action"] for step in document["steps"]]
    assert slurm.node["extra"] == before
    assert slurm.longest_argument() < MAX_ARG_STRLEN
    status = cli("status", "--state", slurm.state, "--json").json()
    assert (status["baseline"]["fingerprint"], status["baseline"]["source"]) == (document["fingerprint"], "registered")


def test_extra_beyond_the_argument_limit_drains_with_the_id_in_the_reason(cli, built, slurm):
    before = slurm.node["extra"]
    for _ in range(2):
        refresh(cli, slurm, built("mi300x-spx"))
    slurm.update(state=["MIXED"], alloc_cpus=2, gres_used="gpu:mi300x:2(IDX:0-1)")
    refresh(cli, slurm, built("mi300x-cpx"))

    code, document = refresh(cli, slurm, built("mi300x-cpx"))

    assert code == exitcode.OK, document
    assert "drain" in [step["action"] for step in document["steps"]]
    assert slurm.node["reason"].startswith("spurinv: [")
    assert slurm.node["extra"] == before
    assert slurm.longest_argument() < MAX_ARG_STRLEN


def test_extra_just_within_the_limit_carries_our_record(cli, built, tmp_path, monkeypatch):
    """The limit is the kernel's, not ours: an extra that fits with our record gets it."""
    lab = Slurm(tmp_path, json.dumps({"notes": "x" * (extra_limit("scontrol") - 600)}))
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    for _ in range(2):
        refresh(cli, lab, built("mi300x-spx"))
    refresh(cli, lab, built("mi300x-spx-nps4"))

    code, document = refresh(cli, lab, built("mi300x-spx-nps4"))

    assert code == exitcode.OK, document
    record = extra_record(lab.node["extra"])
    assert record is not None
    assert record["fingerprint"] == document["fingerprint"]
    assert MAX_ARG_STRLEN - 600 < lab.longest_argument() < MAX_ARG_STRLEN


def test_an_argument_the_kernel_would_refuse_is_never_passed_and_is_no_config_error(tmp_path, slurm):
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(tmp_path / "scontrol")), "n1", os.environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post({"extra": "x" * MAX_ARG_STRLEN})

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)
    assert "MAX_ARG_STRLEN" in caught.value.message
    assert not Path(f"{slurm.path}.argv").exists()  # not run at all
