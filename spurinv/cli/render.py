"""Human output with rich: the only module that imports it.

Every function takes a ``Console`` (:func:`console` builds the one for stdout or stderr; the tests
capture those streams). Data goes to stdout; diagnostics to stderr through :mod:`spurinv.log`. ``NO_COLOR``
and non-terminal output are honoured by rich itself.

Everything shown comes from outside (sysfs strings, controller replies, node names), so it is
printed literally: the console has markup off and every line is a ``Text``, never a markup string
(``[bold]`` in a drain reason stays ``[bold]``). Layouts are made for 80 columns, the width of
every pipe, ``less`` and non-tty ssh: labelled lines wrap under their value, not under the label.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console, RenderableType
from rich.segment import Segment, Segments
from rich.style import Style
from rich.table import Table
from rich.text import Text

from spurinv.inventory.classify import diff_empty, diff_summary, package_lines
from spurinv.inventory.model import Device, Discovery, InventoryDiff
from spurinv.report.fleet import age_text
from spurinv.secret import printable
from spurinv.shape import SWITCH, problem_line, summary, switch_only

if TYPE_CHECKING:  # the documents' TypedDicts, for mypy only (tests/test_architecture.py)
    from spurinv.report.models import BaselineSummary, ReadingSummary, RefreshDocument, StatusDocument

STATUS_STYLE = {"ok": "green", "absent": "dim", "failed": "bold red"}
Row = tuple[str, str, str | None]  # label, value, style


def console(stderr: bool = False, width: int | None = None, file: Any = None) -> Console:
    """The console for real output (rich decides colour from the terminal and NO_COLOR; the
    width from the terminal, else $COLUMNS, else 80)."""
    out = Console(stderr=stderr, file=file, width=width, highlight=False, markup=False, emoji=False, soft_wrap=False)
    if out.width < 20:  # COLUMNS=0 (or 1) printed nothing (or a column of letters): use the default
        out.width = 80
    return out


def _print(out: Console, renderable: RenderableType) -> None:
    """Print without the trailing blanks rich pads table cells with (golden files, diff, less)."""
    segments: list[Segment] = []
    for line in out.render_lines(renderable, pad=False):
        while line and not line[-1].text.rstrip():
            line.pop()
        if line:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
        segments.extend([*line, Segment.line()])
    out.print(Segments(segments))


def _labelled(out: Console, rows: Iterable[Row], indent: int = 10) -> None:
    """``label  value`` lines; a long value wraps under itself, indented past the label.

    Every value goes through :func:`printable`: the refresh and status screens show controller
    text (a reason, ``gres``, ``gres_used`` in a step) that must not steer the terminal.
    """
    rows = list(rows)
    indent = max(indent, *(len(label) + 1 for label, _value, _style in rows))
    for label, value, style in rows:
        lines = Text(printable(value), style=style or "").wrap(out, max(out.width - indent, 20), overflow="fold")
        for number, line in enumerate(lines):
            line.rstrip()
            head = Text(f"{label if number == 0 else '':<{indent}}", style=(style or "") if number == 0 else "")
            out.print(head + line, soft_wrap=True)


def _partition(device: Device) -> str:
    part = device["partition"]
    if part is None:
        return "-"
    modes = "/".join(mode for mode in (part["compute"], part["memory"]) if mode)
    return f"{modes} #{part['index']}" if modes else f"#{part['index']}"


def _value(value: object) -> str:
    """A changed field's value as a person reads it (a partition as ``SPX/NPS4 #0``)."""
    if isinstance(value, dict) and "index" in value:
        modes = "/".join(str(value[key]) for key in ("compute", "memory") if value.get(key))
        return f"{modes} #{value['index']}" if modes else f"#{value['index']}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value) or "-"
    return "-" if value is None else str(value)


def _memory(value: int | None) -> str:
    return "-" if value is None else f"{value / 1024:.0f} GiB" if value >= 1024 else f"{value} MiB"


def _span(numbers: list[int], prefix: str) -> str:
    """``renderD128-135`` for a contiguous run, else ``renderD128,130``."""
    if not numbers:
        return "-"
    numbers = sorted(numbers)
    if numbers == list(range(numbers[0], numbers[-1] + 1)) and len(numbers) > 1:
        return f"{prefix}{numbers[0]}-{numbers[-1]}"
    return prefix + ",".join(str(number) for number in numbers)


