"""A small fault-injecting HTTP server on 127.0.0.1, and a minimal Slurm-like gateway.

Controller tests point ``[controller] url`` at it and script, per method and path, what the
"controller" does::

    with FaultServer(gateway=Gateway()) as server:          # GET/POST /slurm/v0.0.42/node/n1 work
        server.script("POST", server.node_path("n1"), Reply(500, ERRORS["gres"]))
        ...run spurinv with url = server.url...
        assert [r.method for r in server.seen] == ["GET", "POST", "GET"]

API (everything else is private):

* ``FaultServer(gateway=None, tls=None)`` — start with ``with`` (or ``start()``/``stop()``); ``url``;
  ``script(method, path, *behaviours)`` — each matching request takes the next behaviour, the
  last one repeats; ``unscript()``; ``seen`` — every request received (``Seen``: method, path, headers with
  lower-case names, body); ``node_path(name)``. ``tls=(certfile, keyfile)`` serves HTTPS.
* Behaviours: ``Reply(status, body, headers, delay=, drip=, size=, length=)`` — ``delay`` seconds
  before the status line, ``drip`` seconds between single body bytes, ``size`` bytes of filler
  instead of ``body`` (a huge body, generated lazily), ``length=False`` for no Content-Length (the
  body ends when the connection closes); ``body`` may be bytes, str, or anything JSON-serialisable.
  ``Reset()`` — close the connection with a TCP RST before answering. ``Late(delay)`` — let the
  gateway *apply* the request at once, then answer only after ``delay`` seconds (a controller
  that did the write but whose answer arrives after the client gave up).
* ``Gateway(version="v0.0.42", token=None, gres_policy="slurm")`` — serves ``GET /openapi/v3``,
  ``GET``/``POST /slurm/<version>/node/<name>`` and ``GET /slurm/<version>/nodes`` for
  ``gateway.nodes`` (``add_node(...)``; edit a node's dict to play the operator), built
  from the real slurmrestd 24.11 captures in ``tests/fixtures/slurm/responses/24.11/v0.0.42``
  (idle node, error bodies). POSTs follow docs/slurm-rest.md §2: DRAIN adds the flag and sets the
  reason, RESUME of a node that is not drained is 500/2028, updates are not atomic (state, reason,
  comment and extra apply before a GRES check fails), and with ``gres_policy="slurm"`` a GPU count
  change is 500/2072 and a type change is answered 200 but silently not applied. With ``token``,
  a request without ``X-SLURM-USER-TOKEN`` gets the captured 401 text, a wrong one the 511 body.

Scripted behaviours win over the gateway; a request nothing answers gets 404. Delays and drips
wait on an event that ``stop()`` sets, so stopping never waits for a slow behaviour.
Stdlib only; the benchmark helpers reuse it.
"""

from __future__ import annotations

import copy
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "slurm" / "responses" / "24.11" / "v0.0.42"


def capture(name: str) -> Any:
    """A captured slurmrestd 24.11.5 JSON body (``<name>.json``), parsed."""
    return json.loads((CAPTURES / f"{name}.json").read_text())


def _errors(name: str) -> dict[str, Any]:
    body = capture(name)
    return {"errors": body["errors"], "warnings": body.get("warnings", [])}


#: Real slurmrestd error bodies, by meaning (docs/slurm-rest.md §4).
ERRORS: dict[str, dict[str, Any]] = {
    "gres": _errors("post-node-n2-idle-gpu-decrease"),  # 500, 2072 Invalid generic resource
    "state": _errors("post-node-n1-resume-not-drained"),  # 500, 2028 Invalid node state specified
    "unknown-node": _errors("post-node-missing"),  # 500, 2018 Invalid node name specified
    "not-admin": _errors("jwt-nobody-post-node-n1-drain-denied"),  # 500, 2010 Invalid user id
    "bad-token": _errors("jwt-bad-token"),  # 511, 1007 Protocol authentication error
    "query-missing": _errors("node-missing"),  # 200, error_number 0 "Failure to query node"
}
NO_TOKEN_TEXT = (CAPTURES / "jwt-no-token.txt").read_text()  # 401 text/plain "Authentication failure"


