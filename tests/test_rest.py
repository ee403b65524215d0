"""The REST client's own decisions, against ``tests/faultserver.py`` on 127.0.0.1 (what
the mutation run of ``spurinv/controller/rest.py`` found no test for): how an answer is classified, the
busy re-check's all-nodes query, the size bound on an answer, and the one line a failed request
is said in (a bad chunk length, which the fault server does not send, from a socket of its own;
through the CLI, a port that closes without answering and https to a plain-http port)."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultserver import FaultServer, Gateway, Reply
from reliability.hostile import write_private

from spurinv import exitcode
from spurinv.config.settings import ControllerSection
from spurinv.controller.rest import Controller
from spurinv.errors import ConfigError, ControllerError

NODE = "/slurm/v0.0.42/node/n1"
NODES = "/slurm/v0.0.42/nodes"


@pytest.fixture
def server() -> Iterator[FaultServer]:
    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as running:
        yield running


def client(server: FaultServer) -> Controller:
    return Controller(ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None)


@pytest.mark.parametrize("body", [b"", {}, {"errors": [], "warnings": []}])
def test_a_node_get_answered_404_without_an_error_is_an_unknown_node(server, body):
    """A 404 with nothing in it, for the node the client asked for: the controller does not know
    it (exit 68), not a protocol error (76) that would be backed off as a broken controller."""
    server.script("GET", NODE, Reply(404, body))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert (caught.value.kind, caught.value.exit_code) == ("unknown-node", exitcode.NOHOST)
    assert str(caught.value) == f"GET {NODE}: HTTP 404: the controller does not know node 'n1'"


def test_a_version_detected_in_this_run_is_not_detected_again_on_a_404(server):
    """Only a version an earlier run detected (cached in the state file) may be gone; one this
    run found in ``/openapi/v3`` a moment ago is not asked for again when the node is unknown."""
    server.script("GET", NODE, Reply(404, b""))
    rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None)

    with pytest.raises(ControllerError) as caught:
        rest.view()

    assert caught.value.kind == "unknown-node"
    assert [seen.path for seen in server.seen] == ["/openapi/v3", NODE]


def test_a_cached_version_is_forgotten_once_not_at_every_404(server):
    """The cached v0.0.40 is gone (404): detected again, once; the node the new version does not
    know is then an unknown node, at every look, without asking for the versions again."""
    server.script("GET", NODE, Reply(404, b""))
    rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None, api="slurm/v0.0.40")

    for _ in range(2):
        with pytest.raises(ControllerError) as caught:
            rest.view()
        assert caught.value.kind == "unknown-node"

    assert [seen.path for seen in server.seen] == ["/slurm/v0.0.40/node/n1", "/openapi/v3", NODE, NODE]


@pytest.mark.parametrize("body", [{"nodes": []}, {"node": None}])
def test_a_404_that_answers_about_the_node_keeps_the_cached_version(server, body):
    """A 404 whose JSON speaks of nodes is the node's answer, whatever its error numbers: the
    cached version is served, so it is kept and nothing is detected again."""
    server.script("GET", NODE, Reply(404, body))
    rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None, api="slurm/v0.0.42")

    with pytest.raises(ControllerError) as caught:
        rest.view()

    assert caught.value.kind == "unknown-node"
    assert [seen.path for seen in server.seen] == [NODE]
    assert rest.api == "slurm/v0.0.42"


def test_a_post_answered_404_is_a_read_only_gateway_not_an_unknown_node(server):
    server.script("POST", NODE, Reply(404, b""))

    with pytest.raises(ControllerError) as caught:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert caught.value.kind == "read-only"


def _busy_without_gpu_usage(server: FaultServer) -> None:
    """MIXED with a CPU allocated and no ``gres_used``: only the all-nodes query can confirm it."""
    node = server.gateway.nodes["n1"]
    node.update(state=["MIXED"], alloc_cpus=4)
    node.pop("gres_used")


def test_a_busy_re_check_is_one_all_nodes_query_and_says_it_was_made(server):
    _busy_without_gpu_usage(server)
    rest = client(server)

    confirmed = rest.view(confirm_busy=True)
    asked = [(seen.method, seen.path) for seen in server.seen]

    assert not confirmed.idle
    assert asked == [("GET", NODE), ("GET", NODES)]
    assert rest.rechecked  # the policy stamps busy_checked_at from this, and waits busy_recheck
    # each request is recorded as sent, with the status it was answered with
    assert [request.line() for request in rest.sent] == [f"GET {NODE} → 200", f"GET {NODES} → 200"]


def test_a_view_that_was_not_asked_to_confirm_makes_no_all_nodes_query_and_says_so(server):
    _busy_without_gpu_usage(server)
    rest = client(server)
    rest.view(confirm_busy=True)

    rest.view()

    assert [seen.path for seen in server.seen].count(NODES) == 1
    assert not rest.rechecked


def test_an_idle_node_needs_no_re_check(server):
    rest = client(server)

    rest.view(confirm_busy=True)

    assert [seen.path for seen in server.seen] == [NODE]
    assert not rest.rechecked


def test_an_answer_is_bounded_at_eight_mebibytes(server):
    """``MAX_BODY`` pinned with a literal (a test that moved with the constant could not fail): an
    ``/openapi/v3`` of 8 MiB is read (here garbage: the versions are probed instead), one byte
    more is a protocol error."""
    limit = 8 * 1024 * 1024
    auto = ControllerSection(url=server.url, api="auto", timeout=30)
    server.script("GET", "/openapi/v3", Reply(200, size=limit, length=False))
    assert Controller(auto, "n1", None).view().name == "n1"

    server.script("GET", "/openapi/v3", Reply(200, size=limit + 1, length=False))
    with pytest.raises(ControllerError) as caught:
        Controller(auto, "n1", None).view()
    assert (caught.value.kind, str(caught.value)) == ("protocol", f"GET /openapi/v3: response exceeds {limit} bytes")


def test_an_all_nodes_answer_is_bounded_at_sixty_four_mebibytes(server):
    """``MAX_NODES_BODY`` pinned with a literal: the busy re-check reads an all-nodes answer of
    64 MiB (garbage here, so it fails later, as unparseable), one byte more is refused as too large."""
    limit = 64 * 1024 * 1024
    _busy_without_gpu_usage(server)

    server.script("GET", NODES, Reply(200, size=limit, length=False))
    with pytest.raises(ControllerError) as read:
        client(server).view(confirm_busy=True)
    server.script("GET", NODES, Reply(200, size=limit + 1, length=False))
    with pytest.raises(ControllerError) as refused:
        client(server).view(confirm_busy=True)

    assert "exceeds" not in str(read.value)
    assert (refused.value.kind, str(refused.value)) == ("protocol", f"GET {NODES}: response exceeds {limit} bytes")


def test_a_cached_api_version_the_server_no_longer_serves_is_detected_again_once(server):
    """An earlier run detected v0.0.40; the server was upgraded past it (Slurm 26.11 drops
    v0.0.42): its 404, which names no node, makes the client detect the version again."""
    auto = ControllerSection(url=server.url, api="auto", timeout=5)
    rest = Controller(auto, "n1", None, api="slurm/v0.0.40")

    view = rest.view()

    assert view.name == "n1"
    assert rest.api == "slurm/v0.0.42"
    assert [seen.path for seen in server.seen] == ["/slurm/v0.0.40/node/n1", "/openapi/v3", NODE]


def test_a_cached_api_version_that_answers_is_used_without_detection(server):
    auto = ControllerSection(url=server.url, api="auto", timeout=5)
    rest = Controller(auto, "n1", None, api="slurm/v0.0.42")

    rest.view()

    assert [seen.path for seen in server.seen] == [NODE]


# --- Slurm's error numbers at the edges of each range ----------------------
# The ranges of spurinv/controller/rest.py's UNREACHABLE_ERRORS and INVALID_REQUEST (slurm_errno.h),
# pinned with literals on both sides of each edge; -1 (SLURM_ERROR) and 0 name no refusal.


@pytest.mark.parametrize(
    ("number", "kind"),
    [(-1, "unreachable"), (0, "unreachable"),
     (1000, "refused"), (1001, "unreachable"), (1004, "unreachable"), (1005, "refused"),
     (1012, "refused"), (1013, "unreachable"), (1016, "unreachable"), (1017, "refused"),
     (1799, "refused"), (1800, "unreachable"), (1805, "unreachable"), (1806, "refused"),
     (5002, "refused"), (5003, "unreachable"), (5005, "unreachable"), (5006, "refused")],
)  # fmt: skip
def test_a_failed_write_is_unreachable_only_for_slurms_communication_errors(server, number, kind):
    server.script("POST", NODE, Reply(500, {"errors": [{"error_number": number, "error": "what slurmctld said"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert caught.value.kind == kind


@pytest.mark.parametrize(
    ("number", "kind"),
    [(8999, "unreachable"), (9000, "protocol"), (9099, "protocol"), (9100, "unreachable"),
     (9199, "unreachable"), (9200, "protocol"), (9299, "protocol"), (9300, "unreachable"),
     # Slurm's authentication errors 1007 and 2010, and their neighbours
     (1006, "unreachable"), (1007, "auth"), (1008, "unreachable"), (2009, "unreachable"), (2010, "auth"),
     (2011, "unreachable")],
)  # fmt: skip
def test_a_failed_reads_kind_follows_slurms_error_number(server, number, kind):
    """A 500 on a read: Slurm's authentication errors (1007, 2010) are auth errors, its
    invalid-request ranges (9000-9099, 9200-9299) protocol errors, anything else unreachable."""
    server.script("GET", NODE, Reply(500, {"errors": [{"error_number": number, "error": "what slurmrestd said"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert caught.value.kind == kind


# --- where a token may go, what a refused connection says, whose CA is trusted


@pytest.mark.parametrize(
    ("url", "sent"),
    [("http://localhost:6820", True), ("http://LOCALHOST:6820", True), ("http://127.0.0.2:6820", True),
     ("http://[::1]:6820", True), ("https://ctl.example:6820", True), ("http://127.evil.example:6820", False),
     ("http://10.0.0.1:6820", False), ("http://localhost.example:6820", False)],
)  # fmt: skip
def test_a_token_goes_over_plain_http_only_to_the_loopback(url, sent):
    settings = ControllerSection(url=url, api="slurm/v0.0.42")
    if sent:
        Controller(settings, "n1", "tok")
    else:
        with pytest.raises(ConfigError) as caught:
            Controller(settings, "n1", "tok")
        assert str(caught.value).startswith("refusing to send the token over plain HTTP to ")


def test_a_refused_connection_is_unreachable_in_the_operating_systems_words():
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        with pytest.raises(ControllerError) as caught:
            Controller(ControllerSection(url=f"http://127.0.0.1:{port}", api="slurm/v0.0.42", timeout=5), "n1", None).view()

    assert caught.value.kind == "unreachable"
    assert caught.value.message == f"GET {NODE}: cannot connect to 127.0.0.1:{port}: Connection refused"


def test_a_refused_connection_sent_nothing_and_an_answered_request_was_sent():
    """The run's output says "sent" only for a request that left: not for a refused connection,
    still for one the controller answered with an error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        with pytest.raises(ControllerError) as refused:
            Controller(ControllerSection(url=f"http://127.0.0.1:{port}", api="slurm/v0.0.42", timeout=5), "n1", None).view()

    assert refused.value.sent is False
    assert ControllerError("protocol", "GET x: HTTP 500").sent is True


