"""Golden files of the human output (the sqlite-utils habit): ``discover``, ``status``,
``diff`` and ``refresh`` at 80 columns (every pipe, ``less`` and non-tty ssh) and at 120, on the
fixture roots. A change of layout shows up as a diff of ``tests/golden/*.txt`` in review;
``pytest --update-golden`` rewrites them.

Every line must fit the width, and nothing that identifies a GPU or its model may be cut: the
tests check that beside the comparison, so a golden file cannot silently bless a truncation.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spurinv.cli import render
from spurinv.inventory import model
from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root
from spurinv.report import documents
from spurinv.report.models import RefreshDocument, adapter

WIDTHS = [80, 120]
STAMPS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
SINCE = re.compile(r"since \d\d:\d\d UTC")


def rendered(width: int, draw: Callable[[Any], None]) -> str:
    out = io.StringIO()
    draw(render.console(file=out, width=width))
    return out.getvalue()


def fits(text: str, width: int) -> None:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert [] == too_long
    assert "…" not in text  # nothing truncated
    assert "..." not in text
    assert all(line == line.rstrip() for line in text.splitlines())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    ("name", "per_device"),
    [
        ("mi300x-cpx", False),
        ("mi300x-cpx", True),
        ("mi300x-spx-vram-nps4", False),
        ("nvidia-8", False),
        ("vega10-duplicate", False),
    ],
)
def test_discover(built, golden, name, per_device, width):
    root = str(built(name))
    raw = json.loads(json.dumps(discover(Root(root), topology=True)).replace(root, "/host"))
    result = model.discovery(raw)

    text = rendered(width, lambda out: render.discover(out, result, "/host", per_device=per_device))

    fits(text, width)
    golden(f"discover-{name}{'-devices' if per_device else ''}-{width}.txt", text)
    if result["inventory"] is not None and not per_device:
        for device in result["inventory"]["devices"]:  # each GPU's identity and model, whole, on its row
            assert re.search(rf"^{re.escape(device['pci_bdf'])}  +{re.escape(device['model'])}  ", text, re.M)


def story(cli: Callable[..., Any], built: Callable[[str], Path], state: Path, *extra: str) -> list[Any]:
    """SPX observed and confirmed, then CPX seen once: the runs an operator reads about."""
    spx, cpx = built("mi300x-spx"), built("mi300x-cpx")
    runs = []
    for root in (spx, spx, cpx):
        runs.append(cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0", "--node", "n1", *extra))
    return runs


@pytest.mark.parametrize("width", WIDTHS)
def test_refresh(cli, built, state_path, golden, width):
    runs = story(cli, built, state_path, "--json")
    for root, *extra in (("mi300x-cpx", "--dry-run"), ("mi300x-cpx",), ("mi300x-cpx-captured",)):
        runs.append(
            cli(
                "refresh",
                "--root",
                built(root),
                "--state",
                state_path,
                "--confirm-interval",
                "0",
                "--node",
                "n1",
                "--json",
                *extra,
            )
        )
    # the documents the CLI renders, with the fixture roots' temporary paths made stable
    roots = {str(built(name)): "/host" for name in ("mi300x-spx", "mi300x-cpx", "mi300x-cpx-captured")}
    texts = []
    for run in runs:
        body = run.out
        for path, shown in sorted(roots.items(), key=lambda item: -len(item[0])):  # -captured first
            body = body.replace(path, shown)
        body = SINCE.sub("since 18:02 UTC", body)  # a switch's start: the run's own clock, made stable
        adapter(RefreshDocument).validate_json(body)  # the contract
        document = json.loads(body)
        texts.append(rendered(width, lambda out, document=document: render.refresh(out, document)))  # type: ignore[misc]  # a default binds the loop value

    text = "\n".join(texts)

    fits(text, width)
    golden(f"refresh-{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_status(cli, built, state_path, golden, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    story(cli, built, state_path)
    # the runs' own clock, made stable: SPX seen at 18:00, CPX at 18:01 (fields by meaning, not by order)
    raw = json.loads(STAMPS.sub("2026-12-02T18:00:00Z", state_path.read_text()))
    raw["readings"][1]["taken_at"] = raw["pending"]["since"] = raw["last"]["at"] = "2026-12-02T18:01:00Z"

    text = rendered(width, lambda out: render.status(out, documents.status_document(raw, "/var/lib/spurinv/state.json")))

    fits(text, width)
    golden(f"status-{width}.txt", text)


@pytest.mark.parametrize("width", WIDTHS)
def test_diff(cli, built, state_path, golden, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    spx = built("mi300x-spx")
    for _ in range(2):
        cli("refresh", "--root", spx, "--state", state_path, "--confirm-interval", "0", "--node", "n1")
    runs = [
        cli("diff", "--root", built("mi300x-cpx"), "--state", state_path),
        cli("diff", "--root", built("mi300x-spx-nps4"), "--state", state_path),
        cli("diff", "--root", built("mi300x-dpx"), "--state", state_path),
    ]

    text = "\n".join(run.out for run in runs)

    fits(text, width)
    golden(f"diff-{width}.txt", text)


def test_the_readme_example_is_the_golden_output():
    """The README shows ``discover`` as it really prints (the golden file at 80 columns), the
    fingerprint and the sources block included (the sample stopped at the table)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    golden = (Path(__file__).resolve().parent / "golden" / "discover-mi300x-cpx-80.txt").read_text()

    assert f"```\n{golden}```" in readme
