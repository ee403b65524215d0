"""The controller client: the only module that imports ``requests``.

Speaks the Slurm-compatible REST API (slurmrestd's ``/slurm/v0.0.4x/…``; spur's gateway mirrors
it read-only). Every call is bounded: connect and read timeouts, a whole-request deadline (a
server dripping bytes cannot hold a run), a maximum body size, and no redirects — a redirect
would carry the token to wherever the server says. One request per concern, no retry
loop inside a run: the timer is the retry loop, with backoff kept in the state file.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import stat
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import requests

from spurinv.budget import Budget
from spurinv.config.settings import ControllerSection
from spurinv.controller import answer
from spurinv.controller.nodeview import NodeView, gpu_counts, parse_node, slurm_errors, used_count
from spurinv.controller.transport import RegisterResult, Request, recorded, register_directly, then_recorded
from spurinv.errors import ConfigError, ControllerError, TokenError
from spurinv.secret import Secret, printable

if TYPE_CHECKING:
    from spurinv.controller.registration import Registrar
    from spurinv.log import Log

MAX_BODY = 8 << 20  # slurmrestd 24.11's /openapi/v3 with every plugin is ~2 MB
# GET …/nodes: 1.6-2.1 kB a node on 24.11 (compact or indented), so about 30,000-40,000 nodes; read
# as it arrives, keeping only what the caller needs (answer.Reader), so it fits the unit's MemoryMax
MAX_NODES_BODY = 64 << 20
PROBE_VERSIONS = ("slurm/v0.0.46", "slurm/v0.0.45", "slurm/v0.0.44", "slurm/v0.0.43", "slurm/v0.0.42",
                  "slurm/v0.0.41", "slurm/v0.0.40", "slurm/v0.0.39", "slurm/v0.0.38", "api/v1")  # fmt: skip
AUTH_ERRORS = {2010, 1007}  # Invalid user id (not an admin); Protocol authentication error
# slurm_errno.h: Slurm could not talk to slurmctld (SLURM_COMMUNICATIONS_*, SLURMCTLD_COMMUNICATIONS_*,
# socket errors). slurmrestd answers 502 with 1800 when slurmctld is down: the controller is unreachable.
UNREACHABLE_ERRORS = frozenset({*range(1001, 1005), *range(1013, 1017), *range(1800, 1806), *range(5003, 5006)})
# A read is never refused: a GET that fails with 500 is a controller that could not answer
# (unreachable, backed off), unless its error says the request itself was invalid
# (slurm_errno.h: ESLURM_REST_* 9000-, ESLURM_DATA_* 9200-: parsing the query).
INVALID_REQUEST = frozenset({*range(9000, 9100), *range(9200, 9300)})
GATEWAY_DOWN = frozenset({502, 503, 504})  # the gateway is up, what is behind it is not
UNKNOWN_NODE = 2018
_NODE_PATH = re.compile(r"^/(slurm/v0\.0\.([0-9]{1,6}))/node/\{node_name\}$")  # int() of 5,000 digits raises
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # JWTs are base64url and dots; anything else is a broken token file

SessionFactory = Callable[[], requests.Session]  # how a run gets its HTTP session (tests mount adapters)


class _Deadline(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Abort the block after ``seconds`` of wall time (SIGALRM; main thread only, else a no-op).

    requests' timeouts bound each socket read, not a server that sends one byte per read.
    """
    try:
        previous = signal.signal(signal.SIGALRM, _raise_deadline)
    except ValueError:  # not the main thread: the socket timeouts still apply
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _raise_deadline(_signum: int, _frame: object) -> None:
    raise _Deadline


def is_loopback(url: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost: addresses, never a DNS name like ``127.evil.example``."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_ca_file(path: str) -> None:
    """``controller.ca_file`` must load as a CA bundle: refused here as a configuration error (78)
    naming the key, not later as a TLS error that backs off like an unreachable controller."""
    import ssl

    fix = 'point it at a PEM CA bundle, or set it to "" for the system store'
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"controller.ca_file = {path!r}: not a regular file; {fix}")
        ssl.create_default_context(cafile=path)
    except ssl.SSLError:  # an OSError too: caught first
        raise ConfigError(f"controller.ca_file = {path!r}: holds no PEM certificate; {fix}") from None
    except OSError as exc:
        raise ConfigError(f"controller.ca_file = {path!r}: {exc.strerror or exc}; {fix}") from None