@dataclass
class Reply:
    """Answer with ``status`` and ``body`` (see the module docstring for the fault knobs)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float = 0.0
    size: int | None = None
    length: bool = True


@dataclass
class Reset:
    """Abort the connection with a TCP RST instead of answering."""


@dataclass
class Late:
    """Apply the request through the gateway now; send its answer ``delay`` seconds later."""

    delay: float


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def _encode(body: Any) -> tuple[bytes, str]:
    if body is None:
        return b"", "application/json"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain"
    return json.dumps(body).encode(), "application/json"


def _gpu_counts(gres: str) -> tuple[int, set[str]]:
    """Total GPU count and GPU types of a GRES string (``gpu:mi300x:8(S:0-1),fpga:4``)."""
    total, types = 0, set()
    for item in gres.split(","):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] != "gpu":
            continue
        count = int(parts[-1]) if len(parts) > 1 and parts[-1].isdecimal() else 1
        total += count
        if len(parts) == 3:
            types.add(parts[1])
    return total, types


class Gateway:
    """A minimal Slurm-like node API (see the module docstring)."""

    def __init__(
        self, version: str = "v0.0.42", token: str | None = None, gres_policy: str = "slurm", clock: Any = time.time
    ) -> None:
        self.clock = clock  # epoch seconds for reason_changed_at (tests with a fake clock pass theirs)
        self.version = version
        self.token = token
        self.gres_policy = gres_policy
        self.nodes: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def add_node(
        self,
        name: str = "n1",
        *,
        gres: str = "gpu:mi300x:8",
        state: tuple[str, ...] = ("IDLE",),
        reason: str = "",
        alloc_cpus: int = 0,
        gres_used: str | None = None,
        extra: str = "",
    ) -> dict[str, Any]:
        """Add a node made from the captured idle ``n1`` (24.11.5), with these fields changed."""
        node = copy.deepcopy(capture("node-n1-idle")["nodes"][0])
        node.update(
            name=name,
            hostname=name,
            gres=gres,
            state=list(state),
            reason=reason,
            alloc_cpus=alloc_cpus,
            gres_used=gres_used if gres_used is not None else f"{gres.split('(', maxsplit=1)[0].rsplit(':', 1)[0]}:0(IDX:N/A)",
            extra=extra,
        )
        self.nodes[name] = node
        return node

    def node_path(self, name: str) -> str:
        return f"/slurm/{self.version}/node/{name}"

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
        if self.token is not None:
            given = headers.get("x-slurm-user-token")
            if not given:
                return Reply(401, NO_TOKEN_TEXT)
            if given != self.token:
                return Reply(511, ERRORS["bad-token"])
        if path == "/openapi/v3" and method == "GET":
            spec_path = "/slurm/" + self.version + "/node/{node_name}"
            return Reply(200, {"openapi": "3.0.2", "paths": {spec_path: {"get": {}, "post": {}, "delete": {}}}})
        if method == "GET" and path.rstrip("/") == f"/slurm/{self.version}/nodes":
            with self.lock:
                document = capture("node-n1-idle")
                document["nodes"] = copy.deepcopy(list(self.nodes.values()))
            return Reply(200, document)
        prefix = f"/slurm/{self.version}/node/"
        if not path.startswith(prefix):
            return Reply(404, "Not Found")
        name = path[len(prefix) :]
        with self.lock:
            if method == "GET":
                return self._get(name)
            if method == "POST":
                return self._post(name, body)
        return Reply(405, "Method Not Allowed")

    def _get(self, name: str) -> Reply:
        if name not in self.nodes:
            return Reply(200, {"nodes": [], **ERRORS["query-missing"]})
        document = capture("node-n1-idle")
        document["nodes"] = [copy.deepcopy(self.nodes[name])]
        return Reply(200, document)

    def _post(self, name: str, raw: bytes) -> Reply:
        try:
            update = json.loads(raw)
        except ValueError:
            return Reply(400, "Unable to parse query.")
        if name not in self.nodes:
            return Reply(500, ERRORS["unknown-node"])
        node = self.nodes[name]
        states = update.get("state", [])
        words = [states] if isinstance(states, str) else states
        # update_node() skips an update whose state the node already has (DRAIN on a drained node,
        # or none) and whose reason is the same: the reason time is not stamped again
        # (src/slurmctld/node_mgr.c, _equivalent_node_state(); docs/security.md)
        same = update.get("reason") == node.get("reason") and (not words or (words == ["DRAIN"] and "DRAIN" in node["state"]))
        if update.get("reason") and not same:  # set even when the state change is then rejected (docs/slurm-rest.md §2)
            node["reason"] = update["reason"]
            # slurmctld's update_node() stamps reason_time whenever a non-empty reason is set
            node["reason_changed_at"] = {"set": True, "infinite": False, "number": int(self.clock())}
        for key in ("comment", "extra"):
            if key in update:
                node[key] = update[key]
        for word in words:
            if word == "DRAIN" and "DRAIN" not in node["state"]:
                node["state"].append("DRAIN")
            elif word == "RESUME":
                if node["state"][0] != "DOWN" and not {"DRAIN", "FAIL", "REBOOT_REQUESTED"} & set(node["state"]):
                    return Reply(500, ERRORS["state"])
                # update_node(): RESUME clears DRAIN, FAIL and REBOOT_*, and a DOWN node comes back
                for flag in ("DRAIN", "FAIL", "REBOOT_REQUESTED", "REBOOT_ISSUED"):
                    if flag in node["state"]:
                        node["state"].remove(flag)
                if node["state"][0] == "DOWN":
                    node["state"][0] = "IDLE"
            elif word == "UNDRAIN":
                if "INVALID_REG" in node["state"]:
                    return Reply(500, ERRORS["state"])
                if "DRAIN" in node["state"]:  # UNDRAIN clears the DRAIN flag and nothing else
                    node["state"].remove("DRAIN")
        if "gres" in update:
            new, old = _gpu_counts(update["gres"]), _gpu_counts(node["gres"])
            if self.gres_policy == "slurm" and new[0] not in (old[0], 0):
                return Reply(500, ERRORS["gres"])  # File-backed GPU count change (docs/slurm-rest.md §2)
            if self.gres_policy != "slurm" or new[1] == old[1] or new[0] == 0:
                node["gres"] = update["gres"]  # a type change alone is "200 but not applied"
        return Reply(200, {"errors": [], "warnings": []})


class FaultServer:
    """A threaded HTTP(S) server on 127.0.0.1 that does what it is scripted to do."""

    def __init__(self, gateway: Gateway | None = None, tls: tuple[str, str] | None = None) -> None:
        self.gateway = gateway
        self.seen: list[Seen] = []
        self._scripts: dict[tuple[str, str], list[Reply | Reset | Late]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def node_path(self, name: str) -> str:
        return self.gateway.node_path(name) if self.gateway else f"/slurm/v0.0.42/node/{name}"

    def script(self, method: str, path: str, *behaviours: Reply | Reset | Late) -> None:
        """Answer ``method path`` with ``behaviours`` in turn, repeating the last."""
        with self._lock:
            self._scripts[(method, path)] = list(behaviours)

    def unscript(self) -> None:
        """Forget every script: the gateway answers everything again."""
        with self._lock:
            self._scripts.clear()

    def requests(self, method: str | None = None) -> list[Seen]:
        """The requests seen so far (optionally only one method)."""
        with self._lock:
            return [seen for seen in self.seen if method is None or seen.method == method]

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- used by the handler ---------------------------------------------------------------
    def _behaviour(self, seen: Seen) -> Reply | Reset:
        with self._lock:
            self.seen.append(seen)
            queue = self._scripts.get((seen.method, seen.path))
            behaviour = (queue.pop(0) if len(queue) > 1 else queue[0]) if queue else None
        if isinstance(behaviour, Late) and self.gateway is not None:
            applied = self.gateway.answer(seen.method, seen.path, seen.headers, seen.body)
            return Reply(applied.status, applied.body, applied.headers, delay=behaviour.delay)
        if isinstance(behaviour, (Reply, Reset)):
            return behaviour
        if self.gateway is not None:
            return self.gateway.answer(seen.method, seen.path, seen.headers, seen.body)
        return Reply(404, "Not Found")


def _filler(size: int) -> Iterator[bytes]:
    chunk = b'{"x":"' + b"a" * 65530 + b'"}'
    while size > 0:
        yield chunk[:size]
        size -= len(chunk)


def _handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {name.lower(): value for name, value in self.headers.items()}
            seen = Seen(self.command, urlsplit(self.path).path, headers, body)
            behaviour = server._behaviour(seen)
            try:
                if isinstance(behaviour, Reset):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                self._reply(behaviour)
            except OSError:  # the client gave up (timeout, body limit): that is the point
                self.close_connection = True

        def _reply(self, reply: Reply) -> None:
            if reply.delay and server._stopping.wait(reply.delay):
                return
            data, content_type = _encode(reply.body)
            size = reply.size if reply.size is not None else len(data)
            self.send_response(reply.status)
            headers = {"Content-Type": content_type, "Connection": "close", **reply.headers}
            if reply.length:
                headers.setdefault("Content-Length", str(size))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True
            chunks = _filler(size) if reply.size is not None else iter([data])
            for chunk in chunks:
                if reply.drip:
                    for index in range(len(chunk)):
                        if server._stopping.wait(reply.drip):
                            return
                        self.wfile.write(chunk[index : index + 1])
                        self.wfile.flush()
                else:
                    self.wfile.write(chunk)
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = _serve

    return Handler
