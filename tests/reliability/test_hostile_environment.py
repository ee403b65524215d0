"""The node's environment is hostile too: a Latin-1 or an ASCII locale; a metrics file over
the state, its lock, the config or the token, or one that is not a regular file; where the state
goes (never the config, the token or another program's file; in a directory, and below
directories, no one else can write); and what CDI specs cost (their number, bytes, YAML and
flags)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from faultserver import CAPTURES, FaultServer, Gateway

from spurinv.inventory.root import Root
from spurinv.inventory.sources import cdi, cdispec
from spurinv.inventory.sources.status import Report

# --- a Latin-1 locale (item 10), an ASCII one --------------------------------------------------------


@pytest.fixture(scope="session")
def latin1(shared: Callable[[str, Callable[[Path], object]], Path]) -> dict[str, str]:
    """``LANG=en_US`` as Debian defines it (ISO-8859-1), compiled by ``localedef`` into a private
    ``LOCPATH``: the host's /etc and /usr/lib/locale are never touched. Compiled once a run, not
    once a worker (0.4 s of CPU each, quiet)."""
    localedef = shutil.which("localedef")
    if localedef is None or not Path("/usr/share/i18n/locales/en_US").exists():
        pytest.skip("needs localedef and the locale sources (Debian package `locales`; scripts/test-setup installs it)")

    def compile_locale(where: Path) -> None:
        where.mkdir()
        subprocess.run(
            [localedef, "-i", "en_US", "-f", "ISO-8859-1", str(where / "en_US")], check=False, capture_output=True, timeout=120
        )  # fmt: skip  (exit 1 on warnings; checked below, in each worker)

    where = shared("locale-en_US.ISO-8859-1", compile_locale)
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("LC_", "PYTHONIOENCODING", "PYTHONUTF8"))}
    environ.update(LOCPATH=str(where), LANG="en_US")
    probe = [sys.executable, "-c", "import sys; print(sys.getfilesystemencoding(), sys.stdout.encoding)"]
    said = subprocess.run(probe, env=environ, capture_output=True, text=True, check=True, timeout=60).stdout.split()
    assert said == ["iso8859-1", "iso8859-1"], said  # the locale is in force: the test tests something
    return {"LOCPATH": str(where), "LANG": "en_US"}


def _run(env: dict[str, str], *args: object) -> subprocess.CompletedProcess[bytes]:
    # a process: the locale is read once, when a fresh interpreter starts
    clean = {key: value for key, value in env.items() if not key.startswith(("LC_", "PYTHONIOENCODING", "PYTHONUTF8"))}
    return subprocess.run([sys.executable, "-m", "spurinv", *map(str, args)], env=clean, capture_output=True,
                          timeout=120, check=False)  # fmt: skip


SLURM_SCONTROL = """#!/bin/sh
case "$1" in
  --version) echo "slurm 24.11.5" ;;
  --json) cat "{node}" ;;
  update) for word in "$@"; do printf '%s\\n' "$word"; done >> "{log}" ;;
  *) exit 1 ;;
