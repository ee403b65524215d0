"""The fake ``scontrol`` program of tests/scontrolfake.py (which describes it), run as a program
that tests/doubles.py wrote: ``main`` gets the program's argv. Standard library only."""

from __future__ import annotations

import os
import sys

import jsonlite


def main(argv: list[str]) -> None:
    path = os.environ["FAKE_SLURM_STATE"]
    args = argv[1:]
    if args == ["--version"]:
        print("slurm 24.11.5")
        sys.exit(0)
    with open(path) as f:
        node = jsonlite.loads(f.read())
    with open(path + ".argv", "a") as f:
        f.write(jsonlite.dumps(args) + "\n")
    if args[:3] == ["--json", "show", "node"]:
        import time

        if time.time() < node.get("absent_until", 0):  # deleted, not yet re-created
            print(jsonlite.dumps({"nodes": [], "errors": [{"error": "Invalid node name specified"}]}))
            sys.exit(0)
        print(jsonlite.dumps({"nodes": [node]}))
        sys.exit(0)
    if args[:1] == ["update"]:
        if node.get("refuse_gres") and any(a.startswith("Gres=") for a in args):
            print("slurm_update error: Invalid generic resource (gres) specification", file=sys.stderr)
            sys.exit(1)
        for arg in args[2:]:
            key, _, value = arg.partition("=")
            if key == "Gres":
                node["gres"] = value
            elif key == "Extra":
                node["extra"] = value
            elif key == "Reason":
                node["reason"] = value
            elif key == "State" and value == "DRAIN" and "DRAIN" not in node["state"]:
                node["state"].append("DRAIN")
            elif key == "State" and value in ("RESUME", "UNDRAIN") and "DRAIN" in node["state"]:
                node["state"].remove("DRAIN")
        with open(path, "w") as f:
            f.write(jsonlite.dumps(node))
        sys.exit(0)
    sys.exit(2)
