"""The timer's fast path: a tick where nothing changed.

The full run (:mod:`spurinv.refresh`) leaves a ``steady`` memo in the state file when it
classified the node *unchanged* and found nothing outstanding. The memo's key
(:func:`spurinv.state.ledger.steady_key`) names everything besides the fingerprint that could change
the answer; a tick whose key and fingerprint match is the same situation, and
:func:`spurinv.state.ledger.replay` keeps the same books the full run would — with no pydantic, typer,
rich or requests imported and no network call.

Order: every step that can fail (read the state, discover, replay, render the metrics) comes
before the first write. Until then anything unusual returns None and the full run takes over,
from scratch, having missed nothing; after it, the tick reports its own errors and never hands
over, so one tick never discovers or writes twice.
"""

import os
import sys
import time

from spurinv import __version__, jsontext, shape
from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root, RootError, boot_id
from spurinv.inventory.sources import link
from spurinv.inventory.sources.cdi import MAX_CACHE, SpecCache
from spurinv.state import ledger, locations, store, vouch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TextIO

    from spurinv.inventory.model import Discovery


def run(options: "Mapping[str, str]", environ: "Mapping[str, str]", stdout: "TextIO | None" = None) -> "int | None":
    """Try the fast path; return the exit status, or None to hand over to the full run."""
    started = time.perf_counter()
    path = locations.state_path(options.get("--state"), dict(environ))
    config_file, _explicit = locations.config_path(options.get("--config"), dict(environ))
    key = ledger.steady_key(
        options.get("--root", "/"),
        locations.identity(config_file),
        options.get("--metrics-file"),
        options.get("--node"),
        os.uname().nodename,
        boot_id(options.get("--root", "/")),
    )
    if not os.path.lexists(path):
        return None  # no memo without a state file: the full run decides, and the tick made no lock or directory
    lock = store.Lock(path, 0, "refresh")
    try:
        if not lock.try_acquire():
            return None
    except store.StoreError:
        return None
    try:
        return _tick(path, key, options, environ, started, stdout or sys.stdout)
    finally:
        lock.release()


def _tick(
    path: str, key: str, options: "Mapping[str, str]", environ: "Mapping[str, str]", started: float, stdout: "TextIO"
) -> "int | None":
    try:
        data = store.read(path)
        if not data:
            return None
        cached_text, cache_ours = read_cache(path + locations.CDI_CACHE)
        root = Root(options.get("--root", "/"))
        early = _early(data, root, cached_text)
        # the readings and the baseline hold one inventory up to three times: each read and checked
        # once, and not read at all when it is the very text of the one discovered (early)
        texts: jsontext.Texts = {}
        state = jsontext.loads_shared(data, "inventory", texts, early.known if early else None)
        steady = ledger.memo_for(state, key) if isinstance(state, dict) else None
        if steady is None:
            return None
        vouched = _vouched_discovery(state, steady, texts, root, cached_text, early)
        if vouched is None:
            return None  # a file the model would refuse: the full run moves it aside, never carry it on
        discovery, encoded, cdi_cache = vouched
        after = ledger.replay(state, steady, discovery, ledger.now_text())
        if after is None:
            return None
        # Compact: json's C encoder does not indent, and its Python one took 4 ms of a 40 ms tick.
        blob = (jsontext.dumps_shared(after, "inventory", texts, encoded) + "\n").encode()
        if len(blob) > store.MAX_STATE:
            return None  # the full run refuses to write it, and says so
        metrics_file = options.get("--metrics-file") or steady.get("metrics_file")
        if metrics_file:
            from spurinv.report import metrics  # only then: each module is ~0.3 ms of a tick's start
        text = (
            metrics.render(after, time.perf_counter() - started, steady.get("node") or "", __version__) if metrics_file else ""
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, ImportError, RootError):
        return None  # nothing written yet: the full run knows how to report it (an import: a package mid-upgrade)
    # From here on there are side effects: report a failure ourselves, as the full run would.
    try:
        store.write_atomic(path, blob)
    except store.StoreError as exc:
        return _failed(environ, f"{exc}; the previous state file is untouched", exc.exit_code)
    cached = cdi_cache.text() if cdi_cache.changed and cache_ours else None
    if cached is not None:
        try:  # noqa: SIM105  (contextlib: one more module a tick)
            store.write_atomic(path + locations.CDI_CACHE, cached, make_directory=False)
        except store.StoreError:
            pass  # only a cache: a spec not in it is parsed again, so a failed write loses nothing
    if metrics_file:
        try:
            metrics.write(metrics_file, text)
        except store.StoreError as exc:
            # as the full run does: the saved record says how the run really ended (ledger.metrics_failed)
            amended = {**after, "last": ledger.metrics_failed(after["last"], str(exc), exc.exit_code)}
            try:
                store.write_state(path, (jsontext.dumps(amended) + "\n").encode())
            except store.StoreError as again:
                from spurinv.log import Log

                Log(environ).error(f"{again} (recording the metrics failure)")
            return _failed(environ, str(exc), exc.exit_code)
    if "--quiet" in options or "-q" in options:
        return 0
    inventory = after["readings"][-1]["inventory"]
    narrow = "".join(f"; degraded PCIe link {link.line(found)}" for found in link.confirmed(after["readings"]))
    stdout.write(
        f"unchanged: {shape.counted(len(inventory['devices']), 'device')}, fingerprint {inventory['fingerprint'][:12]}{narrow}"
        " (no controller request)\n"
    )
    return 0


