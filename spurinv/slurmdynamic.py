"""``spurinv-slurm-dynamic``: re-register a Slurm dynamic node (``slurmd -Z``) with new GPUs.

A ``controller.register_command`` for dynamic nodes, shipped with spurinv (a second console
script). Slurm 24.11 keeps a dynamic node's GRES from its first registration: a slurmd restart
with a new ``--conf "… Gres=…"`` is ignored until the node is deleted (``scontrol delete
nodename=N``, refused while jobs run); delete + restart registers the new count (measured on the
lab, tests/e2e/test_dynamic_lab.py). spurinv runs this only on a node idle of every job, with:

``SPURINV_NODE`` the node, ``SPURINV_GRES`` the complete GRES to register, ``SPURINV_GRES_CONF``
its gres.conf lines, ``SPURINV_FINGERPRINT`` and ``SPURINV_INVENTORY`` (spurinv/registration.py).

What it does, each step skipped when already done (so a second run after a crash is safe):

1. reads the node (``scontrol --json show node N``); a node drained by someone else is refused
   (exit 77: a delete would drop their drain and reason); an absent node was deleted by a run
   that died: go on;
2. writes the node's gres.conf lines into ``--gres-conf`` (its other lines kept) and
   ``NAME=<gres>`` into ``--env-file`` (the file the site's slurmd unit reads, so its
   ``--conf "… Gres=${NAME}"`` carries the new GRES), each atomically;
3. ``scontrol delete nodename=N``: refused (jobs running) → exit 75, spurinv drains and retries;
4. runs ``--restart`` (default ``systemctl restart slurmd``);
5. waits up to ``--wait`` seconds for the node to come back, and puts back the ``extra`` the
   delete dropped (the admin's, byte for byte; spurinv then splices its record into it).

Stdlib only; exit statuses follow sysexits.h.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

EX_OK, EX_USAGE, EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL, EX_NOPERM, EX_CONFIG = 0, 64, 69, 70, 75, 77, 78
OURS = "spurinv:"  # the prefix of spurinv's drain reasons (spurinv/ownership.py)


class Failed(Exception):
    """A step failed: the message for stderr and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