class Controller:
    """A client for one node on one controller."""

    name = "rest"

    def __init__(
        self,
        settings: ControllerSection,
        node: str,
        token: str | None,
        *,
        api: str | None = None,
        session: requests.Session | None = None,
        budget: Budget | None = None,
        registrar: Registrar | None = None,
        log: Log | None = None,
    ) -> None:
        plain = urlsplit(settings.url).scheme != "https" and not is_loopback(settings.url)
        if token and plain and not settings.allow_plain_http_token:
            raise ConfigError(
                f"refusing to send the token over plain HTTP to {urlsplit(settings.url).hostname}; "
                "use https:// or set controller.allow_plain_http_token = true"
            )
        if settings.ca_file and settings.verify:
            check_ca_file(settings.ca_file)
        if token and not _TOKEN.match(token):
            # requests would put the header value, token and all, in its InvalidHeader message
            raise TokenError("the token holds whitespace or control characters (a broken token file?); not sending it")
        self._secret = Secret(token or "")
        self._segment = quote(node, safe="")  # the name is validated; encoded anyway
        self.settings = settings
        self.node = node
        self.api = api if api else (None if settings.api == "auto" else settings.api)
        self._cached = bool(api) and settings.api == "auto"  # detected by an earlier run: may be gone since
        self.session = session or requests.Session()
        self.session.trust_env = False  # no proxies or .netrc credentials from the environment
        self.session.headers.update(self._auth_headers(token))
        self.sent: list[Request] = []
        self.budget = budget
        self.rechecked = False  # the last view() confirmed "busy" with an all-nodes query
        self.registrar = registrar  # controller.register_command replaces the GRES POST
        self.log = log  # says which node's text was not UTF-8

    def _auth_headers(self, token: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "spurinv"}
        if self.settings.auth == "slurm-jwt" and token:
            headers["X-SLURM-USER-NAME"] = self.settings.user
            headers["X-SLURM-USER-TOKEN"] = token
        elif self.settings.auth == "bearer" and token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    # --- transport -------------------------------------------------------------------------
    def _call(
        self, method: str, path: str, body: dict[str, Any] | None = None, limit: int = MAX_BODY, keep: answer.Keep | None = None
    ) -> tuple[int, Any]:
        """Send one request; return (status, parsed JSON or None); raise ControllerError on transport trouble.

        ``keep`` reduces a successful answer's ``nodes`` while it is read (:class:`answer.Reader`).
        """
        url = self.settings.url + path
        timeout = self.settings.timeout
        if self.budget is not None:  # no request starts after the run's deadline, none runs past it
            timeout = self.budget.allow(timeout, f"{method} {path}")
        record = Request(method, path, body, write=method != "GET")
        self.sent.append(record)
        verify: bool | str = self.settings.ca_file or self.settings.verify
        try:
            with deadline(timeout):
                response = self.session.request(
                    method,
                    url,
                    json=body,
                    timeout=(min(timeout, 3.0), timeout),
                    allow_redirects=False,
                    stream=True,
                    verify=verify,
                )
                try:
                    parsed = self._read(response, limit, keep, f"{method} {path}")
                finally:
                    response.close()
        except _Deadline:
            self._cut(method, path, timeout)
            raise ControllerError("unreachable", f"{method} {path}: no complete answer within {timeout:g} s") from None
        except requests.exceptions.SSLError as exc:
            where = urlsplit(self.settings.url).netloc
            raise ControllerError("unreachable", f"{method} {path}: TLS with {where} failed: {_tls_reason(exc)}") from None
        except requests.exceptions.Timeout as exc:
            self._cut(method, path, timeout)
            self._mark(record, exc)
            raise ControllerError(
                "unreachable", f"{method} {path}: timed out after {timeout:g} s", sent=not _unsent(exc)
            ) from None
        except requests.exceptions.ConnectionError as exc:
            where = urlsplit(self.settings.url).netloc
            self._mark(record, exc)
            raise ControllerError(
                "unreachable", f"{method} {path}: cannot connect to {where}: {_os_reason(exc)}", sent=not _unsent(exc)
            ) from None
        except requests.exceptions.RequestException as exc:
            raise ControllerError("unreachable", f"{method} {path}: {_first_line(exc)}") from None
        self.sent[-1] = record = replace(record, status=response.status_code)
        if 300 <= response.status_code < 400:
            where = self._scrub(response.headers.get("Location", "?"))
            raise ControllerError("protocol", f"{method} {path}: redirect to {where} refused (spurinv never follows redirects)")
        return response.status_code, parsed

    def _mark(self, record: Request, exc: BaseException) -> None:
        """The record of a request whose connection failed says it never left."""
        if _unsent(exc) and self.sent and self.sent[-1] is record:
            self.sent[-1] = replace(record, left=False)

    def _cut(self, method: str, path: str, timeout: float) -> None:
        """A request that ran out of time because the run's deadline cut its timeout short is
        the deadline's doing, not the controller's: no backoff for it."""
        if self.budget is not None and timeout < self.settings.timeout:
            raise self.budget.cut(f"{method} {path}") from None

    def _read(self, response: requests.Response, limit: int, keep: answer.Keep | None, where: str) -> Any:
        """The answer's JSON as it arrives (None for garbage, or JSON nested deeper than the parser
        goes); more than ``limit`` bytes is a protocol error. Never holds the whole body."""
        declared = response.headers.get("Content-Length")
        if declared and declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            raise ControllerError("protocol", f"{where}: response of {declared} bytes exceeds {limit}")
        reader: answer.Reader | None = answer.Reader(keep if response.status_code == 200 else None)
        size = 0
        for chunk in response.iter_content(65536):
            size += len(chunk)
            if size > limit:
                raise ControllerError("protocol", f"{where}: response exceeds {limit} bytes")
            if reader is not None:
                try:
                    reader.feed(chunk)
                except answer.Unusable as exc:
                    raise ControllerError("protocol", f"{where}: {self._scrub(str(exc))}") from None
                except (ValueError, RecursionError):
                    reader = None  # garbage: read on only to hold the limit
        if reader is None:
            return None
        try:
            parsed = reader.close()
        except answer.Unusable as exc:
            raise ControllerError("protocol", f"{where}: {self._scrub(str(exc))}") from None
        except (ValueError, RecursionError):
            return None
        if reader.replaced and self.log is not None:
            self.log.warning(f"{where}: {self._scrub(answer.not_utf8(reader.marked, reader.marked_count))}")
        return parsed

    def _fail(self, method: str, path: str, status: int, body: Any) -> ControllerError:
        """Map an unsuccessful answer to an error kind (docs/slurm-rest.md §4)."""
        errors = slurm_errors(body)
        numbers = {number for number, _ in errors}
        text = self._scrub("; ".join(message for _, message in errors if message) or f"HTTP {status}")
        where = f"{method} {path}: HTTP {status}"
        if status in (401, 403, 511) or numbers & AUTH_ERRORS:
            return ControllerError("auth", f"{where}: authentication or permission refused ({text})")
        if status == 422 and method == "POST":  # Slurm 26.05 answers a refused update with 422, not 500
            return ControllerError("refused", f"{where}: {text}")
        if status in (404, 405) and method == "POST":
            return ControllerError("read-only", f"{where}: the gateway has no node write route (read-only gateway)")
        if UNKNOWN_NODE in numbers or (status == 404 and method == "GET"):
            return ControllerError("unknown-node", f"{where}: the controller does not know node {self.node!r}")
        if numbers & UNREACHABLE_ERRORS or status in GATEWAY_DOWN:
            return ControllerError("unreachable", f"{where}: controller unreachable ({text})")
        if status >= 500 and method == "GET" and numbers & INVALID_REQUEST:
            return ControllerError("protocol", f"{where}: the controller says the request is invalid ({text})")
        if status >= 500 and method != "GET" and errors and any(number not in (None, -1, 0) for number in numbers):
            return ControllerError("refused", f"{where}: {text}")
        if status >= 500:
            return ControllerError("unreachable", f"{where}: controller error ({text})")
        return ControllerError("protocol", f"{where}: {text}")

    def _scrub(self, text: str) -> str:
        """Keep the token out of messages (and so the log and the state file): a server may echo
        it back, e.g. an error page quoting the request's headers, truncated,
        upper-cased or hex-encoded. The text is bounded too."""
        return self._secret.scrub(text)

    def _node(self, body: Any) -> NodeView:
        """``parse_node``, with answers its parser does not expect turned into protocol errors.

        Hostile values (``alloc_cpus: 1e999`` is an infinite float; ``gpu:²`` passes ``isdigit``
        but not ``int``) must fail here, inside the request's error handling, and not later in
        the policy as a crash.
        """
        try:
            view = parse_node(body, self.node)
            used_count(view.gres_used or "")
            gpu_counts(view.gres or "")
        except ControllerError as exc:
            raise ControllerError(exc.kind, self._scrub(exc.message)) from None
        except (OverflowError, ValueError, RecursionError) as exc:
            raise ControllerError("protocol", f"node {self.node!r}: unusable answer ({_first_line(exc)})") from None
        return view

    # --- API --------------------------------------------------------------------------------
    def node_path(self) -> str:
        assert self.api is not None
        return f"/{self.api}/node/{self._segment}"

    def detect(self) -> NodeView | None:
        """Find the API version (``api = "auto"``): ``/openapi/v3``, else probe newest first.

        Returns the node view when probing already fetched it (one request saved).
        """
        if self.api is not None or self._detect_from_spec():
            return None
        for version in PROBE_VERSIONS:
            status, body = self._call("GET", f"/{version}/node/{self._segment}")
            if status == 404 and not _about_node(body):
                continue
            self.api = version
            if status == 200:
                return self._node(body)
            raise self._fail("GET", f"/{version}/node/{self._segment}", status, body)
        raise ControllerError(
            "protocol", "no known REST API version answers (tried /openapi/v3 and " + ", ".join(PROBE_VERSIONS) + ")"
        )

    def _detect_from_spec(self) -> bool:
        """Set ``api`` to the newest version ``/openapi/v3`` lists a node GET for; False if it cannot tell."""
        status, spec = self._call("GET", "/openapi/v3")
        if status == 200 and isinstance(spec, dict) and isinstance(spec.get("paths"), dict):
            versions = [
                (int(match.group(2)), match.group(1))
                for path, operations in spec["paths"].items()
                if (match := _NODE_PATH.match(path)) and isinstance(operations, dict) and "get" in operations
            ]
            if versions:
                self.api = max(versions)[1]
                return True
        return False

    def view(self, confirm_busy: bool = False) -> NodeView:
        """``GET …/node/{name}`` as a NodeView; with ``confirm_busy``, a "busy" that only the
        stale fields say is confirmed with an all-nodes query."""
        self.rechecked = False
        view = self.detect()
        if view is None:
            status, body = self._call("GET", self.node_path())
            if status == 404 and self._forget_cached(body):
                view = self.detect()
                if view is None:
                    status, body = self._call("GET", self.node_path())
            if view is None and status != 200:
                raise self._fail("GET", self.node_path(), status, body)
            view = view or self._node(body)
        # GPU usage data decides busy, unless a register command needs the node idle of any job
        whole_node = view.gpus_used is None or self.registrar is not None
        if confirm_busy and whole_node and not view.idle and view.dialect != "spur":
            # Slurm's single-node GET (REQUEST_NODE_INFO_SINGLE) skips
            # select_g_select_nodeinfo_set_all(), so MIXED/ALLOCATED and alloc_cpus can still show
            # a job that ended until anyone queries all nodes; gres_used is fresh, so this is only
            # needed when the view has none, or when any job counts (a register command). The
            # query costs the size of the cluster, so the policy asks for it at most once per
            # controller.busy_recheck (docs/busy.md).
            self.rechecked = True
            path = f"/{self.api}/nodes"
            status, body = self._call("GET", path, limit=MAX_NODES_BODY, keep=self._only_ours)
            if status != 200:
                raise self._fail("GET", path, status, body)
            view = self._node(body)
        return view

    def _only_ours(self, node: Any) -> Any:
        """Of an all-nodes answer, only this node is kept (the rest is read and dropped)."""
        return node if isinstance(node, dict) and node.get("name") == self.node else None

    def _forget_cached(self, body: Any) -> bool:
        """A 404 that names no node, from a version an earlier run detected: the server may have
        been upgraded past it (Slurm 26.11 drops v0.0.42). Forget it so it is detected again, once,
        whether the 404 is slurmrestd's plain text or a JSON error body (a proxy's, a later
        slurmrestd's): only an answer about the node (2018, or a ``nodes`` list) is about the node."""
        if not self._cached or _about_node(body):
            return False
        self._cached = False
        self.api = None
        return True

    def describe(self, body: dict[str, Any]) -> str:
        """The write as a report line (``--dry-run``)."""
        then = then_recorded(self, body)
        if "gres" in body and self.registrar is not None:
            return self.registrar.line() + then
        if "gres" in body and "extra" in body:
            return Request("POST", self.node_path(), {"gres": body["gres"]}).line() + then
        return Request("POST", self.node_path(), body).line()

    def post(self, body: dict[str, Any]) -> None:
        """``POST …/node/{name}``; success is 200 with no errors."""
        if self.api is None:
            self.detect()
        status, answer = self._call("POST", self.node_path(), body)
        if status != 200 or (slurm_errors(answer) and any(n not in (None, 0) for n, _ in slurm_errors(answer))):
            raise self._fail("POST", self.node_path(), status, answer)

    def register(self, body: dict[str, Any], models: dict[str, int], fingerprint: str) -> RegisterResult:
        """Re-register the inventory: the register command if set, else the GRES POST, read back."""
        if self.registrar is not None:
            return recorded(self, body, self.registrar.register(self, models, body.get("gres", ""), fingerprint))
        return register_directly(self, body, models, fingerprint, self._scrub)

    def all_nodes(self, keep: answer.Keep | None = None) -> list[Any]:
        """``GET …/nodes``: every node as the data parser prints it (``spurinv fleet``'s one query),
        each reduced by ``keep`` as it is read.

        With ``api = "auto"`` the version comes from ``/openapi/v3``, else from probing ``…/nodes``
        newest first (not ``…/node/{name}``: the host running ``fleet`` need not be a node).
        """
        if self.api is None and not self._detect_from_spec():
            for version in PROBE_VERSIONS:
                path = f"/{version}/nodes"
                status, body = self._call("GET", path, limit=MAX_NODES_BODY, keep=keep)
                if status == 404 and not _about_node(body):
                    continue
                self.api = version
                return self._node_list(path, status, body)
            raise ControllerError(
                "protocol", "no known REST API version answers (tried /openapi/v3 and " + ", ".join(PROBE_VERSIONS) + ")"
            )
        path = f"/{self.api}/nodes"
        status, body = self._call("GET", path, limit=MAX_NODES_BODY, keep=keep)
        return self._node_list(path, status, body)

    def _node_list(self, path: str, status: int, body: Any) -> list[Any]:
        if status != 200:
            error = self._fail("GET", path, status, body)
            if error.kind == "unknown-node":  # a 404 here names no node: the route is missing
                raise ControllerError("protocol", f"GET {path}: HTTP {status}: no such route (check controller.api)")
            raise error
        if not isinstance(body, dict):
            raise ControllerError("protocol", f"GET {path}: the answer is not a JSON object")
        nodes = body.get("nodes")
        if nodes is None and "nodes" not in body:
            raise ControllerError("protocol", f"GET {path}: the answer has no 'nodes'")
        # 24.11 answers a failed query with 200, nodes null and an error: an error beside any
        # list (even an empty one) means the list is not the fleet, and null alone says nothing
        errors = [error for error in slurm_errors(body) if error[0] != 0]
        if errors:
            raise ControllerError("protocol", f"GET {path}: {self._scrub(errors[0][1] or 'no nodes')}")
        if nodes is None:
            raise ControllerError("protocol", f"GET {path}: 'nodes' is null and no error says why")
        if not isinstance(nodes, list):
            raise ControllerError("protocol", f"GET {path}: 'nodes' is {type(nodes).__name__}, not a list")
        return nodes


