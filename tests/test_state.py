"""The state file: round trip, two readings, atomic writes (never past what the loader reads),
the lock, corrupt and newer files."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from effort import examples
from factories import at, inventory, new_state, packages, reading, with_reading
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from spurinv.inventory import model
from spurinv.state import file as state_file
from spurinv.state import store
from spurinv.state.ledger import now_text

SPX = inventory(packages(2, "SPX"))
CPX = inventory(packages(2, "CPX", per=8))


def test_round_trip_and_keeps_the_last_two_readings(tmp_path):
    path = str(tmp_path / "s" / "state.json")
    state = with_reading(with_reading(with_reading(new_state(), reading(SPX, 0)), reading(None, 60)), reading(CPX, 120))

    state_file.save(path, state)
    loaded = state_file.load(path)

    assert loaded == state
    assert [r["fingerprint"] for r in loaded["readings"]] == [None, CPX["fingerprint"]]
    assert loaded["consecutive_failures"] == 0
    assert loaded["last_success"] == at(120)


def test_files_are_0600_in_a_0700_directory(tmp_path):
    path = tmp_path / "new" / "state.json"

    state_file.save(str(path), new_state())

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"schema_version": 99, "future": True}))

    with pytest.raises(state_file.NewerSchema):
        state_file.load(str(path))


@pytest.mark.parametrize("text", ["", "{", "[]", '{"schema_version": 1, "readings": 5}', '{"schema_version": 1, "bogus": 1}'])
def test_corrupt_files_are_reported_with_the_path(tmp_path, text):
    path = tmp_path / "state.json"
    path.write_text(text)

    with pytest.raises(state_file.Corrupt) as caught:
        state_file.load(str(path))

    assert str(path) in str(caught.value)


def test_a_tampered_fingerprint_does_not_validate(tmp_path):
    path = tmp_path / "state.json"
    state_file.save(str(path), with_reading(new_state(), reading(SPX)))
    raw = json.loads(path.read_text())
    raw["readings"][0]["inventory"]["devices"][0]["model"] = "mi325x"
    path.write_text(json.dumps(raw))

    with pytest.raises(state_file.Corrupt, match="fingerprint"):
        state_file.load(str(path))


def test_the_state_path_is_not_followed_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    link = tmp_path / "state.json"
    link.symlink_to(target)

    with pytest.raises(store.StoreError, match="symlink"):
        store.read(str(link))
    state_file.save(str(link), new_state())  # replacing the link never writes through it

    assert target.read_text() == "{}"
    assert not link.is_symlink()


def test_quarantine_moves_the_file_aside(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("garbage")

    moved = store.quarantine(str(path), "20261202T180000Z")

    assert moved.endswith("state.json.corrupt-20261202T180000Z")
    assert not path.exists()
    assert Path(moved).read_text() == "garbage"


def test_the_lock_is_exclusive_and_names_only_a_spurinv_holder(tmp_path):
    """The holder here is pytest, not spurinv: it is not named (a live spurinv holder is, in
    tests/test_log.py and tests/reliability/test_hostile_inputs.py)."""
    path = str(tmp_path / "state.json")
    first = store.Lock(path, 0, "refresh")
    first.acquire()
    assert Path(path + ".lock").read_text().startswith(f"pid {os.getpid()} (refresh)")
    try:
        with pytest.raises(store.LockHeld, match=r"is held by another run; waited 0\.2 s"):
            store.Lock(path, 0.2, "diff").acquire()
    finally:
        first.release()
    second = store.Lock(path, 0, "refresh")
    second.acquire()
    second.release()


def test_the_lock_holds_only_the_new_holders_line(tmp_path):
    """Written over the previous holder's text and cut to length: nothing of a longer one is left."""
    path = str(tmp_path / "state.json")
    Path(path + ".lock").write_text("pid 99999999 (refresh, a much longer holder text) since 00:00:00\n" * 3)
    lock = store.Lock(path, 0, "diff")
    lock.acquire()
    try:
        text = Path(path + ".lock").read_text()
    finally:
        lock.release()

    assert text.startswith(f"pid {os.getpid()} (diff) since ")
    assert text.count("\n") == 1
    assert text.endswith("\n")


def test_a_waiting_run_gets_the_lock_when_it_is_released(tmp_path):
    path = str(tmp_path / "state.json")
    holder = store.Lock(path, 0, "refresh")
    holder.acquire()
    released = threading.Event()

    def release_soon():
        released.wait(5)
        holder.release()

    threading.Thread(target=release_soon).start()
    waiter = store.Lock(path, 10, "refresh")
    polls = []
    waiter.acquire(sleep=lambda s: (polls.append(s), released.set()))  # type: ignore[arg-type, func-returns-value]  # records, then releases

    assert polls  # it waited, then got it
    waiter.release()


