"""How cron, /bin/sh and systemd read a schedule's files: lines, words, the commands that run
``spurinv refresh``, cron's time fields.

Pure parsing for ``spurinv check`` (:mod:`spurinv.cli.preflight`): every function here takes text
and returns what the scheduler makes of it; none reads a file or runs a program.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from spurinv.inventory.sources.attribute import decimal


def lines(text: str) -> list[str]:
    """``text`` split into lines as cron and systemd split a file: at a newline only, each line
    without the carriage return of a CRLF ending. str.splitlines also splits at a vertical tab, a
    form feed, U+001C-U+001E, U+0085, U+2028 and U+2029, which both read as part of a line."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def words(value: str) -> list[str]:
    """A unit value's space-separated, quoted words; none when the quoting is broken (systemd
    ignores such a line)."""
    try:
        return shlex.split(value)
    except ValueError:
        return []


def assignments(text: str) -> dict[str, str]:
    """``NAME=VALUE`` lines of an environment file (comments skipped, quotes removed)."""
    found: dict[str, str] = {}
    for raw in lines(text):
        line = raw.strip()
        name, equals, value = line.partition("=")
        if not equals or line.startswith(("#", ";")):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            words = [value]
        found[name.strip()] = " ".join(words)
    return found


def unit_lines(text: str) -> list[str]:
    """A unit file's lines as systemd.syntax(7) reads them: a line ending in a backslash goes on in
    the next one (the backslash a space), and a comment line among them is left out, not made part
    of the value; a comment line's own backslash continues nothing. A backslash that is itself
    escaped (``\\\\``) continues nothing either, as systemd's config_parse counts them. A byte
    order mark starting a line that is no comment is dropped, the first time only (config_parse's
    bom_seen)."""
    found: list[str] = []
    # the continued line so far, in parts joined once at its end: joining as it grew copied it
    # again at each part (a unit of continued lines took minutes to check)
    pending: list[str] | None = None
    bom_seen = False
    for raw in systemd_lines(text):
        comment = raw.lstrip(" \t\n\r").startswith(("#", ";"))
        if comment:
            if pending is None:
                found.append(raw)
            continue
        read = raw
        if not bom_seen and raw.startswith("\ufeff"):
            read, bom_seen = raw[1:], True
        # a part before ends in the space its backslash became: the backslashes that end the
        # line are all this part's
        if _continues(read):
            pending = pending if pending is not None else []
            pending.append(read[:-1] + " ")
            continue
        if pending is not None:
            read, pending = "".join([*pending, read]), None
        found.append(read)
    return [*found, *(["".join(pending)] if pending is not None else [])]


def systemd_lines(text: str) -> list[str]:
    """``text`` split into lines as systemd's read_line (src/basic/fileio.c) splits a unit file:
    at a LF, a lone CR or a NUL, a run of them one line end while no marker repeats and none
    follows a NUL (CRLF, LFCR, CRLF NUL ... are one; LF LF is two). A CR alone ends a line, so
    ``ProtectSystem=strict\rReadWritePaths=/x`` is two settings to systemd, not one value."""
    import re  # only for check: the timer's tick never reads a unit file

    parts = re.split(r"\n\r?\x00?|\r\n?\x00?|\x00", text)
    if parts and parts[-1] == "":  # a final line end starts no line
        parts.pop()
    return parts