esac
"""


def _busy_node(path: Path) -> Path:
    body = json.loads((CAPTURES / "node-n1-idle.json").read_text())
    body["nodes"][0].update(state=["MIXED"], alloc_cpus=4, gres_used="gpu:mi300x:2(IDX:0-1)")
    path.write_text(json.dumps(body))
    return path


def test_a_latin1_locale_still_drains_through_scontrol_with_a_utf8_reason(latin1, env, built, tmp_path):
    """Under ``LANG=en_US`` (ISO-8859-1) the drain reason "8→64" could not go into scontrol's argv:
    every run exited 70 and the busy node was never drained."""
    updates = tmp_path / "updates"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(SLURM_SCONTROL.format(node=_busy_node(tmp_path / "node.json"), log=updates))
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
                      "[policy]\nconfirm_interval = 0\n")  # fmt: skip
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    local = {**env, **latin1}
    for root in ("mi300x-spx", "mi300x-spx", "mi300x-cpx"):
        assert _run(local, "refresh", "--root", built(root), "--state", state).returncode == 0

    ran = _run(local, "refresh", "--root", built("mi300x-cpx"), "--state", state)

    assert ran.returncode == 0, ran.stderr.decode("utf-8", "replace")
    reason = next(line for line in updates.read_bytes().splitlines() if line.startswith(b"Reason="))
    assert "8→64" in reason.decode("utf-8")  # UTF-8 bytes, as the REST path sends them
    assert "8→64" in ran.stdout.decode("utf-8")
    assert json.loads(state.read_bytes().decode("utf-8"))["drain"]["reason"] == reason.decode("utf-8")[len("Reason=") :]


def test_a_latin1_locale_prints_utf8_after_a_rest_drain(latin1, env, built, tmp_path):
    """Over REST the drain was sent, then stdout failed with 74 on "→"."""
    gateway = Gateway()
    node = gateway.add_node("n1", state=("MIXED",), alloc_cpus=4, gres_used="gpu:mi300x:2(IDX:0-1)")
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    with FaultServer(gateway=gateway) as server:
        config = Path(env["SPURINV_CONFIG"])
        config.write_text(f'[node]\nname = "n1"\n[controller]\nurl = "{server.url}"\napi = "slurm/v0.0.42"\n'
                          "[policy]\nconfirm_interval = 0\n")  # fmt: skip
        local = {**env, **latin1}
        for root in ("mi300x-spx", "mi300x-spx", "mi300x-cpx"):
            assert _run(local, "refresh", "--root", built(root), "--state", state).returncode == 0

        ran = _run(local, "refresh", "--root", built("mi300x-cpx"), "--state", state)
        as_json = _run(local, "status", "--state", state, "--json")

    assert ran.returncode == 0, ran.stderr.decode("utf-8", "replace")
    assert "DRAIN" in node["state"]
    assert "8→64" in ran.stdout.decode("utf-8")
    assert as_json.returncode == 0
    assert "8→64" in json.loads(as_json.stdout.decode("utf-8"))["drain"]["reason"]


@pytest.mark.parametrize("args", [("version",), ("config", "show")])
def test_a_latin1_locale_changes_no_byte_of_plain_output(latin1, env, args: tuple[str, ...]):
    plain = _run(env, *args)
    local = _run({**env, **latin1}, *args)

    assert (local.returncode, local.stdout) == (plain.returncode, plain.stdout)


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        ([b"refresh", b"--state", b"{tmp}/s\xff.json"], 64, "--state {tmp}/s\\xff.json: not UTF-8 text; name a path that is"),
        ([b"refresh", b"--json", b"--state={tmp}/s\xff.json"], 64,
         "--state={tmp}/s\\xff.json: not UTF-8 text; name a path that is"),
        ([b"refresh", b"--metrics-file", b"{tmp}/m\xff.prom"], 64,
         "--metrics-file {tmp}/m\\xff.prom: not UTF-8 text; name a path that is"),
        ([b"refresh", b"--node", b"n\xff1"], 64, "--node n\\xff1: not UTF-8 text; give a node name that is"),
        ([b"refresh", b"--controller-url", b"http://h\xff:1"], 64,
         "--controller-url http://h\\xff:1: not UTF-8 text; give a URL that is"),
        ([b"config", b"init", b"{tmp}/c\xc3\xbc\xff.toml"], 64,
         "PATH {tmp}/c\u00fc\\xff.toml: not UTF-8 text; name a path that is"),
        ([b"status", b"--json"], 78, "$SPURINV_STATE ({tmp}/e\\xff.json): not UTF-8 text; name a path that is"),
    ],
    ids=["--state", "--state= --json", "--metrics-file", "--node", "--controller-url", "config init PATH", "$SPURINV_STATE"],
)  # fmt: skip
def test_a_latin1_locale_refuses_an_argument_that_is_not_utf8_as_a_utf8_one_does(latin1, env, tmp_path, args, code, said):
    """ISO-8859-1 decodes every byte, so ``s\\xff`` arrived as ``"sÿ"``, no surrogate to refuse:
    refresh wrote ``s\\xff.json`` and said ``sÿ.json`` (UTF-8 ``c3 bf``, a name no file has), config
    init wrote its file under one name and reported another, --controller-url looked up ``hÿ``,
    $SPURINV_STATE was used as given. The bytes decide: the same line, document and exit code as
    under a UTF-8 locale, and nothing written."""
    (tmp_path / "home").mkdir()
    tmp = os.fsencode(tmp_path / "home")
    argv = [word.replace(b"{tmp}", tmp) for word in args]
    outcomes = []
    for locale in ({"LANG": "C.UTF-8"}, latin1):
        local = {key.encode(): value.encode() for key, value in {**env, **locale}.items()}
        if code == 78:
            local[b"SPURINV_STATE"] = tmp + b"/e\xff.json"
        local = {k: v for k, v in local.items() if not k.startswith((b"LC_", b"PYTHONIOENCODING", b"PYTHONUTF8"))}
        ran = subprocess.run([sys.executable, "-m", "spurinv", *argv], env=local, capture_output=True, timeout=120,
                             check=False)  # fmt: skip
        outcomes.append((ran.returncode, ran.stdout, ran.stderr))
    expected = said.replace("{tmp}", str(tmp_path / "home"))

    assert outcomes[0] == outcomes[1], outcomes  # the UTF-8 locale's, byte for byte
    assert (outcomes[1][0], outcomes[1][2].decode("utf-8")) == (code, f"spurinv: error: {expected}\n")
    if b"--json" in argv:
        assert json.loads(outcomes[1][1])["error"]["message"] == expected
    else:
        assert outcomes[1][1] == b""
    assert os.listdir(tmp) == []


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


# --- the metrics file over the state (item 11), the config or the token, or not a regular file -------


@pytest.mark.parametrize("suffix", ["", ".lock", ".cdi"], ids=["state", "lock", "cdi cache"])
@pytest.mark.parametrize("spelling", ["same", "through a symlinked directory", "relative"])
def test_metrics_file_naming_the_state_or_its_lock_is_refused(cli, env, built, tmp_path, monkeypatch, suffix, spelling):
    """``--metrics-file`` (64) or ``metrics.file`` (78) naming the state file or its lock was
    accepted: exit 0, state.json became Prometheus text, the next run discarded it as corrupt."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(state.parent)
    monkeypatch.chdir(tmp_path)
    target = {
        "same": f"{state}{suffix}",
        "through a symlinked directory": f"{tmp_path / 'link' / 'state.json'}{suffix}",
        "relative": f"state/state.json{suffix}",
    }[spelling]
    root = built("mi300x-spx")
    assert cli("refresh", "--root", root, "--state", state).code == 0
    before = state.read_bytes()

    flag = cli("refresh", "--root", root, "--state", state, "--metrics-file", target)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(f'[metrics]\nfile = "{target}"\n')
    from_file = cli("refresh", "--root", root, "--state", state)

    assert (flag.code, from_file.code) == (64, 78), (flag.err, from_file.err)
    assert "--metrics-file" in flag.err
    assert str(config) in from_file.err
    assert "metrics.file" in from_file.err
    assert state.read_bytes() == before


