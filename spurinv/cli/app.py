"""The command line (typer): parse flags, build the world, call, render, exit.

Only this module knows about typer. Errors from the layers below are :class:`SpurinvError`s that
carry their exit status; with ``--json`` even a failure prints an envelope on stdout.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from spurinv import __version__, exitcode
from spurinv.cli.launch import parsed, wants_json
from spurinv.cli.streams import OutputError
from spurinv.errors import ConfigError, SpurinvError, StateError, UsageError
from spurinv.inventory.root import Root, RootError
from spurinv.log import Log
from spurinv.report import documents
from spurinv.shape import UNCHANGED
from spurinv.state import locations

if TYPE_CHECKING:  # the documents' TypedDicts, for mypy only (tests/test_architecture.py)
    from spurinv.report.models import FleetView

app = typer.Typer(
    name="spurinv",
    help="Keep the cluster controller honest about what hardware this node really has.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
config_app = typer.Typer(help="Write or show the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

RootOption = Annotated[
    str, typer.Option("--root", metavar="DIR", help="Filesystem root to read the node from (a mounted host: /host).")
]
StateOption = Annotated[
    str | None,
    typer.Option(
        "--state",
        metavar="FILE",
        help="State file (default: $SPURINV_STATE, $STATE_DIRECTORY/state.json, /var/lib/spurinv/state.json).",
    ),
]
ConfigOption = Annotated[
    str | None,
    typer.Option("--config", metavar="FILE", help="Config file (default: $SPURINV_CONFIG, /etc/spurinv/config.toml)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
NodeOption = Annotated[str | None, typer.Option("--node", metavar="NAME", help="Override node.name.")]
DiffExitOption = Annotated[
    bool, typer.Option("--exit-code", help="Exit 1 when the node differs from the baseline (as git diff).")
]
ControllerUrlOption = Annotated[str | None, typer.Option("--controller-url", metavar="URL", help="Override controller.url.")]
AcceptOption = Annotated[
    str | None,
    typer.Option("--accept", metavar="FINGERPRINT", help="Accept a suspicious reading with this fingerprint (8+ hex digits)."),
]
ApiOption = Annotated[
    str | None,
    typer.Option("--api", metavar="VERSION", help='Override controller.api ("auto", "slurm/v0.0.42").'),
]
ConfirmIntervalOption = Annotated[
    float | None,
    typer.Option("--confirm-interval", metavar="SECONDS", help="Override policy.confirm_interval (seconds; 0 = next tick)."),
]
# The flags that override a config key, by key: a bad value there is a usage error (64), named
# by its flag, where the same value in the file is a configuration error (78).
OVERRIDE_FLAGS = {
    "controller.url": "--controller-url",
    "node.name": "--node",
    "controller.api": "--api",
    "policy.confirm_interval": "--confirm-interval",
}
HEX = frozenset("0123456789abcdef")
Loaded = TypeVar("Loaded")


@dataclass(frozen=True)
class Where:
    """The flags ``refresh``, ``check`` and ``diff`` share: the node's root, its state and config
    files, and ``--json``."""

    root: str
    state: str | None
    config_file: str | None
    as_json: bool
    confirm_wait: Callable[[float], None]  # launch.main's ``confirm_wait``, else time.sleep


_KEYWORD = inspect.Parameter.KEYWORD_ONLY
WHERE = (
    inspect.Parameter("root", _KEYWORD, annotation=RootOption, default="/"),
    inspect.Parameter("state", _KEYWORD, annotation=StateOption, default=None),
    inspect.Parameter("config_file", _KEYWORD, annotation=ConfigOption, default=None),
    inspect.Parameter("as_json", _KEYWORD, annotation=JsonOption, default=False),
)


def _where(command: Callable[..., None]) -> Callable[..., None]:
    """``command(where, **own)`` as a typer command whose flags are :data:`WHERE`'s, then its own:
    the shared flags are stated once (typer has no option groups), and typer reads the signature."""
    own = [p.replace(kind=_KEYWORD) for p in list(inspect.signature(command, eval_str=True).parameters.values())[1:]]

    def run(context: typer.Context, **flags: Any) -> None:
        shared = {parameter.name: flags.pop(parameter.name) for parameter in WHERE}
        command(Where(**shared, confirm_wait=context.obj or time.sleep), **flags)

    run.__name__, run.__qualname__, run.__doc__ = command.__name__, command.__qualname__, command.__doc__
    context = inspect.Parameter("context", _KEYWORD, annotation=typer.Context)
    run.__signature__ = inspect.Signature([context, *WHERE, *own])  # type: ignore[attr-defined]
    return run


def _emit_json(document: Mapping[str, Any]) -> None:
    sys.stdout.write(documents.dumps(document) + "\n")


def _fail(command: str, error: SpurinvError, as_json: bool) -> typer.Exit:
    if as_json:
        _emit_json(documents.error_document(command, error.exit_code, error.code, error.message))
    log = Log(os.environ)
    for line in error.message.splitlines():  # a config file can have several problems: one line each
        log.error(line)
    return typer.Exit(error.exit_code)


def _root(path: str) -> Root:
    try:
        return Root(path)
    except RootError as exc:
        raise UsageError(str(exc)) from None


def _node_flag(value: str | None) -> str | None:
    """``--node``: a bad name is a usage error (64), not a config error."""
    from spurinv import nodename

    if value is not None and not nodename.valid(value):
        raise UsageError(f"--node {value[:80]!r}: not a node name ({nodename.RULE})")
    return value


def _config(flag: str | None, overrides: dict[str, Any] | None = None) -> tuple[Any, dict[str, str], str]:
    from spurinv.config import settings as config_module

    path, explicit = locations.config_path(flag, dict(os.environ))
    cleaned = {key: value for key, value in (overrides or {}).items() if value is not None}
    loaded, origins = config_module.load(path, explicit, cleaned, OVERRIDE_FLAGS)
    return loaded, origins, path


@app.command(short_help="What this node has: GPUs, CPUs, memory, each source.")
def discover(
    root: RootOption = "/",
    as_json: JsonOption = False,
    output: Annotated[
        str, typer.Option("--format", metavar="FORMAT", help="table, json or slurm (slurm.conf + gres.conf lines).")
    ] = "table",
    config_file: ConfigOption = None,
    node: Annotated[
        str | None,
        typer.Option("--node", metavar="NAME", help="Node name for --format slurm (default: config, then hostname)."),
    ] = None,
    devices: Annotated[
        bool, typer.Option("--devices", help="One table row per device (GPU partition) instead of per GPU.")
    ] = False,
) -> None:
    """Print what this node has: devices, CPUs, memory, and each source's status."""
    if output not in ("table", "json", "slurm"):
        raise _fail("discover", UsageError(f"--format {output}: expected table, json or slurm"), as_json)
    if as_json and output == "slurm":
        raise _fail("discover", UsageError("--json and --format slurm ask for two outputs: choose one"), True)
    if as_json:
        output = "json"
    try:
        _node_flag(node)
        loaded = _discover_config(config_file)
        target = _root(root)
    except SpurinvError as error:
        raise _fail("discover", error, output == "json") from None
    from spurinv.cli import render
    from spurinv.inventory import model
    from spurinv.inventory.discovery import discover as run_discovery

    raw = run_discovery(
        target, cdi_dirs=loaded.discovery.cdi_dirs, ignore_pci=frozenset(loaded.discovery.ignore_pci), topology=True
    )
    code = documents.discover_exit(raw)
    if output == "json":
        _emit_json(documents.discover_document(raw, target.path, code))
        raise typer.Exit(code)
    result = model.discovery(raw)
    inventory = result["inventory"]
    if output == "slurm":
        if inventory is None:
            render.discover(render.console(stderr=True), result, target.path)
            raise typer.Exit(code)
        from spurinv.inventory import slurmconf
        from spurinv.inventory.sources.host import read_numa_cores

        try:
            name = node or loaded.node_name(os.uname().nodename)
        except SpurinvError as error:
            raise _fail("discover", error, False) from None
        sys.stdout.write(slurmconf.render(inventory, name, *read_numa_cores(target)))
        raise typer.Exit(code)
    render.discover(render.console(), result, target.path, per_device=devices)
    raise typer.Exit(code)


