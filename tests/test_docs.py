"""The man page and the README cannot drift from the program: the man page renders
without warnings, and every command, option, configuration key (with its default) and exit
status of the program appears in both; the README's tables equal the program's; the README's
test command is what CI runs; the committed JSON Schemas are current and the outputs match them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
import typer

from spurinv import exitcode
from spurinv.cli import app as cli_module
from spurinv.config import settings as config

REPO = Path(__file__).resolve().parent.parent
MAN = REPO / "man" / "spurinv.8"
README = (REPO / "README.md").read_text()


def command_tree() -> dict[str, set[str]]:
    """``{"refresh": {"--root", ...}, "config init": {"PATH", "--force", ...}, "": {...}}`` from
    the click command typer builds; "" is ``spurinv`` itself. Arguments appear by metavar name."""
    tree: dict[str, set[str]] = {}

    def walk(command, path: str) -> None:  # typer's (vendored) click Command / Group
        names = {"--help"}
        for param in command.params:
            if param.param_type_name == "option":
                names.update(param.opts + param.secondary_opts)
            else:
                names.add((param.name or "").upper())
        tree[path] = names
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(cli_module.app), "")
    return tree


TREE = command_tree()
COMMANDS = sorted(path for path in TREE if path and path != "config")  # `config` only groups init/show
OPTIONS = sorted(set().union(*TREE.values()))
CONFIG_KEYS = config.keys()


def word(text: str, token: str) -> bool:
    """``token`` occurs in ``text`` as a whole word (``--node`` is not ``--node-x``)."""
    return re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text) is not None


def default_text(key: str) -> str:
    """The default of a config key as TOML writes it (``""``, ``5.0``, ``[]``, ``true``)."""
    section, name = key.split(".")
    value = getattr(getattr(config.Config(), section), name)
    return tomli_w.dumps({"k": list(value) if isinstance(value, tuple) else value}).strip().removeprefix("k = ")


def plain(text: str) -> str:
    return " ".join(text.replace("`", "").split())


@pytest.fixture(scope="module")
def man_text() -> str:
    """The man page as a reader sees it (ASCII, no overstrike), whitespace collapsed."""
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (scripts/test-setup installs it)")
    run = subprocess.run(
        ["groff", "-man", "-Tascii", "-P-cbou", "-rLL=100n", str(MAN)], capture_output=True, text=True, check=True
    )
    return " ".join(run.stdout.split())


# --- the man page ------------------------------------------------------------------------------


def test_man_page_renders_without_warnings():
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (scripts/test-setup installs it)")
    run = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(MAN)], capture_output=True, text=True, check=False)
    assert (0, "") == (run.returncode, run.stderr)


def test_man_renders_through_man_too():
    if shutil.which("man") is None:
        pytest.skip("man-db is not installed (scripts/test-setup installs it)")
    run = subprocess.run(
        ["man", "--warnings", "-l", str(MAN)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "MANWIDTH": "80", "MANPAGER": "cat", "LANG": "C.UTF-8"},
    )
    assert (0, "") == (run.returncode, run.stderr)
    assert "EXIT STATUS" in run.stdout


def test_man_page_has_every_section():
    sections = re.findall(r"^\.SH (.+)$", MAN.read_text(), re.M)
    expected = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "CONFIGURATION", "FILES", "ENVIRONMENT"]
    assert [*expected, "EXIT STATUS", "EXAMPLES", "SEE ALSO"] == sections


def test_man_synopsis_lists_exactly_each_commands_options():
    source = MAN.read_text()
    synopsis = source[source.index(".SH SYNOPSIS") : source.index(".SH DESCRIPTION")].replace("\\-", "-")
    chunks = [chunk for chunk in synopsis.split(".br") if chunk.strip()]
    found = {}
    for chunk in chunks:
        name = re.search(r"^\.B spurinv ?([a-z ]*)$", chunk, re.M)
        assert name, chunk
        options = set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", chunk))
        found[name.group(1).strip()] = options | {"--help"} | ({"PATH"} if "PATH" in chunk else set())
    assert {path: names for path, names in TREE.items() if path != "config"} == found


@pytest.mark.parametrize("command", COMMANDS)
def test_man_page_describes_every_command(man_text, command):
    assert word(man_text, command)


@pytest.mark.parametrize("option", OPTIONS)
def test_man_page_describes_every_option(man_text, option):
    assert word(man_text, option)


@pytest.mark.parametrize("key", CONFIG_KEYS)
def test_man_page_describes_every_config_key_with_its_default(man_text, key):
    assert f"{key} = {default_text(key)}" in man_text


@pytest.mark.parametrize(("code", "name", "meaning"), exitcode.TABLE)
def test_man_page_has_the_whole_exit_status_table(man_text, code, name, meaning):
    assert f"{code} {name} {plain(meaning)}" in man_text


@pytest.mark.parametrize(
    "variable",
    [
        "SPURINV_CONFIG",
        "SPURINV_STATE",
        "STATE_DIRECTORY",
        "CREDENTIALS_DIRECTORY",
        "JOURNAL_STREAM",
        "NO_COLOR",
        "SPURINV_DEBUG",
    ],
)
def test_man_page_lists_every_environment_variable(variable):
    source = MAN.read_text()
    environment = source[source.index(".SH ENVIRONMENT") : source.index(".SH EXIT STATUS")]
    assert f".B {variable}\n" in environment
    if variable != "NO_COLOR":  # rich reads that one
        assert variable in " ".join(path.read_text() for path in (REPO / "spurinv").rglob("*.py"))


# --- the README --------------------------------------------------------------------------------


def readme_table(heading: str) -> list[list[str]]:
    section = README[README.index(f"## {heading}\n") :]
    section = section[: section.find("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_mentions_every_command(command):
    assert word(README, f"spurinv {command}") or word(README, f"`{command}`"), command


def test_readme_options_table_says_which_commands_take_each_option():
    documented: dict[str, set[str]] = {}
    for option_cell, commands_cell, _meaning in readme_table("Options"):
        commands = {"" if name == "spurinv" else name for name in commands_cell.split(", ")}
        if commands == {"every command"}:
            commands = set(TREE)
        for option in re.findall(r"`([^` ]+)(?: [A-Z]+)?`", option_cell):
            documented[option] = commands
    actual: dict[str, set[str]] = {}
    for path, names in TREE.items():
        for name in names:
            actual.setdefault(name, set()).add(path)
    assert actual == documented


def test_readme_config_table_has_every_key_with_its_default():
    rows = {key.strip("`"): default.strip("`") for key, default, _meaning in readme_table("Configuration")}
    assert {key: default_text(key) for key in CONFIG_KEYS} == rows


def test_readme_exit_table_equals_the_program_table():
    rows = [(int(code), name, plain(meaning)) for code, name, meaning in readme_table("Exit status")]
    assert [(code, name, plain(meaning)) for code, name, meaning in exitcode.TABLE] == rows


def code_lines(path: Path) -> list[str]:
    """A shell script's lines without comments and blank lines."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.strip().startswith("#")]


