"""A fake Slurm ``scontrol`` for tests that drive spurinv through the scontrol transport.

The program (tests/scontrolfake_main.py) is a real executable (an argument the kernel refuses
fails its exec, as it does for the real one). It answers ``--json show node`` from a JSON file
in the shape of the captured slurmrestd 24.11 node (``scontrol --json`` prints the same data
parser output), logs every argv, applies ``update NodeName=… Gres=/Extra=/State=/Reason=`` to
the file, and refuses ``Gres=`` while the node's ``refuse_gres`` is set (what slurmctld does
while slurm.conf still says the old count). A node whose ``absent_until`` is in the future is
not listed (deleted, not yet re-created).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from doubles import program
from faultserver import capture


class Slurm:
    """A node behind the fake scontrol, and spurinv configured to reach it."""

    def __init__(self, tmp: Path, extra: str = "", refuse_gres: bool = False) -> None:
        self.path = tmp / "node.json"
        node = capture("node-n1-idle")["nodes"][0]
        node.update(name="n1", gres="gpu:mi300x:8", gres_used="gpu:mi300x:0(IDX:N/A)", extra=extra, reason="",
                    state=["IDLE"], refuse_gres=refuse_gres)  # fmt: skip
        self.path.write_text(json.dumps(node))
        scontrol = program(tmp / "scontrol", "scontrolfake_main")
        self.config = tmp / "config.toml"
        self.config.write_text(
            f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
            "[policy]\nconfirm_interval = 0\n"
        )
        self.config.chmod(0o600)
        self.state = tmp / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700)  # an explicit state path's directory must exist

    @property
    def node(self) -> dict[str, Any]:
        return json.loads(self.path.read_text())

    def update(self, **fields: Any) -> None:
        self.path.write_text(json.dumps({**self.node, **fields}))

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in Path(f"{self.path}.argv").read_text().splitlines()]

    def longest_argument(self) -> int:
        """The longest argument any call passed, in bytes as exec passed them."""
        return max((len(arg.encode("utf-8", "surrogateescape")) for call in self.calls() for arg in call), default=0)
