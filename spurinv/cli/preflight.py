"""``spurinv check``: a read-only preflight, after install and after every config change.

Every check is always reported, in the same order (:data:`NAMES`), as ``ok``, ``warn``, ``fail``
or ``skip`` with a detail and, for ``warn`` and ``fail``, a one-line fix (the command to run or
the key to change). It writes nothing: no state, lock, metrics or controller write. It resolves
the state file, node name and metrics path through the options ``refresh`` is given (the caller
passes the same builder ``refresh`` uses), reads the token with ``config.read_token`` and reaches
the controller through ``refresh``'s transport factory, with one read of this node.

A check that fails carries the exit status ``refresh`` would get from the same problem; the run
exits with the first one (0 when nothing failed; warnings do not fail). The whole run is bounded
by ``controller.run_deadline`` and ends at once on SIGTERM/SIGINT (75, the rest skipped).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from spurinv import exitcode, regularfile, shape
from spurinv.budget import Budget, Signals
from spurinv.cli import schedule
from spurinv.errors import (
    ConfigError,
    ControllerError,
    DeadlineError,
    Interrupted,
    SpurinvError,
    TokenError,
)
from spurinv.inventory.sources.attribute import decimal
from spurinv.inventory.sources.status import has_surrogate
from spurinv.state import store
from spurinv.state.locations import CDI_CACHE, DEFAULT_STATE, same_file

if TYPE_CHECKING:
    from spurinv.config.settings import Config
    from spurinv.controller.nodeview import NodeView
    from spurinv.refresh import Options, World
    from spurinv.report.models import CheckName, CheckResult, CheckStatus
    from spurinv.state.file import State

NAMES: tuple[CheckName, ...] = (
    "config",
    "node",
    "state",
    "lock",
    "metrics",
    "token",
    "controller",
    "permission",
    "register_command",
    "schedule",
    "udev",
)
TIMER = "spurinv-refresh.timer"
SERVICE = "spurinv-refresh.service"
# systemd 252's system unit load path, highest priority first (lookup_paths_init in
# src/basic/path-lookup.c, as `systemd-analyze unit-paths` lists it; /lib: a Debian without
# merged /usr): the first directory holding the unit file is the one loaded, and a drop-in file
# masks one of the same name further down
UNIT_DIRS = ("etc/systemd/system.control", "run/systemd/system.control", "run/systemd/transient",
             "run/systemd/generator.early", "etc/systemd/system", "etc/systemd/system.attached",
             "run/systemd/system", "run/systemd/system.attached", "run/systemd/generator",
             "usr/local/lib/systemd/system", "lib/systemd/system", "usr/lib/systemd/system",
             "run/systemd/generator.late")  # fmt: skip
# the unit directives that pass the token as a credential (systemd.exec(5) "Credentials")
CREDENTIAL_KEYS = ("LoadCredential", "LoadCredentialEncrypted", "ImportCredential", "SetCredential", "SetCredentialEncrypted")
UDEV_DIRS = ("etc/udev/rules.d", "lib/udev/rules.d", "usr/lib/udev/rules.d")
# cron.d and /etc/crontab carry a user field; root's crontab (Debian's spool, RHEL's) does not
CRON_FILES = ("etc/cron.d/spurinv", "etc/crontab", "var/spool/cron/crontabs/root", "var/spool/cron/root")
# the PATH each scheduler gives its runs when it sets none: systemd.exec(5) "Environment variables
# in spawned processes" (a split-usr build, as Debian 12's, adds /sbin:/bin), cron(8) "/usr/bin:/bin"
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CRON_PATH = "/usr/bin:/bin"
TOKEN_WARN_DAYS = 7
# the checks that read only this host's files (and systemctl), run even after the run deadline
LOCAL = ("register_command", "schedule", "udev")
LOCAL_SECONDS = 10.0
PRIVATE_TMP = ("/tmp", "/var/tmp")  # noqa: S108 (what PrivateTmp= replaces, compared with, never written)
LAST_SECOND = shape.PAST_LAST_SECOND  # a JWT's exp this late is no time
MAX_TEXT = 1 << 16  # a crontab or cron.d file is a few kB
# systemd reads a unit file or drop-in whole, refusing only a line of LONG_LINE_MAX bytes or more
# (config_parse: "Line too long"); check reads one whole up to this bound and past it says it
# cannot check the unit
MAX_UNIT_TEXT = 8 << 20
NAMESPACE_FAILS = "does not start (226/NAMESPACE)"
TMPFS_LOST = "what a run writes there is gone after it"
# spurinv runs as root (README.md): its config is 0640 and its token 0600, both root's
RUN_AS_ROOT = "spurinv runs as root; another user cannot read its config and token, nor write its state"
LONG_LINE_MAX = 1 << 20  # src/basic/def.h: read_line fails at this many bytes without the line end
DEFAULT_DEADLINE = 60.0  # controller.run_deadline's default, for a config that did not load
INSTALL_TIMER = f"systemctl enable --now {TIMER}"
INSTALL_CRON = "install -m 0644 systemd/spurinv.cron /etc/cron.d/spurinv"
INSTALL_UDEV = "install -D -m 0644 systemd/90-spurinv.rules /etc/udev/rules.d/90-spurinv.rules && udevadm control --reload"


@dataclass(frozen=True, slots=True)
class Check:
    """One check's verdict. ``exit_code`` is what ``refresh`` would exit with (0 unless failed)."""

    name: CheckName
    status: CheckStatus
    detail: str
    fix: str = ""
    exit_code: int = 0

    def as_dict(self) -> CheckResult:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix, "exit_code": self.exit_code}


@dataclass(frozen=True, slots=True)
class Host:
    """Where the scheduler lives: files are looked up under the run's ``--root`` (a container
    checks the host mounted at /host); ``systemctl`` is asked only when it can answer for that
    root (None otherwise: the files alone decide)."""

    systemctl: str | None = "systemctl"
    euid: int = field(default_factory=os.geteuid)
    state_flag: str | None = None  # --state as given, to say where the state path came from
    config_flag: str | None = None  # --config as given: the operator named the file to look at


@dataclass(slots=True)
class _Run:
    world: World
    host: Host
    budget: Budget
    build: Callable[[], Options]
    options: Options | None = None
    node: str | None = None
    state: State | None = None
    view: NodeView | None = None
    client: Any = None
    token_file: str | None = None  # the unit's LoadCredential= source, when the config names no token file
    timer: tuple[str, str | None] | None = None  # the timer's link state and systemctl's is-active, asked once
    state_origin: str | None = None  # the unit's setting that decides the timer's state path
    results: dict[str, Check] = field(default_factory=dict)
    # the cron files' entries, read once a run: cron reads every file of /etc/cron.d, and the
    # schedule, config, PATH and program checks each ask for them
    cron: dict[str, Any] = field(default_factory=dict)
    # the unit's files as read (:func:`_service_files`), once a run: the state, lock, metrics,
    # token and schedule checks each read its settings, some of them several times
    unit_files: list[tuple[str, str | None, list[tuple[str, str]] | None]] | None = None

    @property
    def config(self) -> Config:
        assert self.options is not None
        return self.options.config


def run(world: World, build: Callable[[], Options], host: Host) -> tuple[list[Check], int]:
    """Every check in :data:`NAMES` order, and the exit status (the first failure's, 75 when a
    signal or the deadline stopped the run, else 0)."""
    state = _Run(world, host, Budget(DEFAULT_DEADLINE), build)
    stopped: str | None = None
    steps: dict[str, Callable[[_Run], Check]] = {
        "config": _config,
        "node": _node,
        "state": _state,
        "lock": _lock,
        "metrics": _metrics,
        "token": _token,
        "controller": _controller,
        "permission": _permission,
        "register_command": _register_command,
        "schedule": _schedule,
        "udev": _udev,
    }
    deadline: str | None = None  # the run deadline passed: only the local checks still run
    with Signals():
        for name in NAMES:
            if stopped is not None or (deadline is not None and name not in LOCAL):
                state.results[name] = Check(name, "skip", f"not checked: {stopped or deadline}")
                continue
            try:
                if deadline is None:
                    state.budget.check(f"the {name} check")
                state.results[name] = steps[name](state)
            except DeadlineError as exc:
                if deadline is not None:  # a local check outlived its own allowance
                    state.results[name] = Check(name, "skip", f"not checked: {_one(exc.message)}")
                    continue
                deadline = exc.what  # check saves nothing
                state.budget = Budget(LOCAL_SECONDS)  # what the local checks (systemctl) may still take
                if name == "controller":
                    # no answer before the deadline: the run would fail the same way (69)
                    state.results[name] = Check(
                        name, "fail", f"{deadline}: the controller did not answer in time",
                        "check that slurmrestd (or slurmctld) answers, or lower controller.timeout below run_deadline",
                        exitcode.UNAVAILABLE,
                    )  # fmt: skip
                else:
                    state.results[name] = Check(name, "skip", f"not checked: {deadline}")
            except Interrupted as exc:
                stopped = exc.what
                state.results[name] = Check(name, "skip", f"not checked: {stopped}")
    results = [state.results[name] for name in NAMES]
    failed = next((result.exit_code for result in results if result.status == "fail"), None)
    if failed is not None:
        return results, failed
    return results, exitcode.TEMPFAIL if stopped or deadline else exitcode.OK


def _needs(run: _Run, name: CheckName, *wanted: CheckName) -> Check | None:
    """A skip when a check this one builds on did not pass."""
    for earlier in wanted:
        result = run.results.get(earlier)
        if earlier == "config" and run.options is not None and name != "controller":
            continue  # loaded, with a file a later run cannot use (ca_file): the local checks go on
        if result is None or result.status in ("fail", "skip"):
            return Check(name, "skip", f"needs the {earlier} check to pass")
    return None


# --- configuration, node, state -------------------------------------------------------------------


def _config(run: _Run) -> Check:
    try:
        run.options = options = run.build()
    except SpurinvError as exc:
        return Check("config", "fail", _one(exc.message), _elsewhere(run, _config_fix(exc.message)), exc.exit_code)
    config = options.config
    run.budget = Budget(config.controller.run_deadline)
    _follow_unit_state(run)
    if not config.observe and config.controller.transport == "rest" and config.controller.ca_file and config.controller.verify:
        from spurinv.controller.rest import check_ca_file

        try:  # said here, whatever the token check finds
            check_ca_file(config.controller.ca_file)
        except ConfigError as exc:
            return Check("config", "fail", exc.message, "point controller.ca_file at a PEM CA bundle, or set it to \"\"",
                         exc.exit_code)  # fmt: skip
    if config.observe:
        mode = "observe mode (no controller.url: nothing is sent)"
    elif config.controller.transport == "scontrol":
        mode = f"controller through scontrol ({config.controller.scontrol or 'on PATH'})"
    else:
        mode = f"controller {config.controller.url} (REST, auth {config.controller.auth})"
    identity = options.config_identity
    where = identity.removesuffix(":none") if identity.endswith(":none") else identity.rsplit(":", 3)[0]
    found = "" if os.path.lexists(where) else " (no file: every value is a default)"
    if elsewhere := _scheduler_config(run, where):
        read = _first([f"the {who} runs read {path} ({origin})" for who, path, origin, _setting in elsewhere], " and ")
        fix = _first([f"check what the {who} runs read ({_check_command(run, path)})" + (setting and f", or set {setting}")
                      for who, path, _origin, setting in elsewhere], "; ")  # fmt: skip
        return Check("config", "warn", f"{where}{found}: {mode}; but {read}, not this file", fix)
    return Check("config", "ok", f"{where}{found}: {mode}")


SHOWN = 3  # the runs a config warning names before "and N more": a unit may hold any number


def _first(items: list[str], joiner: str) -> str:
    """The first :data:`SHOWN` of ``items`` joined, then how many more there are."""
    if len(items) > SHOWN:
        more = len(items) - SHOWN
        items = [*items[:SHOWN], f"{more} more" if joiner == " and " else f"and {more} more"]
    return joiner.join(items)


def _check_command(run: _Run, path: str) -> str:
    """The command that checks ``path``, a file as the checked root names it: under --root that
    root's file, named in full (--config is taken as given, never looked for under the root).
    Its words as :func:`_word` spells them: pasted from the output, they name these files."""
    root = run.world.root.path
    if root == "/":
        return f"spurinv check --config {_word(path)}"
    return f"spurinv check --root {_word(root)} --config {_word(run.world.root.join(path.lstrip('/')))}"


def _scheduler_config(run: _Run, checked: str) -> list[tuple[str, str, str, str]]:
    """Each scheduler whose runs read another config file than the one checked (this shell's
    $SPURINV_CONFIG, or its absence, is not the unit's or the crontab's): who ("timer", "cron"),
    the file they read, where that comes from, and the setting that points them at the checked
    one, for each of their commands that differs. Empty with --config (the operator named the
    file to look at); none for a command check cannot read: it says nothing rather than guess."""
    found: list[tuple[str, str, str, str]] = []
    for scheduler in () if run.host.config_flag else _schedulers(run):
        for reads in _scheduler_reads(run, scheduler, checked):
            path = reads[0]
            theirs = run.world.root.join(path.lstrip("/"))
            if os.path.abspath(checked) == theirs or same_file(checked, theirs):
                continue
            # a path the root does not hold is compared by name (as ever); one it holds is its file,
            # not this machine's: a --root /host run reads /host/etc/spurinv/config.toml
            if not os.path.lexists(theirs) and (os.path.abspath(checked) == path or same_file(checked, path)):
                continue
            found.append(("timer" if scheduler == "systemd" else "cron", *reads))
    return found


def _on_root(run: _Run, checked: str) -> str | None:
    """The name the checked root's runs know the config file ``checked`` (a path on this machine)
    by: under the root, its path there (``/host/etc/x.toml`` is ``/etc/x.toml``); outside it, None
    when the root holds another file at that path (this machine's ``/etc/spurinv/config.toml`` is
    not the one a ``--root /host`` reads), else the path as written (a file the root does not hold
    is compared by name, as ever)."""
    root = run.world.root
    checked = os.path.abspath(checked)
    named = root.host_path(checked)
    if named != checked or root.path == "/":
        return named
    theirs = root.join(checked.lstrip("/"))
    return None if os.path.lexists(theirs) and not same_file(checked, theirs) else checked