def self_signed(tmp_path: Path, name: str, alt: str) -> Path:
    """A certificate for ``name`` (subjectAltName ``alt``), its key beside it as ``key.pem``."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName={alt}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert


@contextlib.contextmanager
def tls_server(cert: Path) -> Iterator[FaultServer]:
    """The gateway with node n1 over TLS with ``cert`` (and the key beside it)."""
    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway, tls=(str(cert), str(cert.parent / "key.pem"))) as server:
        yield server


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
def test_tls_trusts_the_configured_ca_file_and_nothing_when_verify_is_off(tmp_path):
    """A site CA (``ca_file``) is what verifies the controller, not the system store; with
    ``verify = false`` and no CA file nothing is checked (a self-signed lab controller)."""
    cert = self_signed(tmp_path, "127.0.0.1", "IP:127.0.0.1")
    with tls_server(cert) as server:
        trusted = ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5, ca_file=str(cert))
        unchecked = ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5, verify=False)
        system = ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5)

        assert Controller(trusted, "n1", None).view().gres == "gpu:mi300x:8"
        assert Controller(unchecked, "n1", None).view().gres == "gpu:mi300x:8"
        with pytest.raises(ControllerError) as caught:
            Controller(system, "n1", None).view()

    assert caught.value.kind == "unreachable"
    assert "TLS with 127.0.0.1:" in caught.value.message


def refresh_against(cli, built, state_path, tmp_path, url: str):
    root = built("mi300x-spx")
    config = write_private(
        tmp_path / "config.toml", f'[node]\nname = "n1"\n[controller]\nurl = "{url}"\napi = "slurm/v0.0.42"\ntimeout = 2\n'
    )
    return cli("refresh", "--root", root, "--state", state_path, "--config", config, "--confirm-interval", "0")


def test_a_port_that_closes_without_answering_is_one_plain_line(cli, built, state_path, tmp_path, closes_at_once):
    ran = refresh_against(cli, built, state_path, tmp_path, f"http://127.0.0.1:{closes_at_once}")
    assert ran.code == exitcode.UNAVAILABLE
    assert "closed the connection without an HTTP answer" in ran.err
    assert "RemoteDisconnected" not in ran.err
    assert "Connection aborted" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1


def test_https_to_a_plain_http_port_says_so_in_one_line(cli, built, state_path, tmp_path):
    with FaultServer(gateway=Gateway()) as server:
        server.gateway.add_node("n1")
        ran = refresh_against(cli, built, state_path, tmp_path, server.url.replace("http://", "https://"))
    assert ran.code == exitcode.UNAVAILABLE
    assert "does not speak TLS on this port" in ran.err
    assert "HTTPSConnectionPool" not in ran.err
    assert "WRONG_VERSION_NUMBER" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1


def test_a_dry_run_shows_the_register_command_for_a_registration_and_the_post_for_anything_else():
    """``describe``'s ``"gres" in body`` flipped survived; only a GRES
    body is the register command's, a drain is still its POST (and without a command the GRES is
    a POST); our record follows either as its own update, as the real run sends it."""
    import io

    from spurinv.controller.registration import Registrar
    from spurinv.log import Log

    settings = ControllerSection(url="http://127.0.0.1:9", api="slurm/v0.0.42")
    registrar = Registrar(("/usr/bin/true", "n1"), 5, 1, {"PATH": "/usr/bin:/bin"}, Log({}, stream=io.StringIO()))
    with_command = Controller(settings, "n1", None, registrar=registrar)
    without = Controller(settings, "n1", None)
    drain = {"state": ["DRAIN"], "reason": "spurinv: x"}

    # the record after the command, as the real run's step names it
    assert (
        with_command.describe({"gres": "gpu:mi300x:64", "extra": "{}"})
        == f'EXEC /usr/bin/true n1; then POST {NODE} {{"extra": "{{}}"}}'
    )
    assert with_command.describe({"gres": "gpu:mi300x:64"}) == "EXEC /usr/bin/true n1"
    assert with_command.describe(drain) == f'POST {NODE} {{"reason": "spurinv: x", "state": ["DRAIN"]}}'
    assert without.describe({"gres": "gpu:mi300x:64", "extra": "{}"}) == (
        f'POST {NODE} {{"gres": "gpu:mi300x:64"}}; then POST {NODE} {{"extra": "{{}}"}}'
    )


# --- survivors of a fresh mutation seed (rest26c): each pinned with literal values --------


def test_a_declared_length_of_eight_mebibytes_is_read_and_one_byte_more_is_refused_unread(server):
    """The Content-Length check, on its own edge: 8388608 declared is read (garbage here, so the
    versions are probed), 8388609 is refused before the body is read, naming the declared size."""
    auto = ControllerSection(url=server.url, api="auto", timeout=30)
    server.script("GET", "/openapi/v3", Reply(200, size=8388608))
    assert Controller(auto, "n1", None).view().name == "n1"

    server.script("GET", "/openapi/v3", Reply(200, size=8388609))
    with pytest.raises(ControllerError) as caught:
        Controller(auto, "n1", None).view()
    assert (caught.value.kind, str(caught.value)) == (
        "protocol",
        "GET /openapi/v3: response of 8388609 bytes exceeds 8388608",
    )


def test_a_post_answered_422_with_a_slurm_error_is_a_refusal(server):
    """Slurm 26.05 answers a refused update with 422: the GRES update is refused, not a
    protocol error that would be backed off as a broken controller."""
    server.script(
        "POST", NODE, Reply(422, {"errors": [{"error_number": 2072, "error": "Invalid generic resource (gres) specification"}]})
    )

    with pytest.raises(ControllerError) as caught:
        client(server).post({"gres": "gpu:mi300x:4"})

    assert (caught.value.kind, str(caught.value)) == (
        "refused",
        f"POST {NODE}: HTTP 422: Invalid generic resource (gres) specification",
    )


@pytest.mark.parametrize(("number", "kind"), [(0, "unreachable"), (1, "refused"), (-1, "unreachable")])
def test_a_failed_write_with_error_number_one_is_a_refusal_and_zero_is_none(server, number, kind):
    """0 (no error) and -1 (SLURM_ERROR) name no refusal: a 500 with them is the controller
    failing; 1 (or any other number) is slurmctld refusing the write."""
    server.script("POST", NODE, Reply(500, {"errors": [{"error_number": number, "error": "what slurmctld said"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert caught.value.kind == kind


def test_an_http_400_with_a_slurm_error_is_a_protocol_error_naming_both(server):
    """400 is not a redirect (300-399): the message says HTTP 400 and what Slurm said."""
    server.script("GET", NODE, Reply(400, {"errors": [{"error_number": 9200, "error": "Unable to parse query"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert (caught.value.kind, str(caught.value)) == ("protocol", f"GET {NODE}: HTTP 400: Unable to parse query")


def test_a_missing_ca_file_is_a_configuration_error_in_the_operating_systems_words(tmp_path):
    missing = str(tmp_path / "no-such-ca.pem")
    settings = ControllerSection(url="https://127.0.0.1:9", api="slurm/v0.0.42", ca_file=missing)

    with pytest.raises(ConfigError) as caught:
        Controller(settings, "n1", None)

    assert str(caught.value) == (
        f"controller.ca_file = '{missing}': No such file or directory; "
        'point it at a PEM CA bundle, or set it to "" for the system store'
    )


@pytest.mark.parametrize(
    ("auth", "expected"),
    [("slurm-jwt", ("slurm", "tok", None)), ("bearer", (None, None, "Bearer tok")), ("none", (None, None, None))],
)
def test_the_token_goes_in_the_headers_its_auth_names_beside_the_configured_user(server, auth, expected):
    """slurm-jwt sends ``X-SLURM-USER-NAME`` (the configured user, not the default root) with the
    token; bearer only ``Authorization``; none sends neither."""
    settings = ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5, auth=auth, user="slurm")

    Controller(settings, "n1", "tok").view()
    headers = server.seen[0].headers

    assert (headers.get("x-slurm-user-name"), headers.get("x-slurm-user-token"), headers.get("authorization")) == expected


def test_a_request_the_run_deadline_cut_short_is_the_deadlines_error_not_the_controllers(server):
    """A 5 s request timeout cut to the 0.5 s left of the run (a fixed clock: the budget neither
    grows nor shrinks while the test runs), and an answer 2 s late: the deadline's error (no
    backoff), not an unreachable controller."""
    from spurinv.budget import Budget
    from spurinv.errors import DeadlineError

    server.script("GET", NODE, Reply(200, {}, delay=2.0))
    rest = Controller(
        ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None, budget=Budget(0.5, clock=lambda: 0.0)
    )

    with pytest.raises(DeadlineError) as caught:
        rest.view()

    assert str(caught.value) == f"controller.run_deadline (0.5 s) reached during GET {NODE}; state saved"


def test_a_socket_timeout_the_run_deadline_cut_short_is_the_deadlines_error_too(server):
    """The same cut timeout, outside the main thread, where no SIGALRM bounds the request: it ends
    by requests' own socket timeout (``requests.exceptions.Timeout``), still the deadline's doing."""
    import threading

    from spurinv.budget import Budget

    server.script("GET", NODE, Reply(200, {}, delay=2.0))
    rest = Controller(
        ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None, budget=Budget(0.5, clock=lambda: 0.0)
    )
    raised: list[BaseException] = []

    def view() -> None:
        try:
            rest.view()
        except BaseException as exc:  # handed to the test's thread
            raised.append(exc)

    thread = threading.Thread(target=view)
    thread.start()
    thread.join(30)

    assert [str(exc) for exc in raised] == [f"controller.run_deadline (0.5 s) reached during GET {NODE}; state saved"]


@pytest.mark.parametrize("used", ["gpu:mi300x:²(IDX:0)", "gpu:mi300x:1234567890123456789(IDX:0-7)"])
def test_an_all_nodes_answer_with_an_unusable_gres_used_count_is_a_protocol_error_of_the_read(server, used):
    """The busy re-check's answer is checked while it is read, inside the request's error
    handling, as the single node's is: a view handed on with it would fail later, in the
    policy, as a crash."""
    _busy_without_gpu_usage(server)
    node = dict(server.gateway.nodes["n1"], gres_used=used)
    server.script("GET", NODES, Reply(200, {"nodes": [node]}))

    with pytest.raises(ControllerError) as caught:
        client(server).view(confirm_busy=True)

    assert caught.value.kind == "protocol"
    assert caught.value.message == f"GRES entry {used[:40]!r} has a malformed count"


@pytest.mark.parametrize(
    ("error", "said"),
    [({"error_number": 1, "description": "", "error": ""}, "no nodes"),
     ({"error_number": 1, "description": "Unable to query nodes"}, "Unable to query nodes")],
)  # fmt: skip
def test_an_all_nodes_answer_with_an_error_quotes_it_or_says_no_nodes(server, error, said):
    """Slurm 24.11 answers a failed all-nodes query with 200 and an error beside the list: the
    error's words, else "no nodes", never an empty message."""
    server.script("GET", NODES, Reply(200, {"nodes": [], "errors": [error]}))

    with pytest.raises(ControllerError) as caught:
        client(server).all_nodes()

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GET {NODES}: {said}")


