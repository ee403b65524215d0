"""What ``refresh`` says it sent: a step whose write left is "sent", whatever became of a later
request of the same step; a request that never left is "not sent" (``refresh._said``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doubles import program
from faultserver import FaultServer, Gateway, Seen
from scontrolfake import Slurm

from spurinv import exitcode
from spurinv.errors import ControllerError

# --- a step whose write was applied, then a request that could not connect -------------------


@pytest.fixture
def unreachable_after_register(tmp_path, monkeypatch) -> Slurm:
    """The fake scontrol, with a register_command that applies the GRES and leaves slurmctld
    unreachable (tests/unreachablefake_main.py), read back once (register_wait = 0)."""
    lab = Slurm(tmp_path)
    scontrol = program(tmp_path / "scontrol-down", "unreachablefake_main")
    register = program(tmp_path / "register", "unreachablefake_main", "register")
    lab.config.write_text(
        f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
        f'register_command = ["{register}"]\nregister_wait = 0\n[policy]\nconfirm_interval = 0\n'
    )
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    return lab


def _refresh(cli: Any, state: Path, config: Path, root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli("refresh", "--root", root, "--state", state, "--config", config, "--json", *extra)
    return result.code, result.json()


def test_a_register_command_that_ran_is_a_sent_step_when_the_read_back_cannot_connect(cli, built, unreachable_after_register):
    lab = unreachable_after_register
    for _ in range(2):
        assert _refresh(cli, lab.state, lab.config, built("mi300x-spx"))[0] == exitcode.OK
    _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))

    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))

    assert code == exitcode.UNAVAILABLE, document
    assert lab.node["gres"] == "gpu:mi300x:64"  # the command re-registered the node
    register = document["steps"][-1]
    assert register["action"] == "register"
    assert "connect failure" in register["error"]
    assert register["sent"] is True, register
    # the command that ran, then the read-back that never reached slurmctld
    sent, _, unsent = register["request"].partition("; not sent: ")
    assert sent.startswith("EXEC "), register["request"]
    assert sent.endswith("/register → 0"), register["request"]
    assert unsent.endswith("scontrol-down --json show node n1 → 1"), register["request"]


def test_an_unsent_read_back_keeps_the_registers_intent_and_the_next_run_settles_it(cli, built, unreachable_after_register):
    """What ``sent`` does not touch: the write-ahead intent, settled against the controller."""
    lab = unreachable_after_register
    for _ in range(2):
        _refresh(cli, lab.state, lab.config, built("mi300x-spx"))
    _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))
    _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))
    assert json.loads(lab.state.read_text())["intent"]["kind"] == "register"
    Path(f"{lab.path}.down").unlink()  # slurmctld is back

    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-cpx"), "--ignore-backoff")

    assert code == exitcode.OK, document
    assert "reconcile" in [step["action"] for step in document["steps"]]
    saved = json.loads(lab.state.read_text())
    assert saved["intent"] is None
    assert saved["baseline"]["inventory"]["fingerprint"] == document["fingerprint"]


class _GoneAfterGres(FaultServer):
    """Once ``armed``: applies the GRES update, then stops listening, so the read-back's
    connection is refused. ``metrics``: a directory put where the run's metrics file goes, so
    the run's last save fails."""

    armed = False
    metrics: Path | None = None

    def _behaviour(self, seen: Seen) -> Any:
        reply = super()._behaviour(seen)
        if self.armed and seen.method == "POST" and b'"gres"' in seen.body:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self.metrics is not None:
                self.metrics.mkdir()
        return reply


@pytest.fixture
def gone_after_gres(tmp_path: Path, built: Any, cli: Any) -> Iterator[tuple[_GoneAfterGres, Gateway, Path, Path]]:
    """SPX adopted (gpu:mi300x:8), CPX seen once: the next CPX run re-registers."""
    gateway = Gateway(gres_policy="any")  # a count change is applied (a gres.conf without File=)
    gateway.add_node("n1", gres="gpu:mi300x:8")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    config = tmp_path / "c.toml"
    server = _GoneAfterGres(gateway=gateway)
    with server:
        config.write_text(
            f'[node]\nname = "n1"\n[controller]\nurl = "{server.url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
            "[policy]\nconfirm_interval = 0\n"
        )
        config.chmod(0o600)
        for root in ("mi300x-spx", "mi300x-spx", "mi300x-cpx"):
            assert _refresh(cli, state, config, built(root))[0] == exitcode.OK
        server.armed = True
        yield server, gateway, state, config


