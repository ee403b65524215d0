"""Configuration: defaults < file < flags, origins, commented default file, one-line errors."""

from __future__ import annotations

import tomllib

import pytest

from spurinv import config, exitcode
from spurinv.errors import ConfigError, TokenError


def write(path, text, mode=0o600):
    path.write_text(text)
    path.chmod(mode)
    return path


def test_defaults_are_observe_mode():
    loaded = config.Config()

    assert loaded.observe
    assert loaded.node_name("gpu17.cluster.example") == "gpu17"


def test_file_then_flags_with_origins(tmp_path):
    path = write(tmp_path / "c.toml", '[controller]\nurl = "https://ctl:6820"\ntimeout = 3\n[node]\nname = "n1"\n')

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
        # requests sends URL user info as Basic auth, plain HTTP included (attack round)
        ('[controller]\nurl = "http://u:p4ss@127.0.0.1:6820"\n', "controller.url"),
        ('[controller]\nurl = "http://127.0.0.1:99999"\n', "controller.url"),
        ('[controller]\nurl = "http://127.0.0.1:0"\n', "controller.url"),
        ('[controller]\ncredential = "."\n', "controller.credential"),
        ('[controller]\ncredential = ""\n', "controller.credential"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(tmp_path, text, words):
    path = write(tmp_path / "c.toml", text)

    with pytest.raises(ConfigError) as caught:
        config.load(str(path), True)

    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_explicit_config_is_an_error_but_missing_default_is_not(tmp_path):
    with pytest.raises(ConfigError):
        config.load(str(tmp_path / "nope.toml"), True)
    loaded, _ = config.load(str(tmp_path / "nope.toml"), False)
    assert loaded.observe


def test_group_writable_config_is_refused(tmp_path):
    path = write(tmp_path / "c.toml", "", 0o664)

    with pytest.raises(ConfigError, match="group- or world-writable"):
        config.load(str(path), True)


def test_token_from_credentials_directory_first(tmp_path):
    creds = tmp_path / "creds"
    creds.mkdir()
    write(creds / "spurinv-token", "SLURM_JWT=abc.def.ghi\n", 0o400)
    section = config.ControllerSection(auth="slurm-jwt", token_file=str(write(tmp_path / "t", "other\n")))

    assert "abc.def.ghi" == config.read_token(section, {"CREDENTIALS_DIRECTORY": str(creds)})
    assert "other" == config.read_token(section, {})


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_readable_token_file_is_refused(tmp_path, mode):
    section = config.ControllerSection(auth="bearer", token_file=str(write(tmp_path / "t", "x\n", mode)))

    with pytest.raises(TokenError, match="chmod go-rwx"):
        config.read_token(section, {})


def test_config_init_never_overwrites_without_force(cli, tmp_path):
    path = tmp_path / "etc" / "config.toml"

    result = cli("config", "init", path)
    again = cli("config", "init", path)

    assert 0 == result.code
    text = path.read_text()
    assert text.count("# ") >= len(config.keys())
    assert {section: {} for section in config.SECTIONS} == tomllib.loads(text)  # a template (test_operator_output)
    assert exitcode.CONFIG == again.code


def test_config_show_says_where_each_value_came_from(cli, env, tmp_path):
    write(tmp_path / "config.toml", '[node]\nname = "n7"\n')

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
        path = write(tmp_path / "c.toml", text)

        with pytest.raises(ConfigError) as caught:
            config.load(str(path), True)

        assert "p4ssw0rd" not in str(caught.value), text