def test_a_busy_re_check_the_controller_fails_is_that_error_not_a_reading_of_its_body(server):
    """The all-nodes query answered 500: the controller's error, as for the node's own GET (the
    re-check ran in no in-process test; only the CLI runs reached it)."""
    _busy_without_gpu_usage(server)
    server.script("GET", NODES, Reply(500, {"errors": [{"error_number": 1, "description": "Unspecified error"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).view(confirm_busy=True)

    assert (caught.value.kind, caught.value.message) == (
        "unreachable",
        f"GET {NODES}: HTTP 500: controller error (Unspecified error)",
    )


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_a_certificate_for_another_host_is_named_as_such(tmp_path, host):
    """A trusted certificate issued for another name than the URL's host, a name or an IP address
    (OpenSSL: "Hostname mismatch", "IP address mismatch"): the operator is told to use the name it
    was issued for, not that the certificate is untrusted."""
    cert = self_signed(tmp_path, "ctl.example", "DNS:ctl.example")
    with tls_server(cert) as server:
        url = server.url.replace("127.0.0.1", host)
        settings = ControllerSection(url=url, api="slurm/v0.0.42", timeout=5, ca_file=str(cert))
        with pytest.raises(ControllerError) as caught:
            Controller(settings, "n1", None).view()

    where = url.split("//", 1)[1]
    assert (caught.value.kind, caught.value.message) == (
        "unreachable",
        f"GET {NODE}: TLS with {where} failed: the certificate does not name this host "
        "(use the name it was issued for in controller.url)",
    )


@pytest.mark.parametrize(("number", "fails"), [(0, False), (-1, True), (1, True)])
def test_a_post_answered_200_succeeds_only_when_its_errors_say_error_number_0(server, number, fails):
    """200 with an error beside it: 0 is Slurm's "no error" (the write applied); -1
    (SLURM_ERROR) and any other number say it was not."""
    server.script("POST", NODE, Reply(200, {"errors": [{"error_number": number, "error": "what slurmctld said"}]}))

    if not fails:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})
        return
    with pytest.raises(ControllerError):
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})


