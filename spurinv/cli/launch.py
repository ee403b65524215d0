"""The console entry point: a lean front door, then the full CLI.

Three invocations are served without importing typer, pydantic, rich or requests, because they
run often and the interpreter plus those imports would cost more than the work:

* ``spurinv refresh`` on a timer tick where nothing changed (:mod:`spurinv.cli.tick`);
* ``spurinv status --json`` (scripts);
* ``spurinv discover --json`` when no config file exists (the config needs validation).

Only plain ``--opt value`` / ``--opt=value`` forms of a few options are recognised here; any
other argument, any error, or a situation the fast path cannot settle falls through to
:func:`spurinv.cli.app.run`, which produces the same output the slow way.
"""

import gc
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import TextIO

LEAN = {
    "refresh": frozenset({"--root", "--state", "--config", "--metrics-file", "--node", "--quiet", "-q"}),
    "status": frozenset({"--state", "--json"}),
    "discover": frozenset({"--root", "--json"}),
}
FLAGS = frozenset({"--json", "--quiet", "-q"})  # the units run `refresh --quiet`: keep it on the fast path


def lean_options(argv: "Sequence[str]") -> "tuple[str, dict[str, str]] | None":
    """Return (command, options) when ``argv`` is something the lean path understands."""
    if not argv or argv[0] not in LEAN:
        return None
    allowed = LEAN[argv[0]]
    options: dict[str, str] = {}
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        name, equals, value = word.partition("=")
        if name not in allowed or name in options:
            return None
        if name in FLAGS:
            if equals:
                return None
            options[name] = "1"
            continue
        if not equals:
            if not words or words[0].startswith("-"):
                return None
            value = words.pop(0)
        if not value:
            return None
        options[name] = value
    if argv[0] in ("status", "discover") and "--json" not in options:
        return None
    return argv[0], options


def main(argv: "Sequence[str] | None" = None, *, confirm_wait: "Callable[[float], None] | None" = None) -> int:
    """Run spurinv; return the exit status. ``confirm_wait`` replaces ``time.sleep`` for the wait
    before the confirming re-read of a first sighting (``policy.confirm_interval``): a caller in
    this process, the test suite, passes one that returns. Every other wait stays real.

    Standard output is guarded on both paths: a write that fails (a full disk, a closed pipe) is
    one line on stderr and exit 74, never a traceback (:mod:`spurinv.cli.streams`).
    """
    collecting = gc.isenabled()
    gc.disable()  # until the lean path has answered or handed over: _collector
    from spurinv.cli import streams as output

    args = list(sys.argv[1:] if argv is None else argv)
    real, real_err = sys.stdout, sys.stderr
    output.utf8(real)
    output.utf8(real_err)
    sys.stdout = output.Guarded(real)
    sys.stderr = output.Lossy(real_err)  # a log line that cannot be written is dropped, not fatal
    try:
        code, leaned = _run(args, collecting, confirm_wait)
        sys.stdout.flush()
    except output.OutputError as exc:
        from spurinv import exitcode
        from spurinv.log import Log

        output.abandon(real)
        if exc.closed and args[:1] != ["refresh"]:
            # a closed pipe after output is the reader's choice, as for every Unix filter
            # (`spurinv discover | head`): exit quietly. refresh is no filter: its exit status is
            # the timer's record of the run, so a report it could not deliver stays 74.
            return exitcode.OK
        Log(os.environ).error(f"cannot write to standard output: {exc.reason}")
        return exitcode.IOERR
    finally:
        sys.stdout, sys.stderr = real, real_err
        _collector(collecting)
    if leaned and argv is None:
        _leave(code, real, real_err)
    return code