def _mentions_node(body: Any) -> bool:
    return isinstance(body, dict) and ("nodes" in body or "node" in body)


def _about_node(body: Any) -> bool:
    """Is a 404 about the node (it names no such node) rather than about the route?"""
    return _mentions_node(body) or UNKNOWN_NODE in {number for number, _ in slurm_errors(body)}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception urllib3 and requests wrapped in it (args, cause, context, reason)."""
    seen: set[int] = set()
    pending: list[object] = [exc]
    while pending:
        current = pending.pop(0)
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend([*current.args, current.__cause__, current.__context__, getattr(current, "reason", None)])


def _unsent(exc: BaseException) -> bool:
    """Whether the request never left: the connection itself failed (refused, no route, a name
    that does not resolve, no connection within the timeout). urllib3 raises these before it
    writes a byte of the request; any later failure may follow a request the controller got."""
    from urllib3.exceptions import ConnectTimeoutError  # NewConnectionError's base too

    return any(isinstance(current, ConnectTimeoutError) for current in _chain(exc))


def _os_reason(exc: BaseException) -> str:
    """The operating system's words ("Connection refused") buried in urllib3's exception chain,
    or one plain sentence; never the library's repr."""
    import http.client

    for current in _chain(exc):
        if isinstance(current, http.client.RemoteDisconnected):
            # slurmctld's own port (6817) and other non-HTTP services close without answering
            return "the server closed the connection without an HTTP answer (is controller.url slurmrestd's port?)"
        if isinstance(current, OSError) and current.strerror:
            return current.strerror
    return "connection failed"


