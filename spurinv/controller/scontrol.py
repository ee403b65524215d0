"""The ``scontrol`` transport (``controller.transport = "scontrol"``): Slurm's or spur's.

Every Slurm compute node has ``scontrol`` and munge, and root is a Slurm super user (NHC drains
this way); most sites run no slurmrestd for their nodes. spur's REST gateway has no node write
route, but its multi-call ``scontrol`` drains and resumes over gRPC. Which one is installed is
told by ``scontrol --version``: ``slurm 24.11.5`` or ``spur 0.5.0 (4cc3da8)``
(ROCm/spur ``crates/spur-core/src/version.rs`` at 4cc3da8).

* **Slurm**: the view is ``scontrol --json show node NAME`` (data_parser JSON, the same shape
  as the REST API's v0.0.4x, parsed by :func:`spurinv.controller.nodeview.parse_node`). ``scontrol show
  node`` loads every node (``slurm_load_node``; ``src/scontrol/info_node.c``), so unlike the
  REST single-node GET its allocation data is never stale. Writes: ``scontrol update
  NodeName=N State=DRAIN Reason=…``, ``State=RESUME``, ``Gres=… Extra=…``. Failures are told
  apart from the exit status and the ``slurm_update error: …`` / ``slurm_load_node error: …``
  lines (texts from ``src/common/slurm_errno.c``).
* **spur**: the view is the text of ``scontrol show node NAME`` (nothing printed for an unknown
  node); drain and resume as above. spur's scontrol reports any other key (``Gres=``) on stderr
  as ``unknown update key`` and exits 0 (``parse_and_update`` in
  ``crates/spur-cli/src/scontrol.rs`` at 4cc3da8): never taken as success. spur cannot take a
  GRES change at all; ``controller.register_command`` (restart spurd) re-registers instead.

Every command is an argv list run without a shell, with the environment passed in, a timeout
(``controller.timeout``) and its process group killed on expiry. A node name that scontrol
would expand (a hostlist like ``n[1-4]``) or read as an option is refused.
"""

from __future__ import annotations

import errno
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from spurinv import nodename
from spurinv.budget import Budget
from spurinv.controller import answer, process
from spurinv.controller.answer import holds_replacement
from spurinv.controller.nodeview import NodeView, gpu_counts, gres_agrees, parse_node, parse_spur_nodes, used_count
from spurinv.controller.ownership import MAX_ARG_STRLEN
from spurinv.controller.transport import SPUR_REMEDY, RegisterResult, Request, recorded, register_directly, then_recorded
from spurinv.errors import ConfigError, ControllerError, ControllerKind
from spurinv.secret import printable

if TYPE_CHECKING:
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.registration import Registrar
    from spurinv.log import Log

MAX_OUTPUT = 64 << 20  # `--json show node` of every node (fleet): ~5 kB a node
MAX_ONE = 1 << 20  # anything about one node: ~5 kB; keeps a run far inside the unit's MemoryMax
_VERSION = re.compile(r"^(slurm|spur) (\d+\.\d+\S*)")
# slurm_errno.c texts → error kinds; the first match wins (munge before "authentication")
_SLURM_ERRORS: tuple[tuple[ControllerKind, tuple[str, ...]], ...] = (
    ("unreachable", ("munge", "Unable to contact slurm controller", "Communication connection failure",
                     "Socket timed out", "Zero Bytes were transmitted", "Connection refused",
                     "Could not establish a configuration source", "resolve_ctls_from_dns_srv")),
    ("auth", ("Invalid user id", "Access/permission denied", "Protocol authentication error",
              "Authentication credential expired", "Only root", "Permission denied")),
    ("unknown-node", ("Invalid node name specified",)),
)  # fmt: skip
# spur's scontrol (anyhow + tonic): "Error: failed to connect to spurctld", "status: PermissionDenied"
_SPUR_ERRORS: tuple[tuple[ControllerKind, tuple[str, ...]], ...] = (
    ("unreachable", ("failed to connect to spurctld", "transport error", "Unavailable", "DeadlineExceeded")),
    ("auth", ("PermissionDenied", "Unauthenticated", "requires cluster admin", "permission denied")),
    ("unknown-node", ("NotFound", "not found")),
)
# scontrol's words for a call that never reached the controller: no connection (Slurm's
# SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR, spur's tonic connect error) or no credential to send
_NOT_SENT = ("Unable to contact slurm controller (connect failure)", "failed to connect to spurctld", "Munge encode failed")
SPUR_CANNOT_REGISTER = (
    "spur's scontrol cannot change a node's GRES (it ignores Gres=) and controller.register_command is not set: "
    "this controller cannot re-register the node; set controller.register_command "
    '(e.g. ["systemctl", "restart", "spurd"]) or restart spurd on the idle node by hand'
)