def gpus(devices: Sequence[Device]) -> list[list[str]]:
    """One row per physical GPU (PCI function): identity, model, mode, memory, NUMA, render nodes."""
    groups: dict[str, list[Device]] = {}
    for device in devices:
        groups.setdefault(device["pci_bdf"], []).append(device)
    rows = []
    for bdf, parts in groups.items():
        first = parts[0]["partition"]
        if first is None:
            mode = "-"
        else:
            compute = f"{first['compute']} {len(parts)}" if first["compute"] and len(parts) > 1 else first["compute"] or ""
            mode = " / ".join(part for part in (compute, first["memory"] or "") if part) or str(len(parts))
        sizes = [part["memory_mb"] for part in parts]
        memory = _memory(sum(size for size in sizes if size is not None)) if None not in sizes else "-"
        numa = ",".join(sorted({str(part["numa_node"]) for part in parts if part["numa_node"] is not None})) or "-"
        minors = [minor for part in parts if (minor := part["render_minor"]) is not None]
        models = sorted({part["model"] for part in parts})
        rows.append([bdf, ",".join(models), mode, memory, numa, _span(minors, "renderD")])
    return rows


def _table(headers: list[str], rows: list[list[str]], keep: int) -> Table:
    """A table that fits 80 columns: the first ``keep`` columns never wrap or truncate; a column
    that is ``-`` in every row says nothing and is left out."""
    shown = [i for i in range(len(headers)) if i < keep or any(row[i] != "-" for row in rows)]
    table = Table(box=None, pad_edge=False, header_style="bold")
    for i in shown:
        table.add_column(headers[i], no_wrap=i < keep, overflow="fold")
    for row in rows:
        table.add_row(*(Text(row[i]) for i in shown))
    return table


def device_table(devices: Sequence[Device], per_device: bool = False) -> Table:
    """The inventory as a table a person reads at a glance: one row per GPU, or per device."""
    if not per_device:
        return _table(["GPU", "model", "mode", "memory", "NUMA", "render nodes"], gpus(devices), keep=2)
    rows = []
    previous = None
    for device in devices:
        node = (device["device_node"] or "-").rsplit("/", 1)[-1]
        # every MIG device of a GPU shares its /dev/nvidia<M>: said once, then a ditto mark
        partition = device["partition"]
        mig = partition is not None and partition["compute"] == "MIG"
        shared = mig and node == previous
        previous = node if mig else None
        rows.append([
            device["id"],
            device["model"],
            _partition(device),
            _memory(device["memory_mb"]),
            "-" if device["numa_node"] is None else str(device["numa_node"]),
            "〃" if shared else node,
            ", ".join(device["cdi_names"]) or "-",
        ])  # fmt: skip
    return _table(["device", "model", "partition", "memory", "NUMA", "node", "CDI name"], rows, keep=2)