def test_an_all_nodes_answer_with_null_nodes_and_an_error_quotes_the_error(server):
    """Slurm 24.11's failed all-nodes query: 200, ``"nodes": null`` and an error. The error's
    words are the message, not "no 'nodes'" (the key is there, only null)."""
    error = {"error_number": 1, "description": "Unable to query nodes"}
    server.script("GET", NODES, Reply(200, {"nodes": None, "errors": [error]}))

    with pytest.raises(ControllerError) as caught:
        client(server).all_nodes()

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GET {NODES}: Unable to query nodes")


@pytest.mark.parametrize("gres", ["gpu:mi300x:²", "gpu:mi300x:1234567890123456789"])
def test_a_node_whose_gres_has_an_unusable_count_is_a_protocol_error_of_the_read(server, gres):
    """The node's own GRES is checked while the answer is read, as its ``gres_used`` is: a
    count the parser cannot use fails the request, not the policy later."""
    node = dict(server.gateway.nodes["n1"], gres=gres)
    server.script("GET", NODE, Reply(200, {"nodes": [node]}))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GRES entry {gres!r} has a malformed count")


def test_an_error_is_said_in_its_first_200_characters():
    """A transport error's words are cut at 200 characters for the one-line message."""
    from spurinv.controller.rest import _first_line

    assert _first_line(OSError("x" * 199 + "yz")) == "x" * 199 + "y"
    assert _first_line(OSError("x" * 200)) == "x" * 200


