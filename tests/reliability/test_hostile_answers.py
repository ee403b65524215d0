"""What the controller sends back, hostile (issue #21): the answers spurinv reads must cost at
most one clear error line, an exit status from the table, and no lost state."""

from __future__ import annotations

import os
from pathlib import Path

from spurinv import fleet
from spurinv.config import ControllerSection
from spurinv.scontrol import Scontrol


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


SPUR_COMPOSITE = """\
[ "$1" = --version ] && { echo "spur 0.6.0 (abcdef0)"; exit 0; }
cat <<'END'
NodeName=n1
   State=DRAINED+RESERVED Reason=spurinv: 8 GPUs -> 64 GPUs (busy)
   CPUTot=192 CPUAlloc=0 RealMemory=1000 FreeMem=1000
   Gres=gpu:mi300x:1
NodeName=n2
   State=DRAINING+RESERVED Reason=NHC: ECC
   CPUTot=192 CPUAlloc=4 RealMemory=1000 FreeMem=1000

NodeName=n3
   State=IDLE+RESERVED Reason=
   CPUTot=192 CPUAlloc=0 RealMemory=1000 FreeMem=1000
END
"""


def test_spurs_composite_states_keep_their_drain_in_fleet(tmp_path: Path):
    """Over ``scontrol``, DRAINED+RESERVED and DRAINING+RESERVED lost their DRAIN flag in
    ``fleet`` (0 drained, ``--exit-code`` 0), while ``refresh`` read them right: one parser now."""
    scontrol = _script(tmp_path / "scontrol", SPUR_COMPOSITE)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(scontrol)), "n1", os.environ)

    rows = {row["name"]: row for row in fleet.build(client.all_nodes(), 1_800_000_000)["nodes"]}

    seen = {name: (row["state"], row["flags"], row["drain_owner"]) for name, row in rows.items()}
    assert seen["n1"] == ("IDLE", ["DRAIN", "RESERVED"], "spurinv")
    assert seen["n2"] == ("ALLOCATED", ["DRAIN", "RESERVED"], "other")
    assert (rows["n3"]["drained"], rows["n3"]["flags"]) == (False, ["RESERVED"])
    assert [view.flags for view in client.nodes()] == [tuple(rows[name]["flags"]) for name in ("n1", "n2", "n3")]


def test_fleet_exit_code_counts_a_composite_drain(cli, env, tmp_path: Path):
    scontrol = _script(tmp_path / "scontrol", SPUR_COMPOSITE)
    Path(env["SPURINV_CONFIG"]).write_text(f'[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n')

    result = cli("fleet", "--json", "--exit-code")

    assert result.code == 1, result.err
    assert (result.json()["summary"]["spurinv_drained"], result.json()["summary"]["drained_by_others"]) == (1, 1)
