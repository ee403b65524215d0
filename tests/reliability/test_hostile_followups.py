"""Hostile input, follow-ups (the attacker's second look at the fixes): each test
reproduces one problem found after the first round and failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spurinv.inventory.sources import cdi, cdispec

# --- a lone surrogate or an invalid escape in a CDI spec (item 1) --------------------------------

SURROGATE_SPECS = {
    "json-path": (
        '{"cdiVersion":"0.6.0","kind":"x.com/g","devices":[{"name":"a",'
        '"containerEdits":{"deviceNodes":[{"path":"/dev/\\udc00"}]}}]}',
        False,
    ),
    "json-key": ('{"cdiVersion":"0.6.0","kind":"x.com/g","\\ud800":1,"devices":[{"name":"a"}]}', False),
    "yaml-path": (
        'cdiVersion: "0.6.0"\nkind: x.com/h\ndevices:\n- name: a\n  containerEdits:\n'
        '    deviceNodes:\n    - path: "/dev/\\udc00"\n',
        True,
    ),
    "yaml-name": ('cdiVersion: "0.6.0"\nkind: x.com/h\ndevices:\n- name: "\\ud800"\n', True),
    "version-digits": ('{"cdiVersion":"0.6.%s","kind":"x.com/g","devices":[{"name":"a"}]}' % ("0" * 5000), False),
}


@pytest.mark.parametrize("pure", [False, True], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize("case", sorted(SURROGATE_SPECS))
def test_a_cdi_spec_with_a_lone_surrogate_or_a_huge_number_is_refused_not_kept(case, pure, monkeypatch):
    """``"\\udc00"`` is valid JSON (and PyYAML's pure-Python scanner makes one of it): a device
    path holding one reached the state file and the output, and every run exited 70."""
    text, yaml_format = SURROGATE_SPECS[case]
    if pure:
        import yaml

        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)  # a PyYAML without libyaml
    with pytest.raises(cdispec.SpecError) as raised:
        cdispec.parse_spec(text, yaml_format)
    message = str(raised.value)
    message.encode("utf-8")  # the message itself is valid text
    assert "\\u" not in message or "surrogate" in message
    assert len(message) < 200


@pytest.mark.parametrize("case", ["json-path", "yaml-path", "version-digits"])
def test_a_cdi_spec_with_a_lone_surrogate_is_a_flag_naming_the_file_and_the_run_goes_on(
    case, root_copy, state_path, spurinv_here
):
    root = root_copy("mi300x-spx")
    text, yaml_format = SURROGATE_SPECS[case]
    spec = root / "etc" / "cdi" / ("hostile.yaml" if yaml_format else "hostile.json")
    spec.write_text(text)

    discovered = spurinv_here("discover", "--json", "--root", root)
    ran = spurinv_here("refresh", "--json", "--root", root, "--state", state_path)

    assert discovered.code == 0, discovered
    flags = [flag for flag in json.loads(discovered.out)["flags"] if flag["path"].endswith(spec.name)]
    assert flags, json.loads(discovered.out)["flags"]
    assert flags[0]["source"] == "cdi", flags
    assert ran.code == 0, ran
    assert json.loads(state_path.read_text())  # saved, and valid UTF-8
    assert "Traceback" not in ran.err + discovered.err


# --- the metrics file over the state, its lock or the config, by another name (item 2) ------------


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


# --- CDI flags and names grow the state past what its loader reads (item 4) ----------------------


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


def test_a_state_past_what_the_loader_reads_is_never_written(tmp_path):
    """The last line of defence: whatever grew the state, the previous file stays as it was."""
    from spurinv.state import store

    path = tmp_path / "state.json"
    path.write_bytes(b"{}\n")

    with pytest.raises(store.StoreError, match="more than the 16 MiB"):
        store.write_state(str(path), b" " * (store.MAX_STATE + 1))
    assert path.read_bytes() == b"{}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


# --- the state directory's parents (item 9) ---------------------------------------------------------


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


# --- what YAML specs cost a run (item 12) ----------------------------------------------------------


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


# --- one line, no Python spelling of bytes (item 11) -------------------------------------------------


def test_a_broken_chunked_answer_is_one_line_without_python_reprs(tmp_path):
    """A server that sends a bad chunk length: requests says ``ChunkedEncodingError(ProtocolError(
    ('Connection broken: InvalidChunkLength(got length b'zz', 0 bytes read)', …)))``; the run's
    line said the tuple, with ``b'zz'``."""
    import socket
    import threading

    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller
    from spurinv.errors import ControllerError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        settings = ControllerSection(url=f"http://127.0.0.1:{port}", api="slurm/v0.0.42", timeout=5)
        with pytest.raises(ControllerError) as raised:
            Controller(settings, "n1", None).view()
    finally:
        thread.join(timeout=10)
        listener.close()

    message = raised.value.message
    assert "\n" not in message
    assert "b'" not in message
    assert "/slurm/v0.0.42/node/n1" in message
