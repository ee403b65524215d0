"""``spurinv-slurm-dynamic``: re-register a Slurm dynamic node (``slurmd -Z``) with new GPUs.

A ``controller.register_command`` for dynamic nodes, shipped with spurinv (a second console
script). Slurm 24.11 keeps a dynamic node's GRES from its first registration: a slurmd restart
with a new ``--conf "… Gres=…"`` is ignored until the node is deleted (``scontrol delete
nodename=N``, refused while jobs run); delete + restart registers the new count (measured on the
lab, tests/e2e/test_dynamic_lab.py). spurinv runs this only on a node idle of every job, with:

``SPURINV_NODE`` the node, ``SPURINV_GRES`` the complete GRES to register, ``SPURINV_GRES_CONF``
its gres.conf lines, ``SPURINV_FINGERPRINT`` and ``SPURINV_INVENTORY`` (spurinv/controller/registration.py).

What it does, each step skipped when already done (so a second run after a crash is safe):

1. reads the node; one not in a plain state (DOWN, FAIL, MAINT, RESERVED, …) or with a drain or
   reason that is not spurinv's by the ownership rule (spurinv/controller/ownership.py) is refused (exit
   77: a delete would drop it); an absent node was deleted by a run that died: go on;
2. checks, before writing anything: the restart program exists, gres.conf is a regular file
   and has no line but the node's own that could give it GPUs (exit 78, naming the line);
3. writes the node's gres.conf lines into ``--gres-conf`` (its other lines kept byte for byte)
   and ``NAME=<gres>`` into ``--env-file`` (the file the site's slurmd unit reads, so its
   ``--conf "… Gres=${NAME}"`` carries the new GRES), each atomically;
4. saves ``extra`` and ``comment`` to ``--saved`` (0600), then ``scontrol delete nodename=N``:
   refused (jobs running) → exit 75, spurinv drains and retries;
5. runs ``--restart`` (default ``systemctl restart slurmd``);
6. waits up to ``--wait`` seconds for the node to come back, and puts back what the delete
   dropped (the admin's ``extra``, byte for byte; spurinv then splices its record into it).
   Steps 4-6 hold SIGTERM/SIGINT/SIGHUP; a run that fails in them leaves ``--saved`` for the next.

Stdlib only; exit statuses follow sysexits.h.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import NoReturn, TextIO

from spurinv.controller.ownership import controller_claim, owns
from spurinv.hostlist import split as split_hostlist

EX_OK, EX_USAGE, EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL, EX_NOPERM, EX_CONFIG = 0, 64, 69, 70, 75, 77, 78


class Failed(Exception):
    """A step failed: the message for stderr and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


Runner = Callable[[Sequence[str], float], subprocess.CompletedProcess[str]]


def _run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


# Slurm's key/value rule (src/common/parse_config.c, _keyvalue_regex): spaces around "=", an
# operator before it, a double-quoted value
_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*([-*+/]?)=\s*(?:"([^"]*)"|(\S+))')
_PLAIN = re.compile(r"[A-Za-z]+=[^\s\"]*")


def in_hostlist(node: str, hostlist: str) -> bool:
    """Is ``node`` one of the hosts ``hostlist`` names (``d1``, ``d[1-4,7]``, ``a,b[01-02]``, ``ALL``)?
    By pattern, never expanded (a list of a million hosts costs nothing)."""
    for part in split_hostlist(hostlist):
        if part.upper() == "ALL" or part == node:
            return True
        pieces = re.split(r"\[([^\]]*)\]", part)
        literals, ranges = pieces[0::2], pieces[1::2]
        pattern = "".join(re.escape(text) + (r"([0-9]+)" if i < len(ranges) else "") for i, text in enumerate(literals))
        match = re.fullmatch(pattern, node) if ranges else None
        if match and all(_in_ranges(number, spec) for number, spec in zip(match.groups(), ranges, strict=True)):
            return True
    return False


def _in_ranges(digits: str, spec: str) -> bool:
    for item in spec.split(","):
        low, _, high = item.partition("-")
        if not (low.isascii() and low.isdigit()) or (high and not (high.isascii() and high.isdigit())):
            continue
        if max(len(low), len(high), len(digits)) > 18:  # no device number; int() of 4,301 digits raises
            continue
        width = len(low) if low.startswith("0") and len(low) > 1 else 0
        if width and len(digits) != width:
            continue
        if int(low) <= int(digits) <= int(high or low):
            return True
    return False