def _discover_config(flag: str | None) -> Any:
    """discover needs no controller: a default config file this user may not read (a non-root
    user, /etc/spurinv/config.toml 0640) means the defaults, said once on stderr, not exit 78.
    An explicit --config or $SPURINV_CONFIG is still read or refused."""
    from spurinv.config.settings import Config

    path, explicit = locations.config_path(flag, dict(os.environ))
    if not explicit and os.path.exists(path) and not os.access(path, os.R_OK):
        Log(os.environ).warning(
            f"cannot read {path} as uid {os.geteuid()}: discovering with the default discovery settings "
            "(run as root to use its discovery.cdi_dirs and discovery.ignore_pci)"
        )
        return Config()
    return _config(flag)[0]


@app.command(short_help="Discover, confirm and converge the controller (the timer's job).")
@_where
def refresh(
    where: Where,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Read, decide and print the requests; send nothing, write nothing.")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse a corrupt state file (exit 65) instead of moving it aside.")
    ] = False,
    accept: AcceptOption = None,
    metrics_file: Annotated[
        str | None, typer.Option("--metrics-file", metavar="FILE", help="Write node_exporter textfile metrics here.")
    ] = None,
    controller_url: ControllerUrlOption = None,
    node: NodeOption = None,
    api: ApiOption = None,
    confirm_interval: ConfirmIntervalOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing when nothing changed.")] = False,
    ignore_backoff: Annotated[
        bool, typer.Option("--ignore-backoff", help="Contact the controller now even if the backoff has not elapsed.")
    ] = False,
) -> None:
    """Discover, confirm with the previous reading, and converge the controller."""
    from spurinv.refresh import World, run

    environ = dict(os.environ)
    try:
        if accept is not None and (len(accept) < 8 or not set(accept.lower()) <= HEX):
            raise UsageError(f"--accept {accept}: needs 8 or more hex digits of the fingerprint (`spurinv status` shows it)")
        overrides = {
            "controller.url": controller_url,
            "node.name": _node_flag(node),
            "controller.api": api,
            "policy.confirm_interval": confirm_interval,
        }
        options = _run_options(
            where.state, where.config_file, overrides, metrics_file, node, environ,
            dry_run=dry_run, strict=strict, accept=accept, ignore_backoff=ignore_backoff,
        )  # fmt: skip
        document = run(World(_root(where.root), environ, Log(environ, quiet=quiet), confirm_wait=where.confirm_wait), options)
    except SpurinvError as error:
        raise _fail("refresh", error, where.as_json) from None
    if where.as_json:
        _emit_json(document)
    elif not (quiet and document["exit_code"] == 0 and document["outcome"]["kind"] == UNCHANGED):
        from spurinv.cli import render

        render.refresh(render.console(), document)
    raise typer.Exit(document["exit_code"])


