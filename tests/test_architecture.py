"""The module boundaries ARCHITECTURE.md promises, checked on the source."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "spurinv"
MODULES = sorted(PACKAGE.rglob("*.py"))

# The floors, lowest first: a module imports from its own floor or the floors below, never above.
# A package is one floor; a top-level module is one floor, except the shared vocabulary at the bottom.
# the shared vocabulary, imported from every floor
BASE = {"errors", "exitcode", "secret", "regularfile", "budget", "log", "nodename", "hostlist", "jsontext", "__init__"}
FLOORS = (
    ("base", BASE),
    # shape.py: the rules of the JSON that is read and kept (its TypedDicts: inventory/model.py)
    ("inventory", {"inventory", "shape"}),
    ("config", None),
    ("controller", None),
    ("state", None),
    ("policy", None),
    ("report", None),
    ("refresh", None),
    ("cli", None),
    ("slurmdynamic", None),
    ("__main__", None),
)


def dotted(path: Path) -> str:
    """``spurinv/state/ledger.py`` → ``state.ledger``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def floor(name: str) -> int:
    """The floor of a dotted module name (``state.ledger``, ``policy``, ``errors``)."""
    head = name.split(".", maxsplit=1)[0]
    for index, (floor_name, members) in enumerate(FLOORS):
        if (members is not None and head in members) or (members is None and head == floor_name):
            return index
    raise AssertionError(f"spurinv.{name} is on no floor: add it to FLOORS in tests/test_architecture.py")


def module(name: str) -> Path:
    """``state.ledger`` → its file."""
    path = PACKAGE / (name.replace(".", "/") + ".py")
    return path if path.exists() else PACKAGE / name.replace(".", "/") / "__init__.py"


@functools.cache
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once a worker: the tests only read it (each module was
    parsed some 14 times a run)."""
    return ast.parse(path.read_text())


@functools.cache
def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of ``path``'s tree (``ast.walk``), once a worker."""
    return tuple(ast.walk(parsed(path)))


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in walked(path):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def spurinv_imports(path: Path) -> set[str]:
    """The spurinv modules ``path`` imports, as dotted names under ``spurinv``."""
    found: set[str] = set()
    for node in walked(path):
        if isinstance(node, ast.ImportFrom) and node.module == "spurinv":
            found.update(alias.name for alias in node.names if alias.name != "__version__")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spurinv."):
            base = node.module.removeprefix("spurinv.")
            for alias in node.names:
                # ``from spurinv.state import ledger`` names a module; ``from spurinv.state.file import State`` a name
                found.add(f"{base}.{alias.name}" if (PACKAGE / base.replace(".", "/") / f"{alias.name}.py").exists() else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("spurinv.") for alias in node.names if alias.name.startswith("spurinv."))
    return found


def test_every_module_has_a_floor():
    for path in MODULES:
        floor(dotted(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_from_a_floor_above_its_own(path):
    own = floor(dotted(path))

    above = {name for name in spurinv_imports(path) if floor(name) > own}

    assert not above, f"spurinv.{dotted(path)} (floor {FLOORS[own][0]}) imports from above: {sorted(above)}"


def test_the_package_layout_is_the_documented_one():
    """ARCHITECTURE.md's code map names every module where it lives."""
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text()
    documented = [path.relative_to(PACKAGE).as_posix() for path in MODULES if path.name != "__init__.py"]
    missing = [name for name in documented if name not in text]

    assert not missing, missing


# In the first diagram: ``state/file.State``, ``policy.settle(state, action, now, *, applied, …)``
# (a module as the code map spells it, then a name in it and maybe its parameters), and a bare
# ``report/documents`` or ``inventory/sources/*``; ``state.json`` is the file.
DIAGRAM_NAME = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)*[a-z_]+)\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\([^)]*\))?")
DIAGRAM_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_]+)(?:/\*)?(?![\w/.])")


def test_the_first_diagram_names_the_code_as_it_is():
    """Every module, name and signature ARCHITECTURE.md's first diagram gives is the code's: the
    parameters in order, ``*`` where the keyword-only ones start, ``…`` for the rest."""
    import importlib

    diagram = (PACKAGE.parent / "ARCHITECTURE.md").read_text().split("```")[1]
    wrong: list[str] = []
    named = [found for found in DIAGRAM_NAME.findall(diagram) if found[:2] != ("state", "json")]
    for path in DIAGRAM_PATH.findall(diagram):
        if not (PACKAGE / f"{path}.py").is_file() and not (PACKAGE / path / "__init__.py").is_file():
            wrong.append(f"{path}: no such module")
    for path, name, given in named:
        try:
            thing: object = importlib.import_module(f"spurinv.{path.replace('/', '.')}")
            for part in name.split("."):
                thing = getattr(thing, part)
        except (ImportError, AttributeError) as exc:
            wrong.append(f"{path}.{name}: {exc}")
            continue
        if not given:
            continue
        said = [word.strip() for word in given[1:-1].split(",")] if given != "()" else []
        code = _parameters(thing)
        if not _same_parameters(said, code):
            wrong.append(f"{path}.{name}{given}: the code's is ({', '.join(code)})")

    assert not wrong, wrong
    assert len(named) >= 15, named