def gres_conf_pairs(line: str) -> tuple[dict[str, str], bool] | None:
    """One gres.conf line's ``Key=value`` pairs as Slurm reads them (keys in any case and order,
    lowered here; ``#`` to the end of the line a comment; ``Key = "value"``, ``Key+=value``), and
    whether every pair is in the plain ``Key=value`` form this program writes. None for an
    ``Include`` line: what it names cannot be judged from here."""
    body = line.split("#", 1)[0]
    if re.match(r"\s*include\s", body, re.IGNORECASE):
        return None
    fields: dict[str, str] = {}
    plain, position = True, 0
    while position < len(body) and body[position:].strip():
        match = _PAIR.match(body, position)
        if match is None:  # Slurm refuses the file over it; judge the pairs that are there
            plain, position = False, len(body) - len(body[position:].lstrip())
            position += len(body[position:].split(None, 1)[0])
            continue
        key, operator, quoted, bare = match.groups()
        fields[key.lower()] = quoted if quoted is not None else bare
        plain = plain and not operator and _PLAIN.fullmatch(match.group(0).strip()) is not None
        position = match.end()
    return fields, plain


def gres_conf_fields(line: str) -> dict[str, str]:
    """:func:`gres_conf_pairs`'s fields; a line that is no pairs has none."""
    parsed = gres_conf_pairs(line)
    return parsed[0] if parsed else {}


def merged_gres_conf(current: str, node: str, lines: str) -> str:
    """``current`` with the node's own ``Name=gpu`` lines (``NodeName=<node>``, keys in any case
    and order) replaced by ``lines``: every other line kept byte for byte (CRLF too), in place;
    the new lines go where the first old one was, else at the end. A line that could also give
    this node GPUs by Slurm's key/value rule (no ``NodeName=``, a host list or ``ALL`` naming it,
    ``AutoDetect=`` other than off, quotes, spaces or an operator around ``=``), a continued line
    and a line that is not pairs (``Include``) are refused: :class:`Failed`, exit 78, naming the line. Pure."""
    new = [line for line in lines.splitlines() if line.strip()]
    out: list[str] = []
    placed = False
    ending = "\r\n" if "\r\n" in current else "\n"
    for number, line in enumerate(current.splitlines(keepends=True), 1):
        bare = line.rstrip("\r\n")
        if bare.split("#", 1)[0].rstrip().endswith("\\"):
            raise Failed(f"gres.conf line {number} is continued (\\): it cannot be merged safely: {bare[:120]!r}", EX_CONFIG)
        parsed = gres_conf_pairs(bare)
        if parsed is None:
            raise Failed(f"gres.conf line {number} is an Include: the lines it names cannot be checked safely: "
                         f"{bare[:120]!r}", EX_CONFIG)  # fmt: skip
        fields, plain = parsed
        names = fields.get("nodename")
        applies = names is None or in_hostlist(node, names)
        if applies and fields.get("autodetect", "off").lower() != "off":
            raise Failed(f"gres.conf line {number} auto-detects GPUs for {node} ({bare[:120]!r}): it would add to or "
                         "override the lines written here; remove it for this node", EX_CONFIG)  # fmt: skip
        if applies and fields.get("name", "").lower() == "gpu":
            if names != node or not plain:
                raise Failed(f"gres.conf line {number} gives {node} GPUs too ({bare[:120]!r}): give the node its own "
                             f"NodeName={node} lines, or none", EX_CONFIG)  # fmt: skip
            if not placed:
                out += [n + ending for n in new]
                placed = True
            continue
        out.append(line)
    if out and not out[-1].endswith("\n"):
        out[-1] += ending
    if not placed:
        out += [n + ending for n in new]
    return "".join(out)


def same_gres(listed: str, wanted: str) -> bool:
    """Do two GRES strings name the same entries, ignoring the ``(S:0-1)`` socket suffix Slurm
    adds when gres.conf has ``Cores=`` and the entry order?"""

    def entries(text: str) -> list[str]:
        return sorted(e.strip() for e in re.split(r",(?![^(]*\))", re.sub(r"\([^)]*\)", "", text)) if e.strip())

    return entries(listed) == entries(wanted)