def test_an_applied_gres_update_is_a_sent_step_when_its_read_back_is_refused(cli, built, gone_after_gres):
    _server, gateway, state, config = gone_after_gres

    code, document = _refresh(cli, state, config, built("mi300x-cpx"))

    assert code == exitcode.UNAVAILABLE, document
    assert gateway.nodes["n1"]["gres"] == "gpu:mi300x:64"  # applied
    register = document["steps"][-1]
    assert (register["action"], register["error"] is not None) == ("register", True)
    assert register["sent"] is True, register
    assert register["request"] == (
        'POST /slurm/v0.0.42/node/n1 {"gres": "gpu:mi300x:64"} → 200; not sent: GET /slurm/v0.0.42/node/n1'
    )


def test_a_failed_metrics_save_still_says_the_applied_gres_update_was_sent(cli, built, gone_after_gres, tmp_path):
    server, gateway, state, config = gone_after_gres
    metrics = tmp_path / "metrics" / "spurinv.prom"
    metrics.parent.mkdir()
    server.metrics = metrics

    result = cli("refresh", "--root", built("mi300x-cpx"), "--state", state, "--config", config, "--metrics-file",
                 metrics)  # fmt: skip

    assert gateway.nodes["n1"]["gres"] == "gpu:mi300x:64"  # applied
    assert result.code == exitcode.CANTCREAT, result.err
    assert "this run had already sent: register (POST" in result.out + result.err
    lines = [line.strip() for line in result.out.splitlines()]
    assert 'sent: POST /slurm/v0.0.42/node/n1 {"gres": "gpu:mi300x:64"} → 200; not sent: GET /slurm/v0.0.42/node/n1' in lines


def test_a_drain_said_not_sent_that_the_controller_applied_is_settled_by_the_next_run(cli, built, tmp_path, monkeypatch):
    """A stand-in scontrol applies the drain, then says it could not connect: the step reads "not
    sent", but the write-ahead intent stays and the next run finds the drain and takes it as ours."""
    lab = Slurm(tmp_path)
    scontrol = program(tmp_path / "scontrol-liar", "unreachablefake_main")
    lab.config.write_text(lab.config.read_text().replace(str(tmp_path / "scontrol"), str(scontrol)))
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    for _ in range(2):
        assert _refresh(cli, lab.state, lab.config, built("mi300x-spx"))[0] == exitcode.OK
    lab.update(state=["MIXED"], alloc_cpus=2, gres_used="gpu:mi300x:2(IDX:0-1)")
    _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))
    Path(f"{lab.path}.applies-then-fails").touch()

    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))

    assert code == exitcode.UNAVAILABLE, document
    drain = document["steps"][-1]
    assert (drain["action"], drain["sent"]) == ("drain", False)  # what the words say; the controller did it
    assert "DRAIN" in lab.node["state"]
    assert json.loads(lab.state.read_text())["intent"]["kind"] == "drain"
    Path(f"{lab.path}.applies-then-fails").unlink()

    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-cpx"), "--ignore-backoff")

    assert code == exitcode.OK, document
    assert ["read-view", "reconcile", "hold"] == [step["action"] for step in document["steps"]]
    saved = json.loads(lab.state.read_text())
    assert saved["intent"] is None
    assert saved["drain"]["reason"] == lab.node["reason"]


# --- the rule, request by request ---------------------------------------------------------------

_NODE = "/slurm/v0.0.42/node/n1"
_REFUSED = ("unreachable", False)


@pytest.mark.parametrize(
    ("mine", "error", "said"),
    [
        # the write applied, its read-back refused: sent, and both named
        ([("POST", _NODE, 200, True, True), ("GET", _NODE, None, False, False)], _REFUSED,
         (f"POST {_NODE} → 200; not sent: GET {_NODE}", True)),
        # a read left (the API's detection), then the write's connection was refused: nothing changed
        ([("GET", "/openapi/v3", 200, True, False), ("POST", _NODE, None, False, True)], _REFUSED, (f"POST {_NODE}", False)),
        # scontrol --version ran, the node's read never reached slurmctld (a dry run's probe)
        ([("EXEC", "scontrol --version", 0, True, False), ("EXEC", "scontrol --json show node n1", 1, False, False)],
         _REFUSED, ("EXEC scontrol --json show node n1 → 1", False)),
        # the last request answered: sent
        ([("GET", _NODE, 200, True, False)], ("protocol", True), (f"GET {_NODE} → 200", True)),
        # a write, then a read that answered with an error
        ([("POST", "/p", 200, True, True), ("GET", "/p", 500, True, False)], ("protocol", True),
         ("POST /p → 200; then GET /p → 500", True)),
        # no request of its own: the error says (a command refused before it ran, or one that was sent)
        ([], ("protocol", False), (None, False)),
        ([], ("refused", True), (None, True)),
    ],
)  # fmt: skip
def test_a_step_is_sent_when_its_write_or_its_last_request_left(mine, error, said):
    from spurinv.controller.transport import Request
    from spurinv.refresh import _said

    requests = [Request(method, path, None, status, left=left, write=write) for method, path, status, left, write in mine]
    kind, sent = error

    assert _said(requests, ControllerError(kind, "the error", sent=sent)) == said


