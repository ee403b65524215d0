"""Controller faults through the real CLI, against ``tests/faultserver.py`` on 127.0.0.1.

Every run is ``spurinv refresh`` with ``[controller] url`` pointing at the fault server,
slurm-jwt auth and a 0600 token file, on a fixture root whose state already holds one reading, so
the run confirms a change and must ask the controller: in this process (``launch.main``), and as a
real process for the faulty reads about time (``AS_A_PROCESS``). Whatever the server does, the run ends within
``timeout`` × requests + a margin (process start-up and discovery), with the
documented exit status, never follows a redirect, never moves the baseline on a write it could not
verify, never resumes a drain it does not own and never drains twice.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hostile
import pytest
from faultserver import CAPTURES, ERRORS, NO_TOKEN_TEXT, FaultServer, Gateway, Reply, Reset, capture

TIMEOUT = 1.0
MARGIN = 6.0  # interpreter start-up, imports and discovery on a loaded 2-core CI machine
NODE_PATH = "/slurm/v0.0.42/node/n1"


class Rig:
    """A fault server with a Slurm-like gateway, a state file, a token, and ways to run spurinv."""

    def __init__(self, tmp_path: Path, built: Any, spurinv: Any, cli: Any, server: FaultServer) -> None:
        self.tmp = tmp_path
        self.built = built
        self.spurinv = spurinv
        self.cli = cli
        self.server = server
        self.gateway = server.gateway
        self.state = tmp_path / "state" / "state.json"
        self.state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
        self.token = hostile.token(tmp_path / "secrets" / "token")

    def prime(self, root: str) -> None:
        """One observe-mode reading of ``root``: the next run sees it a second time and confirms."""
        config = hostile.config(self.tmp / "observe.toml")
        result = self.cli("refresh", "--root", self.built(root), "--state", self.state, "--config", config, "--json")
        assert result.code == 0, result.err

    def run(
        self, root: str, *args: str, url: str | None = None, extra_env: dict[str, str] | None = None, **settings: Any
    ) -> ControllerRun:
        settings.setdefault("timeout", TIMEOUT)
        config = hostile.config(self.tmp / "controller.toml", url or self.server.url, token_file=self.token, **settings)
        before = len(self.server.seen)
        ran = self.spurinv(
            "refresh",
            "--root",
            self.built(root),
            "--state",
            self.state,
            "--config",
            config,
            "--json",
            *args,
            extra_env=extra_env,
        )
        return ControllerRun(ran, self.server.seen[before:])

    def status(self) -> dict[str, Any]:
        return json.loads(self.cli("status", "--state", self.state, "--json").out)


class ControllerRun:
    """One refresh against the fault server: exit code, output, wall time, the requests it sent."""

    def __init__(self, ran: Any, requests: list[Any]) -> None:
        self.code = ran.code
        self.out = ran.out
        self.err = ran.err
        self.seconds = ran.seconds
        self.requests = requests

    def document(self) -> dict[str, Any]:
        return json.loads(self.out)

    def posts(self) -> list[Any]:
        return [request for request in self.requests if request.method == "POST"]


@pytest.fixture
def rig(tmp_path, built, spurinv_here, cli) -> Iterator[Rig]:
    """Runs in this process: what a run does with each answer, not how a process ends."""
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        yield Rig(tmp_path, built, spurinv_here, cli, server)


def bounded(run: ControllerRun, timeout: float = TIMEOUT) -> bool:
    return run.seconds <= timeout * max(1, len(run.requests)) + MARGIN


def record(ledger: Any, fault: str, run: ControllerRun, lost: bool = False) -> None:
    ledger.record("controller", fault, f"exit {run.code}", lost=lost or not bounded(run))


GARBAGE = Reply(200, b"<html>502 Bad Gateway</html>")
DEEP = Reply(200, b"[" * 100000 + b"]" * 100000)


def node_with(**fields: Any) -> dict[str, Any]:
    body = capture("node-n1-idle")
    body["nodes"][0].update(fields)
    return body


def infinite_alloc() -> bytes:
    return json.dumps(capture("node-n1-idle")).replace('"alloc_cpus": 0', '"alloc_cpus": 1e999').encode()


# faults about time: the bound is checked on a real process, start-up included, as the timer sees it
AS_A_PROCESS = {
    "headers delayed 30 s",
    "body dripped a byte per 50 ms",
    "200 JSON nested 100000 deep",
    "huge body without Content-Length",
}

# (fault, behaviour of GET /slurm/v0.0.42/node/n1, expected exit status)
GET_FAULTS = [
    ("headers delayed 30 s", Reply(200, capture("node-n1-idle"), delay=30), 69),
    ("body dripped a byte per 50 ms", Reply(200, capture("node-n1-idle"), drip=0.05), 69),
    ("connection reset", Reset(), 69),
    ("500 without a body", Reply(500), 69),
    ("500 with a Slurm error body (2010 not admin)", Reply(500, ERRORS["not-admin"]), 77),
    ("500 with an unknown Slurm error", Reply(500, {"errors": [{"error_number": 9001, "description": "x"}]}), 76),
    ("503 without a body", Reply(503), 69),
    ("503 with a Slurm error body (error 0)", Reply(503, ERRORS["query-missing"]), 69),
    ("502 slurmctld down (real 24.11: error 1800)", Reply(502, capture("ctld-down-node-n1")), 69),
    ("500 with error 1800 (cannot contact slurmctld)", Reply(500, capture("ctld-down-node-n1")), 69),
    ("401 text/plain", Reply(401, NO_TOKEN_TEXT), 77),
    ("403", Reply(403, "Forbidden"), 77),
    ("511 bad token", Reply(511, ERRORS["bad-token"]), 77),
    ("200 garbage (HTML)", GARBAGE, 76),
    ("200 empty body", Reply(200, b""), 76),
    ("200 JSON of the wrong shape (list)", Reply(200, [1, 2, 3]), 76),
    ("200 JSON of the wrong shape (nodes is a string)", Reply(200, {"nodes": "n1"}), 76),
    ("200 JSON with state of the wrong type", Reply(200, node_with(state={"IDLE": True})), 76),
    ("200 JSON nested 100000 deep", DEEP, 76),
    ("200 JSON with alloc_cpus 1e999", Reply(200, infinite_alloc(), {"Content-Type": "application/json"}), 76),
    ("200 JSON with gres_used 'gpu:mi300x:²'", Reply(200, node_with(gres_used="gpu:mi300x:\u00b2")), 76),
    ("huge body with Content-Length", Reply(200, size=64 << 20), 76),
    ("huge body without Content-Length", Reply(200, size=64 << 20, length=False), 76),
    ("unknown node (24.11: 200, no nodes)", Reply(200, {"nodes": [], **ERRORS["query-missing"]}), 68),
    ("unknown node (22.05: 500, 2018)", Reply(500, ERRORS["unknown-node"]), 68),
]


@pytest.mark.parametrize(("fault", "behaviour", "expected"), GET_FAULTS, ids=[f[0] for f in GET_FAULTS])
def test_a_faulty_read_ends_in_bounded_time_with_its_exit_status(rig, spurinv, ledger, fault, behaviour, expected):
    if fault in AS_A_PROCESS:
        rig.spurinv = spurinv
    rig.prime("mi300x-spx")
    rig.server.script("GET", NODE_PATH, behaviour)

    run = rig.run("mi300x-spx")

    record(ledger, f"GET: {fault}", run)
    assert run.code == expected, run.err
    assert bounded(run), f"{run.seconds:.1f} s for {len(run.requests)} requests"
    assert [r.method for r in run.requests] == ["GET"]
    document = run.document()
    assert document["steps"][-1]["error"], document["steps"]
    assert len(run.err.strip().splitlines()) == 1, run.err  # one clear line on stderr
    status = rig.status()
    assert status["baseline"] is None
    assert status["backoff"]["failures"] == 1


@pytest.mark.parametrize("status_code", [301, 302, 307, 308])
def test_a_redirect_is_never_followed_and_the_other_host_sees_nothing(rig, ledger, status_code):
    rig.prime("mi300x-spx")
    with FaultServer(gateway=rig.gateway) as other:
        rig.server.script("GET", NODE_PATH, Reply(status_code, "", {"Location": other.url + NODE_PATH}))

        run = rig.run("mi300x-spx")

        record(ledger, f"GET: redirect {status_code} to another host", run, lost=bool(other.seen))
        assert other.seen == []
    assert run.code == 76, run.err
    assert "redirect" in run.err
    assert "refused" in run.err


@pytest.mark.parametrize(
    ("fault", "behaviour", "expected"),
    [
        ("POST headers delayed 30 s", Reply(200, {"errors": []}, delay=30), 69),
        ("POST connection reset", Reset(), 69),
        ("POST 503", Reply(503), 69),
        ("POST 502 slurmctld down (real 24.11: error 1800)", Reply(502, capture("ctld-down-post-node-n1-drain")), 69),
        ("POST 500 garbage", Reply(500, b"\x00\xff"), 69),
        ("POST 401", Reply(401, NO_TOKEN_TEXT), 77),
        ("POST 404 (read-only gateway)", Reply(404, "Not Found"), 69),
    ],
)
def test_a_faulty_write_never_moves_the_baseline(rig, ledger, fault, behaviour, expected):
    """An idle node whose GPUs changed (SPX → CPX): the re-registration POST fails."""
    adopt_spx(rig)
    baseline = rig.status()["baseline"]["fingerprint"]
    rig.prime("mi300x-cpx")
    rig.server.script("POST", NODE_PATH, behaviour)

    run = rig.run("mi300x-cpx")

    moved = rig.status()["baseline"]["fingerprint"] != baseline
    record(ledger, fault, run, lost=moved)
    assert run.code == expected, run.err
    assert not moved
    assert bounded(run)
    assert len(run.posts()) == 1


def adopt_spx(rig: Rig) -> None:
    """Baseline SPX, adopted from a controller that already lists gpu:mi300x:8 (no POST)."""
    rig.prime("mi300x-spx")
    run = rig.run("mi300x-spx")
    assert run.code == 0, run.err
    assert run.posts() == []
    assert rig.status()["baseline"]["source"] == "adopted"


def test_gres_refused_2072_drains_exits_76_and_keeps_the_baseline(rig, ledger):
    adopt_spx(rig)
    baseline = rig.status()["baseline"]["fingerprint"]
    rig.prime("mi300x-cpx")

    run = rig.run("mi300x-cpx")  # POST gres gpu:mi300x:64 → 500/2072 (the captured body), then drain

    status = rig.status()
    record(ledger, "POST gres refused (2072)", run, lost=status["baseline"]["fingerprint"] != baseline)
    assert run.code == 76, run.err
    assert status["baseline"]["fingerprint"] == baseline
    assert "Invalid generic resource (gres) specification" in status["refusal"]["error"]
    assert next(post.json() for post in run.posts())["gres"] == "gpu:mi300x:64"
    assert "DRAIN" in rig.gateway.nodes["n1"]["state"]
    assert rig.gateway.nodes["n1"]["reason"] == status["drain"]["reason"]
    assert status["drain"]["cause"] == "refused"


def refused_and_drained(rig: Rig) -> dict[str, Any]:
    """Baseline SPX; CPX refused (2072) and drained by us: the state an operator's fix meets."""
    adopt_spx(rig)
    rig.prime("mi300x-cpx")
    assert rig.run("mi300x-cpx").code == 76
    status = rig.status()
    assert (status["backoff"]["kind"], status["drain"]["cause"]) == ("refused", "refused")
    return status