def _spelling(tmp_path: Path, state: Path, config: Path, spelling: str) -> str:
    """A name for the state file (or the config) that is not its path."""
    if spelling == "dotdot after a symlink":
        (state.parent / "deeper").mkdir()
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "hop").symlink_to(state.parent / "deeper")
        return f"{tmp_path}/elsewhere/hop/../state.json"  # the kernel: state/deeper/.. = state/
    if spelling == "hard link":
        (tmp_path / "prom").mkdir()
        os.link(state, tmp_path / "prom" / "spurinv.prom")
        return str(tmp_path / "prom" / "spurinv.prom")
    if spelling == "the config file":
        return str(config)
    raise AssertionError(spelling)


@pytest.mark.parametrize("spelling", ["dotdot after a symlink", "hard link", "the config file"])
def test_metrics_file_by_another_name_is_refused_by_refresh_fleet_and_config(cli, env, built, tmp_path, spelling):
    """``a/link/../state.json`` (abspath drops ``link/..``, the kernel does not), a hard link to
    the state file, or the config file itself were accepted as the metrics file: exit 0, and the
    state (or config) replaced by Prometheus text. ``fleet --metrics-file`` had no check at all."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700)
    config = Path(env["SPURINV_CONFIG"])
    root = built("mi300x-spx")
    assert cli("refresh", "--root", root, "--state", state).code == 0
    target = _spelling(tmp_path, state, config, spelling)
    before = state.read_bytes(), config.read_bytes()

    flag = cli("refresh", "--root", root, "--state", state, "--metrics-file", target)
    os.environ["SPURINV_STATE"] = str(state)  # fleet and config show take the state from here
    try:
        fleet = cli("fleet", "--controller-url", "http://127.0.0.1:9", "--metrics-file", target)
        config.write_text(f'[metrics]\nfile = "{target}"\n')
        config.chmod(0o600)
        from_file = cli("refresh", "--root", root, "--state", state)
        shown = cli("config", "show")
    finally:
        del os.environ["SPURINV_STATE"]

    assert (flag.code, fleet.code, from_file.code, shown.code) == (64, 64, 78, 78), (flag, fleet, from_file, shown)
    assert "--metrics-file" in flag.err
    assert "--metrics-file" in fleet.err
    assert "metrics.file" in from_file.err
    assert "metrics.file" in shown.err
    for ran in (flag, fleet, from_file, shown):
        assert len(ran.err.strip().splitlines()) == 1, ran.err
    assert state.read_bytes() == before[0]


def _config_with_token(tmp_path: Path) -> tuple[Path, Path]:
    token = tmp_path / "token"
    token.write_text("SLURM_JWT=eyJhbGciOi.secret.token\n")
    token.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f'[controller]\ntoken_file = "{token}"\n')
    config.chmod(0o600)
    return config, token


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


# --- where the state goes (item 12) ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["--state", "SPURINV_STATE"])
def test_a_state_path_in_a_missing_directory_is_refused_not_a_fresh_start(cli, env, built, tmp_path, monkeypatch, how):
    """``--state /nonexistent/dir/state.json`` exited 0 after creating both directories and a new
    baseline: a typo was a fresh start."""
    state = tmp_path / "nonexistent" / "dir" / "state.json"
    args = ["--state", state] if how == "--state" else []
    if how == "SPURINV_STATE":
        monkeypatch.setenv("SPURINV_STATE", str(state))

    result = cli("refresh", "--root", built("mi300x-spx"), *args)

    assert result.code == 73, result.err
    assert f"state directory {state.parent} does not exist" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert not (tmp_path / "nonexistent").exists()


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


def test_missing_default_directories_are_made_0700_one_by_one_under_umask_000(env, built, tmp_path):
    """The default state directory (here from ``$STATE_DIRECTORY``) is created when missing, and
    under ``umask 000`` every missing parent was 0777 (only the last one 0700)."""
    state_directory = tmp_path / "var" / "lib" / "spurinv"
    # a process: the umask is the whole process's, set by its parent; no confirm wait (3 s by
    # default): the directories are made before the first reading
    command = f"umask 000; exec {sys.executable} -m spurinv refresh --confirm-interval 0 --root {built('mi300x-spx')}"
    clean = {key: value for key, value in env.items() if key != "SPURINV_STATE"}
    ran = subprocess.run(["sh", "-c", command], env={**clean, "STATE_DIRECTORY": str(state_directory)},
                         capture_output=True, text=True, check=False, timeout=120)  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    made = [tmp_path / "var", tmp_path / "var" / "lib", state_directory]
    assert [oct(stat.S_IMODE(path.stat().st_mode)) for path in made] == [oct(0o700)] * 3
    assert stat.S_IMODE((state_directory / "state.json").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("mode", "owner"),
    [(0o777, None), (0o770, None), (0o1777, None), (0o720, None), (0o700, 65534)],
    ids=["0777", "0770", "sticky 1777", "group-writable 0720", "another user's 0700"],
)
def test_a_state_directory_another_user_can_write_is_refused(cli, built, tmp_path, mode, owner):
    """Another user who can write the directory can swap the state (or the directory) under a
    root agent, which then read it without an owner check."""
    root = built("mi300x-spx")
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    state = directory / "state.json"
    assert cli("refresh", "--root", root, "--state", state).code == 0
    before = state.read_bytes()
    directory.chmod(mode)
    if owner is not None:
        os.chown(directory, owner, -1)

    result = cli("refresh", "--root", root, "--state", state)

    assert result.code == 73, result.err
    assert f"state directory {directory} can be written by another user" in result.err
    assert state.read_bytes() == before


@pytest.mark.parametrize("parent", ["0777 without sticky", "another user's", "through a link"])
def test_a_state_directory_under_a_parent_others_can_write_is_refused(cli, built, tmp_path, parent):
    """Only the state directory itself was checked: under a world-writable parent (0777, not
    sticky) or another user's, anyone could rename it away and put their own in its place."""
    shared = tmp_path / "shared"
    shared.mkdir()
    if parent == "0777 without sticky":
        shared.chmod(0o777)
    elif parent == "another user's":
        if os.geteuid() != 0:
            pytest.skip("needs root to give a directory to another user")
        os.chown(shared, 4242, 4242)
    else:
        shared.chmod(0o777)
        (tmp_path / "link").symlink_to(shared)
    state_dir = shared / "state"
    state_dir.mkdir(mode=0o700)
    spelled = (tmp_path / "link" / "state") if parent == "through a link" else state_dir
    sticky = tmp_path / "sticky"  # /tmp's shape: 1777, root's, is fine
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "state").mkdir(mode=0o700)

    refused = cli("refresh", "--root", built("mi300x-spx"), "--state", spelled / "state.json")
    fine = cli("refresh", "--root", built("mi300x-spx"), "--state", sticky / "state" / "state.json")

    assert refused.code == 73, refused.err
    assert str(spelled.parent) in refused.err  # the parent as the path spells it
    assert len(refused.err.strip().splitlines()) == 1, refused.err
    assert not (state_dir / "state.json").exists()
    assert fine.code == 0, fine.err