# --- edges no test pinned (a read of every mutant of rest.py, 2026-12-04) ----------------


@pytest.mark.parametrize(
    ("status", "kind", "said"),
    [(501, "refused", "HTTP 501: what slurmctld said"),
     (502, "unreachable", "HTTP 502: controller unreachable (what slurmctld said)"),
     (503, "unreachable", "HTTP 503: controller unreachable (what slurmctld said)"),
     (504, "unreachable", "HTTP 504: controller unreachable (what slurmctld said)"),
     (505, "refused", "HTTP 505: what slurmctld said")],
)  # fmt: skip
def test_a_write_answered_502_503_or_504_is_the_gateways_unreachable_not_a_refusal(server, status, kind, said):
    """502-504 say the gateway is up and what is behind it is not: a refusal's error number
    beside them is no refusal. 501 and 505 are the controller's own answer: the number refuses."""
    server.script("POST", NODE, Reply(status, {"errors": [{"error_number": 1, "error": "what slurmctld said"}]}))

    with pytest.raises(ControllerError) as caught:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert (caught.value.kind, caught.value.message) == (kind, f"POST {NODE}: {said}")


@pytest.mark.parametrize(
    ("method", "number", "kind", "said"),
    [("GET", None, "protocol", "HTTP 499: HTTP 499"),
     ("GET", 9000, "protocol", "HTTP 499: what slurm said"),
     ("POST", 1, "protocol", "HTTP 499: what slurm said"),
     ("GET", None, "unreachable", "HTTP 500: controller error (HTTP 500)")],
)  # fmt: skip
def test_a_status_under_500_is_never_the_controller_failing_and_500_is(server, method, number, kind, said):
    """From 500 up the controller failed (backed off as unreachable, an invalid read, a refused
    write); 499 is none of these: a protocol error with the answer's words, else its status."""
    status = int(said.split()[1].rstrip(":"))
    body = {"errors": [{"error_number": number, "error": "what slurm said"}]} if number is not None else b""
    server.script(method, NODE, Reply(status, body))
    rest = client(server)

    with pytest.raises(ControllerError) as caught:
        rest.view() if method == "GET" else rest.post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert (caught.value.kind, caught.value.message) == (kind, f"{method} {NODE}: {said}")


@pytest.mark.parametrize(
    ("status", "kind", "said"),
    [(401, "auth", "authentication or permission refused (HTTP 401)"),
     (403, "auth", "authentication or permission refused (HTTP 403)"),
     (510, "unreachable", "controller error (HTTP 510)"),
     (511, "auth", "authentication or permission refused (HTTP 511)"),  # a proxy's login page
     (512, "unreachable", "controller error (HTTP 512)")],
)  # fmt: skip
def test_http_401_403_and_511_are_authentication_errors_and_their_neighbours_are_not(server, status, kind, said):
    """511 (Network Authentication Required) is what a captive proxy in front of slurmrestd says:
    an operator fixes credentials or the proxy, so it is backed off as an auth error."""
    server.script("GET", NODE, Reply(status, b""))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert (caught.value.kind, caught.value.message) == (kind, f"GET {NODE}: HTTP {status}: {said}")


def test_a_post_answered_405_is_a_read_only_gateway(server):
    server.script("POST", NODE, Reply(405, b""))

    with pytest.raises(ControllerError) as caught:
        client(server).post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert (caught.value.kind, caught.value.message) == (
        "read-only",
        f"POST {NODE}: HTTP 405: the gateway has no node write route (read-only gateway)",
    )


@pytest.mark.parametrize(
    ("reply", "said"),
    [(Reply(404, b""), "HTTP 404: no such route (check controller.api)"),
     (Reply(200, [1, 2]), "the answer is not a JSON object"),
     (Reply(200, {"errors": []}), "the answer has no 'nodes'"),
     (Reply(200, {"nodes": None}), "'nodes' is null and no error says why"),
     (Reply(200, {"nodes": "n1"}), "'nodes' is str, not a list")],
)  # fmt: skip
def test_an_all_nodes_answer_that_is_no_list_of_nodes_is_a_protocol_error_saying_what_it_is(server, reply, said):
    server.script("GET", NODES, reply)

    with pytest.raises(ControllerError) as caught:
        client(server).all_nodes()

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GET {NODES}: {said}")


