# ruff: noqa: T201  (a command-line report)
"""Mutation testing of spurinv's decision core, its parsers and the modules that write to the
controller (docs/mutation.md). Run it as ``scripts/mutate``.

Each mutant is one small AST change to one module (a flipped comparison, ``and``↔``or``, ±1 on an
int constant, a dropped ``not``, swapped ``if``/``else`` branches, a statement replaced by
``pass``, ``+``↔``-``). The fast unit tests (``-m "not e2e and not slow"``) run against it.

Which tests: a *coverage map* is built once (``--select map``, the default): the test files that
name any mutated module, plus ``tests/test_cli.py``, run once with the modules instrumented (a
set add before each statement inside a function), which records which test executes which line.
A mutant inside a function then runs only the tests that execute one of its lines, fastest
first; a module-level name (``MAX_BODY = …``) runs the tests that execute a line reading it, and
the test files whose text names it (a word), whole: its readers in other modules. The
map is cached per test file under ``.mutate-cache/``: a test file is run again when it changes,
all of them when the package, a test helper or this script changes. A mutant the map says no test reaches, or one the
map cannot place (a class body, a default argument: run at import), falls back to the files: the
module's own ``tests/test_<module>*.py``, then the other test files that name the module and
``tests/test_cli.py``. ``--select files`` uses the fallback for every mutant.

``-x`` stops at the first failure. Every mutant has a time limit (``--timeout``, default: three
times what its tests took in the map, plus 10 s, at least 60 s); past it the mutant counts as
*killed by timeout* (a loop that never ends is caught), reported in its own column. A mutant no
test kills *survives*; one listed in ``docs/mutation.md`` as equivalent (no observable behaviour
change) is left out of the score.

The working tree is never written: every worker mutates its own copy of the ``spurinv`` package
in a temporary directory, first on ``sys.path`` (checked before every test run), with bytecode
writing off; the copies are removed on exit, Ctrl-C and SIGTERM included. The tests are forked
from this process after pytest, hypothesis and pydantic are imported once, so a mutant costs its
tests' time, not an interpreter start. Hypothesis runs derandomized, without its example
database and without deadlines, so a run is reproducible and a loaded machine kills nothing.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import hashlib
import json
import os
import random
import re
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORE_MODULES = (
    "spurinv/policy.py",
    "spurinv/inventory/classify.py",
    "spurinv/controller/nodeview.py",
    "spurinv/inventory/sources/attribute.py",
)
# the modules that decide or perform a write to the controller
WRITER_MODULES = (
    # ownership decides whether spurinv may resume a node or rewrite its `extra`; answer makes the
    # controller's text that decision compares
    "spurinv/controller/ownership.py",
    "spurinv/controller/answer.py",
    "spurinv/state/intent.py",
    "spurinv/state/ledger.py",
    "spurinv/controller/registration.py",
    "spurinv/controller/process.py",
    "spurinv/controller/scontrol.py",
    "spurinv/controller/transport.py",
    "spurinv/controller/rest.py",
    "spurinv/report/fleet.py",
    "spurinv/budget.py",
)
DEFAULT_MODULES = CORE_MODULES + WRITER_MODULES
EQUIVALENTS = REPO / "docs" / "mutation.md"
MARKERS = "not e2e and not slow"
CACHE = REPO / ".mutate-cache"
MAP_FORMAT = 1
# The "rest" stage of the fallback: the other test files that name the module and the in-process
# CLI scenarios (refresh, status, diff through their real callers). ``--rest all`` runs the whole
# fast suite instead: about five minutes per surviving mutant on a loaded 2-core machine.
RELATED = ("tests/test_cli.py",)
# The word other test files name a module by, where it is not the file's stem: the tests that reach
# the REST client through the CLI or the fault server say "controller" (its module was
# spurinv/controller.py), seldom "rest"; looking for the stem would leave most of them out.
NAMED_AS = {"spurinv/controller/rest.py": "controller"}

COMPARE_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
# annotations are never evaluated (``from __future__ import annotations``); decorators are wiring
SKIP_FIELDS = frozenset({"annotation", "returns", "decorator_list", "type_comment", "type_params"})


# ---------------------------------------------------------------------------------- mutants
@dataclass
class Mutant:
    """One change to one module: where, what, and how to make it."""

    module: str  # path relative to the repository
    line: int
    function: str
    operator: str
    original: str
    mutated: str
    path: tuple[tuple[str, int | None], ...]
    replacement: ast.AST | list[ast.stmt]
    level: str = "function"  # "function": runs when called; "module", "class", "import": runs at import
    end_line: int = 0
    key: str = ""
    result: str = "pending"  # killed-map, killed-own, killed-rest, timeout, survived, error
    detail: str = ""
    tests: list[str] = field(default_factory=list)  # the tests the coverage map selected
    seconds: float = 0.0

    def describe(self) -> str:
        return f"{self.module}:{self.line}  {self.function}  [{self.operator}]  {self.original} → {self.mutated}"


def _short(text: str, limit: int = 90) -> str:
    first = " ".join(text.split())
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _is_docstring(stmt: ast.stmt, index: int) -> bool:
    return (
        index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
    )


def _skip_statement(stmt: ast.stmt, index: int) -> bool:
    if _is_docstring(stmt, index):
        return True
    if isinstance(
        stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assert, ast.Pass)
    ):
        return True
    if isinstance(stmt, (ast.Global, ast.Nonlocal)):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _is_type_checking(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"


def _stringy(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


class _Finder:
    """Walk a module in a fixed order and list every mutant it admits."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.found: list[Mutant] = []
        self.level = "module"

    def add(self, node: ast.AST, path: tuple, function: str, operator: str, original: str, mutated: str, new: object) -> None:
        line = getattr(node, "lineno", 0)
        mutant = Mutant(self.module, line, function or "<module>", operator, _short(original), _short(mutated), path, new)  # type: ignore[arg-type]
        mutant.level = self.level
        mutant.end_line = getattr(node, "end_lineno", None) or line
        if isinstance(node, ast.If):  # an if with its branches swapped: its test decides, wherever it runs
            mutant.end_line = getattr(node.test, "end_lineno", None) or line
        self.found.append(mutant)

    def walk(self, node: ast.AST, path: tuple, function: str, level: str) -> None:
        self.level = level
        self.candidates(node, path, function, level)
        if isinstance(node, ast.Assert):
            return  # asserts narrow types for mypy; removing or flipping them changes no behaviour we own
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            function = f"{function}.{node.name}" if function else node.name
            level = "class" if isinstance(node, ast.ClassDef) else "function"
        for name, value in ast.iter_fields(node):
            if name in SKIP_FIELDS:
                continue
            if name == "args" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.walk(value, (*path, (name, None)), function, "import")  # default values: evaluated at import
                continue
            if isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, ast.stmt):
                        if _is_type_checking(item) or _is_all(item):
                            continue
                        if level != "module" and not _skip_statement(item, index):
                            self.level = level
                            self.add(
                                item, (*path, (name, index)), function, "statement→pass", ast.unparse(item), "pass", ast.Pass()
                            )
                    if isinstance(item, ast.AST):
                        self.walk(item, (*path, (name, index)), function, level)
            elif isinstance(value, ast.AST):
                self.walk(value, (*path, (name, None)), function, level)

    def candidates(self, node: ast.AST, path: tuple, function: str, level: str) -> None:
        text = ast.unparse(node) if isinstance(node, ast.expr) else ""
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                flipped = COMPARE_FLIPS.get(type(op))
                if flipped is not None:
                    new = copy.deepcopy(node)
                    new.ops[index] = flipped()
                    self.add(node, path, function, "compare", text, ast.unparse(new), new)
        elif isinstance(node, ast.BoolOp):
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.add(node, path, function, "and↔or", text, ast.unparse(new), new)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.add(node, path, function, "drop-not", text, ast.unparse(node.operand), copy.deepcopy(node.operand))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                new = ast.Constant(node.value + delta)
                self.add(node, path, function, "±1", text, ast.unparse(new), new)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            if not (_stringy(node.left) or _stringy(node.right)):
                new = copy.deepcopy(node)
                new.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
                self.add(node, path, function, "+↔-", text, ast.unparse(new), new)
        elif isinstance(node, ast.IfExp):
            new = ast.IfExp(test=copy.deepcopy(node.test), body=copy.deepcopy(node.orelse), orelse=copy.deepcopy(node.body))
            self.add(node, path, function, "swap-branches", text, ast.unparse(new), new)
        elif isinstance(node, ast.If) and level != "module":
            head = f"if {ast.unparse(node.test)}: …"
            if node.orelse:
                new_if = ast.If(test=copy.deepcopy(node.test), body=copy.deepcopy(node.orelse), orelse=copy.deepcopy(node.body))
                self.add(node, path, function, "swap-branches", head + " else: …", head + " (branches swapped)", new_if)
            else:
                test = ast.UnaryOp(op=ast.Not(), operand=copy.deepcopy(node.test))
                new_if = ast.If(test=test, body=copy.deepcopy(node.body), orelse=[])
                self.add(node, path, function, "swap-branches", head, f"if {ast.unparse(test)}: …", new_if)


