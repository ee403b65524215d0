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
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from spurinv import exitcode, metrics, store
from spurinv import state as state_file
from spurinv.classify import Kind, Outcome, classify
from spurinv.config import Config, read_token
from spurinv.discovery import discover
from spurinv.errors import ControllerError, LockError, StateError, UsageError
from spurinv.log import Log
from spurinv.model import Discovery, Reading
from spurinv.policy import TERMINAL, Action, Do, Settings, contacted, decide, expected_view, settle, with_backoff
from spurinv.report import RefreshDocument, Step
from spurinv.root import Root
from spurinv.state import Api, Decision, State, Steady
from spurinv.tick import steady_key

if TYPE_CHECKING:
    from spurinv.nodeview import NodeView
    from spurinv.transport import Transport as Controller

MAX_STEPS = 8


class World:
    """What a run needs from outside: the root, the environment, a clock, a way to wait, a log."""

    def __init__(
        self,
        root: Root,
        environ: dict[str, str],
        *,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        hostname: str | None = None,
        log: Log | None = None,
        session_factory: Callable[[], object] | None = None,
    ) -> None:
        self.root = root
        self.environ = environ
        self.clock = clock or (lambda: datetime.now(UTC).replace(microsecond=0))
        self.sleep = sleep
        self.hostname = hostname or os.uname().nodename
        self.log = log or Log(environ)
        self.session_factory = session_factory


class Options:
    """The run's choices (from flags and config)."""

    def __init__(
        self,
        *,
        state_path: str,
        config: Config,
        config_identity: str,
        metrics_file: str | None = None,
        metrics_flag: str | None = None,
        dry_run: bool = False,
        strict: bool = False,
        accept: str | None = None,
        ignore_backoff: bool = False,
    ) -> None:
        self.state_path = state_path
        self.config = config
        self.config_identity = config_identity
        self.metrics_file = metrics_file
        self.metrics_flag = metrics_flag
        self.dry_run = dry_run
        self.strict = strict
        self.accept = accept
        self.ignore_backoff = ignore_backoff


def load_state(path: str, strict: bool, now: datetime, log: Log, *, dry_run: bool = False) -> tuple[State, list[str]]:
    """Load the state; move a corrupt file aside (``--strict``: refuse with exit 65; a dry run
    only says it would)."""
    notes: list[str] = []
    try:
        loaded = state_file.load(path)
    except state_file.NewerSchema as exc:
        raise StateError(f"{exc}; refusing to touch it", exitcode.DATAERR) from None
    except (state_file.Corrupt, store.StoreError) as exc:
        if isinstance(exc, store.StoreError) and "symlink" in str(exc):
            raise StateError(str(exc), exitcode.CANTCREAT) from None
        if strict:
            raise StateError(f"{exc} (--strict)", exitcode.DATAERR) from None
        if dry_run:
            notes.append(f"corrupt state file: {exc}; a real run would move it aside and start afresh")
            return State(), notes
        moved = store.quarantine(path, state_file.stamp(now))
        message = f"corrupt state file: {exc}; moved aside to {moved}; starting afresh"
        log.error(message)
        notes.append(message)
        loaded = None
    return loaded or State(), notes


def _remove_leftovers(path: str) -> None:
    """Temporary files of killed runs (we hold the lock, so none is being written)."""
    for leftover in glob.glob(glob.escape(path) + ".tmp-*"):
        store.discard(leftover)


@contextlib.contextmanager
def _locked(path: str, timeout: float) -> Iterator[None]:
    lock = store.Lock(path, timeout, "refresh")
    try:
        lock.acquire()
    except store.LockHeld as exc:
        raise LockError(str(exc)) from None
    except store.StoreError as exc:
        raise StateError(str(exc), exitcode.CANTCREAT) from None
    try:
        yield
    finally:
        lock.release()


def _take_reading(world: World, config: Config) -> Reading:
    raw = discover(world.root, cdi_dirs=config.discovery.cdi_dirs, ignore_pci=frozenset(config.discovery.ignore_pci))
    return Reading.of(Discovery.model_validate(raw), world.clock())


def run(world: World, options: Options) -> RefreshDocument:
    """One refresh; raise SpurinvError for problems that prevent a document."""
    started = time.perf_counter()
    with _locked(options.state_path, options.config.state.lock_timeout):
        return _run(world, options, started)


def classify_for(state: State, reading: Reading, settings: Settings) -> Outcome:
    """Classify ``reading`` against ``state`` (whose newest reading is the previous one).

    An observed baseline was never told to a controller: with one configured, classify as if
    there were no baseline, so the first confirmed reading is compared with the controller's view.
    """
    baseline = state.baseline
    if baseline is not None and baseline.source == "observed" and not settings.observe:
        baseline = None
    return classify(baseline.inventory if baseline else None, state.latest, reading, state.accepted)


