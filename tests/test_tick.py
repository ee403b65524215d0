"""The timer's fast path: same answer as the full run, no heavy imports, no network."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vouch import mutated

from spurinv import jsontext
from spurinv.cli import tick
from spurinv.cli.launch import lean_options
from spurinv.inventory.discovery import discover
from spurinv.state import file as state_file
from spurinv.state import ledger, vouch

HEAVY = ("pydantic", "typer", "rich", "requests")


def steady(cli, root, state_path):
    for _ in range(2):
        result = cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")
        assert 0 == result.code, result.err
    raw = json.loads(state_path.read_text())
    assert raw["steady"] is not None
    return raw


# `python -m spurinv` whose built-in default config path is ``argv[1]``: "no config file on this
# machine" without depending on the host's /etc/spurinv (an installed config there
# turned the lean discover path into the full one, and this test red).
WITHOUT_HOST_CONFIG = (
    "import sys; from spurinv.state import locations; locations.DEFAULT_CONFIG = sys.argv.pop(1);"
    " from spurinv.cli.launch import main; sys.exit(main(sys.argv[1:]))"
)


def imported(env, *args, default_config=None):
    """Run spurinv with -X importtime; return (exit code, stdout, top-level modules imported)."""
    entry = ["-m", "spurinv"] if default_config is None else ["-c", WITHOUT_HOST_CONFIG, str(default_config)]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *entry, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    modules = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    return result.returncode, result.stdout, modules


def test_a_no_change_tick_imports_nothing_heavy(cli, built, state_path, env):
    root = built("mi300x-cpx")
    steady(cli, root, state_path)

    code, out, modules = imported(env, "refresh", "--root", root, "--state", state_path)

    assert 0 == code
    assert out.startswith("unchanged: 64 devices")
    assert not modules & set(HEAVY), modules & set(HEAVY)
    assert "socket" not in modules
    assert "http" not in modules
    # json and re (with enum, functools, collections) were a sixth of the tick's CPU: bench/run --tick-ratio
    assert not modules & {"re", "json", "enum", "typing", "dataclasses"}, modules & {"re", "json", "enum"}
    # importing __future__ (for `annotations`) was 0.6 M instructions of 80 M: the tick's modules quote instead
    assert "__future__" not in modules


def test_a_no_change_tick_that_writes_metrics_imports_nothing_heavy_either(cli, built, state_path, env, tmp_path):
    """Most nodes run the timer with --metrics-file (node_exporter's textfile collector)."""
    root = built("mi300x-cpx")
    metrics_file = tmp_path / "spurinv.prom"
    for _ in range(2):
        assert 0 == cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0",
                        "--metrics-file", metrics_file).code  # fmt: skip
    metrics_file.unlink()

    code, out, modules = imported(env, "refresh", "--root", root, "--state", state_path, "--metrics-file", metrics_file)

    assert (code, out[:21]) == (0, "unchanged: 64 devices")
    assert "spurinv_last_success_timestamp_seconds " in metrics_file.read_text()  # written by this tick
    assert not modules & set(HEAVY), modules & set(HEAVY)
    # reading two times with calendar and time.strptime loaded datetime, re and locale: 24 modules
    slow = {"re", "json", "enum", "typing", "dataclasses", "calendar", "datetime", "locale", "_strptime", "__future__"}
    assert not modules & slow, modules & slow


# The console script's call: main() reads sys.argv; "returned" is printed only if main() returns.
ENTRY = "import sys; from spurinv.cli.launch import main; code = main(); print('returned', code)"


