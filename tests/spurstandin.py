"""A stand-in for spur's ``scontrol`` and for a spurd restart, with the cluster in a JSON file.

Written from ROCm/spur at commit 4cc3da843d7782774b616b2cdf7fc1e0d2cde777 (read it with
``git show 4cc3da8:<path>``):

* ``crates/spur-cli/src/main.rs`` ``main``: ``-V``/``--version`` as the only argument prints
  ``spur_core::version::version_string()`` and exits 0, before any dispatch;
* ``crates/spur-core/src/version.rs`` ``format_version``: ``spur X.Y.Z (<sha>)``;
* ``crates/spur-cli/src/scontrol.rs`` ``show`` (node arm): the ``NodeName=`` block; the
  ``Gres=`` line has one ``gpu:TYPE:1`` per GPU and is left out without GPUs; an unknown name
  prints nothing (``GetNodes`` with a nodelist filter) and exits 0; a failed connection is
  anyhow's ``Error: failed to connect to spurctld`` with exit 1;
* ``scontrol.rs`` ``parse_and_update``: keys are lower-cased; ``nodename``/``node``, ``state``,
  ``reason`` are used, any other key prints ``scontrol: unknown update key '<key>'`` on stderr
  and is otherwise ignored; ``parse_node_state``: idle|resume → Idle, drain, down, else an error
  before any RPC; per node ``update_node`` prints ``node N updated``; a failed RPC prints
  ``error: N: node update failed`` (the gRPC status is not shown: ``{e}`` prints only the
  context) and the run ends ``Error: failed on 1 of 1 node(s): N``, exit 1;
* ``crates/spurctld/src/server.rs`` ``update_node``: ``require_admin``, then only with a state
  ``cluster.update_node_state`` (so a ``Gres=``-only update changes nothing);
* ``crates/spurctld/src/cluster.rs`` ``update_node_state``: a requested Drain with allocations
  becomes Draining; ``admin_locked = is_admin_hold()``; the ``NodeStateChange`` apply sets
  ``state_reason = reason`` (so RESUME clears it); the last allocation released turns Draining
  into Drain;
* ``crates/spur-core/src/node.rs`` ``display_upper``: IDLE, ALLOCATED, MIXED, DOWN, DRAINED,
  DRAINING, ERROR, UNKNOWN, SUSPENDED;
* a spurd restart (``crates/spurd/src/reporter.rs``): discover, ``RegisterAgent``; the
  ``NodeUpdate`` apply replaces ``total_resources`` and keeps state, reason and ``admin_locked``.

Usage: ``spurstandin.py scontrol ARGS…`` or ``spurstandin.py spurd-restart NODE`` (the tests run
it as ``tests/doubles.py``'s programs ``scontrol`` and ``spurd-restart``); the cluster file is
``$SPUR_STANDIN_STATE``; a restart reads the node's hardware from ``$SPUR_STANDIN_HARDWARE``
(``{"gpus": ["mi300x", …]}``) and appends a line to ``$SPUR_STANDIN_STATE.restarts``. Cluster
file::

    {"controller_up": true, "admin": true, "version": "spur 0.5.0 (4cc3da8)",
     "nodes": {"n1": {"state": "Idle", "reason": null, "admin_locked": false, "cpus": 192,
                      "alloc_cpus": 0, "memory_mb": 2063991, "gpus": ["mi300x", …]}}}
"""

from __future__ import annotations

import os
import sys

import jsonlite

UPPER = {"Idle": "IDLE", "Allocated": "ALLOCATED", "Mixed": "MIXED", "Down": "DOWN", "Drain": "DRAINED",
         "Draining": "DRAINING", "Error": "ERROR", "Unknown": "UNKNOWN", "Suspended": "SUSPENDED"}  # fmt: skip
HOLD = {"Down", "Drain", "Draining", "Error", "Suspended"}


def load() -> dict:
    with open(os.environ["SPUR_STANDIN_STATE"]) as handle:
        return jsonlite.loads(handle.read())


def save(cluster: dict) -> None:
    path = os.environ["SPUR_STANDIN_STATE"]
    with open(path + ".tmp", "w") as handle:
        handle.write(jsonlite.dumps(cluster))
    os.replace(path + ".tmp", path)