class Converged:
    """What :func:`converge` did: the new state, its steps, the exit status, the client used."""

    def __init__(self, state: State, outcome: Outcome, steps: list[Step], exit_code: int, client: Controller | None) -> None:
        self.state = state
        self.outcome = outcome
        self.steps = steps
        self.exit_code = exit_code
        self.client = client


def converge(
    state: State,
    reading: Reading,
    settings: Settings,
    connect: Callable[[State], Controller],
    clock: Callable[[], datetime],
    *,
    dry_run: bool = False,
    log: Log | None = None,
) -> Converged:
    """Ask the policy for steps until it says stop, performing each step's single request.

    ``state`` already holds ``reading`` as its newest reading. ``connect`` builds the controller
    client the first time one is needed (so a tick that needs none imports no HTTP library).
    """

    def judge(current: State) -> Outcome:
        # ``current`` already holds ``reading``: classify against the reading before it
        return classify_for(current.model_copy(update={"readings": current.readings[:-1]}), reading, settings)

    steps: list[Step] = []
    view: NodeView | None = None
    client: Controller | None = None
    exit_code = exitcode.OK
    for _ in range(MAX_STEPS):
        outcome = judge(state)
        action = decide(outcome, view, state, settings, clock())
        if action.kind in TERMINAL:
            steps.append(Step(action=action.kind.value, reason=action.reason))
            exit_code = exit_code or action.exit_code
            break
        try:
            if action.kind in (Do.ADOPT, Do.OBSERVE, Do.FORGET_DRAIN):
                steps.append(Step(action=action.kind.value, reason=action.reason))
                state = settle(state, action, clock())
                continue
            if client is None:
                client = connect(state)
            if action.kind == Do.READ_VIEW:
                view = client.view()
                steps.append(Step(action=action.kind.value, reason=action.reason, request=client.sent[-1].line(), sent=True))
                state = contacted(_remember_api(state, client, clock()))
                continue
            assert view is not None
            assert action.body is not None
            view, state, step, refused = _write(client, action, view, state, settings, dry_run, clock())
            steps.append(step)
            if refused:
                exit_code = exitcode.PROTOCOL
        except ControllerError as exc:
            steps.append(
                Step(action=action.kind.value, reason=action.reason, request=_last(client), sent=True, error=exc.message)
            )
            if log is not None:
                log.error(exc.message)
            state = with_backoff(state, exc.kind, exc.message, settings, clock())
            exit_code = exc.exit_code
            break
    final = judge(state)
    if final.kind == Kind.DISCOVERY_FAILED:
        exit_code = exit_code or exitcode.IOERR
    return Converged(state, final, steps, exit_code, client)


def _run(world: World, options: Options, started: float) -> RefreshDocument:
    config = options.config
    state, notes = load_state(options.state_path, options.strict, world.clock(), world.log, dry_run=options.dry_run)
    if not options.dry_run:
        _remove_leftovers(options.state_path)
    node = config.node_name(world.hostname)
    settings = Settings(
        observe=config.observe,
        drain_on_suspicious=config.policy.drain_on_suspicious,
        backoff_initial=config.policy.backoff_initial,
        backoff_max=config.policy.backoff_max,
        ignore_backoff=options.ignore_backoff,
    )
    reading = _take_reading(world, config)
    if options.accept:
        state = _accept(state, reading, options.accept)
    outcome = classify_for(state, reading, settings)
    state = state.record(reading).model_copy(update={"node": node})
    if outcome.kind == Kind.CHANGE_PENDING and config.policy.confirm_interval > 0 and not options.dry_run:
        summary = outcome.diff.summary() if outcome.diff and state.baseline else "first reading"
        world.log.info(f"change seen ({summary}); re-reading in {config.policy.confirm_interval:g} s")
        world.sleep(config.policy.confirm_interval)
        reading = _take_reading(world, config)
        outcome = classify_for(state, reading, settings)
        state = state.record(reading)

    result = converge(
        state,
        reading,
        settings,
        lambda current: _client(world, config, node, current),
        world.clock,
        dry_run=options.dry_run,
        log=world.log,
    )
    state = _finish(result, options, world, node)
    if not options.dry_run:
        _save(options.state_path, state)
        if options.metrics_file:
            raw = state.model_dump(mode="json")
            text = metrics.render(raw, time.perf_counter() - started, node, _version())
            try:
                metrics.write(options.metrics_file, text)
            except store.StoreError as exc:
                raise StateError(str(exc), exitcode.CANTCREAT) from None
    client = result.client
    return RefreshDocument(
        format_version=1,
        command="refresh",
        ok=result.exit_code == 0,
        exit_code=result.exit_code,
        node=node,
        mode="observe" if config.observe else "controller",
        dry_run=options.dry_run,
        state_file=options.state_path,
        controller=_scontrol_label(config) if config.controller.transport == "scontrol" else config.controller.url or None,
        reading_ok=reading.ok,
        fingerprint=reading.fingerprint,
        inventory=reading.inventory.summary() if reading.inventory else None,
        outcome=outcome,
        steps=result.steps,
        requests=[request.as_dict() for request in client.sent] if client else [],
        errors=list(reading.errors),
        notes=notes,
    )