def _parameters(function: Any) -> list[str]:
    """``function``'s parameters as the diagram writes them: ``*`` before the keyword-only ones."""
    import inspect

    parameters = [each for each in inspect.signature(function).parameters.values() if each.name != "self"]
    words: list[str] = []
    for index, each in enumerate(parameters):
        before = parameters[index - 1].kind if index else None
        if each.kind == each.KEYWORD_ONLY and before not in (each.KEYWORD_ONLY, each.VAR_POSITIONAL):
            words.append("*")
        words.append(("*" if each.kind == each.VAR_POSITIONAL else "**" if each.kind == each.VAR_KEYWORD else "") + each.name)
    return words


def _same_parameters(said: list[str], code: list[str]) -> bool:
    """``said`` (the diagram's, ``…`` ending it early) against the code's, ``*`` a parameter of its own."""
    for index, name in enumerate(said):
        if name == "…":
            return True
        if index >= len(code) or code[index] != name:
            return False
    return len(said) == len(code)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_requests_and_rich_stay_in_their_modules(path):
    used = imports(path)

    if path != module("controller.rest"):
        assert "requests" not in used
    if path != module("cli.render"):
        assert "rich" not in used
    if path != module("cli.app"):
        assert "typer" not in used
        assert "click" not in used


@pytest.mark.parametrize(
    "name",
    ["inventory.classify", "policy", "inventory.model", "controller.nodeview", "inventory.fingerprint", "inventory.catalog",
     "inventory.slurmconf", "report.fleet"],
)  # fmt: skip
def test_the_pure_core_does_no_io(name):
    used = imports(module(name))

    assert not used & {"os", "io", "pathlib", "subprocess", "socket", "requests", "shutil", "time", "glob"}


def test_the_schedule_parsing_is_the_preflights_and_reads_nothing():
    """cli/schedule.py is how cron, /bin/sh and systemd read text check has already read: only
    cli/preflight.py imports it, and it opens no file and runs no program (os for os.path only)."""
    path = module("cli.schedule")
    importers = [dotted(other) for other in MODULES if "cli.schedule" in spurinv_imports(other)]
    calls = {node.func.id for node in walked(path) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    attributes = {ast.unparse(node) for node in walked(path) if isinstance(node, ast.Attribute)}

    assert importers == ["cli.preflight"]
    assert not imports(path) & {"io", "pathlib", "subprocess", "socket", "requests", "shutil", "time", "glob"}
    assert "open" not in calls
    assert {name for name in attributes if name.startswith("os.")} <= {"os.path", "os.path.basename"}


@pytest.mark.parametrize("name", ["policy", "controller.nodeview", "inventory.classify"])
def test_the_decision_core_holds_no_model_objects(name):
    """Its values are TypedDicts and frozen dataclasses: pydantic stays with the configuration,
    the boundaries that validate (a state file, a discovery) and the schemas. nodeview words one
    refusal of controller text as pydantic did, through pydantic_core on that error path only."""
    used = imports(module(name))

    assert "pydantic" not in used
    assert name == "controller.nodeview" or "pydantic_core" not in used


HOT_PATH = (
    ["cli.launch", "cli.tick", "state.ledger", "exitcode", "inventory.discovery", "inventory.root", "state.store",
     "state.locations", "report.documents", "report.metrics", "log", "inventory.fingerprint", "inventory.catalog",
     "jsontext", "state.vouch", "cli.streams", "regularfile", "shape"]
    + [f"inventory.sources.{p.stem}" for p in (PACKAGE / "inventory" / "sources").glob("*.py") if p.stem != "__init__"]
    + [f"{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
)  # fmt: skip


@pytest.mark.parametrize("name", HOT_PATH)
def test_the_hot_path_imports_nothing_heavy_at_module_level(name):
    tree = parsed(module(name))
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            top.add(node.module.split(".")[0])

    heavy = {"pydantic", "typer", "rich", "requests", "yaml", "dataclasses", "typing", "enum", "datetime", "pathlib"}
    assert not top & (heavy | {"re", "json"})  # re and json: imported only where the tick never goes


def type_checking_only(tree: ast.Module, found: Callable[[ast.Import | ast.ImportFrom], bool]) -> list[int]:
    """The lines of the imports ``found`` picks that are not under ``if TYPE_CHECKING:``."""
    guarded = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    picked = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom) and found(node)]
    return [node.lineno for node in picked if id(node) not in guarded]