def test_readme_second_quick_start_command_is_what_ci_runs():
    quick = README[README.index("## Quick start") : README.index("## How it works")]
    blocks = re.findall(r"```sh\n(.*?)```", quick, re.S)
    assert 2 == len(blocks)
    commands = [line for line in blocks[1].splitlines() if line.strip() and not line.startswith("#")]
    ci = code_lines(REPO / ".ci" / "run")
    assert commands
    # verbatim; `|| exit $?` only makes sh stop when the first command of the && list fails
    assert all(command in ci or f"{command} || exit $?" in ci for command in commands)


def test_ci_runs_each_thing_once_and_the_suite_whole():
    """one setup, one run of the suite (the whole of it, inside hermetic-check), one
    lint, one type check, one audit; hermetic-check's pytest selects nothing by itself."""
    ci = code_lines(REPO / ".ci" / "run")
    for step in ("scripts/test-setup", "scripts/hermetic-check", "ruff check", "mypy", "scripts/audit"):
        assert 1 == sum(line.count(step) for line in ci), step
    assert not [line for line in ci if "pytest" in line]
    runs = [line for line in code_lines(REPO / "scripts" / "hermetic-check") if "-m pytest" in line]
    assert 1 == len(runs)
    assert runs[0].split("-m pytest", 1)[1].split() == ["-p", "no:cacheprovider", "-n", "auto", '"$@"', "||", "status=$?"]