def _run_options(
    state: str | None,
    config_file: str | None,
    overrides: dict[str, Any],
    metrics_file: str | None,
    node: str | None,
    environ: dict[str, str],
    **choices: Any,
) -> Any:
    """The run's options from its flags: the config, the state file, the metrics file, the node
    flag. ``refresh`` and ``check`` both resolve them here, so check asks about the very paths
    and names a run would use."""
    from spurinv.refresh import Options

    loaded, _origins, path = _config(config_file, overrides)
    state_path = locations.state_path(state, environ)
    tokens = locations.token_files(loaded.controller.token_file, loaded.controller.credential, environ)
    _state_apart(state, state_path, path, tokens, config_file)
    _metrics_apart(metrics_file, loaded.metrics.file, state_path, path, tokens)
    return Options(
        state_path=state_path,
        config=loaded,
        config_identity=locations.identity(path),
        metrics_file=metrics_file or loaded.metrics.file or None,
        metrics_flag=metrics_file,
        node_flag=node,
        state_named=locations.state_named(state, environ),
        **choices,
    )


@app.command(short_help="Read-only preflight: config, token, controller, paths, schedule.")
@_where
def check(
    where: Where,
    node: NodeOption = None,
    metrics_file: Annotated[
        str | None, typer.Option("--metrics-file", metavar="FILE", help="Check this metrics file, as refresh would write it.")
    ] = None,
) -> None:
    """Check that this node is ready: one line per check, each failure with its fix. Writes nothing.

    Exit 0 when nothing failed (warnings allowed), else the status refresh would exit with for
    the first failed check; 75 when stopped by SIGTERM or controller.run_deadline.
    """
    from spurinv.cli import preflight
    from spurinv.refresh import World

    environ = dict(os.environ)
    try:
        target = _root(where.root)
        flag = _node_flag(node)
    except SpurinvError as error:
        raise _fail("check", error, where.as_json) from None
    world = World(target, environ, Log(environ, quiet=True))
    host = preflight.Host(
        systemctl="systemctl" if target.path == "/" else None, state_flag=where.state, config_flag=where.config_file
    )
    results, code = preflight.run(
        world,
        lambda: _run_options(where.state, where.config_file, {"node.name": flag}, metrics_file, flag, environ, dry_run=True),
        host,
    )
    if where.as_json:
        _emit_json(documents.check_document(target.path, code, [r.as_dict() for r in results]))
        raise typer.Exit(code)
    from spurinv.secret import printable

    for result in results:
        fix = f"  fix: {result.fix}" if result.fix and result.status in ("warn", "fail") else ""
        sys.stdout.write(printable(f"{result.status:<4}  {result.name:<16}  {result.detail}{fix}") + "\n")
    failed = [result.name for result in results if result.status == "fail"]
    warned = sum(result.status == "warn" for result in results)
    if failed:
        sys.stdout.write(f"not ready: {', '.join(failed)} failed (exit {code})\n")
    elif code:
        sys.stdout.write(f"not finished: stopped before every check ran (exit {code})\n")
    else:
        sys.stdout.write("ready" + (f" ({warned} warning{'s' if warned > 1 else ''})" if warned else "") + "\n")
    raise typer.Exit(code)