def test_a_process_the_tick_answered_ends_without_the_teardown(cli, built, state_path, env):
    """The lean tick ends its own process (os._exit, streams flushed): its output and status are
    whole, and nothing after main() runs. With an exit hook registered, main() returns as before."""
    root = built("mi300x-spx")
    steady(cli, root, state_path)
    args = ["refresh", "--root", str(root), "--state", str(state_path)]

    plain = subprocess.run([sys.executable, "-c", ENTRY, *args], capture_output=True, text=True, env=env, check=False)
    hooked = subprocess.run(
        [sys.executable, "-c", "import atexit; atexit.register(print, 'hook'); " + ENTRY, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    handed = subprocess.run(
        [sys.executable, "-c", ENTRY.replace("main()", "main(sys.argv[1:])"), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )

    assert (plain.returncode, plain.stderr) == (0, "")
    assert plain.stdout.startswith("unchanged: ")
    assert plain.stdout.count("\n") == 1, plain.stdout
    assert hooked.returncode == 0
    assert hooked.stdout.startswith("unchanged: ")
    assert hooked.stdout.endswith("\nreturned 0\nhook\n"), hooked.stdout
    assert handed.stdout.endswith("\nreturned 0\n"), handed.stdout  # a caller that passes argv gets its answer


def test_status_json_and_discover_json_are_lean_too(cli, built, state_path, env, tmp_path):
    steady(cli, built("mi300x-spx"), state_path)
    lean_env = {k: v for k, v in env.items() if k != "SPURINV_CONFIG"}

    for args, environ in (
        (("status", "--state", state_path, "--json"), env),
        (("discover", "--root", built("mi300x-spx"), "--json"), lean_env),
    ):
        code, out, modules = imported(environ, *args, default_config=tmp_path / "no-config.toml")
        assert 0 == code
        assert json.loads(out)["ok"]
        assert not modules & set(HEAVY), (args[0], modules & set(HEAVY))


def test_the_fast_tick_writes_a_state_the_full_model_accepts(cli, built, state_path):
    root = built("mi300x-cpx")
    before = steady(cli, root, state_path)

    result = cli("refresh", "--root", root, "--state", state_path)
    after = state_file.load(str(state_path))

    assert result.out.startswith("unchanged")
    assert after["readings"][-1]["taken_at"].isoformat() >= before["readings"][-1]["taken_at"][:19]
    assert after["steady"] is not None
    assert after["last"]["outcome"] == "unchanged"


def test_a_changed_root_falls_through_to_the_full_run(cli, built, state_path):
    steady(cli, built("mi300x-spx"), state_path)

    result = cli("refresh", "--root", built("mi300x-cpx"), "--state", state_path, "--confirm-interval", "0")

    assert "change-pending" in result.out, result.out + result.err
    assert json.loads(state_path.read_text())["steady"] is None


def test_a_changed_config_file_falls_through(cli, built, state_path, env, tmp_path):
    root = built("mi300x-spx")
    steady(cli, root, state_path)
    with open(env["SPURINV_CONFIG"], "a") as handle:
        handle.write("[policy]\nconfirm_interval = 0\n")

    result = cli("refresh", "--root", root, "--state", state_path)

    assert "spurinv refresh, node" in result.out  # the full run's rendering, not the one-liner


def test_a_failed_metrics_write_after_the_state_write_is_reported_not_handed_over(cli, built, state_path, env, capsys):
    """the tick used to write the state, fail on the metrics, and start the full run
    over (two discoveries, two writes). Now it stops with the full run's exit status."""
    from spurinv.cli import tick

    root = built("mi300x-spx")
    missing = state_path.parent / "no-such-dir" / "m.prom"
    args = ("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0", "--metrics-file", missing)
    cli(*args)
    assert 73 == cli(*args).code  # the full run: state saved, memo left, metrics not writable
    before = json.loads(state_path.read_text())
    assert before["steady"] is not None
    capsys.readouterr()

    code = tick.run({"--root": str(root), "--state": str(state_path), "--metrics-file": str(missing)}, env)

    err = capsys.readouterr().err
    after = json.loads(state_path.read_text())
    assert 73 == code
    assert 1 == len(err.splitlines()), err
    assert str(missing) in err
    assert after["readings"][-1]["taken_at"] >= before["readings"][-1]["taken_at"]
    assert after["steady"] == before["steady"]


def test_a_memo_left_under_another_node_name_is_not_replayed(cli, built, state_path, env, tmp_path):
    from spurinv.cli import tick

    root = built("mi300x-spx")
    metrics_file = tmp_path / "m.prom"
    for _ in range(2):
        assert 0 == cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0",
                        "--node", "x1", "--metrics-file", metrics_file).code  # fmt: skip
    assert 'node="x1"' in metrics_file.read_text()
    plain = {"--root": str(root), "--state": str(state_path), "--metrics-file": str(metrics_file)}

    assert tick.run({**plain, "--node": "x1"}, env) == 0
    assert tick.run(plain, env) is None  # the full run decides, and labels the metrics with its own node name


def test_lean_option_parsing_is_conservative():
    assert ("refresh", {"--root": "/x"}) == lean_options(["refresh", "--root", "/x"])
    assert ("refresh", {"--root": "/x"}) == lean_options(["refresh", "--root=/x"])
    assert ("status", {"--json": "1"}) == lean_options(["status", "--json"])
    assert lean_options(["status"]) is None  # people get the rich table from the full CLI
    assert lean_options(["refresh", "--dry-run"]) is None
    assert lean_options(["refresh", "--root"]) is None
    assert lean_options(["refresh", "--root", "/a", "--root", "/b"]) is None
    assert lean_options(["refresh", "--json=1"]) is None
    assert lean_options(["discover", "--root", "--json"]) is None


CORRUPTIONS = {
    "a field of the wrong type": lambda s: s.update(consecutive_failures="many"),
    "a bad timestamp": lambda s: s["readings"][-1].update(taken_at="2026-02-30T18:00:00Z"),
    "an unknown enum value": lambda s: s["baseline"].update(source="guessed"),
    "an unknown drain cause": lambda s: s.update(
        drain={"reason": "spurinv: x", "set_at": "2026-12-02T18:00:00Z", "cause": "bored"}
    ),
    "a field the model does not know": lambda s: s.update(seal="x"),
    "a fingerprint that is not the devices'": lambda s: s["baseline"]["inventory"].update(cpus=1),
    "a reading ok with errors": lambda s: s["readings"][-1].update(errors=[{"source": "pci", "path": "", "reason": "x"}]),
    "a word for the last exit code": lambda s: s["last"].update(exit_code="zero"),
    "a string where a list of readings belongs": lambda s: s.update(readings="ab"),
}


def _steady_state(cli, root, state: Path) -> dict:
    import json

    for _ in range(2):
        assert cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0").code == 0
    return json.loads(state.read_text())


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=list(CORRUPTIONS))
def test_lean_and_full_status_agree_on_a_corrupt_state(cli, built, state_path, capsys, corruption):
    """``status --json`` on the lean path checked only schema_version and said ok: true where the
    full CLI said exit 65."""
    import json

    from spurinv.cli import app as full
    from spurinv.cli.launch import main

    state = _steady_state(cli, built("mi300x-spx"), state_path)
    CORRUPTIONS[corruption](state)
    state_path.write_text(json.dumps(state))
    args = ["status", "--json", "--state", str(state_path)]
    capsys.readouterr()

    lean_code = main(args)
    lean = json.loads(capsys.readouterr().out)
    full_code = full.run(args)
    whole = json.loads(capsys.readouterr().out)

    assert (lean_code, lean["ok"]) == (full_code, whole["ok"]) == (65, False)
    assert lean == whole


def test_lean_status_still_serves_a_valid_state(cli, built, state_path, monkeypatch):
    """The check hands over only what it cannot vouch for: a state spurinv wrote is served lean."""
    import spurinv.cli.app

    _steady_state(cli, built("mi300x-spx"), state_path)
    monkeypatch.setattr(spurinv.cli.app, "run", lambda args: pytest.fail(f"handed over: {args}"))

    result = cli("status", "--json", "--state", state_path)

    assert result.code == 0
    assert result.json()["ok"] is True


@pytest.mark.parametrize("corruption", ["a field of the wrong type", "a bad timestamp", "an unknown drain cause"])
def test_the_tick_hands_a_state_the_model_refuses_to_the_full_run(cli, built, state_path, env, corruption):
    """The fast tick replayed the memo and rewrote the file with the invalid fields carried on;
    the full run moves such a file aside and starts afresh."""
    import json

    from spurinv.cli import tick
    from spurinv.state import file as state_file

    root = built("mi300x-spx")
    state = _steady_state(cli, root, state_path)
    CORRUPTIONS[corruption](state)
    state_path.write_text(json.dumps(state))
    before = state_path.read_bytes()

    assert tick.run({"--root": str(root), "--state": str(state_path)}, env) is None
    assert state_path.read_bytes() == before  # the tick wrote nothing

    result = cli("refresh", "--root", root, "--state", state_path)

    moved = list(state_path.parent.glob("state.json.corrupt-*"))
    assert result.code == 0, result.err
    assert len(moved) == 1
    assert moved[0].read_bytes() == before
    assert "corrupt state file" in result.err
    assert state_file.load(str(state_path)) is not None  # what is there now, the model accepts


def test_the_tick_serves_an_unchanged_cdi_spec_from_its_cache_and_rereads_a_changed_one(cli, state_path, tmp_path, monkeypatch):
    """The cache beside the state names the spec by the BLAKE2b of its bytes; the same spec swapped
    for another of the same size and mtime (a new inode) is read again, and the tick records what
    a run without the cache finds."""
    import rootbuilder as rb

    from spurinv.inventory.discovery import discover
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources import cdi
    from spurinv.state import locations

    root = rb.build_mi300x(tmp_path / "root", "SPX")
    spec = root / "etc" / "cdi" / "amd.json"
    steady(cli, root, state_path)
    cache_path = Path(str(state_path) + locations.CDI_CACHE)
    assert not cache_path.exists()  # the full run neither reads nor writes it

    first = cli("refresh", "--root", root, "--state", state_path)
    assert first.out.startswith("unchanged"), first.out + first.err
    assert str(spec) in cdi.SpecCache.from_text(cache_path.read_bytes()).known

    data = json.loads(spec.read_text())
    data["devices"][0]["name"] = "x"  # a name of the same length: amd.com/gpu=x for the first GPU
    text = json.dumps(data, separators=(",", ":"))
    old = spec.stat()
    assert len(text) <= old.st_size
    swapped = spec.with_name("swapped")
    swapped.write_text(text + " " * (old.st_size - len(text)))
    os.utime(swapped, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(swapped, spec)

    second = cli("refresh", "--root", root, "--state", state_path)
    assert second.out.startswith("unchanged"), second.out + second.err
    recorded = json.loads(state_path.read_text())["readings"][-1]
    fresh = discover(Root(str(root)))
    assert fresh["inventory"] is not None
    assert [d["cdi_names"] for d in recorded["inventory"]["devices"]] == [d["cdi_names"] for d in fresh["inventory"]["devices"]]
    assert "amd.com/gpu=x" in recorded["inventory"]["devices"][0]["cdi_names"]
    assert recorded["flags"] == fresh["flags"]


def test_the_tick_records_a_spec_changed_through_a_shared_mapping(cli, state_path, tmp_path):
    """A write through a writable shared mapping to a page already dirty moves no timestamp (ext4,
    tmpfs where /run/cdi lives): a cache that trusted the spec's inode, size and times recorded
    the old spec for as long as the file stayed so. The tick must record what a full run finds."""
    import mmap

    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    spec = root / "etc" / "cdi" / "nvidia.yaml"
    data = spec.read_bytes()
    edited = data.replace(b'name: "0"', b'name: "7"', 1)
    assert len(edited) == len(data)
    assert edited != data
    with open(spec, "r+b") as file, mmap.mmap(file.fileno(), 0) as mapping:
        mapping[:] = data  # every page dirty: the one time update the mapping's writes get
        steady(cli, root, state_path)
        assert cli("refresh", "--root", root, "--state", state_path).out.startswith("unchanged:")  # the tick
        assert Path(f"{state_path}.cdi").is_file()  # it cached the spec
        before = spec.stat()
        mapping[:] = edited
    assert spec.read_bytes() == edited
    assert spec.stat().st_ctime_ns == before.st_ctime_ns  # the premise: the kernel did not move it

    assert cli("refresh", "--root", root, "--state", state_path).out.startswith("unchanged:")

    state = json.loads(state_path.read_text())
    names = [name for device in state["readings"][-1]["inventory"]["devices"] for name in device["cdi_names"]]
    assert "nvidia.com/gpu=7" in names


def test_the_full_run_removes_a_killed_ticks_cache_temporary(cli, state_path, tmp_path):
    """A tick killed between writing ``<state>.cdi.tmp-<pid>`` and renaming it (the unit's stop,
    SIGKILL, a power cut) leaves that file; the full run, under the lock, removes it with the
    state file's own temporaries, or they would pile up, one a killed tick."""
    import rootbuilder as rb

    root = rb.build_nvidia_cdi(tmp_path / "root")
    state_path.parent.mkdir(mode=0o700, exist_ok=True)
    state_leftover = Path(f"{state_path}.tmp-999999")
    cache_leftover = Path(f"{state_path}.cdi.tmp-999998")
    state_leftover.write_bytes(b"{")
    cache_leftover.write_bytes(b"0" * 64 + b"\n{}\n")

    result = cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0", "-q")

    assert result.code == 0, result.err
    assert not state_leftover.exists()
    assert not cache_leftover.exists()


def test_the_tick_answers_a_mutated_state_file_as_it_would_check_it_in_full(cli, built, state_path, env, monkeypatch, tmp_path):
    """Property: with its shortcuts (a discovery before the file is read, an inventory stored as the
    fresh discovery's own text neither parsed nor checked again) or without them, a tick hands
    over or writes the same, on state files edited anywhere (their inventories, the memo, the
    books), as the tick writes them.

    An edit may give the memo any string of the file as its metrics file ("amdgpu", "/dev/kfd"),
    which the tick then writes: the run works in a directory of its own, and an absolute one is
    moved under it, so the host is left alone."""
    monkeypatch.chdir(tmp_path)
    root = built("mi300x-dpx")
    base = steady(cli, root, state_path)
    lean = lean_options(["refresh", "--root", str(root), "--state", str(state_path)])
    assert lean is not None
    monkeypatch.setattr(ledger, "now_text", lambda: "2026-12-05T10:00:00Z")  # both runs write the same time
    taken: list[bool] = []
    problem = vouch.problem

    def spied(state: object, discovered: object = None) -> str | None:
        taken.append(discovered is not None)
        return problem(state, discovered)

    @settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        edited = mutated(base, data.draw)
        memo = edited.get("steady")
        if isinstance(memo, dict) and isinstance(memo.get("metrics_file"), str) and memo["metrics_file"].startswith("/"):
            memo["metrics_file"] = str(tmp_path / "elsewhere") + memo["metrics_file"]
        blob = (jsontext.dumps(edited) + "\n").encode()
        answers = []
        for check_in_full in (False, True):
            state_path.write_bytes(blob)
            with monkeypatch.context() as patch:
                patch.setattr(vouch, "problem", (lambda state, _discovered=None: problem(state)) if check_in_full else spied)
                if check_in_full:  # and every inventory read from its text, the memo first
                    patch.setattr(tick, "_early", lambda *_args: None)
                code = tick.run(lean[1], env, io.StringIO())
            answers.append((code, state_path.read_bytes()))
        assert answers[0] == answers[1]

    check()
    assert any(taken), "no example took the shortcut"


@pytest.mark.parametrize("refused", [True, False])
def test_a_discovery_that_raises_on_a_refused_file_hands_over_as_before(cli, built, state_path, env, monkeypatch, refused):
    """Discovery now runs before the file is vouched for: should it raise what the tick does not
    expect, a file the check refuses still hands over (as when it was checked first), and only a
    file it accepts lets the error through."""
    root = built("vega10")
    state = steady(cli, root, state_path)
    if refused:
        state["readings"][-1]["taken_at"] = "yesterday"
        state_path.write_text(json.dumps(state))
    lean = lean_options(["refresh", "--root", str(root), "--state", str(state_path)])
    assert lean is not None

    def broken(*_args: object, **_kwargs: object) -> None:
        raise IndexError("a discovery bug")

    monkeypatch.setattr(tick, "discover", broken)
    if refused:
        assert tick.run(lean[1], env, io.StringIO()) is None
    else:
        with pytest.raises(IndexError, match="a discovery bug"):
            tick.run(lean[1], env, io.StringIO())


@pytest.mark.parametrize("body", ["other settings", "same settings", "no memo"])
def test_a_memo_guessed_wrong_from_the_text_is_not_the_one_discovered_under(cli, built, state_path, env, monkeypatch, body):
    """The tick discovers before it reads the file in full, under the memo the text's last
    ``"steady":`` seems to hold. When that is not the memo (here, a drain intent's body after it
    holds another), it discovers again under the real one: the same answer as reading first."""
    root = built("mi300x-dpx")
    state = steady(cli, root, state_path)
    first = state["readings"][-1]["inventory"]["devices"][0]["pci_bdf"]
    same = {"ignore_pci": [], "cdi_dirs": ["/run/cdi-x"]}
    memo = {"other settings": {"ignore_pci": [first]}, "same settings": same}.get(body, 5)
    state["steady"]["cdi_dirs"] = ["/run/cdi-x"]  # where no spec is: the same inventory on this root
    state["intent"] = {"kind": "drain", "body": {"steady": memo}, "at": "2026-12-05T10:00:00Z"}
    blob = (jsontext.dumps(state) + "\n").encode()
    lean = lean_options(["refresh", "--root", str(root), "--state", str(state_path)])
    assert lean is not None
    monkeypatch.setattr(ledger, "now_text", lambda: "2026-12-05T10:00:00Z")
    calls: list[tuple[object, frozenset[str]]] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append((kwargs["cdi_dirs"], kwargs["ignore_pci"]))
        return discover(*args, **kwargs)

    monkeypatch.setattr(tick, "discover", counted)
    answers = []
    for early in (True, False):
        state_path.write_bytes(blob)
        with monkeypatch.context() as patch:
            if not early:
                patch.setattr(tick, "_early", lambda *_args: None)
            answers.append((tick.run(lean[1], env, io.StringIO()), state_path.read_bytes()))

    assert answers[0] == answers[1]
    assert answers[0][0] == 0
    real: tuple[object, frozenset[str]] = (("/run/cdi-x",), frozenset())
    assert calls == {"other settings": [((), frozenset({first})), real, real]}.get(body, [real] * 2)


def test_a_module_the_tick_cannot_import_midway_hands_over(cli, state_path, tmp_path, monkeypatch, env):
    """A spec the cache does not hold is parsed by a module imported only then: should that import
    fail (a package being upgraded under a running tick), nothing is written and the full run
    takes over, as for any error before the tick's first write."""
    import rootbuilder as rb

    root = rb.build_mi300x(tmp_path / "root", "SPX")
    steady(cli, root, state_path)
    first = cli("refresh", "--root", root, "--state", state_path)
    assert first.out.startswith("unchanged"), first.out + first.err
    spec = root / "etc" / "cdi" / "amd.json"
    spec.write_text(spec.read_text() + "\n")  # the same spec, other bytes: not in the cache
    before = state_path.read_bytes()
    lean = lean_options(["refresh", "--root", str(root), "--state", str(state_path)])
    assert lean is not None

    monkeypatch.setitem(sys.modules, "spurinv.inventory.sources.cdispec", None)  # its import raises ImportError
    assert tick.run(lean[1], env, io.StringIO()) is None
    assert state_path.read_bytes() == before