def env_line(name: str, gres: str) -> str:
    """``NAME=value`` as systemd's EnvironmentFile= and a POSIX shell both read it."""
    return f"{name}={gres}\n"


def read_file(path: str) -> str | None:
    """A regular file's text (bytes that are not UTF-8 kept as surrogates, written back as they
    were); None when absent. A FIFO, device or symlink is refused (exit 78) without blocking."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise Failed(f"{path}: {error.strerror} (a symlink is refused)", EX_CONFIG) from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise Failed(f"{path}: not a regular file", EX_CONFIG)
        return handle.read(1 << 24).decode("utf-8", "surrogateescape")


def write_if_changed(path: str, text: str, new_mode: int = 0o644) -> bool:
    """Write ``text`` to ``path`` atomically (same directory, fsync, rename) unless it already
    holds it; keep the file's mode. Returns whether it was written."""
    if read_file(path) == text:
        return False
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = new_mode
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=".spurinv-", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
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


# flags a delete and re-create cannot lose: the node comes back the same (Slurm's
# node_state_string; COMPLETING, MIXED, ALLOCATED make the delete refuse on its own)
PLAIN = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING", "DYNAMIC_NORM", "DYNAMIC_FUTURE", "CLOUD"})
# what the delete drops and the run puts back (scontrol update keys, scontrol --json fields)
RESTORED = (("Extra", "extra"), ("Comment", "comment"))


def not_plain(view: Mapping[str, object], node: str) -> str | None:
    """Why the node must not be deleted, or None: a state other than :data:`PLAIN` (DOWN, FAIL,
    MAINT, RESERVED, …), or a drain or reason that is not spurinv's own by the ownership rule
    (spurinv/controller/ownership.py: the drain id in the reason, the record in ``extra``)."""
    state = view.get("state") or []
    flags = {str(flag) for flag in state} if isinstance(state, list) else {str(state)}
    reason = str(view.get("reason") or "")
    drained = "DRAIN" in flags
    ours = bool(reason) and owns(drained, reason, None, controller_claim(node, reason, view.get("extra")))
    if odd := sorted(flags - PLAIN - ({"DRAIN"} if ours else set())):
        return f"state {'+'.join(odd)}" + (f" ({reason!r})" if reason else "")
    if reason and not ours:
        return f"reason {reason!r} is not spurinv's"
    return None


class Saved:
    """What the delete drops, kept in a 0600 file next to the env file before the delete and
    removed once it is back on the node: a run killed between the two restores it next time."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def load(self, node: str) -> dict[str, str] | None:
        if self.path is None:
            return None
        text = read_file(self.path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            raise Failed(f"{self.path}: not JSON; put the node's attributes back by hand, then remove it", EX_CONFIG) from None
        if not isinstance(value, dict) or value.get("node") != node:
            raise Failed(f"{self.path}: saved for another node; restore it by hand, then remove it", EX_CONFIG)
        return {k: v for k, v in value.items() if isinstance(v, str) and k != "node"}

    def save(self, node: str, values: dict[str, str]) -> None:
        if self.path is not None:
            write_if_changed(self.path, json.dumps({"node": node, **values}, sort_keys=True) + "\n", 0o600)

    def drop(self) -> None:
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class Deferred:
    """SIGTERM, SIGINT and SIGHUP held until the critical section (delete → restart → restore)
    is over, so a stop mid-way never leaves the node deleted with nothing put back. A Python
    handler, not a blocked mask: children (systemctl) still get the default dispositions."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self) -> None:
        self.pending: int | None = None
        self.before: list[object] = []

    def __enter__(self) -> Deferred:
        with contextlib.suppress(ValueError):  # not the main thread: nothing to hold
            self.before = [signal.signal(sig, self._hold) for sig in self.SIGNALS]
        return self

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self.pending = signum

    def __exit__(self, *exc: object) -> None:
        for sig, before in zip(self.SIGNALS, self.before, strict=False):
            signal.signal(sig, before)  # type: ignore[arg-type]
        if self.pending is not None and exc[0] is None:
            raise Failed(f"stopped by signal {self.pending} (after the node was put back)", EX_TEMPFAIL)


