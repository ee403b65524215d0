"""The state file: round trip, two readings, atomic writes (never past what the loader reads),
the lock, corrupt and newer files; each structure of the file pinned to its schema_version."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from effort import examples
from factories import at, inventory, new_state, packages, reading, with_reading
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from spurinv.inventory import model
from spurinv.shape import SCHEMA_VERSION
from spurinv.state import file as state_file
from spurinv.state import store, vouch
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


# --- a change of the file's structure is a new schema_version ----------------------------------

# What the structure digest reads of a JSON Schema: what a file must be to load. The words for
# people are left out (they stay free to change); a keyword named nowhere here fails the digest
# rather than being skipped unseen.
PROSE = frozenset({"title", "description", "default", "examples", "$comment"})
KINDS = ("type", "format", "enum", "const", "maxItems", "minItems", "maxLength", "minLength", "pattern", "minimum",
         "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems")  # fmt: skip
WALKED = frozenset({"$defs", "$ref", "anyOf", "properties", "required", "additionalProperties", "items", "prefixItems"})
HISTORY = re.compile(r"^    (\d+) (?:\(structure ([0-9a-f]{16})\) )?— ", re.MULTILINE)


def structure(schema: dict[str, Any]) -> list[str]:
    """The key paths of a file ``schema`` describes and what each may hold, one line each
    (``$.last.at {"format": "date-time", "type": "string"}``, ``$.last.at required``), sorted:
    ``$ref`` followed (a TypedDict renamed is the same file), ``anyOf``'s alternatives as lines of
    the same path, an enum's values sorted (neither order changes what loads)."""
    lines: set[str] = set()

    def walk(node: dict[str, Any], path: str, within: tuple[str, ...]) -> None:
        unknown = set(node) - PROSE - WALKED - set(KINDS)
        if unknown:
            raise ValueError(f"{path}: {sorted(unknown)}: say in tests/test_state.py what they mean to a file's structure")
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            if name in within:
                lines.add(f"{path} recursive {len(within) - within.index(name)}")
            else:
                walk(schema["$defs"][name], path, (*within, name))
        for alternative in node.get("anyOf", ()):
            walk(alternative, path, within)
        kind = {key: node[key] for key in KINDS if key in node}
        if "enum" in kind:
            kind["enum"] = sorted(kind["enum"], key=json.dumps)
        if kind:
            lines.add(f"{path} {json.dumps(kind, sort_keys=True)}")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            walk(extra, f"{path}.*", within)
        elif extra is not None:
            lines.add(f"{path} additionalProperties {json.dumps(extra)}")
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}", within)
        lines.update(f"{path}.{name} required" for name in node.get("required", ()))
        if "items" in node:
            walk(node["items"], f"{path}[]", within)
        for index, item in enumerate(node.get("prefixItems", ())):
            walk(item, f"{path}[{index}]", within)

    walk(schema, "$", ())
    return sorted(lines)


def structure_digest(schema: dict[str, Any]) -> str:
    return hashlib.sha256("\n".join(structure(schema)).encode()).hexdigest()[:16]


def test_the_state_files_structure_is_the_one_its_schema_version_pins():
    """A key an older spurinv does not know (or a type, a value, a bound it does not accept) makes
    it call the file corrupt and move it aside, its drain and baseline with it; a newer
    ``schema_version`` makes it refuse the file untouched (65). So each structure is a version:
    the schema history in ``state/file.py`` pins the current one's digest."""
    digest = structure_digest(json.loads(Path(vouch.SCHEMA_FILE).read_text()))
    pinned = {int(version): pin for version, pin in HISTORY.findall(state_file.__doc__ or "")}
    line = f"`{SCHEMA_VERSION + 1} (structure {digest}) — <what changed>`"

    assert max(pinned, default=0) <= SCHEMA_VERSION, (
        f"state/file.py's schema history goes past shape.SCHEMA_VERSION {SCHEMA_VERSION}"
    )
    assert pinned.get(SCHEMA_VERSION), (
        f"schema_version {SCHEMA_VERSION} pins no structure in state/file.py's schema history: its line must begin "
        f"`{SCHEMA_VERSION} (structure {digest}) — `"
    )
    assert pinned[SCHEMA_VERSION] == digest, (
        f"the state file's structure changed (digest {digest}, pinned {pinned[SCHEMA_VERSION]} for schema_version "
        f"{SCHEMA_VERSION}): bump shape.SCHEMA_VERSION, add {line} to the schema history in state/file.py, run "
        "scripts/schemas; else an older spurinv calls the new file corrupt and moves it aside (a key it does not "
        "know), where a newer schema_version makes it refuse the file untouched"
    )


def test_the_structure_digest_reads_what_loads_and_nothing_else():
    """Words for people and the names of the schema's definitions may change; any key, type, value
    or bound a file may hold changes the digest."""
    schema = json.loads(Path(vouch.SCHEMA_FILE).read_text())
    digest = structure_digest(schema)

    def changed(edit: Callable[[dict[str, Any]], None]) -> str:
        copy = json.loads(json.dumps(schema))
        edit(copy)
        return structure_digest(copy)

    def reworded(copy: dict[str, Any]) -> None:
        copy["description"] = "Everything spurinv remembers between runs."
        copy["$defs"]["Decision"]["title"] = "Decision"
        copy["$defs"]["Decision"]["properties"]["at"]["description"] = "when"

    def renamed(copy: dict[str, Any]) -> None:
        copy["$defs"]["LastDecision"] = copy["$defs"].pop("Decision")
        copy["properties"]["last"]["anyOf"][0]["$ref"] = "#/$defs/LastDecision"

    def alternatives_swapped(copy: dict[str, Any]) -> None:
        copy["properties"]["last"]["anyOf"].reverse()
        copy["$defs"]["Intent"]["properties"]["kind"]["enum"].reverse()

    def key_added(copy: dict[str, Any]) -> None:
        copy["$defs"]["Decision"]["properties"]["added_by_this_test"] = {"type": "string"}

    def type_widened(copy: dict[str, Any]) -> None:
        copy["properties"]["fresh"] = {"anyOf": [{"type": "boolean"}, {"type": "null"}]}

    def value_added(copy: dict[str, Any]) -> None:
        copy["$defs"]["Intent"]["properties"]["kind"]["enum"].append("delete")

    def bound_raised(copy: dict[str, Any]) -> None:
        copy["properties"]["readings"]["maxItems"] = 3

    def key_required(copy: dict[str, Any]) -> None:
        copy["$defs"]["Decision"]["required"].append("actions")

    def unknown_keyword(copy: dict[str, Any]) -> None:
        copy["$defs"]["Decision"]["properties"]["at"]["oneOf"] = []

    assert [changed(edit) for edit in (reworded, renamed, alternatives_swapped)] == [digest] * 3
    moved = [changed(edit) for edit in (key_added, type_widened, value_added, bound_raised, key_required)]
    assert digest not in moved
    assert len(set(moved)) == len(moved)
    with pytest.raises(ValueError, match=r"\$\.last\.at: \['oneOf'\]"):
        changed(unknown_keyword)
