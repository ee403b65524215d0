"""Doubles for tests/test_attack_outputs.py, run as programs that tests/doubles.py wrote.

``scontrol``: tests/scontrolfake_main.py's, but while ``<FAKE_SLURM_STATE>.down`` exists every
call but ``--version`` prints Slurm 24.11's words for a controller it cannot connect to
(SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR, src/common/slurm_errno.c) and exits 1.
While ``<FAKE_SLURM_STATE>.applies-then-fails`` exists, ``update`` applies, then prints those
words and exits 1 (no Slurm 24.11 scontrol does: the words come only from a connect that failed
before the one RPC was sent, slurm_protocol_api.c ``_open_controller``).
``register``: a register_command that applies ``SPURINV_GRES`` to the fake node and leaves the
controller unreachable (``scontrol reconfigure`` while slurmctld re-execs, a restart that outlasts
``register_wait``). Standard library only."""

from __future__ import annotations

import contextlib
import os
import sys

import jsonlite
import scontrolfake_main

CONNECT_FAILURE = "Unable to contact slurm controller (connect failure)"


def main(argv: list[str]) -> None:
    path = os.environ["FAKE_SLURM_STATE"]
    if argv[1:2] == ["register"]:
        with open(path) as f:
            node = jsonlite.loads(f.read())
        node["gres"] = os.environ["SPURINV_GRES"]
        with open(path, "w") as f:
            f.write(jsonlite.dumps(node))
        open(path + ".down", "w").close()
        sys.exit(0)
    if argv[1:2] == ["update"] and os.path.exists(path + ".applies-then-fails"):
        with contextlib.suppress(SystemExit):  # the update applied, then the words of a call never sent
            scontrolfake_main.main(argv)
        print(f"slurm_update error: {CONNECT_FAILURE}", file=sys.stderr)
        sys.exit(1)
    if argv[1:] != ["--version"] and os.path.exists(path + ".down"):
        what = "slurm_update error" if argv[1:2] == ["update"] else "slurm_load_node error"
        print(f"{what}: {CONNECT_FAILURE}", file=sys.stderr)
        sys.exit(1)
    scontrolfake_main.main(argv)