def test_the_operators_fix_is_seen_at_the_next_run_though_the_refusal_backs_off(rig, ledger):
    """slurm.conf says gpu:mi300x:64 now. The run within the backoff reads the node
    once (single-node GET), records our registration in extra alone, lifts our drain, and the
    reading is the baseline: no GRES update is sent again."""
    refused = refused_and_drained(rig)
    node = rig.gateway.nodes["n1"]
    node.update(gres="gpu:mi300x:64", extra='{"rack": "r2"}')  # the operator's fix, and an admin's extra

    run = rig.run("mi300x-cpx")

    status = rig.status()
    record(ledger, "refused, backing off; the operator fixed slurm.conf", run, lost=status["drain"] is not None)
    assert run.code == 0, run.err
    assert [(r.method, r.path) for r in run.requests] == [("GET", NODE_PATH), ("POST", NODE_PATH), ("POST", NODE_PATH)]
    record_post, resume = (post.json() for post in run.posts())
    assert set(record_post) == {"extra"}  # never the refused GRES again
    assert resume["state"] == ["UNDRAIN"]  # DRAIN only, never DOWN
    extra = json.loads(node["extra"])
    assert (extra["rack"], extra["spurinv"]["fingerprint"]) == ("r2", run.document()["fingerprint"])
    assert extra["spurinv"]["gres"] == "gpu:mi300x:64"
    assert "DRAIN" not in node["state"]
    assert (status["baseline"]["fingerprint"], status["baseline"]["source"]) == (run.document()["fingerprint"], "registered")
    assert (status["drain"], status["refusal"], status["backoff"]) == (None, None, None)
    assert refused["baseline"]["fingerprint"] != status["baseline"]["fingerprint"]
    reasons = [step["reason"] for step in run.document()["steps"]]
    assert any("the controller now lists gpu:mi300x:64; our drain lifted" in reason for reason in reasons), reasons


