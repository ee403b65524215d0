"""Human output with rich: the only module that imports it.

Every function takes a ``Console`` (tests pass one writing to a StringIO with a fixed width and
no colour). Data goes to stdout; diagnostics to stderr through :mod:`spurinv.log`. ``NO_COLOR``
and non-terminal output are honoured by rich itself.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.segment import Segment, Segments
from rich.style import Style
from rich.table import Table
from rich.text import Text

from spurinv.classify import InventoryDiff
from spurinv.fleet import age_text
from spurinv.model import Device, Discovery, Inventory
from spurinv.report import RefreshDocument

STATUS_STYLE = {"ok": "green", "absent": "dim", "failed": "bold red"}


def console(stderr: bool = False) -> Console:
    """The console for real output (rich decides colour from the terminal and NO_COLOR)."""
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _partition(device: Device) -> str:
    part = device.partition
    if part is None:
        return "-"
    modes = "/".join(mode for mode in (part.compute, part.memory) if mode)
    return f"{modes} #{part.index}" if modes else f"#{part.index}"


def _memory(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.0f} GiB" if value >= 1024 else f"{value} MiB"


def device_table(devices: tuple[Device, ...], title: str | None = None) -> Table:
    """The inventory as a table a person reads at a glance."""
    table = Table(title=title, show_lines=False, pad_edge=False)
    for column in ("identity", "vendor", "model", "partition", "memory", "NUMA", "render node", "CDI name"):
        table.add_column(column, no_wrap=column in ("identity", "render node"))
    for device in devices:
        table.add_row(
            device.id,
            device.vendor,
            device.model,
            _partition(device),
            _memory(device.memory_mb),
            "-" if device.numa_node is None else str(device.numa_node),
            device.device_node or "-",
            ", ".join(device.cdi_names) or "-",
        )
    return table


def sources(out: Console, discovery: Discovery) -> None:
    """One line per source."""
    for name, source in discovery.sources.items():
        line = Text(f"{name:<7} ")
        line.append(f"{source.status:<7}", style=STATUS_STYLE[source.status])
        line.append(f" {source.detail}")
        out.print(line)


def discover(out: Console, discovery: Discovery, root: str) -> None:
    """``spurinv discover``."""
    inventory = discovery.inventory
    if inventory is not None:
        if inventory.devices:
            out.print(device_table(inventory.devices, title=f"{root}: {inventory.summary()}"))
        else:
            out.print(f"{root}: {inventory.summary()}")
        out.print(f"fingerprint {inventory.fingerprint}")
    sources(out, discovery)
    for error in discovery.errors:
        out.print(Text(f"error: {error.line()}", style="red"))
    for flag in discovery.flags:
        out.print(Text(f"flag: {flag.line()}", style="yellow"))
    if not discovery.ok:
        out.print(Text("discovery FAILED: this is not an empty inventory; nothing will be reported", style="bold red"))
    elif inventory is not None and not inventory.devices:
        out.print("no GPU or accelerator on this node (every source read cleanly)")


def diff(out: Console, title: str, change: InventoryDiff | None) -> None:
    """A diff by device identity: green added, red removed, yellow changed."""
    out.print(Text(title, style="bold"))
    if change is None:
        out.print("  (nothing to compare with)")
        return
    if change.empty:
        out.print("  no difference")
        return
    for package in change.packages:
        out.print(Text(f"  {package.line()}", style="yellow"))
    table = Table(show_header=True, pad_edge=False, box=None)
    for column in ("", "identity", "field", "before", "after"):
        table.add_column(column)
    for device in change.added:
        table.add_row(Text("+", style="green"), Text(device.id, style="green"), "", "", f"{device.model} {_partition(device)}")
    for device in change.removed:
        table.add_row(Text("-", style="red"), Text(device.id, style="red"), "", f"{device.model} {_partition(device)}", "")
    for field in change.changed + change.node:
        table.add_row(Text("~", style="yellow"), field.id, field.field, str(field.old), str(field.new))
    out.print(table)
    out.print(f"  summary: {change.summary()}")


def refresh(out: Console, document: RefreshDocument) -> None:
    """``spurinv refresh``: one screen saying what happened (or would) and why."""
    mode = "observe mode (no controller configured)" if document.mode == "observe" else f"controller {document.controller}"
    dry = " — DRY RUN, nothing sent, state not written" if document.dry_run else ""
    out.print(Text(f"spurinv refresh · node {document.node} · {mode}{dry}", style="bold"))
    reading = document.inventory if document.reading_ok else "FAILED"
    out.print(f"reading  {reading}" + (f"  fingerprint {document.fingerprint[:12]}" if document.fingerprint else ""))
    for error in document.errors:
        out.print(Text(f"         {error.line()}", style="red"))
    outcome = document.outcome
    out.print(f"outcome  {outcome.kind.value}: {outcome.reason}")
    if outcome.diff is not None and not outcome.diff.empty:
        for package in outcome.diff.packages:
            out.print(f"         {package.line()}")
        out.print(f"         {outcome.diff.summary()}")
    if outcome.release:
        out.print(f"release  {outcome.release}")
    for number, step in enumerate(document.steps, start=1):
        out.print(f"step {number}   {step.action}: {step.reason}")
        if step.request:
            verb = "sent" if step.sent else "would send"
            out.print(Text(f"         {verb}: {step.request}", style="cyan"))
        if step.error:
            out.print(Text(f"         error: {step.error}", style="red"))
    for note in document.notes:
        out.print(Text(f"note     {note}", style="yellow"))
    style = "green" if document.exit_code == 0 else "bold red"
    out.print(Text(f"exit     {document.exit_code}", style=style))


def status(out: Console, document: dict[str, Any]) -> None:
    """``spurinv status``: both readings, the baseline, what is pending, the last decision."""
    out.print(Text(f"state {document['state_file']}" + ("" if document["exists"] else " (no runs yet)"), style="bold"))
    if not document["exists"]:
        return
    out.print(f"node      {document['node']}")
    for label, reading in zip(
        ("previous", "latest") if len(document["readings"]) == 2 else ("latest",), document["readings"], strict=False
    ):
        if reading["ok"]:
            models = ", ".join(f"{m} {n}" for m, n in sorted(reading["models"].items())) or "no GPUs"
            out.print(
                f"{label:<9} {reading['taken_at']}  ok  {reading['devices']} devices ({models})  {reading['fingerprint'][:12]}"
            )
        else:
            out.print(
                Text(
                    f"{label:<9} {reading['taken_at']}  FAILED  {reading['errors'][0]['reason'] if reading['errors'] else ''}",
                    style="red",
                )
            )
    baseline = document["baseline"]
    if baseline:
        models = ", ".join(f"{m} {n}" for m, n in sorted(baseline["models"].items())) or "no GPUs"
        since, source, count = baseline["since"], baseline["source"], baseline["devices"]
        out.print(f"baseline  {since}  {source}  {count} devices ({models})  {baseline['fingerprint'][:12]}")
    else:
        out.print("baseline  none yet")
    if document["pending"]:
        out.print(
            Text(f"pending   {document['pending']['fingerprint'][:12]} since {document['pending']['since']}", style="yellow")
        )
    last = document["last_decision"]
    if last:
        out.print(f"last run  {last['at']}  {last['outcome']} → {last['action']}: {last['reason']} (exit {last['exit_code']})")
    if document["api"]:
        out.print(f"api       {document['api']['version']} at {document['api']['url']}")
    for note in document["attention"]:
        out.print(Text(f"attention {note}", style="bold yellow"))


def inventory_line(inventory: Inventory) -> str:
    """For logs."""
    return f"{inventory.summary()} fingerprint {inventory.fingerprint[:12]}"


def config_show(out: Console, values: dict[str, Any], origins: dict[str, str]) -> None:
    """``spurinv config show``: every key, its effective value and where it came from."""
    table = Table(pad_edge=False, box=None)
    for column in ("key", "value", "from"):
        table.add_column(column)
    for key, value in values.items():
        table.add_row(key, repr(value) if isinstance(value, str) else str(value), origins.get(key, "default"))
    out.print(table)


# --- spurinv fleet ------------------------------------------------------------------------------
# Rows are written as pre-laid-out Segments, not a rich Table: a Table measures every cell again
# for every layout pass (16 s for 10,000 rows here), Segments print 10,000 rows in ~0.1 s.
# Each node is one line of short columns; its note (the drain reason, the gres spurinv
# registered, or what it registered) goes on an indented line below, where it has the width.

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_FLEET_COLUMNS = ("NODE", "STATE", "MGD", "DRAIN", "GRES")
_FLEET_CAPS = (28, 16, 3, 12, 24)
_GAP = "  "
_INDENT = "  "
BOLD = Style(bold=True)
_OURS = Style(color="yellow")
_OTHER = Style(color="magenta")
_CHANGED = Style(color="red", bold=True)
_NEWLINE = Segment.line()


def printable(text: str) -> str:
    """Controller text made safe for a terminal: control and bidi characters shown escaped."""
    if text.isascii() and text.isprintable():  # nearly always; the regex costs more than this test
        return text
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def _fit(text: str, width: int) -> str:
    """Exactly ``width`` cells: padded, or cut with an ellipsis (wide characters counted as two).

    ``text`` has been through :func:`printable`: ASCII then means one cell a character.
    """
    if text.isascii():
        return text.ljust(width) if len(text) <= width else text[: max(width - 1, 0)] + "…"
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, max(width - 1, 0)) + "…"


def _fleet_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    owner = {"spurinv": "ours", "other": "other"}.get(row["drain_owner"] or "")
    return (
        printable(row["name"]),
        printable("+".join([row["state"], *row["flags"]]).lower()),
        "yes" if row["managed"] else "no",
        f"{owner} {age_text(row['reason_age_seconds'])}" if owner else "-",
        printable(row["gres"] or "-") + ("*" if row["gres_changed"] else ""),
    )


def _fleet_note(row: Mapping[str, Any]) -> str:
    registered = row["registered"] or {}
    notes = []
    if row["gres_changed"]:
        notes.append(f"* registered gres {registered.get('gres')}")
    if row["drained"]:
        notes.append(row["reason"] or "(no reason)")
    elif registered.get("inventory"):
        notes.append(f"registered {registered['inventory']}")
    return printable("; ".join(notes))


def _fleet_widths(cells: list[tuple[str, ...]], total: int) -> list[int]:
    """Each column as wide as its widest cell, capped; on a console too narrow NODE, GRES and
    STATE give up cells, widest first (never below 6)."""
    widths = [
        min(cap, max([len(head), *(cell_len(row[index]) for row in cells)]))
        for index, (head, cap) in enumerate(zip(_FLEET_COLUMNS, _FLEET_CAPS, strict=True))
    ]
    room = total - len(_GAP) * (len(widths) - 1)
    while sum(widths) > room and max(widths[0], widths[4], widths[1]) > 6:
        widest = max((0, 4, 1), key=lambda index: widths[index])
        widths[widest] -= 1
    return widths


def _cell_style(row: Mapping[str, Any], index: int) -> Style | None:
    if index == 3 and row["drained"]:
        return _OURS if row["drain_owner"] == "spurinv" else _OTHER
    if index == 4 and row["gres_changed"]:
        return _CHANGED
    return None


def fleet(out: Console, document: Mapping[str, Any], show_all: bool = False) -> None:
    """``spurinv fleet``: the summary, then the nodes needing attention (every node with ``--all``)."""
    summary = document["summary"]
    width = out.width
    api = f" ({document['api']})" if document.get("api") else ""
    head = [
        Text(_fit(f"fleet  {document['controller']}{api}  {document['taken_at']}", width).rstrip(), style="bold"),
        Text(
            _fit(
                f"nodes {summary['nodes']} · managed {summary['managed']} · need attention {summary['attention']}", width
            ).rstrip()
        ),
        Text(
            _fit(
                f"spurinv drains {summary['spurinv_drained']} · drained by others {summary['drained_by_others']}"
                f" · gres changed by hand {summary['gres_changed']}",
                width,
            ).rstrip()
        ),
    ]
    if summary["spurinv_drains"]:
        oldest = summary["spurinv_drains"][0]
        since = f" (since {oldest['since']})" if oldest["since"] else ""
        text = f"oldest spurinv drain: {printable(oldest['name'])}, {age_text(oldest['age_seconds'])}{since}"
        head.append(Text(_fit(text, width).rstrip(), style="yellow"))
    for line in head:
        out.print(line)
    rows = [row for row in document["nodes"] if show_all or row["attention"]]
    if not rows:
        out.print("no node needs attention" if summary["nodes"] else "the controller lists no nodes")
        return
    cells = [_fleet_cells(row) for row in rows]
    widths = _fleet_widths(cells, width)
    last = len(widths) - 1
    segments = [Segment(_GAP.join(_fit(h, w) for h, w in zip(_FLEET_COLUMNS, widths, strict=True)).rstrip(), BOLD)]
    segments.append(_NEWLINE)
    for row, row_cells in zip(rows, cells, strict=True):
        fitted = [_fit(cell, cell_width) for cell, cell_width in zip(row_cells, widths, strict=True)]
        if row["drained"] or row["gres_changed"]:  # a styled cell: one segment per cell
            for index, cell in enumerate(fitted):
                if index:
                    segments.append(Segment(_GAP))
                segments.append(Segment(cell.rstrip() if index == last else cell, _cell_style(row, index)))
            segments.append(_NEWLINE)
        else:  # the common quiet row: one segment
            segments.append(Segment(_GAP.join(fitted).rstrip() + "\n"))
        note = _fleet_note(row)
        if note:
            segments.append(Segment(_INDENT + _fit(note, width - len(_INDENT)).rstrip() + "\n"))
    out.print(Segments(segments))
    hidden = summary["nodes"] - len(rows)
    if hidden:
        out.print(f"{hidden} more node(s) need no attention; --all lists every node")


def fleet_text(document: Mapping[str, Any], *, show_all: bool = False, width: int = 80) -> str:
    """The fleet table as plain text at ``width`` columns, no colour (golden files, the benchmark)."""
    buffer = io.StringIO()
    out = Console(file=buffer, width=width, no_color=True, highlight=False, soft_wrap=True, emoji=False)
    fleet(out, document, show_all=show_all)
    return buffer.getvalue()