def _state_apart(
    flag: str | None, state: str, config_file: str, tokens: tuple[str, ...], config_flag: str | None = None
) -> None:
    """The state file must not be the config file or the token file: a run would replace it (or
    move it aside as corrupt). 64 from --state, 78 from $SPURINV_STATE. Nor may the config file
    be the state file's lock or the tick's CDI spec cache, which the tick replaces (checked as the
    metrics file is, ``locations.clash``): 64 from --config, 78 otherwise; nor a token file (78)."""
    from spurinv.secret import printable

    for what, path in [("the config file", config_file), *(("the token file", token) for token in tokens)]:
        if locations.same_file(state, path):
            named = f"--state {printable(state)}" if flag else f"$SPURINV_STATE ({printable(state)})"
            message = f"{named}: that is {what} {printable(path)}; name a state file of its own"
            raise UsageError(message) if flag else ConfigError(message)
    config_named = f"--config {printable(config_file)}" if config_flag else printable(config_file)
    for named, path, flagged in [
        (config_named, config_file, bool(config_flag)),
        *((f"token file {printable(token)}", token, False) for token in tokens if token),
    ]:
        if clash := locations.clash(path, state):
            message = f"{named}: that is {clash}; name a file of its own"
            raise UsageError(message) if flagged else ConfigError(message)