def test_without_the_fix_the_run_in_the_backoff_reads_once_and_sends_nothing(rig, ledger):
    """The control: the controller still lists gpu:mi300x:8. One single-node GET, no write, 76."""
    refused_and_drained(rig)

    run = rig.run("mi300x-cpx")

    record(ledger, "refused, backing off, nothing fixed", run, lost=bool(run.posts()))
    assert run.code == 76, run.err
    assert [(r.method, r.path) for r in run.requests] == [("GET", NODE_PATH)]
    assert "retry at" in run.document()["steps"][-1]["reason"]
    assert rig.status()["backoff"]["failures"] == 1  # a look is no retry: the backoff does not grow


def test_a_write_answered_200_but_not_applied_keeps_the_baseline(rig, ledger):
    """Slurm answers 200 to a GPU type change it does not apply (docs/slurm-rest.md §2): only the read-back tells."""
    rig.gateway.nodes["n1"]["gres"] = "gpu:mi250x:8"
    rig.prime("mi300x-spx")

    run = rig.run("mi300x-spx")

    status = rig.status()
    record(ledger, "POST 200 but silently not applied", run, lost=status["baseline"] is not None)
    assert run.code == 76, run.err
    assert status["baseline"] is None
    assert status["refusal"]
    assert rig.gateway.nodes["n1"]["gres"] == "gpu:mi250x:8"


