"""A real single-host Slurm 24.11 lab for the end-to-end tests (stdlib + requests only).

``SlurmLab`` wraps the shell scripts in ``lab/slurm/``: ``start.sh`` (munged if needed, slurmctld, slurmd n1/n2),
``start-restd.sh`` (slurmrestd on a unix socket and, with JWT auth, on 127.0.0.1) and ``stop.sh`` (by PID only).
Every lab gets a private ``LAB_DIR`` (a fresh temporary directory) and a free block of 4 ports on 127.0.0.1:
slurmctld = base, slurmd n1/n2 = base+1/+2, JWT slurmrestd = base+3.

Nothing here kills a process by name: the daemons are stopped by ``stop.sh`` from their pid files, after it checked
that each pid still runs this lab's binary with this lab's ``SLURM_CONF``.

Run as root, with Slurm 24.11.5 at ``$SLURM_PREFIX`` (default ``/opt/slurm-24.11``): ``lab/slurm/ensure-slurm.sh``.
"""

from __future__ import annotations

import atexit
import json as jsonlib
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests  # noqa: TID251 - the harness is test code; the brief allows stdlib + requests

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO_ROOT / "lab" / "slurm"
SLURM_VERSION = "slurm 24.11.5"
API = "v0.0.42"
NODES = ("n1", "n2")
ENSURE_HINT = "run `sudo lab/slurm/ensure-slurm.sh` (installs munge/curl and builds Slurm 24.11.5, ~5 min)"


class SlurmLabError(RuntimeError):
    """The lab could not do what was asked (a script or client command failed)."""


class SlurmLabTimeout(SlurmLabError, TimeoutError):
    """``wait_for`` ran out of time; the message names what was awaited and the last observed value."""


def default_prefix() -> Path:
    return Path(os.environ.get("SLURM_PREFIX", "/opt/slurm-24.11"))