def _is_all(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)


def find_mutants(module: str) -> list[Mutant]:
    """Every mutant of ``module`` (a repository-relative path), in source order, with stable keys."""
    tree = ast.parse((REPO / module).read_text(), module)
    finder = _Finder(module)
    finder.walk(tree, (), "", "module")
    seen: Counter[str] = Counter()
    for mutant in finder.found:
        base = f"{Path(module).name}::{mutant.function}: {mutant.original} → {mutant.mutated}"
        seen[base] += 1
        mutant.key = base if seen[base] == 1 else f"{base} #{seen[base]}"
    return finder.found


def bound_names(module: str) -> dict[int, set[str]]:
    """For each top-level statement (by index) that binds names: those names."""
    tree = ast.parse((REPO / module).read_text(), module)
    bound: dict[int, set[str]] = {}
    for index, stmt in enumerate(tree.body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        names = {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        if names:
            bound[index] = names
    return bound


def name_readers(module: str) -> dict[int, set[int]]:
    """For each top-level statement (by index) that binds names: the lines of ``module`` reading one.

    A module-level constant runs at import, so no test's trace contains its line; the tests that
    run a line reading it are the ones that can tell its value."""
    tree = ast.parse((REPO / module).read_text(), module)
    bound = bound_names(module)
    readers: dict[int, set[int]] = {index: set() for index in bound}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            for index, names in bound.items():
                if node.id in names:
                    readers[index].add(node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # a default value is read at import: the calls that use it run the function's body
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            used = {n.id for d in defaults for n in ast.walk(d) if isinstance(n, ast.Name)}
            body = set(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
            for index, names in bound.items():
                if used & names:
                    readers[index] |= body
    return readers


def tree_hash(paths: list[Path]) -> str:
    """A digest of the Python files under ``paths`` (test files themselves excepted), of the
    modules the map instruments and of the map's format (bump ``MAP_FORMAT`` when ``instrument`` or
    ``_Tracer`` change what they record)."""
    digest = hashlib.sha256(f"map format {MAP_FORMAT} of {DEFAULT_MODULES}".encode())
    for top in paths:
        files = [top] if top.is_file() else sorted(f for f in top.rglob("*.py") if "fixtures" not in f.parts)
        for file in files:
            if file != top and file.name.startswith("test_"):
                continue
            digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def map_entry(base: str, test_file: str) -> Path:
    """Where the map of one test file is cached: keyed by the package and helpers, and by the file."""
    rel = str(Path(test_file).resolve().relative_to(REPO))
    own = hashlib.sha256(Path(test_file).read_bytes()).hexdigest()[:16]
    return CACHE / base / f"{rel.replace('/', '__')}.{own}.json"


def apply(mutant: Mutant) -> str:
    """The module's source with ``mutant`` applied (unparsed: comments and layout are not kept)."""
    tree = ast.parse((REPO / mutant.module).read_text(), mutant.module)
    parent: ast.AST = tree
    for name, index in mutant.path[:-1]:
        value = getattr(parent, name)
        parent = value[index] if index is not None else value
    name, index = mutant.path[-1]
    replacement = copy.deepcopy(mutant.replacement)
    if index is None:
        setattr(parent, name, replacement)
    else:
        getattr(parent, name)[index] = replacement
    ast.fix_missing_locations(tree)
    source = ast.unparse(tree)
    compile(source, mutant.module, "exec")
    return source


def unparsed(module: str) -> str:
    return ast.unparse(ast.parse((REPO / module).read_text(), module))


def load_equivalents(path: Path) -> dict[str, str]:
    """Keys of mutants judged equivalent: the first backticked cell of each table row in ``path``."""
    if not path.exists():
        return {}
    result = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^\|\s*`(?P<key>[^`]+)`\s*\|(?P<rest>.*)\|\s*$", line)
        if match:
            result[match["key"]] = match["rest"].strip()
    return result


# ------------------------------------------------------------------------------------ runner
@dataclass
class Slot:
    """One worker: its own copy of the package, and the test run in flight."""

    root: Path
    pid: int = 0
    pidfd: int = -1
    started: float = 0.0
    mutant: Mutant | None = None
    stage: str = ""
    log: Path = field(default_factory=Path)


class Runner:
    def __init__(self, args: argparse.Namespace, modules: list[str], workdir: Path) -> None:
        self.args = args
        self.modules = modules
        self.workdir = workdir
        self.slots = [Slot(root=workdir / f"slot{i}") for i in range(args.jobs)]
        for slot in self.slots:
            shutil.copytree(REPO / "spurinv", slot.root / "spurinv", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            # the tests run in the slot (a ``python -m spurinv`` they start imports the mutated copy
            # from there); the rest of the repository is linked in for tests reading README.md & co
            for entry in REPO.iterdir():
                if entry.name != "spurinv" and not entry.name.startswith("."):
                    (slot.root / entry.name).symlink_to(entry)
            slot.log = slot.root / "pytest.log"
        self.timeouts: dict[tuple[str, str], float] = {}
        self.plan: dict[str, list[str]] = {}
        self.own: dict[str, list[str]] = {}
        # the coverage map: module → line → test ids; test id → seconds
        self.lines: dict[str, dict[int, set[str]]] = {}
        self.durations: dict[str, float] = {}
        self.mapped: set[str] = set()  # test files in the map
        self.failed: set[str] = set()  # tests that failed on the unmutated code while it was built

    # test selection ---------------------------------------------------------------------
    def own_tests(self, module: str) -> list[str]:
        """``tests/test_<module>*.py``, listed once (test files added during a run change nothing)."""
        if module not in self.own:
            self.own[module] = [str(p) for p in sorted((REPO / "tests").glob(f"test_{Path(module).stem}*.py"))]
        return self.own[module]

    @staticmethod
    def naming(module: str) -> list[str]:
        """The fast test files that name ``module`` (a word in their text), and the CLI scenarios."""
        stem = NAMED_AS.get(module, Path(module).stem)
        pattern = re.compile(rf"\b{re.escape(stem)}\b")
        files = [
            p
            for p in sorted((REPO / "tests").rglob("test_*.py"))
            if "e2e" not in p.relative_to(REPO / "tests").parts and pattern.search(p.read_text(errors="replace"))
        ]
        return [str(p) for p in dict.fromkeys([*files, *(REPO / r for r in RELATED)])]

    @staticmethod
    def naming_names(names: set[str]) -> list[str]:
        """The fast test files whose text names one of ``names`` (a word): a module-level constant
        another module imports (``ownership.MAX_ARG_STRLEN``, read in ``scontrol``) is pinned by
        that module's tests, which neither the map of its own module's lines nor its files reach."""
        if not names:
            return []
        pattern = re.compile(r"\b(?:" + "|".join(re.escape(name) for name in sorted(names)) + r")\b")
        return [
            str(p.relative_to(REPO))
            for p in sorted((REPO / "tests").rglob("test_*.py"))
            if "e2e" not in p.relative_to(REPO / "tests").parts and pattern.search(p.read_text(errors="replace"))
        ]

    def cost(self, test: str) -> float:
        """The seconds a test took in the map; for a whole file, its tests' sum (60 s if unmapped)."""
        if "::" in test:
            return self.durations.get(test, 1.0)
        mine = [d for t, d in self.durations.items() if t.startswith(test + "::")]
        return sum(mine) if mine else 60.0

    def pytest_args(self, module: str, stage: str, tests: list[str] | None = None) -> list[str]:
        own = self.own_tests(module)
        common = ["-x", "-q", "--no-header", "-p", "no:cacheprovider", "-m", MARKERS, "--rootdir", str(REPO)]
        common += ["-c", str(REPO / "pyproject.toml")]
        if stage in ("map", "map2"):
            return [*(str(REPO / t) for t in tests or []), *common]
        common += [f"--deselect={REPO / test}" for test in sorted(self.failed)]  # failed in the map, unmutated
        if stage == "own":
            return [*own, *common]
        if self.args.rest in ("related", "none"):
            return [*(p for p in self.naming(module) if p not in own), *common]
        ignores = [f"--ignore={path}" for path in [*own, str(REPO / "tests" / "e2e")]]
        return [str(REPO / "tests"), *ignores, *common]

    def stage_files(self, module: str, stage: str) -> set[str] | None:
        """The test files of a fallback stage (None: the whole suite)."""
        own = self.own_tests(module)
        if stage == "own":
            return set(own)
        if self.args.rest in ("related", "none"):
            return {p for p in self.naming(module) if p not in own}
        return None

    def stages(self, module: str) -> list[str]:
        """The fallback test stages of ``module``'s mutants, fixed when the run starts."""
        if module not in self.plan:
            self.plan[module] = self._stages(module)
        return self.plan[module]

    def _stages(self, module: str) -> list[str]:
        if not self.own_tests(module):
            return ["rest"]  # no tests/test_<module>*.py: the related tests (or --rest all) are all there is
        return ["own", "rest"] if self.args.rest != "none" else ["own"]

    def select(self, mutant: Mutant) -> None:
        """The tests the map says execute one of ``mutant``'s lines (or read the name it binds)."""
        if self.args.select != "map":
            return
        lines = self.lines.get(mutant.module, {})
        wanted: set[int] = set()
        files: list[str] = []
        if mutant.level == "function":
            wanted = set(range(mutant.line, max(mutant.line, mutant.end_line) + 1))
        elif mutant.level == "module" and len(mutant.path) >= 1 and mutant.path[0][0] == "body":
            index = mutant.path[0][1] or 0
            wanted = name_readers(mutant.module).get(index, set())
            # and, whole, the test files naming the name it binds: its readers in other modules
            files = self.naming_names(bound_names(mutant.module).get(index, set()))
        tests = {test for line in wanted for test in lines.get(line, ()) if test.split("::")[0] not in files}
        mutant.tests = sorted(tests, key=lambda t: (self.durations.get(t, 0.0), t)) + files

    def part(self, mutant: Mutant, stage: str) -> list[str]:
        """The map's tests in two parts: those in the module's own test files first (few files
        to collect: most mutants die there), then the others."""
        own = {str(Path(p).relative_to(REPO)) for p in self.own_tests(mutant.module)}
        mine = [t for t in mutant.tests if t.split("::")[0] in own]
        if stage == "map":
            return mine or mutant.tests
        return [t for t in mutant.tests if t not in mine] if mine else []

    def first_stage(self, mutant: Mutant) -> str:
        return "map" if mutant.tests else self.stages(mutant.module)[0]

    def next_stage(self, mutant: Mutant, stage: str) -> str | None:
        # A mutant the map's tests let live still meets the fallback's files: the map sees only
        # what runs in the test's process, not a `python -m spurinv` child.
        if stage == "map" and self.part(mutant, "map2"):
            return "map2"
        stages = self.stages(mutant.module)
        if stage in ("map", "map2"):
            return stages[0]
        index = stages.index(stage) + 1
        return stages[index] if index < len(stages) else None

    def limit(self, mutant: Mutant, stage: str) -> float:
        if self.args.timeout:
            return float(self.args.timeout)
        if stage in ("map", "map2"):
            return max(60.0, 3 * sum(self.cost(t) for t in self.part(mutant, stage)) + 10)
        return self.timeouts[(mutant.module, stage)]

    # the coverage map -----------------------------------------------------------------------
    def trace(self, files: list[str]) -> tuple[dict, float]:
        """Run ``files`` once, unmutated but instrumented; its record and the seconds it took."""
        slot = self.slots[0]
        out = slot.root / "map.json"
        started = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 97
            try:
                os.setpgid(0, 0)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                fd = os.open(slot.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.chdir(slot.root)
                args = [*files, "-q", "--no-header", "-p", "no:cacheprovider", "-m", MARKERS, "--rootdir", str(REPO)]
                args += ["-c", str(REPO / "pyproject.toml")]
                code = _child(slot.root, args, trace_to=out, modules=list(DEFAULT_MODULES))
            finally:
                os._exit(code)
        slot.pid, slot.pidfd, slot.started = pid, os.pidfd_open(pid), started
        verdict, seconds = self.reap(slot, self.args.baseline_timeout * 4)
        if verdict not in ("passed", "failed") or not out.exists() or not json.loads(out.read_text())["durations"]:
            tail = "\n".join(slot.log.read_text(errors="replace").splitlines()[-25:])
            raise SystemExit(f"mutate: building the coverage map failed ({verdict}):\n{tail}")
        for module in DEFAULT_MODULES:  # the map's child instrumented them in place
            shutil.copyfile(REPO / module, slot.root / module)
        return json.loads(out.read_text()), seconds

    def build_map(self) -> None:
        """Run the test files that name a mutated module, instrumented, those not cached yet
        (a test file's map is kept until it, the package or a test helper changes), and load it."""
        pool = list(dict.fromkeys(p for module in self.modules for p in self.naming(module)))
        base = tree_hash([REPO / "spurinv", REPO / "tests"])
        # keyed by the files as they are now, before the run: a file edited meanwhile is mapped again
        entries = {p: map_entry(base, p) for p in pool}
        missing = [p for p in pool if not entries[p].exists()]
        if missing:
            print(f"map: running {len(missing)} of {len(pool)} test files once, instrumented …", flush=True)
            data, seconds = self.trace(missing)
            if data["failed"]:
                print(f"map: {len(data['failed'])} test(s) fail on the unmutated code, left out: {data['failed'][:5]}")
            for old in CACHE.glob("*"):
                if old.is_dir() and old.name != base:
                    shutil.rmtree(old)
            (CACHE / base).mkdir(parents=True, exist_ok=True)
            for test_file in missing:
                prefix = str(Path(test_file).resolve().relative_to(REPO)) + "::"
                mine = {t for t in data["durations"] if t.startswith(prefix)}
                part = {
                    "lines": {
                        m: {n: [t for t in ts if t in mine] for n, ts in lines.items()} for m, lines in data["lines"].items()
                    },
                    "durations": {t: data["durations"][t] for t in mine},
                    "failed": [t for t in data["failed"] if t.startswith(prefix)],
                }
                entry = entries[test_file]
                entry.with_suffix(".tmp").write_text(json.dumps(part))
                entry.with_suffix(".tmp").replace(entry)
            print(f"map: {len(data['durations'])} tests in {seconds:.0f} s")
        self.mapped = set(pool)
        for test_file in pool:
            data = json.loads(entries[test_file].read_text())
            failed = set(data["failed"])
            self.failed |= failed
            self.durations.update({t: d for t, d in data["durations"].items() if t not in failed})
            for module, lines in data["lines"].items():
                into = self.lines.setdefault(module, {})
                for line, tests in lines.items():
                    into.setdefault(int(line), set()).update(t for t in tests if t not in failed)

    # processes ---------------------------------------------------------------------------
    def spawn(self, slot: Slot, module: str, stage: str, tests: list[str] | None = None) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        args = self.pytest_args(module, stage, tests)
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 97
            try:
                os.setpgid(0, 0)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                fd = os.open(slot.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.chdir(slot.root)
                code = _child(slot.root, args)
            finally:
                os._exit(code)
        slot.pid = pid
        slot.pidfd = os.pidfd_open(pid)
        slot.started = time.monotonic()
        slot.stage = stage

    def reap(self, slot: Slot, timeout: float) -> tuple[str, float]:
        """Wait for the slot's child (kill its process group past ``timeout``); return its verdict."""
        elapsed = time.monotonic() - slot.started
        ready, _, _ = select.select([slot.pidfd], [], [], max(0.0, timeout - elapsed))
        if not ready:
            self.kill(slot)
            return "timeout", time.monotonic() - slot.started
        _, status = os.waitpid(slot.pid, 0)
        self.close(slot)
        code = os.waitstatus_to_exitcode(status)
        # a test process the mutant killed (a signal no longer caught, a crash) did not pass either
        verdicts = {0: "passed", 1: "failed", 2: "failed", 3: "failed"}
        verdict = "failed" if code < 0 else verdicts.get(code, f"error (exit {code})")
        return verdict, time.monotonic() - slot.started

    def kill(self, slot: Slot) -> None:
        if slot.pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(slot.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(slot.pid, 0)
        self.close(slot)

    def close(self, slot: Slot) -> None:
        if slot.pidfd >= 0:
            os.close(slot.pidfd)
        slot.pid, slot.pidfd = 0, -1

    def stop_all(self) -> None:
        for slot in self.slots:
            self.kill(slot)

    # the baseline -------------------------------------------------------------------------
    def baseline(self, mutants: list[Mutant]) -> None:
        """The unmutated (but unparsed) modules must pass every fallback stage a mutant will run;
        their times set those stages' timeouts. (The map's tests passed when it was built.)"""
        slot = self.slots[0]
        for module in self.modules:
            (slot.root / module).write_text(unparsed(module))
        needed = {m.module for m in mutants}  # a map survivor goes on to the fallback's stages too
        for module in self.modules:
            if module not in needed:
                continue
            for stage in self.stages(module):
                key = (module, stage)
                files = self.stage_files(module, stage)
                if files is not None and self.mapped.issuperset(files):
                    # every file of the stage ran in the map (passing, but for the tests left out)
                    seconds = sum(d for t, d in self.durations.items() if str(REPO / t.split("::")[0]) in files)
                    self.timeouts[key] = self.args.timeout or max(60.0, 3 * seconds + 15)
                    print(
                        f"baseline  {module:<32} {stage:<4} tests took {seconds:5.1f} s in the map "
                        f"(timeout {self.timeouts[key]:.0f} s)"
                    )
                    continue
                self.spawn(slot, module, stage)
                verdict, seconds = self.reap(slot, self.args.baseline_timeout)
                if verdict != "passed":
                    tail = "\n".join(slot.log.read_text(errors="replace").splitlines()[-25:])
                    raise SystemExit(f"mutate: the unmutated suite does not pass ({module}, {stage} tests: {verdict}):\n{tail}")
                self.timeouts[key] = self.args.timeout or max(30.0, 3 * seconds + 15)
                print(f"baseline  {module:<32} {stage:<4} tests pass in {seconds:5.1f} s (timeout {self.timeouts[key]:.0f} s)")
        for module in self.modules:
            shutil.copyfile(REPO / module, slot.root / module)

    # the run ------------------------------------------------------------------------------
    def run(self, mutants: list[Mutant]) -> None:
        queue = list(mutants)
        done = 0
        while queue or any(slot.pid for slot in self.slots):
            for slot in self.slots:
                if not slot.pid and queue:
                    mutant = queue.pop(0)
                    (slot.root / mutant.module).write_text(apply(mutant))
                    slot.mutant = mutant
                    first = self.first_stage(mutant)
                    self.spawn(slot, mutant.module, first, self.part(mutant, first))
            busy = [slot for slot in self.slots if slot.pid]
            ready, _, _ = select.select([slot.pidfd for slot in busy], [], [], 1.0)
            for slot in busy:
                timeout = self.limit(slot.mutant, slot.stage)  # type: ignore[arg-type]
                if slot.pidfd not in ready and time.monotonic() - slot.started < timeout:
                    continue
                mutant = slot.mutant
                assert mutant is not None
                verdict, seconds = self.reap(slot, timeout)
                mutant.seconds += seconds
                following = self.next_stage(mutant, slot.stage)
                if verdict == "passed" and following is not None:
                    self.spawn(slot, mutant.module, following, self.part(mutant, following))
                    continue
                if verdict == "failed":
                    mutant.result = "killed-map" if slot.stage == "map2" else f"killed-{slot.stage}"
                elif verdict == "passed":
                    mutant.result = "survived"
                elif verdict == "timeout":
                    mutant.result = "timeout"
                else:
                    mutant.result = "error"
                    mutant.detail = f"{verdict}: " + " | ".join(slot.log.read_text(errors="replace").splitlines()[-3:])
                shutil.copyfile(REPO / mutant.module, slot.root / mutant.module)
                slot.mutant = None
                done += 1
                if not self.args.quiet:
                    chosen = f"{len(mutant.tests)} tests" if mutant.tests else "fallback"
                    head = f"[{done:>4}/{len(mutants)}] {mutant.result:<12} {mutant.seconds:5.1f} s  {chosen:>9}"
                    print(f"{head}  {mutant.describe()}", flush=True)


HITS = "__mutate_hits__"  # a builtin set while the map is built: the ids of the statements run


def _header_end(stmt: ast.stmt) -> int:
    """The last line of a statement's own code: a compound statement's header, not its body."""
    if isinstance(stmt, (ast.If, ast.While)):
        return stmt.test.end_lineno or stmt.lineno
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return stmt.iter.end_lineno or stmt.lineno
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return stmt.items[-1].context_expr.end_lineno or stmt.lineno
    if isinstance(stmt, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.lineno
    if isinstance(stmt, ast.Match):
        return stmt.subject.end_lineno or stmt.lineno
    return stmt.end_lineno or stmt.lineno


def instrument(source: str, name: str, first: int) -> tuple[str, dict[int, tuple[int, int]]]:
    """``source`` with ``__mutate_hits__.add(ID)`` before every statement inside a function (a C
    call: the suite runs at nearly its own speed, unlike under a line tracer), and each ID's
    original lines. IDs start at ``first``."""
    tree = ast.parse(source, name)
    spans: dict[int, tuple[int, int]] = {}

    def mark(stmt: ast.stmt) -> ast.stmt:
        ident = first + len(spans)
        spans[ident] = (stmt.lineno, _header_end(stmt))
        call = ast.Call(ast.Attribute(ast.Name(HITS, ast.Load()), "add", ast.Load()), [ast.Constant(ident)], [])
        return ast.Expr(call)

    def walk(node: ast.AST, inside: bool) -> None:
        here = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field_name in ("body", "orelse", "finalbody"):
            body = getattr(node, field_name, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            new: list[ast.stmt] = []
            for index, stmt in enumerate(body):
                walk(stmt, here)
                if here and not (field_name == "body" and _is_docstring(stmt, index)):
                    new.append(mark(stmt))
                new.append(stmt)
            setattr(node, field_name, new)
        for handler in getattr(node, "handlers", None) or []:
            walk(handler, here)
        for case in getattr(node, "cases", None) or []:
            walk(case, here)

    walk(tree, False)
    # the set the map's pytest put in builtins; a fresh one in a process a test starts
    shared = ast.parse(f"{HITS} = __import__('builtins').__dict__.setdefault({HITS!r}, set())").body
    future = [i + 1 for i, stmt in enumerate(tree.body) if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"]
    at = future[-1] if future else 0
    tree.body[at:at] = shared
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), spans


class _Tracer:
    """A pytest plugin that records, per test, the lines of the instrumented modules it runs."""

    def __init__(self, spans: dict[int, tuple[str, int, int]], modules: list[str]) -> None:
        import builtins

        self.spans = spans
        self.hits: set[int] = set()
        setattr(builtins, HITS, self.hits)
        self.lines: dict[str, dict[int, list[str]]] = {m: {} for m in modules}
        self.durations: dict[str, float] = {}
        self.failed: list[str] = []

    def _id(self, nodeid: str) -> str:
        return nodeid.split("[", 1)[0]  # a parametrized test runs as one: its ids can hold any text

    def protocol(self, item):  # type: ignore[no-untyped-def]
        self.hits.clear()
        started = time.monotonic()
        result = yield
        test = self._id(item.nodeid)
        self.durations[test] = self.durations.get(test, 0.0) + time.monotonic() - started
        for ident in list(self.hits):
            module, low, high = self.spans[ident]
            for number in range(low, high + 1):
                tests = self.lines[module].setdefault(number, [])
                if test not in tests:
                    tests.append(test)
        return result

    def pytest_runtest_logreport(self, report):  # type: ignore[no-untyped-def]
        if report.failed and self._id(report.nodeid) not in self.failed:
            self.failed.append(self._id(report.nodeid))


def _child(root: Path, args: list[str], trace_to: Path | None = None, modules: list[str] | None = None) -> int:
    """In the forked child: put the mutated copy first, check it is the one imported, run pytest
    (with the modules instrumented when ``trace_to`` names the map's file)."""
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("SPURINV_HYPOTHESIS", "thorough")  # every property at full size (tests/effort.py)
    sys.path.insert(0, str(root))
    import spurinv

    if not Path(spurinv.__file__).resolve().is_relative_to(root.resolve()):
        print(f"mutate: spurinv was imported from {spurinv.__file__}, not from the mutated copy in {root}")
        return 98
    import pytest
    from hypothesis import HealthCheck, Phase
    from hypothesis import settings as hypothesis_settings

    # no shrinking: a failing example kills the mutant as it is (shrinking one that drives the
    # CLI through a fault server took minutes, past the time limit)
    hypothesis_settings.register_profile(
        "mutate",
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    hypothesis_settings.load_profile("mutate")
    os.environ["SPURINV_HYPOTHESIS_PROFILE"] = "mutate"  # tests/conftest.py loads it again, not its own
    if trace_to is None:
        return int(pytest.main(args))
    spans: dict[int, tuple[str, int, int]] = {}
    for module in modules or []:
        source, found = instrument((REPO / module).read_text(), module, len(spans))
        (root / module).write_text(source)
        spans.update({ident: (module, low, high) for ident, (low, high) in found.items()})
    tracer = _Tracer(spans, modules or [])

    class Plugin:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
            return (yield from tracer.protocol(item))

        def pytest_runtest_logreport(self, report):  # type: ignore[no-untyped-def]
            tracer.pytest_runtest_logreport(report)

    code = int(pytest.main(args, plugins=[Plugin()]))
    trace_to.write_text(json.dumps({"lines": tracer.lines, "durations": tracer.durations, "failed": tracer.failed}))
    return code


# ---------------------------------------------------------------------------------- reporting
def report(modules: list[str], mutants: list[Mutant], equivalents: dict[str, str], seconds: float, jobs: int) -> bool:
    """Print the score per module and the survivors; return True when every module reached --fail-under."""
    print()
    header = (
        f"{'module':<32} {'mutants':>7} {'map':>5} {'own':>5} {'rest':>5} {'t/o':>4} {'surv':>5} {'equiv':>5} "
        f"{'error':>5} {'score':>7} {'seconds':>8}"
    )
    print(header)
    print("-" * len(header))
    scores = {}
    for module in modules:
        mine = [m for m in mutants if m.module == module]
        if not mine:
            continue
        counts = Counter(m.result for m in mine)
        equivalent = sum(1 for m in mine if m.result == "survived" and m.key in equivalents)
        survived = counts["survived"] - equivalent
        killed = counts["killed-map"] + counts["killed-own"] + counts["killed-rest"] + counts["timeout"]
        judged = killed + survived
        score = 100.0 * killed / judged if judged else 100.0
        scores[module] = score
        print(
            f"{module:<32} {len(mine):>7} {counts['killed-map']:>5} {counts['killed-own']:>5} {counts['killed-rest']:>5} "
            f"{counts['timeout']:>4} {survived:>5} {equivalent:>5} {counts['error']:>5} {score:>6.1f}% "
            f"{sum(m.seconds for m in mine):>8.0f}"
        )
    print(f"\n{len(mutants)} mutants in {seconds:.0f} s with {jobs} worker(s)")
    print("map/own/rest: killed by the tests the coverage map chose / the fallback's files; t/o: killed by timeout")
    print("seconds: the test runs of the module's mutants, summed")
    timeouts = [m for m in mutants if m.result == "timeout"]
    if timeouts:
        print("\nkilled by timeout (a loop that never ends, or a machine too loaded: look at each):")
        for mutant in timeouts:
            print(f"  {mutant.describe()}")
    survivors = [m for m in mutants if m.result == "survived" and m.key not in equivalents]
    if survivors:
        print("\nsurviving mutants (no fast test fails; add a behaviour test, or record it in docs/mutation.md if equivalent):")
        for mutant in survivors:
            chosen = f"{len(mutant.tests)} tests from the map" if mutant.tests else "fallback: the module's test files"
            print(f"  {mutant.describe()}\n      key: {mutant.key}\n      ran: {chosen}")
    errors = [m for m in mutants if m.result == "error"]
    if errors:
        print("\nmutants whose test run failed to start (a problem of this script, not of the tests):")
        for mutant in errors:
            print(f"  {mutant.describe()}\n      {mutant.detail}")
    stale = [m for m in mutants if m.key in equivalents and m.result != "survived"]
    if stale:
        print("\nlisted as equivalent in docs/mutation.md but killed now (remove the entry):")
        for mutant in stale:
            print(f"  {mutant.key}")
    return not errors


def resolve(names: list[str]) -> list[str]:
    """``policy``, ``attribute`` or a path → a repository-relative module path."""
    modules = []
    for name in names:
        dotted = name.replace(".", "/")
        candidates = (
            [name, f"spurinv/{name}"] if name.endswith(".py")
            else [f"spurinv/{dotted}.py", *sorted(str(p.relative_to(REPO)) for p in (REPO / "spurinv").rglob(f"{dotted}.py"))]
        )  # fmt: skip
        found = next((c for c in candidates if (REPO / c).is_file()), None)
        if found is None:
            raise SystemExit(f"mutate: --module {name}: no such module (tried {', '.join(candidates)})")
        modules.append(found)
    return modules


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/mutate",
        description="Mutation testing of the decision core, the parsers and the controller writers against the fast tests.",
    )
    parser.add_argument(
        "--module",
        action="append",
        help="module to mutate (policy, ledger, attribute … or a path; default: the core and the writers); repeatable",
    )
    parser.add_argument("--sample", type=int, default=0, help="test a seeded random sample of N mutants (default: all)")
    parser.add_argument("--seed", type=int, default=16, help="seed of the sample (default 16)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=0,
        help="seconds per mutant's test run, past which it counts as killed by timeout "
        "(default: 3 x its tests' time in the map + 10 s, at least 60 s; fallback stages: 3 x the baseline + 15 s)",
    )
    parser.add_argument(
        "--select",
        choices=("map", "files"),
        default="map",
        help="tests per mutant: those the coverage map says execute its lines (default), or the module's test files",
    )
    parser.add_argument("--baseline-timeout", type=float, default=600, help=argparse.SUPPRESS)
    parser.add_argument(
        "--rest",
        choices=("related", "all", "none"),
        default="related",
        help="after the module's own tests: the related in-process tests (default), the whole fast suite, or nothing",
    )
    parser.add_argument(
        "--match", action="append", default=[], help="only mutants whose key contains this text (repeatable: any of them)"
    )
    parser.add_argument("--list", action="store_true", help="list the (sampled) mutants and their keys, run nothing")
    parser.add_argument("--quiet", action="store_true", help="no line per mutant")
    parser.add_argument("--fail-under", type=float, default=0, help="exit 1 if a module scores below this percentage")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.sample < 0:
        parser.error("--jobs must be at least 1 and --sample at least 0")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    modules = resolve(args.module or list(DEFAULT_MODULES))
    mutants = [mutant for module in modules for mutant in find_mutants(module)]
    mutants = [mutant for mutant in mutants if not args.match or any(text in mutant.key for text in args.match)]
    total = len(mutants)
    if args.sample and args.sample < total:
        chosen = sorted(random.Random(args.seed).sample(range(total), args.sample))  # noqa: S311 (a reproducible sample)
        mutants = [mutants[index] for index in chosen]
    sampled = f" (seed {args.seed})" if args.sample else ""
    tests = "the coverage map, else own + " if args.select == "map" else "own + "
    print(f"{len(mutants)} of {total} mutants of {', '.join(modules)}{sampled}; tests: {tests}{args.rest}")
    if args.list:
        for mutant in mutants:
            print(f"{mutant.describe()}\n    key: {mutant.key}")
        return 0
    equivalents = load_equivalents(EQUIVALENTS)
    # heavy imports once, before forking: every child then starts with them loaded
    import hypothesis  # noqa: F401
    import pydantic  # noqa: F401
    import pytest  # noqa: F401

    started = time.monotonic()
    interrupted = False

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    with tempfile.TemporaryDirectory(prefix="spurinv-mutate-") as temp:
        # a test runs the copy as another user (nobody); mkdtemp's 0700 would lock it out
        os.chmod(temp, 0o755)  # noqa: S103 (read and enter only: the copy holds our own source)
        runner = Runner(args, modules, Path(temp))
        try:
            if args.select == "map":
                runner.build_map()
                for mutant in mutants:
                    runner.select(mutant)
            runner.baseline(mutants)
            runner.run(mutants)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            runner.stop_all()
    if interrupted:
        done = [m for m in mutants if m.result != "pending"]
        print(
            f"\nmutate: interrupted after {len(done)} of {len(mutants)} mutants; the working tree was not touched",
            file=sys.stderr,
        )
        report(modules, done, equivalents, time.monotonic() - started, args.jobs)
        return 130
    ok = report(modules, mutants, equivalents, time.monotonic() - started, args.jobs)
    if args.fail_under:
        ok = ok and all(_score(m, mutants, equivalents) >= args.fail_under for m in modules)
    return 0 if ok else 1


def _score(module: str, mutants: list[Mutant], equivalents: dict[str, str]) -> float:
    mine = [m for m in mutants if m.module == module and not (m.result == "survived" and m.key in equivalents)]
    killed = sum(1 for m in mine if m.result in ("killed-map", "killed-own", "killed-rest", "timeout"))
    judged = sum(1 for m in mine if m.result in ("killed-map", "killed-own", "killed-rest", "timeout", "survived"))
    return 100.0 * killed / judged if judged else 100.0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