def test_a_write_whose_read_back_fails_keeps_the_baseline(rig, ledger):
    adopt_spx(rig)
    baseline = rig.status()["baseline"]["fingerprint"]
    rig.gateway.gres_policy = "accept"
    rig.prime("mi300x-cpx")
    before = rig.gateway.answer("GET", NODE_PATH, {"x-slurm-user-token": hostile.TOKEN}, b"")
    rig.server.script("GET", NODE_PATH, before, Reply(503))  # the read-back after the POST fails

    run = rig.run("mi300x-cpx")

    moved = rig.status()["baseline"]["fingerprint"] != baseline
    record(ledger, "POST ok, read-back 503 (unverified)", run, lost=moved)
    assert run.code == 69, run.err
    assert not moved
    assert [r.method for r in run.requests] == ["GET", "POST", "GET"]


def busy_cpx_drained_by_us(rig: Rig) -> str:
    """Baseline SPX; CPX seen twice on a busy node: spurinv drains it (one POST) and waits."""
    adopt_spx(rig)
    node = rig.gateway.nodes["n1"]
    node.update(state=["MIXED"], alloc_cpus=2, gres_used="gpu:mi300x:2(IDX:0-1)")
    rig.prime("mi300x-cpx")
    run = rig.run("mi300x-cpx")
    assert run.code == 0, run.err
    assert [post.json()["state"] for post in run.posts()] == [["DRAIN"]]
    assert node["state"] == ["MIXED", "DRAIN"]
    assert node["reason"].startswith("spurinv:")
    return node["reason"]


