"""``scripts/mutate``'s choice of tests for a mutant (docs/mutation.md)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate.py"


@pytest.fixture(scope="module")
def mutate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spurinv_mutate_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _runner(mutate: ModuleType, tmp_path: Path) -> Any:
    """A runner with an empty coverage map and no worker slots (nothing is copied or run)."""
    args = argparse.Namespace(select="map", jobs=0, rest="related", timeout=0)
    return mutate.Runner(args, ["spurinv/controller/ownership.py"], tmp_path)


def test_a_module_constant_read_in_another_module_runs_the_test_files_naming_it(mutate, tmp_path):
    """``ownership.MAX_ARG_STRLEN`` is read only in ``scontrol`` and ``transport``: the map of
    ownership's own lines selects nothing for it, and ``tests/test_scontrol.py``, which pins it
    (131072 bytes refused, 131071 run), names the constant but not the module. It is chosen whole."""
    mutants = mutate.find_mutants("spurinv/controller/ownership.py")
    constant = next(m for m in mutants if m.key == "ownership.py::<module>: 131072 → 131073")
    runner = _runner(mutate, tmp_path)

    runner.select(constant)

    assert "tests/test_scontrol.py" in constant.tests
    assert all("::" not in test for test in constant.tests)  # the whole files, the map being empty here
    assert runner.first_stage(constant) == "map"


def test_the_files_naming_a_constant_match_it_as_a_whole_word_only(mutate):
    runner_class = mutate.Runner

    assert "tests/test_scontrol.py" in runner_class.naming_names({"MAX_ARG_STRLEN"})
    prefix = "MAX_ARG_" + "STRLE"  # spelled apart so that this file does not name it either
    assert runner_class.naming_names({prefix}) == []  # a prefix of the name is not the name
    assert runner_class.naming_names(set()) == []


def test_a_mutant_inside_a_function_gets_no_whole_files(mutate, tmp_path):
    """Only a module-level name is looked up in the test files' text; a mutant in a function keeps
    to the tests the map says run its lines (none, with an empty map: the fallback's files)."""
    mutants = mutate.find_mutants("spurinv/controller/ownership.py")
    inside = next(m for m in mutants if m.level == "function")
    runner = _runner(mutate, tmp_path)

    runner.select(inside)

    assert inside.tests == []


def test_every_default_module_has_its_own_tests_named_after_its_file(mutate, tmp_path):
    """The fallback's first stage is ``tests/test_<module>*.py``: a test file named after its
    subject rather than the module's file (the REST client's were ``test_controller.py``) leaves
    the module's mutants with only the slower related files."""
    runner = _runner(mutate, tmp_path)
    tests = Path(mutate.REPO) / "tests"

    own = {module: [Path(p).name for p in runner.own_tests(module)] for module in mutate.DEFAULT_MODULES}

    assert [module for module, files in own.items() if not files] == []
    assert own["spurinv/controller/rest.py"] == ["test_rest.py"]
    assert all(Path(p).parent == tests for module in own for p in runner.own_tests(module))


def test_the_rest_clients_related_files_are_those_naming_the_controller(mutate):
    """The tests that reach the REST client through the CLI and the fault server call it the
    controller, not "rest": they stay in its mutants' related files."""
    related = [str(Path(p).relative_to(mutate.REPO)) for p in mutate.Runner.naming("spurinv/controller/rest.py")]

    assert "tests/test_boot.py" in related  # the fault server, never the word "rest"
    assert "tests/test_rest.py" in related
    assert "tests/test_cli.py" in related
