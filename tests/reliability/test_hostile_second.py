"""Hostile input, second follow-up (a second attacker): each test reproduces one
problem found after the two fix rounds and failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

# --- a name that is not UTF-8 under a CDI directory or sysfs (F1) ---------------------------------


def _non_utf8(directory: Path, stem: bytes) -> bytes:
    return os.fsencode(directory) + b"/" + stem


# A bad CDI spec is a flag (the run goes on); a sysfs name that is not a PCI address fails the
# discovery (74, as an ASCII one does), but the failed reading is saved and the run says why.
EXPECTED = {"cdi-file": 0, "sysfs-dangling-link": 74}


@pytest.mark.parametrize("where", sorted(EXPECTED))
def test_a_name_that_is_not_utf8_is_escaped_and_the_run_saves(where, root_copy, state_path, spurinv_here):
    """``os.listdir`` gives ``bad\\udcff.json``; the problem naming it reached the state and the
    output, and every run exited 70 (PydanticSerializationError) with nothing saved."""
    root = root_copy("mi300x-spx")
    if where == "cdi-file":
        (root / "etc" / "cdi").mkdir(parents=True, exist_ok=True)
        with open(_non_utf8(root / "etc" / "cdi", b"bad\xff.json"), "w") as spec:
            spec.write("{not json")
    else:
        os.symlink(b"../../../devices/nowhere", _non_utf8(root / "sys" / "bus" / "pci" / "devices", b"0000:ff:00.\xff"))

    discovered = spurinv_here("discover", "--json", "--root", root)
    ran = spurinv_here("refresh", "--json", "--root", root, "--state", state_path)

    assert ran.code == EXPECTED[where], ran
    assert discovered.code in (0, 65, 74), discovered
    assert "Traceback" not in ran.err + discovered.err
    saved = state_path.read_bytes().decode("utf-8")  # saved, and valid UTF-8
    assert "\\xff" in saved, saved[:2000]
    assert "\\xff" in discovered.out


@given(st.text())
def test_escaped_text_is_always_valid_utf8_and_plain_text_is_untouched(text):
    from spurinv.inventory.sources.status import escaped

    shown = escaped(text)
    shown.encode("utf-8")
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        assert shown == text


# --- a state path that is the config, the token or another program's file (F5) -------------------


def _config_with_token(tmp_path: Path) -> tuple[Path, Path]:
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=eyJhbGciOi.secret.token\n")
    token.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f'[controller]\ntoken_file = "{token}"\n')
    config.chmod(0o600)
    return config, token


@pytest.mark.parametrize("which", ["config", "token"])
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_state_path_that_is_the_config_or_the_token_is_refused_untouched(which, how, built, tmp_path, spurinv_here):
    """``--state /etc/spurinv/config.toml`` moved the config aside as a corrupt state and wrote a
    state in its place; the token file likewise."""
    config, token = _config_with_token(tmp_path)
    target = config if which == "config" else token
    before = target.read_bytes()
    args = ["refresh", "--root", built("mi300x-spx"), "--config", config]
    extra = {}
    if how == "flag":
        args += ["--state", target]
    else:
        extra = {"SPURINV_STATE": str(target)}

    ran = spurinv_here(*args, extra_env=extra)

    assert ran.code == (64 if how == "flag" else 78), ran
    assert f"the {which} file" in ran.err, ran.err
    assert str(target) in ran.err
    assert target.read_bytes() == before
    assert not list(tmp_path.glob("*.corrupt-*"))


FOREIGN = {
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "toml": "[controller]\nurl = 'http://x'\n",
    "other JSON object": '{"registry-mirrors": []}\n',
    "JSON array": "[1, 2, 3]\n",
    "nested brackets": "[" * 100000 + "]" * 100000,
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_a_state_path_naming_some_other_file_is_refused_not_moved_aside(case, built, state_path, spurinv_here):
    """``--state /etc/hosts`` (a typo, a wrong variable): the file was moved aside as a corrupt
    state and a state written in its place."""
    state_path.write_text(FOREIGN[case])

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path)

    assert ran.code == 65, ran
    assert str(state_path) in ran.err, ran.err
    assert "does not look like a spurinv state" in ran.err, ran.err
    assert state_path.read_text() == FOREIGN[case]
    assert not list(state_path.parent.glob("*.corrupt-*"))


@pytest.mark.parametrize(
    "damaged", ["", "{not json", '{"schema_version": 3, "node": "vm", "readi', '{"schema_version": "x"}', '{"node": 5}']
)
def test_a_damaged_state_is_still_moved_aside(damaged, built, state_path, spurinv_here):
    state_path.write_text(damaged)

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path)

    assert ran.code == 0, ran
    assert list(state_path.parent.glob("state.json.corrupt-*"))
    assert json.loads(state_path.read_text())["schema_version"]


# --- the metrics file on the token file (F3) -------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "config"])
def test_the_metrics_file_on_the_token_file_is_refused(how, built, tmp_path, state_path, spurinv_here):
    config, token = _config_with_token(tmp_path)
    before = token.read_bytes()
    args = ["refresh", "--root", built("mi300x-spx"), "--config", config, "--state", state_path]
    if how == "flag":
        args += ["--metrics-file", token]
    else:
        config.write_text(config.read_text().replace("[controller]", f'[metrics]\nfile = "{token}"\n\n[controller]'))

    ran = spurinv_here(*args)

    assert ran.code == (64 if how == "flag" else 78), ran
    assert "the token file" in ran.err, ran.err
    assert token.read_bytes() == before


# --- the metrics target is not a regular file (F4) ------------------------------------------------


def _not_regular(tmp_path: Path, kind: str) -> Path:
    target = tmp_path / f"metrics-{kind.replace('/', '-')}.prom"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink to /dev/stdout":
        target.symlink_to("/dev/stdout")
    elif kind == "symlink to a regular file":
        (tmp_path / "real.prom").write_text("")
        target.symlink_to(tmp_path / "real.prom")
    else:
        target.mkdir()
    return target


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/stdout", "symlink to a regular file", "directory"])
@pytest.mark.parametrize("how", ["flag", "config"])
def test_a_metrics_target_that_is_not_a_regular_file_is_refused(kind, how, built, tmp_path, state_path, spurinv, spurinv_here):
    """The metrics file was renamed over whatever was there: a device node, a FIFO, a link."""
    target = _not_regular(tmp_path, kind)
    config = tmp_path / "config.toml"
    args = ["refresh", "--root", built("mi300x-spx"), "--config", config, "--state", state_path]
    if how == "flag":
        args += ["--metrics-file", target]
    else:
        config.write_text(f'[metrics]\nfile = "{target}"\n')
    config.chmod(0o600)

    run = spurinv if kind == "fifo" else spurinv_here  # a FIFO opened by mistake would hang the test

    ran = run(*args)

    assert ran.code == (64 if how == "flag" else 78), ran
    assert str(target) in ran.err, ran.err
    assert ("a symbolic link" if kind.startswith("symlink") else kind.replace("fifo", "a FIFO")) in ran.err, ran.err
    assert os.path.lexists(target)
    assert not state_path.exists()


# --- a NUL in a GRES entry we would pass to scontrol (F7) --------------------------------------------


def test_a_nul_in_a_gres_entry_is_refused_before_exec_naming_the_entry(tmp_path):
    """A non-GPU GRES entry from the controller holding a NUL made registration exit 70
    (ValueError: embedded null byte from the exec)."""
    from spurinv import exitcode
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.scontrol import Scontrol
    from spurinv.errors import ControllerError

    marker = tmp_path / "ran"
    program = tmp_path / "scontrol"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho 'slurm 24.11.5'\n")
    program.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post({"gres": "gpu:mi300x:8,nic:cx\0x7:2"})

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)
    assert "nic:cx\\0x7:2" in caught.value.message
    assert "NUL" in caught.value.message
    assert not marker.exists()  # not run at all


def test_a_nul_in_a_command_environment_is_refused_before_exec(tmp_path):
    from spurinv.controller import process
    from spurinv.errors import ControllerError

    with pytest.raises(ControllerError) as caught:
        process.run(["/bin/true"], {"SPURINV_GRES": "gpu:a:1,x\0y:1"}, 5)

    assert "x\\0y:1" in caught.value.message


# --- a config nested thousands deep (F6) -------------------------------------------------------------


@pytest.mark.parametrize("nesting", ["[", "{a="], ids=["array", "inline table"])
def test_a_config_nested_thousands_deep_is_a_config_error_naming_the_file(nesting, tmp_path, state_path, built, spurinv_here):
    closing = "]" if nesting == "[" else "}"
    config = tmp_path / "deep.toml"
    config.write_text("[node]\nname = " + nesting * 2000 + "1" + closing * 2000 + "\n")
    config.chmod(0o600)

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--config", config, "--state", state_path)

    assert ran.code == 78, ran
    assert str(config) in ran.err, ran.err
    assert "Traceback" not in ran.err
    assert len(ran.err.strip().splitlines()) == 1, ran.err


# --- operator paths that are not UTF-8; JSON output that stays UTF-8 (F2) ----------------------------


@pytest.mark.parametrize("flag", ["--state", "--root", "--metrics-file", "--config"])
def test_an_argument_that_is_not_utf8_is_one_usage_line(flag, built, tmp_path, state_path, env):
    import subprocess
    import sys

    value = os.fsencode(tmp_path) + b"/bad\xff"  # a process: the interpreter decodes its argv
    args = [b"refresh", b"--root", os.fsencode(built("mi300x-spx")), b"--state", os.fsencode(state_path)]
    command = [sys.executable, "-m", "spurinv", *args, flag.encode(), value]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 64, ran
    err = ran.stderr.decode("utf-8")
    assert err.count("\n") == 1, err
    assert f"{flag} {tmp_path}/bad\\xff: not UTF-8" in err
    assert not state_path.exists()


def test_a_state_path_variable_that_is_not_utf8_is_a_config_error(built, tmp_path, env):
    import subprocess
    import sys

    environ = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    environ[b"SPURINV_STATE"] = os.fsencode(tmp_path) + b"/s\xff.json"  # a process: the interpreter decodes environ
    command = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx"))]
    ran = subprocess.run(command, env=environ, capture_output=True, check=False)

    assert ran.returncode == 78, ran
    assert "$SPURINV_STATE" in ran.stderr.decode("utf-8")


@pytest.mark.parametrize(("locale", "why"), [("C", "run spurinv under a UTF-8 locale (LANG=C.UTF-8)"), ("C.UTF-8", None)])
def test_utf8_an_ascii_locale_could_not_decode_says_so_and_json_gets_a_document(locale, why, tmp_path, env):
    """``LC_ALL=C PYTHONUTF8=0``: the interpreter decodes argv as ASCII, so a UTF-8 node name
    reaches spurinv as surrogates. The line says the locale is the cause, and a ``--json`` caller
    gets its error document on stdout."""
    import subprocess
    import sys

    environ = {**env, "LC_ALL": locale, "PYTHONUTF8": "0"}
    command = [sys.executable, "-m", "spurinv", "refresh", "--json", "--state", str(tmp_path / "s.json"), "--node", "ü"]
    ran = subprocess.run(command, env=environ, capture_output=True, check=False)

    if why is None:  # a UTF-8 locale decodes it: the node name rule refuses it, as any other
        assert ran.returncode == 64, ran
        assert "not a node name" in ran.stderr.decode("utf-8")
        return
    document = json.loads(ran.stdout)
    assert (ran.returncode, document["command"], document["exit_code"], document["error"]["code"]) == (
        64, "refresh", 64, "usage")  # fmt: skip
    assert document["error"]["message"] == f"--node \\xc3\\xbc: UTF-8 text this locale's encoding (ascii) cannot hold; {why}"
    assert ran.stderr.decode("ascii") == f"spurinv: error: {document['error']['message']}\n"
    assert not (tmp_path / "s.json").exists()


def test_a_path_variable_that_is_not_utf8_under_json_is_a_config_error_document(built, tmp_path, env):
    import subprocess
    import sys

    environ = {k.encode(): v.encode("utf-8", "surrogateescape") for k, v in env.items()}
    environ[b"SPURINV_STATE"] = os.fsencode(tmp_path) + b"/s\xff.json"
    ran = subprocess.run([sys.executable, "-m", "spurinv", "status", "--json"], env=environ, capture_output=True, check=False)

    document = json.loads(ran.stdout)
    assert (ran.returncode, document["command"], document["error"]["code"]) == (78, "status", "config")
    assert document["error"]["message"] == f"$SPURINV_STATE ({tmp_path}/s\\xff.json): not UTF-8 text; name a path that is"


def test_status_json_of_a_state_holding_a_lone_surrogate_is_valid_utf8(built, state_path, env, spurinv_here):
    """``"\\udcff"`` is valid JSON: status --json wrote it to stdout as the raw byte (invalid
    UTF-8) or failed writing it (74, blaming stdout)."""
    import subprocess
    import sys

    assert spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["last"]["reason"] = "seen \udcff here"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escape, valid UTF-8
    args = ["status", "--json", "--state", str(state_path)]  # documents.dumps: the lean path and the CLI

    # a process: the bytes written to a real stdout, not the text capsys sees
    ran = subprocess.run([sys.executable, "-m", "spurinv", *args], env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    document = json.loads(ran.stdout.decode("utf-8"))
    assert document["last_decision"]["reason"] == "seen \\xff here"


def test_a_lone_surrogate_hand_edited_into_the_state_is_written_back_escaped(built, state_path, spurinv_here):
    """``"boot_id": "\\ud800"`` is valid JSON the model accepts, but the full run's writer (UTF-8)
    could not encode it: every ``refresh`` exited 70 and never got past it."""
    root = built("mi300x-spx")
    assert spurinv_here("refresh", "--root", root, "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["boot_id"] = "x\ud800"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escape

    ran = spurinv_here("refresh", "--root", root, "--state", state_path)

    assert ran.code == 0, ran
    text = state_path.read_bytes().decode("ascii")  # the escape, never a raw surrogate
    assert json.loads(text)["boot_id"] == "x\ud800"  # no boot id under this root: kept as it was


def test_status_of_a_state_holding_a_lone_surrogate_shows_it_escaped(built, state_path, env, spurinv_here):
    """``"node": "vm\\udcff"`` or a reason with ``"\\ud800"`` (valid JSON the model accepts):
    ``spurinv status`` failed writing it (74, blaming standard output)."""
    import subprocess
    import sys

    assert spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state_path).code == 0
    saved = json.loads(state_path.read_text())
    saved["node"] = "vm\udcff"
    saved["last"]["reason"] = "seen \ud800 here"
    state_path.write_text(json.dumps(saved))  # ensure_ascii: the file holds the escapes

    # a process: the bytes written to a real stdout, not the text capsys sees
    command = [sys.executable, "-m", "spurinv", "status", "--state", str(state_path)]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    shown = ran.stdout.decode("utf-8")
    assert "vm\\udcff" in shown
    assert "seen \\ud800 here" in shown


def test_diff_of_a_baseline_holding_a_lone_surrogate_shows_it_escaped(built, state_path, env, spurinv_here):
    """A baseline device's model ``"mi300x\\ud800"`` (fingerprint recomputed: the model accepts
    it): ``spurinv diff`` failed writing the changed field (74, blaming standard output)."""
    import subprocess
    import sys

    from spurinv.inventory.fingerprint import fingerprint

    root = built("mi300x-spx")
    for _ in range(2):
        assert spurinv_here("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0").code == 0
    saved = json.loads(state_path.read_text())
    inventory = saved["baseline"]["inventory"]
    inventory["devices"][0]["model"] = "mi300x\ud800"
    inventory["fingerprint"] = fingerprint(inventory["cpus"], inventory["memory_mb"], inventory["devices"])
    state_path.write_text(json.dumps(saved))

    command = [sys.executable, "-m", "spurinv", "diff", "--root", str(root), "--state", str(state_path)]
    ran = subprocess.run(command, env=env, capture_output=True, check=False)

    assert ran.returncode == 0, ran
    assert "mi300x\\ud800" in ran.stdout.decode("utf-8")


# --- top-level keys of an all-nodes answer (F8) -------------------------------------------------------


def _read(text: str):
    from spurinv.controller import answer

    reader = answer.Reader(keep=lambda node: None)
    for start in range(0, len(text), 1 << 16):
        reader.feed(text[start : start + (1 << 16)].encode())
    return reader.close()


@pytest.mark.parametrize(
    "shape",
    [
        "two million keys",
        "1,025 keys",
        "1,000 keys of 4 KiB names",
    ],
)
def test_top_level_keys_are_bounded_in_number_and_text(shape):
    """Two million top-level keys (``{"k0":0,…}``): 271 MB of objects, past the unit's MemoryMax;
    neither their number nor their names counted against MAX_KEPT."""
    from spurinv.controller import answer

    if shape == "two million keys":
        text = "{" + ",".join(f'"k{i}":0' for i in range(2_000_000)) + ',"nodes":[]}'
    elif shape == "1,025 keys":
        text = "{" + ",".join(f'"k{i}":0' for i in range(1025)) + "}"
    else:
        text = "{" + ",".join(f'"{i:04d}{"k" * 4096}":0' for i in range(1000)) + "}"

    with pytest.raises(answer.TooLarge) as raised:
        _read(text)

    assert "refused" in str(raised.value)


def test_an_answer_with_slurmrestds_keys_and_repeats_is_read():
    text = '{"meta":{},"errors":[],"warnings":[],"last_update":{"number":1},"nodes":[{"name":"n1"}]}'
    assert set(_read(text)) == {"meta", "errors", "warnings", "last_update", "nodes"}
    assert _read("{" + ",".join('"a":0' for _ in range(5000)) + "}") == {"a": 0}


def test_the_no_change_tick_does_not_replace_a_metrics_target_turned_into_a_link(built, tmp_path, state_path, spurinv_here):
    """The tick writes the metrics file without checking the options again: a link put there
    after the options were checked was replaced (or written through)."""
    metrics_file = tmp_path / "spurinv.prom"
    args = ["refresh", "--root", built("mi300x-spx"), "--state", state_path, "--metrics-file", metrics_file]
    for _ in range(3):
        assert spurinv_here(*args).code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not yours\n")
    metrics_file.unlink()
    metrics_file.symlink_to(elsewhere)

    ran = spurinv_here(*args)

    assert ran.code in (64, 73), ran
    assert metrics_file.is_symlink()
    assert elsewhere.read_text() == "not yours\n"
    assert str(metrics_file) in ran.err
