"""Configuration: defaults < file < flags, origins, commented default file, one-line errors."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest
from reliability.hostile import controller_config, write_private

from spurinv import exitcode
from spurinv.config import settings as config
from spurinv.config.settings import ControllerSection, read_token
from spurinv.errors import ConfigError, TokenError


def test_defaults_are_observe_mode():
    loaded = config.Config()

    assert loaded.observe
    assert loaded.node_name("gpu17.cluster.example") == "gpu17"


def test_file_then_flags_with_origins(tmp_path):
    path = write_private(tmp_path / "c.toml", '[controller]\nurl = "https://ctl:6820"\ntimeout = 3\n[node]\nname = "n1"\n')

    loaded, origins = config.load(str(path), True, {"controller.timeout": 9.0})

    assert ("https://ctl:6820", 9.0, "n1") == (loaded.controller.url, loaded.controller.timeout, loaded.node.name)
    assert origins["controller.url"] == str(path)
    assert origins["controller.timeout"] == "command line"
    assert origins["policy.confirm_interval"] == "default"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[controller]\nurl = 5\n", "controller.url"),
        ('[controller]\nurl = "ftp://x"\n', "controller.url"),
        ('[controller]\napi = "v42"\n', "controller.api"),
        ("[controller]\ntimeout = -1\n", "controller.timeout"),
        ("[controller]\nrun_deadline = 0\n", "controller.run_deadline"),
        ("[controller]\nrun_deadline = 3600\n", "controller.run_deadline"),  # beyond the unit's TimeoutStartSec
        ("[controller]\nbusy_recheck = 5\n", "controller.busy_recheck"),  # a cluster-sized query every tick
        ("[policy]\nbogus = 1\n", "policy.bogus"),
        ('[discovery]\nignore_pci = ["05:00.0"]\n', "discovery.ignore_pci"),
        ("[node\n", "line 1"),
        # requests sends URL user info as Basic auth, plain HTTP included
        ('[controller]\nurl = "http://u:p4ss@127.0.0.1:6820"\n', "controller.url"),
        ('[controller]\nurl = "http://127.0.0.1:99999"\n', "controller.url"),
        ('[controller]\nurl = "http://127.0.0.1:0"\n', "controller.url"),
        ('[controller]\ncredential = "."\n', "controller.credential"),
        ('[controller]\ncredential = ""\n', "controller.credential"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(tmp_path, text, words):
    path = write_private(tmp_path / "c.toml", text)

    with pytest.raises(ConfigError) as caught:
        config.load(str(path), True)

    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_url_with_a_path_is_a_config_error_naming_the_key(cli, tmp_path):
    config = write_private(tmp_path / "c.toml", '[controller]\nurl = "https://127.0.0.1:6820/slurm/v0.0.42"\n')
    ran = cli("config", "show", "--config", config)
    assert ran.code == exitcode.CONFIG
    assert "controller.url" in ran.err
    assert "without a path" in ran.err
    assert "controller.api" in ran.err
    flag = cli("config", "show", "--config", write_private(tmp_path / "d.toml", ""))
    assert flag.code == 0
    for ok in ("https://h:6820", "https://h:6820/", "http://127.0.0.1"):
        write_private(tmp_path / "e.toml", f'[controller]\nurl = "{ok}"\n')
        assert cli("config", "show", "--config", tmp_path / "e.toml").code == 0, ok


def test_missing_explicit_config_is_an_error_but_missing_default_is_not(tmp_path):
    with pytest.raises(ConfigError):
        config.load(str(tmp_path / "nope.toml"), True)
    loaded, _ = config.load(str(tmp_path / "nope.toml"), False)
    assert loaded.observe


def test_group_writable_config_is_refused(tmp_path):
    path = write_private(tmp_path / "c.toml", "", 0o664)

    with pytest.raises(ConfigError, match="group- or world-writable"):
        config.load(str(path), True)


def test_token_from_credentials_directory_first(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    write_private(creds / "spurinv-token", "SLURM_JWT=abc.def.ghi\n", 0o400)
    section = config.ControllerSection(auth="slurm-jwt", token_file=str(write_private(tmp_path / "t", "other\n")))

    assert "abc.def.ghi" == config.read_token(section, {"CREDENTIALS_DIRECTORY": str(creds)})
    assert "other" == config.read_token(section, {})


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_readable_token_file_is_refused(tmp_path, mode):
    section = config.ControllerSection(auth="bearer", token_file=str(write_private(tmp_path / "t", "x\n", mode)))

    with pytest.raises(TokenError, match="chmod go-rwx"):
        config.read_token(section, {})


def test_a_missing_token_is_said_before_the_confirm_wait_naming_the_key(cli, built, state_path, tmp_path):
    config = controller_config(tmp_path, "http://127.0.0.1:9", tmp_path / "no-token", "[policy]\nconfirm_interval = 30\n")
    started = time.monotonic()
    ran = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--config", config)
    took = time.monotonic() - started
    assert ran.code == exitcode.NOPERM
    assert took < 10, took  # not after the 30 s confirm wait
    assert "controller.token_file" in ran.err
    assert "mode 0600" in ran.err  # and the fix
    assert len(ran.err.strip().splitlines()) == 1


def test_config_init_never_overwrites_without_force(cli, tmp_path):
    path = tmp_path / "etc" / "config.toml"

    result = cli("config", "init", path)
    again = cli("config", "init", path)

    assert 0 == result.code
    text = path.read_text()
    assert text.count("# ") >= len(config.keys())
    assert {section: {} for section in config.SECTIONS} == tomllib.loads(text)  # a template (test_operator_output)
    assert exitcode.CONFIG == again.code


def _tree(top: Path) -> set[str]:
    return {str(path.relative_to(top)) for path in top.rglob("*")}


@pytest.fixture
def guarded_writes(monkeypatch, tmp_path, hermetic):
    """config init may create directories and write files only under the test's own directories:
    a run that wrote the host's /etc/spurinv fails here instead (scripts/hermetic-check overlays
    /etc as well)."""
    import os

    from spurinv.state import store

    def inside(path) -> bool:
        resolved = os.path.abspath(path)
        return any(resolved.startswith(f"{top}/") for top in (str(tmp_path), str(hermetic)))

    makedirs, write_atomic = os.makedirs, store.write_atomic

    def guarded_makedirs(path, *args, **kwargs):
        assert inside(path) or os.path.isdir(path), f"config init made a directory outside the test: {path}"
        return makedirs(path, *args, **kwargs)

    def guarded_write(path, *args, **kwargs):
        assert inside(path), f"config init wrote outside the test: {path}"
        return write_atomic(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", guarded_makedirs)
    monkeypatch.setattr(store, "write_atomic", guarded_write)


def test_config_init_names_a_path_with_control_characters_escaped(cli, tmp_path):
    """A path named by $SPURINV_CONFIG or an argument reaches the terminal as text, never as the
    escape sequences it may hold."""
    path = tmp_path / "a\x1b[2Jb\nc.toml"

    written = cli("config", "init", str(path))
    again = cli("config", "init", str(path))

    assert (0, exitcode.CONFIG) == (written.code, again.code)
    for result in (written, again):
        assert "\x1b" not in result.err, result.err
        assert "\\x1b[2Jb\\nc.toml" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1, result.err


def test_config_init_writes_where_spurinv_config_names_and_config_show_reads_it(
    cli, monkeypatch, tmp_path, hermetic, guarded_writes
):
    from spurinv.state import locations

    target = tmp_path / "site" / "spurinv.toml"
    monkeypatch.setenv("SPURINV_CONFIG", str(target))
    before = _tree(tmp_path)

    result = cli("config", "init")

    assert (0, f"wrote {target}\n") == (result.code, result.err)
    assert {"site", "site/spurinv.toml"} == _tree(tmp_path) - before  # nothing else
    assert not Path(locations.DEFAULT_CONFIG).exists()
    assert {section: {} for section in config.SECTIONS} == tomllib.loads(target.read_text())
    target.write_text(target.read_text().replace("#name = ", 'name = "n7"\n#name = ', 1))
    shown = cli("config", "show", "--json")
    assert 0 == shown.code, shown.err
    document = shown.json()
    assert (str(target), True) == (document["file"], document["file_exists"])
    assert ("n7", str(target)) == (document["values"]["node.name"], document["origins"]["node.name"])
    assert cli("config", "show").out.startswith(f"# read {target}\n")


@pytest.mark.parametrize("variable", ["unset", "empty"])
def test_config_init_without_spurinv_config_writes_the_default_file(
    cli, monkeypatch, tmp_path, hermetic, guarded_writes, variable
):
    from spurinv.state import locations

    if variable == "unset":
        monkeypatch.delenv("SPURINV_CONFIG")
    else:
        monkeypatch.setenv("SPURINV_CONFIG", "")
    default = Path(locations.DEFAULT_CONFIG)  # the hermetic fixture's private stand-in for /etc/spurinv/config.toml

    result = cli("config", "init")

    assert (0, f"wrote {default}\n") == (result.code, result.err)
    assert default.is_file()
    assert 0 == cli("config", "show").code


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o077])
def test_config_init_makes_directories_no_one_else_can_write_whatever_the_umask(cli, monkeypatch, tmp_path, umask):
    """A directory others can write lets them swap the config root's runs read (the loader checks
    only the file's mode); config init makes none, and leaves the caller's umask as it was."""
    import os

    target = tmp_path / "etc" / "spurinv" / "config.toml"
    monkeypatch.setenv("SPURINV_CONFIG", str(target))
    previous = os.umask(umask)
    try:
        result = cli("config", "init")
        after = os.umask(previous)
    finally:
        os.umask(previous)

    assert 0 == result.code, result.err
    assert umask == after
    for directory in (tmp_path / "etc", target.parent):
        mode = directory.stat().st_mode & 0o777
        assert 0 == mode & 0o022, f"{directory} {mode:o}"
        assert 0 == mode & umask, f"{directory} {mode:o}"  # a stricter umask still applies
    assert 0o640 == target.stat().st_mode & 0o777


def test_config_init_config_flag_wins_over_spurinv_config_and_path_with_it_is_refused(
    cli, monkeypatch, tmp_path, guarded_writes
):
    named = tmp_path / "env.toml"
    flag = tmp_path / "flag.toml"
    argument = tmp_path / "argument.toml"
    monkeypatch.setenv("SPURINV_CONFIG", str(named))

    assert 0 == cli("config", "init", "--config", flag).code
    both = cli("config", "init", argument, "--config", flag, "--force")  # two names for one file: which?

    assert exitcode.USAGE == both.code
    assert f"PATH {argument} and --config {flag}" in both.err
    assert (False, True, False) == (named.exists(), flag.is_file(), argument.exists())
    assert 0 == cli("config", "show", "--config", flag).code
    assert exitcode.CONFIG == cli("config", "show").code  # $SPURINV_CONFIG names a file not written


@pytest.mark.parametrize(("suffix", "what"), [("", "the state file"), (".lock", "the state file's lock")])
@pytest.mark.parametrize("named", ["SPURINV_CONFIG", "--config", "PATH"])
def test_config_init_never_replaces_the_state_file_or_its_lock(cli, monkeypatch, tmp_path, suffix, what, named):
    state = tmp_path / "st" / "state.json"
    state.parent.mkdir(mode=0o700)
    state.write_text('{"kept": true}\n')
    Path(f"{state}.lock").write_text("")
    monkeypatch.setenv("SPURINV_STATE", str(state))
    target = f"{state}{suffix}"
    args = {"SPURINV_CONFIG": [], "--config": ["--config", target], "PATH": [target]}[named]
    if named == "SPURINV_CONFIG":
        monkeypatch.setenv("SPURINV_CONFIG", target)

    result = cli("config", "init", *args, "--force")

    assert exitcode.CONFIG == result.code, result.err
    assert f"that is {what} {target}" in result.err
    assert ('{"kept": true}\n', "") == (state.read_text(), Path(f"{state}.lock").read_text())


def test_config_show_says_where_each_value_came_from(cli, env, tmp_path):
    write_private(tmp_path / "config.toml", '[node]\nname = "n7"\n')

    result = cli("config", "show", "--json")

    document = result.json()
    assert document["values"]["node.name"] == "n7"
    assert document["origins"]["node.name"].endswith("config.toml")
    assert document["origins"]["controller.url"] == "default"
    assert set(document["values"]) == set(config.keys())


def test_a_config_error_never_echoes_a_credential(tmp_path):
    for text in (
        '[controller]\nurl = "http://u:p4ssw0rd@127.0.0.1:6820"\n',
        '[controller]\nregister_command = ["a", ["--token", "p4ssw0rd"]]\n',
        '[controller]\nregister_command = "rereg --token p4ssw0rd"\n',
        '[controller]\nregister_command = ["rereg", "p4ssw0rd\\n"]\n',
    ):
        path = write_private(tmp_path / "c.toml", text)

        with pytest.raises(ConfigError) as caught:
            config.load(str(path), True)

        assert "p4ssw0rd" not in str(caught.value), text


def test_an_empty_slurm_jwt_line_is_an_empty_token_not_no_authentication(tmp_path: Path):
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=   \n")
    token.chmod(0o600)
    section = ControllerSection(url="http://127.0.0.1:1", auth="slurm-jwt", token_file=str(token))

    with pytest.raises(TokenError, match="empty"):
        read_token(section, {})


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('[controller]\ntimeout = "5"\n', 'controller.timeout: "5" is a string; expected a number > 0 and <= 120'),
        ('[controller]\nverify = "off"\n', 'controller.verify: "off" is a string; expected true or false'),
        ("[controller]\nverify = 0\n", "controller.verify: 0 is an integer; expected true or false"),
        ('[policy]\nbackoff_max = "60"\n', 'policy.backoff_max: "60" is a string; expected a whole number >= 1'),
        ('[state]\nlock_timeout = "1"\n', 'state.lock_timeout: "1" is a string; expected a number >= 0'),
        ('[controller]\ncredential = "../../etc/shadow"\n', 'controller.credential: "../../etc/shadow" is not valid'),
        ('[controller]\ncredential = "a/../b"\n', 'controller.credential: "a/../b" is not valid'),
        ('[controller]\ncredential = "/etc/shadow"\n', 'controller.credential: "/etc/shadow" is not valid'),
    ],
)
def test_a_config_value_of_the_wrong_type_is_a_config_error_not_coerced(cli, env, line, said):
    """``timeout = "5"`` was taken as 5.0 and ``verify = "off"`` as false (pydantic's lax mode);
    a credential name with ``..`` read a file outside ``$CREDENTIALS_DIRECTORY``."""
    path = env["SPURINV_CONFIG"]
    Path(path).write_text(line)

    result = cli("config", "show")

    assert result.code == 78
    assert result.err.splitlines() == [result.err.splitlines()[0]]
    assert result.err.startswith(f"spurinv: error: {path}: {said}"), result.err


def test_numbers_and_booleans_typed_as_toml_types_them_still_load(cli, env):
    Path(env["SPURINV_CONFIG"]).write_text(
        '[controller]\ntimeout = 5\nverify = false\ncredential = "spurinv.token"\n[policy]\nconfirm_interval = 0\n'
    )

    result = cli("config", "show", "--json")

    assert result.code == 0, result.err
    values = result.json()["values"]
    assert (values["controller.timeout"], values["controller.verify"], values["policy.confirm_interval"]) == (5.0, False, 0.0)


def _scontrol_config(env: dict[str, str], tmp_path: Path, extra: str = "") -> Path:
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "scontrol must not run" >&2\nexit 1\n')
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(f'{extra}[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n[policy]\nconfirm_interval = 0\n')
    config.chmod(0o600)
    return config


@pytest.mark.parametrize("name", ["ALL", "all", "All"])
def test_node_all_on_the_command_line_is_refused_up_front_with_64(cli, built, state_path, env, tmp_path, name):
    """``refresh --node ALL`` with ``transport = "scontrol"`` ran once with exit 0 (a first
    sighting needs no controller) and failed with 78 on the next run."""
    _scontrol_config(env, tmp_path)
    args = ("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--node", name)

    results = [cli(*args), cli(*args, "--json")]

    assert [result.code for result in results] == [64, 64]
    assert results[0].err == (
        f'spurinv: error: --node: node.name: "{name}" is not a node for controller.transport = "scontrol": '
        "scontrol reads ALL, in any case, as every node\n"
    )
    assert results[1].json()["error"]["code"] == "usage"
    assert not state_path.exists()
    assert not state_path.parent.exists() or list(state_path.parent.iterdir()) == []


def test_node_name_all_in_the_config_file_is_78_naming_the_file(cli, built, state_path, env, tmp_path):
    config = _scontrol_config(env, tmp_path, '[node]\nname = "all"\n')

    result = cli("refresh", "--root", built("mi300x-spx"), "--state", state_path)

    assert result.code == 78
    assert result.err.startswith(f'spurinv: error: {config}: node.name: "all" is not a node for controller.transport')
    assert len(result.err.splitlines()) == 1
    assert not state_path.exists()


def test_a_host_named_all_needs_node_name_with_scontrol_but_not_with_rest():
    from spurinv.config.settings import Config
    from spurinv.errors import ConfigError

    with pytest.raises(ConfigError, match=r"the hostname 'all' is not a node for controller\.transport"):
        Config.model_validate({"controller": {"transport": "scontrol"}}).node_name("all.example.org")
    assert Config.model_validate({"controller": {"transport": "scontrol"}, "node": {"name": "n1"}}).node_name("all") == "n1"
    assert Config().node_name("all") == "all"


@pytest.mark.parametrize("where", ["cache", "lock", "cache through a link"])
@pytest.mark.parametrize("named", ["--config", "SPURINV_CONFIG"])
def test_a_config_file_that_is_the_state_files_cache_or_lock_is_refused(
    cli, built, state_path, env, tmp_path, monkeypatch, where, named
):
    """The tick writes its CDI spec cache at ``<state>.cdi`` (and the lock at ``<state>.lock``): a
    config file there was replaced by the cache, and every later run ended with 78 (not TOML).
    Refused up front as the metrics file is: 64 from the flag, 78 from the environment."""
    state_path.parent.mkdir(mode=0o700, exist_ok=True)
    suffix = ".lock" if where == "lock" else ".cdi"
    config = write_private(Path(f"{state_path}{suffix}"), "# the operator's config\n")
    named_as = config
    if where == "cache through a link":
        (tmp_path / "link").symlink_to(state_path.parent)
        named_as = tmp_path / "link" / config.name  # another name of the same file
    args = ("refresh", "--root", built("mi300x-spx"), "--state", state_path, "--confirm-interval", "0")
    if named == "--config":
        result = cli(*args, "--config", named_as)
    else:
        monkeypatch.setenv("SPURINV_CONFIG", str(named_as))
        result = cli(*args)

    assert result.code == (64 if named == "--config" else 78), result.err
    what = "the state file's lock" if where == "lock" else "the tick's CDI spec cache"
    shown = f"--config {named_as}" if named == "--config" else f"{named_as}"
    assert result.err == f"spurinv: error: {shown}: that is {what} {config}; name a file of its own\n"
    assert config.read_text() == "# the operator's config\n"
    assert not state_path.exists()


def test_config_init_config_dash_writes_to_stdout_as_path_dash_does(cli, monkeypatch, tmp_path):
    """PATH "-" is stdout; --config - wrote a file named "-" in the working directory."""
    monkeypatch.chdir(tmp_path)

    result = cli("config", "init", "--config", "-")

    assert (0, config.render_default()) == (result.code, result.out), result.err
    assert not (tmp_path / "-").exists()
    assert cli("config", "init", "-").out == result.out


@pytest.mark.parametrize("source", ["SPURINV_CONFIG", "default"])
@pytest.mark.parametrize("named", ["--config", "PATH"])
def test_config_init_never_replaces_the_configured_token_file(cli, monkeypatch, tmp_path, source, named):
    """--force replaced the controller's token with the template, as it no longer replaces the
    state file or its lock: 78, one line, the token kept."""
    from spurinv.state import locations

    token = write_private(tmp_path / "token", "eyJ.token.x\n")
    settings = f'[controller]\nurl = "https://ctl.example:6820"\ntoken_file = "{token}"\n'
    if source == "SPURINV_CONFIG":
        monkeypatch.setenv("SPURINV_CONFIG", str(write_private(tmp_path / "config.toml", settings)))
    else:
        monkeypatch.delenv("SPURINV_CONFIG")
        write_private(Path(locations.DEFAULT_CONFIG), settings)  # the hermetic stand-in for /etc/spurinv/config.toml
    args = ["--config", token] if named == "--config" else [token]

    result = cli("config", "init", *args, "--force")

    assert exitcode.CONFIG == result.code, result.err
    assert f"that is the token file {token}" in result.err
    assert 1 == len(result.err.strip().splitlines()), result.err
    assert "eyJ.token.x\n" == token.read_text()