def _accept(state: State, reading: Reading, prefix: str) -> State:
    fingerprint = reading.fingerprint or ""
    if len(prefix) < 8 or not fingerprint.startswith(prefix):
        raise UsageError(
            f"--accept {prefix}: the current reading's fingerprint is {fingerprint[:12] or 'unknown (discovery failed)'}"
        )
    return state.model_copy(update={"accepted": fingerprint})


def _client(world: World, config: Config, node: str, state: State) -> Controller:
    """The transport factory: REST (``controller.url``) or ``scontrol``; either re-registers
    through ``controller.register_command`` when it is set."""
    from spurinv.registration import registrar_for

    settings = config.controller
    if settings.transport == "scontrol":
        from spurinv.scontrol import Scontrol

        registrar = registrar_for(settings, world.environ, world.log, world.sleep)
        return Scontrol(settings, node, world.environ, log=world.log, registrar=registrar)
    from spurinv.controller import Controller as Rest

    token = read_token(settings, world.environ)
    cached = state.api.version if state.api and state.api.url == settings.url else None
    session = world.session_factory() if world.session_factory else None
    registrar = registrar_for(settings, world.environ, world.log, world.sleep, secrets=(token,) if token else ())
    return Rest(settings, node, token, api=cached, session=session, registrar=registrar)  # type: ignore[arg-type]


def _scontrol_label(config: Config) -> str:
    return f"scontrol ({config.controller.scontrol or 'on PATH'})"


def _remember_api(state: State, client: Controller, now: datetime) -> State:
    url = client.settings.url
    if client.api and (state.api is None or state.api.version != client.api or state.api.url != url):
        return state.model_copy(update={"api": Api(url=url, version=client.api, detected_at=now)})
    return state


def _last(client: Controller | None) -> str | None:
    return client.sent[-1].line() if client and client.sent else None


def _write(
    client: Controller, action: Action, view: NodeView, state: State, settings: Settings, dry_run: bool, now: datetime
) -> tuple[NodeView, State, Step, bool]:
    """Perform (or, in a dry run, describe) one write; return the new view and state."""
    assert action.body is not None
    assert state.latest is not None
    assert state.latest.inventory is not None
    inventory = state.latest.inventory
    if dry_run:
        line = client.describe(action.body)
        step = Step(action=action.kind.value, reason=action.reason, request=line, sent=False)
        after = (
            view.model_copy(update={"gres": action.body["gres"]}) if action.kind == Do.REGISTER else expected_view(view, action)
        )
        return after, settle(state, action, now, settings=settings), step, False
    if action.kind == Do.REGISTER:
        result = client.register(action.body, inventory.gpu_counts(), inventory.fingerprint)
        step = Step(
            action=action.kind.value,
            reason=action.reason,
            request=result.request or (client.sent[-2].line() if len(client.sent) > 1 else _last(client)),
            sent=True,
            error=None if result.applied else result.error,
        )
        return (
            result.view,
            settle(state, action, now, applied=result.applied, error=result.error, settings=settings),
            step,
            not result.applied,
        )
    client.post(action.body)
    step = Step(action=action.kind.value, reason=action.reason, request=_last(client), sent=True)
    return expected_view(view, action), settle(state, action, now, settings=settings), step, False


def _finish(result: Converged, options: Options, world: World, node: str) -> State:
    """Record the decision and, when nothing is outstanding, the fast path's memo."""
    config = options.config
    state, outcome, steps = result.state, result.outcome, result.steps
    decision = Decision(
        at=world.clock(),
        outcome=outcome.kind.value,
        action=steps[-1].action if steps else "none",
        reason=steps[-1].reason if steps else "",
        exit_code=result.exit_code,
        requests=len(result.client.sent) if result.client else 0,
    )
    steady = None
    quiet = (
        outcome.kind == Kind.UNCHANGED
        and result.exit_code == 0
        and state.drain is None
        and state.refusal is None
        and state.backoff is None
        and state.pending is None
        and state.baseline is not None
        and (config.observe or state.baseline.source != "observed")
    )
    if quiet and outcome.fingerprint:
        steady = Steady(
            fingerprint=outcome.fingerprint,
            key=steady_key(world.root.path, options.config_identity, options.metrics_flag),
            cdi_dirs=config.discovery.cdi_dirs,
            ignore_pci=config.discovery.ignore_pci,
            metrics_file=options.metrics_file,
            node=node,
        )
    return state.model_copy(update={"last": decision, "steady": steady})


def _save(path: str, state: State) -> None:
    import errno

    try:
        state_file.save(path, state)
    except store.StoreError as exc:
        code = exitcode.IOERR if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG) else exitcode.CANTCREAT
        raise StateError(f"{exc}; the previous state file is untouched", code) from None


def _version() -> str:
    from spurinv import __version__

    return __version__


__all__ = ["Converged", "Options", "World", "classify_for", "converge", "run"]