class Scontrol:
    """A client for one node, through the ``scontrol`` command (the :class:`~spurinv.controller.transport.Transport`)."""

    name = "scontrol"

    def __init__(
        self,
        settings: ControllerSection,
        node: str,
        environ: Mapping[str, str],
        *,
        log: Log | None = None,
        registrar: Registrar | None = None,
        budget: Budget | None = None,
    ) -> None:
        if not nodename.valid(node) or nodename.every_node(node):
            raise ConfigError(f"node.name {node!r}: scontrol would expand or misread it (letters, digits, '.', '_', '-' only)")
        self.settings = settings
        self.node = node
        self.budget = budget  # controller.run_deadline: no call starts after it, none runs past it
        # without SLURM_JWT: with it set, scontrol authenticates with that token (auth/jwt) instead
        # of munge, and a token meant for slurmrestd (expired, another user's) fails every call
        self.environ = {key: value for key, value in environ.items() if key != "SLURM_JWT"}
        self.log = log
        self.registrar = registrar
        self.program = process.resolve(settings.scontrol or "scontrol", environ, "controller.scontrol")
        self.api: str | None = None  # nothing to cache across runs: `--version` is one local exec
        self.flavor: str | None = None  # "slurm" or "spur", from `scontrol --version`
        self.version = ""
        self.sent: list[Request] = []
        self.rechecked = False  # the last view() was an all-nodes query (Slurm's scontrol always is)
        self._last: NodeView | None = None

    # --- running scontrol -------------------------------------------------------------------
    def _run(self, *args: str, write: bool = False, limit: int = MAX_ONE) -> process.Finished:
        argv = [self.program, *args]
        for word in args:
            if "\0" in word:  # exec refuses the whole argv (ValueError: embedded null byte)
                raise ControllerError("protocol", f"`{shlex.join(argv[:3])} …`: {process.nul_entry(word)}; not run", sent=False)
            # the kernel refuses the whole exec (E2BIG) for one argument beyond MAX_ARG_STRLEN; the
            # policy keeps our record out of an extra that long, so this is what the controller holds
            if len(word.encode("utf-8", "surrogateescape")) >= MAX_ARG_STRLEN:
                key = word.split("=", 1)[0][:20]
                raise ControllerError(
                    "protocol",
                    f"`{shlex.join(argv[:3])} …`: {key}= would be {len(word.encode('utf-8', 'surrogateescape'))} bytes, "
                    f"beyond Linux's {MAX_ARG_STRLEN}-byte limit for one argument (MAX_ARG_STRLEN); not run",
                    sent=False,
                )
        timeout = self.settings.timeout
        if self.budget is not None:  # checked before the record: a command never started is not "sent"
            timeout = self.budget.allow(timeout, f"`{shlex.join(argv[:4])}`")
        record = Request("EXEC", shlex.join(argv), None, write=write)
        self.sent.append(record)
        try:
            outcome = process.run(argv, self.environ, timeout, limit=limit, stop_over=True)
        except subprocess.TimeoutExpired:
            if self.budget is not None and timeout < self.settings.timeout:
                raise self.budget.cut(f"`{shlex.join(argv[:4])}`") from None
            raise ControllerError(
                "unreachable", f"`{shlex.join(argv[:4])} …` did not answer within {timeout:g} s; killed"
            ) from None
        except OSError as exc:
            self.sent[-1] = replace(record, left=False)  # the exec failed: nothing ran
            if exc.errno == errno.E2BIG:  # what we would pass, not how spurinv is configured
                raise ControllerError("protocol", f"`{shlex.join(argv[:3])} …`: {exc.strerror}; not run", sent=False) from None
            raise ConfigError(f"controller.scontrol: cannot run {self.program}: {exc.strerror or exc}") from None
        self.sent[-1] = replace(record, status=outcome.status)
        if outcome.truncated:
            raise ControllerError("protocol", f"`{shlex.join(argv[:4])} …` printed more than {limit} bytes")
        if outcome.status != 0:
            error = self._fail(outcome, write)
            if not error.sent:  # scontrol's words: its call never reached the controller
                self.sent[-1] = replace(self.sent[-1], left=False)
            raise error
        return outcome

    def _fail(self, outcome: process.Finished, write: bool) -> ControllerError:
        """Map a non-zero exit to an error kind by scontrol's own words."""
        text = printable(" ".join((outcome.stderr or outcome.stdout).split())[-600:]) or f"exit status {outcome.status}"
        table = _SPUR_ERRORS if self.flavor == "spur" else _SLURM_ERRORS
        lowered = text.lower()
        for kind, needles in table:
            if any(needle.lower() in lowered for needle in needles):
                if kind == "unknown-node":
                    return ControllerError(kind, f"the controller does not know node {self.node!r} ({text})")
                sent = not any(needle.lower() in lowered for needle in _NOT_SENT)
                return ControllerError(kind, f"scontrol: {text}", sent=sent)
        if write and self.flavor == "spur" and "node update failed" in lowered and self._last is not None:
            # spur prints only "node update failed" (scontrol.rs drops the gRPC status). For a node
            # it lists, spurctld's update_node fails in require_admin, or with no raft leader or a
            # failed log write (server.rs, cluster.rs at 4cc3da8): an auth error, backed off
            # like one, never a refusal that drains the node
            return ControllerError(
                "auth",
                f"scontrol: {text} (spur says no more; node {self.node!r} is listed, so most likely this user "
                "is not a spur admin, else spurctld has no leader or cannot write its log)",
            )
        if write:
            return ControllerError("refused", f"scontrol update refused: {text}")
        return ControllerError("protocol", f"scontrol: {text}")

    def detect(self) -> str:
        """``slurm`` or ``spur``, from ``scontrol --version`` (once per client)."""
        if self.flavor is None:
            outcome = self._run("--version")
            first = (outcome.stdout.strip().splitlines() or [""])[0]
            match = _VERSION.match(first)
            if match is None:
                raise ControllerError(
                    "protocol", f"{self.program} --version printed {first[:80]!r}: neither Slurm's nor spur's scontrol"
                )
            self.flavor, self.version = match.group(1), first
        return self.flavor

    # --- reading ----------------------------------------------------------------------------
    def view(self, confirm_busy: bool = False) -> NodeView:
        """The node now. Slurm: ``--json show node NAME`` (all nodes loaded, so fresh, and as
        costly for slurmctld as an all-nodes query: ``rechecked``); spur: text. ``confirm_busy``
        changes nothing here: the answer is never stale."""
        del confirm_busy
        self.rechecked = self.detect() == "slurm"
        if self.flavor == "spur":
            views = self._spur_nodes(self.node)
            view = next((v for v in views if v.name == self.node), None)
            if view is None:
                missing = f"the controller does not know node {self.node!r} (spur lists no such node)"
                raise ControllerError("unknown-node", missing)
        else:
            view = self._checked(parse_node, self._json("show", "node", self.node))
        self._last = view
        return view

    def all_nodes(self, keep: answer.Keep | None = None) -> list[Any]:
        """Every node the controller lists, in the data parser's shape (for fleet views), each
        reduced by ``keep`` as it is read.

        Slurm: the ``nodes`` list of ``scontrol --json show node``. spur: its text read by the
        parser ``view`` uses, handed over with ``state`` as the data parser's list (base state,
        then flags), so a composite word (DRAINED+RESERVED) keeps its DRAIN flag; no timestamps.
        """
        if self.detect() == "spur":
            nodes = [
                {"name": v.name, "state": [v.base, *v.flags], "reason": v.reason or None,
                 "alloc_cpus": v.alloc_cpus, "gres": v.gres or ""}
                for v in self._spur_nodes(limit=MAX_OUTPUT)
            ]  # fmt: skip
            return nodes if keep is None else [kept for node in nodes if (kept := keep(node)) is not None]
        body = self._json("show", "node", limit=MAX_OUTPUT, keep=keep)
        listed = body.get("nodes") if isinstance(body, dict) else None
        if not isinstance(listed, list):
            raise ControllerError("protocol", "scontrol --json show node: no 'nodes' list")
        return listed

    def nodes(self) -> list[NodeView]:
        """Every node the controller lists, as views."""
        if self.detect() == "spur":
            return self._spur_nodes(limit=MAX_OUTPUT)
        body = {"nodes": self.all_nodes()}
        names = [node["name"] for node in body["nodes"] if isinstance(node, dict) and isinstance(node.get("name"), str)]
        return [self._checked(parse_node, body, name) for name in names]

    def _spur_nodes(self, *names: str, limit: int = MAX_ONE) -> list[NodeView]:
        outcome = self._run("show", "node", *names, limit=limit)
        views = parse_spur_nodes(outcome.stdout, names[0] if len(names) == 1 else None)
        if outcome.replaced:
            marked = [view.name for view in views if holds_replacement([view.name, view.reason, view.gres or ""])]
            self._not_utf8("scontrol show node", marked[: answer.MARKED], len(marked))
        return views

    def _json(self, *args: str, limit: int = MAX_ONE, keep: answer.Keep | None = None) -> Any:
        outcome = self._run("--json", *args, limit=limit)
        reader = answer.Reader(keep, replaced=outcome.replaced)
        try:
            reader.feed(outcome.stdout)
            body = reader.close()
        except answer.Unusable as exc:
            raise ControllerError("protocol", f"scontrol --json {' '.join(args)}: {printable(str(exc))}") from None
        except (ValueError, RecursionError):
            raise ControllerError("protocol", f"scontrol --json {' '.join(args)}: not JSON") from None
        if outcome.replaced:
            self._not_utf8(f"scontrol --json {' '.join(args)}", reader.marked, reader.marked_count)
        return body

    def _not_utf8(self, what: str, marked: list[str], count: int) -> None:
        if self.log is not None:
            self.log.warning(printable(f"{what}: {answer.not_utf8(marked, count)}"))

    def _checked(self, parse: Any, body: Any, name: str | None = None) -> NodeView:
        try:
            view: NodeView = parse(body, name or self.node)
            used_count(view.gres_used or "")
            gpu_counts(view.gres or "")
        except (OverflowError, ValueError, RecursionError) as exc:
            raise ControllerError("protocol", f"node {name or self.node!r}: unusable answer ({exc})") from None
        return view

    # --- writing ----------------------------------------------------------------------------
    def _update_args(self, body: dict[str, Any]) -> list[str]:
        """``update NodeName=N …`` for a drain, resume or GRES body; refuse what scontrol would alter."""
        args = ["update", f"NodeName={self.node}"]
        state = body.get("state")
        if state == ["DRAIN"]:
            reason = str(body.get("reason") or "")
            # Slurm's scontrol strips one leading and one trailing '"' from Reason= (update_node.c):
            # a reason it would alter could never be recognised as ours again.
            if not reason or reason[0] == '"' or reason[-1] == '"' or any(ord(c) < 32 for c in reason):
                raise ControllerError(
                    "protocol", f"drain reason {reason[:60]!r} cannot pass through scontrol unchanged", sent=False
                )
            args += ["State=DRAIN", f"Reason={reason}"]
        elif state in (["RESUME"], ["UNDRAIN"]):
            args.append(f"State={state[0]}")
        elif state is None and "gres" in body:
            args.append(f"Gres={body['gres']}")
        elif state is not None or "extra" not in body:
            raise ControllerError("protocol", f"no scontrol update for {sorted(body)}", sent=False)
        if "extra" in body:  # our record: with a drain, or on its own after a registration
            args.append(f"Extra={body['extra']}")
        return args

    def describe(self, body: dict[str, Any]) -> str:
        then = then_recorded(self, body)
        if "gres" in body and self.registrar is not None:
            return self.registrar.line() + then
        if "gres" in body and self.detect() == "spur":
            return "none: " + SPUR_CANNOT_REGISTER
        if "gres" in body and "extra" in body:
            return f"EXEC {shlex.join([self.program, *self._update_args({'gres': body['gres']})])}{then}"
        return f"EXEC {shlex.join([self.program, *self._update_args(body)])}"

    def post(self, body: dict[str, Any]) -> None:
        """One ``scontrol update``; success is exit 0 and, from spur, no ignored key."""
        self.detect()
        outcome = self._run(*self._update_args(body), write=True)
        warning = " ".join(outcome.stderr.split())
        if "unknown update key" in warning:
            # spur: the key was dropped and the rest (nothing, for Gres=) applied; exit 0 anyway
            raise ControllerError("refused", f"spur's scontrol ignored the update ({warning[:200]}): not applied")

    def register(self, body: dict[str, Any], models: dict[str, int], fingerprint: str) -> RegisterResult:
        """Re-register: the register command if set; spur cannot otherwise; Slurm takes ``Gres=``.

        Only the read-back says "applied": Slurm exits 0 on a GPU type change it silently does
        not apply (as slurmrestd answers 200).
        """
        if self.registrar is not None:
            return recorded(self, body, self.registrar.register(self, models, body.get("gres", ""), fingerprint))
        if self.detect() == "spur":
            view = self._last or self.view()
            if gres_agrees(view.gres, models):  # spurd was restarted by hand: nothing left to do
                return RegisterResult(True, view, None)
            if self.log is not None:
                self.log.warning(SPUR_CANNOT_REGISTER)
            return RegisterResult(False, view, SPUR_CANNOT_REGISTER, remedy=SPUR_REMEDY)
        return register_directly(self, body, models, fingerprint)