def _metrics_apart(flag: str | None, configured: str, state: str, config_file: str, tokens: tuple[str, ...] = ()) -> None:
    """The metrics file must not be the state file, its lock, the config file or the token file:
    the metrics would replace the state, which the next run would then move aside as corrupt (64
    from the flag, 78 from the file). One check (``locations.clash``) for refresh, fleet and
    config show."""
    from spurinv.secret import printable

    if flag:
        if clash := locations.clash(flag, state, config_file, tokens) or locations.not_regular(flag):
            raise UsageError(f"--metrics-file {printable(flag)}: that is {clash}; name a file of its own")
    elif configured and (clash := locations.clash(configured, state, config_file, tokens) or locations.not_regular(configured)):
        raise ConfigError(f"{config_file}: metrics.file = {printable(configured)}: that is {clash}; name a file of its own")


@app.command(short_help="Read-only: what differs from the baseline and the last reading.")
@_where
def diff(
    where: Where,
    exit_code: DiffExitOption = False,
) -> None:
    """Show what differs from the reported baseline and from the last reading. Read-only."""
    from spurinv.inventory import model
    from spurinv.inventory.classify import compare, diff_empty
    from spurinv.inventory.discovery import discover as run_discovery
    from spurinv.state import file as state_file

    path = locations.state_path(where.state, dict(os.environ))
    try:
        loaded, _origins, _cfg = _config(where.config_file)
        target = _root(where.root)
        saved = _read_state(state_file.load, path) or state_file.new()
    except SpurinvError as error:
        raise _fail("diff", error, where.as_json) from None
    raw = run_discovery(target, cdi_dirs=loaded.discovery.cdi_dirs, ignore_pci=frozenset(loaded.discovery.ignore_pci))
    result = model.discovery(raw)
    current = result["inventory"]
    baseline = saved["baseline"]["inventory"] if saved["baseline"] else None
    latest = state_file.latest_inventory(saved)
    vs_baseline = compare(baseline, current) if current is not None and baseline is not None else None
    vs_latest = compare(latest, current) if current is not None and latest is not None else None
    different = current is None or baseline is None or (vs_baseline is not None and not diff_empty(vs_baseline))
    code = exitcode.IOERR if current is None else (exitcode.DIFFERENT if exit_code and different else exitcode.OK)
    from spurinv.inventory.sources import link

    links = link.changes(baseline["devices"] if baseline else None, current["devices"]) if current else []
    if where.as_json:
        _emit_json(
            documents.diff_document(
                code, path, raw, baseline["fingerprint"] if baseline else None, different, (vs_baseline, vs_latest), links
            )
        )
        raise typer.Exit(code)
    from spurinv.cli import render

    out = render.console()
    if current is None:
        render.discover(out, result, target.path)
        raise typer.Exit(code)
    render.diff(out, f"against the reported baseline ({baseline['fingerprint'][:12] if baseline else 'none yet'})", vs_baseline)
    render.diff(out, f"against the last reading ({latest['fingerprint'][:12] if latest else 'none yet'})", vs_latest)
    render.links(out, links)
    raise typer.Exit(code)


def _read_state(read: Callable[[str], Loaded], path: str) -> Loaded:
    """The state file for a read-only command (diff, status), its faults as errors: corrupt or of a
    newer schema (their own status), or there but unreadable (66; to a user who may not read it,
    who may: the state directory is root's, 0700)."""
    import errno

    from spurinv.state import file as state_file

    try:
        return read(path)
    except (state_file.Corrupt, state_file.NewerSchema) as exc:
        raise StateError(str(exc), exc.exit_code) from None
    except OSError as exc:
        message = str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM) and os.geteuid() != 0:
            message += "; the state belongs to the user the timer runs spurinv as: run as root (sudo spurinv …)"
        raise StateError(message, exitcode.NOINPUT) from None


@app.command(short_help="What the state file says: readings, baseline, the last run.")
def status(state: StateOption = None, as_json: JsonOption = False) -> None:
    """What the state file says, without discovering: readings, baseline, pending change, last decision."""
    from spurinv.state import file as state_file

    path = locations.state_path(state, dict(os.environ))
    try:
        raw = _read_state(state_file.load_raw, path)
    except SpurinvError as error:
        raise _fail("status", error, as_json) from None
    document = documents.status_document(raw, path)
    if as_json:
        _emit_json(document)
    else:
        from spurinv.cli import render

        render.status(render.console(), document)
    raise typer.Exit(0)


