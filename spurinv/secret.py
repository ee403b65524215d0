"""The controller token as something to keep out of text: scrubbing what a server sends back.

A server may echo the token in an error (a page quoting the request's headers), and that text
becomes our message: stderr, the journal, the state file's backoff record, ``status``. Replacing
only the exact token is not enough: the echo may be truncated, upper-cased or
hex-encoded. So any run of the text in which every 8 consecutive characters also occur in the
token (case-insensitively) is replaced, and likewise every 16 consecutive hex digits that occur
in the token's hex form. That covers every substring of 8 or more characters and its hex form;
it may also cover a little more (two overlapping pieces of the token), which errs on the safe
side. Linear in the text: one set lookup per position. Then the text is cut to a bound, so a
server cannot fill the journal or the state file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

WINDOW = 8
MAX_TEXT = 500
MARK = "<token>"
BLANK = "<secret>"  # what blank() puts where a credential-looking word was


class Secret:
    """A token, and the means to scrub it out of text."""

    __slots__ = ("_hex", "_plain")

    def __init__(self, token: str) -> None:
        self._plain = _grams(token.lower(), WINDOW)
        self._hex = _grams(token.encode().hex(), 2 * WINDOW)

    def scrub(self, text: str, limit: int = MAX_TEXT) -> str:
        """``text`` with every echo of the token replaced by ``<token>``, cut to ``limit`` characters.

        Cut first to twice the limit (an echo split by that cut leaves at most a piece of the
        token, which is scrubbed if it is 8 characters or more), so the work is bounded too.
        """
        text = text[: 2 * limit]
        if self._plain:
            text = _replace(text, self._plain, WINDOW)
            text = _replace(text, self._hex, 2 * WINDOW)
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        return printable(text)


# Control and bidi characters: a controller's text must not steer the terminal it is printed on;
# lone surrogates (a state file's "\\ud800", valid JSON) no terminal encoding can write.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def printable(text: str) -> str:
    """Controller text made safe for a terminal: control and bidi characters shown escaped."""
    if text.isascii() and text.isprintable():  # nearly always; the regex costs more than this test
        return text
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


# Credentials in text a command prints, or in its argv: ``token=x``, ``"password": "x"``,
# ``Bearer x``, a JWT, ``https://user:x@host``, ``password x``, ``--token x``, ``DB_PASS=x``,
# an ``Authorization:``/``Cookie:`` header line, a PEM private key. It errs on the side of
# blanking: a lost word in a log costs less than a leaked credential.
_WORDS = (
    r"token|passw(?:or)?d|passphrase|secret|api[ _-]?key|access[_-]?key|private[_-]?key|credential"
    r"|authorization|pwd|cookie"
)
_KEY = rf"(?:[\w.-]*(?:{_WORDS})[\w.-]*|-*pass|sig|signature|auth)"
_CREDENTIALS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL),
        lambda m: BLANK,
    ),
    (re.compile(r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*"), lambda m: BLANK),  # a JWT
    # a header line: everything after the name (``Token x``, ``Digest … response="x"``, cookies)
    (
        re.compile(r"(?im)^([ \t]*[<>*+]?[ \t]*(?:proxy-)?(?:authorization|cookie|set-cookie|x-[\w-]*token)[ \t]*:).*$"),
        lambda m: f"{m.group(1)} {BLANK}",
    ),
    (
        re.compile(r"(?i)\b(bearer|basic|token|digest)\s+(?![=:<])(?!(?:is|was)\b)\S+"),
        lambda m: f"{m.group(1)} {BLANK}",
    ),
    # user:password@ in a URL (the password may hold '@' or '/': up to the last '@' of the word)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):\S*@"), lambda m: f"{m.group(1)}:{BLANK}@"),
    # environment style, upper case: DB_PASS=x, GITHUB_PAT=x, SLURM_JWT=x
    (
        re.compile(r"\b([A-Z0-9_]*(?:PASS|PWD|KEY|PAT|JWT|TOKEN|SECRET|CRED|AUTH|SIG)[A-Z0-9_]*)=(?!<secret>)\S+"),
        lambda m: f"{m.group(1)}={BLANK}",
    ),
    (re.compile(rf"(?i)<({_KEY})>[^<]*</"), lambda m: f"<{m.group(1)}>{BLANK}</"),
    (
        re.compile(rf"""(?i)(?<![\w.])({_KEY})(["']?\s*[=:]\s*)(?!<secret>)("[^"]*"|'[^']*'|\S+)"""),
        lambda m: f"{m.group(1)}{m.group(2)}{BLANK}",
    ),
    # a keyword and its value after a space: ``password hunter2``, ``--token x``, ``token is x``
    (
        re.compile(rf"(?i)(?<![\w.])({_KEY})(\s+(?:is\s+|was\s+)?)(?![=:<])(?!(?:is|was)\b)\S+"),
        lambda m: f"{m.group(1)}{m.group(2)}{BLANK}",
    ),
)
# an option whose value is the next argument: ``--token x``, ``--password x``, ``-p x``; and
# ``-u user:password``
_SECRET_OPTION = re.compile(rf"(?i)(?:--?{_KEY}|--?key|-p)")
_USER_OPTION = re.compile(r"(?i)(?:-u|--user)")


def blank(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with credentials blanked: the given ``secrets`` and whatever looks like one."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, BLANK)
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


def blank_argv(argv: tuple[str, ...] | list[str], secrets: tuple[str, ...] = ()) -> list[str]:
    """A command's arguments as they may be shown: credentials blanked, and the argument after an
    option named like one (``--token x``)."""
    shown: list[str] = []
    for position, argument in enumerate(argv):
        option = argv[position - 1] if position else ""
        if _SECRET_OPTION.fullmatch(option):  # whatever follows, even "-x…" (base64url may start so)
            shown.append(BLANK)
        elif _USER_OPTION.fullmatch(option) and ":" in argument:
            shown.append(f"{argument.split(':', 1)[0]}:{BLANK}")
        else:
            shown.append(blank(argument, secrets))
    return shown


def _grams(text: str, size: int) -> frozenset[str]:
    return frozenset(text[i : i + size] for i in range(len(text) - size + 1))


def _replace(text: str, grams: frozenset[str], size: int) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters grow when lower-cased ("İ"): keep positions
        lowered = "".join(char.lower()[0] for char in text)
    covered = bytearray(len(text))
    for start in range(len(text) - size + 1):
        if lowered[start : start + size] in grams:
            covered[start : start + size] = b"\x01" * size
    if 1 not in covered:
        return text
    out = []
    for position, char in enumerate(text):
        if not covered[position]:
            out.append(char)
        elif position == 0 or not covered[position - 1]:
            out.append(MARK)
    return "".join(out)