def connect(cluster: dict) -> None:
    if not cluster.get("controller_up", True):
        sys.stderr.write(
            "Error: failed to connect to spurctld\n\nCaused by:\n    0: transport error\n"
            "    1: tcp connect error: Connection refused (os error 111)\n"
        )
        sys.exit(1)


def show(cluster: dict, name: str | None) -> None:
    connect(cluster)
    for node_name, node in cluster["nodes"].items():
        if name is not None and node_name != name:
            continue
        print(f"NodeName={node_name}")
        print(f"   State={UPPER[node['state']]} Reason={node.get('reason') or ''}")
        if node.get("partitions"):
            print(f"   Partitions={','.join(node['partitions'])}")
        print(f"   CPUTot={node['cpus']} CPUAlloc={node['alloc_cpus']} RealMemory={node['memory_mb']} FreeMem=1000")
        if node["gpus"]:
            print(f"   Gres={','.join(f'gpu:{t}:1' for t in node['gpus'])}")
        print("   Arch=x86_64 OS=Linux")
        print("   CpuLoad=0.12")
        print()


def update(cluster: dict, params: list[str]) -> None:
    name = state = reason = None
    for param in params:
        if "=" not in param:
            continue
        key, value = param.split("=", 1)
        key = key.lower()
        if key in ("nodename", "node"):
            name = value
        elif key == "state":
            state = value
        elif key == "reason":
            reason = value
        elif key in ("jobid", "job", "priority", "timelimit", "time_limit", "partition", "account", "comment", "qos"):
            pass
        else:
            sys.stderr.write(f"scontrol: unknown update key '{key}'\n")
    if name is None:
        sys.stderr.write("Error: scontrol update: JobId=, NodeName=, or PartitionName= required\n")
        sys.exit(1)
    target = None
    if state is not None:
        target = {"idle": "Idle", "resume": "Idle", "drain": "Drain", "down": "Down"}.get(state.lower())
        if target is None:
            sys.stderr.write(f"Error: scontrol: unknown node state '{state}'. Valid states: IDLE, RESUME, DRAIN, DOWN\n")
            sys.exit(1)
    connect(cluster)
    node = cluster["nodes"].get(name)
    if not cluster.get("admin", True) or (target is not None and node is None):
        sys.stderr.write(f"error: {name}: node update failed\nError: failed on 1 of 1 node(s): {name}\n")
        sys.exit(1)
    if target is not None:
        effective = "Draining" if target == "Drain" and node["alloc_cpus"] > 0 else target
        node.update(state=effective, reason=reason, admin_locked=effective in HOLD)
        save(cluster)
    print(f"node {name} updated")


def release(cluster: dict, name: str) -> None:
    """The jobs on ``name`` end (for tests): allocations 0; Draining → Drain; busy → Idle."""
    node = cluster["nodes"][name]
    node["alloc_cpus"] = 0
    if node["state"] == "Draining":
        node["state"] = "Drain"
    elif node["state"] in ("Allocated", "Mixed"):
        node["state"] = "Idle"
    save(cluster)


def restart(cluster: dict, name: str) -> None:
    with open(os.environ["SPUR_STANDIN_HARDWARE"]) as handle:
        hardware = jsonlite.loads(handle.read())
    with open(os.environ["SPUR_STANDIN_STATE"] + ".restarts", "a") as handle:
        handle.write(f"{name}\n")
    cluster["nodes"][name]["gpus"] = hardware["gpus"]  # NodeUpdate: total_resources only
    save(cluster)
    print(f"spurd on {name} restarted and registered {len(hardware['gpus'])} GPUs")


def main(argv: list[str]) -> None:
    tool, args = argv[1], argv[2:]
    cluster = load()
    if tool == "spurd-restart":
        restart(cluster, args[0])
    elif tool == "release":
        release(cluster, args[0])
    elif len(args) == 1 and args[0] in ("-V", "--version"):
        print(cluster.get("version", "spur 0.5.0 (4cc3da8)"))
    elif args[:2] == ["show", "node"]:
        show(cluster, args[2] if len(args) > 2 else None)
    elif args[:1] == ["update"]:
        update(cluster, args[1:])
    else:
        sys.stderr.write(f"stand-in: unsupported {args}\n")
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
