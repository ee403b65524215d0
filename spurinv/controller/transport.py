"""What converge() needs from a controller client, whichever way it reaches the controller.

Two transports implement it: :class:`spurinv.controller.rest.Controller` (the REST API, the only
module that imports ``requests``) and :class:`spurinv.controller.scontrol.Scontrol` (the ``scontrol``
command of Slurm or of spur). Both record every request they send, or every command they run,
as a :class:`Request`, and both answer the same :class:`~spurinv.controller.nodeview.NodeView`, so the
policy cannot tell them apart. :func:`connect` is the one factory that picks and builds one:
``refresh``, ``check`` and ``fleet`` all reach the controller through it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from spurinv.controller.nodeview import gres_agrees
from spurinv.controller.ownership import MAX_ARG_STRLEN, extra_record, splice
from spurinv.errors import ControllerError

if TYPE_CHECKING:
    from spurinv.budget import Budget
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.registration import Details
    from spurinv.controller.rest import Controller, SessionFactory
    from spurinv.controller.scontrol import Scontrol
    from spurinv.log import Log


@dataclass(frozen=True, slots=True)
class Request:
    """One request as sent (or, in a dry run, as it would be sent): for reports and tests.

    For a command (``scontrol``, ``register_command``) ``method`` is ``EXEC``, ``path`` the
    command line and ``status`` its exit status.

    ``left``: whether it left for the controller, as far as spurinv can tell; False when the
    connection itself failed or the command was refused before it ran (a step whose write left is
    "sent" even when a later request of it never did). ``write``: it may change the controller
    (a POST, an ``scontrol update``, the register command), not a read. Neither is in
    :meth:`as_dict`: ``refresh --json``'s requests keep their keys.
    """

    method: str
    path: str
    body: dict[str, Any] | None
    status: int | None = None
    left: bool = True
    write: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "body": self.body, "status": self.status}

    def line(self) -> str:
        body = f" {json.dumps(self.body, sort_keys=True)}" if self.body is not None else ""
        status = f" → {self.status}" if self.status is not None else ""
        return f"{self.method} {self.path}{body}{status}"


# What an operator must do when the controller refused or did not apply a re-registration: the
# last words of our drain reason and of `status`, by the way the transport re-registers.
SLURM_REMEDY = "update the controller config: spurinv discover --format slurm"
COMMAND_REMEDY = "check controller.register_command and its output in the log"
SPUR_REMEDY = "set controller.register_command or restart spurd while the node is idle"


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a re-registration achieved, as read back from the controller.

    ``request`` is the line of the write that did it (the POST, the ``scontrol update`` or the
    register command), for the report; ``remedy`` what an operator must do if it was not applied;
    ``busy``: nothing was sent, a job came first (no refusal: the policy decides again from ``view``).
    """

    applied: bool
    view: NodeView
    error: str | None
    request: str | None = None
    remedy: str = SLURM_REMEDY
    busy: bool = False
    warning: str | None = None  # applied, but something an operator should know (our record not written)
    record: str | None = None  # the line of our record's own update after it, when one was sent


class Transport(Protocol):
    """The interface converge() uses; each write is one call, so a wrapper around these call
    sites (a write-ahead intent, a deadline) covers every transport."""

    settings: ControllerSection
    node: str
    api: str | None
    sent: list[Request]
    name: str  # "rest" or "scontrol": recorded with a write-ahead intent
    rechecked: bool  # the last view() was (or cost as much as) an all-nodes query

    def view(self, confirm_busy: bool = False) -> NodeView:
        """The node as the controller sees it now (``confirm_busy``: re-check a busy look with
        an all-nodes query, which Slurm's single-node answer needs to drop stale allocations)."""

    def post(self, body: dict[str, Any]) -> None:
        """One drain (``{"state":["DRAIN"],"reason":…}``) or resume (``{"state":["RESUME"]}``)."""

    def register(self, body: dict[str, Any], models: dict[str, int], fingerprint: str) -> RegisterResult:
        """Re-register the inventory (GRES, or the register command), then read it back."""

    def describe(self, body: dict[str, Any]) -> str:
        """The write ``body`` would be, as a report line (for ``--dry-run``)."""


