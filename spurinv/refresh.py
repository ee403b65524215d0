"""``spurinv refresh``: discover → record → classify → decide → act → save. The full path.

The order inside one locked run: load the state (a corrupt file is moved aside), discover,
record the reading (keeping two), classify, optionally take the confirming second reading after
``confirm_interval``, then ask the policy for steps until it says stop, performing each step's
single request. The baseline only moves on an adoption or a verified registration. The state is
written once, atomically, at the end (never in a dry run).
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from spurinv import exitcode
from spurinv.budget import Budget, Signals, shielded
from spurinv.config.settings import Config, read_token
from spurinv.controller.ownership import PREFIX, extra_record, nonce_of, reason_id, skew_warning
from spurinv.controller.transport import RegisterResult, extra_limit, recorded
from spurinv.errors import (
    ConfigError,
    ControllerError,
    DeadlineError,
    Interrupted,
    LockError,
    SpurinvError,
    StateError,
    Stopped,
    TokenError,
    UsageError,
)
from spurinv.inventory import model
from spurinv.inventory.classify import Kind, classify, diff_summary, switching, verdict
from spurinv.inventory.discovery import discover
from spurinv.inventory.model import Outcome, Reading
from spurinv.inventory.root import Root, boot_id
from spurinv.inventory.sources import link
from spurinv.log import Log
from spurinv.policy import (
    TERMINAL,
    WRITES,
    Action,
    Do,
    Settings,
    clamp_backoff,
    contacted,
    decide,
    expected_view,
    forget_stale_refusal,
    recheck_due,
    settle,
    with_backoff,
)
from spurinv.report import documents, metrics
from spurinv.shape import gpu_counts
from spurinv.state import file as state_file
from spurinv.state import ledger, locations, store
from spurinv.state.file import Api, Drain, State
from spurinv.state.intent import KINDS, Journal, reconcile, recover, unanswered_nonce

if TYPE_CHECKING:
    from spurinv.controller.nodeview import NodeView
    from spurinv.controller.registration import Details
    from spurinv.controller.rest import SessionFactory
    from spurinv.controller.transport import Request
    from spurinv.controller.transport import Transport as Controller
    from spurinv.inventory.model import Discovery as RawDiscovery
    from spurinv.report.models import RefreshDocument, Step

MAX_STEPS = 8
WOULD = "if the requests above were sent: "  # a dry run's step decided on a write it only described
DRY_RUN_SAVES = "a dry run saves nothing"  # what a stop in a dry run says of the state
_SHOWN = 300  # characters of a sent request named in the message of a save that failed after it
_E = TypeVar("_E", bound=SpurinvError)


def summarised(reading: Reading) -> dict[str, Any]:
    """What of the reading the refresh document shows (its summary line needs only each device's model)."""
    inventory = reading["inventory"]
    shown = None if inventory is None else {
        "cpus": inventory["cpus"], "memory_mb": inventory["memory_mb"],
        "devices": [{"model": device["model"]} for device in inventory["devices"]],
    }  # fmt: skip
    return {"ok": reading["ok"], "fingerprint": reading["fingerprint"], "inventory": shown, "errors": reading["errors"]}


def _utc_now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class World:
    """What a run needs from outside: the root, the environment, a log, a clock, a way to wait."""

    root: Root
    environ: dict[str, str]
    log: Log
    clock: Callable[[], datetime] = _utc_now
    sleep: Callable[[float], None] = time.sleep
    confirm_wait: Callable[[float], None] = time.sleep  # before the confirming re-read (policy.confirm_interval)
    hostname: str = field(default_factory=lambda: os.uname().nodename)
    session_factory: SessionFactory | None = None
    entropy: Callable[[int], bytes] = os.urandom  # the random part of a drain's id


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """The run's choices (from flags and config)."""

    state_path: str
    config: Config
    config_identity: str
    metrics_file: str | None = None
    metrics_flag: str | None = None
    node_flag: str | None = None
    dry_run: bool = False
    strict: bool = False
    accept: str | None = None
    ignore_backoff: bool = False
    state_named: bool = False  # --state or $SPURINV_STATE: its directory must exist


def load_state(path: str, strict: bool, now: datetime, log: Log, *, dry_run: bool = False) -> tuple[State, list[str]]:
    """Load the state; move a corrupt file aside (``--strict``: refuse with exit 65; a dry run
    only says it would)."""
    notes: list[str] = []
    try:
        loaded = state_file.load(path)
    except state_file.NewerSchema as exc:
        raise StateError(f"{exc}; refusing to touch it", exc.exit_code) from None
    except (state_file.Corrupt, store.StoreError) as exc:
        if isinstance(exc, store.Unsafe):  # a symlink, FIFO or directory there: refuse, never move it
            raise StateError(str(exc), exitcode.CANTCREAT) from None
        if why := state_file.foreign(path):  # --state /etc/hosts: not ours to move aside
            raise StateError(
                f"{path} does not look like a spurinv state file ({why}); refusing to move it aside or replace it: "
                "name a state file of its own (--state, $SPURINV_STATE), or move this one away yourself",
                state_file.Corrupt.exit_code,
            ) from None
        if strict:
            raise StateError(f"{exc} (--strict)", state_file.Corrupt.exit_code) from None
        if dry_run:
            if isinstance(exc, store.StoreError):  # e.g. a dry run by a user who may not read it
                notes.append(f"{exc}; deciding as on a first run (a run that can read it may decide otherwise)")
            else:
                notes.append(f"corrupt state file: {exc}; a real run would move it aside and start afresh")
            return state_file.new(fresh=True), notes
        moved = store.quarantine(path, state_file.stamp(now))
        message = f"corrupt state file: {exc}; moved aside to {moved}; starting afresh"
        log.error(message)
        notes.append(message)
        loaded = None
    # no usable state: the first run that reads the controller looks for a drain of ours there
    return loaded or state_file.new(fresh=True), notes


def check_node(state: State, node: str, path: str, from_flag: bool) -> None:
    """The state file describes one node: refuse a run for another (before anything is written).

    A run for n2 with n1's state would forget n1's drain and drain n2 with n1's inventory.
    """
    if state["node"] is None or state["node"] == node:
        return
    from spurinv.secret import printable

    source = "--node" if from_flag else "node.name (or the host name)"
    old = state["node"]
    intent = state["intent"]
    ours = state["drain"]["reason"] if state["drain"] else None
    if ours is None and intent is not None and intent["kind"] == "drain":
        ours = str(intent["body"].get("reason", "")) or None  # sent or not: the next view would tell
    if ours is None:
        # no drain of ours on record: an UNDRAIN would lift someone else's (an admin's, Slurm's)
        lift = f"this state records no drain of spurinv's, so none is ours to lift: leave {node!r}'s drains alone"
    else:
        lift = (
            f"a drain spurinv set as {old!r} is not ours as {node!r} (its id names the old name) and is never lifted: "
            f"only if `scontrol show node {node}` shows exactly Reason={printable(ours[:200])!r}, lift it by hand "
            f"(scontrol update NodeName={node} State=UNDRAIN); any other reason is someone else's: leave it"
        )
    message = (
        f"{path} is the state of node {old!r}, but this run is for {node!r} (from {source}); "
        f"to run for {old!r} pass --node {old}; if this node was renamed, move {path} aside: {lift}"
    )
    raise UsageError(message) if from_flag else ConfigError(message)


def bind_to_boot(state: State, boot: str) -> tuple[State, str | None]:
    """Bind the state to this boot; a state written under another one (a golden image, a snapshot
    rolled back, a copy) may not know a drain of ours the controller carries, so the run reads
    the controller's record as a state started afresh would (:func:`spurinv.state.intent.recover`).

    A state that records no boot (written before spurinv kept one) is checked once the same way.
    Without a boot id to read (``boot`` empty) nothing changes. Pure.
    """
    if not boot or state["boot_id"] == boot:
        return state, None
    bound: State = {**state, "boot_id": boot}
    if state["fresh"]:
        return bound, None
    note = (
        f"the state file was written under another boot ({state['boot_id'][:8]}…, now {boot[:8]}…): "
        if state["boot_id"]
        else "the state file records no boot: "
    ) + "it may be a stale copy, so the controller's record of our drain is read again"
    return {**bound, "fresh": True}, note


def _remove_leftovers(path: str) -> None:
    """Temporary files of killed runs and ticks: the state file's and the CDI spec cache's (we
    hold the lock, so none is being written)."""
    for prefix in (path, path + locations.CDI_CACHE):
        for leftover in glob.glob(glob.escape(prefix) + ".tmp-[0-9]*"):
            pid = leftover[len(prefix) + 5 :]
            if pid.isascii() and pid.isdigit():  # store.write_atomic's name: an operator's file may match the glob
                store.discard(leftover)


@contextlib.contextmanager
def _locked(path: str, timeout: float, create: bool = True) -> Iterator[None]:
    # the lock wait counts against the run's deadline (the caller passes what is left)
    lock = store.Lock(path, timeout, "refresh", create=create)
    try:
        lock.acquire()
    except store.LockHeld as exc:
        raise LockError(str(exc)) from None
    except store.StoreError as exc:
        raise StateError(str(exc), exc.exit_code) from None
    try:
        yield
    finally:
        lock.release()


def _take_reading(world: World, config: Config) -> tuple[Reading, RawDiscovery]:
    """The reading, and discovery's raw result (``discover --json``'s, for a register command)."""
    raw = discover(world.root, cdi_dirs=config.discovery.cdi_dirs, ignore_pci=frozenset(config.discovery.ignore_pci))
    reading = model.reading(raw, world.clock())
    # the rule a reading does not keep (no failed source in an ok discovery), and the sources' types
    model.discovery({**raw, "inventory": reading["inventory"]})
    return reading, raw


@dataclass(slots=True)
class _Progress:
    """How far a run got, for the words of a stop that ends it outside :func:`converge`."""

    converging: bool = False  # converge() started: its journal may have saved an intent
    saved: bool = False  # the run's state is on disk (set while the signals are held)

    def unsaved(self, dry_run: bool) -> str:
        if dry_run:
            return DRY_RUN_SAVES
        if self.converging:
            return "the state was not saved after it (an intent saved before a write stays for the next run)"
        return "nothing saved"


def run(world: World, options: Options) -> RefreshDocument:
    """One refresh; raise SpurinvError for problems that prevent a document.

    SIGTERM/SIGINT end it early (exit 75); so does ``controller.run_deadline``. The state is saved
    from the first complete reading on, and the stop's message says what was saved (a dry run,
    or a run stopped before its first reading, saves nothing).
    A dry run writes nothing, so it takes no lock (an operator without write access to the state
    directory can still ask what a run would do); it may read a state file mid-replacement, which
    the atomic rename makes either the old or the new one.
    """
    started = time.perf_counter()
    budget = Budget(options.config.controller.run_deadline)
    progress = _Progress()
    with Signals():
        try:
            if options.dry_run:
                return _run(world, options, started, budget, progress)
            wait = min(options.config.state.lock_timeout, budget.remaining())
            with _locked(options.state_path, wait, not options.state_named):
                return _run(world, options, started, budget, progress)
        except Stopped as exc:
            if progress.saved:
                raise
            raise exc.saving(progress.unsaved(options.dry_run)) from None


def classify_for(state: State, reading: Reading, settings: Settings) -> Outcome:
    """Classify ``reading`` against ``state`` (whose newest reading is the previous one).

    An observed baseline was never told to a controller: with one configured, classify as if
    there were no baseline, so the first confirmed reading is compared with the controller's view.
    """
    baseline = state["baseline"]
    if switching(reading):
        return _switching(state, reading, settings)
    if baseline is not None and baseline["source"] == "observed" and not settings.observe:
        outcome = classify(None, state_file.latest(state), reading, state["accepted"])
        # the same story status tells about this baseline, not "no baseline yet"
        reason = outcome["reason"].replace("no baseline yet", "the baseline was only observed, never told to a controller")
        return {**outcome, "reason": reason}
    return classify(baseline["inventory"] if baseline else None, state_file.latest(state), reading, state["accepted"])


def _switching(state: State, reading: Reading, settings: Settings) -> Outcome:
    """A switch in progress says since when; past ``policy.switch_timeout`` it is a failure."""
    outcome = classify(None, None, reading)
    taken_at = reading["taken_at"]
    since = state["switching"]["since"] if state["switching"] else taken_at
    since = min(since, taken_at)  # a start stamped by a clock ahead restarts now (ledger.record)
    detail = outcome["reason"].removeprefix("partition switch in progress: ")
    # the date too when the switch did not start today: a time alone would read as hours, not days
    when = f"{since:%H:%M}" if since.date() == taken_at.date() else f"{since:%Y-%m-%d %H:%M}"
    started = f"partition switch in progress since {when} UTC"
    if state_file.overdue(state, reading, settings.switch_timeout):
        reason = f"{started}, longer than policy.switch_timeout ({settings.switch_timeout} s): {detail}"
        return verdict(Kind.DISCOVERY_FAILED, reason)
    return {**outcome, "reason": f"{started}: {detail}"}


# A reading nothing may act on ends the run with this status, whatever its steps did
_UNSETTLED = {Kind.DISCOVERY_FAILED: exitcode.IOERR, Kind.SWITCHING: exitcode.TEMPFAIL}


@dataclass(frozen=True, slots=True)
class Converged:
    """What :func:`converge` did: the new state, its steps, the exit status, the client used."""

    state: State
    outcome: Outcome
    steps: list[Step]
    exit_code: int
    client: Controller | None
    notes: list[str] = field(default_factory=list)  # warnings for the run's output (clock skew)
    stopped: Stopped | None = None  # the signal or deadline that ended it (its step says "state saved")


def converge(
    state: State,
    reading: Reading,
    settings: Settings,
    connect: Callable[[State], Controller],
    clock: Callable[[], datetime],
    *,
    dry_run: bool = False,
    log: Log | None = None,
    journal: Journal | None = None,
    budget: Budget | None = None,
    nonce: str = "0000",
) -> Converged:
    """Ask the policy for steps until it says stop, performing each step's single request.

    ``state`` already holds ``reading`` as its newest reading. ``connect`` builds the controller
    client the first time one is needed (so a tick that needs none imports no HTTP library).
    Every write is recorded in ``journal`` before it is sent (write-ahead; without a journal the
    intent is only kept in the returned state); an intent left by an earlier run is settled from
    the first view read, and a state started afresh recovers a drain of ours from it. ``nonce``
    is the random part of the id of a drain this run writes. No request starts after
    ``budget``'s deadline; SIGTERM/SIGINT
    (:class:`~spurinv.budget.Signals`) stop the loop with the state as it stands.
    """

    def judge(current: State) -> Outcome:
        # ``current`` already holds ``reading``: classify against the reading before it
        return classify_for({**current, "readings": current["readings"][:-1]}, reading, settings)

    steps: list[Step] = []
    notes: list[str] = []
    view: NodeView | None = None
    client: Controller | None = None
    exit_code = exitcode.OK
    journal = journal or Journal(None)
    action = Action(kind=Do.NONE, reason="starting")
    stopped: Stopped | None = None
    state = forget_stale_refusal(state, judge(state))
    for _ in range(MAX_STEPS):
        start = len(client.sent) if client else 0  # this step's requests are the ones after it
        try:
            outcome = judge(state)
            action = decide(outcome, view, state, settings, clock(), nonce=nonce)
            if action.kind in TERMINAL:
                steps.append(documents.step(action=action.kind.value, reason=action.reason))
                state = _mark_held(state, view, action)
                exit_code = exit_code or action.exit_code
                break
            if action.kind in (Do.ADOPT, Do.OBSERVE, Do.FORGET_DRAIN) or (
                action.kind == Do.RECORD and action.body is not None and "extra" not in action.body
            ):  # no request: a record that cannot go into extra is not written (the id in a reason is all)
                steps.append(documents.step(action=action.kind.value, reason=action.reason))
                state = settle(state, action, clock())
                continue
            if budget is not None:
                budget.check(f"the {action.kind.value} step")
            if client is None:
                client = connect(state)
            if action.kind == Do.READ_VIEW:
                view, state, code = _look(client, action, state, settings, clock(), steps, notes, log)
                exit_code = exit_code or code
                continue
            assert view is not None
            assert action.body is not None
            # a record retired: its outcome is read from the view again by any later run, which
            # retires it again if needed; no intent to settle
            if not dry_run and action.kind != Do.RETIRE:
                state = _begin(journal, state, action, clock(), client.name)
            view, state, step, refused = _write(client, action, view, state, settings, dry_run, clock(), notes, log)
            steps.append(step)
            if refused:
                exit_code = exitcode.PROTOCOL
                # --ignore-backoff buys one retry, not one per step: the refusal just recorded holds
                settings = replace(settings, ignore_backoff=False)
        except (ControllerError, Interrupted, DeadlineError, StateError) as exc:
            # the state as it stands: an unsettled write keeps its intent for the next run
            stopped = _ended(exc, action, client.sent[start:] if client else [], steps, dry_run, log)
            if isinstance(exc, ControllerError):  # a signal or our own deadline is no reason to back off
                state = with_backoff(state, exc.kind, exc.message, settings, clock())
            exit_code = exc.exit_code
            break
    final = judge(state)
    exit_code = exit_code or _UNSETTLED.get(final["kind"], exitcode.OK)
    return Converged(state, final, steps, exit_code, client, notes, stopped)


def _ended(
    exc: ControllerError | Interrupted | DeadlineError | StateError,
    action: Action,
    mine: list[Request],
    steps: list[Step],
    dry_run: bool,
    log: Log | None,
) -> Stopped | None:
    """Add the step an error ended to ``steps``; return the stop, if it was one.

    An intent that cannot be saved before this run sent anything is raised: the run's only news.
    After a write it is a step, so the output still says what was sent."""
    if isinstance(exc, StateError) and not _changed(steps):
        raise exc
    exc = _stop_words(exc, dry_run, log)
    steps.append(_failed(action, mine, exc))
    return exc if isinstance(exc, Stopped) else None


def _stop_words(exc: _E, dry_run: bool, log: Log | None) -> _E:
    """``exc`` as the run's output words it, logged: a stop in a dry run saves nothing; otherwise
    its log line comes before the run saves ("saving"), its step, shown once saved, after."""
    if isinstance(exc, Stopped) and dry_run:
        exc = exc.saving(DRY_RUN_SAVES)
    if log is not None:
        log.error(f"{exc.what}; saving the state" if isinstance(exc, Stopped) and not dry_run else exc.message)
    return exc


def _mark_held(state: State, view: NodeView | None, action: Action) -> State:
    """Keep in the state whether our drain is held for an operator (``status`` and the metric say it)."""
    if view is not None and state["drain"] is not None and state["drain"]["held"] != action.held:
        return {**state, "drain": {**state["drain"], "held": action.held}}
    return state


def _run(
    world: World, options: Options, started: float, budget: Budget | None = None, progress: _Progress | None = None
) -> RefreshDocument:
    config = options.config
    progress = progress or _Progress()
    state, notes = load_state(options.state_path, options.strict, world.clock(), world.log, dry_run=options.dry_run)
    node = config.node_name(world.hostname)
    check_node(state, node, options.state_path, options.node_flag is not None)
    state, stale = bind_to_boot(state, boot_id(world.root.path))
    if stale:
        notes.append(stale)
    if not options.dry_run:
        _remove_leftovers(options.state_path)
    settings = Settings(
        observe=config.observe,
        drain_on_suspicious=config.policy.drain_on_suspicious,
        switch_timeout=config.policy.switch_timeout,
        drain_on_degraded_link=config.policy.drain_on_degraded_link,
        backoff_initial=config.policy.backoff_initial,
        backoff_max=config.policy.backoff_max,
        ignore_backoff=options.ignore_backoff,
        busy_recheck=config.controller.busy_recheck,
        any_job_busy=bool(config.controller.register_command),
        max_extra=extra_limit(config.controller.transport),
    )
    state, warning = clamp_backoff(state, settings, world.clock())
    if warning:
        world.log.warning(warning)
        notes.append(warning)
    reading, raw = _take_reading(world, config)
    if options.accept:
        state = _accept(state, reading, options.accept)
    outcome = classify_for(state, reading, settings)
    state = {**state_file.record(state, reading, settings.switch_timeout), "node": node}
    fits = config.policy.confirm_interval < (budget.remaining() if budget else float("inf"))
    if outcome["kind"] == Kind.CHANGE_PENDING and not fits:
        world.log.info("the confirming re-read would not end before controller.run_deadline; the next tick confirms")
    if outcome["kind"] == Kind.CHANGE_PENDING and not config.observe:
        _credentials(config, world.environ)  # a missing token is said now, not after the confirm wait
    stop: Step | None = None
    if outcome["kind"] == Kind.CHANGE_PENDING and config.policy.confirm_interval > 0 and fits and not options.dry_run:
        reading, raw, outcome, state, stop = _confirm(world, config, settings, state, outcome, (reading, raw))

    progress.converging = True
    if stop is not None:
        result = Converged(state, outcome, [stop], exitcode.TEMPFAIL, None)
    else:
        result = converge(
            state,
            reading,
            settings,
            lambda current: transport_for(world, config, node, current, budget, _details(world, config, node, reading, raw)),
            world.clock,
            dry_run=options.dry_run,
            log=world.log,
            journal=None if options.dry_run else Journal(lambda pending: _save(options.state_path, pending)),
            budget=budget,
            nonce=unanswered_nonce(state, node) or nonce_of(world.entropy(2)),
        )
    if options.dry_run and result.client is None and not config.observe:
        result = _probe(result, lambda: transport_for(world, config, node, state, budget), world.log)
    notes += result.notes
    for degraded in link.confirmed(list(result.state["readings"])):
        notes.append(f"degraded PCIe link: {link.line(degraded)}, in the last two readings")
    state = _finish(result, options, world, node, outcome)
    if not options.dry_run:
        try:
            _keep(options, state, node, started, world.log, progress)
        except StateError as exc:
            result = _unsaved(result, exc, world.log, saved=progress.saved)
    client = result.client
    return documents.refresh_document(
        result.exit_code,
        node,
        config.observe,
        options.dry_run,
        options.state_path,
        scontrol_label(config) if config.controller.transport == "scontrol" else config.controller.url or None,
        summarised(reading),
        outcome,
        _would(result.steps) if options.dry_run else result.steps,
        [request.as_dict() for request in client.sent] if client else [],
        notes,
    )


def _confirm(
    world: World, config: Config, settings: Settings, state: State, outcome: Outcome, first: tuple[Reading, RawDiscovery]
) -> tuple[Reading, RawDiscovery, Outcome, State, Step | None]:
    """Wait ``policy.confirm_interval`` and take the confirming reading; a stop in between keeps
    the first reading (as after a first sighting on its own: the next run confirms against it;
    a second reading cut short is dropped) and says so in the step it returns."""
    summary = diff_summary(outcome["diff"]) if outcome["diff"] and state["baseline"] else "first reading"
    world.log.info(f"change seen ({summary}); re-reading in {config.policy.confirm_interval:g} s")
    try:
        world.confirm_wait(config.policy.confirm_interval)
        reading, raw = _take_reading(world, config)
    except Interrupted as exc:
        return *first, outcome, state, _stopped_waiting(exc, config.policy.confirm_interval, world.log)
    outcome = classify_for(state, reading, settings)
    return reading, raw, outcome, state_file.record(state, reading, settings.switch_timeout), None


def _keep(options: Options, state: State, node: str, started: float, log: Log, progress: _Progress) -> None:
    """Save the run's state, then its metrics."""
    with shielded():  # a stop after this save is told "state saved": it is
        _save(options.state_path, state)
        progress.saved = True
    if options.metrics_file:
        saved = state_file.as_json(state)
        text = metrics.render(saved, time.perf_counter() - started, node, _version())
        try:
            metrics.write(options.metrics_file, text)
        except store.StoreError as exc:
            _record_metrics_failure(options.state_path, state, str(exc), exc.exit_code, log)
            raise StateError(str(exc), exc.exit_code) from None


def _would(steps: list[Step]) -> list[Step]:
    """A dry run's steps after a write it only described were decided on the view that write
    would leave ("drained by spurinv"): their reasons say so, never that it happened."""
    said: list[Step] = []
    for step in steps:
        # a request that failed unsent (its error says why) was not only described
        described = any(earlier.get("request") and not earlier.get("sent") and not earlier.get("error") for earlier in said)
        said.append({**step, "reason": f"{WOULD}{step['reason']}"} if described else step)
    return said


def _changed(steps: list[Step]) -> list[Step]:
    """The steps whose write went to the controller (its answer aside)."""
    return [step for step in steps if step.get("sent") and step["action"] in WRITES]


def _unsaved(result: Converged, exc: StateError, log: Log, *, saved: bool) -> Converged:
    """The run sent a write, then could not save (the state, or, ``saved``, the metrics after
    it): the run still exits ``exc``'s status, but its output keeps the steps, so an operator
    learns the controller was changed; with nothing sent, the error alone is the news (``exc``
    raised)."""
    changed = _changed(result.steps)
    if not changed:
        raise exc
    steps = list(result.steps)
    if result.stopped is not None and not saved:  # its step said "state saved": not so
        said = result.stopped.message
        unsaved = result.stopped.saving("the state was not saved").message
        steps = [{**step, "error": unsaved} if step.get("error") == said else step for step in steps]
    from spurinv.secret import printable

    sent = "; ".join(f"{step['action']} ({printable((step.get('request') or '')[:_SHOWN])})" for step in changed)
    message = f"{exc.message}; this run had already sent: {sent}"
    log.error(message)
    steps.append(documents.step(action="save", reason="what the run did, in the state file and the metrics", error=message))
    return replace(result, steps=steps, exit_code=exc.exit_code)


def _stopped_waiting(exc: Interrupted, interval: float, log: Log) -> Step:
    """The step of a run stopped before its confirming re-read: it saves its first reading."""
    log.error(f"{exc.what}; saving the state with the first reading")
    why = f"the confirming re-read after policy.confirm_interval ({interval:g} s)"
    return documents.step(action="read", reason=why, error=f"{exc.what}; state saved with the first reading")


def _credentials(config: Config, environ: dict[str, str]) -> None:
    """What the transport will need, checked before a run waits: the token (77, naming its key)
    or the scontrol program (78)."""
    settings = config.controller
    if settings.transport == "scontrol":
        from spurinv.controller.process import resolve

        resolve(settings.scontrol or "scontrol", environ, "controller.scontrol")
    else:
        read_token(settings, environ)


def _probe(result: Converged, connect: Callable[[], Controller], log: Log) -> Converged:
    """A dry run that needed no request still reads the node once: a bad token, URL or node name
    shows now, not on the run that confirms a real change."""
    reason = "dry run: one read of the node checks the controller, the credentials and the node name"
    client: Controller | None = None
    try:
        client = connect()
        client.view()
    except (ControllerError, DeadlineError, Interrupted, ConfigError, TokenError) as exc:
        exc = _stop_words(exc, True, log)
        request, sent = _said(client.sent if client else [], exc)
        step = documents.step(action="read", reason=reason, request=request, sent=sent, error=exc.message)
        code = result.exit_code or exc.exit_code
        return Converged(result.state, result.outcome, [*result.steps, step], code, client, result.notes)
    step = documents.step(action="read", reason=reason, request=_last(client), sent=True)
    return Converged(result.state, result.outcome, [*result.steps, step], result.exit_code, client, result.notes)


def _accept(state: State, reading: Reading, prefix: str) -> State:
    fingerprint = reading["fingerprint"] or ""
    if len(prefix) < 8 or not fingerprint.startswith(prefix):
        raise UsageError(
            f"--accept {prefix}: the current reading's fingerprint is {fingerprint[:12] or 'unknown (discovery failed)'}"
        )
    return {**state, "accepted": fingerprint}


def _details(world: World, config: Config, node: str, reading: Reading, raw: RawDiscovery) -> Details | None:
    """What a register command is told besides the GRES (its environment, registration.py);
    None without one (nothing read for it)."""
    if not config.controller.register_command:
        return None
    from spurinv.controller.registration import Details
    from spurinv.inventory.slurmconf import gres_conf
    from spurinv.inventory.sources.host import read_numa_cores

    inventory = reading["inventory"]
    lines = gres_conf(inventory, node, read_numa_cores(world.root)[0]) if inventory else []
    document = documents.discover_document(raw, world.root.path, exitcode.OK if raw.get("ok") else exitcode.IOERR)
    return Details(node=node, gres_conf="".join(f"{line}\n" for line in lines), inventory=document)


def transport_for(
    world: World, config: Config, node: str, state: State, budget: Budget | None = None, details: Details | None = None
) -> Controller:
    """This run's transport (:func:`spurinv.controller.transport.connect`), with the API version an earlier
    run detected at this URL."""
    from spurinv.controller.transport import connect

    settings = config.controller
    cached = state["api"]["version"] if state["api"] and state["api"]["url"] == settings.url else None
    return connect(
        settings, node, world.environ, world.log, sleep=world.sleep, budget=budget, details=details, api=cached,
        session_factory=world.session_factory,
    )  # fmt: skip


def scontrol_label(config: Config) -> str:
    return f"scontrol ({config.controller.scontrol or 'on PATH'})"


def orphaned(view: NodeView, state: State) -> str | None:
    """A ``spurinv:`` drain on this node that is not ours (an id for another node name — a
    renamed node's —, an edited or an older reason): nothing will ever lift it, so say so."""
    if not view.drained or not view.reason.startswith(PREFIX) or state["drain"] is not None:
        return None
    record = extra_record(view.extra)
    named = record.get("node") if record is not None else None
    whose = f"; our record in extra names node {named!r}" if isinstance(named, str) and named != view.name else ""
    lifted = record.get("lifted") if record is not None and named == view.name else None
    why = "an id for another node name, an edited or older reason"
    if isinstance(lifted, dict) and lifted.get("id") == reason_id(view.reason, view.name):
        # Slurm keeps the reason after our lift: a drain without a reason of its own shows it
        why = f"our record says we lifted that drain at {lifted.get('at')}: someone drained again without a reason"
    return (
        f"node {view.name!r} is drained with a spurinv reason that is not this node's drain of ours "
        f"({view.reason[:80]!r}: {why}{whose}); "
        f"spurinv never lifts it: check it and lift it by hand (scontrol update NodeName={view.name} State=UNDRAIN)"
    )


def _look(
    client: Controller,
    action: Action,
    state: State,
    settings: Settings,
    now: datetime,
    steps: list[Step],
    notes: list[str],
    log: Log | None,
) -> tuple[NodeView, State, int]:
    """Read the node (confirming "busy" with an all-nodes query only when one is due), then settle
    an intent an earlier run left unsettled, recover a drain of ours a lost state knew, and warn
    of clock skew the first time our drain's reason time is seen. When the node is unknown after
    our own unsettled register: :func:`_resume`."""
    before = state["drain"]
    # a look during a refusal's backoff is one single-node read, never the all-nodes re-check
    confirm = action.cause != "refused" and recheck_due(
        state["busy_checked_at"], state["node"] or "", settings.busy_recheck, now
    )
    try:
        view = client.view(confirm_busy=confirm)
    except ControllerError as exc:
        if exc.kind != "unknown-node" or (resumed := _resume(client, state, settings, now)) is None:
            raise
        view, state, step = resumed
        steps.append(step)
        return view, state, exitcode.PROTOCOL if step["error"] else exitcode.OK
    steps.append(documents.step(action=action.kind.value, reason=action.reason, request=client.sent[-1].line(), sent=True))
    state = contacted(_remember_api(state, client, now))
    if client.rechecked:
        state = {**state, "busy_checked_at": now}
    state, note = reconcile(state, view)
    if note:
        steps.append(documents.step(action="reconcile", reason=note))
    state, note = recover(state, view, now)
    if note:
        steps.append(documents.step(action="recover", reason=note))
    orphan = orphaned(view, state)
    if orphan:
        notes.append(orphan)
        if log is not None:
            log.warning(orphan)
    _warn_skew(before, state, notes, log)
    return view, state, exitcode.OK


def _resume(client: Controller, state: State, settings: Settings, now: datetime) -> tuple[NodeView, State, Step] | None:
    """The node is unknown to the controller and our own register intent is unsettled: our
    register command deleted the (dynamic) node and did not bring it back (restart failed, run
    killed). Run it again, without the idle look (an unknown node runs no job), instead of
    exiting 68 every tick. None when that is not the case (someone else removed the node)."""
    intent, inventory = state["intent"], state_file.latest_inventory(state)
    registrar = getattr(client, "registrar", None)
    if intent is None or intent["kind"] != "register" or registrar is None or inventory is None:
        return None
    if intent["fingerprint"] != inventory["fingerprint"]:
        return None
    action = Action(
        kind=Do.REGISTER,
        reason="the node is unknown to the controller after our unsettled re-registration "
        "(a dynamic node deleted and not re-created): running register_command again",
        body=intent["body"],
    )
    result = registrar.register(client, gpu_counts(inventory), str(intent["body"].get("gres", "")), inventory["fingerprint"],
                                absent=True)  # fmt: skip
    step = documents.step(action=action.kind.value, reason=action.reason, request=result.request or _last(client), sent=True,
                error=None if result.applied else result.error)  # fmt: skip
    settled = settle(state, action, now, applied=result.applied, error=result.error, settings=settings, remedy=result.remedy)
    return result.view, settled, step


def _read_back(
    client: Controller, expected: NodeView, state: State, notes: list[str], log: Log | None
) -> tuple[NodeView, State]:
    """Read our drain back at once and pin the controller's time for it: a later drain that
    keeps our text, set after the node was resumed, then has another time and is not ours (an
    identical re-drain of a drained node is a no-op on Slurm 24.11: same time, same drain). Best
    effort: if the read fails, the next run pins it (the drain is settled either way)."""
    before = state["drain"]
    try:
        seen = client.view()
    except (ControllerError, DeadlineError):
        return expected, state
    state, _ = reconcile(state, seen)
    _warn_skew(before, state, notes, log)
    return seen, state


def _warn_skew(before: Drain | None, state: State, notes: list[str], log: Log | None) -> None:
    """Warn when the controller's time for our drain, pinned just now, is far from ours
    (``status`` and the metrics keep saying it while the drain is on)."""
    drain = state["drain"]
    if drain is None or drain["reason_changed_at"] is None or (before is not None and before["reason_changed_at"] is not None):
        return
    warning = skew_warning(state_file.drain_skew(drain))
    if warning is not None:
        notes.append(warning)
        if log is not None:
            log.warning(warning)


def _begin(journal: Journal, state: State, action: Action, now: datetime, transport: str) -> State:
    """Record the write durably before it is sent (write-ahead)."""
    assert action.body is not None
    latest = state_file.latest_inventory(state)
    return journal.begin(
        state,
        KINDS[action.kind.value],
        action.body,
        now,
        fingerprint=latest["fingerprint"] if latest else None,
        cause=action.cause,
        transport=transport,
    )


def _remember_api(state: State, client: Controller, now: datetime) -> State:
    url = client.settings.url
    if client.api and (state["api"] is None or state["api"]["version"] != client.api or state["api"]["url"] != url):
        api: Api = {"url": url, "version": client.api, "detected_at": now}
        return {**state, "api": api}
    return state


def _failed(action: Action, mine: list[Request], exc: ControllerError | Interrupted | DeadlineError | StateError) -> Step:
    """The step an error ended; ``mine`` are the requests this step sent (never an earlier step's
    request shown as "would send")."""
    request, sent = _said(mine, exc)
    if action.kind in WRITES and mine and not any(made.write and made.left for made in mine):
        sent = False  # only reads left (an idle look, a version): the step wrote nothing
    return documents.step(action=action.kind.value, reason=action.reason, request=request, sent=sent, error=exc.message)


def _said(mine: list[Request], exc: BaseException) -> tuple[str | None, bool]:
    """The request line and the "sent" of a step that ``exc`` ended, ``mine`` its requests.

    Sent when a write of the step left (applied perhaps: a GRES update before a read-back that
    cannot connect), or its last request did; a read that left before a request that never did
    changed nothing. The line names that write, then the last request as it went ("; not sent:"
    when it never left), so neither is hidden behind the other."""
    if not mine:
        return None, isinstance(exc, ControllerError) and exc.sent
    last = mine[-1]
    went = last.left and not _unsent(exc)
    wrote = next((request for request in reversed(mine[:-1]) if request.left and request.write), None)
    if wrote is None:
        return last.line(), went
    return f"{wrote.line()}; {'then' if went else 'not sent:'} {last.line()}", True


def _unsent(exc: BaseException) -> bool:
    """The controller error of a request that never left (a refused connection): its step says
    "not sent", never "sent"."""
    return isinstance(exc, ControllerError) and not exc.sent


def _last(client: Controller | None) -> str | None:
    return client.sent[-1].line() if client and client.sent else None


def _write(
    client: Controller,
    action: Action,
    view: NodeView,
    state: State,
    settings: Settings,
    dry_run: bool,
    now: datetime,
    notes: list[str] | None = None,
    log: Log | None = None,
) -> tuple[NodeView, State, Step, bool]:
    """Perform (or, in a dry run, describe) one write; return the new view and state (a drain is
    read back at once, :func:`_read_back`)."""
    assert action.body is not None
    latest = state_file.latest(state)
    assert latest is not None
    inventory = latest["inventory"]
    assert inventory is not None
    if action.kind == Do.RECORD:
        return _record(client, action, view, state, settings, dry_run, now)
    if dry_run:
        line = client.describe(action.body)
        step = documents.step(action=action.kind.value, reason=action.reason, request=line, sent=False)
        after = replace(view, gres=action.body["gres"]) if action.kind == Do.REGISTER else expected_view(view, action)
        return after, settle(state, action, now, settings=settings), step, False
    if action.kind == Do.REGISTER:
        result = client.register(action.body, gpu_counts(inventory), inventory["fingerprint"])
        if result.busy:  # nothing sent: decide again from the busy view (a drain), no refusal
            step = documents.step(action=action.kind.value, reason=action.reason, sent=False, error=result.error)
            return result.view, {**state, "intent": None}, step, False
        request = result.request or (client.sent[-2].line() if len(client.sent) > 1 else _last(client))
        if result.record is not None:  # its own update, as a dry run describes it: a failed save names both
            request = f"{request}; then {result.record}"
        step = documents.step(
            action=action.kind.value,
            reason=f"{action.reason} ({result.warning})" if result.warning else action.reason,
            request=request,
            sent=True,
            error=None if result.applied else result.error,
        )
        return (
            result.view,
            settle(state, action, now, applied=result.applied, error=result.error, settings=settings, remedy=result.remedy),
            step,
            not result.applied,
        )
    client.post(action.body)
    step = documents.step(action=action.kind.value, reason=action.reason, request=_last(client), sent=True)
    after, state = expected_view(view, action), settle(state, action, now, settings=settings)
    if action.kind == Do.DRAIN:
        after, state = _read_back(client, after, state, notes if notes is not None else [], log)
    return after, state, step, False


def _record(
    client: Controller, action: Action, view: NodeView, state: State, settings: Settings, dry_run: bool, now: datetime
) -> tuple[NodeView, State, Step, bool]:
    """The controller lists the reading already (someone did what a refusal asked): no GRES
    update, only our registration record, an ``extra``-only update spliced into what the
    controller holds (:func:`spurinv.controller.transport.recorded`); then the reading is the baseline."""
    assert action.body is not None
    if dry_run:
        line = client.describe({"extra": action.body["extra"]})
        after = replace(view, extra=action.body["extra"])
        step = documents.step(action=action.kind.value, reason=action.reason, request=line, sent=False)
        return after, settle(state, action, now, settings=settings), step, False
    before = len(client.sent)
    result = recorded(client, action.body, RegisterResult(True, view, None))
    mine = client.sent[before:]
    from spurinv.secret import printable

    reason = f"{action.reason} ({result.warning})" if result.warning else action.reason
    after = result.view
    if after.drained and (state["drain"] is None or after.reason != state["drain"]["reason"]):
        # recorded, but not in service: a drain that is not ours (Slurm's INVALID_REG, an admin's)
        reason += f"; the node stays drained by someone else ({printable(after.reason[:120]) or 'no reason'!r}): not lifted"
    step = documents.step(action=action.kind.value, reason=reason, request=mine[-1].line() if mine else None, sent=bool(mine))
    return after, settle(state, action, now, settings=settings), step, False


def _finish(result: Converged, options: Options, world: World, node: str, found: Outcome) -> State:
    """Record the run (what it ``found`` and every step it took) and, when nothing is
    outstanding, the fast path's memo (:mod:`spurinv.state.ledger`)."""
    config = options.config
    state, outcome, steps = result.state, result.outcome, result.steps
    done = [step for step in steps if step["action"] != "none"] or steps[-1:]
    decision = ledger.decision(
        world.clock(),
        found["kind"].value,
        steps[-1]["action"] if steps else "none",
        found["reason"],
        result.exit_code,
        len(result.client.sent) if result.client else 0,
        [f"{step['action']}: {step['reason']}" + (f" ({step['error']})" if step["error"] else "") for step in done],
    )
    steady = None
    if ledger.settled(state, outcome["kind"].value, result.exit_code, config.observe) and outcome["fingerprint"]:
        key = ledger.steady_key(
            world.root.path, options.config_identity, options.metrics_flag, options.node_flag, world.hostname,
            state["boot_id"] or "",
        )  # fmt: skip
        memo = ledger.memo(
            outcome["fingerprint"],
            key,
            config.discovery.cdi_dirs,
            config.discovery.ignore_pci,
            options.metrics_file,
            node,
            config.observe,
            config.policy.drain_on_degraded_link,
        )
        steady = state_file.steady(memo)
    return {**state, "last": state_file.decision(decision), "steady": steady}


def _record_metrics_failure(path: str, state: State, error: str, code: int, log: Log) -> None:
    """The state was saved saying how the run went; the metrics after it failed, so the run exits
    ``code``: amend the saved record so ``status`` tells the truth (:func:`ledger.metrics_failed`)."""
    if state["last"] is None:
        return
    amended = ledger.metrics_failed(state["last"], error, code)
    try:
        _save(path, {**state, "last": state_file.decision(amended)})
    except StateError as exc:  # the metrics error is the one the run exits with
        log.error(f"{exc.message} (recording the metrics failure)")


def _save(path: str, state: State) -> None:
    try:
        with shielded():  # SIGTERM waits for the save, so the file is the state as it stands
            state_file.save(path, state)
    except store.StoreError as exc:
        raise StateError(f"{exc}; the previous state file is untouched", exc.exit_code) from None


def _version() -> str:
    from spurinv import __version__

    return __version__


__all__ = ["Converged", "Options", "World", "classify_for", "converge", "run"]