# --- what CDI specs cost (item 13) -------------------------------------------------------------------

SPEC = (
    'cdiVersion: "0.6.0"\nkind: example.com/{kind}\ndevices:\n- name: "0"\n'
    "  containerEdits:\n    deviceNodes:\n    - path: /dev/{kind}0\n"
)


def _specs(tmp_path: Path, count: int, size: int = 0) -> Path:
    directory = tmp_path / "etc" / "cdi"
    directory.mkdir(parents=True)
    for index in range(count):
        text = SPEC.format(kind=f"fpga{index:03d}")
        (directory / f"spec{index:03d}.yaml").write_text(text + "# " + "x" * max(0, size - len(text) - 3) + "\n")
    return directory


def test_the_number_of_cdi_specs_read_in_one_run_is_bounded(tmp_path):
    """Nothing bounded the number of spec files a run parsed."""
    _specs(tmp_path, cdi.MAX_SPECS + 10)
    report = Report("cdi")

    found = cdi.read_cdi(Root(str(tmp_path)), report)

    assert len(found) == cdi.MAX_SPECS
    assert [flag["path"].rsplit("/", 1)[1] for flag in report.flags] == [f"spec{cdi.MAX_SPECS:03d}.yaml"]
    assert "not read, nor any spec after it" in report.flags[0]["reason"]
    assert report.status == "ok"


