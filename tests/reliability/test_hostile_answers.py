"""What the controller sends back, hostile: the answers spurinv reads must cost at
most one clear error line, an exit status from the table, and no lost state."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from faultserver import CAPTURES, FaultServer, Gateway, Reply, capture

from spurinv.config.settings import ControllerSection
from spurinv.controller.rest import MAX_NODES_BODY
from spurinv.controller.scontrol import Scontrol
from spurinv.log import Log
from spurinv.report import fleet


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


# --- the largest all-nodes answer accepted, in the unit's memory (item 8) --------------------------

UNIT_MEMORY_MAX = 256 << 20  # systemd/spurinv-refresh.service MemoryMax=256M
PROBE = """
import json, os, re, sys
from spurinv.config.settings import ControllerSection
from spurinv.controller.rest import Controller
settings = ControllerSection(url=sys.argv[1], api="slurm/v0.0.42", timeout=60)
view = Controller(settings, "n1", None).view(confirm_busy=True)
status = open("/proc/self/status").read()
print(json.dumps({"busy": not view.idle, "alloc_cpus": view.alloc_cpus,
                  "peak": int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) * 1024}))
"""


def _largest_answer() -> bytes:
    """All nodes, compact (the most nodes per byte: ~1.6 kB each), as large as spurinv accepts."""
    captured = capture("nodes-n1-idle-n2-drained")
    ours = dict(captured["nodes"][0], name="n1", state=["MIXED"], alloc_cpus=4)
    ours.pop("gres_used")
    parts = [json.dumps(ours, separators=(",", ":"))]
    size, index = len(parts[0]) + 4096, 0
    while True:
        node = json.dumps(dict(captured["nodes"][index % 2], name=f"gpu{index:05d}"), separators=(",", ":"))
        if size + len(node) + 1 > MAX_NODES_BODY:
            break
        parts.append(node)
        size += len(node) + 1
        index += 1
    rest = json.dumps({k: v for k, v in captured.items() if k != "nodes"}, separators=(",", ":"))
    return ('{"nodes":[' + ",".join(parts) + "]," + rest[1:]).encode()


def test_the_busy_recheck_reads_the_largest_answer_within_the_units_memory():
    """A 64 MiB all-nodes answer (41,000 nodes) peaked at 388 MiB parsed whole, above the unit's
    MemoryMax=256M: the busy re-check was OOM-killed every tick. Read as it arrives, only our node
    kept (bench/allnodes.py measures it)."""
    body = _largest_answer()
    gateway = Gateway()
    node = gateway.add_node("n1", state=("MIXED",), alloc_cpus=4)
    node.pop("gres_used")
    with FaultServer(gateway=gateway) as server:
        server.script("GET", "/slurm/v0.0.42/nodes", Reply(200, body))
        done = subprocess.run([sys.executable, "-c", PROBE, server.url], capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
        asked = [seen.path for seen in server.requests("GET")]

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert asked == ["/slurm/v0.0.42/node/n1", "/slurm/v0.0.42/nodes"]
    assert (result["busy"], result["alloc_cpus"]) == (True, 4)
    assert MAX_NODES_BODY * 0.99 < len(body) <= MAX_NODES_BODY
    assert result["peak"] < UNIT_MEMORY_MAX * 3 // 4, f"peak RSS {result['peak'] >> 20} MiB"


# --- bytes that are not UTF-8, lone surrogates (items 1, 2) -----------------------------------------


def _configure(env: dict[str, str], url: str, *, node: str = "n1", extra: str = "") -> None:
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(
        f'[node]\nname = "{node}"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 5\n'
        f"[policy]\nconfirm_interval = 0\n{extra}"
    )
    config.chmod(0o600)


def _latin1_node_answer() -> bytes:
    """The captured idle n1 (gpu:mi300x:8) with its reason typed in Latin-1, as slurmrestd passes it
    through (the real capture ``node-n2-reason-latin1`` holds the same raw byte)."""
    data = (CAPTURES / "node-n1-idle.json").read_bytes()
    assert b'"reason": "",' in data
    return data.replace(b'"reason": "",', b'"reason": "Zo\xeb",', 1)


def test_fleet_reads_an_answer_that_is_not_utf8_and_names_the_node(cli, env):
    """The real 24.11 all-nodes answer after ``scontrol update nodename=n2 reason=Zo<0xEB>``: one
    such node made ``fleet`` fail with 76."""
    data = (CAPTURES / "nodes-n2-reason-latin1.json").read_bytes()
    with FaultServer() as server:
        server.script("GET", "/slurm/v0.0.42/nodes", Reply(200, data, {"Content-Type": "application/json"}))
        _configure(env, server.url)

        result = cli("fleet", "--json", "--all")

    assert result.code == 0, result.err
    rows = {row["name"]: row for row in result.json()["nodes"]}
    assert rows["n2"]["reason"] == "Zo\ufffd"
    warning = [line for line in result.err.splitlines() if "UTF-8" in line]
    assert len(warning) == 1, result.err
    assert warning[0].endswith("in node n2")


def test_refresh_reads_its_own_node_whose_text_is_not_utf8(cli, env, built, state_path):
    """Our own node with such a reason: ``refresh`` failed with 76 and backed off every tick."""
    with FaultServer(gateway=Gateway()) as server:
        server.script("GET", "/slurm/v0.0.42/node/n1", Reply(200, _latin1_node_answer(), {"Content-Type": "application/json"}))
        _configure(env, server.url)
        root = built("mi300x-spx")
        cli("refresh", "--root", root, "--state", state_path)

        result = cli("refresh", "--root", root, "--state", state_path, "--json")

    assert result.code == 0, result.err
    assert [step["action"] for step in result.json()["steps"]][:2] == ["read-view", "adopt"]
    assert "text that is not UTF-8 (read as U+FFFD) in node n1" in result.err


def _surrogate_gateway() -> Gateway:
    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8", state=("MIXED",), reason="NHC: \ud800 fan", alloc_cpus=4,
                     gres_used="gpu:mi300x:2(IDX:0-1\udc00)")  # fmt: skip
    ours = gateway.add_node("n2\udc80", state=("IDLE", "DRAIN"), reason="spurinv: \udfff")
    ours["reason_changed_at"] = {"set": True, "infinite": False, "number": 1796316000}
    return gateway


@pytest.mark.parametrize("human", [False, True], ids=["json", "table"])
def test_fleet_with_lone_surrogates_in_controller_text_prints_and_writes_metrics(cli, env, tmp_path, human):
    """``"\\ud800"`` is valid JSON: ``fleet`` exited 74 printing it, 70 writing the metrics."""
    metrics = tmp_path / "fleet.prom"
    with FaultServer(gateway=_surrogate_gateway()) as server:
        _configure(env, server.url)

        result = cli("fleet", "--all", "--metrics-file", metrics, *(() if human else ("--json",)))

    assert result.code == 0, result.err
    assert "\ufffd" in result.out
    assert 'node="n2\ufffd"' in metrics.read_text(encoding="utf-8")
    if not human:
        assert {row["reason"] for row in result.json()["nodes"]} == {"NHC: \ufffd fan", "spurinv: \ufffd"}


def test_refresh_with_a_lone_surrogate_in_the_controllers_text_saves_its_state(cli, env, built, state_path):
    """A busy node whose ``gres_used`` holds ``\\udc00``: the run sent its drain, then could not
    save its state (70, every tick: the drain's intent never settled)."""
    with FaultServer(gateway=_surrogate_gateway()) as server:
        _configure(env, server.url)
        for root in ("mi300x-spx", "mi300x-spx", "mi300x-cpx"):  # adopted, then the change seen once
            assert cli("refresh", "--root", built(root), "--state", state_path).code == 0

        result = cli("refresh", "--root", built("mi300x-cpx"), "--state", state_path, "--json")
        second = cli("refresh", "--root", built("mi300x-cpx"), "--state", state_path, "--json")

    assert result.code == 0, result.err
    assert [step["action"] for step in result.json()["steps"]][:2] == ["read-view", "drain"]
    assert second.code == 0, second.err
    saved = json.loads(state_path.read_text(encoding="utf-8"))
    assert saved["drain"]["reason"].startswith("spurinv: ")
    assert saved["intent"] is None
    assert "gpu:mi300x:2(IDX:0-1\ufffd) allocated" in json.dumps(saved, ensure_ascii=False)


# --- terminal escapes in controller text (item 7) ----------------------------------------------------

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"


def test_controller_text_on_the_refresh_and_status_screens_cannot_steer_the_terminal(cli, env, built, state_path):
    """``gres`` in the adopt step and ``gres_used`` in the busy step reached the refresh and status
    screens raw: ESC/OSC sequences went to the operator's terminal (fleet escaped them)."""
    gateway = Gateway()
    node = gateway.add_node("n1", gres=f"gpu:mi300x:8,fpga:1{ESCAPES}", alloc_cpus=4, state=("MIXED",),
                            gres_used=f"gpu:mi300x:2(IDX:0-1{ESCAPES})")  # fmt: skip
    with FaultServer(gateway=gateway) as server:
        _configure(env, server.url)
        cli("refresh", "--root", built("mi300x-spx"), "--state", state_path)
        adopted = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path)
        cli("refresh", "--root", built("mi300x-cpx"), "--state", state_path)
        drained = cli("refresh", "--root", built("mi300x-cpx"), "--state", state_path)
        status = cli("status", "--state", state_path)

    assert "adopt" in adopted.out, adopted.out
    assert "DRAIN" in node["state"]
    for shown in (adopted, drained, status):
        assert shown.code == 0, shown.err
        for text in (shown.out, shown.err):
            assert not any(char in text for char in "\x1b\x07\x9b\u202e"), text
    assert "\\x1b]0;pwned" in adopted.out
    assert "\\x1b]0;pwned" in drained.out
    assert "\\x1b]0;pwned" in status.out


def test_a_log_line_with_controller_text_cannot_steer_the_terminal():
    stream = io.StringIO()

    Log({}, stream=stream).error(f"scontrol: node n1 {ESCAPES} refused")

    assert stream.getvalue() == "spurinv: error: scontrol: node n1 \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e refused\n"


def test_fleet_over_scontrol_names_the_node_whose_text_is_not_utf8(cli, env, tmp_path):
    """``scontrol --json show node`` prints the same raw byte (it was always read with U+FFFD; now
    the node is named too)."""
    answer = CAPTURES / "nodes-n2-reason-latin1.json"
    scontrol = _script(tmp_path / "scontrol", f'[ "$1" = --version ] && {{ echo "slurm 24.11.5"; exit 0; }}\ncat "{answer}"\n')
    Path(env["SPURINV_CONFIG"]).write_text(f'[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n')

    result = cli("fleet", "--json", "--all")

    assert result.code == 0, result.err
    assert {row["name"]: row["reason"] for row in result.json()["nodes"]}["n2"] == "Zo\ufffd"
    assert "scontrol --json show node: text that is not UTF-8 (read as U+FFFD) in node n2" in result.err