def test_never_drains_twice(rig, ledger):
    busy_cpx_drained_by_us(rig)

    run = rig.run("mi300x-cpx")

    record(ledger, "node already drained by us", run, lost=bool(run.posts()))
    assert run.code == 0, run.err
    assert run.posts() == []
    assert "waiting for jobs" in run.document()["steps"][-1]["reason"]


def test_never_resumes_a_drain_it_does_not_own(rig, ledger):
    busy_cpx_drained_by_us(rig)
    node = rig.gateway.nodes["n1"]
    node.update(state=["IDLE", "DRAIN"], alloc_cpus=0, gres_used="gpu:mi300x:0(IDX:N/A)", reason="admin: fan 3 failed")

    run = rig.run("mi300x-spx")  # back to the baseline: only our own drain would be lifted

    resumed = any("RESUME" in str(post.json()) or "UNDRAIN" in str(post.json()) for post in run.posts())
    record(ledger, "foreign drain reason on the node", run, lost=resumed)
    assert run.code == 0, run.err
    assert not resumed
    # only our record's stale drain entry is retired (extra alone); no state, no reason
    assert [set(post.json()) for post in run.posts()] == [{"extra"}]
    assert node["state"] == ["IDLE", "DRAIN"]
    assert node["reason"] == "admin: fan 3 failed"
    assert rig.status()["drain"] is None  # forgotten: never ours again


def test_resumes_its_own_drain(rig, ledger):
    """The control for the test above: with the reason still ours, the same run resumes."""
    reason = busy_cpx_drained_by_us(rig)
    rig.gateway.nodes["n1"].update(state=["IDLE", "DRAIN"], alloc_cpus=0, gres_used="gpu:mi300x:0(IDX:N/A)")

    run = rig.run("mi300x-spx")

    record(ledger, "our own drain, inventory back to the baseline", run)
    assert run.code == 0, run.err
    assert [post.json()["state"] for post in run.posts()] == [["UNDRAIN"]]
    assert rig.gateway.nodes["n1"]["state"] == ["IDLE"]
    assert reason


def test_auth_refused_backs_off_and_the_next_run_sends_nothing(rig, ledger):
    rig.prime("mi300x-spx")
    rig.server.script("GET", NODE_PATH, Reply(401, NO_TOKEN_TEXT))

    first = rig.run("mi300x-spx", backoff_initial=60, backoff_max=3600)
    second = rig.run("mi300x-spx", backoff_initial=60, backoff_max=3600)

    record(ledger, "401, then a run within the backoff", second, lost=bool(second.requests))
    assert first.code == 77, first.err
    assert second.code == 75, second.err
    assert len(first.requests) == 1
    assert second.requests == []
    backoff = rig.status()["backoff"]
    assert backoff["kind"] == "auth"
    assert backoff["failures"] == 1
    assert "backing off until" in second.document()["steps"][-1]["reason"]


def test_slurmctld_down_is_unreachable_and_the_next_run_sends_nothing(rig, ledger):
    """slurmrestd answers 502 with error 1800 when slurmctld is down (the real 24.11 answer):
    once read as a refusal (76), which backs off only its own retry, so every tick asked again."""
    rig.prime("mi300x-spx")
    rig.server.script("GET", NODE_PATH, Reply(502, capture("ctld-down-node-n1")))

    first = rig.run("mi300x-spx", backoff_initial=60, backoff_max=3600)
    second = rig.run("mi300x-spx", backoff_initial=60, backoff_max=3600)

    record(ledger, "502/1800 slurmctld down, then a run within the backoff", second, lost=bool(second.requests))
    assert first.code == 69, first.err
    assert "Unable to contact slurm controller" in first.err
    assert second.code == 75, second.err
    assert second.requests == []
    assert rig.status()["backoff"]["kind"] == "unreachable"


