"""The module boundaries ARCHITECTURE.md promises, checked on the source."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "spurinv"
MODULES = sorted(PACKAGE.rglob("*.py"))


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def module(name: str) -> Path:
    return PACKAGE / (name.replace(".", "/") + ".py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_requests_and_rich_stay_in_their_modules(path):
    used = imports(path)

    if path != module("controller"):
        assert "requests" not in used
    if path != module("render"):
        assert "rich" not in used
    if path != module("cli"):
        assert "typer" not in used
        assert "click" not in used


@pytest.mark.parametrize("name", ["classify", "policy", "model", "nodeview", "fingerprint", "catalog", "slurmconf", "fleet"])
def test_the_pure_core_does_no_io(name):
    used = imports(module(name))

    assert not used & {"os", "io", "pathlib", "subprocess", "socket", "requests", "shutil", "time", "glob"}


@pytest.mark.parametrize(
    "name",
    ["launch", "tick", "ledger", "exitcode", "discovery", "root", "store", "locations", "documents", "metrics", "log"]
    + ["fingerprint", "catalog", "jsontext", "shape", "stateshape", "output", "regularfile"]
    + [f"sources.{p.stem}" for p in (PACKAGE / "sources").glob("*.py") if p.stem != "__init__"],
)
def test_the_hot_path_imports_nothing_heavy_at_module_level(name):
    tree = ast.parse(module(name).read_text())
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top.add(node.module.split(".")[0])

    heavy = {"pydantic", "typer", "rich", "requests", "yaml", "dataclasses", "typing", "enum", "datetime", "pathlib"}
    assert not top & (heavy | {"re", "json"})  # re and json: imported only where the tick never goes


def spurinv_modules(path: Path) -> set[str]:
    """The spurinv modules ``path`` imports (``from spurinv import x`` and ``from spurinv.x import y``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "spurinv":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spurinv."):
            found.add(node.module.split(".")[1])
    return found


def test_one_path_the_full_run_does_not_lean_on_the_fast_one():
    """Both keep the books through ledger; neither imports the other (issue #12)."""
    assert "tick" not in spurinv_modules(module("refresh"))
    assert "refresh" not in spurinv_modules(module("tick"))
    assert "ledger" in spurinv_modules(module("tick"))
    assert "ledger" in spurinv_modules(module("refresh"))
    assert "ledger" in spurinv_modules(module("state"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_root_names_sys_and_proc(path):
    if path == module("root"):
        return
    tree = ast.parse(path.read_text())
    strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    kinds = (ast.Module, ast.FunctionDef, ast.ClassDef)
    docstrings = {ast.get_docstring(node, clean=False) for node in ast.walk(tree) if isinstance(node, kinds)}

    offending = [s for s in strings if s not in docstrings and re.match(r"^/?(sys|proc)/", s)]

    assert not offending, offending


def test_one_type_for_controller_error_kinds():
    """The kinds are one ``Literal``: the exit-status table, the state file's backoff and the client agree."""
    from typing import get_args

    from spurinv.errors import ControllerError, ControllerKind
    from spurinv.state import Backoff

    kinds = set(get_args(ControllerKind))
    assert kinds == set(ControllerError.KINDS)
    assert kinds == set(get_args(Backoff.model_fields["kind"].annotation))


def test_one_shape_per_device(built):
    """A device's shapes agree: discovery's dicts, their TypedDict, the pydantic model, the fingerprint."""
    from test_shape import typed_dicts

    from spurinv.discovery import discover
    from spurinv.fingerprint import SCHEDULABLE
    from spurinv.model import Device, Inventory
    from spurinv.root import Root

    fields = set(Device.model_fields)
    assert fields == set(typed_dicts()["Device"].__annotations__)
    assert set(Inventory.model_fields) == set(typed_dicts()["Inventory"].__annotations__)
    assert set(SCHEDULABLE) <= fields
    for name in ("mi300x-cpx", "nvidia-cdi", "vega10"):
        inventory = discover(Root(str(built(name))))["inventory"]
        assert inventory is not None
        assert set(inventory) == set(Inventory.model_fields)
        assert all(set(device) == fields for device in inventory["devices"]), name


def test_the_document_models_are_for_schemas_and_tests_only():
    """documents.py builds every JSON document; report.py's models generate schemas/ and check the
    documents in tests, and nothing at run time builds one by hand."""
    users = [path.name for path in MODULES if path != module("report") and "report" in spurinv_modules(path)]

    assert users == []