def _settings(steady: "Mapping[str, Any]") -> "tuple[tuple[str, ...], frozenset[str]]":
    """What discovery takes from the memo: the CDI directories and the PCI addresses to ignore."""
    return tuple(steady.get("cdi_dirs") or ()), frozenset(steady.get("ignore_pci") or ())


class _Early:
    """A discovery under a memo's settings, with its inventory's text (``known``: None when it
    found none). Made first under the memo the state file's text seems to hold
    (:func:`jsontext.last_member`), before the file is read in full: that text is then one the read
    need not parse. Used only if the memo read in full asks for these very settings."""

    __slots__ = ("cdi_cache", "discovery", "known", "settings")

    def __init__(
        self, settings: "tuple[tuple[str, ...], frozenset[str]]", discovery: "Discovery", cdi_cache: "SpecCache"
    ) -> None:
        self.settings = settings
        self.discovery = discovery
        self.cdi_cache = cdi_cache
        fresh = discovery["inventory"]
        self.known = (jsontext.dumps(fresh), fresh) if fresh is not None else None


def _discovered(settings: "tuple[tuple[str, ...], frozenset[str]]", root: "Root", cached_text: "bytes | None") -> "_Early":
    cdi_cache = SpecCache.from_text(cached_text)  # its own: not one another discovery filled
    return _Early(settings, discover(root, cdi_dirs=settings[0], ignore_pci=settings[1], cdi_cache=cdi_cache), cdi_cache)


def _early(data: bytes, root: "Root", cached_text: "bytes | None") -> "_Early | None":
    guess = jsontext.last_member(data, "steady")
    if not isinstance(guess, dict):
        return None
    try:
        return _discovered(_settings(guess), root, cached_text)
    except Exception:  # noqa: BLE001  (the discovery under the memo read in full answers for it)
        return None


def _vouched_discovery(
    state: "dict[str, Any]",
    steady: "Mapping[str, Any]",
    texts: "jsontext.Texts",
    root: "Root",
    cached_text: "bytes | None",
    early: "_Early | None",
) -> "tuple[Discovery, jsontext.Texts, SpecCache] | None":
    """The discovery under the memo, with its inventory's text and the CDI cache it used, once the
    state file is vouched for (:func:`spurinv.state.vouch.problem`); None when it is not.

    Discovery comes first (it only reads): an inventory the file holds as the very text of the
    fresh one is not walked again (:func:`spurinv.state.vouch.as_discovered`), and that text is
    the one written. The early discovery is this one when the memo asks for its settings."""
    try:
        settings = _settings(steady)
        if early is None or early.settings != settings:
            early = _discovered(settings, root, cached_text)
    except Exception:
        if vouch.problem(state) is not None:
            return None  # as when the file was vouched for first: a refused memo is never acted on
        raise
    if early.known is None:
        return None  # a failed discovery is never the memo's (ledger.replay): the full run reports it
    text, fresh = early.known
    if vouch.problem(state, vouch.as_discovered(texts, text)) is not None:
        return None
    return early.discovery, {id(fresh): (fresh, text)}, early.cdi_cache


def read_cache(path: str) -> "tuple[bytes | None, bool]":
    """The CDI spec cache's bytes, and whether the tick may replace the file: only when there is
    none or it is a cache (:meth:`SpecCache.is_cache`) no larger than one the tick writes. An
    operator's file that carries the name (a config or token file the full run never saw there: a
    moved state file) is never written over; ``spurinv check`` names what sits there."""
    try:
        data = store.read(path, MAX_CACHE)
    except store.StoreError:
        return None, False
    return data, data is None or SpecCache.is_cache(data)


def _failed(environ: "Mapping[str, str]", message: str, code: int) -> int:
    from spurinv.log import Log

    Log(environ).error(message)
    return code