def _scheduler_reads(run: _Run, scheduler: str, checked: str) -> list[tuple[str, str, str]]:
    """The config file each ``spurinv refresh`` that ``scheduler`` runs reads, where that comes
    from, and the setting that would make it ``checked``: as ``locations.config_path`` resolves
    it, --config on its command over SPURINV_CONFIG (an inline ``NAME=VALUE`` before the program
    over the unit's or the crontab's). Every one is compared (a oneshot unit runs each of its
    ExecStart=, cron every entry of every file); one it cannot read is left out."""
    from spurinv.state import locations

    on_root = _on_root(run, checked)  # set in the root's files: by the name its runs know it by
    checked = on_root or ""  # "": a file they cannot be pointed at, no setting is offered
    # where, its words (None: broken quoting), its environment, the origin and the setting of that environment
    commands: list[tuple[str, list[str] | None, dict[str, str], str, str]] = []
    if scheduler == "systemd":
        environment = _unit_environment(run)
        starts: list[str] = []
        for key, value, _where in _service_directives(run):
            if key == "ExecStart":
                starts = [*starts, value] if value else []  # an empty one resets the list
        setting = f"Environment={schedule.unit_quote('SPURINV_CONFIG=' + checked.replace('%', '%%'))} in {SERVICE}"
        starts = starts or ["spurinv refresh"]  # none yet (the unit being written): what its environment names
        for number, start in enumerate(starts, start=1):
            where = f"{SERVICE}'s ExecStart=" + (f" number {number}" if len(starts) > 1 else "")
            commands.append((where, schedule.words(start), environment, "the unit's Environment=SPURINV_CONFIG=", setting))
        # as systemd reads it back: "%%" is a "%" (specifiers), "$$" a "$" on a command line, and
        # quoted its way (a whole word in double quotes, C escapes), not a shell's
        spelled = schedule.unit_quote(checked.replace("%", "%%").replace("$", "$$"))
        setting = "" if _unspellable(scheduler, checked) else setting
    else:
        entries = _cron_entries(run)
        spelled = shlex.quote(checked).replace("%", "\\%")  # cron makes a bare "%" on the command a newline
        assigned = schedule.cron_value(checked)
        for cron, number, command, environment in entries:
            where = f"the entry in {cron}" + (f":{number}" if len(entries) > 1 else "")
            setting = f"SPURINV_CONFIG={assigned} in {cron}" if assigned is not None else f"--config {spelled} on {where}"
            setting = "" if _unspellable(scheduler, checked) else setting
            commands.append((where, schedule.shell_words(command), environment, f"SPURINV_CONFIG= in {cron}", setting))
    found: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()  # a set: a cron file holds thousands of entries
    # the runs given no SPURINV_CONFIG, by the file they read and the setting: one sentence each
    unnamed: dict[tuple[str, str], dict[str, None]] = {}
    for where, words, environment, origin, setting in commands:
        given = environment.get("SPURINV_CONFIG", "")
        # a spurinv in a sh -c script: a quoted path pasted there would need the outer quoting too
        nested = spelled != checked and any(found.outer for found in schedule.refreshes(words or [], sh=scheduler == "cron"))
        for started in schedule.started_with(words or [], shell=scheduler == "cron"):
            if started is None:
                continue
            flag, inline = started
            if not (flag or inline.get("SPURINV_CONFIG")) and given and (not given.startswith("/") or "%" in given):
                continue  # relative to a working directory check does not know, or a unit specifier
            told = origin, setting
            if inline.get("SPURINV_CONFIG"):
                told = f"SPURINV_CONFIG= on {where}", f"SPURINV_CONFIG={spelled} on {where}"
            if flag:
                told = f"--config on {where}", f"--config {spelled} on {where}"
            # none for a file the root cannot see, a path no spelling of the scheduler's names as
            # check prints it, or one in a shell's script, which no spelling check can vouch for
            if on_root is None or _unspellable(scheduler, checked) or (nested and told[0] != origin):
                told = told[0], ""
            path, named = locations.config_path(flag, {**environment, **inline})
            if not named:
                unnamed.setdefault((path, told[1]), {})[where] = None
            elif (path, *told) not in seen:
                seen.add((path, *told))
                found.append((path, *told))
    for (path, setting), wheres in unnamed.items():
        named_ones = list(wheres)[:3] + ([f"{len(wheres) - 3} more"] if len(wheres) > 3 else [])
        to = f" to {' and '.join(named_ones)}" if len(commands) > 1 else ""
        found.append((path, f"{scheduler} passes no SPURINV_CONFIG{to}", setting))
    return found


def _unspellable(scheduler: str, path: str) -> bool:
    """No setting of ``scheduler`` names ``path`` once pasted from check's output, which shows a
    control character as an escape (:func:`spurinv.secret.printable`). cron reads no escape: a
    crontab's NAME=VALUE is taken as written, its /bin/sh (dash) has no $'...', and a newline
    ends the line. systemd's C escapes (a quoted word of Environment= or ExecStart=) read the
    others, but make ``\\x85``, how a C1 control is shown, the byte 0x85, not the character, and
    refuse ``\\udcff``, how a byte that is not UTF-8 is shown."""
    if scheduler == "cron":
        from spurinv.secret import printable

        return printable(path) != path
    return any("\x80" <= char <= "\x9f" or "\ud800" <= char <= "\udfff" for char in path)


def _elsewhere(run: _Run, fix: str) -> str:
    """``fix`` for a config that does not load, after what the scheduler's runs read when that is
    another file: the one this shell names may be a leftover export the runs never see."""
    from spurinv.state import locations

    checked, named = locations.config_path(None, run.world.environ)
    reading: dict[str, list[str]] = {}  # one sentence per file, naming every run that reads it
    for who, path, origin, _setting in _scheduler_config(run, checked):
        reading.setdefault(path, []).append(f"the {who} runs read {path} ({origin})")
    told = []
    for path, runs in reading.items():
        # unset, this shell reads this machine's default file: not theirs under a root holding its own
        ours = named and path == locations.DEFAULT_CONFIG and _on_root(run, path) == path
        unset = "unset SPURINV_CONFIG, or " if ours else ""
        told.append(f"{' and '.join(runs)}, not {checked}: {unset}check theirs ({_check_command(run, path)})")
    return "; ".join([_first(told, "; "), f"otherwise {fix}"]) if told else fix


def _config_fix(message: str) -> str:
    import re

    from spurinv.config.settings import keys

    refused = re.match(r"config file (/\S+) (is a symlink|is an? [A-Za-z ]+, not a regular file)", message)
    if refused:
        return f"replace {refused.group(1)} with a regular file (0600, owned by root): it {refused.group(2)}"
    syntax = re.match(r"(/\S+\.toml): (.*\(at line \d+, column \d+\))", message)
    if syntax:
        return f"fix the TOML syntax of {syntax.group(1)} where named: {syntax.group(2)}"
    if "relative path" in message:
        return "give the key named above an absolute path"
    if "controller.url" in message:
        return 'set controller.url = "https://HOST:6820" (slurmrestd\'s address, no path), then `spurinv config show`'
    if re.match(r"config file /.*: No such file or directory$", message):
        return "write it (`spurinv config init` writes the file check reads), or name the file meant"
    # a problem of the file itself (its mode, its encoding) or of a path names no key: the message says what
    unknown = r"unknown key in \[|unknown table|a key outside any table"
    if not (any(key in message for key in keys()) or re.search(unknown, message)):
        return "correct what is named above, then `spurinv config show` to see what is in force"
    return "correct the key named above, then `spurinv config show` to see what is in force"


def _node(run: _Run) -> Check:
    if (skipped := _needs(run, "node", "config")) is not None:
        return skipped
    try:
        run.node = run.config.node_name(run.world.hostname)
    except ConfigError as exc:
        return Check("node", "fail", exc.message, 'set node.name = "NAME" (the name `scontrol show node` uses)', exc.exit_code)
    assert run.options is not None
    source = "--node" if run.options.node_flag else ("node.name" if run.config.node.name else "the short host name")
    return Check("node", "ok", f"{run.node} (from {source})")


def _state(run: _Run) -> Check:

    if (skipped := _needs(run, "state", "config", "node")) is not None:
        return skipped
    assert run.options is not None
    assert run.node is not None
    path = run.options.state_path
    directory = os.path.dirname(path)
    try:
        missing = store.inspect_directory(path, create=not run.options.state_named)
    except store.StoreError as exc:
        word = _word(directory)
        fix = f"mkdir -p -m 0700 {word} && chown root {word}" if exc.errno else f"chmod 0700 {word}"
        if isinstance(exc, store.Unsafe):
            fix = f"chown root {word} && chmod 0700 {word}"
        return Check("state", "fail", str(exc), fix, exc.exit_code)
    systemd = "systemd" in _schedulers(run)
    if systemd and (user := _run_as(_service_directives(run))) is not None:
        return Check("state", "fail", f"under the unit {user}: {RUN_AS_ROOT}", f"systemctl edit {SERVICE}: remove it",
                     exitcode.CANTCREAT)  # fmt: skip
    blocked = _sandbox_blocks(run, directory) if systemd else None
    if blocked is not None and blocked[1]:
        return Check(
            "state", "fail", f"state directory {directory}: under the unit {blocked[0]}{_outcome(blocked[0])}",
            _state_fix(directory), exitcode.CANTCREAT,
        )  # fmt: skip
    if systemd and (over := _mounted_over(run, path)) is not None:
        return Check("state", "fail", over, f"systemctl edit {SERVICE}: remove that entry", exitcode.CANTCREAT)
    if systemd and _in_private_tmp(run, directory):
        return Check(
            "state", "fail", f"state directory {directory}: the unit's PrivateTmp= gives each run a /tmp of its own, "
            f"removed when it ends: {TMPFS_LOST}, readings and drain record with it",
            "keep the state under /var/lib: unset SPURINV_STATE and --state in the unit", exitcode.CANTCREAT,
        )  # fmt: skip
    found = _state_found(run, path, directory, missing)
    if blocked is not None and found.status == "ok":  # not certain: say so, as the metrics check does
        return Check(
            "state", "warn", f"{found.detail}; but under the unit {blocked[0]}: cannot verify", _state_fix(directory),
        )  # fmt: skip
    return found


def _state_found(run: _Run, path: str, directory: str, missing: bool) -> Check:
    """The state check past the sandbox: the directory and the state file in it."""
    from spurinv.refresh import check_node
    from spurinv.state import file as state_file

    assert run.options is not None
    assert run.node is not None
    if missing:
        existing = directory
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        if not os.access(existing, os.W_OK | os.X_OK):
            return Check(
                "state", "fail", f"{directory} is missing; uid {run.host.euid} cannot create it in {existing}",
                "run spurinv check as root, the user the timer runs spurinv as", exitcode.CANTCREAT,
            )  # fmt: skip
        origin = _state_origin(run)
        return Check("state", "ok", f"{directory} ({origin}) does not exist yet: the first run creates it (mode 0700)")
    if not os.access(directory, os.W_OK | os.X_OK):
        return Check(
            "state", "fail", f"state directory {directory}: this user (uid {run.host.euid}) cannot write it",
            "run spurinv check as root, the user the timer runs spurinv as", exitcode.CANTCREAT,
        )  # fmt: skip
    try:
        run.state = state_file.load(path)
    except state_file.NewerSchema as exc:
        return Check("state", "fail", str(exc), "upgrade spurinv to the version that wrote it", exc.exit_code)
    except store.Unsafe as exc:
        return Check("state", "fail", str(exc), f"move {path} aside: it must be a regular file", exitcode.CANTCREAT)
    except (state_file.Corrupt, store.StoreError) as exc:
        if isinstance(exc, store.StoreError) and exc.errno in (13, 1):
            return Check("state", "fail", str(exc), "run spurinv check as root (the timer's user)", exitcode.CANTCREAT)
        return Check("state", "warn", f"{exc}", "none needed: the next run moves it aside and starts afresh")
    origin = _state_origin(run)
    if run.state is None:
        told = f"{directory} (mode {_mode(directory)}; {origin})"
        return _cache_checked(path, f"{told}: no state file yet; the first run writes it")
    try:
        check_node(run.state, run.node, path, run.options.node_flag is not None)
    except SpurinvError as exc:
        return Check("state", "fail", _one(exc.message), f"pass --node {run.state['node']} or move {path} aside", exc.exit_code)
    last = run.state["last"]
    told = f"; last run {last['at']:%Y-%m-%d %H:%M:%SZ} exit {last['exit_code']}" if last is not None else ""
    return _cache_checked(path, f"{path} (directory mode {_mode(directory)}; {origin}){told}")


def _outcome(blocked: str) -> str:
    """What a run makes of the sandbox :func:`_sandbox_blocks` describes: one that does not start,
    or writes into a tmpfs of its own, says so itself."""
    return "" if NAMESPACE_FAILS in blocked or TMPFS_LOST in blocked else ", so refresh would exit 73"


def _state_fix(directory: str) -> str:
    """The unit line that lets the run write the state directory: StateDirectory= for one under
    /var/lib (systemd creates it before each start; a ReadWritePaths= entry that does not exist
    yet fails the unit's namespace), ReadWritePaths= after a mkdir for any other."""
    import re

    name = os.path.relpath(directory, "/var/lib")
    # a name StateDirectory= reads back as spelled: no quote, escape, specifier, ":" or blank
    if re.fullmatch(r"[A-Za-z0-9_.@+-]+(/[A-Za-z0-9_.@+-]+)*", name) and _relative(name) == name:
        return f"systemctl edit {SERVICE}: add [Service] StateDirectory={name} and StateDirectoryMode=0700"
    line = f"ReadWritePaths={_unit_path(directory)}"
    return f"mkdir -p -m 0700 {_word(directory)}, then systemctl edit {SERVICE}: add [Service] {line}"


def _cache_checked(path: str, found: str) -> Check:
    """The state check's ``ok``, or a warning when the CDI spec cache's path holds what the tick
    may not replace: it then parses every spec on every tick."""
    cache = path + CDI_CACHE
    if (squatter := _not_a_cache(cache)) is None:
        return Check("state", "ok", found)
    return Check(
        "state", "warn", f"{found}; {cache} {squatter}, not the tick's CDI spec cache: the tick leaves it alone"
        " and parses every CDI spec on every tick", f"move {cache} aside",
    )  # fmt: skip


def _not_a_cache(path: str) -> str | None:
    """What sits at the CDI spec cache's path when the tick may not replace it
    (:func:`spurinv.cli.tick.read_cache`, the one rule): a directory, a FIFO, a link, another
    file. None when there is nothing there, or a cache."""
    import errno

    from spurinv.cli.tick import read_cache
    from spurinv.inventory.sources.cdi import MAX_CACHE

    data, ours = read_cache(path)
    if ours:
        return None
    if data is not None:  # read, and not a cache
        return "holds another file"
    try:  # not read: say why
        info = os.lstat(path)
    except OSError as exc:  # gone meanwhile, or a name too long to be there: nothing to move
        return None if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG) else f"cannot be looked at ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {regularfile.kind(info.st_mode)}"
    if info.st_size > MAX_CACHE:
        return f"holds another file ({info.st_size} bytes, more than a cache can hold)"
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return "holds another file"  # replaced meanwhile by one the tick could have read


def _follow_unit_state(run: _Run) -> None:
    """Under the timer, the unit's environment decides the state path its runs use
    ($SPURINV_STATE from Environment=, else $STATE_DIRECTORY from StateDirectory=), not this
    shell's; --state given to check still wins (the operator names the file to look at)."""
    import dataclasses

    assert run.options is not None
    if run.host.state_flag or _scheduler(run) != "systemd":
        return
    environment = _unit_environment(run)
    path: str | None = None
    if environment.get("SPURINV_STATE"):
        path, origin = os.path.abspath(environment["SPURINV_STATE"]), "from the unit's Environment=SPURINV_STATE="
    else:
        directories = _state_directories(_service_directives(run))[0]  # $STATE_DIRECTORY's first
        if directories:
            path = os.path.join("/var/lib", directories[0], "state.json")
            origin = f"from the unit's StateDirectory={directories[0]}"
    if path is None:
        if not (run.world.environ.get("SPURINV_STATE") or run.world.environ.get("STATE_DIRECTORY")):
            return
        path, origin = DEFAULT_STATE, "the unit's default"
    run.options = dataclasses.replace(run.options, state_path=path, state_named=bool(environment.get("SPURINV_STATE")))
    run.state_origin = origin


def _unit_environment(run: _Run) -> dict[str, str]:
    """The variables the unit gives its runs: Environment= (the last assignment wins; an empty
    one resets the list) overlaid by the EnvironmentFile= files that exist ("-" marks one that
    may be missing), less UnsetEnvironment= (applied last), as systemd.exec(5) orders them."""
    found: dict[str, str] = {}
    files: list[str] = []
    unset: list[str] = []
    for key, value, _where in _service_directives(run):
        if key == "EnvironmentFile":
            files = [*files, value.removeprefix("-")] if value else []
            continue
        if key == "UnsetEnvironment":
            unset = [*unset, *schedule.words(value)] if value else []
            continue
        if key != "Environment":
            continue
        if not value:
            found = {}
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        for word in words:
            name, equals, setting = word.partition("=")
            if equals:
                found[name] = setting
    for name in files:
        if name.startswith("/"):
            found.update(schedule.assignments(_root_text(run, name, limit=MAX_UNIT_TEXT) or ""))  # read whole
    for word in unset:  # a bare name drops the variable, NAME=VALUE only that exact assignment
        name, equals, setting = word.partition("=")
        if not equals or found.get(name) == setting:
            found.pop(name, None)
    return found