def test_an_all_nodes_answer_with_error_number_0_beside_the_list_is_the_fleet_and_two_errors_quote_the_first(server):
    """Error 0 is Slurm's "no error" (24.11 lists it beside a good answer); of two real errors
    the first is the one said."""
    node = {"name": "n1"}
    server.script("GET", NODES, Reply(200, {"nodes": [node], "errors": [{"error_number": 0, "error": "fine"}]}))
    assert client(server).all_nodes() == [node]

    two = [{"error_number": 1, "error": "the first"}, {"error_number": 2, "error": "the second"}]
    server.script("GET", NODES, Reply(200, {"nodes": [node], "errors": two}))
    with pytest.raises(ControllerError) as caught:
        client(server).all_nodes()
    assert caught.value.message == f"GET {NODES}: the first"


def test_openapi_v3_picks_the_newest_version_by_number_with_a_node_get():
    """v0.0.10 is newer than v0.0.9 (a number, not text); a version listing no GET for the node
    (v0.0.11 here) is not one the client can read."""
    gateway = Gateway()
    gateway.add_node("n1", gres="gpu:mi300x:8")
    paths = ["/slurm/v0.0.9/node/{node_name}", "/slurm/v0.0.10/node/{node_name}", "/slurm/v0.0.11/node/{node_name}"]
    spec: dict[str, object] = {"paths": {paths[0]: {"get": {}}, paths[1]: {"get": {}}, paths[2]: {"post": {}}}}
    with FaultServer(gateway=gateway) as server:
        server.script("GET", "/openapi/v3", Reply(200, spec))
        rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None)

        assert rest.detect() is None

    assert rest.api == "slurm/v0.0.10"


def test_a_url_without_a_host_is_not_the_loopback():
    from spurinv.controller.rest import is_loopback

    assert is_loopback("http:///slurm") is False
    assert is_loopback("http://127.0.0.1:6820") is True


def test_an_exceptions_words_are_taken_through_eight_wrappers_and_no_more():
    """requests wraps urllib3's error, which wraps the cause: the words of the eighth wrapped
    exception are said; a ninth is left in its wrapper's words. Without words, the type's name."""
    from spurinv.controller.rest import _first_line

    def wrapped(depth: int) -> BaseException:
        exc: BaseException = ValueError("the cause")
        for _ in range(depth):
            exc = RuntimeError(exc, "wrapper")
        return exc

    assert _first_line(wrapped(8)) == "the cause"
    assert _first_line(wrapped(9)) == "(ValueError('the cause'), 'wrapper')"
    assert _first_line(ValueError()) == "ValueError"
    assert _first_line(ValueError("\n")) == "ValueError"
    assert _first_line(ValueError("read b'zz' at b\"x\"")) == "read 'zz' at \"x\""


def test_a_broken_chunked_answer_is_one_line_without_python_reprs(tmp_path):
    """A server that sends a bad chunk length: requests says ``ChunkedEncodingError(ProtocolError(
    ('Connection broken: InvalidChunkLength(got length b'zz', 0 bytes read)', …)))``; the run's
    line said the tuple, with ``b'zz'``."""
    import socket
    import threading

    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller
    from spurinv.errors import ControllerError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        settings = ControllerSection(url=f"http://127.0.0.1:{port}", api="slurm/v0.0.42", timeout=5)
        with pytest.raises(ControllerError) as raised:
            Controller(settings, "n1", None).view()
    finally:
        thread.join(timeout=10)
        listener.close()

    message = raised.value.message
    assert "\n" not in message
    assert "b'" not in message
    assert "/slurm/v0.0.42/node/n1" in message


def test_a_request_leaves_no_alarm_armed_and_the_previous_handler_in_place(server):
    """The whole-request deadline is SIGALRM: after the request the timer is off and the handler
    the caller had is back; off the main thread, where no handler can be set, it still reads."""
    import signal
    import threading

    def mine(_signum: int, _frame: object) -> None:
        raise AssertionError("SIGALRM after the request")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        assert client(server).view().name == "n1"
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is mine
    finally:
        signal.signal(signal.SIGALRM, previous)

    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(client(server).view().name))
    thread.start()
    thread.join(30)
    assert seen == ["n1"]


def test_a_request_timeout_the_run_deadline_left_whole_is_the_controllers_not_the_deadlines(server):
    """The run has exactly the request's timeout left (a fixed clock): the timeout was not cut,
    so running out of it is the controller's doing (unreachable, backed off)."""
    from spurinv.budget import Budget

    server.script("GET", NODE, Reply(200, {}, delay=2.0))
    rest = Controller(
        ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=0.2), "n1", None, budget=Budget(0.2, clock=lambda: 0.0)
    )

    with pytest.raises(ControllerError) as caught:
        rest.view()

    assert caught.value.kind == "unreachable"
    assert caught.value.message in (
        f"GET {NODE}: timed out after 0.2 s",
        f"GET {NODE}: no complete answer within 0.2 s",
    )


@pytest.mark.parametrize(
    ("status", "said"),
    [(299, "HTTP 299: HTTP 299"),
     (300, "redirect to http://elsewhere.example/x refused (spurinv never follows redirects)"),
     (399, "redirect to http://elsewhere.example/x refused (spurinv never follows redirects)")],
)  # fmt: skip
def test_every_status_from_300_to_399_is_a_redirect_refused_naming_where_it_pointed(server, status, said):
    server.script("GET", NODE, Reply(status, b"", {"Location": "http://elsewhere.example/x"}))

    with pytest.raises(ControllerError) as caught:
        client(server).view()

    assert (caught.value.kind, caught.value.message) == ("protocol", f"GET {NODE}: {said}")


