"""``controller.register_command``: re-register the node by running a command, then read back.

Some controllers cannot take a node's GRES directly: spur's ``scontrol`` ignores ``Gres=``
(ROCm/spur ``crates/spur-cli/src/scontrol.rs`` at 4cc3da8, ``parse_and_update``) and spurd
registers its inventory only when it starts; Slurm accepts no GPU count change for File-backed
GRES without slurm.conf/gres.conf and ``scontrol reconfigure``. When the command is set it
replaces the direct GRES update, for every transport.

The command runs as an argv list (no shell), with the environment passed in, stdin closed,
output captured (bounded) and logged with anything that looks like a credential blanked, and a
timeout (``register_timeout``; expiry → 69, the child's process group is killed). It runs only
on an idle node, checked again right before it starts, never in a dry run (the caller never
gets here then). A non-zero exit is a refusal (76). Afterwards the controller is read back for
up to ``register_wait`` seconds until it lists the new inventory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING

from spurinv.controller.nodeview import gres_agrees
from spurinv.controller.process import resolve, run
from spurinv.controller.transport import COMMAND_REMEDY, RegisterResult, Request
from spurinv.errors import ConfigError, ControllerError, DeadlineError
from spurinv.secret import BLANK, blank, blank_argv, printable

if TYPE_CHECKING:
    from spurinv.budget import Budget
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.transport import Transport
    from spurinv.log import Log

LOGGED = 400  # characters of output put in the log line
MIN_START = 5.0  # seconds of the run a register command needs left to be started at all


@dataclass(frozen=True, slots=True)
class Details:
    """What the register command learns from spurinv besides the GRES: the node's name, its
    gres.conf lines (:func:`spurinv.inventory.slurmconf.gres_conf`) and ``discover --json``'s document."""

    node: str = ""
    gres_conf: str = ""
    inventory: Mapping[str, object] = field(default_factory=dict)


PREFIX = "SPURINV_"


# words of an environment variable's name that mark a credential the register command never gets
SECRET_WORDS = frozenset({"PASS", "PASSWD", "PASSWORD", "PW", "KEY", "APIKEY", "PAT", "JWT", "TOKEN", "SECRET",
                          "SECRETS", "CRED", "CREDS", "CREDENTIAL", "CREDENTIALS", "AUTH", "COOKIE", "SESSION"})  # fmt: skip


# parts of a name that mark a credential wherever they appear (``DBPASS``, ``GITHUBTOKEN``,
# ``LDAP_BINDPW``, ``MYKEY2``); KEY matches ``KEYBOARD`` too: dropping a harmless variable from
# the command's environment costs less than passing a credential
SECRET_PARTS = ("PASS", "PWD", "TOKEN", "SECRET", "AUTH", "BINDPW", "KEY", "BEARER", "PASSPHRASE", "JWT", "CRED")
# the shell's working directories, not passwords
NOT_SECRET = frozenset({"PWD", "OLDPWD"})
# userinfo in a URL-valued variable (https://user:pass@host): blanked, the rest kept
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


def secret_name(name: str) -> bool:
    """Does an environment variable's name say it holds a credential (``SLURM_JWT``,
    ``DBPASS1``)? Case-insensitive, trailing digits ignored; ``PWD``/``OLDPWD`` are not."""
    if name.upper() in NOT_SECRET:
        return False
    upper = name.upper().rstrip("0123456789")
    return any(word in SECRET_WORDS for word in upper.split("_")) or any(part in upper for part in SECRET_PARTS)


def blank_userinfo(value: str) -> str:
    """``value`` with the user and password of every URL in it blanked (``https://***@host``)."""
    return _USERINFO.sub(r"\1***@", value)


def command_environment(
    environ: Mapping[str, str], details: Details, gres: str, fingerprint: str, inventory_path: str
) -> dict[str, str]:
    """The command's environment: ours without anything that carries a credential (a name with
    a ``_``-separated word of :data:`SECRET_WORDS` or a part of :data:`SECRET_PARTS` anywhere:
    ``CREDENTIALS_DIRECTORY``, ``SLURM_JWT``, ``DBPASS``; a URL's userinfo blanked); the command
    authenticates on its own, as scontrol does with munge) and without an inherited
    ``SPURINV_*`` (a ``SPURINV_STATE`` meant for spurinv must not reach it); then what this registration is:
    ``SPURINV_NODE``, ``SPURINV_GRES`` (the complete GRES spurinv would set: GPU entries rebuilt,
    every other GRES kept), ``SPURINV_FINGERPRINT``, ``SPURINV_GRES_CONF`` (gres.conf lines) and
    ``SPURINV_INVENTORY`` (a file holding ``discover --json``'s document)."""
    scrubbed = {key: blank_userinfo(value) for key, value in environ.items()
                if not key.startswith(PREFIX) and not secret_name(key)}  # fmt: skip
    return {
        **scrubbed,
        "SPURINV_NODE": details.node,
        "SPURINV_GRES": gres,
        "SPURINV_FINGERPRINT": fingerprint,
        "SPURINV_GRES_CONF": details.gres_conf,
        "SPURINV_INVENTORY": inventory_path,
    }


