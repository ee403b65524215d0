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
    found = set()
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
    ["launch", "tick", "discovery", "root", "store", "locations", "documents", "metrics", "log", "fingerprint", "catalog"]
    + [f"sources.{p.stem}" for p in (PACKAGE / "sources").glob("*.py") if p.stem != "__init__"],
)
def test_the_hot_path_imports_nothing_heavy_at_module_level(name):
    tree = ast.parse(module(name).read_text())
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top.add(node.module.split(".")[0])

    assert not top & {"pydantic", "typer", "rich", "requests", "yaml", "dataclasses", "typing", "enum", "datetime", "pathlib"}


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
