"""What a request looks like in ``status``, the report and the log (:class:`spurinv.controller.transport.Request`):
the same line whichever transport sent it (no test pinned it)."""

from __future__ import annotations

import errno
import io
import os
import subprocess
from dataclasses import replace

import pytest
from faultserver import ERRORS, NO_TOKEN_TEXT, FaultServer, Gateway, Reply

from spurinv.config.settings import ControllerSection
from spurinv.controller.rest import Controller
from spurinv.controller.transport import RegisterResult, Request, extra_limit, recorded
from spurinv.errors import ConfigError, ControllerError


def test_a_request_line_is_method_path_then_the_body_as_sorted_json_then_the_status():
    drain = Request("POST", "/slurm/v0.0.42/node/n1", {"state": ["DRAIN"], "reason": "spurinv: x"}, 200)

    assert drain.line() == 'POST /slurm/v0.0.42/node/n1 {"reason": "spurinv: x", "state": ["DRAIN"]} → 200'


def test_a_request_without_a_body_or_a_status_shows_neither():
    assert Request("GET", "/slurm/v0.0.42/node/n1", None).line() == "GET /slurm/v0.0.42/node/n1"
    assert Request("EXEC", "scontrol --json show node n1", None, 0).line() == "EXEC scontrol --json show node n1 → 0"
    assert Request("POST", "/x", {}, None).line() == "POST /x {}"  # an empty body is a body


def test_a_request_as_a_dict_keeps_every_field():
    request = Request("POST", "/x", {"a": 1}, 500)

    assert request.as_dict() == {"method": "POST", "path": "/x", "body": {"a": 1}, "status": 500}


# --- a re-registration sent as a GRES update (REST here; Slurm's scontrol alike) --------

NODE = "/slurm/v0.0.42/node/n1"


@pytest.fixture
def rest():
    gateway = Gateway(gres_policy="slurm")
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        yield server, Controller(ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None)


def test_a_refused_gres_update_is_a_refusal_with_the_controllers_words_and_the_node_as_it_is(rest):
    server, client = rest
    client.view()  # the run's first look: the request line must be the update's, not the first sent

    result = client.register({"gres": "gpu:mi300x:64"}, {"mi300x": 64}, "ab" * 8)

    assert not result.applied
    assert "Invalid generic resource" in (result.error or "")
    assert result.request is not None
    assert result.request.startswith(f'POST {NODE} {{"gres": "gpu:mi300x:64"}} → 500')
    assert result.view.gres == "gpu:mi300x:8"  # read again after the refusal
    assert [seen.method for seen in server.seen] == ["GET", "POST", "GET"]


def test_an_update_the_controller_accepts_but_does_not_apply_is_not_applied(rest):
    """Slurm answers 200 to a GPU type change it silently drops: only the read-back tells."""
    _server, client = rest
    client.view()

    result = client.register({"gres": "gpu:mi355x:8"}, {"mi355x": 8}, "ab" * 8)

    assert not result.applied
    assert result.error == "the controller still says gres 'gpu:mi300x:8' after accepting 'gpu:mi355x:8'"
    assert result.request == f'POST {NODE} {{"gres": "gpu:mi355x:8"}} → 200'
    assert result.view.gres == "gpu:mi300x:8"


def test_a_gres_update_that_fails_otherwise_is_that_error_not_a_refusal(rest):
    server, client = rest
    server.script("POST", NODE, Reply(401, "Authentication failure"))

    with pytest.raises(ControllerError) as caught:
        client.register({"gres": "gpu:mi300x:64"}, {"mi300x": 64}, "ab" * 8)

    assert caught.value.kind == "auth"


# --- the longest extra scontrol can carry --------------------------------


def test_the_longest_extra_through_scontrol_is_the_longest_argument_linux_execs():
    """``Extra=<text>`` is one argv word: 131072 bytes (32 pages of 4 KiB) with its NUL, so 131065
    bytes of text; REST has no limit of its own."""
    limit = extra_limit("scontrol")

    assert (limit, extra_limit("rest")) == (131065, None)
    assert subprocess.run(["/bin/true", "Extra=" + "x" * limit], check=False).returncode == 0
    if os.sysconf("SC_PAGE_SIZE") == 4096:  # the kernel's own limit is 32 pages
        with pytest.raises(OSError) as refused:
            subprocess.run(["/bin/true", "Extra=" + "x" * (limit + 1)], check=False)
        assert refused.value.errno == errno.E2BIG


# --- our record after a confirmed registration (transport.recorded) -------

WITH_RECORD = {"gres": "gpu:mi300x:8", "extra": '{"spurinv":{"fingerprint":"abababababababab","gres":"gpu:mi300x:8"}}'}


@pytest.fixture
def annotated():
    """A node whose admin keeps a note in ``extra``."""
    gateway = Gateway(gres_policy="slurm")
    gateway.add_node("n1", gres="gpu:mi300x:8", extra='{"rack":"r7"}')
    with FaultServer(gateway=gateway) as server:
        yield server, Controller(ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None)


def test_a_confirmed_registration_gets_our_record_beside_the_admins_as_its_own_update(annotated):
    server, client = annotated
    view = client.view()

    result = recorded(client, WITH_RECORD, RegisterResult(True, view, None, "EXEC register"))

    spliced = '{"rack":"r7","spurinv":{"fingerprint":"abababababababab","gres":"gpu:mi300x:8"}}'
    assert (result.applied, result.warning, result.view.extra) == (True, None, spliced)
    assert [(seen.method, seen.json()) for seen in server.requests("POST")] == [("POST", {"extra": spliced})]
    assert client.view().extra == spliced