def _leave(code: int, *streams: "TextIO") -> None:
    """End a process the lean path answered now, without the interpreter's teardown: freeing
    every module and object, and a last collection over them, cost the tick ~2.5 ms of CPU
    (valgrind: 10 M instructions, 8 % of it) for a process that is about to die. Nothing is left
    for the teardown to do: the state and metrics were written with os.write and fsynced, and
    the streams are flushed here. Only when nothing else could have asked for an exit hook
    (``atexit``, ``threading``: neither is imported on the lean path; an embedding or a test
    that imported them keeps the normal exit), and only for a process of its own (``argv`` None:
    the console script, ``python -m spurinv``), never a caller in this process."""
    if "atexit" in sys.modules or "threading" in sys.modules:
        return
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            return  # the normal exit reports it as it always did
    os._exit(code)


def _run(args: "list[str]", collecting: bool, confirm_wait: "Callable[[float], None] | None") -> "tuple[int, bool]":
    """The exit status, and whether the lean path answered."""
    if (refused := _not_utf8(args, os.environ)) is not None:
        return refused, False
    lean = lean_options(args)
    if lean is not None:
        code = _lean(*lean)
        if code is not None:
            return code, True
    _collector(collecting)
    from spurinv.cli.app import run

    return run(args, confirm_wait=confirm_wait), False


def _collector(collecting: bool) -> None:
    """The cyclic collector back as it was. The lean path runs without it: a tick's few cycles
    die with the process, and its passes over the imports and the reading (eight, ~1.3 ms of a
    tick) freed nothing. What was allocated meanwhile counts as old (freeze, unfreeze), so
    turning it back on does not start the pass its counters would be due."""
    if collecting and not gc.isenabled():
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def _not_utf8(args: "list[str]", environ: "Mapping[str, str]") -> "int | None":
    """An argument (or a path variable) that is not UTF-8 text: one line and 64 (78 for the
    environment), before anything is read or written, and under ``--json`` an error document.
    Python hands such bytes over as lone surrogates (``\\udcff``), which neither the state file
    nor UTF-8 output can hold; every argument spurinv is given is one an operator typed, so the
    fix is to give one that is text (the refusal says what the argument is: a path, a node
    name, ...), or, for UTF-8 that an ASCII locale could not decode (``LC_ALL=C
    PYTHONUTF8=0``), to run under a UTF-8 locale. What the argument is comes from where click
    reads it (:func:`parsed`): the value of the flag before it, config init's PATH, or an operand.
    Every such argument is refused, wherever it stands: none reaches click as a path or a value.

    The rule is the argument's bytes, not how this locale decoded them: an encoding that decodes
    every byte (ISO-8859-1, ``LANG=en_US`` on Debian) hands ``s\xff`` over as ``"sÿ"``, without
    surrogates; accepted, it named a file whose bytes no message, JSON document or state file
    spells (they said ``sÿ``, UTF-8 ``c3 bf``). Refused here, it is said as in a UTF-8 locale."""
    from spurinv.inventory.sources.status import escaped

    def shown(text: str) -> str:  # its bytes spelled out, and its control characters: a terminal reads the line
        from spurinv.secret import printable

        return printable(escaped(text))

    decoded = _as_utf8_would()
    for position, word in enumerate(args):
        if escaped(word := decoded(word)) != word:  # the argument as a UTF-8 locale says it
            path, parts = parsed(args)  # only for a refusal: the tick reads nothing it need not
            part = parts[position]
            if part in _WHAT:  # the value of the flag before it, whatever it looks like
                flag, named = part, shown(part) + " "
            elif part == FLAG and "=" in word and word.partition("=")[0] in _VALUED.get(path, ()):  # --node=VALUE
                flag, named = word.partition("=")[0], ""
            elif path == ("config", "init") and part in (OPERAND, FLAG):
                flag, named = "PATH", "PATH "
            else:
                flag, named = "", ""
            return _refuse(args, f"{named}{shown(word)}: {_why(word, _WHAT.get(flag, 'give an argument that is'))}", "usage")
    for name in ("SPURINV_STATE", "SPURINV_CONFIG", "STATE_DIRECTORY", "CREDENTIALS_DIRECTORY"):
        value = decoded(environ.get(name, ""))
        if escaped(value) != value:
            return _refuse(args, f"${name} ({shown(value)}): {_why(value, _WHAT['--state'])}", "config")
    return None