# --- review: a write step whose only request that left was a read -----------------------------------

_LOOK = "/slurm/v0.0.42/node/n1"


def _register_step(mine: list[Any], exc: Exception) -> dict[str, Any]:
    from spurinv.policy import Action, Do
    from spurinv.refresh import _failed

    action = Action(kind=Do.REGISTER, reason="idle; re-registering: mi300x 8→64", body={"gres": "gpu:mi300x:64"})
    return dict(_failed(action, mine, exc))  # type: ignore[arg-type]


def test_a_register_whose_command_never_started_after_its_idle_look_is_not_sent():
    """Registrar.register reads the node (is it idle?), then finds the run's deadline too close
    to start register_command and raises before the command's record: only a read left. The
    step said sent, so _changed() listed it and a failed save said "this run had already sent:
    register (GET …)" of a node nothing was written to."""
    from spurinv.controller.transport import Request
    from spurinv.errors import DeadlineError
    from spurinv.refresh import _changed

    look = Request("GET", _LOOK, None, 200)
    step = _register_step([look], DeadlineError("controller.run_deadline leaves 1.0 s, too little to start register_command"))

    assert step["sent"] is False, step
    assert _changed([step]) == []  # type: ignore[list-item]


def test_a_register_whose_idle_look_failed_is_not_sent():
    """The idle look before register_command answered 500: the command never ran."""
    from spurinv.controller.transport import Request
    from spurinv.refresh import _changed

    look = Request("GET", _LOOK, None, 500)
    step = _register_step([look], ControllerError("protocol", f"GET {_LOOK}: HTTP 500"))

    assert step["sent"] is False, step
    assert _changed([step]) == []  # type: ignore[list-item]


def test_a_drain_scontrol_refused_to_run_is_not_sent(tmp_path, monkeypatch):
    """Scontrol.post refuses a reason scontrol would alter (a trailing '"') before anything
    runs (its `--version` look aside): unlike its other refusals to run (a NUL, an argument
    beyond MAX_ARG_STRLEN: sent=False) it keeps the default sent=True, so the drain step says
    sent, naming the `--version` read, and _changed() lists it. Latent: no drain text of ours
    ends in '"' today."""
    import os

    from spurinv.config.settings import ControllerSection
    from spurinv.controller.scontrol import Scontrol
    from spurinv.policy import Action, Do
    from spurinv.refresh import _changed, _failed

    lab = Slurm(tmp_path)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(tmp_path / "scontrol")), "n1", dict(os.environ))
    body = {"state": ["DRAIN"], "reason": 'spurinv: [00000000] a quote at the end"'}
    with pytest.raises(ControllerError) as caught:
        client.post(body)
    step = dict(_failed(Action(kind=Do.DRAIN, reason="draining", body=body, cause="busy"), client.sent, caught.value))

    assert lab.node["reason"] == ""  # nothing reached the node
    assert step["sent"] is False, step
    assert _changed([step]) == []  # type: ignore[list-item]


def test_a_register_command_the_deadline_never_let_start_is_not_sent(cli, built, tmp_path, env, monkeypatch):
    """The CLI with spur's scontrol and a register_command (tests/spurstandin.py): the run's
    deadline leaves too little to start the command after its idle look. Nothing was written,
    yet the register step said sent, naming the look (`scontrol show node n1`)."""
    from test_scontrol_spur import Spur
    from test_scontrol_spur import refresh as spur_refresh

    spur = Spur(tmp_path, env, monkeypatch)
    spur_refresh(cli, spur, built("mi300x-spx"))
    spur_refresh(cli, spur, built("mi300x-spx"))
    spur.configure(run_deadline=2)
    spur_refresh(cli, spur, built("mi300x-cpx"))

    code, document, _ = spur_refresh(cli, spur, built("mi300x-cpx"))

    assert code == exitcode.TEMPFAIL, document
    assert spur.restarts() == 0  # the command never ran
    register = document["steps"][-1]
    assert register["action"] == "register"
    assert "too little to start register_command" in register["error"]
    assert register["sent"] is False, register