def test_an_answer_that_is_not_utf8_is_read_and_logged_naming_the_node_and_a_clean_one_logs_nothing(server):
    """slurmrestd passes a reason typed in Latin-1 through as is: it reads as U+FFFD, and the log
    (when there is one) says which node held it; a clean answer says nothing."""
    import io
    import json

    from spurinv.log import Log

    stream = io.StringIO()
    rest = Controller(ControllerSection(url=server.url, api="slurm/v0.0.42", timeout=5), "n1", None,
                      log=Log({}, stream=stream))  # fmt: skip
    rest.view()
    assert stream.getvalue() == ""

    node = dict(server.gateway.nodes["n1"], reason="Zo@")
    data = json.dumps({"nodes": [node]}).encode().replace(b"Zo@", b"Zo\xeb")
    server.script("GET", NODE, Reply(200, data, {"Content-Type": "application/json"}))

    assert rest.view().reason == "Zo\ufffd"
    assert f"GET {NODE}: text that is not UTF-8 (read as U+FFFD) in node n1\n" in stream.getvalue()
    assert client(server).view().reason == "Zo\ufffd"  # without a log: read all the same


@pytest.mark.parametrize(("look", "path"), [("view", "node/n1"), ("all_nodes", "nodes")])
def test_probing_stops_at_the_first_version_that_answers_with_its_error(server, look, path):
    """No /openapi/v3 (404): versions are probed newest first, for the node and for every node; a
    404 that names no node is a version not served, the first other answer decides (here 403: an
    auth error, the version kept)."""
    server.script("GET", "/openapi/v3", Reply(404, "Not Found"))
    server.script("GET", f"/slurm/v0.0.45/{path}", Reply(403, "Forbidden"))
    rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None)

    with pytest.raises(ControllerError) as caught:
        getattr(rest, look)()

    assert (caught.value.kind, caught.value.message) == (
        "auth",
        f"GET /slurm/v0.0.45/{path}: HTTP 403: authentication or permission refused (HTTP 403)",
    )
    assert rest.api == "slurm/v0.0.45"
    assert [seen.path for seen in server.seen] == ["/openapi/v3", f"/slurm/v0.0.46/{path}", f"/slurm/v0.0.45/{path}"]


@pytest.mark.parametrize("look", ["view", "all_nodes"])
def test_no_version_answering_is_a_protocol_error_naming_every_version_tried(look):
    with FaultServer() as server:  # no gateway: every path is 404 Not Found
        rest = Controller(ControllerSection(url=server.url, api="auto", timeout=5), "n1", None)
        with pytest.raises(ControllerError) as caught:
            getattr(rest, look)()

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        "no known REST API version answers (tried /openapi/v3 and slurm/v0.0.46, slurm/v0.0.45, slurm/v0.0.44, "
        "slurm/v0.0.43, slurm/v0.0.42, slurm/v0.0.41, slurm/v0.0.40, slurm/v0.0.39, slurm/v0.0.38, api/v1)",
    )


def test_a_busy_re_check_keeps_only_this_node_of_whatever_the_all_nodes_answer_lists(server):
    _busy_without_gpu_usage(server)
    ours = server.gateway.nodes["n1"]
    other = dict(ours, name="n2", state=["IDLE"], alloc_cpus=0)
    server.script("GET", NODES, Reply(200, {"nodes": [1, "n1", None, other, ours]}))

    view = client(server).view(confirm_busy=True)

    assert (view.name, view.idle, view.alloc_cpus) == ("n1", False, 4)


def test_every_node_is_one_query_at_the_version_openapi_v3_names_else_at_the_first_probed_that_answers(server):
    auto = ControllerSection(url=server.url, api="auto", timeout=5)

    detected = Controller(auto, "n1", None)
    assert [node["name"] for node in detected.all_nodes()] == ["n1"]
    assert [seen.path for seen in server.seen] == ["/openapi/v3", NODES]

    server.seen.clear()
    server.script("GET", "/openapi/v3", Reply(404, "Not Found"))
    probed = Controller(auto, "n1", None)
    assert [node["name"] for node in probed.all_nodes()] == ["n1"]
    assert probed.api == "slurm/v0.0.42"
    assert [seen.path for seen in server.seen] == [
        "/openapi/v3", "/slurm/v0.0.46/nodes", "/slurm/v0.0.45/nodes", "/slurm/v0.0.44/nodes", "/slurm/v0.0.43/nodes", NODES,
    ]  # fmt: skip


def test_a_ca_file_that_is_not_a_regular_file_is_a_configuration_error_saying_so(tmp_path):
    """A directory (or a FIFO, which loading would block on) is refused before it is opened."""
    settings = ControllerSection(url="https://127.0.0.1:9", api="slurm/v0.0.42", ca_file=str(tmp_path))

    with pytest.raises(ConfigError) as caught:
        Controller(settings, "n1", None)

    assert str(caught.value) == (
        f"controller.ca_file = '{tmp_path}': not a regular file; "
        'point it at a PEM CA bundle, or set it to "" for the system store'
    )


@pytest.mark.parametrize("token", ["tok en", "tok\tx", "tok\x7f", "tök"])
def test_a_token_with_whitespace_or_control_characters_is_refused_before_any_request(token):
    from spurinv.errors import TokenError

    settings = ControllerSection(url="http://127.0.0.1:9", api="slurm/v0.0.42")

    with pytest.raises(TokenError) as caught:
        Controller(settings, "n1", token)

    assert str(caught.value) == "the token holds whitespace or control characters (a broken token file?); not sending it"


def test_every_node_is_reduced_by_keep_as_it_is_read(server):
    """``fleet`` hands a ``keep`` that reduces each node of a good answer as it arrives (the rest
    is dropped): what it returns is the list, without what it returns None for."""
    server.gateway.add_node("n2", gres="gpu:mi300x:4")

    kept = client(server).all_nodes(keep=lambda node: None if node["name"] == "n1" else node["name"].upper())

    assert kept == ["N2"]


def test_a_tls_failure_is_said_in_an_operators_words_found_anywhere_in_the_chain():
    """OpenSSL's reason code, wherever requests and urllib3 wrapped it: a known one in words with
    the key to change, an unknown one spelled out, none at all the plain sentence."""
    import ssl

    from spurinv.controller.rest import _tls_reason

    def failed(reason: str) -> BaseException:
        error = ssl.SSLError(1, "handshake")
        error.reason = reason
        return RuntimeError(OSError(error))

    assert _tls_reason(failed("CERTIFICATE_VERIFY_FAILED")) == (
        "its certificate is not trusted (set controller.ca_file to the CA bundle that signed it)"
    )
    assert _tls_reason(failed("SOME_NEW_REASON")) == "some new reason"
    assert _tls_reason(failed("not a code")) == "the TLS handshake failed"
    assert _tls_reason(RuntimeError("no reason at all")) == "the TLS handshake failed"