def test_readme_links_resolve():
    targets = set(re.findall(r"\]\((?!https?://)([^)#]+)\)", README))
    assert "docs/security.md" in targets
    assert [] == [target for target in targets if not (REPO / target).exists()]
    assert all((REPO / target).read_text().strip() for target in targets if (REPO / target).is_file())


# --- JSON Schemas ------------------------------------------------------------------------------


def test_committed_schemas_are_current():
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "schemas"), "--check"], capture_output=True, text=True, check=False
    )
    assert (0, "") == (run.returncode, run.stderr)


def test_outputs_validate_against_the_committed_schemas(cli, built, state_path, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")

    def check(name: str, document: dict) -> None:
        schema = json.loads((REPO / "schemas" / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator(schema).validate(document)

    root = built("mi300x-spx")
    check("discover", cli("discover", "--json", "--root", root).json())
    check("refresh", cli("refresh", "--json", "--confirm-interval", "0", "--root", root, "--state", state_path).json())
    check("status", cli("status", "--json", "--state", state_path).json())
    check("status", cli("status", "--json", "--state", tmp_path / "none.json").json())
    check("error", cli("refresh", "--json", "--root", tmp_path / "missing", "--state", state_path).json())
    check("check", cli("check", "--json", "--root", tmp_path, "--state", state_path).json())


# --- citations a reader can open ----------------------------------------------------------------


def python_files(top: Path) -> list[Path]:
    """Every ``*.py`` below ``top``, not looking inside the sysfs fixture trees (19,000 entries and
    no Python: walking them took 2 s of every collection)."""
    found = []
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d not in ("fixtures", "__pycache__") and not d.startswith("."))
        found += [Path(directory, name) for name in sorted(files) if name.endswith(".py")]
    return found


CITED_FILES = [*python_files(REPO / "spurinv"), *python_files(REPO / "tests"), *(REPO / "bench").glob("*.py")]


@pytest.mark.parametrize("path", CITED_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_comments_cite_only_what_the_repository_or_the_web_holds(path):
    """No "NOTES.md §7" or "spur.md §1.2" from a reference pack outside the repository."""
    text = path.read_text(encoding="utf-8")
    if path.name == "test_docs.py":
        return
    outside = re.findall(r"(?<![\w/])(?:slurm/)?(?:NOTES|spur|peers|style)(?:\.md)? ?§", text)
    outside += re.findall(r"(?<![\w/.])(?:NOTES|peers|style)\.md", text)
    assert not outside, outside
    for cited in set(re.findall(r"\bdocs/[\w.-]+\.md", text)):
        assert (REPO / cited).is_file(), cited


def test_the_unit_and_the_readme_say_the_same_about_observe_mode():
    """the unit said to remove LoadCredential= in observe mode, the README to keep an
    empty token file. Both now say: keep the empty token file (a missing one fails the start)."""
    unit = (REPO / "systemd" / "spurinv-refresh.service").read_text()
    comments = plain(" ".join(line.lstrip("# ") for line in unit.splitlines() if line.startswith("#")))
    readme = plain(README)
    for text in (comments, readme):
        assert "keep the empty token file" in text
        assert "a missing source file fails the start" in text
        assert "Remove this line in observe mode" not in text
    assert "LoadCredential=spurinv-token:/etc/spurinv/token" in unit
    assert "touch /etc/spurinv/token && chmod 0600 /etc/spurinv/token" in README


def test_the_readme_install_ends_with_spurinv_check_and_points_containers_to_cron():
    section = README[README.index("## Install on a node\n") :]
    block = section[section.index("```sh") : section.index("```\n", section.index("```sh") + 5)]
    assert block.rstrip().splitlines()[-1] == "spurinv check"
    after = section[section.index("```\n", section.index("```sh") + 5) :]
    assert "without systemd as PID 1" in after.split("\n\n")[1]
    assert "spurinv.cron" in after.split("\n\n")[1]
    assert "config show`, `spurinv refresh --dry-run`" not in README  # the old post-install check


def test_the_development_section_says_each_thing_once_and_how_long_the_suite_takes():
    section = README[README.index("## Development\n") :]
    assert plain(section).count("tests/test_docs.py") == 1
    assert "about 17 minutes" in section
    assert "refuses with 78 unless `--force`" in README  # config init over an existing file