@contextlib.contextmanager
def inventory_file(document: Mapping[str, object]) -> Iterator[str]:
    """``document`` in a private temporary file (0600, ``$TMPDIR``) for the command's run only."""
    import tempfile

    descriptor, path = tempfile.mkstemp(prefix="spurinv-inventory-", suffix=".json")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(document, handle, sort_keys=True)
            handle.write("\n")
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


@dataclass(eq=False, repr=False)  # compared by identity; repr would show environ, which may hold a token
class Registrar:
    """Runs ``controller.register_command`` for one transport and reads the result back.

    ``budget`` (``controller.run_deadline``) bounds both: the command and the read-back get at
    most what is left of the run, and end as if their own limit had passed (69, 76), so they are
    backed off rather than run again by the next tick. None starts after the deadline (75).
    ``reserve``: seconds of the run kept for the write after the read-back.
    """

    argv: tuple[str, ...]
    timeout: float
    wait: float
    environ: Mapping[str, str]
    log: Log
    _: KW_ONLY
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    secrets: tuple[str, ...] = ()
    budget: Budget | None = None
    reserve: float = 0.0
    details: Details = field(default_factory=Details)
    shown: str = field(init=False)  # the command as reports, logs and the state file show it

    def __post_init__(self) -> None:
        self.shown = shlex.join(blank_argv(self.argv, self.secrets)).replace(f"'{BLANK}'", BLANK)

    def line(self) -> str:
        return f"EXEC {self.shown}"

    def _left(self) -> float:
        return self.budget.remaining() if self.budget is not None else float("inf")

    def register(
        self, client: Transport, models: dict[str, int], gres: str = "", fingerprint: str = "", *, absent: bool = False
    ) -> RegisterResult:
        """Check the node is idle (any job counts: a restart must not hit running jobs), run the
        command once (``gres``: the complete GRES spurinv would set, for its environment), read
        back until the GRES agree. ``absent``: the controller does not know the node (our own
        earlier command deleted it and died): nothing can run there, so no look first."""
        before = None if absent else client.view()
        if before is not None and not before.idle and not client.rechecked:  # a stale single-node answer
            before = client.view(confirm_busy=True)
        if before is not None and not before.idle:
            return RegisterResult(
                False, before, f"the node is no longer idle ({before.busy_text()}); register_command not run", busy=True
            )
        program = resolve(self.argv[0], self.environ, "controller.register_command")
        command = self.shown
        timeout = self.budget.allow(self.timeout, f"register_command `{command}`") if self.budget else self.timeout
        if timeout < min(self.timeout, MIN_START):
            # started now it would be killed at once, perhaps half done: the next run starts it
            raise DeadlineError(
                f"controller.run_deadline leaves {timeout:.1f} s, too little to start register_command `{command}`"
            )
        record = Request("EXEC", command, None, write=True)
        position = len(client.sent)
        client.sent.append(record)
        started = self.monotonic()
        try:
            with inventory_file(self.details.inventory) as path:
                environ = command_environment(self.environ, self.details, gres, fingerprint, path)
                outcome = run([program, *self.argv[1:]], environ, timeout)
        except subprocess.TimeoutExpired as exc:
            # a command too slow for the run is a failure to back off from (69), not a deadline
            # that a next tick would meet again by running it again
            bound = f"{timeout:.1f} s, what was left of controller.run_deadline" if timeout < self.timeout else f"{timeout:g} s"
            message = f"register_command `{command}` did not finish within {bound}; killed"
            self.log.error(f"{message}; its output: {self._tail(exc.output or '', exc.stderr or '')}")
            raise ControllerError("unreachable", message) from None
        except OSError as exc:
            client.sent[position] = replace(record, left=False)
            raise ConfigError(f"controller.register_command: cannot run {program}: {exc.strerror or exc}") from None
        client.sent[position] = record = replace(record, status=outcome.status)
        tail = self._tail(outcome.stdout, outcome.stderr)
        took = self.monotonic() - started
        if outcome.status != 0:
            self.log.error(f"register_command `{command}` exited {outcome.status} after {took:.1f} s: {tail}")
            # judge by the controller now, not by the look before the command: it may have taken
            # effect, or someone may have drained the node meanwhile (never drain over theirs)
            after = client.view()
            if gres_agrees(after.gres, models):
                # applied, but the command may have left work undone (spurinv-slurm-dynamic: the
                # node's extra in its saved file): said in the report, so an operator re-runs it
                warning = (f"register_command exited {outcome.status} though the controller lists the new GPUs; "
                           "it may have left work undone: run it again (see its log)")  # fmt: skip
                self.log.warning(f"register_command exited {outcome.status}, but the controller lists the new GPUs")
                return RegisterResult(True, after, None, record.line(), warning=warning)
            return RegisterResult(
                False, after, f"register_command `{command}` exited {outcome.status}: {tail}", record.line(), COMMAND_REMEDY
            )
        self.log.info(f"register_command `{command}` finished in {took:.1f} s: {tail}")
        return self.read_back(client, models, record.line())

    def _tail(self, stdout: str | bytes, stderr: str | bytes) -> str:
        """The end of the output as it may be logged: each stream blanked on its own, then joined."""
        texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in (stdout, stderr)]
        output = printable(" ".join(" ".join(blank(text, self.secrets).split()) for text in texts if text.strip()))
        return output[-LOGGED:] if output else "no output"

    def read_back(self, client: Transport, models: dict[str, int], line: str) -> RegisterResult:
        """Poll the controller for up to ``wait`` seconds until its GPUs match ``models``.

        A controller that is briefly unreachable (slurmctld re-execs on ``scontrol reconfigure``),
        or a node briefly unknown to it (a dynamic node deleted and not yet re-created), is "not
        yet"; its error is raised only if it lasts until the end. The wait ends with the run's
        deadline if that comes first: still not listed then is a refusal too (76, backed off), so
        a controller that never shows the GPUs does not get the command every tick.
        """
        # leave the run time for one more request: the drain that follows a refusal
        wait = max(0.0, min(self.wait, self._left() - self.reserve))
        deadline = self.monotonic() + wait
        pause = 0.25
        last: NodeView | None = None
        error: ControllerError | None = None
        while True:
            try:
                last, error = client.view(), None
            except DeadlineError:  # the run's end came before this look: judge by the last one (below)
                break
            except ControllerError as exc:
                # slurmctld re-execs on a reconfigure; a dynamic node is absent between its
                # `scontrol delete` and the restarted slurmd's registration: "not yet"
                if exc.kind not in ("unreachable", "unknown-node"):
                    raise
                error = exc
            else:
                if gres_agrees(last.gres, models):
                    return RegisterResult(True, last, None, line)
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                break
            self.sleep(min(pause, remaining))
            pause = min(pause * 2, 5.0)
        if error is not None or last is None:
            raise error or self._no_time()
        want = ",".join(f"gpu:{model}:{count}" for model, count in sorted(models.items()) if count) or "no GPUs"
        cut = " (the rest of controller.run_deadline)" if wait < self.wait else ""
        return RegisterResult(
            False,
            last,
            f"after register_command the controller still lists {last.gres or 'no GPUs'!r}, "
            f"not {want}, after {wait:.1f} s{cut}",
            line,
            COMMAND_REMEDY,
        )

    def _no_time(self) -> DeadlineError:
        return DeadlineError("controller.run_deadline reached before the controller could be read back")


def registrar_for(
    settings: ControllerSection,
    environ: Mapping[str, str],
    log: Log,
    sleep: Callable[[float], None] = time.sleep,
    *,
    secrets: tuple[str, ...] = (),
    budget: Budget | None = None,
    details: Details | None = None,
) -> Registrar | None:
    """The registrar for ``controller.register_command``, or None when it is not set.

    The program is resolved now, so a missing one is a configuration error (78) before any
    request is sent.
    """
    if not settings.register_command:
        return None
    resolve(settings.register_command[0], environ, "controller.register_command")
    return Registrar(
        settings.register_command,
        settings.register_timeout,
        settings.register_wait,
        environ,
        log,
        sleep=sleep,
        secrets=secrets,
        budget=budget,
        reserve=settings.timeout,
        details=details or Details(),
    )