@app.command(short_help="Read-only: every node, spurinv's drains, gres changed by hand.")
def fleet(
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
    show_all: Annotated[bool, typer.Option("--all", help="List every node, not only those needing attention.")] = False,
    metrics_file: Annotated[
        str | None, typer.Option("--metrics-file", metavar="FILE", help="Write node_exporter textfile fleet gauges here.")
    ] = None,
    exit_code: Annotated[
        bool, typer.Option("--exit-code", help="Exit 1 when a node needs attention (a drain, or gres changed by hand).")
    ] = False,
    controller_url: ControllerUrlOption = None,
) -> None:
    """Every node the controller lists: spurinv's drains and their age, records, gres changed by hand."""
    from spurinv.report import fleet as fleet_view
    from spurinv.report import metrics
    from spurinv.state.store import StoreError

    environ = dict(os.environ)
    try:
        loaded, _origins, path = _config(config_file, {"controller.url": controller_url})
        tokens = locations.token_files(loaded.controller.token_file, loaded.controller.credential, environ)
        _metrics_apart(metrics_file, "", locations.state_path(None, environ), path, tokens)
        if loaded.controller.transport == "rest" and not loaded.controller.url:
            raise ConfigError(f"{path}: controller.url is empty; spurinv fleet needs a controller (or --controller-url)")
        try:
            view, now, api, controller = _read_fleet(loaded, environ)
        except SpurinvError:
            if metrics_file:  # say "down" rather than leave the last good numbers standing
                try:
                    metrics.write(metrics_file, metrics.render_fleet(None, None))
                except StoreError as exc:
                    Log(environ).error(str(exc))
            raise
    except SpurinvError as error:
        raise _fail("fleet", error, as_json) from None
    code = exitcode.ATTENTION if exit_code and view["summary"]["attention"] else exitcode.OK
    document = fleet_view.document(
        view, now=now, controller=controller, api=api, transport=loaded.controller.transport, exit_code=code
    )
    if metrics_file:
        try:
            metrics.write(metrics_file, metrics.render_fleet(view["summary"], now))
        except StoreError as exc:
            raise _fail("fleet", StateError(str(exc), exitcode.CANTCREAT), as_json) from None
    if as_json:
        sys.stdout.write(documents.dumps(document, compact=True) + "\n")
    else:
        from spurinv.cli import render

        render.fleet(render.console(), document, show_all=show_all)
    raise typer.Exit(code)


def _read_fleet(loaded: Any, environ: dict[str, str]) -> tuple[FleetView, int, str | None, str]:
    """One all-nodes query through the configured transport, then the pure view at this moment;
    the API version used and what the header calls the controller (the URL, or the scontrol
    program that was run, found on PATH or not)."""
    import time

    from spurinv.controller.transport import connect
    from spurinv.report import fleet as fleet_view

    settings = loaded.controller
    # the node name only addresses single-node calls, which a fleet view never makes
    node = (loaded.node.name or "fleet") if settings.transport == "scontrol" else ""
    client = connect(settings, node, environ, Log(environ), register=False)
    nodes = client.all_nodes(keep=fleet_view.essentials)
    now = int(time.time())
    if settings.transport == "scontrol":
        from spurinv.controller.scontrol import Scontrol

        assert isinstance(client, Scontrol)
        return fleet_view.build(nodes, now), now, None, f"scontrol ({client.program})"
    return fleet_view.build(nodes, now), now, client.api, settings.url


