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

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from spurinv.errors import ConfigError, ControllerError
from spurinv.nodeview import gres_agrees
from spurinv.transport import RegisterResult, Request

if TYPE_CHECKING:
    from spurinv.config import ControllerSection
    from spurinv.log import Log
    from spurinv.transport import Transport

MAX_OUTPUT = 64 << 10  # bytes kept from the command's output (the tail)
LOGGED = 400  # characters of output put in the log line
_SECRETS = (
    re.compile(r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*"),  # a JWT
    re.compile(r"(?i)\b(bearer|basic)\s+\S+"),
    re.compile(r"(?i)\b([\w-]*(?:token|passw(?:or)?d|secret|api[_-]?key|credential)[\w-]*)\s*[=:]\s*\S+"),
)


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Blank what looks like a credential: JWTs, ``Bearer x``, ``token=x``, and the given strings."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<secret>")
    text = _SECRETS[0].sub("<secret>", text)
    text = _SECRETS[1].sub(lambda m: f"{m.group(1)} <secret>", text)
    return _SECRETS[2].sub(lambda m: f"{m.group(1)}=<secret>", text)


def resolve(program: str, environ: Mapping[str, str], what: str) -> str:
    """The absolute path of ``program`` (a bare name is looked up on ``$PATH``); ConfigError (78)
    when it is missing or not executable."""
    if "/" not in program:
        for directory in (environ.get("PATH") or os.defpath).split(os.pathsep):
            candidate = os.path.join(directory or ".", program)
            if directory.startswith("/") and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
        raise ConfigError(f"{what}: {program!r} is not on PATH")
    if not os.path.isfile(program):
        raise ConfigError(f"{what}: {program} does not exist or is not a regular file")
    if not os.access(program, os.X_OK):
        raise ConfigError(f"{what}: {program} is not executable")
    return program


class Outcome:
    """A finished command: exit status, its output (the last ``limit`` bytes of each stream), and
    whether more was written than kept."""

    def __init__(self, status: int, stdout: str, stderr: str, truncated: bool = False) -> None:
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
        self.truncated = truncated


def run(argv: list[str], environ: Mapping[str, str], timeout: float, *, limit: int = MAX_OUTPUT) -> Outcome:
    """Run ``argv`` without a shell; raise ``subprocess.TimeoutExpired`` (after killing its
    process group) or ``OSError`` (it could not start)."""
    with subprocess.Popen(
        argv,
        env=dict(environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: a timeout kills its children too
    ) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            # A grandchild that left the group (setsid) may hold the pipes open: never wait on it.
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            process.wait()
            raise
        except BaseException:  # SIGTERM, Ctrl-C: never leave the child running
            _kill_group(process)
            raise
    return Outcome(process.returncode, _text(out, limit), _text(err, limit), max(len(out), len(err)) > limit)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _text(data: bytes, limit: int) -> str:
    return data[-limit:].decode("utf-8", errors="replace")


class Registrar:
    """Runs ``controller.register_command`` for one transport and reads the result back."""

    def __init__(
        self,
        argv: tuple[str, ...],
        timeout: float,
        wait: float,
        environ: Mapping[str, str],
        log: Log,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.wait = wait
        self.environ = environ
        self.log = log
        self.sleep = sleep
        self.monotonic = monotonic
        self.secrets = secrets

    def line(self) -> str:
        return f"EXEC {shlex.join(self.argv)}"

    def register(self, client: Transport, models: dict[str, int]) -> RegisterResult:
        """Check the node is idle, run the command once, read back until the GRES agree."""
        before = client.view()
        if not before.idle:
            return RegisterResult(
                False, before, f"the node is no longer idle ({before.busy_text()}); register_command not run", None
            )
        program = resolve(self.argv[0], self.environ, "controller.register_command")
        record = Request("EXEC", shlex.join(self.argv), None)
        position = len(client.sent)
        client.sent.append(record)
        command = shlex.join(self.argv)
        started = self.monotonic()
        try:
            outcome = run([program, *self.argv[1:]], self.environ, self.timeout)
        except subprocess.TimeoutExpired:
            raise ControllerError(
                "unreachable", f"register_command `{command}` did not finish within {self.timeout:g} s; killed"
            ) from None
        except OSError as exc:
            raise ConfigError(f"controller.register_command: cannot run {program}: {exc.strerror or exc}") from None
        client.sent[position] = record = replace(record, status=outcome.status)
        output = scrub(" ".join((outcome.stdout + " " + outcome.stderr).split()), self.secrets)
        tail = output[-LOGGED:] if output else "no output"
        took = self.monotonic() - started
        if outcome.status != 0:
            self.log.error(f"register_command `{command}` exited {outcome.status} after {took:.1f} s: {tail}")
            return RegisterResult(False, before, f"register_command `{command}` exited {outcome.status}: {tail}", record.line())
        self.log.info(f"register_command `{command}` finished in {took:.1f} s: {tail}")
        return self.read_back(client, models, record.line())

    def read_back(self, client: Transport, models: dict[str, int], line: str) -> RegisterResult:
        """Poll the controller for up to ``wait`` seconds until its GPUs match ``models``.

        A controller that is briefly unreachable (slurmctld re-execs on ``scontrol reconfigure``)
        is "not yet"; its error is raised only if it lasts until the end.
        """
        deadline = self.monotonic() + self.wait
        pause = 0.25
        while True:
            error: ControllerError | None = None
            try:
                view = client.view()
            except ControllerError as exc:
                if exc.kind != "unreachable":
                    raise
                error = exc
            else:
                if gres_agrees(view.gres, models):
                    return RegisterResult(True, view, None, line)
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                if error is not None:
                    raise error
                want = ",".join(f"gpu:{model}:{count}" for model, count in sorted(models.items()) if count) or "no GPUs"
                return RegisterResult(
                    False,
                    view,
                    f"after register_command the controller still lists {view.gres or 'no GPUs'!r}, "
                    f"not {want}, after {self.wait:g} s",
                    line,
                )
            self.sleep(min(pause, remaining))
            pause = min(pause * 2, 5.0)


def registrar_for(
    settings: ControllerSection,
    environ: Mapping[str, str],
    log: Log,
    sleep: Callable[[float], None] = time.sleep,
    *,
    secrets: tuple[str, ...] = (),
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
    )