def _continues(line: str) -> bool:
    """Whether ``line`` ends in a backslash that no backslash before it escapes."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def started_with(words: list[str], *, shell: bool = True) -> list[tuple[str | None, dict[str, str]] | None]:
    """For each ``spurinv refresh`` among a scheduler's command ``words`` (:func:`refreshes`):
    its --config (either spelling; the last wins, as click takes it) and its ``NAME=VALUE``
    prefixes (the shell's, or env's; those before a ``sh -c`` reach its script); None for one
    whose value is one the shell or systemd would expand ($, `, %) or resolve against a working
    directory check does not know. ``shell``: cron's /bin/sh; systemd has none, so a
    ``NAME=VALUE`` word is the program's name there unless env runs it."""
    if not shell and words:
        words = [words[0].lstrip("@-:+!"), *words[1:]]  # systemd's prefixes on the program
    found: list[tuple[str | None, dict[str, str]] | None] = []
    # where each list of words first names SPURINV_CONFIG: one scan per list, not one per refresh
    # (a line of thousands of "spurinv refresh;" scanned every word before each: quadratic)
    first: dict[int, int] = {}

    def named(words: list[str], begin: int) -> bool:
        if id(words) not in first:
            first[id(words)] = next((at for at, word in enumerate(words) if "SPURINV_CONFIG" in word), len(words))
        return first[id(words)] < begin

    for refresh in refreshes(words, sh=shell):
        started = _started_at(refresh.words, refresh.begin, refresh.at, set(OPERATORS) if refresh.sh else set(),
                              earlier=named(refresh.words, refresh.begin))  # fmt: skip
        outer = refresh.outer
        while started is not None and outer is not None:  # the shells whose script runs it, innermost first
            around = prefix(outer.words, outer.begin, outer.at, set(OPERATORS) if outer.sh else set(),
                             earlier=named(outer.words, outer.begin))  # fmt: skip
            started = None if around is None else (started[0], {**around, **started[1]})
            outer = outer.outer
        found.append(started)
    return found


OPERATORS = "();<>|&"
# programs that only print or ignore their arguments: "spurinv refresh" among them runs nothing
PRINTERS = frozenset({"echo", "printf", "logger", ":", "true", "false", "test", "["})
# shells whose -c script is read as a command line of its own, to this depth of nesting
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
SHELL_DEPTH = 3


@dataclass(frozen=True)
class Refresh:
    """A ``spurinv refresh`` on a command line: the ``words`` it is one of, where its simple
    command begins, where its ``spurinv`` word is, whether the words are a shell's (else
    systemd's), and the ``sh -c`` command (its ``at``: the shell) whose script they are."""

    words: list[str]
    begin: int
    at: int
    sh: bool
    outer: Refresh | None = None


def refreshes(words: list[str], *, sh: bool, depth: int = 0, outer: Refresh | None = None) -> list[Refresh]:
    """The one rule for "this command runs spurinv refresh", for the schedule check
    (:func:`cron_line`), the program check and the config check (:func:`started_with`) alike.
    ``words`` are split into simple commands at the shell's operators (``sh``: cron's /bin/sh
    splits at ``; & && | || ( )``; systemd at none). One counts when, past its ``NAME=VALUE``
    words and redirections, a word whose basename is ``spurinv`` is followed by ``refresh``:
    whatever starts it (``flock -n LOCK``, ``nice -n 10``, ``timeout 180``, ``exec``, ...),
    unless its program only prints or ignores its arguments (:data:`PRINTERS`:
    ``logger "spurinv refresh done"``). A shell's ``-c`` script is read the same way, to
    :data:`SHELL_DEPTH` shells deep."""
    found: list[Refresh] = []
    ends = [at for at, word in enumerate(words) if sh and word and set(word) <= set(OPERATORS) and not _redirects(word)]
    begin = 0
    for end in [*ends, len(words)]:
        at = _program(words, begin, end, sh=sh)
        if at is not None and os.path.basename(words[at]) not in PRINTERS:
            found += _refresh_in(words, begin, at, end, sh=sh, depth=depth, outer=outer)
        begin = end + 1
    return found


def _refresh_in(
    words: list[str], begin: int, at: int, end: int, *, sh: bool, depth: int, outer: Refresh | None
) -> list[Refresh]:
    """:func:`refreshes` of the simple command ``words[begin:end]``, its program at ``at``: the
    first ``spurinv refresh`` among its words, or the first shell among them given a ``-c`` script
    (``sudo sh -c '...'``, ``timeout 180 bash -lc "..."``), that script read the same way."""
    for index in range(at, end):
        name = os.path.basename(words[index])
        if name == "spurinv" and words[index + 1 : index + 2] == ["refresh"] and index + 1 < end:
            return [Refresh(words, begin, index, sh, outer)]
        script = _shell_script(words, index + 1, end) if name in SHELLS else None
        if script is not None:
            if depth >= SHELL_DEPTH:
                return []
            inner = shell_words(script, cron=False)
            inner = script.split() if inner is None else inner  # broken quoting: word by word, as a cron line
            return refreshes(inner, sh=True, depth=depth + 1, outer=Refresh(words, begin, index, sh, outer))
    return []


def _shell_script(words: list[str], begin: int, end: int) -> str | None:
    """The script of a shell started with ``words[begin:end]`` as its arguments: the first operand
    when an option holds ``c`` (``-c``, ``-lc``, ``-ec``); None without one."""
    at, reads = begin, False
    while at < end and words[at][:1] in ("-", "+") and words[at] not in ("-", "+"):
        option = words[at]
        at += 1
        if option == "--":
            break
        if not option.startswith("--"):
            reads = reads or (option[0] == "-" and "c" in option[1:])
            at += sum(1 for letter in option[1:] if letter in "oO")  # -o NAME, -O NAME: a value each
    return words[at] if reads and at < end else None


def _redirects(word: str) -> bool:
    return bool(word) and set(word) <= set(OPERATORS) and ("<" in word or ">" in word)


def _program(words: list[str], begin: int, end: int, *, sh: bool) -> int | None:
    """Where the program of the simple command ``words[begin:end]`` is: past its assignments and
    redirections (a shell's); None when there is none."""
    import re

    at = begin
    while at < end:
        word = words[at]
        if sh and _redirects(word):
            at += 2  # the redirection and its target
        elif sh and word.isdigit() and at + 1 < end and _redirects(words[at + 1]):
            at += 1  # the descriptor of "2>&1"
        elif re.fullmatch(r"[A-Za-z_]\w*=.*", word):
            # an assignment to the shell; to systemd the program's name, which the schedule check
            # fails, while the config check says the spurinv after it is given no SPURINV_CONFIG
            at += 1
        else:
            return at
    return None


def prefix(words: list[str], begin: int, at: int, operators: set[str], *, earlier: bool) -> dict[str, str] | None:
    """The ``NAME=VALUE`` settings the command begun at ``begin`` gives the program at ``at`` (the
    shell's, then env's); None when check cannot tell its environment (``earlier``: a word before
    ``begin`` names SPURINV_CONFIG)."""
    import re

    if earlier:
        return None  # set, exported or unset by an earlier command: check does not follow the shell
    programs = [os.path.basename(word) for word in words[begin:at]]
    if any(name in ("sudo", "doas", "su", "runuser") for name in programs):
        return None  # they reset the environment as their own policy says
    if any(name == "env" and words[begin + index + 1].startswith("-") for index, name in enumerate(programs)):
        return None  # env -i, env -u NAME: another environment than the scheduler's
    inline: dict[str, str] = {}
    assigning = bool(operators)  # a shell (cron's) reads NAME=VALUE before the program; systemd only via env
    for word in words[begin:at]:
        if assigning and re.fullmatch(r"[A-Za-z_]\w*=.*", word):
            inline[word.partition("=")[0]] = word.partition("=")[2]
        else:
            assigning = os.path.basename(word) == "env"
    return inline


def _started_at(
    words: list[str], begin: int, at: int, operators: set[str], *, earlier: bool
) -> tuple[str | None, dict[str, str]] | None:
    """:func:`started_with` of the ``spurinv refresh`` at ``at``, its command begun at ``begin``."""
    inline = prefix(words, begin, at, operators, earlier=earlier)
    if inline is None:
        return None
    flag: str | None = None
    for index in range(at + 2, len(words)):  # not a copy of the rest of the line for each refresh
        word = words[index]
        if word == "--" or (word and set(word) <= operators):
            break
        if word == "--config":
            flag = words[index + 1] if index + 1 < len(words) else ""
        elif word.startswith("--config="):
            flag = word.removeprefix("--config=")
    for value in (flag, inline.get("SPURINV_CONFIG")):  # an empty one is no setting, as config_path takes it
        if value and (not value.startswith("/") or any(sign in value for sign in "$`%")):
            return None
    return flag, inline


def shell_words(command: str, *, cron: bool = True) -> list[str] | None:
    """A crontab command's words as /bin/sh splits them, shell operators their own words; cron
    makes an unescaped % a newline (the rest is the command's input; not so in a ``sh -c``
    script, ``cron`` False). None when the quoting is broken."""
    lexer = shlex.shlex(_uncommented(_cron_command(command) if cron else command), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.whitespace = " \t"  # the shell's blanks: a carriage return is part of a word (a CRLF crontab's)
    lexer.commenters = ""  # shlex ends a word at any "#": _uncommented took the shell's comments out
    try:
        return list(lexer)
    except ValueError:
        return None


def _cron_command(command: str) -> str:
    r"""The part of a crontab command cron gives the shell: up to the first "%" no backslash
    escapes (the rest is its input), each "\%" a "%". A backslash escapes the character after it,
    whatever it is, so in "\\%" the "%" is bare (the first backslash escapes the second)."""
    import re

    kept = re.match(r"(?:[^\\%]|\\[\s\S]|\\\Z)*", command)
    assert kept is not None  # the pattern matches the empty string
    return re.sub(r"\\([\s\S])", lambda escaped: "%" if escaped[1] == "%" else escaped[0], kept[0])


def _uncommented(script: str) -> str:
    """``script`` less its comments (from an unquoted "#" that begins a word to the end of its
    line: a quoted or mid-word one is a character), each unquoted newline a ";" (it ends a command
    as one does)."""
    kept: list[str] = []
    quote = ""
    boundary = True  # at the start of a word
    at = 0
    while at < len(script):
        char = script[at]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\":  # outside single quotes, it escapes the next character
            kept.append(script[at : at + 2])
            at, boundary = at + 2, False
            continue
        elif quote:
            quote = "" if char == '"' else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and boundary:
            end = script.find("\n", at)
            if end < 0:
                break
            at = end
            continue
        elif char == "\n":
            char = ";"
        boundary = not quote and char in " \t;&|()<>"
        kept.append(char)
        at += 1
    return "".join(kept)


def cron_value(value: str) -> str | None:
    """``value`` as the value of a crontab's ``NAME=VALUE`` line, which no shell reads: crontab(5)
    takes it as written, less one pair of matching quotes around it (no escapes). None when it
    holds both kinds of quote: no spelling survives every cron."""
    if shlex.quote(value) == value:
        return value
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    return None


def unit_quote(word: str) -> str:
    """``word`` as one word of a unit's value: double-quoted when it holds a space or a quote."""
    if shlex.quote(word) == word:
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


MONTH_DAYS = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
MONTHS = {name: number for number, name in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                                        "nov", "dec"), start=1)}  # fmt: skip