def _as_utf8_would() -> "Callable[[str], str]":
    """A word of argv or environ as a UTF-8 locale would have decoded its bytes: a byte that is
    not UTF-8 a lone surrogate. Under UTF-8 the word itself (the tick's case: no work); under an
    ASCII locale too when it holds surrogates, as every byte past 0x7f there does, so that the
    refusal says what the locale could not decode; under any other, its bytes decoded again."""
    if sys.getfilesystemencoding().replace("-", "").lower() == "utf8":
        return lambda word: word

    def decoded(word: str) -> str:
        from spurinv.inventory.sources.status import has_surrogate

        if has_surrogate(word):
            return word
        try:
            return os.fsencode(word).decode("utf-8", "surrogateescape")
        except UnicodeError:  # a caller in this process passed a character this encoding has not
            return word

    return decoded


# What click makes of each word of a command line (parsed): a command's name, "--" ending the
# options, an option (a flag, a flag taking a value, --flag=value, an unknown one), an operand;
# the value of a flag is marked with the flag's name.
COMMAND, END, FLAG, OPERAND = "command", "--", "flag", ""
_GROUPS = frozenset({(), ("config",)})  # the commands that hold commands: spurinv, spurinv config
# Each command's options that take a value, and the commands that have --json: a command's own,
# never another's. An option the command does not have takes no value here: click stops at it
# ("No such option"), so no word after it is its value, and --json after it is the flag click
# would have read next. tests/test_cli.py holds both to the real command tree.
_VALUED: "dict[tuple[str, ...], tuple[str, ...]]" = {
    ("discover",): ("--config", "--format", "--node", "--root"),
    ("refresh",): ("--accept", "--api", "--config", "--confirm-interval", "--controller-url", "--metrics-file", "--node",
                   "--root", "--state"),
    ("check",): ("--config", "--metrics-file", "--node", "--root", "--state"),
    ("diff",): ("--config", "--root", "--state"),
    ("status",): ("--state",),
    ("fleet",): ("--config", "--controller-url", "--metrics-file"),
    ("config", "init"): ("--config",),
    ("config", "show"): ("--config",),
}  # fmt: skip
_JSON = (("discover",), ("refresh",), ("check",), ("diff",), ("status",), ("fleet",), ("config", "show"))


def parsed(args: "Sequence[str]") -> "tuple[tuple[str, ...], list[str]]":
    """The command ``args`` name (``("config", "init")``) and each word's part, read as click reads
    them. A group (``spurinv``, ``spurinv config``) reads its options up to its first other word,
    which names the command; a "--" there ends only the group's options, and the word after it
    names the command whatever it looks like: ``spurinv -- discover --format json`` is discover's
    --format. The command then reads the rest from the start: a flag that takes a value owns the
    next word, whatever it looks like (``--node --``), and after a "--" that is no flag's value
    every word is an operand. A flag takes a value only where the command has it: status has no
    --node, so in ``status --node --json`` both are flags. ``tests/test_cli.py`` holds this to
    the real command tree, and to click's own parser."""
    path: tuple[str, ...] = ()
    parts: list[str] = []
    at = 0
    while at < len(args) and path in _GROUPS:
        word = args[at]
        if word == "--" and at + 1 < len(args):
            parts += [END, COMMAND]
            path += (args[at + 1],)
            at += 2
        elif word.startswith("-") and len(word) > 1:
            parts.append(FLAG)  # the groups' own options (--help, --install-completion) take no value
            at += 1
        else:
            parts.append(COMMAND if word != "--" else END)
            path += (word,) if word != "--" else ()
            at += 1
    ended = False
    valued = _VALUED.get(path, ())
    while at < len(args):
        word = args[at]
        if ended or word == "-" or not word.startswith("-"):
            parts.append(OPERAND)
        elif word == "--":
            parts.append(END)
            ended = True
        elif word in valued and at + 1 < len(args):
            parts += [FLAG, word]
            at += 1
        else:
            parts.append(FLAG)
        at += 1
    return path, parts


