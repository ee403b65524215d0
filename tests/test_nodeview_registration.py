"""A registration the controller applies, read back end to end, outside the e2e lab.

``spurinv refresh`` runs in-process against ``tests/faultserver.py``'s gateway on 127.0.0.1, which
answers with the captured slurmrestd 24.11 bodies and applies updates the way Slurm does
(NOTES-derived rules in its docstring). Until this file, only the e2e lab ran a registration that
succeeds: a read-back that misreads our own ``extra`` record would have made every applied
registration look refused (exit 76, a refusal recorded, a DRAIN sent) without a fast test failing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faultserver import FaultServer, Gateway, Reply, capture

from spurinv import exitcode
from spurinv.controller.ownership import extra_fingerprint

NODES_PATH = "/slurm/v0.0.42/nodes"


class StaleGateway(Gateway):
    """The gateway, except that the next single-node GET may answer a stale body once (the fault)."""

    def __init__(self) -> None:
        super().__init__()
        self.stale: dict[str, Any] | None = None

    def _get(self, name: str) -> Reply:
        if self.stale is not None:
            body, self.stale = self.stale, None
            return Reply(200, body)
        return super()._get(name)


class Lab:
    """The gateway, a controller config pointing at it, a state file, and the CLI."""

    def __init__(self, tmp_path: Path, built: Any, cli: Any, server: FaultServer) -> None:
        self.built = built
        self.cli = cli
        self.server = server
        self.node = server.gateway.nodes["n1"]
        self.state = tmp_path / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        self.config = tmp_path / "controller.toml"
        self.config.write_text(
            "\n".join(
                [
                    "[node]",
                    'name = "n1"',
                    "[policy]",
                    "confirm_interval = 0",
                    "[controller]",
                    f'url = "{server.url}"',
                    'api = "slurm/v0.0.42"',
                    "timeout = 5",
                ]
            )
            + "\n"
        )
        self.config.chmod(0o600)

    def refresh(self, root: str) -> tuple[int, dict[str, Any]]:
        before = len(self.server.seen)
        result = self.cli("refresh", "--root", self.built(root), "--state", self.state, "--config", self.config, "--json")
        self.sent = self.server.seen[before:]
        return result.code, result.json()

    def status(self) -> dict[str, Any]:
        result = self.cli("status", "--state", self.state, "--json")
        assert result.code == 0, result.err
        return result.json()

    def posts(self) -> list[dict[str, Any]]:
        return [seen.json() for seen in self.sent if seen.method == "POST"]


@pytest.fixture
def lab(tmp_path, built, cli) -> Iterator[Lab]:
    gateway = StaleGateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        yield Lab(tmp_path, built, cli, server)


def adopt(lab: Lab, root: str) -> str:
    """Two readings of ``root`` with the controller already agreeing: adopted, nothing written."""
    assert lab.refresh(root)[0] == exitcode.OK
    code, _ = lab.refresh(root)
    assert code == exitcode.OK
    assert lab.posts() == []
    status = lab.status()
    assert status["baseline"]["source"] == "adopted"
    return status["baseline"]["fingerprint"]


def test_an_applied_registration_moves_the_baseline_and_drains_nothing(lab):
    """SPX/NPS1 → SPX/NPS4: still gpu:mi300x:8, a new fingerprint; Slurm applies it and we read it back."""
    old = adopt(lab, "mi300x-spx")
    assert lab.refresh("mi300x-spx-nps4")[0] == exitcode.OK  # first sighting

    code, document = lab.refresh("mi300x-spx-nps4")

    status = lab.status()
    new = status["baseline"]["fingerprint"]
    assert code == exitcode.OK, document
    assert new != old
    assert new == document["fingerprint"]
    assert status["baseline"]["source"] == "registered"
    assert status["refusal"] is None
    assert status["drain"] is None
    # the GRES, read back, then our record on its own (Slurm applies extra even when
    # it refuses the GRES of the same update); no DRAIN
    assert [sorted(post) for post in lab.posts()] == [["gres"], ["extra"]]
    assert [seen.method for seen in lab.sent] == ["GET", "POST", "GET", "POST"]
    assert extra_fingerprint(lab.node["extra"]) == new
    assert "DRAIN" not in lab.node["state"]


def test_an_applied_registration_keeps_foreign_extra_keys(lab):
    lab.node["extra"] = json.dumps({"rack": "r2", "owner": "ops"})
    adopt(lab, "mi300x-spx")
    lab.refresh("mi300x-spx-nps4")

    code, _ = lab.refresh("mi300x-spx-nps4")

    stored = json.loads(lab.node["extra"])
    assert code == exitcode.OK
    assert (stored["rack"], stored["owner"]) == ("r2", "ops")
    assert stored["spurinv"]["fingerprint"] == lab.status()["baseline"]["fingerprint"]


def test_a_stale_busy_word_with_no_gpus_in_gres_used_is_idle_without_the_all_nodes_query(lab):
    """Slurm 24.11's single-node GET can keep MIXED after the job ended while gres_used is already 0:
    gres_used decides, so no all-nodes recheck is needed; the node is registered, not drained."""
    adopt(lab, "mi300x-spx")
    lab.refresh("mi300x-spx-nps4")
    stale = capture("node-n1-mixed-job-gres")
    stale["nodes"][0].update(alloc_cpus=0, gres_used="gpu:mi300x:0(IDX:N/A)", extra=lab.node["extra"])
    lab.server.gateway.stale = stale

    code, _ = lab.refresh("mi300x-spx-nps4")

    paths = [(seen.method, seen.path) for seen in lab.sent]
    assert code == exitcode.OK
    assert ("GET", NODES_PATH) not in paths
    assert [sorted(post) for post in lab.posts()] == [["gres"], ["extra"]]
    assert lab.status()["drain"] is None


def test_a_busy_node_whose_gres_used_says_busy_is_drained_even_if_the_word_says_idle(lab):
    """The other disagreement: IDLE, no CPUs counted, but GPUs in use (25.05 counts no CPUs for a
    running GPU job: node-n1-mixed-job-gres.json) — busy, so drained, never re-registered."""
    adopt(lab, "mi300x-spx")
    lab.refresh("mi300x-cpx")
    lab.node.update(state=["IDLE"], alloc_cpus=0, gres_used="gpu:mi300x:2(IDX:0-1)")

    code, _ = lab.refresh("mi300x-cpx")

    assert code == exitcode.OK
    assert [post.get("state") for post in lab.posts()] == [["DRAIN"]]
    assert lab.status()["drain"]["cause"] == "busy"
    assert lab.node["gres"] == "gpu:mi300x:8"


def test_a_busy_node_is_confirmed_with_the_all_nodes_query_once_per_busy_recheck(lab):
    """The all-nodes query costs the size of the cluster (docs/busy.md): while a node stays busy
    without GPU usage data, runs within ``controller.busy_recheck`` (300 s) of the last query read
    only the node (the bound held only by ``Controller.rechecked``, never tested)."""
    adopt(lab, "mi300x-spx")
    lab.node.update(state=["MIXED"], alloc_cpus=4)
    lab.node.pop("gres_used")
    queries = 0
    for _ in range(4):
        lab.refresh("mi300x-spx-nps4")
        queries += sum(1 for seen in lab.sent if seen.path == NODES_PATH)

    assert "DRAIN" in lab.node["state"]  # busy: drained until the job ends
    assert queries == 1


def test_a_stale_busy_answer_is_re_checked_before_the_register_command_is_refused(tmp_path):
    """The register command needs the node idle of any job; a single-node GET that still shows a
    job that ended is asked again (``confirm_busy``) before the command is given up on."""
    import io

    from spurinv.config.settings import ControllerSection
    from spurinv.controller.registration import Registrar
    from spurinv.controller.rest import Controller
    from spurinv.log import Log

    gateway = StaleGateway()
    node = gateway.add_node("n1", gres="gpu:mi300x:8")
    stale = capture("node-n1-idle")
    stale["nodes"][0].update(gres="gpu:mi300x:8", state=["MIXED"], alloc_cpus=4)
    stale["nodes"][0].pop("gres_used")
    gateway.stale = stale
    ran = tmp_path / "ran"
    command = tmp_path / "register"
    command.write_text(f"#!/bin/sh\ntouch {ran}\n")
    command.chmod(0o755)
    with FaultServer(gateway=gateway) as server:
        registrar = Registrar((str(command),), 5, 1, {"PATH": "/usr/bin:/bin"}, Log({}, stream=io.StringIO()))
        client = Controller(ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None, registrar=registrar)

        result = registrar.register(client, {"mi300x": 8})

    assert result.applied, result.error
    assert ran.exists()
    assert "DRAIN" not in node["state"]