def sources(out: Console, discovery: Discovery) -> None:
    """One line per source."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, source in discovery["sources"].items():
        grid.add_row(Text(name), Text(source["status"], style=STATUS_STYLE[source["status"]]), Text(source["detail"]))
    _print(out, grid)


def discover(out: Console, discovery: Discovery, root: str, per_device: bool = False) -> None:
    """``spurinv discover``: one row per GPU (``per_device``: per schedulable device)."""
    inventory = discovery["inventory"]
    if inventory is not None:
        out.print(Text(f"{root}: {summary(inventory)}", style="bold"))
        if inventory["devices"]:
            _print(out, device_table(inventory["devices"], per_device))
        out.print(Text(f"fingerprint {inventory['fingerprint']}"))
    sources(out, discovery)
    # a switch's evidence names its own source in the reason ("kfd: …"): the label says "switch" once
    rows: list[Row] = [
        ("switch", f"{error['path']}: {error['reason']}" if error["path"] else error["reason"], "yellow")
        if error["source"] == SWITCH
        else ("error", problem_line(error), "red")
        for error in discovery["errors"]
    ]
    rows.extend(("flag", problem_line(flag), "yellow") for flag in discovery["flags"])
    if inventory is not None:
        from spurinv.inventory.sources import link

        rows.extend(("link", text, "yellow") for text in link.changes(None, inventory["devices"]))
    if rows:
        _labelled(out, rows, indent=7)
    if not discovery["ok"] and switch_only(error["source"] for error in discovery["errors"]):
        out.print(Text("partition switch in progress: not a settled reading; nothing will be reported", style="bold yellow"))
    elif not discovery["ok"]:
        out.print(Text("discovery FAILED: this is not an empty inventory; nothing will be reported", style="bold red"))
    elif inventory is not None and not inventory["devices"]:
        out.print(Text("no GPU or accelerator on this node (every source read cleanly)"))


def links(out: Console, lines: list[str]) -> None:
    """PCIe link health beside a diff: degraded or recovered links (not schedulable)."""
    if lines:
        _labelled(out, [("link", text, "yellow") for text in lines])


def diff(out: Console, title: str, change: InventoryDiff | None) -> None:
    """A diff by device identity: green added, red removed, yellow changed."""
    out.print(Text(title, style="bold"))
    if change is None:
        out.print(Text("  (nothing to compare with)"))
        return
    if diff_empty(change):
        out.print(Text("  no difference"))
        return
    for line in package_lines(change):
        out.print(Text(printable(f"  {line}"), style="yellow"))
    # the baseline's text is the state file's (a hand edit's control characters, lone surrogates):
    # printable, as the status screen shows it
    # a GPU whose partitions changed is the line above, not 8 added and 1 removed rows (--json lists them)
    regrouped = {package["pci_bdf"] for package in change["packages"]}
    table = Table(show_header=True, pad_edge=False, box=None, header_style="bold")
    for column in ("", "identity", "field", "before", "after"):
        table.add_column(column, overflow="fold")
    for device in change["added"]:
        if device["pci_bdf"] not in regrouped:
            shown = Text(printable(f"{device['model']} {_partition(device)}"))
            table.add_row(Text("+", style="green"), Text(printable(device["id"]), style="green"), "", "", shown)
    for device in change["removed"]:
        if device["pci_bdf"] not in regrouped:
            shown = Text(printable(f"{device['model']} {_partition(device)}"))
            table.add_row(Text("-", style="red"), Text(printable(device["id"]), style="red"), "", shown, "")
    for field in (*change["changed"], *change["node"]):
        old, new = Text(printable(_value(field["old"]))), Text(printable(_value(field["new"])))
        table.add_row(Text("~", style="yellow"), Text(printable(field["id"])), Text(field["field"]), old, new)
    if table.row_count:
        _print(out, table)
    _labelled(out, [("  summary", diff_summary(change), None)])


def refresh(out: Console, document: RefreshDocument) -> None:
    """``spurinv refresh``: one screen saying what happened (or would) and why (from the document
    :func:`spurinv.report.documents.refresh_document` builds)."""
    observe = document["mode"] == "observe"
    mode = "observe mode (no controller configured)" if observe else f"controller {document['controller']}"
    out.print(Text(f"spurinv refresh, node {document['node']}, {mode}", style="bold"))
    rows: list[Row] = [("DRY RUN", "nothing sent, state not written", "bold")] if document["dry_run"] else []
    errors = document["errors"]
    switch = switch_only(error["source"] for error in errors)
    reading = document["inventory"] if document["reading_ok"] else "SWITCHING" if switch else "FAILED"
    rows.append(("reading", f"{reading}", None))
    if document["fingerprint"]:
        rows.append(("", f"fingerprint {document['fingerprint'][:12]}", None))
    rows.extend(("", problem_line(error), "red") for error in errors)
    outcome = document["outcome"]
    rows.append(("outcome", f"{outcome['kind']}: {outcome['reason']}", None))
    diff = outcome["diff"]
    if diff is not None and not diff_empty(diff):  # its lines are the classifier's
        rows.extend(("", line, None) for line in package_lines(diff))
        rows.append(("", diff_summary(diff), None))
    if outcome["release"]:
        rows.append(("release", outcome["release"], None))
    for number, step in enumerate(document["steps"], start=1):
        rows.append((f"step {number}", f"{step['action']}: {step['reason']}", None))
        if step.get("request"):
            # not sent with an error: the request never left (a refused connection), not a dry run's
            said = "sent" if step.get("sent") else "not sent" if step.get("error") else "would send"
            rows.append(("", f"{said}: {step['request']}", "cyan"))
        if step.get("error"):
            rows.append(("", f"error: {step['error']}", "red"))
    rows.extend(("note", note, "yellow") for note in document["notes"])
    code = document["exit_code"]
    rows.append(("exit", str(code), "green" if code == 0 else "bold red"))
    _labelled(out, rows)


def _models(summary: ReadingSummary | BaselineSummary) -> str:
    return ", ".join(f"{model} {count}" for model, count in sorted(summary["models"].items())) or "no GPUs"


def status(out: Console, document: StatusDocument) -> None:
    """``spurinv status``: both readings, the baseline, what is pending, what the last run did."""
    rows: list[Row] = [("state", document["state_file"] + ("" if document["exists"] else " (no runs yet)"), "bold")]
    if not document["exists"]:
        _labelled(out, rows)
        return
    rows.append(("node", str(document["node"]), None))
    labels = ("previous", "latest") if len(document["readings"]) == 2 else ("latest",)
    for label, reading in zip(labels, document["readings"], strict=False):
        if reading["ok"]:
            fingerprint = reading["fingerprint"]
            assert fingerprint is not None  # an ok reading has one (spurinv.shape.reading_problem)
            text = f"{reading['taken_at']}  ok  {reading['devices']} devices ({_models(reading)})  {fingerprint[:12]}"
            rows.append((label, text, None))
        else:
            why = reading["errors"][0]["reason"] if reading["errors"] else ""
            switch = switch_only(error["source"] for error in reading["errors"])
            rows.append((label, f"{reading['taken_at']}  {'SWITCHING' if switch else 'FAILED'}  {why}", "red"))
    baseline = document["baseline"]
    if baseline:
        text = f"{baseline['since']}  {baseline['source']}  {baseline['devices']} devices ({_models(baseline)})"
        rows.append(("baseline", f"{text}  {baseline['fingerprint'][:12]}", None))
        if baseline["source"] == "observed":
            rows.append(("", OBSERVED, None))
    else:
        rows.append(("baseline", "none yet", None))
    if document["pending"]:
        pending = document["pending"]
        rows.append(("pending", f"{pending['fingerprint'][:12]} since {pending['since']}", "yellow"))
    last = document["last_decision"]
    if last:
        rows.append(("last run", f"{last['at']}  exit {last['exit_code']}", None))
        rows.append(("", f"outcome {last['outcome']}: {last['reason']}", None))
        actions = last.get("actions") or [f"{last['action']}"]
        rows.extend(("", f"{'did' if i == 0 else '   '} {action}", None) for i, action in enumerate(actions))
    if document["api"]:
        rows.append(("api", f"{document['api']['version']} at {document['api']['url']}", None))
    rows.extend(("attention", note, "bold yellow") for note in document["attention"])
    _labelled(out, rows)


# refresh tells the same story ("the baseline was only observed, never told to a controller").
OBSERVED = "seen in observe mode, never told to a controller: a run with a controller compares with the controller's view"


# --- spurinv fleet ------------------------------------------------------------------------------
# Rows are written as pre-laid-out Segments, not a rich Table: a Table measures every cell again
# for every layout pass (16 s for 10,000 rows here), Segments print 10,000 rows in ~0.1 s.
# Each node is one line of short columns; its note (the drain reason, the gres spurinv
# registered, or what it registered) goes on an indented line below, where it has the width.

_FLEET_COLUMNS = ("NODE", "STATE", "MGD", "DRAIN", "GRES")
_FLEET_CAPS = (28, 16, 3, 12, 24)
_GAP = "  "
_INDENT = "  "
BOLD = Style(bold=True)
_OURS = Style(color="yellow")
_OTHER = Style(color="magenta")
_CHANGED = Style(color="red", bold=True)
_NEWLINE = Segment.line()


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
    if owner == "ours" and row.get("drain_recorded") is False:
        owner = "orphan"
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
        if row["drain_owner"] == "spurinv":
            return _CHANGED if row.get("drain_recorded") is False else _OURS
        return _OTHER
    if index == 4 and row["gres_changed"]:
        return _CHANGED
    return None


def fleet(out: Console, document: Mapping[str, Any], show_all: bool = False) -> None:
    """``spurinv fleet``: the summary, then the nodes needing attention (every node with ``--all``)."""
    summary = document["summary"]
    width = out.width
    api = f" ({document['api']})" if document.get("api") else ""
    head = [
        # the time first: a long controller URL is what gets cut at 80 columns, never the time
        Text(_fit(f"fleet  {document['taken_at']}  {document['controller']}{api}", width).rstrip(), style="bold"),
        Text(
            _fit(
                f"nodes {summary['nodes']} · managed {summary['managed']} · need attention {summary['attention']}", width
            ).rstrip()
        ),
        Text(
            _fit(
                f"spurinv drains {summary['spurinv_drained']} (orphaned {summary['orphaned_drained']})"
                f" · drained by others {summary['drained_by_others']}"
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
    if summary["orphaned_drains"]:
        names = ", ".join(printable(drain["name"]) for drain in summary["orphaned_drains"][:5])
        more = " …" if len(summary["orphaned_drains"]) > 5 else ""
        text = f"orphaned spurinv drains (no id or record ties them to the node): {names}{more}"
        head.append(Text(_fit(text, width).rstrip(), style="bold red"))
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