Runner = Callable[[Sequence[str], float], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def merged_gres_conf(current: str, node: str, lines: str) -> str:
    """``current`` with the node's ``Name=gpu`` lines replaced by ``lines`` (every other line
    kept, in place: the node's new lines go where its first old one was, else at the end). Pure."""
    new = [line for line in lines.splitlines() if line.strip()]
    out: list[str] = []
    placed = False
    for line in current.splitlines():
        words = line.split()
        if words[:1] == [f"NodeName={node}"] and "Name=gpu" in words:  # never a comment
            if not placed:
                out += new
                placed = True
            continue
        out.append(line)
    if not placed:
        out += new
    return "\n".join(out) + "\n" if out else ""


def env_line(name: str, gres: str) -> str:
    """``NAME=value`` as systemd's EnvironmentFile= and a POSIX shell both read it."""
    return f"{name}={gres}\n"


def write_if_changed(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` atomically (same directory, fsync, rename) unless it already
    holds it; keep the file's mode. Returns whether it was written."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=".spurinv-", dir=directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return True


def read_node(scontrol: str, node: str, run: Runner, timeout: float) -> dict[str, object] | None:
    """The node as ``scontrol --json show node`` gives it; None when the controller does not know it."""
    done = run([scontrol, "--json", "show", "node", node], timeout)
    text = " ".join((done.stdout + done.stderr).split())
    if done.returncode != 0:
        if "Invalid node name" in text or "not found" in text:
            return None
        raise Failed(f"scontrol show node {node} failed ({done.returncode}): {text[-300:]}", EX_UNAVAILABLE)
    try:
        nodes = json.loads(done.stdout).get("nodes") or []
    except (ValueError, AttributeError):
        raise Failed(f"scontrol --json show node {node}: not JSON", EX_UNAVAILABLE) from None
    return next((n for n in nodes if isinstance(n, dict) and n.get("name") == node), None)


def foreign_drain(view: Mapping[str, object]) -> str | None:
    """The reason of a drain someone other than spurinv set, or None."""
    state = view.get("state") or []
    reason = str(view.get("reason") or "")
    if isinstance(state, list) and "DRAIN" in state and not reason.startswith(OURS):
        return reason or "(no reason)"
    return None


def register(options: argparse.Namespace, environ: Mapping[str, str], run: Runner = _run,
             sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic) -> str:  # fmt: skip
    """Do it; return what was done (for stdout); raise :class:`Failed`."""
    node, gres = environ.get("SPURINV_NODE", ""), environ.get("SPURINV_GRES")
    if not node or gres is None:
        raise Failed("SPURINV_NODE and SPURINV_GRES are not set: run me as spurinv's controller.register_command", EX_USAGE)
    lines = environ.get("SPURINV_GRES_CONF", "")
    timeout = options.timeout
    view = read_node(options.scontrol, node, run, timeout)
    if view is not None and (reason := foreign_drain(view)):
        raise Failed(f"node {node} is drained by someone else ({reason!r}); a delete would drop their drain: not touching it",
                     EX_NOPERM)  # fmt: skip
    done = []
    if options.gres_conf and write_if_changed(options.gres_conf, _merged(options.gres_conf, node, lines)):
        done.append(f"wrote {options.gres_conf}")
    if options.env_file and write_if_changed(options.env_file, env_line(options.env_name, gres)):
        done.append(f"wrote {options.env_file}")
    if view is not None and str(view.get("gres") or "") == gres and not done:
        return f"node {node} already registered with {gres}; nothing to do"
    extra = str(view.get("extra") or "") if view is not None else ""
    if view is not None:
        deleted = run([options.scontrol, "delete", f"nodename={node}"], timeout)
        if deleted.returncode != 0:
            text = " ".join((deleted.stdout + deleted.stderr).split())[-300:]
            raise Failed(f"scontrol delete nodename={node} was refused (jobs running?): {text}", EX_TEMPFAIL)
        done.append(f"deleted node {node}")
    restarted = run(options.restart, timeout)
    if restarted.returncode != 0:
        text = " ".join((restarted.stdout + restarted.stderr).split())[-300:]
        raise Failed(f"`{shlex.join(options.restart)}` exited {restarted.returncode}: {text}", EX_UNAVAILABLE)
    done.append(f"ran {shlex.join(options.restart)}")
    if extra:  # the delete dropped it: put it back once the node is there again
        ends = monotonic() + options.wait
        while (back := read_node(options.scontrol, node, run, timeout)) is None and monotonic() < ends:
            sleep(0.5)
        if back is None:
            raise Failed(f"node {node} did not come back within {options.wait:g} s; its extra is not restored", EX_UNAVAILABLE)
        if str(back.get("extra") or "") != extra:
            put = run([options.scontrol, "update", f"nodename={node}", f"Extra={extra}"], timeout)
            if put.returncode != 0:
                raise Failed(f"node {node} is back, but its extra could not be restored: {put.stderr.strip()[-300:]}",
                             EX_UNAVAILABLE)  # fmt: skip
        done.append("restored its extra")
    return f"node {node}: " + "; ".join(done) + f" (Gres={gres})"


def _merged(path: str, node: str, lines: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
    except FileNotFoundError:
        current = ""
    return merged_gres_conf(current, node, lines)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="spurinv-slurm-dynamic",
        description="Re-register a Slurm dynamic node (slurmd -Z) with the GPUs spurinv found "
        "(run by spurinv as controller.register_command).",
    )
    parse.add_argument("--gres-conf", metavar="PATH", help="gres.conf to write the node's Name=gpu lines into")
    parse.add_argument("--env-file", metavar="PATH", help="file to write NAME=<gres> into (the slurmd unit's EnvironmentFile=)")
    parse.add_argument("--env-name", metavar="NAME", default="SLURMD_GRES", help="the variable in --env-file (SLURMD_GRES)")
    parse.add_argument("--restart", metavar="COMMAND", default="systemctl restart slurmd", type=shlex.split,
                       help="restarts slurmd (default: systemctl restart slurmd)")  # fmt: skip
    parse.add_argument("--scontrol", metavar="PATH", default="scontrol", help="Slurm's scontrol (default: on PATH)")
    parse.add_argument("--timeout", metavar="SECONDS", type=float, default=30.0, help="for each command (30)")
    parse.add_argument("--wait", metavar="SECONDS", type=float, default=60.0,
                       help="for the node to come back before its extra is restored (60)")  # fmt: skip
    return parse


def _say(text: str, stream: TextIO) -> None:
    stream.write(text + "\n")
    stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    options = parser().parse_args(argv)
    if not options.restart:
        _say("spurinv-slurm-dynamic: --restart is empty", sys.stderr)
        return EX_USAGE
    try:
        _say(register(options, os.environ), sys.stdout)
    except Failed as failed:
        _say(f"spurinv-slurm-dynamic: {failed}", sys.stderr)
        return failed.status
    except subprocess.TimeoutExpired as expired:
        _say(f"spurinv-slurm-dynamic: `{shlex.join(map(str, expired.cmd))}` took over {expired.timeout:g} s", sys.stderr)
        return EX_UNAVAILABLE
    except OSError as error:
        _say(f"spurinv-slurm-dynamic: {error.filename or ''}: {error.strerror or error}", sys.stderr)
        return EX_CONFIG if isinstance(error, FileNotFoundError | PermissionError) else EX_SOFTWARE
    return EX_OK


if __name__ == "__main__":
    sys.exit(main())
