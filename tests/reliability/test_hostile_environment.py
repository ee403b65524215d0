"""The node's environment is hostile too: a Latin-1 locale, a metrics file over the
state, where the state directory comes from, and what CDI specs cost."""

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

# --- a Latin-1 locale (item 10) ----------------------------------------------------------------------


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


# --- the metrics file over the state (item 11) -------------------------------------------------------


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
    directory = tmp_path / "etc" / "cdi"  # JSON: YAML has its own, smaller budget (test_hostile_followups.py)
    directory.mkdir(parents=True)
    for index in range(4):
        spec = {"cdiVersion": "0.6.0", "kind": f"example.com/fpga{index:03d}", "devices": [{"name": "0"}], "pad": ""}
        spec["pad"] = "x" * (share - len(json.dumps(spec)))
        (directory / f"spec{index:03d}.json").write_text(json.dumps(spec))
    report = Report("cdi")

    found = cdi.read_cdi(Root(str(tmp_path)), report)

    assert [device["kind"] for device in found] == ["example.com/fpga000", "example.com/fpga001"]
    assert [flag["path"].rsplit("/", 1)[1] for flag in report.flags] == ["spec002.json"]


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