def test_the_bytes_of_cdi_specs_read_in_one_run_are_bounded(tmp_path):
    """Nor their size: 4 MiB each (about 16 s of CPU with the pure-Python parser), any number."""
    share = cdi.MAX_SPEC_BYTES // 3 + 1
    directory = tmp_path / "etc" / "cdi"  # JSON: YAML has its own, smaller budget (below)
    directory.mkdir(parents=True)
    for index in range(4):
        spec = {"cdiVersion": "0.6.0", "kind": f"example.com/fpga{index:03d}", "devices": [{"name": "0"}], "pad": ""}
        spec["pad"] = "x" * (share - len(json.dumps(spec)))
        (directory / f"spec{index:03d}.json").write_text(json.dumps(spec))
    report = Report("cdi")

    found = cdi.read_cdi(Root(str(tmp_path)), report)

    assert [device["kind"] for device in found] == ["example.com/fpga000", "example.com/fpga001"]
    assert [flag["path"].rsplit("/", 1)[1] for flag in report.flags] == ["spec002.json"]


def test_unbounded_cdi_flags_never_make_a_state_the_loader_refuses(root_copy, state_path, spurinv_here):
    """40,000 symbolic links in etc/cdi were 40,000 flags in every reading: the state grew past
    16 MiB and the next run moved it aside as corrupt, losing the baseline."""
    root = root_copy("mi300x-spx")
    directory = root / "etc" / "cdi"
    for index in range(40000):
        (directory / f"{index:05d}{'x' * 240}.json").symlink_to("amd.json")

    runs = [spurinv_here("refresh", "--json", "--root", root, "--state", state_path) for _ in range(3)]

    assert [ran.code for ran in runs] == [0, 0, 0], runs
    assert not list(state_path.parent.glob("*.corrupt-*")), "the state was moved aside as corrupt"
    assert state_path.stat().st_size < (1 << 20)
    flags = json.loads(state_path.read_text())["readings"][-1]["flags"]
    assert len(flags) <= 101, len(flags)
    assert "more" in flags[-1]["reason"], flags[-1]
    assert all(len(flag["path"]) <= 1024 and len(flag["reason"]) <= 1024 for flag in flags)