def connect(
    settings: ControllerSection,
    node: str,
    environ: dict[str, str],
    log: Log,
    *,
    register: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    budget: Budget | None = None,
    details: Details | None = None,
    api: str | None = None,
    session_factory: SessionFactory | None = None,
) -> Controller | Scontrol:
    """The transport factory: REST (``controller.url``, with the token and ``api``, a version an
    earlier run detected) or ``scontrol``. With ``register`` either re-registers through
    ``controller.register_command`` when it is set (told ``details``); a read-only caller
    (``fleet``) leaves it out, so a missing register program does not stop it."""
    from spurinv.controller.registration import registrar_for

    if settings.transport == "scontrol":
        from spurinv.controller.scontrol import Scontrol

        registrar = registrar_for(settings, environ, log, sleep, budget=budget, details=details) if register else None
        return Scontrol(settings, node, environ, log=log, registrar=registrar, budget=budget)
    from spurinv.config.settings import read_token
    from spurinv.controller.rest import Controller

    token = read_token(settings, environ)
    session = session_factory() if session_factory else None
    registrar = None
    if register:
        secrets = (token,) if token else ()
        registrar = registrar_for(settings, environ, log, sleep, secrets=secrets, budget=budget, details=details)
    return Controller(settings, node, token, api=api, session=session, registrar=registrar, budget=budget, log=log)


def extra_limit(transport: str) -> int | None:
    """The longest ``extra`` (UTF-8 bytes) a transport can send: ``scontrol`` passes it as one
    argument, ``Extra=<text>``, which Linux caps at MAX_ARG_STRLEN with its NUL; REST has no
    limit of its own (the body goes as JSON)."""
    return MAX_ARG_STRLEN - len("Extra=") - 1 if transport == "scontrol" else None


def register_directly(
    client: Transport, body: dict[str, Any], models: dict[str, int], fingerprint: str, scrub: Callable[[str], str] = str
) -> RegisterResult:
    """Send the GRES update, read it back, and only then our record: Slurm accepts a GPU type
    change it silently does not apply (docs/slurm-rest.md §2), so only the read-back says
    "applied"; and it applies ``extra`` even when it refuses the GRES of the same update, so a
    record sent with the GRES would claim a registration that never happened."""
    del fingerprint  # the read-back judges by the GRES; the record carries the fingerprint
    try:
        client.post({"gres": body["gres"]})
    except ControllerError as exc:
        if exc.kind != "refused":
            raise
        line = client.sent[-1].line()
        return RegisterResult(False, client.view(), exc.message, line)
    line = client.sent[-1].line()
    after = client.view()
    if not gres_agrees(after.gres, models):
        problem = f"the controller still says gres {after.gres!r} after accepting {body['gres']!r}"
        return RegisterResult(False, after, scrub(problem), line)
    return recorded(client, body, RegisterResult(True, after, None, line))


def then_recorded(client: Transport, body: dict[str, Any]) -> str:
    """``; then <the record's own update>`` to follow a registration's line in a description: our
    record after a registration is its own update (:func:`recorded`), and a dry run names it as the
    real run's step does; "" for a body that registers nothing."""
    return f"; then {client.describe({'extra': body['extra']})}" if "gres" in body and "extra" in body else ""


def recorded(client: Transport, body: dict[str, Any], result: RegisterResult) -> RegisterResult:
    """After a registration the controller confirmed: our record (the value of our key in
    ``body["extra"]``) spliced into the ``extra`` the controller now holds, as its own update.

    Nothing is written for a registration that did not happen, or where ``extra`` may no longer be
    rewritten; a refusal of the record leaves the registration done, with a warning.
    """
    value = extra_record(body.get("extra"))
    if not result.applied or value is None:
        return result
    text = splice(result.view.extra, value, extra_limit(client.name))
    if text is None:
        return replace(result, warning="the node's extra can no longer take our record (not rewritten); registered without it")
    if text == result.view.extra:
        return result
    try:
        client.post({"extra": text})
    except ControllerError as exc:
        if exc.kind != "refused":
            raise
        warning = f"registered, but the controller refused our record in extra: {exc.message}"
        return replace(result, warning=warning, record=client.sent[-1].line())
    return replace(result, view=replace(result.view, extra=text), record=client.sent[-1].line())