def test_backoff_doubles_up_to_the_maximum_and_shows_in_status(rig, ledger):
    rig.prime("mi300x-spx")
    rig.server.script("GET", NODE_PATH, Reply(503))
    delays = []
    for _ in range(5):
        started = int(time.time())
        run = rig.run("mi300x-spx", backoff_initial=60, backoff_max=240)
        ended = int(time.time()) + 1
        assert run.code == 69, run.err
        status = rig.status()
        backoff = status["backoff"]
        next_attempt = calendar.timegm(time.strptime(backoff["next_attempt"], "%Y-%m-%dT%H:%M:%SZ"))
        delays.append((backoff["failures"], next_attempt - started, next_attempt - ended))
        assert any("controller backoff" in line for line in status["attention"])
        hostile.rewind_backoff(rig.state)  # time passes: the next run may try again

    for failures, (number, longest, shortest) in enumerate(delays, start=1):
        expected = min(240, 60 * 2 ** (failures - 1))
        ledger.record("controller", "503 on every run: backoff", f"backoff {expected} s",
                      lost=not shortest <= expected <= longest)  # fmt: skip
        assert number == failures
        assert shortest <= expected <= longest, delays


def test_the_token_is_never_sent_in_plain_http_to_a_non_loopback_host(rig, ledger, spurinv):
    """192.0.2.1 is TEST-NET-1: the refusal comes before any connection (exit 78, not 69)."""
    rig.prime("mi300x-spx")
    for url in ("http://192.0.2.1:1", "http://127.attacker.example:1", "http://[::ffff:192.0.2.1]:1"):
        run = rig.run("mi300x-spx", url=url)
        record(ledger, f"plain-HTTP token to {url}", run, lost=run.code != 78)
        assert run.code == 78, (url, run.err)
        assert "plain HTTP" in run.err
        assert hostile.TOKEN not in run.out + run.err
        assert run.seconds < MARGIN


def test_allow_plain_http_token_does_try_to_connect(rig, ledger):
    """The control: with the explicit opt-in the same URL is contacted (and fails: exit 69)."""
    rig.prime("mi300x-spx")

    run = rig.run("mi300x-spx", url="http://192.0.2.1:1", extra="allow_plain_http_token = true\n")

    record(ledger, "plain-HTTP token allowed explicitly", run)
    assert run.code == 69, run.err