def test_a_registration_not_applied_or_already_recorded_writes_no_record(annotated):
    server, client = annotated
    view = client.view()
    recorded(client, WITH_RECORD, RegisterResult(True, view, None))  # the record, once
    now = client.view()

    assert recorded(client, WITH_RECORD, RegisterResult(True, now, None)).view is now  # already there
    fresh = replace(view, extra='{"rack":"r7"}')
    assert recorded(client, WITH_RECORD, RegisterResult(False, fresh, "refused")).view is fresh
    assert recorded(client, {"gres": "gpu:mi300x:8"}, RegisterResult(True, fresh, None)).view is fresh  # no record
    assert len(server.requests("POST")) == 1


@pytest.mark.parametrize("extra", ["rack r7, row b (the admin's words)", '{"rack":"caf\ufffd"}', None])
def test_an_extra_that_cannot_take_our_record_is_never_written(annotated, extra):
    """The admin's free text, text read with U+FFFD, or no ``extra``: nothing is written (not our
    record, not a null), and the registration is done with a warning that says so."""
    server, client = annotated
    view = replace(client.view(), extra=extra)

    result = recorded(client, WITH_RECORD, RegisterResult(True, view, None, "EXEC register"))

    assert (result.applied, result.view.extra) == (True, extra)
    assert result.warning == "the node's extra can no longer take our record (not rewritten); registered without it"
    assert server.requests("POST") == []


def test_a_record_the_controller_refuses_leaves_the_registration_done_with_a_warning(annotated):
    server, client = annotated
    view = client.view()
    server.script("POST", NODE, Reply(500, ERRORS["gres"]))

    result = recorded(client, WITH_RECORD, RegisterResult(True, view, None, "EXEC register"))

    assert (result.applied, result.view.extra) == (True, '{"rack":"r7"}')
    assert result.warning is not None
    assert result.warning.startswith(f"registered, but the controller refused our record in extra: POST {NODE}: HTTP 500")


def test_a_record_write_that_fails_otherwise_is_that_error(annotated):
    server, client = annotated
    view = client.view()
    server.script("POST", NODE, Reply(401, NO_TOKEN_TEXT))

    with pytest.raises(ControllerError) as caught:
        recorded(client, WITH_RECORD, RegisterResult(True, view, None, "EXEC register"))

    assert caught.value.kind == "auth"


# --- connect: the one factory every command reaches the controller through -----------------

ENV = {"PATH": "/usr/bin:/bin"}
TOKEN = "tok3nZ9q7Xw2Lm5Rv8Ks"  # nothing about it looks like a credential: only connect() knows it is one


def connected(tmp_path, *, register: bool = True, **section: object):
    """``connect`` for node n1 with a loopback REST URL (never dialled) and ``section``."""
    from spurinv.controller.transport import connect
    from spurinv.log import Log

    settings = ControllerSection.model_validate({"url": "http://127.0.0.1:9", "api": "slurm/v0.0.42", **section})
    return connect(settings, "n1", dict(ENV), Log({}, stream=io.StringIO()), register=register)


def test_connect_builds_the_rest_client_and_its_register_command_replaces_the_gres_update(tmp_path):
    with_command = connected(tmp_path, register_command=["/bin/true", "--node", "n1"])
    read_only = connected(tmp_path, register=False, register_command=["/bin/true", "--node", "n1"])
    without = connected(tmp_path)

    assert isinstance(with_command, Controller)
    assert with_command.describe({"gres": "gpu:mi300x:64"}) == "EXEC /bin/true --node n1"
    assert read_only.describe({"gres": "gpu:mi300x:64"}) == f'POST {NODE} {{"gres": "gpu:mi300x:64"}}'
    assert without.describe({"gres": "gpu:mi300x:64"}) == f'POST {NODE} {{"gres": "gpu:mi300x:64"}}'


@pytest.mark.parametrize("transport", ["rest", "scontrol"])
def test_connect_resolves_the_register_command_only_for_a_caller_that_registers(tmp_path, transport):
    """A missing register program is a configuration error before any request; ``fleet``, which
    never registers, connects all the same."""
    missing = str(tmp_path / "no-such-register")
    section = {"transport": transport, "scontrol": "/bin/true", "register_command": [missing]}

    with pytest.raises(ConfigError) as caught:
        connected(tmp_path, **section)
    read_only = connected(tmp_path, register=False, **section)

    assert "controller.register_command" in caught.value.message
    assert type(read_only).__name__ == {"rest": "Controller", "scontrol": "Scontrol"}[transport]


def test_connect_over_scontrol_runs_the_register_command_in_place_of_the_update(tmp_path):
    client = connected(tmp_path, transport="scontrol", scontrol="/bin/true", register_command=["/bin/true", "n1"])

    assert type(client).__name__ == "Scontrol"
    assert client.describe({"gres": "gpu:mi300x:64"}) == "EXEC /bin/true n1"


def test_the_token_is_blanked_wherever_the_register_command_is_shown(tmp_path):
    """The controller token passed to the register command (an argument here) never shows in a
    report, the log or the state file, though nothing in its form says it is a secret."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)

    client = connected(tmp_path, auth="bearer", token_file=str(token), register_command=["/bin/true", TOKEN, "n1"])

    assert client.describe({"gres": "gpu:mi300x:64"}) == "EXEC /bin/true <secret> n1"