WEEKDAYS = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
CRON_WORDS = frozenset({"@reboot", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
BLANKS = " \t"  # where cron splits a line's fields: not at the other white space str.split takes


def cron_split(line: str, *, with_user: bool) -> tuple[list[str], str] | None:
    """An entry line's time fields (or its @word) and user, and its command as cron hands it on,
    a CRLF line's carriage return included; None for a comment, an assignment or a short line."""
    import re

    stripped = line.lstrip(BLANKS)
    if not stripped or stripped.startswith("#"):
        return None
    count = (1 if stripped.startswith("@") else 5) + with_user
    parts = re.split(r"[ \t]+", stripped, maxsplit=count)
    if len(parts) <= count or "=" in parts[0] or not parts[count]:
        return None
    return parts[:count], parts[count]


def cron_line(line: str, *, with_user: bool = True) -> str | None:
    """For a crontab line that runs ``spurinv refresh`` (:func:`refreshes`): "" when its
    schedule can fire, or what is wrong with it; None for any other line (a comment, an
    assignment, ``echo spurinv refresh``).
    crontab(5): five time fields (or an @word), the user in /etc/crontab and /etc/cron.d, the command."""
    import re

    split = cron_split(line, with_user=with_user)
    if split is None:
        return None
    head, command = split
    fields = [] if head[0].startswith("@") else head[:5]
    # the words the shell runs: a quoted "spurinv" is the program all the same; none (a comment,
    # or all of it the input after a "%") runs nothing
    words = shell_words(command)
    if not refreshes(re.split(r"[ \t]+", _cron_command(command).strip(" \t")) if words is None else words, sh=True):
        return None
    if head[0] == "@reboot":
        return "@reboot runs it once at boot only"
    if not fields and head[0] not in CRON_WORDS:
        return f"the schedule {head[0]} is not one cron knows"
    if fields:
        days, months = _values(fields[2], 1, 31), _values(fields[3], 1, 12, MONTHS)
        clock = _values(fields[0], 0, 59), _values(fields[1], 0, 23), _values(fields[4], 0, 7, WEEKDAYS)
        if days is None or months is None or None in clock:
            return f"the schedule {' '.join(fields)} has a field cron cannot read"
        if fields[4] == "*" and days and months and min(days) > max(MONTH_DAYS[month] for month in months):
            return f"the schedule {' '.join(fields)} names a day its months never have"
    return ""


def _values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int] | None:
    """The numbers a crontab field matches (None when it cannot be read)."""
    found: set[int] = set()
    for part in field.lower().split(","):
        span, _, step_text = part.partition("/")
        step = decimal(step_text or "1", 9)
        if not step:  # unreadable, or 0 (any spelling of it)
            return None
        if span == "*":
            start, end = low, high
        else:
            first, _, last = span.partition("-")
            numbers = [names.get(text) if names and text in names else decimal(text, 9)
                       for text in (first, last or first)]  # fmt: skip
            if numbers[0] is None or numbers[1] is None:
                return None
            start, end = numbers[0], numbers[1]
            if not low <= start <= end <= high:
                return None
        found |= set(range(start, end + 1, step))
    return found