def test_no_connection_is_attempted_before_the_plain_http_refusal(rig, tmp_path):
    """strace shows no connect() to 192.0.2.1 at all (the refusal is not a failed connection)."""
    import shutil
    import subprocess
    import sys

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed; the exit status 78 above already shows the order")
    rig.prime("mi300x-spx")
    config = hostile.config(tmp_path / "plain.toml", "http://192.0.2.1:1", token_file=rig.token)
    trace = tmp_path / "trace"
    result = subprocess.run(
        ["strace", "-f", "-e", "trace=connect", "-o", str(trace), sys.executable, "-m", "spurinv", "refresh",
         "--root", str(rig.built("mi300x-spx")), "--state", str(rig.state), "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if "Operation not permitted" in result.stderr and "ptrace" in result.stderr:
        pytest.skip(f"strace cannot trace here: {result.stderr.strip()[:200]}")
    assert result.returncode == 78, result.stderr
    assert "192.0.2.1" not in trace.read_text()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: cannot make a self-signed certificate for the TLS test")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = str(directory / "cert.pem"), str(directory / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
        capture_output=True, check=True,
    )  # fmt: skip
    return cert, key


def test_tls_is_verified_an_unknown_certificate_never_sees_the_token(rig, ledger, certificate):
    rig.prime("mi300x-spx")
    with FaultServer(gateway=rig.gateway, tls=certificate) as https:
        refused = rig.run("mi300x-spx", url=https.url)
        record(ledger, "TLS with an unknown (self-signed) certificate", refused, lost=bool(https.seen))
        assert refused.code == 69, refused.err
        assert "TLS" in refused.err
        assert https.seen == []

        hostile.rewind_backoff(rig.state)  # the refused run backed off; let that time pass
        trusted = rig.run("mi300x-spx", url=https.url, extra=f'ca_file = "{certificate[0]}"\n')
        record(ledger, "TLS with the certificate in ca_file", trusted)
        assert trusted.code == 0, trusted.err
        assert [r.headers.get("x-slurm-user-token") for r in https.seen] == [hostile.TOKEN]


def test_api_detection_survives_a_garbage_openapi_document(rig, ledger):
    """``api = "auto"``: a garbage ``/openapi/v3`` falls back to probing, newest version first."""
    rig.prime("mi300x-spx")
    rig.server.script("GET", "/openapi/v3", GARBAGE)

    run = rig.run("mi300x-spx", api="auto")

    record(ledger, "api auto: /openapi/v3 is garbage", run)
    assert run.code == 0, run.err
    assert [r.path for r in run.requests] == [
        "/openapi/v3",
        "/slurm/v0.0.46/node/n1",
        "/slurm/v0.0.45/node/n1",
        "/slurm/v0.0.44/node/n1",
        "/slurm/v0.0.43/node/n1",
        "/slurm/v0.0.42/node/n1",
    ]
    assert rig.status()["api"]["version"] == "slurm/v0.0.42"


UNSERVED = (CAPTURES / "node-n1-unserved-version-v0.0.39.txt").read_text()  # the real 24.11 404 text


def test_a_cached_api_version_the_upgraded_server_dropped_is_detected_again(rig, ledger):
    """``api = "auto"`` cached v0.0.42; an upgraded slurmrestd no longer serves it (26.11 drops
    it) and answers its real 404. Read as "unknown node" (68) on every run, the change was never
    registered: one 404 from a cached version re-detects once before concluding anything."""
    rig.prime("mi300x-spx")
    assert rig.run("mi300x-spx", api="auto").code == 0  # adopted; v0.0.42 cached
    assert rig.status()["api"]["version"] == "slurm/v0.0.42"
    rig.gateway.version = "v0.0.44"
    rig.gateway.gres_policy = "accept"
    rig.server.script("GET", NODE_PATH, Reply(404, UNSERVED, {"Content-Type": "text/plain"}))
    rig.prime("mi300x-cpx")

    run = rig.run("mi300x-cpx", api="auto")

    record(ledger, "api auto: the cached version is gone after an upgrade", run)
    assert run.code == 0, run.err
    assert [(r.method, r.path) for r in run.requests][:3] == [
        ("GET", NODE_PATH), ("GET", "/openapi/v3"), ("GET", "/slurm/v0.0.44/node/n1"),
    ]  # fmt: skip
    assert rig.gateway.nodes["n1"]["gres"] == "gpu:mi300x:64"
    assert rig.status()["api"]["version"] == "slurm/v0.0.44"


def test_a_404_from_a_freshly_detected_version_is_not_detected_again(rig, ledger):
    """Re-detection is once: a server whose spec lists a version it then answers 404 for ends the
    run (68) after one more GET, never a probing loop."""
    rig.prime("mi300x-spx")
    assert rig.run("mi300x-spx", api="auto").code == 0
    rig.server.script("GET", NODE_PATH, Reply(404, UNSERVED, {"Content-Type": "text/plain"}))
    rig.prime("mi300x-cpx")

    run = rig.run("mi300x-cpx", api="auto")

    record(ledger, "api auto: the listed version answers 404", run)
    assert run.code == 68, run.err
    assert [r.path for r in run.requests] == [NODE_PATH, "/openapi/v3", NODE_PATH]


def test_api_detection_against_a_server_that_never_answers_is_bounded(rig, ledger):
    rig.prime("mi300x-spx")
    rig.server.script("GET", "/openapi/v3", Reply(200, {}, delay=30))

    run = rig.run("mi300x-spx", api="auto")

    record(ledger, "api auto: /openapi/v3 never answers", run)
    assert run.code == 69, run.err
    assert bounded(run)
    assert len(run.requests) == 1  # one timeout ends the run: no probing loop on a dead server


def test_proxy_variables_in_the_environment_are_ignored(rig, ledger):
    """``HTTP_PROXY`` would route the request, token header included, through another host."""
    rig.prime("mi300x-spx")
    with FaultServer() as proxy:
        names = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
        run = rig.run("mi300x-spx", extra_env={**dict.fromkeys(names, proxy.url), "NO_PROXY": "", "no_proxy": ""})

        record(ledger, "HTTP_PROXY and friends set to another host", run, lost=bool(proxy.seen))
        assert proxy.seen == []
    assert run.code == 0, run.err
    assert len(run.requests) == 1


# --- numbers past int()'s limit, a failed read, a JSON 404 --------------------


def test_a_5000_digit_number_in_the_answer_is_a_field_error_not_a_crash(rig, ledger):
    """``int()`` refuses more than 4,300 digits (ValueError): in ``/openapi/v3``'s paths (the
    version) it crashed the run (70); in a node, it is a malformed answer naming the field."""
    rig.prime("mi300x-spx")
    huge = "1" + "0" * 5000
    spec = {"openapi": "3.0.2", "paths": {f"/slurm/v0.0.{huge}/node/{{node_name}}": {"get": {}},
                                          "/slurm/v0.0.42/node/{node_name}": {"get": {}}}}  # fmt: skip
    rig.server.script("GET", "/openapi/v3", Reply(200, spec))
    detected = rig.run("mi300x-spx", api="auto")
    body = json.dumps(capture("node-n1-idle")).replace('"alloc_cpus":0', f'"alloc_cpus":{huge}')
    body = body.replace('"alloc_cpus": 0', f'"alloc_cpus": {huge}')
    assert huge in body
    rig.server.script("GET", NODE_PATH, Reply(200, body.encode(), {"Content-Type": "application/json"}))
    rig.prime("mi300x-cpx")  # a change: the run must read the node (no replayed no-change tick)
    counted = rig.run("mi300x-cpx")

    record(ledger, "a 5000-digit number in the answer", counted)
    assert detected.code == 0, detected.err
    assert counted.code == 76, counted.err
    assert "alloc_cpus" in counted.err
    assert "4300 digits" in counted.err
    assert len(counted.err.strip().splitlines()) == 1, counted.err


def test_a_read_answered_500_with_a_slurm_error_is_unreachable_not_refused(rig, ledger):
    """A GET that fails is not a refusal: 76 left no backoff and the next run asked again."""
    rig.prime("mi300x-spx")
    failed = {"errors": [{"error_number": 2000 + 1, "error": "Unspecified error", "description": "x"}]}
    rig.server.script("GET", NODE_PATH, Reply(500, failed))

    run = rig.run("mi300x-spx")

    record(ledger, "GET answered 500 with a Slurm error", run)
    assert run.code == 69, run.err
    assert rig.status()["backoff"]["failures"] == 1, rig.status()["backoff"]


def test_a_cached_api_version_answered_with_a_json_404_is_detected_again(rig, ledger):
    """Only slurmrestd's plain-text 404 re-detected; a JSON error body (a proxy's, a later
    slurmrestd's) made every run "unknown node" (68) and the change was never registered."""
    rig.prime("mi300x-spx")
    assert rig.run("mi300x-spx", api="auto").code == 0  # adopted; v0.0.42 cached
    rig.gateway.version = "v0.0.44"
    rig.gateway.gres_policy = "accept"
    gone = {"errors": [{"error_number": 9000, "error": "Unable find requested URL", "description": "GET " + NODE_PATH}]}
    rig.server.script("GET", NODE_PATH, Reply(404, gone))
    rig.prime("mi300x-cpx")

    run = rig.run("mi300x-cpx", api="auto")

    record(ledger, "api auto: the cached version answers a JSON 404", run)
    assert run.code == 0, run.err
    assert [(r.method, r.path) for r in run.requests][:3] == [
        ("GET", NODE_PATH), ("GET", "/openapi/v3"), ("GET", "/slurm/v0.0.44/node/n1"),
    ]  # fmt: skip
    assert rig.status()["api"]["version"] == "slurm/v0.0.44"