def wants_json(args: "Sequence[str]") -> bool:
    """``--json`` where click reads it as the flag: the command has one, and it stands among the
    command's options, not before the command (``spurinv --json status``: the group has none),
    after the command's "--", nor as a flag's value (``refresh --node --json``)."""
    path, parts = parsed(args)
    if path not in _JSON:
        return False
    start = len(parts) - parts[::-1].index(COMMAND)  # the command's own words
    return any(word == "--json" and part == FLAG for word, part in zip(args[start:], parts[start:], strict=True))


# The fix for a flag's value that is not text, in the words of what the value is
_WHAT = {
    "--root": "name a path that is",
    "--state": "name a path that is",
    "--config": "name a path that is",
    "--metrics-file": "name a path that is",
    "--node": "give a node name that is",
    "--controller-url": "give a URL that is",
    "--accept": "give the fingerprint's hex digits",
    "--api": "give an API version that is",
    "--format": "give table, json or slurm",
    "--confirm-interval": "give the seconds in digits",
    "PATH": "name a path that is",  # config init's one argument, named as its usage names it
}


def _why(word: str, fix: str) -> str:
    encoding = sys.getfilesystemencoding()
    if encoding.replace("-", "").lower() != "utf8":  # else a caller in this process passed surrogates
        try:
            os.fsencode(word).decode("utf-8")
        except (UnicodeError, ValueError):
            pass
        else:
            held = f"UTF-8 text this locale's encoding ({encoding}) cannot hold"
            return f"{held}; run spurinv under a UTF-8 locale (LANG=C.UTF-8)"
    return f"not UTF-8 text; {fix}"


def _refuse(args: "list[str]", message: str, code: str) -> int:
    from spurinv import exitcode  # only for the refusal: a module fewer on every tick

    status = exitcode.USAGE if code == "usage" else exitcode.CONFIG
    sys.stderr.write(f"spurinv: error: {message}\n")
    if wants_json(args):  # the full CLI speaks JSON
        from spurinv.cli.app import emit_error

        emit_error(args, status, code, message)
    return status


def _lean(command: str, options: "dict[str, str]") -> "int | None":
    environ = dict(os.environ)
    if command == "refresh":
        from spurinv.cli import tick

        return tick.run(options, environ)
    if command == "status":
        return _status(options, environ)
    return _discover(options, environ)


def _status(options: "dict[str, str]", environ: "dict[str, str]") -> "int | None":
    import json

    from spurinv import shape
    from spurinv.report import documents
    from spurinv.state import locations, store, vouch

    path = locations.state_path(options.get("--state"), environ)
    try:
        data = store.read(path)
        state = json.loads(data) if data is not None else None
    except (store.StoreError, ValueError, RecursionError):
        return None  # the full CLI explains the problem
    if state is not None and (
        not isinstance(state, dict)
        or state.get("schema_version") != shape.SCHEMA_VERSION
        or vouch.problem(state) is not None  # what the full CLI calls corrupt (65), it must say so
    ):
        return None
    try:
        text = documents.dumps(documents.status_document(state, path))
    except (KeyError, TypeError, AttributeError):
        return None
    sys.stdout.write(text + "\n")
    return 0


def _discover(options: "dict[str, str]", environ: "dict[str, str]") -> "int | None":
    from spurinv.inventory.discovery import discover
    from spurinv.inventory.root import Root, RootError
    from spurinv.report import documents
    from spurinv.state import locations

    config_file, explicit = locations.config_path(None, environ)
    if explicit or os.path.exists(config_file):
        return None
    try:
        root = Root(options.get("--root", "/"))
    except RootError:
        return None
    result = discover(root, topology=True)
    code = documents.discover_exit(result)
    sys.stdout.write(documents.dumps(documents.discover_document(result, root.path, code)) + "\n")
    return code