def imports_model(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether ``node`` imports spurinv.inventory.model (``from spurinv.inventory.model import …``,
    ``from spurinv.inventory import model``, ``import spurinv.inventory.model``)."""
    if isinstance(node, ast.ImportFrom):
        return node.module == "spurinv.inventory.model" or (
            node.module == "spurinv.inventory" and any(a.name == "model" for a in node.names)
        )
    return any(a.name == "spurinv.inventory.model" for a in node.names)


@pytest.mark.parametrize("name", HOT_PATH)
def test_the_hot_path_imports_the_typed_dicts_for_mypy_only(name):
    """spurinv/inventory/model.py imports pydantic (and typing): a module of the tick names its
    TypedDicts under ``if TYPE_CHECKING:`` only, anywhere in the module (a function's import runs
    when the tick calls it)."""
    assert type_checking_only(parsed(module(name)), imports_model) == []


def test_one_path_the_full_run_does_not_lean_on_the_fast_one():
    """Both keep the books through ledger; neither imports the other."""
    assert "cli.tick" not in spurinv_imports(module("refresh"))
    assert "refresh" not in spurinv_imports(module("cli.tick"))
    assert "state.ledger" in spurinv_imports(module("cli.tick"))
    assert "state.ledger" in spurinv_imports(module("refresh"))
    assert "state.ledger" in spurinv_imports(module("state.file"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_root_names_sys_and_proc(path):
    if path == module("inventory.root"):
        return
    tree = parsed(path)
    strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    kinds = (ast.Module, ast.FunctionDef, ast.ClassDef)
    docstrings = {ast.get_docstring(node, clean=False) for node in ast.walk(tree) if isinstance(node, kinds)}

    offending = [s for s in strings if s not in docstrings and re.match(r"^/?(sys|proc)/", s)]

    assert not offending, offending


def test_one_type_for_controller_error_kinds():
    """The kinds are one ``Literal``: the exit-status table, the state file's backoff and the client agree."""
    from typing import get_args

    from typing_extensions import get_type_hints

    from spurinv.errors import ControllerError, ControllerKind
    from spurinv.state.file import Backoff

    kinds = set(get_args(ControllerKind))
    assert kinds == set(ControllerError.KINDS)
    assert kinds == set(get_args(get_type_hints(Backoff)["kind"]))


def test_one_list_of_check_names():
    """``check``'s checks, in the order its document lists them, are the names its schema allows."""
    from typing import get_args

    from spurinv.cli.preflight import NAMES
    from spurinv.report.models import CheckName

    assert list(NAMES) == list(get_args(CheckName))


def test_one_shape_per_device(built):
    """A device's shapes agree: discovery's dicts carry every key of their TypedDict (the optional
    ones too), and the fingerprint reads fields a device has."""
    from spurinv.inventory.discovery import discover
    from spurinv.inventory.fingerprint import SCHEDULABLE
    from spurinv.inventory.model import Device, Inventory
    from spurinv.inventory.root import Root

    fields = set(Device.__annotations__)
    assert set(SCHEDULABLE) <= fields
    for name in ("mi300x-cpx", "nvidia-cdi", "vega10"):
        inventory = discover(Root(str(built(name))))["inventory"]
        assert inventory is not None
        assert set(inventory) == set(Inventory.__annotations__)
        assert all(set(device) == fields for device in inventory["devices"]), name


def imports_documents(node: ast.Import | ast.ImportFrom) -> bool:
    """Whether ``node`` imports spurinv.report.models."""
    if isinstance(node, ast.ImportFrom):
        return node.module == "spurinv.report.models" or (
            node.module == "spurinv.report" and any(a.name == "models" for a in node.names)
        )
    return any(a.name == "spurinv.report.models" for a in node.names)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_documents_typed_dicts_are_for_mypy_schemas_and_tests_only(path):
    """report/documents.py and report/fleet.py build every JSON document as the TypedDicts of report/models.py,
    which imports pydantic: a module of spurinv names them for mypy only, and no run loads that module."""
    if path == module("report.models"):
        return

    assert type_checking_only(parsed(path), imports_documents) == []