def unavailable_reason(prefix: Path | None = None) -> str | None:
    """Why the lab cannot run here (None if it can): not root, or no Slurm 24.11.5 at ``prefix``."""
    prefix = prefix or default_prefix()
    if os.geteuid() != 0:
        return f"the Slurm e2e lab needs root (it starts munged, slurmctld, slurmd; makes device nodes); {ENSURE_HINT}"
    ctld = prefix / "sbin" / "slurmctld"
    if not ctld.exists():
        return f"Slurm is not installed at {prefix} (no {ctld}); {ENSURE_HINT}, or set SLURM_PREFIX"
    try:
        out = subprocess.run([str(ctld), "-V"], check=False, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{ctld} -V failed ({exc}); {ENSURE_HINT}"
    if out != SLURM_VERSION:
        return f"{ctld} -V printed {out!r}, the lab needs {SLURM_VERSION!r}; {ENSURE_HINT}"
    for tool in ("munge", "curl", "runuser", "mknod"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed; {ENSURE_HINT}"
    return None


def _port_free(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the daemons do; ignores TIME_WAIT leftovers
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def pick_port_base(low: int = 20000, high: int = 32000, tries: int = 200) -> int:
    """A base port such that base..base+4 are free on 127.0.0.1 (base+4: a dynamic node's slurmd; base also on
    0.0.0.0: slurmctld binds the wildcard).

    The range stays below Linux's default ephemeral range (32768-60999) so client sockets do not collide with it.
    """
    rng = random.SystemRandom()
    for _ in range(tries):
        base = rng.randrange(low, high - 4)
        if all(_port_free(base + i, "127.0.0.1") for i in range(5)) and _port_free(base, "0.0.0.0"):  # noqa: S104 - a bind test only
            return base
    raise SlurmLabError(f"no 4 consecutive free ports found in {low}-{high} after {tries} tries")


MAX_RESTARTS = 2  # a lab that needs more is broken: its tests fail naming why


class SlurmLab:
    """One lab: a slurmctld, slurmd n1 (gpu:mi300x:8) and n2 (gpu:4,fpga:4), and two slurmrestd.

    Attributes after ``start()``: ``lab_dir``, ``port_base``, ``slurm_conf``, ``env`` (environment for Slurm
    clients: ``SLURM_CONF``, ``PATH``; inherited ``SLURM_*`` variables removed), ``started_munged``, and
    ``timings`` (seconds: ``start``, ``stop``, and a list ``reset``).
    """

    def __init__(
        self,
        prefix: Path | str | None = None,
        lab_dir: Path | str | None = None,
        port_base: int | None = None,
        keep: bool | None = None,
    ) -> None:
        self.prefix = Path(prefix) if prefix else default_prefix()
        self._given_lab_dir = Path(lab_dir).resolve() if lab_dir else None
        self._given_port_base = port_base
        # keep LAB_DIR (logs, state) after stop() for debugging: SLURMLAB_KEEP=1
        self.keep = keep if keep is not None else os.environ.get("SLURMLAB_KEEP", "") not in ("", "0")
        self.lab_dir: Path | None = None
        self.port_base: int | None = None
        self.started_munged = False
        self.timings: dict[str, Any] = {"reset": [], "restarts": []}
        self._running = False
        self._token_cache: dict[str, tuple[str, float]] = {}
        self._baseline: dict[str, dict[str, Any]] = {}
        self._session = requests.Session()
        self._broken: str | None = None
        self._uptime0 = _uptime()  # the kernel lines older than this lab are not its own

    # ------------------------------------------------------------------ paths and environment
    @property
    def slurm_conf(self) -> Path:
        return self._dir / "etc" / "slurm.conf"

    @property
    def rest_url(self) -> str:
        """The JWT slurmrestd, e.g. ``http://127.0.0.1:20123``."""
        assert self.port_base is not None, "lab not started"
        return f"http://127.0.0.1:{self.port_base + 3}"

    @property
    def rest_socket(self) -> Path:
        """The rest_auth/local slurmrestd's unix socket (root clients only)."""
        return self._dir / "slurmrestd.sock"

    @property
    def _dir(self) -> Path:
        assert self.lab_dir is not None, "lab not started"
        return self.lab_dir

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "SQUEUE_", "SINFO_", "SBATCH_", "SCONTROL_", "SCANCEL_"))
        }
        env.update(
            SLURM_CONF=str(self.slurm_conf),  # always: without it clients try "configless" DNS SRV lookups
            SLURM_PREFIX=str(self.prefix),
            LAB_DIR=str(self._dir),
            LAB_PORT=str(self.port_base),
            PATH=f"{self.prefix}/bin:{self.prefix}/sbin:{os.environ.get('PATH', '/usr/bin:/bin')}",
        )
        return env

    # ------------------------------------------------------------------ polling
    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.1) -> Any:
        """Poll ``predicate`` until it succeeds, at most ``timeout`` seconds; return its value.

        ``predicate`` returns either a plain value (truthy = done; the value is what was observed) or a tuple
        ``(ok: bool, observed)``. An exception raised by the predicate counts as "not yet" and is observed.
        On timeout raises ``SlurmLabTimeout`` naming ``what`` and the last observed value.
        """
        deadline = time.monotonic() + timeout
        polls = 0
        last: Any = "<never polled>"
        while True:
            polls += 1
            try:
                result = predicate()
            except Exception as exc:  # observed and retried until the deadline
                ok, last = False, f"raised {type(exc).__name__}: {exc}"
            else:
                if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
                    ok, last = result
                else:
                    ok, last = bool(result), result
                if ok:
                    return last
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SlurmLabTimeout(
                    f"timed out after {timeout:g} s ({polls} polls) waiting for {what}; last observed: {last!r}"
                )
            time.sleep(min(interval, remaining))

    # ------------------------------------------------------------------ life cycle
    def _script(self, name: str, *args: str, timeout: float = 120) -> str:
        """Run a lab script; its output goes to $LAB_DIR/log/scripts.log (a file, so a daemon that inherits the
        descriptor cannot make us wait for EOF) and is returned."""
        log = self._dir / "log" / "scripts.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        start = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as fh:
            fh.write(f"\n$ {name} {' '.join(args)}\n".encode())
            fh.flush()
            try:
                proc = subprocess.run(
                    [str(SCRIPTS_DIR / name), *args],
                    check=False,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    start_new_session=True,  # a Ctrl-C on pytest must not hit the daemons mid-start
                )
            except subprocess.TimeoutExpired as exc:
                raise SlurmLabError(f"{name} {' '.join(args)} did not finish within {timeout} s") from exc
        with open(log, "rb") as fh:
            fh.seek(start)
            out = fh.read().decode(errors="replace")
        if proc.returncode != 0:
            raise SlurmLabError(f"{name} {' '.join(args)} exited {proc.returncode}:\n{out}")
        return out

    def start(self) -> SlurmLab:
        """Start munged (if needed), slurmctld, slurmd n1/n2 and both slurmrestd; wait until usable.

        On failure everything that was started is stopped again and the error carries the log tails.
        """
        if self._running:
            return self
        reason = unavailable_reason(self.prefix)
        if reason:
            raise SlurmLabError(reason)
        t0 = time.monotonic()
        self.lab_dir = self._given_lab_dir or Path(tempfile.mkdtemp(prefix="spurinv-slurmlab-"))
        self.lab_dir.mkdir(parents=True, exist_ok=True)
        self.port_base = self._given_port_base or pick_port_base()
        self._running = True  # from here on stop() has something to clean up
        self._session = requests.Session()
        atexit.register(self.stop)
        try:
            self._script("start.sh", "24.11")
            self.started_munged = (self._dir / "munged.pid").exists()
            self._script("start-restd.sh", "24.11")
            nodes = self.wait_for(self._clean_nodes, 30, "both nodes idle after start")
            self._baseline = {n["name"]: {k: n[k] for k in ("gres", "features", "active_features", "weight")} for n in nodes}
            self.wait_for(lambda: self.rest("GET", f"/slurm/{API}/ping/").status_code == 200, 10, "JWT slurmrestd ping 200")
        except BaseException as exc:
            diag = self.diagnostics()
            try:
                self.stop()
            except Exception as stop_exc:  # reported together with the start failure
                diag += f"\n(stopping after the failed start failed too: {stop_exc})"
            if isinstance(exc, Exception):
                raise SlurmLabError(f"lab start failed: {exc}\n{diag}") from exc
            raise
        self.timings["start"] = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop every daemon by PID (stop.sh, which cancels queued jobs first) and munged if this lab started it.

        Idempotent; removes LAB_DIR unless ``keep``. Raises if a process survived.
        """
        if not self._running:
            return
        t0 = time.monotonic()
        pids = self._pids()
        try:
            self._script("stop.sh", "24.11", "--munge", timeout=90)
            alive = {name: pid for name, pid in pids.items() if _alive(pid)}
            if alive:
                raise SlurmLabError(f"still running after stop.sh: {alive}")
        finally:
            self._running = False
            self._token_cache.clear()
            self._session.close()
            atexit.unregister(self.stop)
            self.timings["stop"] = time.monotonic() - t0
        if not self.keep and self._given_lab_dir is None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _pids(self) -> dict[str, int]:
        if self.lab_dir is None:
            return {}
        pids = {f.stem: _read_pid(f) for f in self.lab_dir.glob("*.pid")}
        return {k: v for k, v in pids.items() if v}

    # ------------------------------------------------------------------ Slurm clients
    def run(self, cmd: str, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (``scontrol``, ``sinfo``, ``squeue`` …) from ``$SLURM_PREFIX/bin`` with the lab's env."""
        argv = [str(self.prefix / "bin" / cmd), *args]
        proc = subprocess.run(
            argv, check=False, env=self.env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if check and proc.returncode != 0:
            raise SlurmLabError(f"{' '.join(argv)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def scontrol(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("scontrol", *args, check=check)

    def token(self, user: str = "root", lifespan: int = 3600) -> str:
        """A fresh JWT for ``user`` (``scontrol token``; root may mint tokens for any user)."""
        out = self.scontrol("token", f"username={user}", f"lifespan={lifespan}").stdout.strip()
        if not out.startswith("SLURM_JWT="):
            raise SlurmLabError(f"unexpected `scontrol token` output: {out!r}")
        return out.removeprefix("SLURM_JWT=")

    def _cached_token(self, user: str) -> str:
        tok, expires = self._token_cache.get(user, ("", 0.0))
        if time.monotonic() > expires:
            tok = self.token(user, 3600)
            self._token_cache[user] = (tok, time.monotonic() + 3000)
        return tok

    def rest(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        user: str = "root",
        token: str | None = None,
        timeout: float = 15,
    ) -> requests.Response:
        """Call the JWT slurmrestd: ``path`` like ``/slurm/v0.0.42/node/n1``. Without ``token`` a cached token for
        ``user`` is used; ``token=""`` sends no token headers at all."""
        headers = {}
        if token != "":
            headers = {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token or self._cached_token(user)}
        return self._session.request(method, self.rest_url + path, json=json, headers=headers, timeout=timeout)

    def node_json(self, name: str, fresh: bool = True) -> dict[str, Any]:
        """``GET /slurm/v0.0.42/node/{name}`` through JWT; the node object (``nodes[0]``).

        Slurm quirk: the single-node RPC behind this path (REQUEST_NODE_INFO_SINGLE) skips
        ``select_g_select_nodeinfo_set_all()``, so ``alloc_cpus``/``alloc_memory``/``tres_used`` and the derived
        MIXED/ALLOCATED/IDLE state are whatever the last *all-nodes* query (``GET /nodes``, sinfo, scontrol show
        node) computed: seconds or minutes stale. With ``fresh`` (default) a ``GET /nodes`` is made first so the
        answer is current; ``fresh=False`` shows exactly what a lone single-node GET returns.
        """
        if fresh:
            self.rest("GET", f"/slurm/{API}/nodes").raise_for_status()
        r = self.rest("GET", f"/slurm/{API}/node/{name}")
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
        if r.status_code != 200 or not body or not body.get("nodes"):
            raise SlurmLabError(f"GET node {name}: HTTP {r.status_code}: {r.text[:2000]}")
        node: dict[str, Any] = body["nodes"][0]
        return node

    def nodes(self) -> list[dict[str, Any]]:
        """All nodes as JSON via ``scontrol --json show node`` (no slurmrestd involved)."""
        nodes: list[dict[str, Any]] = jsonlib.loads(self.scontrol("--json", "show", "node").stdout)["nodes"]
        return nodes

    def jobs(self) -> list[int]:
        """Ids of jobs not yet finished (squeue's default states: pending, running, completing, …)."""
        out = self.run("squeue", "-h", "-o", "%A").stdout.split()
        return [int(j) for j in out]

    def sbatch(self, node: str, *args: str, wrap: str | None = "sleep 3600") -> int:
        """Submit a batch job pinned to ``node``; extra sbatch ``args`` go before the script. The default job sleeps
        for an hour (use ``scancel``); pass ``wrap=None`` and a script path in ``args`` for your own script."""
        argv = [
            "--parsable",
            f"--nodelist={node}",
            f"--chdir={self._dir / 'jobs'}",
            f"--output={self._dir / 'jobs' / 'slurm-%j.out'}",
        ]
        if wrap is not None:
            argv.append(f"--wrap={wrap}")
        out = self.run("sbatch", *argv, *args).stdout.strip()
        return int(out.split(";")[0])

    def scancel(self, job_id: int, wait: bool = True, timeout: float = 30) -> None:
        """Cancel a job; with ``wait`` return only when squeue no longer lists it."""
        self.run("scancel", str(job_id))
        if wait:
            self.wait_for(lambda: (job_id not in (j := self.jobs()), j), timeout, f"job {job_id} to leave the queue")

    # ------------------------------------------------------------------ reset
    def _clean_nodes(self) -> tuple[bool, Any]:
        """(all nodes clean, per-node summary): IDLE with no flags, nothing allocated, no reason/comment/extra,
        and (once known) the GRES/features/weight seen right after start."""
        nodes = self.nodes()
        summary, ok = {}, len(nodes) == len(NODES)
        for n in nodes:
            s = {k: n.get(k) for k in ("state", "alloc_cpus", "reason", "comment", "extra", "gres", "gres_used")}
            summary[n["name"]] = s
            good = n["state"] == ["IDLE"] and n["alloc_cpus"] == 0 and not n["reason"]
            good = good and not n["comment"] and not n["extra"]
            base = self._baseline.get(n["name"])
            if base:
                good = good and all(n[k] == v for k, v in base.items())
                if not good:
                    s.update({k: n[k] for k in base})
            ok = ok and good
        return ok, (nodes if ok else summary)

    def _daemon_pids(self) -> dict[str, int | None]:
        return {name: _read_pid(self._dir / f"{name}.pid") for name in ("slurmctld", "slurmd-n1", "slurmd-n2")}

    def daemon_pid(self, name: str) -> int:
        """The running pid of the lab's ``slurmctld`` or ``slurmd-<node>``, from its pid file's first line and checked
        against ``/proc/<pid>/exe``, so a signal never reaches another process."""
        pid = _read_pid(self._dir / f"{name}.pid")
        program = name.split("-", 1)[0]
        if pid is None or not self._runs(pid, program):
            raise SlurmLabError(f"{name}.pid names pid {pid}, which is not a running {self.prefix}/sbin/{program}")
        return pid

    def _runs(self, pid: int, program: str) -> bool:
        """``pid`` is alive and runs the lab's ``program``: a stale pid file never gets another process signalled."""
        state, exe = _process(pid)
        return state not in ("gone", "zombie") and exe == self._program(program)

    def _program(self, program: str) -> str:
        """The lab's daemon ``program`` (``slurmctld``, ``slurmd``, ``slurmrestd``) as ``/proc/<pid>/exe`` names it."""
        return os.path.realpath(self.prefix / "sbin" / program)

    def reconfigure(self) -> None:
        """``scontrol reconfigure`` and wait for the handover: 24.11 re-execs slurmctld AND both slurmd under new
        PIDs (pid files rewritten); the old processes exit once the new ones run."""
        old = self._daemon_pids()
        self.scontrol("reconfigure")

        def handed_over() -> tuple[bool, Any]:
            now = self._daemon_pids()
            ok = all(now[k] is not None and now[k] != old[k] and _alive(now[k]) for k in now)
            ok = ok and not any(_alive(p) for p in old.values() if p)
            return ok, {"old": old, "now": now}

        self.wait_for(handed_over, 30, "slurmctld/slurmd re-exec after `scontrol reconfigure`")
        self.wait_for(lambda: self.scontrol("ping", check=False).returncode == 0, 15, "slurmctld answering ping")

    def configure(self, node: str, gres: str, gres_lines: list[str]) -> None:
        """What an operator does after a refused GPU count change: the node's ``Gres=`` in slurm.conf
        and its ``Name=gpu`` lines in gres.conf replaced (the originals kept for :meth:`restore_config`).
        Device files the lines name under ``$LAB_DIR`` are made as character devices (major 226)."""
        for path in (self.slurm_conf, self._gres_conf):
            backup = path.with_suffix(path.suffix + ".orig")
            if not backup.exists():
                shutil.copy2(path, backup)
        lines = []
        for line in self.slurm_conf.read_text().splitlines():
            if line.startswith(f"NodeName={node} "):
                words = [w for w in line.split() if not w.startswith("Gres=")]
                lines.append(" ".join([*words, f"Gres={gres}"] if gres else words))
            else:
                lines.append(line)
        self.slurm_conf.write_text("\n".join(lines) + "\n")
        kept = [line for line in self._gres_conf.read_text().splitlines() if not line.startswith(f"NodeName={node} Name=gpu")]
        self._gres_conf.write_text("\n".join([*kept, *gres_lines]) + "\n")
        for line in gres_lines:
            for file in _files(line):
                if file.startswith(str(self._dir)) and not os.path.exists(file):
                    os.makedirs(os.path.dirname(file), exist_ok=True)
                    minor = int("".join(c for c in file.rsplit("/", 1)[-1] if c.isdigit()) or 0)
                    os.mknod(file, 0o660 | 0o020000, os.makedev(226, minor))

    @property
    def _gres_conf(self) -> Path:
        return self.slurm_conf.parent / "gres.conf"

    def restore_config(self) -> None:
        """Put back slurm.conf and gres.conf as start.sh rendered them and apply them (reconfigure,
        which 24.11 answers by re-executing every slurmd too). A no-op if nothing was changed."""
        changed = False
        for path in (self.slurm_conf, self._gres_conf):
            backup = path.with_suffix(path.suffix + ".orig")
            if backup.exists():
                os.replace(backup, path)
                changed = True
        if changed:
            try:
                self.reconfigure()
            except (SlurmLabError, subprocess.TimeoutExpired) as exc:
                self._recover(f"reconfigure with the configuration put back failed: {exc}", exc)  # renders it afresh

    def restart_slurmd(self, node: str, *args: str) -> None:
        """Stop the node's slurmd by its pid file and start it again (``args`` replace the default
        ``-f $SLURM_CONF -N node``); wait until the controller hears from it."""
        pid = _read_pid(self._dir / f"slurmd-{node}.pid")
        if pid and self._runs(pid, "slurmd"):
            os.kill(pid, 15)
            self.wait_for(lambda: not _alive(pid), 30, f"slurmd {node} (pid {pid}) to exit")
        argv = [str(self.prefix / "sbin" / "slurmd"), *(args or ("-f", str(self.slurm_conf), "-N", node))]
        subprocess.run(argv, check=True, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        self.wait_for(lambda: _alive(_read_pid(self._dir / f"slurmd-{node}.pid")), 15, f"slurmd {node} pid file")

    # ------------------------------------------------------------------ dynamic nodes (slurmd -Z)
    def dynamic_port(self) -> int:
        assert self.port_base is not None, "lab not started"
        return self.port_base + 4

    def dynamic_env_file(self, name: str) -> Path:
        return self._dir / "etc" / f"slurmd-{name}.env"

    def restart_dynamic_argv(self, name: str) -> list[str]:
        """The lab's ``systemctl restart slurmd`` for dynamic node ``name``: slurmd-dynamic.sh."""
        return [str(SCRIPTS_DIR / "slurmd-dynamic.sh"), name, str(self.dynamic_port()), str(self.dynamic_env_file(name))]

    def start_dynamic(self, name: str, gres: str, gres_lines: list[str]) -> None:
        """Start a dynamic node (``slurmd -Z --conf "… Gres=<gres>"``) with its gres.conf lines (device files
        under ``$LAB_DIR`` made as character devices); wait until the controller lists it idle."""
        self.configure(name, "", gres_lines)  # gres.conf only: a dynamic node has no slurm.conf line
        self.dynamic_env_file(name).write_text(f"SLURMD_GRES={gres}\n")
        subprocess.run(self.restart_dynamic_argv(name), check=True, env=self.env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)  # fmt: skip

        def listed() -> tuple[bool, Any]:
            node = next((n for n in self.nodes() if n["name"] == name), None)
            # a dynamic node's state carries DYNAMIC_NORM
            ok = bool(node and node["state"][:1] == ["IDLE"] and "DRAIN" not in node["state"] and node["gres"] == gres)
            return ok, node and (node["state"], node["gres"], node["reason"])

        self.wait_for(listed, 30, f"dynamic node {name} idle with {gres}")

    def stop_dynamic(self, name: str) -> None:
        """Stop the dynamic node's slurmd (by its pid file), delete the node, put gres.conf back."""
        pid = _read_pid(self._dir / f"slurmd-{name}.pid")
        if pid and self._runs(pid, "slurmd"):
            os.kill(pid, 15)
            self.wait_for(lambda: not _alive(pid), 30, f"slurmd {name} (pid {pid}) to exit")
        (self._dir / f"slurmd-{name}.pid").unlink(missing_ok=True)
        if ids := self.jobs():
            self.run("scancel", *map(str, ids))
            self.wait_for(lambda: (not (j := self.jobs()), j), 30, "all jobs to leave the queue")
        self.wait_for(
            lambda: (
                self.scontrol("delete", f"nodename={name}", check=False).returncode == 0
                or name not in [n["name"] for n in self.nodes()]
            ),
            30,
            f"dynamic node {name} deleted",
        )
        self.restore_config()

    def reset(self) -> None:
        """Bring both nodes back to a clean idle state (see ``_clean_nodes``) between tests.

        1. cancel every job and wait until the queue is empty;
        2. ``scontrol reconfigure`` (drops REST-made gres/features/weight changes) and wait for the re-exec;
        3. clear ``comment`` and ``extra``; resume nodes that are drained, down or failed;
        4. a node that still carries a reason gets a trivial job: without accounting, RESUME leaves the old reason
           (23.11+), and only an allocation clears it;
        5. wait until both nodes are clean.

        A reset that fails restarts the lab (see ``_restart``) and resets the fresh one.
        """
        if self._broken:
            raise SlurmLabError(f"the lab broke in an earlier test, not reset: {self._broken}")
        t0 = time.monotonic()
        try:
            self._reset()
            if trouble := self.lab_trouble():  # e.g. the JWT slurmrestd, which the reset never calls
                raise SlurmLabError(f"after the reset: {trouble}")
        except (SlurmLabError, subprocess.TimeoutExpired) as exc:
            self._recover(f"reset failed: {exc}", exc)
            try:
                self._reset()
            except (SlurmLabError, subprocess.TimeoutExpired) as again:
                self._broken = f"reset failed after a restart: {str(again).splitlines()[0]}"
                raise SlurmLabError(f"reset failed after a restart: {again}\n{self.diagnostics()}") from again
        self.timings["reset"].append(time.monotonic() - t0)

    def lab_trouble(self) -> str | None:
        """Why the lab itself cannot serve, or None: a daemon it needs gone or stopped (for 3 s: a
        re-exec at reconfigure rewrites the pid files), slurmctld not answering ``scontrol ping``,
        or the JWT slurmrestd not answering its ping."""
        try:  # a re-exec at reconfigure rewrites the pid files: trouble that clears within 3 s is none
            self.wait_for(lambda: ((trouble := self.daemon_trouble()) is None, trouble), 3, "every daemon running")
        except SlurmLabTimeout:
            return self.daemon_trouble() or "a daemon came and went for 3 s"
        try:
            ping = self.scontrol("ping", check=False)
        except subprocess.TimeoutExpired:
            return "scontrol ping: no answer within 30 s"
        if ping.returncode != 0:
            return f"scontrol ping exited {ping.returncode}: {(ping.stdout + ping.stderr).strip()}"
        try:
            code = self.rest("GET", f"/slurm/{API}/ping/", timeout=10).status_code
        except requests.RequestException as exc:
            return f"JWT slurmrestd: {type(exc).__name__}"
        return None if code == 200 else f"JWT slurmrestd ping: HTTP {code}"

    def _recover(self, why: str, exc: BaseException) -> None:
        """After ``exc``: restart the lab if it is itself in trouble (:meth:`lab_trouble`). When every
        daemon runs and answers, the failure is the caller's (a reset's own, a test's leftovers):
        raised as it is, never turned green by a fresh lab."""
        trouble = self.lab_trouble()
        if not trouble:
            raise SlurmLabError(f"{why}\n(every daemon running and answering)\n{self.diagnostics()}") from exc
        self._restart(why, trouble)

    def _restart(self, why: str, trouble: str) -> None:
        """Stop the lab and start a fresh one, at most ``MAX_RESTARTS`` times a run, when the lab
        itself is in trouble (:meth:`lab_trouble`) at a reset or at putting the configuration back;
        a reset that fails while every daemon answers fails as it is.
        Slurm 24.11's daemons re-execute at every reconfigure, and one in some hundred runs a lab
        stopped answering for good (CI on faf48a42, cause unknown). What was seen is kept in
        ``timings["restarts"]`` and printed with the run's summary; past the limit the lab is
        broken, and the tests after fail at once naming why."""
        test = os.environ.get("PYTEST_CURRENT_TEST", "outside a test")  # e.g. "tests/e2e/x.py::test_y (setup)"
        seen = f"{why.splitlines()[0]}; {trouble}; in {test}"
        detail = "\n".join(line for line in why.splitlines()[1:6] if line.strip())  # the client's stderr
        record = f"{seen}\n{detail}\n{self.diagnostics(10)}"
        if len(self.timings["restarts"]) >= MAX_RESTARTS:
            self._broken = seen
            raise SlurmLabError(f"{why}\n{self.diagnostics()}")
        self.timings["restarts"].append(record)
        try:
            self.stop()
            self.start()
        except SlurmLabError as exc:
            self._broken = f"{seen}; the restart failed too: {str(exc).splitlines()[0]}"
            raise SlurmLabError(f"{why}\n--- then the restart failed: {exc}") from exc

    def _reset(self) -> None:
        if ids := self.jobs():
            self.run("scancel", *map(str, ids))
            self.wait_for(lambda: (not (j := self.jobs()), j), 30, "all jobs to leave the queue")
        self.reconfigure()
        self.scontrol("update", f"nodename={','.join(NODES)}", "comment=", "extra=")
        for n in self.nodes():
            if {"DRAIN", "DOWN", "FAIL"} & set(n["state"]):
                self.scontrol("update", f"nodename={n['name']}", "state=resume")

        def all_idle() -> tuple[bool, Any]:
            states = {n["name"]: n["state"] for n in self.nodes()}
            return all(s == ["IDLE"] for s in states.values()), states

        self.wait_for(all_idle, 30, "both nodes IDLE (no DRAIN/NOT_RESPONDING) after resume")
        stale = [n["name"] for n in self.nodes() if n["reason"]]
        if stale:
            jobs = [self.sbatch(name, wrap="true") for name in stale]
            self.wait_for(lambda: (not (set(jobs) & set(j := self.jobs())), j), 30, f"reason-clearing jobs {jobs}")
        self.wait_for(self._clean_nodes, 30, "both nodes clean and idle after reset")

    # ------------------------------------------------------------------ diagnostics
    def log_tail(self, name: str, lines: int = 40) -> str:
        """Last ``lines`` of a lab log: slurmctld, slurmd-n1, slurmd-n2, slurmrestd-jwt, slurmrestd-local, scripts."""
        if self.lab_dir is None:
            return "<lab not started>"
        path = self.lab_dir / "log" / (name if name.endswith(".log") else f"{name}.log")
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"<{path}: {exc}>"

    def daemons(self) -> dict[str, tuple[int | None, str, str]]:
        """Each daemon its pid file names: (pid, what ``/proc`` says of it: running, sleeping, stopped,
        zombie or gone, the program it runs)."""
        if self.lab_dir is None:
            return {}
        seen = {}
        for path in sorted(self.lab_dir.glob("*.pid")):
            pid = _read_pid(path)
            seen[path.stem] = (pid, *_process(pid))
        return seen

    def daemon_trouble(self) -> str | None:
        """Why the lab cannot answer any more, if a daemon every test needs is gone or stopped (SIGSTOP)."""
        for name, (pid, state, exe) in self.daemons().items():
            if name in ("slurmctld", "slurmd-n1", "slurmd-n2", "slurmrestd-jwt") and (
                state not in ("running", "sleeping", "disk-wait") or exe != self._program(name.split("-", 1)[0])
            ):
                return f"{name}.pid names pid {pid}: {state} {exe}".rstrip()
        return None

    def diagnostics(self, lines: int = 25) -> str:
        """The logs' tails, slurmctld's last, then each daemon's state and the kernel's last word on
        Slurm (a crash, the OOM killer): the end of a long CI log is what gets read."""
        names = ("scripts", "slurmd-n1", "slurmd-n2", "slurmrestd-jwt", "slurmrestd-local", "slurmctld")
        logs = "\n".join(f"--- {self.lab_dir}/log/{n}.log (tail)\n{self.log_tail(n, lines)}" for n in names)
        daemons = "\n".join(f"{name}: pid {pid} {state} {exe}".rstrip() for name, (pid, state, exe) in self.daemons().items())
        return f"{logs}\n--- daemons (pid files, /proc)\n{daemons}\n--- kernel\n{_kernel_words(self._uptime0)}"


def _files(gres_line: str) -> list[str]:
    """The device files a gres.conf line's ``File=`` names (``a[1-3,5]`` expanded)."""
    from spurinv.inventory.slurmconf import expand_all

    return expand_all(next((w.removeprefix("File=") for w in gres_line.split() if w.startswith("File=")), ""))


def _read_pid(path: Path) -> int | None:
    """The pid in a pid file, from its first line only: on `scontrol reconfigure` slurmctld 24.11 rewrites its pid
    file in place (rewind + write, no truncate), so after a pid wrap-around (e.g. 32655 -> 484) the file reads
    "484\\n5\\n". None if the file is missing or (momentarily) empty."""
    try:
        first = path.read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


_STATES = {"R": "running", "S": "sleeping", "D": "disk-wait", "T": "stopped", "t": "traced", "Z": "zombie"}


def _uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def _kernel_words(since: float = 0.0, lines: int = 8) -> str:
    """The kernel log's last lines on Slurm, segfaults and the OOM killer (``dmesg``; root reads it)
    since ``since`` seconds after boot: an OOM kill of hours before is not this lab's."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, errors="replace", timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"<dmesg: {exc}>"
    words = ("slurm", "segfault", "Out of memory", "oom-kill", "traps:")
    found = [line for line in out.splitlines() if any(w in line for w in words) and _stamp(line) >= since]
    return "\n".join(found[-lines:]) or f"<nothing since {since:.0f} s after boot>"


def _stamp(line: str) -> float:
    """``[38638.053572] …``: seconds after boot (0 if the line has no stamp)."""
    try:
        return float(line[1 : line.index("]")]) if line.startswith("[") else 0.0
    except ValueError:
        return 0.0


def _process(pid: int | None) -> tuple[str, str]:
    """What ``/proc`` says of ``pid``: its state (running, sleeping, disk-wait, stopped, traced, zombie, or
    gone) and the program it runs (``""`` when unreadable: a zombie's, say)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text() if pid else ""
    except OSError:
        stat = ""
    if not stat:
        return "gone", ""
    state = stat.rsplit(")", 1)[1].split()[0]
    try:
        exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        exe = ""
    return _STATES.get(state, state), exe


def _alive(pid: int | None) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    return _process(pid)[0] not in ("gone", "zombie")