def test_a_connection_failure_is_said_in_the_systems_words_found_anywhere_in_the_chain():
    import http.client

    from spurinv.controller.rest import _os_reason

    assert _os_reason(RuntimeError(ValueError("x"), OSError(111, "Connection refused"))) == "Connection refused"
    assert _os_reason(RuntimeError(http.client.RemoteDisconnected("closed"))) == (
        "the server closed the connection without an HTTP answer (is controller.url slurmrestd's port?)"
    )
    assert _os_reason(RuntimeError(OSError("no errno"))) == "connection failed"
    # the nearest words win: the chain is read outermost first, wrapper by wrapper
    nested = RuntimeError(OSError(113, "No route to host"), RuntimeError(OSError(111, "Connection refused")))
    assert _os_reason(nested) == "No route to host"


def test_a_cached_version_answered_by_an_error_is_kept_and_one_gone_is_probed_for_once(server):
    """Only a 404 that names no node makes a cached version suspect: a 503 is the controller's
    error, the version kept. A version gone with no /openapi/v3 is probed for, and the probe's
    answer is the reading (no second GET)."""
    auto = ControllerSection(url=server.url, api="auto", timeout=5)
    server.script("GET", NODE, Reply(503, b""))
    cached = Controller(auto, "n1", None, api="slurm/v0.0.42")
    with pytest.raises(ControllerError) as caught:
        cached.view()
    assert (caught.value.kind, cached.api) == ("unreachable", "slurm/v0.0.42")
    assert [seen.path for seen in server.seen] == [NODE]

    server.seen.clear()  # a 404 about the node (Slurm's 2018): the node is unknown, the version fine
    server.script("GET", NODE, Reply(404, {"errors": [{"error_number": 2018, "error": "Invalid node name specified"}]}))
    with pytest.raises(ControllerError) as unknown:
        Controller(auto, "n1", None, api="slurm/v0.0.42").view()
    assert unknown.value.kind == "unknown-node"
    assert [seen.path for seen in server.seen] == [NODE]

    server.seen.clear()
    server.unscript()  # the gateway answers again
    server.script("GET", "/openapi/v3", Reply(404, "Not Found"))
    gone = Controller(auto, "n1", None, api="slurm/v0.0.40")
    assert gone.view().name == "n1"
    assert gone.api == "slurm/v0.0.42"
    assert [seen.path for seen in server.seen] == [
        "/slurm/v0.0.40/node/n1", "/openapi/v3", "/slurm/v0.0.46/node/n1", "/slurm/v0.0.45/node/n1",
        "/slurm/v0.0.44/node/n1", "/slurm/v0.0.43/node/n1", NODE,
    ]  # fmt: skip


def test_a_client_that_has_read_nothing_has_made_no_re_check():
    rest = Controller(ControllerSection(url="http://127.0.0.1:9", api="slurm/v0.0.42"), "n1", None)

    assert rest.rechecked is False
    assert rest.sent == []


def test_a_content_length_spelled_with_a_superscript_digit_is_no_declared_size(server):
    """ "²".isdigit() is True but int("²") raises: such a header declares nothing, and the answer
    is read within its bound as any other."""
    auto = ControllerSection(url=server.url, api="auto", timeout=5)
    server.script("GET", "/openapi/v3", Reply(200, b"{}", {"Content-Length": "\u00b2"}, length=False))
    assert Controller(auto, "n1", None).view().name == "n1"


def test_a_content_length_of_five_thousand_digits_is_over_the_bound_not_a_crash(server):
    """int() of 4,301 digits or more raises; a declared size of 19 digits is over any bound."""
    auto = ControllerSection(url=server.url, api="auto", timeout=5)
    server.script("GET", "/openapi/v3", Reply(200, b"{}", {"Content-Length": "9" * 5000}, length=False))
    with pytest.raises(ControllerError) as caught:
        Controller(auto, "n1", None).view()
    assert caught.value.kind == "protocol"
    assert str(caught.value).startswith("GET /openapi/v3: response of 99999")


# --- one request over a kept-alive connection: "sent" as the server saw it -------------------


def _node_body() -> bytes:
    from faultserver import capture

    document = capture("node-n1-idle")
    document["nodes"][0]["name"] = "n1"
    return json.dumps(document).encode()


def _read_request(conn: socket.socket) -> str | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                   if k.strip().lower() == b"content-length"), 0)  # fmt: skip
    while len(rest) < length:
        rest += conn.recv(65536)
    return head.split(b" ", 1)[0].decode()


def _keep_alive(listener: socket.socket, after_get: str, seen: list[str]) -> None:
    """Answer the GET and keep the connection; then, for the POST, do ``after_get``."""
    body = _node_body()
    conn, _ = listener.accept()
    seen.append(_read_request(conn) or "")
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    if after_get == "close, stop listening":  # the keep-alive connection closed, slurmrestd gone
        conn.close()
        listener.close()
        return
    seen.append(_read_request(conn) or "")  # the POST arrived on the kept connection
    if after_get == "read the write, reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


@pytest.mark.parametrize(
    ("after_get", "sent", "posts"),
    [("close, stop listening", False, 0), ("read the write, close", True, 1), ("read the write, reset", True, 1)],
)
def test_a_write_after_a_kept_alive_read_is_sent_exactly_when_the_server_got_it(after_get, sent, posts):
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller
    from spurinv.errors import ControllerError

    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []
    server = threading.Thread(target=_keep_alive, args=(listener, after_get, seen), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    client = Controller(ControllerSection(url=url, api="slurm/v0.0.42", timeout=2), "n1", None)
    client.view()
    time.sleep(0.1)  # the server's close reaches the client before the write starts

    with pytest.raises(ControllerError) as failed:
        client.post({"state": ["DRAIN"], "reason": "x"})
    server.join(5)
    listener.close()

    assert seen.count("POST") == posts
    assert failed.value.sent is sent, failed.value.message
    assert client.sent[-1].left is sent  # the record says what the error says