def _state_origin(run: _Run) -> str:
    environ = run.world.environ
    if run.state_origin:
        return run.state_origin
    if run.host.state_flag:
        return "from --state"
    if environ.get("SPURINV_STATE"):
        return "from $SPURINV_STATE"
    if environ.get("STATE_DIRECTORY"):
        return "from $STATE_DIRECTORY"
    return "the default"


def _mode(path: str) -> str:
    try:
        return f"{stat.S_IMODE(os.stat(path).st_mode):04o}"
    except OSError:
        return "?"


def _lock(run: _Run) -> Check:
    import fcntl

    if (skipped := _needs(run, "lock", "config")) is not None:
        return skipped
    assert run.options is not None
    path = run.options.state_path + ".lock"
    if (over := _mounted_over(run, path, writable_ok=True)) is not None:
        return Check("lock", "fail", over, f"systemctl edit {SERVICE}: remove that entry", exitcode.CANTCREAT)
    try:
        fd = regularfile.open_fd(path)  # read-only: a check never creates or writes the lock
    except FileNotFoundError:
        return Check("lock", "ok", f"{path}: none yet (the first run creates it)")
    except regularfile.Refused as exc:
        return Check("lock", "fail", str(exc), f"remove {path}: the lock must be a regular file of ours", exitcode.CANTCREAT)
    except OSError as exc:
        return Check("lock", "fail", f"lock {path}: {exc.strerror}", "run spurinv check as root", exitcode.CANTCREAT)
    try:
        info = os.fstat(fd)
        if info.st_nlink != 1:
            return Check("lock", "fail", f"lock {path} has {info.st_nlink} links", f"rm {_word(path)}", exitcode.CANTCREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = store.holder_named(os.pread(fd, 512, 0).decode("utf-8", "replace"))
            return Check(
                "lock", "warn", f"{path} is held by {holder} now",
                f"none if a run is under way; if it stays held, find the holder with `fuser -v {_word(path)}`",
            )  # fmt: skip
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return Check("lock", "ok", f"{path}: free")


def _metrics(run: _Run) -> Check:
    if (skipped := _needs(run, "metrics", "config")) is not None:
        return skipped
    assert run.options is not None
    path = run.options.metrics_file
    if not path:
        return Check("metrics", "skip", "metrics.file is not set: no node_exporter metrics are written")
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    key = "--metrics-file" if run.options.metrics_flag else "metrics.file"
    if not os.path.isdir(directory):
        return Check(
            "metrics", "fail", f"{key} {path}: directory {directory} does not exist",
            f"create {directory} (node_exporter's --collector.textfile.directory) or change {key}", exitcode.CANTCREAT,
        )  # fmt: skip
    if not os.access(directory, os.W_OK | os.X_OK):
        return Check(
            "metrics", "fail", f"{key} {path}: this user cannot write {directory}",
            "run spurinv check as root; under the unit add ReadWritePaths=" + directory, exitcode.CANTCREAT,
        )  # fmt: skip
    if os.path.islink(path):
        return Check(
            "metrics", "fail", f"{key} {path} is a symbolic link: refresh refuses to write through it",
            f"set {key} to the real file's path ({os.path.realpath(path)})",
            exitcode.USAGE if run.options.metrics_flag else exitcode.CONFIG,
        )  # fmt: skip
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        kind = "a directory" if os.path.isdir(path) else "not a regular file"
        return Check("metrics", "fail", f"{key} {path} is {kind}",
                     f"set {key} to a file path (e.g. {os.path.join(path, 'spurinv.prom')})"
                     if os.path.isdir(path) else f"set {key} to a file path, or move {path} aside",
                     exitcode.CANTCREAT)  # fmt: skip
    if not path.endswith(".prom"):
        return Check("metrics", "warn", f"{key} {path}: node_exporter reads only *.prom files", f"name it {path}.prom")
    if "systemd" in _schedulers(run):
        if (user := _run_as(_service_directives(run))) is not None:
            return Check("metrics", "fail", f"under the unit {user}: {RUN_AS_ROOT}", f"systemctl edit {SERVICE}: remove it",
                         exitcode.CANTCREAT)  # fmt: skip
        if (over := _mounted_over(run, path)) is not None:
            return Check("metrics", "fail", over, f"systemctl edit {SERVICE}: remove that entry", exitcode.CANTCREAT)
        blocked = _sandbox_blocks(run, directory)
        if blocked is not None and not blocked[1]:
            return Check(
                "metrics", "warn", f"{path}: under the unit {blocked[0]}: cannot verify",
                f"systemctl edit {SERVICE}: add [Service] ReadWritePaths={_unit_path(directory)} (spelled out)",
            )  # fmt: skip
        if blocked is not None:
            return Check(
                "metrics", "fail", f"{path}: writable here, but under the unit {blocked[0]}{_outcome(blocked[0])}",
                f"systemctl edit {SERVICE}: add [Service] ReadWritePaths={_unit_path(directory)}", exitcode.CANTCREAT,
            )  # fmt: skip
        if _private_tmp(_service_directives(run)) and any(_under(place, directory) for place in PRIVATE_TMP):
            return Check(
                "metrics", "warn", f"{path}: the unit's PrivateTmp= gives it a /tmp of its own; node_exporter never sees "
                "the file", f"set {key} to a *.prom file in node_exporter's --collector.textfile.directory",
            )  # fmt: skip
    state_directory = os.path.dirname(run.options.state_path)
    if _under(state_directory, directory):
        return Check(
            "metrics", "warn", f"{path} is inside the state directory {state_directory} (mode 0700): node_exporter, "
            "another user, cannot read it",
            f"set {key} to a *.prom file in node_exporter's --collector.textfile.directory",
        )  # fmt: skip
    return Check("metrics", "ok", f"{path}: {directory} is writable")


# --- token and controller ------------------------------------------------------------------------


def _token(run: _Run) -> Check:
    """The token under each scheduler that runs spurinv (the unit's credential, cron's
    token_file): the worst verdict wins."""
    schedulers = _schedulers(run) or (None,)
    if len(schedulers) == 1 or run.world.environ.get("CREDENTIALS_DIRECTORY"):
        return _token_under(run, schedulers[0])
    checks = [_token_under(run, scheduler) for scheduler in schedulers]
    worst = _worst(checks)
    who = "the timer's runs" if worst is checks[0] else "cron's runs"
    return Check(worst.name, worst.status, f"{who}: {worst.detail}", worst.fix, worst.exit_code)


def _token_under(run: _Run, scheduler: str | None) -> Check:
    from spurinv.config.settings import read_token

    if (skipped := _needs(run, "token", "config")) is not None:
        return skipped
    settings = run.config.controller
    if run.config.observe:
        return Check("token", "skip", "observe mode: no controller, no token")
    if settings.transport == "scontrol":
        return Check("token", "skip", "controller.transport = scontrol authenticates with munge, not a token")
    if settings.auth == "none":
        return Check("token", "skip", 'controller.auth = "none": no token is sent')
    source = settings
    environ = run.world.environ
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    key = "controller.token_file"
    note = ""
    if not credentials:
        # check the token the scheduler's runs will read: the unit's credential, or token_file
        # under cron (which passes no $CREDENTIALS_DIRECTORY)
        loaded = _credential(run, settings.credential) if scheduler == "systemd" else None
        if loaded is not None and loaded.path is None:
            return Check(
                "token", "warn", f"the unit passes the token by {loaded.directive} ({loaded.where}): check cannot verify it",
                f"start the unit once and read its log: systemctl start {SERVICE}; journalctl -u {SERVICE} -n 20",
            )  # fmt: skip
        if loaded is not None:
            assert loaded.path is not None
            host_path = _follow(run, run.world.root.join(loaded.path.lstrip("/")))
            if not os.path.lexists(host_path):
                return Check(
                    "token", "fail", f"{loaded.where} LoadCredential={settings.credential}:{loaded.path}: {host_path} does "
                    "not exist, so systemd cannot start the unit",
                    f"write the token (`scontrol token username={_word(settings.user)} lifespan=N`) to {loaded.path}, "
                    "chown root, chmod 0600",
                    exitcode.NOPERM,
                )  # fmt: skip
            if settings.token_file and os.path.abspath(settings.token_file) != os.path.abspath(host_path):
                note = f" (the timer's runs read this, not controller.token_file {settings.token_file})"
            source = settings.model_copy(update={"token_file": host_path})
            run.token_file = host_path  # the controller check reads the token the unit would pass
            key = f"LoadCredential={settings.credential}: in {loaded.where}"
            environ = {name: value for name, value in environ.items() if name != "CREDENTIALS_DIRECTORY"}
        elif not settings.token_file:
            why = "cron passes no credential"
            if scheduler != "cron":
                why = f"no LoadCredential={settings.credential}: in the unit"
            return Check(
                "token", "fail", f"no controller.token_file, and {why} to read the token from",
                'set controller.token_file = "/etc/spurinv/token" (mode 0600)', exitcode.NOPERM,
            )  # fmt: skip
    try:
        token = read_token(source, environ)
    except TokenError as exc:
        where = source.token_file or settings.credential
        fix = (
            "run spurinv check as root, the user the timer runs spurinv as"
            if "Permission denied" in exc.message and run.host.euid != 0
            else f"write the token (`scontrol token username={_word(settings.user)} lifespan=N`) to {where}, "
            "chown root, chmod 0600"
        )
        if "is a symlink" in exc.message or "not a regular file" in exc.message:
            fix = f"replace {where} with a regular file (0600, owned by root) holding the token"
        detail = exc.message.split("; put the")[0]
        if key != "controller.token_file":
            detail = detail.replace("controller.token_file", key)
        return Check("token", "fail", _one(detail), fix, exc.exit_code)
    assert token is not None
    if token.startswith("\ufeff"):  # a BOM from a Windows editor would go out in the header
        return Check("token", "fail", f"{source.token_file}: the token starts with a byte order mark (U+FEFF)",
                     f"rewrite {source.token_file} without the BOM (`scontrol token ... > FILE`), chmod 0600",
                     exitcode.NOPERM)  # fmt: skip
    path = source.token_file or os.path.join(credentials or "", settings.credential)
    expiry = jwt_expiry(token)
    renew = f"renew it: `scontrol token username={_word(settings.user)} lifespan=N` into {path}"
    if expiry is not None:
        now = int(run.world.clock().timestamp())
        when = datetime.fromtimestamp(expiry, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        if expiry <= now:
            return Check("token", "fail", f"{path}{note}: the JWT expired at {when}", renew, exitcode.NOPERM)
        if expiry - now < TOKEN_WARN_DAYS * 86400:
            return Check("token", "warn", f"{path}{note}: the JWT expires at {when}, in {(expiry - now) // 3600} h", renew)
        return Check("token", "ok", f"{path}{note}: one line, {len(token)} characters, expires {when}")
    return Check("token", "ok", f"{path}{note}: one line, {len(token)} characters")


def jwt_expiry(token: str) -> int | None:
    """The ``exp`` claim of a JWT (seconds), or None when the token is not a JWT or has none."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError, RecursionError):  # a payload nested past the parser's depth
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    # at most the last second of year 9999: datetime cannot show a later one
    if not isinstance(exp, int | float) or isinstance(exp, bool) or not 1 <= exp < LAST_SECOND:
        return None
    return int(exp)


@dataclass(frozen=True, slots=True)
class _Loaded:
    """How the unit passes the credential: ``path`` is the absolute source file of a plain
    ``LoadCredential=ID:/path``; None for what check cannot read (encrypted, imported, a
    credstore name, a set value, a directory or socket)."""

    directive: str
    where: str
    path: str | None


def _credential(run: _Run, credential: str) -> _Loaded | None:
    """The last directive of the unit (and its drop-ins) that passes ``credential``, if any."""
    found: _Loaded | None = None
    for key, value, where in _service_directives(run):
        if key not in CREDENTIAL_KEYS:
            continue
        if not value:  # an empty assignment resets the list (systemd.exec(5))
            found = None
            continue
        name, _, source = value.partition(":")
        if key == "ImportCredential":
            if _glob_match(value, credential):
                found = _Loaded(f"{key}={value}", where, None)
            continue
        if name != credential:
            continue
        plain = key == "LoadCredential" and source.startswith("/")
        path = source if plain and not os.path.isdir(run.world.root.join(source.lstrip("/"))) else None
        found = _Loaded(f"{key}={value}", where, path)
    return found


def _follow(run: _Run, path: str) -> str:
    """``path`` with its symlinks followed, as systemd follows a LoadCredential= source (an
    absolute target is on the checked root). Under --root every component is followed on that
    root, not only the last: Alpine's /var/spool/cron/crontabs is a link to /etc/crontabs and
    NixOS's /run/current-system one into /nix/store, which the kernel would look for on the
    system running check."""
    root = run.world.root.path
    prefix = root.rstrip("/") + "/"
    # as written, not normalized: "/../usr/bin/x" is /usr/bin/x on the root (".." stops at a
    # chroot's root), and "link/.." is the link target's parent, not the link's
    inside = os.path.relpath(path, root)
    if root != "/" and path.startswith(prefix):
        return _follow_on(root, path[len(prefix) :])
    if root != "/" and inside != ".." and not inside.startswith("../"):
        return _follow_on(root, inside)
    for _hop in range(40):  # the kernel's own limit (MAXSYMLINKS)
        if not os.path.islink(path):
            return path
        target = os.readlink(path)
        path = (
            run.world.root.join(target.lstrip("/")) if target.startswith("/") else os.path.join(os.path.dirname(path), target)
        )
    return path


def _follow_on(root: str, inside: str) -> str:
    """``inside`` (a path relative to ``root``) with every symlink in it followed as a chroot at
    ``root`` follows it: an absolute target starts again at ``root``, ".." stops there."""
    # reversed, popped from the end, and the followed part kept as one string: a path of thousands
    # of components (links to ".") took seconds when each step joined the whole list again
    parts = [part for part in reversed(inside.split("/")) if part not in ("", ".")]
    done: list[str] = []
    base = root
    hops = 0
    while parts:
        part = parts.pop()
        if part == "..":
            if done:
                done.pop()
                base = os.path.join(root, *done)
            continue
        candidate = os.path.join(base, part)
        try:
            target = os.readlink(candidate) if hops < 40 else None  # 40: the kernel's MAXSYMLINKS
        except (OSError, ValueError):  # not a link, not there, or a NUL in a name a file gave
            target = None
        if target is None:
            done.append(part)
            base = candidate
            continue
        hops += 1
        if target.startswith("/"):
            done, base = [], root
        parts += [part for part in reversed(target.split("/")) if part not in ("", ".")]
    return base


def _glob_match(pattern: str, name: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern)


def _service_directives(run: _Run) -> list[tuple[str, str, str]]:
    """``(key, value, file)`` for each assignment in the unit's [Service] section, the unit file
    first, then its drop-ins in the order systemd 252 applies them (:func:`_drop_in_files`);
    comments, other sections and lines systemd ignores left out (:func:`_unit_assignments`). The
    file is shown as on the checked system (``/etc/...``)."""
    return _service_reading(run)[0]


def _service_reading(run: _Run) -> tuple[list[tuple[str, str, str]], tuple[str, str] | None, str | None]:
    """:func:`_service_directives`; the first line of the unit file for which systemd refuses to
    load the unit at all, with its file (:func:`_unit_assignments`); and the first file too large
    for check to read whole (:data:`MAX_UNIT_TEXT`), whose settings are then unknown. A drop-in's
    bad line does not stop the unit loading: systemd reads that drop-in up to it, and the next
    drop-ins (unit_load_dropin ignores config_parse's error); :func:`_drop_in_stops` names it."""
    found: list[tuple[str, str, str]] = []
    refused: tuple[str, str] | None = None
    too_large: str | None = None
    for shown, problem, assignments in _service_files(run):
        if problem is None and assignments is None:
            too_large = too_large or shown
            continue
        found += [(key, value, shown) for key, value in assignments or []]
        if problem is not None and refused is None and shown == _unit_file(run):
            refused = (shown, problem)
    return found, refused, too_large


def _unit_file(run: _Run) -> str | None:
    """The unit file systemd loads, as on the checked system: the first on the load path."""
    for directory in UNIT_DIRS:
        if os.path.lexists(run.world.root.join(directory, SERVICE)):
            return "/" + directory + "/" + SERVICE
    return None


def _service_files(run: _Run) -> list[tuple[str, str | None, list[tuple[str, str]] | None]]:
    """Each file of the unit (its unit file, then its drop-ins) with the line systemd stops
    reading it at and the assignments before that; assignments None: too large to read."""
    cached: list[tuple[str, str | None, list[tuple[str, str]] | None]] | None = getattr(run, "unit_files", None)
    if cached is not None:
        return cached
    unit_file = _unit_file(run)
    read: list[tuple[str, str | None, list[tuple[str, str]] | None]] = []
    for shown in ([unit_file] if unit_file else []) + _drop_in_files(run):
        text = _root_text(run, shown, errors="surrogateescape", limit=MAX_UNIT_TEXT + 1)
        if text is not None and len(text) > MAX_UNIT_TEXT // 4 and len(os.fsencode(text)) > MAX_UNIT_TEXT:
            read.append((shown, None, None))
            continue
        assignments, problem = _unit_assignments(text)
        read.append((shown, problem, assignments))
    run.unit_files = read
    return read


def _drop_in_stops(run: _Run) -> tuple[str, str] | None:
    """The first drop-in systemd stops reading before its end, and the line it stops at."""
    unit_file = _unit_file(run)
    for shown, problem, _assignments in _service_files(run):
        if problem is not None and shown != unit_file:
            return shown, problem
    return None


def _drop_in_names(unit: str) -> list[str]:
    """The drop-in directories of ``unit``, its own first: ``spurinv-refresh.service.d`` and, for
    each dash in its name, the prefix's (``spurinv-.service.d``), as unit_file_find_dirs in
    systemd's src/shared/dropin.c derives them (a trailing dash is chopped once, a leading one
    ends it). The type-wide ``service.d`` comes after all of them, in :func:`_drop_in_files`."""
    names = [unit + ".d"]
    prefix, dot, kind = unit.rpartition(".")
    chopped = False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:  # none, or a leading one: done
            return names
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[: dash + 1]
            names.append(f"{prefix}{dot}{kind}.d")
            chopped = False
            continue
        prefix, chopped = prefix[:dash], True  # a trailing dash: chop it, once


def _drop_in_files(run: _Run) -> list[str]:
    """The unit's drop-in files as systemd 252 reads them (unit_file_find_dropin_paths): the
    ``*.conf`` files, not hidden ones, of ``spurinv-refresh.service.d/``, then
    ``spurinv-.service.d/``, in each directory of :data:`UNIT_DIRS` (the load path), then the type-wide
    ``service.d/`` in each; a name seen earlier masks a later file of that name; the files are
    applied sorted by name, whichever directory holds them (systemd.unit(5) "Drop-in")."""
    folders = [f"{place}/{name}" for place in UNIT_DIRS for name in _drop_in_names(SERVICE)]
    folders += [f"{place}/{SERVICE.rpartition('.')[2]}.d" for place in UNIT_DIRS]
    chosen: dict[str, str] = {}
    for folder in folders:
        try:
            names = os.listdir(_follow(run, run.world.root.join(folder)))
        except (OSError, ValueError):
            continue
        for name in names:
            if name.endswith(".conf") and not name.startswith("."):  # FOREACH_DIRENT skips hidden files
                chosen.setdefault(name, "/" + folder + "/" + name)
    return [chosen[name] for name in sorted(chosen, key=os.fsencode)]  # strcmp order


def _unit_assignments(text: str | None) -> tuple[list[tuple[str, str]], str | None]:
    """``(key, value)`` of each assignment in a unit file's [Service] section, read as systemd's
    config_parse reads it: lines split as read_line splits them (a lone CR or a NUL ends one too)
    and joined as :func:`schedule.unit_lines` joins them, keys and values stripped of systemd's
    blanks only. With them, the first line at which systemd 252's config_parse stops reading the
    file (it returns there: no line after it counts): one that is not UTF-8 ("String is not UTF-8
    clean"; ``text`` is decoded with surrogateescape to tell), a section header without its "]"
    ("Invalid section header") or with a control character, quote, backslash or DEL in its name
    ("Bad characters in section header", string_is_safe), a line of 1 MiB or more ("Line too
    long") or lines continued past 1 MiB ("Continuation line too long"). In the unit file that
    loads no unit."""
    from spurinv.inventory.sources.status import escaped
    from spurinv.secret import printable

    found: list[tuple[str, str]] = []
    too_long: str | None = None
    section = ""
    raws = schedule.systemd_lines(text or "")
    for number, raw in enumerate(raws, 1):
        if len(raw) >= LONG_LINE_MAX // 4 and len(os.fsencode(raw)) >= LONG_LINE_MAX:
            # systemd stops reading the file there: only the lines before it count
            text, too_long = "\n".join(raws[: number - 1]), f"line {number} is 1 MiB or longer (Line too long)"
            break
    for raw in schedule.unit_lines(text or ""):
        if len(raw) > LONG_LINE_MAX // 4 and len(os.fsencode(raw)) > LONG_LINE_MAX:  # joined: each part was shorter
            return found, "a continued line is longer than 1 MiB (Continuation line too long)"
        line = raw.strip(_WHITESPACE)  # systemd's blanks: U+00A0 before a key is part of it
        if not line or line.startswith(("#", ";")):
            continue
        refused: str | None = None
        if has_surrogate(line):
            refused = "is not UTF-8"
        elif line.startswith("[") and not line.endswith("]"):
            refused = "is a section header without its ]"
        elif line.startswith("[") and any(char < " " or char in "\"'\\\x7f" for char in line[1:-1]):
            refused = "is a section header with a control character, quote or backslash in its name"
        if refused is not None:
            return found, f"the line `{printable(escaped(line))[:80]}` {refused}"  # config_parse returns here
        if line.startswith("["):
            section = line
            continue
        key, equals, value = line.partition("=")
        if equals and section == "[Service]":
            found.append((key.strip(_WHITESPACE), value.strip(_WHITESPACE)))
    return found, too_long


# the specifiers a system unit's paths may use (systemd.unit(5) "Specifiers"), as the system
# manager expands them (src/shared/specifier.c: %T and %V without $TMPDIR, PID 1 has none; %h the
# manager's own home, root's); "%%" is a "%"
SPECIFIERS = {"S": "/var/lib", "C": "/var/cache", "L": "/var/log", "T": "/tmp", "V": "/var/tmp", "t": "/run",  # noqa: S108
              "E": "/etc", "h": "/root", "%": "%"}  # fmt: skip


def _unit_path(path: str) -> str:
    """``path`` as one word of ReadWritePaths=: quoted when it holds a blank (systemd splits the
    value there), its "%" doubled (a specifier otherwise), as :func:`_unit_paths` reads it back."""
    return schedule.unit_quote(path.replace("%", "%%"))


def _unit_paths(value: str) -> tuple[list[str], list[str]]:
    """The paths of a ReadWritePaths=-like value (quoted words, "-" and "+" prefixes, specifiers
    expanded, normalised), and the words check cannot expand (an unknown specifier)."""
    return _word_paths(_unit_words(value))


def _unit_words(value: str) -> list[str]:
    """The words of a unit setting's value, its quotes read as systemd reads them."""
    # systemd keeps the words before one with an unbalanced quote and ignores the rest of the
    # line ("Failed to extract first word, ignoring"): a quote wraps a whole item up to its match,
    # https://man7.org/linux/man-pages/man7/systemd.syntax.7.html#QUOTING
    lexer = shlex.shlex(value, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    words: list[str] = []
    with contextlib.suppress(ValueError):  # the words read before it stay in ``words``
        words.extend(lexer)
    return words


def _word_paths(words: list[str], prefixes: bool = True) -> tuple[list[str], list[str]]:
    """:func:`_unit_paths` of words already read; ``prefixes``: a word may start with ``-`` and
    then ``+`` (ReadWritePaths=, once each, as systemd reads them), else it is the path itself. A
    path with a ``..`` is none: systemd ignores it ("path is not normalized")."""
    import re

    paths: list[str] = []
    unknown: list[str] = []
    for word in words:
        bare = word.removeprefix("-").removeprefix("+") if prefixes else word
        if any(letter not in SPECIFIERS for letter in re.findall(r"%(.?)", bare)):
            unknown.append(word)
            continue
        expanded = re.sub(r"%(.)", lambda match: SPECIFIERS[match.group(1)], bare)
        if expanded.startswith("/") and ".." not in expanded.split("/"):
            paths.append(os.path.normpath(expanded))
    return paths, unknown


_WHITESPACE = " \t\n\r"  # systemd's separators: no other blank ends a word


def _words(value: str) -> list[str]:
    """``value`` split at systemd's blanks only (a no-break space is part of a word to systemd)."""
    return value.translate(str.maketrans("\t\n\r", "   ")).split(" ")


def _quoted(char: str, quote: str, word: list[str]) -> str | None:
    """One character under systemd's quoting (extract_first_word's EXTRACT_UNQUOTE): the quote
    state after it, the character added to ``word`` when it is text inside quotes; None for a
    character outside quotes that opens none, which the caller reads by its own grammar."""
    if quote:
        if char == quote:
            return ""
        word.append(char)
        return quote
    return char if char in "'\"" else None


def _bind_fields(value: str) -> list[tuple[str, str]]:
    """A BindPaths= value's fields as systemd reads them (extract_first_word with ``":"`` and
    blanks, unquoting): each up to a colon or a blank outside quotes, quotes removed, a backslash
    taking the next character as it is; with what ended it (``":"``, ``" "``, ``""`` at the end).
    From a field with an unbalanced quote or a final backslash on, none (systemd ignores them)."""
    fields: list[tuple[str, str]] = []
    text: list[str] = []
    quote, escaped, started = "", False, False
    for char in value:
        if escaped:
            text.append(char)
            escaped = False
        elif char == "\\":
            escaped = started = True
        elif (after := _quoted(char, quote, text)) is not None:
            quote, started = after, started or bool(after)
        elif char == ":" or char in _WHITESPACE:
            if started or char == ":":
                fields.append(("".join(text), ":" if char == ":" else " "))
            text, started = [], False
        else:
            text.append(char)
            started = True
    if not (quote or escaped) and started:
        fields.append(("".join(text), ""))
    return fields


def _bind_destinations(value: str) -> list[str]:
    """The paths a BindPaths= value makes writable (specifiers expanded, normalised): the
    destinations of its ``[-]SOURCE[:DESTINATION[:OPTIONS]]`` items (the source when no destination
    is given), read as systemd reads them (:func:`_bind_fields`; ``config_parse_bind_paths`` in
    systemd's src/core/load-fragment.c). Counted only while each item is plainly one systemd
    binds: absolute paths with no ``..``, an option of ``rbind`` or ``norbind`` or none. At the
    first that is not, the rest of the line counts for nothing: systemd skips such an item, or
    takes its next field for a new source, and a directory check counts as writable when the
    run's sandbox keeps it read-only is the one mistake check must not make (it fails instead, and
    a plain ReadWritePaths= line fixes it)."""
    fields = _bind_fields(value)

    def plain(path: str) -> str | None:
        paths, unknown = _word_paths([path], prefixes=False)
        return paths[0] if len(paths) == 1 and not unknown else None

    destinations: list[str] = []
    index = 0
    while index < len(fields):
        source, after = fields[index]
        destination, options = source, ""
        index += 1
        if after == ":":
            if index >= len(fields):
                break  # its destination is in a field systemd could not read: nothing bound
            destination, after = fields[index]
            index += 1
            if after == ":":
                if index >= len(fields):
                    break
                options, after = fields[index]
                index += 1
                if after == ":":
                    break  # an option with a colon in it: no option systemd knows
        bound = plain(destination)
        if options not in ("", "rbind", "norbind") or plain(source.removeprefix("-")) is None or bound is None:
            break
        destinations.append(bound)
    return destinations


def _state_directories(directives: list[tuple[str, str, str]]) -> tuple[list[str], list[str]]:
    """The unit's StateDirectory= names (relative to /var/lib), in order, as systemd 252 reads
    them (config_parse_exec_directories in src/core/load-fragment.c): an empty assignment resets
    the list; each item is one word (quotes removed, a backslash kept for the next step) split at
    a colon into a name and an optional symlink (C escapes such as ``\\x2f`` and ``\\:`` read
    there); a name with a specifier is expanded, then must be relative, without ``..``, and not
    under ``private``, else it is ignored; a word systemd cannot read ends the line. With them,
    what check cannot read as systemd would (a specifier it does not know): ``StateDirectory=X in
    FILE``, to be said when the verdict is a failure, since that item may be the one that
    covers the directory."""
    names: list[str] = []
    unread: list[str] = []
    for key, value, where in directives:
        if key != "StateDirectory":
            continue
        if not value:
            names, unread = [], []
            continue
        rest: str | None = value
        while rest is not None:
            word, rest = _first_word(rest)
            if word is None:
                break  # the end, or "Invalid syntax ..., ignoring": the rest of the line is lost
            fields = _cunescaped_fields(word)
            if fields is None:
                break  # "Invalid syntax in StateDirectory=, ignoring": so is the rest of the line
            source, link = fields
            name = _relative(source)
            if name is not None and link is not None and _relative(link) is None:
                continue  # a link systemd cannot make: the whole item is ignored
            if name is None:
                if _unknown_specifier(source) and _relative(source, specifiers=False) is not None:
                    unread.append(f"StateDirectory={word} in {where}")
                continue
            names.append(name)
    return names, unread


def _first_word(text: str) -> tuple[str | None, str | None]:
    """extract_first_word(..., NULL, EXTRACT_UNQUOTE|EXTRACT_RETAIN_ESCAPE) of systemd's
    src/basic/extract-word.c: the first word of ``text`` at systemd's blanks, quotes removed and
    backslashes kept as they are (a backslash escapes nothing here, not even a quote), and the
    text after it (None at the end). ``(None, None)`` when there is no word, or when a quote is
    not closed, which systemd refuses."""
    at = 0
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    if at == len(text):
        return None, None
    word: list[str] = []
    quote = ""
    while at < len(text):
        char = text[at]
        if (after := _quoted(char, quote, word)) is not None:
            quote = after
        elif char in _WHITESPACE:
            while at < len(text) and text[at] in _WHITESPACE:
                at += 1
            return "".join(word), (text[at:] if at < len(text) else None)
        else:
            word.append(char)
        at += 1
    if quote:
        return None, None
    return "".join(word), None


_C_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34, "'": 39, "s": 32}


def _cunescaped_fields(word: str) -> tuple[str, str | None] | None:
    """extract_many_words(word, ":", EXTRACT_CUNESCAPE|EXTRACT_UNESCAPE_SEPARATORS) for two
    fields: the source and the optional link, split at colons (a run of them is one), C escapes
    read (``\\xHH`` and ``\\ooo`` give a byte, ``\\uHHHH`` and ``\\UHHHHHHHH`` a character) and
    ``\\:`` a colon kept (a field after the second is never read). None where systemd fails: no
    field at all, an escape it does not know, a final backslash. Where this reading and systemd's might differ
    (a ``\\U`` escape beyond the plain planes), None too: the item and the rest of the line
    then count for nothing, which can only make check fail a line that works."""
    fields: list[bytes] = []
    current = bytearray()
    started = False
    at = 0
    while at < len(word) and len(fields) < 2:
        char = word[at]
        if char == ":":
            if started:
                fields.append(bytes(current))
                current, started = bytearray(), False
            at += 1
            continue
        started = True
        if char != "\\":
            current += char.encode("utf-8", "surrogatepass")
            at += 1
            continue
        if at + 1 >= len(word):
            return None  # a final backslash
        escape = word[at + 1]
        digits = word[at + 2 :]
        if escape in _C_ESCAPES:
            current.append(_C_ESCAPES[escape])
            at += 2
        elif escape == "x" and len(digits) >= 2 and _hex(digits[:2]) and int(digits[:2], 16):
            current.append(int(digits[:2], 16))
            at += 4
        elif escape in "01234567" and len(word) >= at + 4 and all(d in "01234567" for d in word[at + 1 : at + 4]):
            code = int(word[at + 1 : at + 4], 8)
            if not 0 < code <= 255:
                return None
            current.append(code)
            at += 4
        elif escape == "u" and len(digits) >= 4 and _hex(digits[:4]) and int(digits[:4], 16):
            current += chr(int(digits[:4], 16)).encode("utf-8", "surrogatepass")
            at += 6
        elif escape == ":":
            current += b":"
            at += 2
        else:
            return None  # unknown, or \U: refused (or, for \U, not read here)
    if started and len(fields) < 2:
        fields.append(bytes(current))
    if not fields:
        return None
    # bytes that are not UTF-8 stay lone surrogates, which _relative refuses as systemd does
    decoded = [field.decode("utf-8", "surrogateescape") for field in fields]
    return decoded[0], (decoded[1] if len(decoded) > 1 else None)


def _unknown_specifier(path: str) -> bool:
    import re

    return any(letter not in SPECIFIERS for letter in re.findall(r"%(.?)", path))


def _hex(text: str) -> bool:
    return all(char in "0123456789abcdefABCDEF" for char in text)


def _relative(path: str, specifiers: bool = True) -> str | None:
    """A StateDirectory= name as systemd keeps it (unit_path_printf, then path_simplify_and_warn
    with PATH_CHECK_RELATIVE, then the "private" check), or None where it ignores the item: an
    absolute path (the path specifiers such as %S give one), a ``..``, nothing left, a name under
    ``private``, one that is not UTF-8 once unescaped, a component longer than NAME_MAX. A
    specifier check does not know gives None too (``specifiers``: False reads the name as if it
    had none, to tell such an item apart)."""
    import re

    if specifiers:
        if _unknown_specifier(path):
            return None
        path = re.sub(r"%(.)", lambda match: SPECIFIERS[match.group(1)], path)
    if path.startswith("/") or has_surrogate(path):  # not UTF-8: "not UTF-8 clean, ignoring"
        return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or ".." in parts or parts[0] == "private" or any(len(os.fsencode(part)) > 255 for part in parts):
        return None
    return "/".join(parts)


# namespace.c's MountMode, in its order of priority (the first wins among entries of one path)
# (a read-only bind mount first among bind mounts: drop_duplicates keeps the read-only flag)
INACCESSIBLE, BIND_RO, BIND, PRIVATE, READONLY, READWRITE, TMPFS, IMPLICIT = range(8)
# the settings that list paths, the mode each gives them (TemporaryFileSystem= read apart)
PATH_SETTINGS = {"InaccessiblePaths": INACCESSIBLE, "ReadOnlyPaths": READONLY, "ReadWritePaths": READWRITE}
_Mount = tuple[str, int, str]  # a path, its MountMode, the setting that gave it (for the message)


def _sandbox_blocks(run: _Run, directory: str) -> tuple[str, bool] | None:
    """Why the unit's sandbox keeps ``directory`` from being written (ProtectSystem=,
    ProtectHome=, ReadOnlyPaths=, InaccessiblePaths=, TemporaryFileSystem= against
    ReadWritePaths=, BindPaths= and StateDirectory=, systemd.exec(5)), and whether that is
    certain (False: a path check cannot expand might cover it); None when the unit may write it."""
    directives, _refused, too_large = _service_reading(run)
    if too_large is not None:  # its settings are unknown: any of them may keep the directory read-only
        return f"{too_large} is too large to check (over {MAX_UNIT_TEXT >> 20} MiB)", True
    state_names, unread = _state_directories(directives)
    # systemd makes the StateDirectory= directories before it sets up the namespace
    made = {os.path.join("/var/lib", name) for name in state_names}
    mounts, unknown, missing, unsure = _path_lists(run, directives, made)
    if missing:
        return f"{missing[0]} does not exist, so the unit {NAMESPACE_FAILS}", True
    mounts += [(os.path.join("/var/lib", name), IMPLICIT, "StateDirectory=") for name in state_names]
    mounts += _protections(directives)
    # systemd follows symlinks in these paths: compare the resolved paths as well as the spelled ones
    resolved = [(os.path.realpath(path), mode, said) for path, mode, said in mounts if os.path.realpath(path) != path]
    mounts += resolved
    # the run reaches the directory through its links, at the real one systemd mounted over (the
    # entries' own resolved paths are among the mounts): that one decides whether it is writable;
    # the spelling only when the walk cannot get there (a link under a hidden path or a tmpfs)
    found = _mount_verdict(mounts, os.path.realpath(directory))
    if found is None and (spelled := _mount_verdict(mounts, os.path.normpath(directory))) is not None:
        found = spelled if " hides " in spelled or " tmpfs " in spelled else None
    if found is None:  # writable, unless a read-only path check cannot expand covers it
        if unsure:
            return f"{unsure[0]} may cover {directory}, and check cannot expand it", False
        return None
    if unread:  # systemd may read one of them as a name that covers it: say which, and fail
        found += f" (check cannot read {', '.join(unread)})"
    if unknown:
        found += f", unless {unknown[0]} (a ReadWritePaths= entry check cannot expand) covers it"
    return found, not unknown


def _run_as(directives: list[tuple[str, str, str]]) -> str | None:
    """``User=NAME in FILE`` (or ``DynamicUser=yes in FILE``) when the unit runs spurinv as another
    user than root (the last ``User=``; an empty one resets it, as systemd reads it); None for
    root, or none set."""
    user: tuple[str, str] | None = None
    dynamic: str | None = None
    for name, value, where in directives:
        if name == "User":
            user = (value.strip(), where) if value.strip() else None
        elif name == "DynamicUser" and (parsed := _setting(value, ("yes",))) is not None:
            dynamic = where if parsed == "yes" else None
    if dynamic is not None:  # a uid of its own, never root's
        return f"DynamicUser=yes in {dynamic}"
    if user is None or user[0] in ("root", "0"):
        return None
    return f"User={user[0]} in {user[1]}"


def _mounted_over(run: _Run, path: str, *, writable_ok: bool = False) -> str | None:
    """The unit's entry that names the file ``path`` itself, when it keeps a run from writing it:
    namespace.c bind-mounts each entry onto itself, and a mount point is not replaced by a rename
    (EBUSY), nor opened for writing when read-only (EROFS). ``writable_ok``: a writable mount there
    does no harm (the lock is opened and locked, never replaced). None without one, or no unit."""
    if "systemd" not in _schedulers(run):
        return None
    directives, _refused, too_large = _service_reading(run)
    if too_large is not None:
        return None  # the directory's own check fails on it already
    # a file the first run makes (the lock, the state, the metrics) makes a "-" entry on it apply
    mounts = _path_lists(run, directives, {os.path.normpath(path)})[0]
    spelled = {os.path.normpath(path), os.path.realpath(path)}
    for place, mode, said in mounts:
        if place in spelled or os.path.realpath(place) in spelled:
            if writable_ok and mode in (READWRITE, BIND):
                continue
            why = "read-only or hidden" if mode in (READONLY, BIND_RO, INACCESSIBLE) else "a mount point"
            return f"{said} names {path} itself: the run finds it {why} and cannot write it"
    return None


def _mount_verdict(mounts: list[_Mount], directory: str) -> str | None:
    """Why ``directory`` is not writable under ``mounts``, or None, as namespace.c sets them up:
    sorted by path, an inaccessible path hides all below it (drop_inaccessible), else the most
    specific path decides (a read-only one is remounted so but for the writable ones below it),
    the first MountMode among those of one path (drop_duplicates); below a tmpfs only a bind
    mount reaches the real directory (ReadWritePaths= finds nothing there to bind)."""
    above = sorted(
        ((path, mode, said) for path, mode, said in mounts if _under(path, directory)),
        key=lambda mount: (len(mount[0].rstrip("/").split("/")), -mount[1]),
    )
    hidden = next((said for _path, mode, said in above if mode == INACCESSIBLE), None)
    if hidden is not None:
        return f"{hidden} hides {directory}"
    if not above:
        return None
    place, mode, said = above[-1]  # the most specific path, and of its entries the first mode
    # drop_duplicates keeps that entry but carries a dropped one's read-only flag over to it
    carried = next((by for path, kind, by in above if path == place and _read_only(kind, by)), None)
    if carried is not None and not _read_only(mode, said):
        return f"{carried} keeps {place} read-only (a read-only entry at the same path makes {said} read-only)"
    if said.startswith("ProtectHome=") and mode != BIND:
        return f"{said} hides {directory}"
    if mode == BIND_RO:
        return f"{said} binds {place} read-only over {directory}"
    if mode == READONLY:
        if said == "ProtectSystem=strict":
            return f"ProtectSystem=strict keeps {directory} read-only and no ReadWritePaths= covers it"
        if said.startswith("ProtectSystem="):
            return f"{said} keeps {place} read-only"
        return f"{said} keeps {directory} read-only"
    if mode == TMPFS:
        return f"{said} puts an empty tmpfs over {directory}: {TMPFS_LOST}"
    # a tmpfs at the directory's own path was dropped for the entry that decided (drop_duplicates)
    tmpfs = next((by for path, kind, by in reversed(above) if kind in (TMPFS, BIND, BIND_RO) and path != place), None)
    if mode in (READWRITE, IMPLICIT) and tmpfs is not None and tmpfs.startswith(("TemporaryFileSystem", "ProtectHome")):
        return f"{tmpfs} puts an empty tmpfs over {directory}, and only BindPaths= reaches below it"
    return None


def _read_only(mode: int, said: str) -> bool:
    """namespace.c's mount_entry_read_only for an entry: a read-only path or bind mount, or the
    read-only tmpfs of ProtectHome=tmpfs (TemporaryFileSystem=...:ro comes with a READONLY entry)."""
    return mode in (READONLY, BIND_RO) or (mode == TMPFS and said == "ProtectHome=tmpfs")


def _protections(directives: list[tuple[str, str, str]]) -> list[_Mount]:
    """The mounts ProtectSystem=, ProtectHome=, PrivateTmp= and DynamicUser= give the unit
    (namespace.c's append_protect_system and append_protect_home)."""
    protect: str | None = None
    home = "no"
    for key, value, _where in directives:
        # a value systemd does not know is ignored, the earlier one kept ("Failed to parse")
        # (an empty one too: "Failed to parse protect system value, ignoring")
        if key == "ProtectSystem":
            protect = _setting(value, ("strict", "full")) or protect
        elif key == "ProtectHome":
            home = _setting(value, ("read-only", "tmpfs")) or home
    # DynamicUser= forces ProtectSystem=strict whatever the unit says, ProtectHome=read-only over
    # "no" and PrivateTmp= (systemd.exec(5); unit_patch_contexts in systemd's src/core/unit.c)
    dynamic = _switched_on(directives, "DynamicUser")
    protect = "strict" if dynamic else protect or "no"
    if dynamic and home == "no":
        home = "read-only"
    mounts: list[_Mount] = []
    if protect == "strict":
        mounts.append(("/", READONLY, "ProtectSystem=strict"))
        mounts += [(place, PRIVATE, "API file systems") for place in ("/dev", "/proc", "/sys")]
    else:
        read_only = {"yes": ("/usr", "/boot", "/efi"), "full": ("/usr", "/boot", "/efi", "/etc")}
        mounts += [(place, READONLY, f"ProtectSystem={protect}") for place in read_only.get(protect, ())]
    home_mode = {"yes": INACCESSIBLE, "read-only": READONLY, "tmpfs": TMPFS}.get(home)
    if home_mode is not None:
        mounts += [(place, home_mode, f"ProtectHome={home}") for place in ("/home", "/root", "/run/user")]
    if _private_tmp(directives):  # a /tmp of its own: the unit's to write
        mounts += [(place, PRIVATE, "PrivateTmp=") for place in PRIVATE_TMP]
    return mounts


def _path_lists(
    run: _Run, directives: list[tuple[str, str, str]], made: set[str]
) -> tuple[list[_Mount], list[str], list[str], list[str]]:
    """The mounts ReadWritePaths=, ReadOnlyPaths=, InaccessiblePaths=, TemporaryFileSystem= and
    BindPaths= make (StateDirectory='s are read apart, :func:`_state_directories`); the
    ReadWritePaths= words check cannot expand; the entries that do not exist and fail the unit's
    namespace, each with its file (:func:`_existing_paths`; ``made``: the directories systemd
    makes first, and so exist); and the entries of the others check cannot expand, with theirs."""
    # each setting its own list: an empty assignment resets that setting's, not the others'
    mounts: dict[str, list[_Mount]] = {
        key: [] for key in (*PATH_SETTINGS, "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths")
    }
    unknown: dict[str, list[str]] = {key: [] for key in mounts}
    missing: dict[str, list[str]] = {key: [] for key in mounts}
    for key, value, where in directives:
        if key not in mounts:
            continue
        if not value:  # an empty assignment resets the list
            mounts[key], unknown[key], missing[key] = [], [], []
            continue
        if key == "BindPaths":  # the destination is writable ('/srv/my dir':/x, quotes read before colons)
            mounts[key] += [(path, BIND, "BindPaths=") for path in _bind_destinations(value)]
            continue
        if key == "BindReadOnlyPaths":  # the same, read-only
            mounts[key] += [(path, BIND_RO, f"BindReadOnlyPaths= ({where})") for path in _bind_destinations(value)]
            continue
        if key == "TemporaryFileSystem":  # PATH[:OPTIONS]; a tmpfs is made whether PATH exists or not
            for word in _unit_words(value):
                spelled, _colon, options = word.partition(":")
                paths, cannot = _word_paths([spelled], prefixes=False)
                unknown[key] += [f"{key}={word} ({where})" for _word in cannot]
                mounts[key] += [(path, TMPFS, f"TemporaryFileSystem={word} ({where})") for path in paths]
                if "ro" in options.split(","):  # an empty tmpfs, read-only: nothing can be written there
                    mounts[key] += [(path, READONLY, f"TemporaryFileSystem={word} ({where})") for path in paths]
            continue
        existing, cannot, absent = _existing_paths(run, value, made)
        unknown[key] += cannot if key == "ReadWritePaths" else [f"{key}={word} ({where})" for word in cannot]
        mounts[key] += [(path, PATH_SETTINGS[key], f"{key}={word} ({where})") for word, path in existing]
        missing[key] += [f"{key}={word} ({where})" for word in absent]
    return (
        [mount for found in mounts.values() for mount in found],
        unknown["ReadWritePaths"],
        [entry for entries in missing.values() for entry in entries],
        [entry for key, entries in unknown.items() if key != "ReadWritePaths" for entry in entries],
    )


def _existing_paths(run: _Run, value: str, made: set[str]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The words of a ReadWritePaths=-like value with their paths (:func:`_unit_paths`), only
    those that exist on the checked root; the words check cannot expand; and the plain words
    naming one that does not. namespace.c: such a path fails the unit's namespace
    (226/NAMESPACE), one with "-" is dropped."""
    paths: list[tuple[str, str]] = []
    unknown: list[str] = []
    missing: list[str] = []
    for word in _unit_words(value):
        found, cannot = _word_paths([word])
        unknown += cannot
        for path in found:
            if any(_under(path, place) for place in made) or os.path.exists(
                _follow(run, run.world.root.join(path.lstrip("/")))
            ):
                paths.append((word, path))
            elif not word.startswith("-"):
                missing.append(word)
    return paths, unknown, missing


def _in_private_tmp(run: _Run, directory: str) -> bool:
    """Whether ``directory`` is in the unit's /tmp of its own (:func:`_private_tmp`), and no
    ``BindPaths=`` brings the host's directory there (its writes are then kept)."""
    directives = _service_directives(run)
    if not _private_tmp(directives) or not any(_under(place, directory) for place in PRIVATE_TMP):
        return False
    mounts = _path_lists(run, directives, set())[0]
    return not any(mode == BIND and _under(place, directory) for place, mode, _said in mounts)


def _under(place: str, path: str) -> bool:
    """Whether ``path`` is ``place`` or below it."""
    return os.path.commonpath([place, path]) == place


def _private_tmp(directives: list[tuple[str, str, str]]) -> bool:
    """Whether the unit (its :func:`_service_directives`) has a /tmp of its own: PrivateTmp= (a
    boolean, or "disconnected") or DynamicUser=, which forces it."""
    return _switched_on(directives, "PrivateTmp", ("yes", "disconnected")) or _switched_on(directives, "DynamicUser")


def _switched_on(directives: list[tuple[str, str, str]], key: str, on: tuple[str, ...] = ("yes",)) -> bool:
    """Whether the last value of ``key`` systemd can parse (:func:`_setting`) is one of ``on``; a
    value it cannot parse keeps the earlier one, none at all is off."""
    state = False
    for name, value, _where in directives:
        if name == key and (parsed := _setting(value, on)) is not None:
            state = parsed in on
    return state


def _setting(value: str, words: tuple[str, ...]) -> str | None:
    """A boolean setting as systemd reads it (1, yes, y, true, t, on and their opposites, any
    case: parse_boolean) as ``yes`` or ``no``, or one of ``words`` as spelled; None for anything
    else, which systemd ignores."""
    lowered = value.lower()
    if lowered in ("1", "yes", "y", "true", "t", "on"):
        return "yes"
    if lowered in ("0", "no", "n", "false", "f", "off"):
        return "no"
    return value if value in words else None


def _timer(run: _Run) -> tuple[str, str | None, bool]:
    """The timer's link state, systemctl's is-active (None when not asked or no answer), and
    whether the timer runs the unit (active, or enabled when systemctl cannot say). Asked once:
    the schedule check and the checks that follow the scheduler see the same answer."""
    if run.timer is None:
        link = _timer_link(run)
        active = "masked" if link == "masked" else _ask_systemctl(run, "is-active", TIMER)
        run.timer = (link, active)
    link, active = run.timer
    return link, active, active == "active" or (active is None and link == "enabled")


def _schedulers(run: _Run) -> tuple[str, ...]:
    """What starts ``spurinv refresh`` here, as the schedule check decides: "systemd" when the
    timer runs the unit, "cron" when a cron entry names it, both when both do; with neither, the
    unit when its file is there (the one being installed), else nothing. The token, PATH and
    sandbox checks follow every scheduler this returns (the worst verdict wins)."""
    cron = _cron(run) is not None
    timer = _systemd(run) and _timer(run)[2]
    found = tuple(name for name, runs in (("systemd", timer), ("cron", cron)) if runs)
    if found:
        return found
    return ("systemd",) if _unit_text(run, SERVICE) is not None else ()  # read only when neither runs it


def _scheduler(run: _Run) -> str | None:
    """The first of :func:`_schedulers` (the timer when both run), or None."""
    found = _schedulers(run)
    return found[0] if found else None


RANK = {"fail": 3, "warn": 2, "ok": 1, "skip": 0}


def _worst(checks: list[Check]) -> Check:
    """The worst of one check's verdicts under each scheduler (the first of equals)."""
    return max(checks, key=lambda check: RANK[check.status])


def _controller(run: _Run) -> Check:
    from spurinv.refresh import transport_for
    from spurinv.state import file as state_file

    if (skipped := _needs(run, "controller", "config", "node")) is not None:
        return skipped
    config = run.config
    if config.observe:
        return Check("controller", "skip", "observe mode: no controller.url, nothing to reach")
    token = run.results.get("token")
    if token is not None and token.status == "fail":
        return Check("controller", "skip", "needs the token check to pass")
    assert run.node is not None
    if config.controller.transport == "scontrol":
        found = _on_scheduler_path(
            run, "controller", config.controller.scontrol or "scontrol", "controller.scontrol", "controller.scontrol"
        )
        if found.status == "fail":
            return Check("controller", "fail", found.detail, found.fix, found.exit_code)
        if found.status == "warn":
            run.results["controller.path"] = found  # said after the read, which uses this shell's PATH
    state = run.state or state_file.new(fresh=True)
    client = None
    try:
        if run.token_file is not None:
            settings = config.controller.model_copy(update={"token_file": run.token_file})
            config = config.model_copy(update={"controller": settings})
        client = transport_for(run.world, config, run.node, state, run.budget)
        run.client = client
        run.view = view = client.view()
    except ControllerError as exc:
        detail = _one(exc.message)
        if exc.kind == "auth" and config.controller.api == "auto":
            import re

            # refused before any version was detected: the path named is a guess, maybe one the
            # server does not serve
            detail = re.sub(r"^[A-Z]+ /\S+: ", "", detail) + " (API version not detected: the first request was refused)"
        return Check("controller", "fail", detail, _controller_fix(config, exc.kind, run.node), exc.exit_code)
    except (ConfigError, TokenError) as exc:
        return Check("controller", "fail", _one(exc.message), _config_fix(exc.message), exc.exit_code)
    what = f"node {view.name}: {'+'.join([view.base, *view.flags])}, gres {view.gres or 'none'}"
    if config.controller.transport == "scontrol":
        program, version, flavor = (getattr(client, key, "?") for key in ("program", "version", "flavor"))
        detail = f"{program}: {version} ({flavor}; munge authenticated the read); {what}"
        differs = run.results.pop("controller.path", None)
        if differs is not None:
            return Check("controller", "warn", f"{detail}; but {differs.detail}", differs.fix)
        return Check("controller", "ok", detail)
    return Check("controller", "ok", f"{config.controller.url} {client.api} ({_api_why(config, state, client)}); {what}")


def _api_why(config: Config, state: State, client: Any) -> str:
    if config.controller.api != "auto":
        return "set by controller.api"
    api = state["api"]
    if api is not None and api["url"] == config.controller.url and api["version"] == client.api:
        return "detected by an earlier run, kept in the state file"
    if any(request.path == "/openapi/v3" and request.status == 200 for request in client.sent):
        return "the newest node API version that /openapi/v3 lists"
    return "found by probing, newest first"


def _controller_fix(config: Config, kind: str, node: str) -> str:
    settings = config.controller
    scontrol = settings.transport == "scontrol"
    if kind == "unreachable":
        if scontrol:
            return "check that slurmctld and munged run: `scontrol ping`, `munge -n | unmunge`"
        return f"check controller.url and that slurmrestd listens there: `curl -sS {settings.url}/openapi/v3`"
    if kind == "auth":
        if scontrol:
            return "run spurinv as root (a Slurm super user) and check munged: `munge -n | unmunge`"
        if settings.auth == "none":
            return 'the controller wants a token: set controller.auth = "slurm-jwt" and controller.token_file'
        return (
            f"renew the token (`scontrol token username={_word(settings.user)} lifespan=N`) and make "
            f"controller.user {settings.user!r} a Slurm admin"
        )
    if kind == "unknown-node":
        return f'set node.name to the name the controller lists for this host (`scontrol show node`; now "{node}")'
    if kind == "read-only":
        return 'point controller.url at slurmrestd, or set controller.transport = "scontrol"'
    if scontrol:
        return f"controller.scontrol names {settings.scontrol or 'scontrol on PATH'}: set it to Slurm's or spur's scontrol"
    return 'check controller.url and controller.api ("auto" detects the version)'


def _permission(run: _Run) -> Check:
    if (skipped := _needs(run, "permission", "controller")) is not None:
        return skipped
    settings = run.config.controller
    if settings.transport == "scontrol":
        if getattr(run.client, "flavor", None) == "spur":
            return Check(
                "permission", "warn", "spur's scontrol needs a cluster admin to drain; spur cannot say so without a write",
                "make the service's user a spur admin (spurctld's admin list)",
            )  # fmt: skip
        if run.host.euid == 0:
            return Check("permission", "ok", "scontrol runs as root, which Slurm treats as a super user")
        return Check(
            "permission", "warn", f"scontrol runs as uid {run.host.euid}: updates need root or a Slurm operator",
            "run spurinv as root (the unit does)",
        )  # fmt: skip
    if settings.auth == "slurm-jwt" and settings.user == "root":
        return Check("permission", "ok", "X-SLURM-USER-NAME root: a Slurm super user may update nodes")
    who = f"controller.user {settings.user!r}" if settings.auth == "slurm-jwt" else f"the {settings.auth} token's user"
    return Check(
        "permission", "warn", f"the read succeeded; whether {who} may update nodes shows only on a write",
        f"make sure {who} is a Slurm admin: `sacctmgr show user {_word(settings.user)} format=user,adminlevel`",
    )  # fmt: skip


def _register_command(run: _Run) -> Check:
    if (skipped := _needs(run, "register_command", "config")) is not None:
        return skipped
    argv = run.config.controller.register_command
    if not argv:
        return Check("register_command", "skip", "controller.register_command is not set (GRES is updated directly)")
    found = _on_scheduler_path(
        run, "register_command", argv[0], "controller.register_command", "controller.register_command[0]"
    )
    if found.status != "ok":
        return found
    return Check("register_command", "ok", f"{found.detail} is executable")


def _scheduler_path(run: _Run, scheduler: str | None) -> tuple[str, str]:
    """The PATH ``scheduler``'s runs get, and where it comes from."""
    if scheduler == "cron":  # the first entry's, as _cron names its file
        entries = _cron_entries(run)
        return _cron_path(run, entries[0][0], entries[0][3]) if entries else _cron_path(run, "", {})
    path = _unit_environment(run).get("PATH")
    if path is None:
        return SYSTEMD_PATH, "systemd's default PATH"
    where = next((f"{key}= in {where}" for key, value, where in reversed(_service_directives(run))
                  if key in ("Environment", "EnvironmentFile") and value), SERVICE)  # fmt: skip
    return path, f"PATH from {where}"


def _cron_path(run: _Run, where: str, environment: dict[str, str]) -> tuple[str, str]:
    """The PATH a cron entry's command gets, and where it comes from: a ``PATH=`` among the
    assignments above it in ``where`` (:func:`_cron_entries`; crontab(5)), else cron's default;
    busybox crond sets none and passes on its own, which check cannot see: the one init systems
    and container images give (systemd's default), not a narrower guess that fails a working node."""
    if "PATH" in environment:
        return environment["PATH"], f"PATH= in {where}"
    if _cron_daemons(run) == {"busybox"}:
        return SYSTEMD_PATH, "busybox crond passes on its own PATH: the usual one assumed"
    return CRON_PATH, "cron's default PATH"


def _on_scheduler_path(run: _Run, name: CheckName, program: str, what: str, key: str) -> Check:
    """Where the scheduler's run finds ``program`` (``detail``: its path; a ``fail`` when it
    finds none, a ``warn`` when this shell's PATH finds another one), as check ``name``."""
    if "/" in program:  # a path of the config's, on this system as every path the config names
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            return Check(name, "fail", f"{what}: {program} does not exist or is not an executable file",
                         f"set {key} to the absolute path of the program", exitcode.CONFIG)  # fmt: skip
        return Check(name, "ok", program)
    return _worst([_on_path(run, name, program, what, key, scheduler) for scheduler in _schedulers(run) or (None,)])


def _on_path(run: _Run, name: CheckName, program: str, what: str, key: str, scheduler: str | None) -> Check:
    path, origin = _scheduler_path(run, scheduler)
    theirs = _which(run, program, path)
    ours = _which(run, program, run.world.environ.get("PATH") or os.defpath)
    if theirs is None:
        shell = f" (this shell finds {ours})" if ours else ""
        return Check(name, "fail", f"{what}: {program!r} is not on the scheduler's PATH {path} ({origin}){shell}",
                     f"set {key} to an absolute path" + (f', e.g. "{ours}"' if ours else ""), exitcode.CONFIG)  # fmt: skip
    if ours is not None and ours != theirs:
        return Check(name, "warn", f"{what}: the scheduler's runs use {theirs} ({origin}), this shell {ours}",
                     f'set {key} = "{theirs}" (or the one you mean) to make it explicit')  # fmt: skip
    return Check(name, "ok", theirs)


def _which(run: _Run, program: str, path: str) -> str | None:
    for directory in path.split(os.pathsep):
        if not directory.startswith("/"):
            continue
        candidate = os.path.join(directory, program)  # run from this system, as the config's paths
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


# --- how it is scheduled -------------------------------------------------------------------------


def _read_text(path: str, errors: str = "replace", limit: int = MAX_TEXT) -> str | None:
    """A regular file's first ``limit`` bytes as text, or None: never blocks on a FIFO
    (O_NONBLOCK), and follows symlinks (unit files often are ones). ``errors``: how bytes that are
    not UTF-8 are decoded (a reader that must tell them apart asks for ``surrogateescape``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in a path a unit or cron file names
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0 and (chunk := os.read(fd, left)):  # a read may return less than asked
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", errors)
    except OSError:
        return None
    finally:
        os.close(fd)


def _root_text(run: _Run, name: str, errors: str = "replace", limit: int = MAX_TEXT) -> str | None:
    """:func:`_read_text` of ``name`` on the checked root; a symlink's absolute target is taken on
    that root too, as its systemd or cron reads it, not on the system running check (--root)."""
    return _read_text(_follow(run, run.world.root.join(name.lstrip("/"))), errors, limit)


def _unit_text(run: _Run, unit: str) -> str | None:
    for directory in UNIT_DIRS:
        text = _root_text(run, f"{directory}/{unit}")
        if text is not None:
            return text
    return None


def _systemd(run: _Run) -> bool:
    """systemd is PID 1 on the checked root (sd_booted(3): /run/systemd/system is a directory)."""
    return os.path.isdir(run.world.root.join("run/systemd/system"))


def _cron(run: _Run) -> str | None:
    """The cron file (or crontab) that runs spurinv refresh, if any."""
    found = _cron_entry(run)
    return found[0] if found else None


def _cron_files(run: _Run) -> list[str]:
    """The cron files on the checked root that may run spurinv refresh: each file of /etc/cron.d
    the root's cron reads (:func:`_cron_reads`), by name, then /etc/crontab and root's crontab."""
    kind = _cron_kind(run)
    return [*(name for name in _cron_d(run) if _cron_reads(kind, name)), *CRON_FILES[1:]]


def _cron_d(run: _Run) -> list[str]:
    """Every file name of /etc/cron.d on the checked root, as ``etc/cron.d/NAME``, sorted."""
    try:
        names = sorted(os.listdir(_follow(run, run.world.root.join("etc/cron.d"))))
    except (OSError, ValueError):
        names = []
    return [f"etc/cron.d/{name}" for name in names]


DEBIAN_LIKE = frozenset({"debian", "ubuntu"})
CRONIE_LIKE = frozenset({"rhel", "centos", "fedora", "rocky", "almalinux", "ol", "amzn", "suse", "opensuse", "sles", "arch"})
CRONIE_SKIPS = ("~", ".rpmsave", ".rpmorig", ".rpmnew")  # cronie's database.c not_a_crontab(), with "." and "#" first


def _cron_kind(run: _Run) -> str | None:
    """The cron the checked root's distribution ships: "debian" (Debian's cron 3.0pl1, which reads
    a /etc/cron.d file only when its name is run-parts' letters, digits, "_" and "-"), "cronie"
    (RHEL, Fedora, SUSE, Arch: any name but a hidden one, a backup or a package manager's copy),
    or None when the root does not say (/etc/debian_version, /etc/os-release's ID and ID_LIKE)."""
    if "kind" not in run.cron:
        kind: str | None = None
        if _root_text(run, "etc/debian_version") is not None:
            kind = "debian"
        else:
            text = _root_text(run, "etc/os-release") or _root_text(run, "usr/lib/os-release") or ""
            words: set[str] = set()
            for line in text.split("\n"):
                key, _, value = line.partition("=")
                if key.strip() in ("ID", "ID_LIKE"):
                    words |= {word.split("-")[0] for word in value.strip().strip("'\"").lower().split()}
            kind = "debian" if words & DEBIAN_LIKE else "cronie" if words & CRONIE_LIKE else None
        run.cron["kind"] = kind
    found: str | None = run.cron["kind"]
    return found


def _cron_reads(kind: str | None, name: str) -> bool:
    """Whether the root's cron reads the /etc/cron.d file ``name`` (``etc/cron.d/NAME``). Not
    knowing which cron it is, a file either reads counts (cronie's rule, the wider one): a node
    must not fail on a rule only one cron has; :func:`_cron_file_problem` warns instead."""
    import re

    base = name.rsplit("/", 1)[-1]
    if kind == "debian":
        return re.fullmatch(r"[A-Za-z0-9_-]+", base) is not None
    return not base.startswith((".", "#")) and not base.endswith(CRONIE_SKIPS)


def _debian_skips(name: str) -> bool:
    return name.startswith("etc/cron.d/") and not _cron_reads("debian", name)


def _word(path: str) -> str:
    """``path`` as one shell word that still names the file once pasted from check's output:
    shlex's quoting, or, for a name the output shows escaped (a control character, bytes that are
    not UTF-8: :func:`spurinv.secret.printable`), bash's ``$'...'`` with each such byte as
    ``\\xHH``: shlex's quotes around the escaped text would name another file."""
    if path.isprintable():
        return shlex.quote(path)
    try:
        data = path.encode("utf-8", "surrogateescape")  # a name os.listdir could not decode
    except UnicodeEncodeError:
        data = path.encode("utf-8", "surrogatepass")
    return "$'" + "".join(chr(byte) if 0x20 <= byte < 0x7F and byte not in b"\\'" else f"\\x{byte:02x}" for byte in data) + "'"


def _cron_d_rename(run: _Run, cron: str) -> str:
    """``mv`` that gives the cron.d file ``cron`` a name Debian's cron reads, one no file of
    /etc/cron.d on the root has: ``mv`` would replace that file (another job's, say)."""
    import re

    base = re.sub(r"[^A-Za-z0-9_-]", "", cron.rsplit("/", 1)[-1].split(".", maxsplit=1)[0]) or "spurinv"
    taken = set(_cron_d(run))
    names = (base, *(f"{base}-{number}" for number in range(2, len(taken) + 3)))  # one of them is free
    name = next(name for name in names if f"etc/cron.d/{name}" not in taken)
    return f"mv {_word(cron)} /etc/cron.d/{name}"


def _cron_entry(run: _Run) -> tuple[str, str | None] | None:
    """The cron file (or crontab) of the first entry whose schedule fires, else of the first entry
    (a @reboot beside an entry that runs every minute is no problem), and what is wrong with that
    one's schedule (a date that never comes), if anything. Found with every entry:
    :func:`_cron_entries`."""
    _cron_entries(run)
    found: tuple[str, str | None] | None = run.cron["entry"]
    return found


def _cron_daemons(run: _Run) -> set[str] | None:
    """The cron daemons running on the checked root: "cron" (cron, crond) and "busybox" (busybox
    crond, which reads only the crontabs in /var/spool/cron/crontabs: no /etc/crontab, no
    /etc/cron.d); None when /proc there cannot tell. Read once a run: every entry's PATH asks."""
    if "daemons" not in run.cron:
        run.cron["daemons"] = _read_cron_daemons(run)
    found: set[str] | None = run.cron["daemons"]
    return found


def _read_cron_daemons(run: _Run) -> set[str] | None:
    try:
        pids = [name for name in os.listdir(run.world.root.join("proc")) if name.isdigit()]
    except OSError:
        return None
    if not pids:
        return None
    found: set[str] = set()
    for pid in pids:
        comm = (_read_text(run.world.root.join("proc", pid, "comm")) or "").strip()
        if comm in ("cron", "crond") and not _busybox(run, pid):
            return {"cron"}  # it reads every cron file: whether busybox crond runs too changes nothing
        if comm in ("cron", "crond"):  # Alpine's /usr/sbin/crond is a link to busybox: the name is crond
            found.add("busybox")
        if comm == "busybox" and "crond" in (_read_text(run.world.root.join("proc", pid, "cmdline")) or ""):
            found.add("busybox")
    return found


BUSYBOX_CRONTABS = "/var/spool/cron/crontabs/"


def _busybox(run: _Run, pid: str) -> bool:
    """The process ``pid`` runs the busybox program (its /proc exe link names it; unreadable: no)."""
    try:
        return os.path.basename(os.readlink(run.world.root.join("proc", pid, "exe"))).startswith("busybox")
    except (OSError, ValueError):
        return False


def _wants_links(run: _Run) -> list[str]:
    """Where an enabled timer's link may be: timers.target.wants first (the shipped timer's
    WantedBy=), then any other unit's .wants, .requires or .upholds directory (a timer WantedBy=
    or UpheldBy=multi-user.target starts at boot all the same)."""
    found: list[str] = []
    for directory in UNIT_DIRS:
        try:
            names = sorted(os.listdir(run.world.root.join(directory)))
        except (OSError, ValueError):
            continue
        found += [run.world.root.join(directory, name, TIMER) for name in names
                  if name.endswith((".wants", ".requires", ".upholds")) and name != "timers.target.wants"]  # fmt: skip
    return [*(run.world.root.join(directory, "timers.target.wants", TIMER) for directory in UNIT_DIRS), *found]


def _timer_link(run: _Run) -> str:
    """The timer's enablement: "enabled" (a link that reaches the unit), "masked" (the first unit
    file found reaches /dev/null or is empty: :func:`_masked`), "dangling" (a wants link to nothing) or "disabled"."""
    if _masked_at(run, TIMER) is not None:
        return "masked"
    state = "disabled"
    for link in _wants_links(run):
        if not os.path.lexists(link):
            continue
        target = os.readlink(link) if os.path.islink(link) else link
        if target == "/dev/null":
            return "masked"
        # followed on the root in every component, as systemd there would: `systemctl link`'s
        # /etc/systemd/system/UNIT -> /opt/..., a relative link to it, or /lib -> /usr/lib
        if os.path.isfile(_follow(run, link)):
            return "enabled"
        if target.startswith("/") and run.world.root.path != "/" and os.path.isfile(target):
            return "enabled"  # a link made for the test root, or a chroot's own
        state = "dangling"
    return state


def _masked_at(run: _Run, unit: str) -> str | None:
    """The unit directory whose ``unit`` file masks it (:func:`_masked`), or None: the first file
    systemd finds in :data:`UNIT_DIRS` decides, and a lower /dev/null link is overridden."""
    for directory in UNIT_DIRS:
        if os.path.lexists(run.world.root.join(directory, unit)):
            return directory if _masked(run, directory, unit) else None
    return None


def _masked(run: _Run, directory: str, unit: str) -> bool:
    """``unit`` in ``directory`` (on the checked root) is masked as systemd sees it: a link that
    reaches /dev/null (``systemctl mask``'s absolute one or a relative one) or an empty file. As
    systemd's null_or_empty(): any character or block device masks, and so does an empty file."""
    path = run.world.root.join(directory, unit)
    if os.path.islink(path) and os.readlink(path) == "/dev/null":
        return True
    followed = _follow(run, path)
    if followed == run.world.root.join("dev/null"):  # the root's /dev/null, even where it has no /dev
        return True
    try:
        found = os.stat(followed)
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(found.st_mode) or stat.S_ISBLK(found.st_mode) or (stat.S_ISREG(found.st_mode) and found.st_size == 0)


def _ask_systemctl(run: _Run, *args: str) -> str | None:
    """``systemctl ARGS`` (bounded); its first word, or None when it cannot answer."""
    if run.host.systemctl is None:
        return None
    from spurinv.controller import process

    timeout = min(5.0, run.budget.remaining())
    environ = {**run.world.environ, "SYSTEMD_PAGER": "", "LC_ALL": "C"}
    try:  # bounded, its process group killed on expiry or on SIGTERM
        done = process.run([run.host.systemctl, *args], environ, timeout, limit=4096)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    return words[0] if words else None


def _schedule(run: _Run) -> Check:
    """What runs spurinv refresh; then that the program each scheduler starts is there and the
    cron file is one cron reads."""
    found = _schedule_found(run)
    if found.status not in ("ok", "warn"):
        return found
    _directives, refused, too_large = _service_reading(run) if "systemd" in _schedulers(run) else ([], None, None)
    if too_large is not None:
        return Check(
            "schedule", "fail", f"{too_large}: too large to check (over {MAX_UNIT_TEXT >> 20} MiB), so check cannot "
            f"say how systemd runs {SERVICE}", f"shorten {too_large}, then systemctl daemon-reload", exitcode.CONFIG,
        )  # fmt: skip
    if refused is not None:
        where, what = refused
        return Check(
            "schedule", "fail", f"systemd does not load {SERVICE}: in {where}, {what}, so the timer starts nothing",
            f"fix that line of {where}, then systemctl daemon-reload", exitcode.CONFIG,
        )  # fmt: skip
    for scheduler in _schedulers(run):
        problem = _program_problem(run, scheduler) or (_cron_file_problem(run) if scheduler == "cron" else None)
        if problem is not None and (problem.status == "fail" or found.status == "ok"):
            return problem
    stopped = _drop_in_stops(run) if "systemd" in _schedulers(run) else None
    if stopped is not None and found.status == "ok":  # the unit loads, without that drop-in's rest
        where, what = stopped
        return Check(
            "schedule", "warn", f"in {where}, {what}: systemd applies none of its lines from there on",
            f"fix that line of {where}, then systemctl daemon-reload",
        )  # fmt: skip
    return found


def _program_problem(run: _Run, scheduler: str) -> Check | None:
    """The program the scheduler starts must exist and be executable (on the checked root); the
    unit's must not sit where ProtectHome= hides it. Each one: cron runs every entry, a oneshot
    unit every ExecStart= (after an empty one's reset); a missing one fails its runs all the same."""
    # told, where to point, the program, the PATH it is looked for on and where that comes from
    started: list[tuple[str, str, str, str, str]] = []
    if scheduler == "cron":
        for where, _number, command, environment in _cron_entries(run):
            words = schedule.shell_words(command) or command.split()
            path, origin = _cron_path(run, where, environment)
            refreshes = schedule.refreshes(words, sh=True)
            started += _runners(refreshes, where, f"{where} runs", path, origin)
            if not refreshes:
                started += [(f"{where} runs {program}", where, program, path, origin) for program in words[:1]]
    else:
        if (directory := _masked_at(run, SERVICE)) is not None:
            return Check("schedule", "fail", f"{SERVICE} is masked (/{directory}/{SERVICE}): the timer cannot start "
                         "it, and no run happens", f"systemctl unmask {SERVICE}", exitcode.CONFIG)  # fmt: skip
        starts: list[str] = []
        for key, value, _where in _service_directives(run):
            if key == "ExecStart":
                starts = [*starts, value] if value else []  # an empty one resets the list
        path, origin = _scheduler_path(run, "systemd")
        home = [value for key, value, _where in _service_directives(run) if key == "ProtectHome"]
        for start in starts:
            words = schedule.words(start) or start.split()  # systemd unquotes the program too
            program = words[0].lstrip("@-:+!") if words and words[0] else start.split()[0]  # "": no program to find
            told = f"{SERVICE} ExecStart= runs {program}"
            if (
                home
                and home[-1] in ("yes", "true", "tmpfs")
                and program.startswith("/")  # first: commonpath raises on a bare name (systemd searches its own PATH)
                and any(_under(place, os.path.normpath(program)) for place in ("/home", "/root", "/run/user"))
            ):
                return Check(
                    "schedule", "fail", f"{told}, but ProtectHome={home[-1]} hides it from the unit (every run fails 203/EXEC)",
                    "install spurinv outside /home and /root (e.g. /opt, see README.md) and point ExecStart= there",
                    exitcode.CONFIG,
                )  # fmt: skip
            # systemd looks a bare ExecStart= program up on its own compiled-in PATH, never the
            # unit's Environment=PATH= (systemd.service(5)); what that program starts gets the unit's
            started.append((told, SERVICE, program, SYSTEMD_PATH, "systemd's fixed search path for ExecStart="))
            # the spurinv it starts too (env, flock, sh -c): a missing one fails every run all the same
            located = _runners(schedule.refreshes([program, *words[1:]], sh=False), SERVICE, f"{SERVICE} ExecStart= runs", path,
                               origin)  # fmt: skip
            started += [found for found in located if found[2] != program]
    # each program is looked for once: 10,000 cron.d files naming the same one took 5 s
    looked: dict[tuple[str, str], str | None] = {}
    interpreters: dict[str, str | None] = {}
    for told, where, program, path, origin in dict.fromkeys(started):
        if not program:
            continue
        if (program, path) in looked:
            found = looked[(program, path)]
        elif program.startswith("/"):
            found = looked[(program, path)] = program if _executable(run, program) else None
        else:
            found = looked[(program, path)] = next((os.path.join(folder, program) for folder in path.split(":")
                          if folder.startswith("/") and _executable(run, os.path.join(folder, program))), None)  # fmt: skip
        if found is None:
            on = "" if program.startswith("/") else f" on its PATH {path} ({origin})"
            return Check(
                "schedule", "fail", f"{told}, which is not an executable file{on}: every run fails",
                f"install spurinv there, or point {where} at it (`command -v spurinv`)", exitcode.CONFIG,
            )  # fmt: skip
        if found not in interpreters:
            interpreter = _python_shebang(run, found)
            interpreters[found] = interpreter if interpreter is not None and not _executable(run, interpreter) else None
        interpreter = interpreters[found]
        if interpreter is not None and interpreter.endswith("\r"):
            return Check("schedule", "fail", f"{told}, whose #! line ends in a carriage return (a CRLF line end): "
                         f"the kernel looks for the interpreter {interpreter} and every run fails",
                         f"sed -i --follow-symlinks '1s/\\r$//' {_word(found)}", exitcode.CONFIG)  # fmt: skip
        if interpreter is not None:
            return Check(
                "schedule", "fail", f"{told}, whose #! interpreter {interpreter} is not an executable file (a venv "
                "whose Python was removed or upgraded away): every run fails",
                f"make the venv again with an installed Python and reinstall spurinv in it (README.md, Install on a "
                f"node), or point {where} at a spurinv that runs", exitcode.CONFIG,
            )  # fmt: skip
    return None


def _python_shebang(run: _Run, program: str) -> str | None:
    """The absolute Python interpreter ``program``'s #! line names (a venv's bin/python), or None:
    a venv made from a Python later removed keeps a dangling bin/python, and the kernel then
    refuses every run. Only a Python is looked at: a shell's #! is the system's own."""
    try:
        fd = os.open(_follow(run, run.world.root.join(program.lstrip("/"))), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        head = os.read(fd, 256) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        head = b""
    finally:
        os.close(fd)
    if not head.startswith(b"#!"):
        return None
    # split at blanks only, as the kernel's binfmt_script: a CRLF script's "python3\r" is no Python
    words = [
        word for word in head[2:].split(b"\n", 1)[0].decode("utf-8", "surrogateescape").replace("\t", " ").split(" ") if word
    ]
    if words and words[0].startswith("/") and os.path.basename(words[0]).startswith("python"):
        return words[0]
    return None


def _runner(found: schedule.Refresh) -> str:
    """The program that starts the ``spurinv`` word found: itself, or for ``python3 -m spurinv``
    the interpreter (the word before ``-m`` and its options)."""
    words, at = found.words, found.at
    if at - 2 >= found.begin and words[at - 1] == "-m":
        at -= 2
        while at > found.begin and words[at].startswith("-"):
            at -= 1
    return words[at]


def _runners(
    refreshes: list[schedule.Refresh], where: str, told: str, path: str, origin: str
) -> list[tuple[str, str, str, str, str]]:
    """For :func:`_program_problem`: the program that runs each of ``refreshes`` (one command's),
    looked for on the PATH its command gives it, else on ``path``; one check cannot tell about is
    left out (its PATH set by an earlier command, reset by sudo or env -i, or a name relative to a
    working directory check does not know)."""
    found: list[tuple[str, str, str, str, str]] = []
    first: dict[int, int] = {}  # each list of words' first PATH setting: one scan, not one per refresh
    for refresh in refreshes:
        program, given = _runner(refresh), _given_path(refresh, first)
        if given:
            given = given.replace("${PATH}", path).replace("$PATH", path)  # PATH=/opt/bin:$PATH
        if given is None or "$" in given or ("/" in program and not program.startswith("/")):
            continue
        found.append((f"{told} {program}", where, program, *((given, "the command's PATH=") if given else (path, origin))))
    return found


def _given_path(refresh: schedule.Refresh, first: dict[int, int]) -> str | None:
    """The PATH the command line gives the program that runs ``refresh`` (``PATH=DIR spurinv``,
    ``env PATH=DIR``, or on a ``sh -c`` around it, the innermost winning): "" for none; None when
    check cannot tell (an earlier command sets, exports or unsets PATH; sudo or env -i resets it).
    ``first``: where each list of words first names PATH, filled in as they are met."""
    given = ""
    current: schedule.Refresh | None = refresh
    while current is not None:
        words = current.words
        if id(words) not in first:
            first[id(words)] = next((at for at, word in enumerate(words) if word.split("=")[0] == "PATH"), len(words))
        inline = schedule.prefix(words, current.begin, current.at, set(schedule.OPERATORS) if current.sh else set(),
                         earlier=first[id(words)] < current.begin)  # fmt: skip
        if inline is None:
            return None
        given = given or inline.get("PATH", "")
        current = current.outer
    return given


def _executable(run: _Run, program: str) -> bool:
    """``program`` is an executable file on the checked root: a symlink's absolute target is that
    root's (README.md's /usr/local/bin/spurinv -> /opt/spurinv/bin/spurinv), as its scheduler runs it."""
    path = run.world.root.join(program.lstrip("/"))
    if "\0" in path:  # a NUL a cron or unit file gave: no file has that name (realpath raises)
        return False
    # the second: a link to the root's files by their name on this system (a test root's own); one
    # that leaves the root (a venv's python -> /usr/bin/python3.11) is this system's, not the root's
    real = os.path.realpath(path)
    inside = run.world.root.path == "/" or real.startswith(run.world.root.path.rstrip("/") + "/")
    return any(
        os.path.isfile(found) and os.access(found, os.X_OK) for found in (_follow(run, path), *([real] if inside else []))
    )


def _cron_entries(run: _Run) -> list[tuple[str, int, str, dict[str, str]]]:
    """Each entry that runs spurinv refresh in every cron file (cron runs them all): its file,
    line number, command as cron gives it to the shell, and the assignments above it in its file
    (crontab(5): an assignment applies to the entries after it only, as PATH= does)."""
    if "entries" in run.cron:
        entries: list[tuple[str, int, str, dict[str, str]]] = run.cron["entries"]
        return entries
    found: list[tuple[str, int, str, dict[str, str]]] = []
    first: tuple[str, str | None] | None = None  # the first entry, and the first whose schedule fires
    firing: tuple[str, str | None] | None = None
    for name in _cron_files(run):
        with_user = not name.startswith("var/spool")
        environment: dict[str, str] = {}
        for at, line in enumerate((_root_text(run, name) or "").split("\n")):  # a CRLF's "\r" is cron's too
            verdict = schedule.cron_line(line, with_user=with_user)
            split = schedule.cron_split(line, with_user=with_user) if verdict is not None else None
            if split is not None:
                found.append(("/" + name, at + 1, split[1], dict(environment)))
                first = first or ("/" + name, verdict)
                firing = firing or (("/" + name, verdict) if verdict == "" else None)
            if (assigned := _cron_assignment(line)) is not None:
                environment[assigned[0]] = assigned[1]  # one pass: re-reading the lines above each entry was quadratic
    run.cron["entries"] = found
    run.cron["entry"] = firing or first
    return found


def _cron_assignment(line: str) -> tuple[str, str] | None:
    """crontab(5)'s ``NAME = VALUE`` line (blanks around "=" allowed): the value as written, less
    its leading and trailing blanks and one pair of matching quotes around it; no shell reads it,
    so no escape or inner quote is undone and inner blanks stay. None for another line."""
    name, equals, value = line.partition("=")
    name = name.strip(schedule.BLANKS)
    if not equals or not name or name.startswith("#") or any(blank in name for blank in schedule.BLANKS):
        return None
    value = value.lstrip(schedule.BLANKS).rstrip(" \t\r\n\v\f")  # cron strips trailing white space (isspace)
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    return name, value


def _cron_file_problem(run: _Run) -> Check | None:
    """A cron.d file cron refuses (group or other may write it: Debian's cron logs "INSECURE
    MODE" and skips it) or whose last line has no newline (cron drops or refuses it): each file
    that runs spurinv refresh, as cron reads every one of them."""
    entries = _cron_entries(run)
    for cron, number, command, _environment in entries:
        if "\r" in command:  # a CRLF line end: cron ends the command at the "\n" only
            return Check("schedule", "warn", f"cron: {cron}:{number} holds a carriage return (a CRLF line end): cron "
                         "gives it to the shell as part of the command, and spurinv refuses the word it ends",
                         f"sed -i 's/\\r$//' {_word(cron)}")  # fmt: skip
    for cron in dict.fromkeys(where for where, _number, _command, _environment in entries):
        path = _follow(run, run.world.root.join(cron.lstrip("/")))
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            continue
        if _cron_kind(run) is None and all(_debian_skips(where.lstrip("/")) for where, *_rest in entries):
            return Check("schedule", "warn", f"cron: {cron} runs spurinv refresh, but its name holds other than "
                         "letters, digits, _ and -: cronie reads it, Debian's cron skips it",
                         _cron_d_rename(run, cron))  # fmt: skip
        if cron.startswith("/etc/cron.d/") and mode & 0o022:
            return Check("schedule", "warn", f"cron: {cron} is mode {mode:04o}: cron skips a file group or others may "
                         "write (INSECURE MODE)", f"chmod 0644 {_word(cron)}")  # fmt: skip
        if _cron_kind(run) == "cronie" and not cron.startswith(BUSYBOX_CRONTABS) and mode & 0o7533 != 0o400:
            # cronie's check_open(): owner-readable, and no execute, set-id or group/other write bits
            return Check("schedule", "warn", f"cron: {cron} is mode {mode:04o}: cronie skips it (BAD FILE MODE: "
                         "owner read, no execute bit, no write for group or others)", f"chmod 0644 {_word(cron)}")  # fmt: skip
        if cron.startswith(BUSYBOX_CRONTABS) and mode != 0o600 and _cron_daemons(run) != {"busybox"}:  # as crontab(1) writes it
            return Check("schedule", "warn", f"cron: {cron} is mode {mode:04o}: Debian's cron skips a crontab of any "
                         "other mode than 0600 (INSECURE MODE)", f"chmod 0600 {_word(cron)}")  # fmt: skip
        if _last_byte(path) not in (b"", b"\n"):  # the file's own end: _read_text stops at MAX_TEXT
            return Check("schedule", "warn", f"cron: {cron} does not end with a newline: cron ignores (or refuses) its "
                         "last line", f"echo >> {_word(cron)}")  # fmt: skip
    return None


def _last_byte(path: str) -> bytes:
    """A regular file's last byte (b"" when empty or unreadable); never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return b""
    try:
        info = os.fstat(fd)
        return os.pread(fd, 1, info.st_size - 1) if stat.S_ISREG(info.st_mode) and info.st_size else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


def _schedule_found(run: _Run) -> Check:
    entry = _cron_entry(run)
    cron = entry[0] if entry else None
    installed = _unit_text(run, TIMER) is not None
    if not _systemd(run):
        if cron:
            return _cron_check(run, entry, "systemd is not PID 1 here")
        unread = _unread_entry(run)
        return Check(
            "schedule", "fail", "nothing runs spurinv refresh: systemd is not PID 1 here and no cron entry names it"
            + (f"; {unread[0]}" if unread else ""), unread[1] if unread else INSTALL_CRON, exitcode.CONFIG,
        )  # fmt: skip
    link, active, running = _timer(run)
    enabled = link == "enabled"
    if run.host.systemctl is None:
        detail_active = "(systemctl not asked: --root is another system)"
    elif active is None:
        detail_active = "(systemctl did not answer)"
    else:
        detail_active = f"and {active}"
    if running and cron:
        return Check(
            "schedule", "warn", f"both {TIMER} and {cron} run spurinv refresh", f"remove {cron}: one scheduler per node"
        )
    if running:
        # asked only of a systemctl that answered: a hung one costs its timeout once
        said = _ask_systemctl(run, "show", "-p", "Result", SERVICE) if active is not None else None
        result = said.removeprefix("Result=") if said and said.startswith("Result=") else None
        if result not in (None, "success"):
            status = _ask_systemctl(run, "show", "-p", "ExecMainStatus", SERVICE) or ""
            code = status.removeprefix("ExecMainStatus=")
            told = f"{TIMER} is active, but the last run of {SERVICE} ended with result {result}"
            fix = f"journalctl -u {SERVICE} -n 50 names the error; then systemctl reset-failed {SERVICE}"
            # a config or permission error (78, 77) comes back on every run; anything else may
            # be one earlier run's, which the next tick clears
            number = decimal(code, 9)
            if number in (exitcode.CONFIG, exitcode.NOPERM):
                return Check("schedule", "fail", f"{told} (exit {code}, which every run repeats)", fix, number)
            return Check("schedule", "warn", f"{told}" + (f" (exit {code})" if number is not None else ""), fix)
        return Check("schedule", "ok", f"{TIMER} {'enabled' if enabled else 'not enabled at boot'} {detail_active}")
    if cron:
        return _cron_check(run, entry, f"{TIMER} not active")
    if link == "masked":
        return Check("schedule", "fail", f"{TIMER} is masked and no cron entry names spurinv refresh",
                     f"systemctl unmask {TIMER} && {INSTALL_TIMER}", exitcode.CONFIG)  # fmt: skip
    if not installed:
        unread = _unread_entry(run)
        return Check("schedule", "fail", f"{TIMER} is not installed and no cron entry names spurinv refresh"
                     + (f"; {unread[0]}" if unread else ""),
                     unread[1] if unread else f"install systemd/{TIMER} and systemd/{SERVICE} in /etc/systemd/system, "
                     f"then {INSTALL_TIMER}", exitcode.CONFIG)  # fmt: skip
    state = active or detail_active.strip("()")
    dangling = "; its timers.target.wants link points at nothing" if link == "dangling" else ""
    return Check("schedule", "fail", f"{TIMER} is installed but not running ({state}){dangling}", INSTALL_TIMER,
                 exitcode.CONFIG)  # fmt: skip


def _skipped_why(kind: str | None, name: str) -> str:
    """Why the root's cron skips the /etc/cron.d file ``name``, in that cron's own rule: a
    cronie root's backup (``.rpmsave``, ``~``) has no rule of Debian's to blame."""
    if kind == "debian":
        base = name.rsplit("/", 1)[-1]
        what = "a dot" if "." in base else "a space" if " " in base else None
        return ("Debian's cron skips a /etc/cron.d file whose name holds other than letters, digits, _ and -"
                + (f" ({what})" if what else ""))  # fmt: skip
    endings = ", ".join(CRONIE_SKIPS[:-1]) + f" or {CRONIE_SKIPS[-1]}"  # the rule _cron_reads applies
    return (f"{'cronie' if kind == 'cronie' else 'cron'} skips a /etc/cron.d file whose name starts with . or # "
            f"or ends with {endings} (a hidden file, a backup or a package manager's copy)")  # fmt: skip


def _unread_entry(run: _Run) -> tuple[str, str] | None:
    """Why a cron line that would run spurinv refresh does not count, and its fix: a file of
    /etc/cron.d Debian's cron skips for its name, or a line that names it only with its CRLF line
    end taken away (cron gives spurinv ``refresh\\r``); None when there is no such line."""
    kind = _cron_kind(run)
    skipped = [name for name in _cron_d(run) if not _cron_reads(kind, name)]
    for name in [*skipped, *_cron_files(run)]:
        with_user = not name.startswith("var/spool")
        for line in (_root_text(run, name) or "").split("\n"):
            if name in skipped and schedule.cron_line(line, with_user=with_user) is not None:
                return f"/{name} names it, but {_skipped_why(kind, name)}", _cron_d_rename(run, "/" + name)
            if line.endswith("\r") and schedule.cron_line(line.rstrip("\r"), with_user=with_user) is not None:
                return (f"/{name} names it, but with a CRLF line end: cron gives spurinv the carriage return, and "
                        "`refresh\\r` is no command", f"sed -i 's/\\r$//' {_word('/' + name)}")  # fmt: skip
    return None


def _cron_check(run: _Run, entry: tuple[str, str | None] | None, why: str) -> Check:
    assert entry is not None
    cron, problem = entry
    if problem:
        return Check("schedule", "warn", f"cron: {cron} names spurinv refresh, but {problem}",
                     f"give it a schedule that fires, as systemd/spurinv.cron does: {INSTALL_CRON}")  # fmt: skip
    daemons = _cron_daemons(run)
    if daemons is not None and not daemons:
        return Check("schedule", "warn", f"cron: {cron} runs spurinv refresh, but no cron daemon runs here ({why})",
                     "start cron (e.g. `service cron start`, or busybox crond in a container, with the entry in "
                     f"root's crontab {BUSYBOX_CRONTABS}root)")  # fmt: skip
    if daemons == {"busybox"} and not any(where.startswith(BUSYBOX_CRONTABS) for where, *_rest in _cron_entries(run)):
        return Check("schedule", "warn", f"cron: {cron} runs spurinv refresh, but the cron daemon here is busybox "
                     f"crond, which reads only the crontabs in {BUSYBOX_CRONTABS} ({why})",
                     f"put the entry, without its user field, in root's crontab {BUSYBOX_CRONTABS}root "
                     "(`crontab -e` as root)")  # fmt: skip
    spool = {"debian": ("/var/spool/cron/root", "Debian's cron", "/var/spool/cron/crontabs/root"),
             "cronie": (BUSYBOX_CRONTABS, "cronie", "/var/spool/cron/root")}.get(_cron_kind(run) or "")  # fmt: skip
    if spool and daemons != {"busybox"} and all(where.startswith(spool[0]) for where, *_rest in _cron_entries(run)):
        # each cron reads root's crontab in its own spool only; the root may say wrong: a warning
        return Check("schedule", "warn", f"cron: {cron} runs spurinv refresh, but {spool[1]} reads root's crontab "
                     f"at {spool[2]}, not there ({why})",
                     f"add its entry to root's crontab (`crontab -e` as root), then rm {cron}")  # fmt: skip
    return Check("schedule", "ok", f"cron: {cron} runs spurinv refresh ({why})")


def _udev(run: _Run) -> Check:
    if not _systemd(run):
        return Check("udev", "skip", "systemd is not PID 1: GPU events cannot start the service; the schedule catches changes")
    for directory in UDEV_DIRS:
        path = run.world.root.join(directory, "90-spurinv.rules")
        if os.path.isfile(path):
            return Check("udev", "ok", f"/{directory}/90-spurinv.rules starts a run when a GPU device appears or goes")
    return Check("udev", "warn", "90-spurinv.rules is not installed: a partition switch waits for the next tick", INSTALL_UDEV)


def _one(message: str) -> str:
    return " ".join(message.split())


__all__ = ["NAMES", "Check", "Host", "jwt_expiry", "run"]