# OpenSSL's reason codes (ssl.SSLError.reason) in an operator's words, with the config key to change
_TLS_REASONS = {
    "WRONG_VERSION_NUMBER": "the server does not speak TLS on this port (use http:// in controller.url, or the TLS port)",
    "CERTIFICATE_VERIFY_FAILED": "its certificate is not trusted (set controller.ca_file to the CA bundle that signed it)",
    "TLSV1_ALERT_PROTOCOL_VERSION": "no TLS version in common with the server",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "the TLS handshake failed (no cipher in common, or a client certificate required)",
}


def _tls_reason(exc: BaseException) -> str:
    for current in _chain(exc):
        said = str(getattr(current, "verify_message", "")).lower()
        if "hostname" in said or "ip address mismatch" in said:  # OpenSSL: by the kind of the URL's host
            return "the certificate does not name this host (use the name it was issued for in controller.url)"
        reason = getattr(current, "reason", None)
        if isinstance(reason, str) and reason.isupper():
            return _TLS_REASONS.get(reason, reason.replace("_", " ").lower())
    return "the TLS handshake failed"


def _first_line(exc: BaseException) -> str:
    """An exception's words for a one-line message: its first argument when that is text (urllib3
    wraps a tuple: ``('Connection broken: InvalidChunkLength(got length b'zz', …)', …)``), without
    Python's ``b'…'`` spelling of bytes, control characters escaped."""
    current = exc
    for _ in range(8):  # requests wraps urllib3's error, which wraps the cause
        if not (current.args and isinstance(current.args[0], BaseException)):
            break
        current = current.args[0]
    words = current.args[0] if current.args and isinstance(current.args[0], str) else str(current)
    words = _BYTES_REPR.sub(r"\1\2\1", words)
    return printable((words.splitlines() or [type(exc).__name__])[0][:200]) or type(exc).__name__


_BYTES_REPR = re.compile(r"\bb(['\"])(.*?)\1")