def _yaml_spec(index: int, size: int) -> str:
    head = f'cdiVersion: "0.6.0"\nkind: example.com/k{index}\ndevices:\n'
    device = "- name: d{}\n  containerEdits:\n    deviceNodes:\n    - path: /dev/fpga{}\n"
    parts, total, number = [head], len(head), 0
    while total < size - 120:
        parts.append(device.format(number, number))
        total += len(parts[-1])
        number += 1
    return "".join(parts)


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-python"])
def test_the_yaml_a_run_parses_is_bounded_and_json_specs_are_still_read(tmp_path, libyaml, monkeypatch):
    """Two MiB of YAML specs cost ~2.4 s of CPU with libyaml and ~12 s without, on every tick:
    YAML gets its own budget a run (smaller without libyaml); JSON specs after it are still read."""
    import yaml

    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.status import Report

    if not libyaml:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    budget = cdi.MAX_YAML_BYTES if libyaml else cdi.MAX_YAML_BYTES_PURE
    directory = tmp_path / "etc" / "cdi"
    directory.mkdir(parents=True)
    share = budget // 2 - 1000
    for index in range(3):
        (directory / f"spec{index}.yaml").write_text(_yaml_spec(index, share))
    (directory / "zz.json").write_text(json.dumps({"cdiVersion": "0.6.0", "kind": "example.com/j", "devices": [{"name": "a"}]}))
    report = Report("cdi")

    found = cdi.read_cdi(Root(str(tmp_path)), report)

    kinds = {device["kind"] for device in found}
    assert kinds == {"example.com/k0", "example.com/k1", "example.com/j"}, kinds
    assert [flag["path"].rsplit("/", 1)[1] for flag in report.flags] == ["spec2.yaml"]
    assert "YAML" in report.flags[0]["reason"]


HEAD = 'cdiVersion: "0.6.0"\nkind: example.com/fpga\n'
ALIAS = HEAD + "x: &edits {deviceNodes: [{path: /dev/fpga0}]}\ndevices:\n- name: a\n  containerEdits: *edits\n"
AMPERSAND = HEAD + 'devices:\n- name: a\n  containerEdits: {deviceNodes: [{path: "/dev/a&b"}]}\n'


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-Python"])
def test_a_yaml_alias_is_refused_with_either_loader_and_an_ampersand_is_no_alias(monkeypatch, libyaml):
    import yaml

    if libyaml and getattr(yaml, "CSafeLoader", None) is None:
        pytest.skip("PyYAML here has no libyaml (the pure-Python case covers spurinv on this machine)")
    if not libyaml:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)

    with pytest.raises(cdispec.SpecError, match=r"YAML alias \*edits at line 6 refused"):
        cdispec.parse_spec(ALIAS, True)
    assert cdispec.parse_spec(AMPERSAND, True) == [("example.com/fpga", "a", ["/dev/a&b"])]