@config_app.command("init", short_help="Write the config template (every key commented out).")
def config_init(
    path: Annotated[
        str | None,
        typer.Argument(
            metavar="PATH",
            help="Where to write it ('-' for stdout; default: --config, $SPURINV_CONFIG, /etc/spurinv/config.toml).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    config_file: ConfigOption = None,
) -> None:
    """Write the configuration template: every key commented out with its default."""
    from spurinv.config import settings as config_module
    from spurinv.secret import printable

    if path is not None and config_file is not None:
        message = f"PATH {printable(path)} and --config {printable(config_file)} both name the file to write: give one"
        raise _fail("config", UsageError(message), False)
    if path is None:  # where every other command will read it; "-" is stdout, as PATH's
        path = "-" if config_file == "-" else locations.config_path(config_file, dict(os.environ))[0]
    text = config_module.render_default()
    if path == "-":
        sys.stdout.write(text)
        raise typer.Exit(0)
    # --force must not replace spurinv's own state or lock file, nor the controller's token, with the template
    state = locations.state_path(None, dict(os.environ))
    if clash := locations.clash(path, state, tokens=_configured_tokens(path)):
        raise _fail("config", ConfigError(f"{printable(path)}: that is {clash}; name a config file of its own"), False)
    if os.path.exists(path) and not force:
        raise _fail("config", ConfigError(f"{printable(path)} exists; use --force to overwrite it"), False)
    from spurinv.state import store

    # /etc/spurinv: readable by the service, and writable by no one else whatever the umask (the
    # loader checks the file's mode, not its directory's: one others can write lets them swap it)
    umask = os.umask(0o022)
    try:
        os.umask(umask | 0o022)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        store.write_atomic(path, text.encode(), 0o640, make_directory=False)
    except store.StoreError as exc:
        raise _fail("config", ConfigError(str(exc)), False) from None
    except OSError as exc:
        raise _fail("config", ConfigError(f"cannot write {printable(path)}: {exc.strerror}"), False) from None
    finally:
        os.umask(umask)
    sys.stderr.write(f"wrote {printable(path)}\n")


def _configured_tokens(target: str) -> tuple[str, ...]:
    """The token files (and systemd credential) named by the config the other commands read and
    by the one at ``target``, which config init would replace: a config that does not load
    names none."""
    from spurinv.config import settings as config_module

    environ = dict(os.environ)
    found: list[str] = []
    for candidate in dict.fromkeys([locations.config_path(None, environ)[0], target]):
        try:
            loaded, _origins = config_module.load(candidate, False, {}, OVERRIDE_FLAGS)
        except (SpurinvError, OSError, ValueError):
            continue
        found += locations.token_files(loaded.controller.token_file, loaded.controller.credential, environ)
    return tuple(dict.fromkeys(found))


@config_app.command("show", short_help="Print the effective config as TOML, with each origin.")
def config_show(config_file: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Print the effective configuration as TOML, each key's origin as a comment."""
    from spurinv.config import settings as config_module

    try:
        loaded, origins, path = _config(config_file)
        tokens = locations.token_files(loaded.controller.token_file, loaded.controller.credential, dict(os.environ))
        _metrics_apart(None, loaded.metrics.file, locations.state_path(None, dict(os.environ)), path, tokens)
    except SpurinvError as error:
        raise _fail("config", error, as_json) from None
    flat = {
        f"{section}.{key}": list(value) if isinstance(value, tuple) else value
        for section, values in loaded.shown().items()
        for key, value in values.items()
    }
    found = os.path.lexists(path)
    if as_json:
        _emit_json(documents.config_document(path, found, flat, origins))
    else:
        sys.stdout.write(config_module.render_show(loaded, origins, path, found))


@app.command(short_help="Print the version.")
def version() -> None:
    """Print the version."""
    sys.stdout.write(f"spurinv {__version__}\n")


def _plain(exc: Exception) -> str:
    """click's message, with its wording for a bad number (``Invalid value for '--confirm-interval':
    'abc' is not a valid float.``) said as an operator would. The value quoted is the one click
    refused (``{value!r}`` in its message): with a flag given twice, the last."""
    message = str(getattr(exc, "format_message", lambda: exc)())
    param = getattr(exc, "param", None)
    refused = getattr(exc, "message", "")
    if param is None or not getattr(param, "opts", None) or not refused.endswith(" is not a valid float."):
        return message
    given = refused.removesuffix(" is not a valid float.")
    return f"{param.opts[0]}: {given} is not a valid number; expected {param.metavar or 'a number'}"


def emit_error(args: list[str], exit_code: int, code: str, message: str) -> None:
    """Under ``--json``, the error document of a run refused before its command ran
    (:mod:`spurinv.cli.launch`)."""
    if not wants_json(args):
        return
    path = _named(_command(), args).split()
    _emit_json(documents.error_document(path[1] if len(path) > 1 else "spurinv", exit_code, code, message))


def _named(command: Any, args: list[str]) -> str:
    """The command ``args`` name (``spurinv config init``), for an error click raised without its
    context (a flag missing its value: ``spurinv refresh --node``)."""
    path = ["spurinv"]
    for word in parsed(args)[0]:  # a "--" before the command is none of its names
        command = getattr(command, "commands", {}).get(word)
        if command is None:
            break
        path.append(word)
    return " ".join(path)


_built: list[Any] = []


def _command() -> Any:
    """The click command typer makes of ``app``, made once a process: typer reads every command's
    signature to make it (``typing.get_type_hints`` for each), about 7 ms of CPU a call, which a caller
    that runs spurinv many times in one process (the test suite's ``cli`` fixture) paid every time.
    click keeps a run's state in its Context, never in the command, so one command serves them all."""
    if not _built:
        _built.append(typer.main.get_command(app))
    return _built[0]


def run(args: list[str], *, confirm_wait: Callable[[float], None] | None = None) -> int:
    """Run the typer app; map usage errors to 64 (EX_USAGE) and crashes to 70 (EX_SOFTWARE).
    ``confirm_wait`` replaces the wait before a confirming re-read (:func:`spurinv.cli.launch.main`).

    click prints its own usage errors only in standalone mode, which would also exit 2; here they
    are caught, said in one line naming the command's ``--help``, and with ``--json`` anywhere on
    the command line also printed as the JSON error document the README promises.
    """
    # typer vendors click as typer._click and re-exports only BadParameter; click's UsageError is
    # the base of every parse error, NoArgsIsHelpError the "no command given" case
    from typer._click.exceptions import NoArgsIsHelpError
    from typer._click.exceptions import UsageError as ClickUsageError
    from typer.exceptions import TyperException

    command = _command()
    try:
        result = command.main(args=args, prog_name="spurinv", standalone_mode=False, obj=confirm_wait)
    except NoArgsIsHelpError as exc:  # bare `spurinv` or `spurinv config`: the help, as it is
        sys.stderr.write(exc.format_message().rstrip("\n") + "\n")
        return exitcode.USAGE
    except ClickUsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else _named(command, args)
        name = path.split()[1] if len(path.split()) > 1 else "spurinv"
        message = _plain(exc)
        if wants_json(args):
            _emit_json(documents.error_document(name, exitcode.USAGE, "usage", message))
        sys.stderr.write(f"{path}: {message}\n(see {path} --help)\n")
        return exitcode.USAGE
    except TyperException as exc:
        sys.stderr.write(f"spurinv: {exc.format_message()}\n")
        return exitcode.USAGE
    except typer.Abort:
        sys.stderr.write("spurinv: aborted\n")
        return 130
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # typer's --show-completion exits itself: a caller in this process gets the status
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except OutputError:  # stdout failed: launch.main says so (74); no internal error
        raise
    except Exception as exc:  # a bug: say so in one line, trace only on request
        if os.environ.get("SPURINV_DEBUG"):
            raise
        sys.stderr.write(f"spurinv: internal error: {type(exc).__name__}: {exc} (set SPURINV_DEBUG=1 for a traceback)\n")
        return exitcode.SOFTWARE
    return result if isinstance(result, int) else 0


__all__ = ["app", "run"]