def test_write_failure_leaves_the_old_file(tmp_path):
    path = tmp_path / "ro" / "state.json"
    state_file.save(str(path), new_state(node="old"))
    path.parent.chmod(0o500)
    try:
        if os.access(path.parent, os.W_OK):
            pytest.skip("running as root: a read-only directory is still writable (covered by the ENOSPC test)")
        with pytest.raises(store.StoreError):
            state_file.save(str(path), new_state(node="new"))
    finally:
        path.parent.chmod(0o700)
    assert state_file.load(str(path)).node == "old"


def test_a_state_past_what_the_loader_reads_is_never_written(tmp_path):
    """The last line of defence: whatever grew the state, the previous file stays as it was."""
    from spurinv.state import store

    path = tmp_path / "state.json"
    path.write_bytes(b"{}\n")

    with pytest.raises(store.StoreError, match="more than the 16 MiB"):
        store.write_state(str(path), b" " * (store.MAX_STATE + 1))
    assert path.read_bytes() == b"{}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_fast_path_reading_json_equals_pydantic_json():
    """The lean tick writes readings with plain json; they must validate to the same reading."""
    from spurinv.inventory.discovery import discover  # noqa: F401  (the same producer the tick uses)

    expected = reading(CPX)
    plain = {
        "taken_at": now_text(),
        "ok": True,
        "fingerprint": CPX["fingerprint"],
        "inventory": json.loads(json.dumps(CPX)),
        "errors": [],
        "flags": [],
    }

    adapter = TypeAdapter(model.ValidReading)
    parsed = adapter.validate_python(plain)

    assert parsed["inventory"] == expected["inventory"]
    assert json.loads(adapter.dump_json(parsed))["taken_at"] == plain["taken_at"]


@settings(max_examples=examples(100))
@given(sequence=st.lists(st.sampled_from([SPX, CPX, None]), max_size=8))
def test_record_keeps_at_most_two_and_counts_failures(sequence):
    state = new_state()
    for when, inv in enumerate(sequence):
        state = with_reading(state, reading(inv, when))
    failures = 0
    for inv in reversed(sequence):
        if inv is not None:
            break
        failures += 1

    assert len(state["readings"]) == min(2, len(sequence))
    assert state["consecutive_failures"] == failures


@pytest.mark.parametrize("version", ['"2"', "2.0", "true", "0"])
def test_a_schema_version_that_is_not_a_version_number_is_corrupt_and_never_rewritten_as_ours(tmp_path: Path, cli, version):
    state = tmp_path / "state.json"
    state.write_text('{"schema_version": ' + version + ', "readings": []}')

    lean = cli("status", "--state", state, "--json")
    full = cli("status", "--state", state)

    assert (lean.code, full.code) == (65, 65)
    assert json.loads(lean.out)["ok"] is False


# --- the records are plain dicts: never changed in place ---------------------------------------


def test_the_policy_and_the_journal_never_change_a_state_in_place():
    """The state's items are ReadOnly for mypy; this holds the pure steps to it at run time too:
    every state they are given (and every record in it) is as it was after the call."""
    import copy

    from test_policy import (  # tests/ is on sys.path
        BUSY,
        CPX,
        IDLE,
        LOOKALIKE,
        NHC_IDLE,
        NOW,
        OURS_BUSY,
        OURS_IDLE,
        SLURM,
        SPX,
        outcome_for,
        state_for,
    )

    from spurinv.policy import clamp_backoff, contacted, decide, forget_stale_refusal, settle, with_backoff
    from spurinv.state.intent import Journal, reconcile, recover

    states: list[state_file.State] = [
        state_for(SPX, CPX, CPX),
        state_for(SPX, SPX, SPX, drain=True),
        state_for(SPX, CPX, CPX, refusal=True, backoff=9999, drain=True),
        state_for(None, CPX, CPX, backoff=99_999, backoff_kind="unreachable"),
        {**state_for(SPX, CPX, CPX), "fresh": True, "intent": state_file.intent("drain", {"reason": "x"}, NOW)},
    ]
    checked = 0
    for state in states:
        for view in (None, IDLE, BUSY, OURS_IDLE, OURS_BUSY, NHC_IDLE, LOOKALIKE):
            before = copy.deepcopy(state)
            action = decide(outcome_for(state), view, state, SLURM, NOW)
            settle(state, action, NOW, applied=False, error="2072", settings=SLURM)
            settle(state, action, NOW)
            clamp_backoff(state, SLURM, at(0))
            forget_stale_refusal(state, outcome_for(state))
            contacted(state)
            with_backoff(state, "unreachable", "x", SLURM, NOW)
            Journal(None).begin(state, "drain", {"reason": "x"}, NOW)
            with_reading(state, reading(SPX, 900))
            if view is not None:
                reconcile(state, view)
                recover(state, view, NOW)
            assert state == before
            checked += 1
    assert checked == 35