def register(options: argparse.Namespace, environ: Mapping[str, str], run: Runner = _run,
             sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic) -> str:  # fmt: skip
    """Do it; return what was done (for stdout); raise :class:`Failed`."""
    node, gres = environ.get("SPURINV_NODE", ""), environ.get("SPURINV_GRES")
    if not node or gres is None:
        raise Failed("SPURINV_NODE and SPURINV_GRES are not set: run me as spurinv's controller.register_command", EX_USAGE)
    lines = environ.get("SPURINV_GRES_CONF", "")
    timeout = options.timeout
    saved = Saved(options.saved)
    kept = saved.load(node)
    view = read_node(options.scontrol, node, run, timeout)
    done: list[str] = []
    if kept and view is not None:  # before anything else: see _restore_saved
        view, done = _restore_saved(options, node, kept, view, run, saved)
        kept = None
    if view is not None and (why := not_plain(view, node)):
        raise Failed(f"node {node}: {why}; a delete would drop it: not touching it", EX_NOPERM)
    # everything that can refuse is checked before anything is written or deleted
    merged = merged_gres_conf(read_file(options.gres_conf) or "", node, lines) if options.gres_conf else None
    if shutil.which(options.restart[0]) is None:
        raise Failed(f"--restart program {options.restart[0]!r} is not found or not executable: not deleting", EX_CONFIG)
    wrote = len(done)
    if options.gres_conf and merged is not None and write_if_changed(options.gres_conf, merged):
        done.append(f"wrote {options.gres_conf}")
    if options.env_file and write_if_changed(options.env_file, env_line(options.env_name, gres)):
        done.append(f"wrote {options.env_file}")
    if view is not None and same_gres(str(view.get("gres") or ""), gres) and len(done) == wrote:
        if done:
            return f"node {node}: " + "; ".join(done) + f"; already registered with {gres}"
        return f"node {node} already registered with {gres}; nothing to do"
    if view is not None and not kept:  # a saved file is an earlier run's: the truth, not the re-created node
        kept = {key: str(view.get(field) or "") for key, field in RESTORED if view.get(field)}
    with Deferred():
        if view is not None:
            saved.save(node, kept or {})
            deleted = run([options.scontrol, "delete", f"nodename={node}"], timeout)
            if deleted.returncode != 0:
                saved.drop()
                text = " ".join((deleted.stdout + deleted.stderr).split())[-300:]
                raise Failed(f"scontrol delete nodename={node} was refused (jobs running?): {text}", EX_TEMPFAIL)
            done.append(f"deleted node {node}")
        restarted = run(options.restart, timeout)
        if restarted.returncode != 0:
            text = " ".join((restarted.stdout + restarted.stderr).split())[-300:]
            raise Failed(f"`{shlex.join(options.restart)}` exited {restarted.returncode}: {text}"
                         + (f"; {options.saved} keeps what to put back" if kept else ""), EX_UNAVAILABLE)  # fmt: skip
        done.append(f"ran {shlex.join(options.restart)}")
        if kept:  # the delete dropped them: put them back once the node is there again
            ends = monotonic() + options.wait
            while (back := read_node(options.scontrol, node, run, timeout)) is None and monotonic() < ends:
                sleep(0.5)
            if back is None:
                raise Failed(f"node {node} did not come back within {options.wait:g} s; "
                             f"{options.saved or 'nothing'} keeps what to put back", EX_UNAVAILABLE)  # fmt: skip
            _restore(options, node, kept, back, run)
            done.append(f"restored its {', '.join(k.lower() for k in sorted(kept))}")
        saved.drop()
    return f"node {node}: " + "; ".join(done) + f" (Gres={gres})"


def restore_plan(node: str, kept: Mapping[str, str], back: Mapping[str, object], saved: str | None) -> list[tuple[str, str]]:
    """The ``(key, value)`` updates that put ``kept`` back on the node as it is now (``back``):
    only into an empty field (what the delete leaves); a field equal to the saved value needs
    nothing. A non-empty field that differs is someone's newer value: never overwritten,
    :class:`Failed` (78) naming both, the saved file left for the admin. Pure."""
    updates = []
    for key, field in RESTORED:
        if key not in kept:
            continue
        now = str(back.get(field) or "")
        if now == kept[key]:
            continue
        if now:
            raise Failed(f"node {node}: its {field} is {now!r} but {saved or 'the saved file'} holds {kept[key]!r} "
                         "from before the delete; keeping the node's; merge them by hand, then remove the file",
                         EX_CONFIG)  # fmt: skip
        updates.append((key, kept[key]))
    return updates


def _restore_saved(options: argparse.Namespace, node: str, kept: dict[str, str], view: Mapping[str, object],
                   run: Runner, saved: Saved) -> tuple[dict[str, object], list[str]]:  # fmt: skip
    """An earlier run deleted the node and died or failed once it was back, whatever GRES it came
    back with: put the saved attributes back before anything else (spurinv may already count the
    node registered), drop the file, and return the node as it is now."""
    _restore(options, node, kept, view, run)
    saved.drop()
    now = {**view, **{field: kept[key] for key, field in RESTORED if key in kept}}
    return now, [f"restored {', '.join(k.lower() for k in sorted(kept))} saved by an earlier run"]


def _restore(options: argparse.Namespace, node: str, kept: dict[str, str], back: Mapping[str, object], run: Runner) -> None:
    for key, value in restore_plan(node, kept, back, options.saved):
        put = run([options.scontrol, "update", f"nodename={node}", f"{key}={value}"], options.timeout)
        if put.returncode != 0:
            raise Failed(f"node {node} is back, but its {key.lower()} could not be restored: {put.stderr.strip()[-300:]}"
                         f"; {options.saved or 'nothing'} keeps it for the next run", EX_UNAVAILABLE)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # sysexits: a bad command line is EX_USAGE, not 2
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"{self.prog}: {message}\n")


def _identifier(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shell variable name")
    return text


def parser() -> argparse.ArgumentParser:
    parse = _Parser(
        prog="spurinv-slurm-dynamic",
        description="Re-register a Slurm dynamic node (slurmd -Z) with the GPUs spurinv found "
        "(run by spurinv as controller.register_command).",
    )
    parse.add_argument("--gres-conf", metavar="PATH", help="gres.conf to write the node's Name=gpu lines into")
    parse.add_argument("--env-file", metavar="PATH", help="file to write NAME=<gres> into (the slurmd unit's EnvironmentFile=)")
    parse.add_argument("--env-name", metavar="NAME", default="SLURMD_GRES", type=_identifier,
                       help="the variable in --env-file (SLURMD_GRES)")  # fmt: skip
    parse.add_argument("--restart", metavar="COMMAND", default="systemctl restart slurmd", type=shlex.split,
                       help="restarts slurmd (default: systemctl restart slurmd)")  # fmt: skip
    parse.add_argument("--scontrol", metavar="PATH", default="scontrol", help="Slurm's scontrol (default: on PATH)")
    parse.add_argument("--timeout", metavar="SECONDS", type=float, default=30.0, help="for each command (30)")
    parse.add_argument("--wait", metavar="SECONDS", type=float, default=60.0,
                       help="for the node to come back before its extra is restored (60)")  # fmt: skip
    parse.add_argument("--saved", metavar="PATH", help="where the node's extra and comment wait out the delete "
                       "(default: --env-file's path + .saved; 0600)")  # fmt: skip
    parse.add_argument("--lock", metavar="PATH", help="flock against a concurrent run (default: --env-file's path + .lock)")
    return parse


def _say(text: str, stream: TextIO) -> None:
    encoding = stream.encoding or "ascii"  # an ASCII locale must not turn a message into a traceback
    stream.write((text + "\n").encode(encoding, "backslashreplace").decode(encoding, "replace"))
    stream.flush()


@contextlib.contextmanager
def _locked(path: str | None) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created 0600); a concurrent run exits 75."""
    if path is None:
        yield
        return
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Failed(f"{path}: another run holds the lock; try again later", EX_TEMPFAIL) from None
        yield
    finally:
        os.close(descriptor)


def main(argv: Sequence[str] | None = None) -> int:
    options = parser().parse_args(argv)
    if not options.restart:
        _say("spurinv-slurm-dynamic: --restart is empty", sys.stderr)
        return EX_USAGE
    base = options.env_file or options.gres_conf
    options.saved = options.saved or (f"{base}.saved" if base else None)
    options.lock = options.lock or (f"{base}.lock" if base else None)
    try:
        with _locked(options.lock):
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
