"""A state file bound to its boot, and skew only against a time we had.

A state restored from a golden image or a rolled-back snapshot (another boot) must not blind the
run: our drain on the controller is found and lifted. The real full refresh runs against
``faultserver.Gateway`` (``test_intent.Node``), and the timer's tick on the same files.
"""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
import rootbuilder as rb
from hypothesis import given
from hypothesis import strategies as st
from test_intent import Node, adopted, busy_drain_scenario, settle_after_revert  # tests/ is on sys.path

from spurinv.controller.ownership import drain_skew
from spurinv.inventory.root import BOOT_ID, boot_id
from spurinv.state import file as state_file
from spurinv.state import ledger


def boot(node: Node, tmp_path, name: str | None = None) -> str:
    """Give both roots of ``node`` a boot id (a new one: a reboot). Returns it."""
    value = name or str(uuid.uuid4())
    for label, root in list(node.roots.items()):
        if not str(root).startswith(str(tmp_path)):
            copy = tmp_path / "roots" / label
            copy.parent.mkdir(exist_ok=True)
            rb.copy_root(root, copy)
            node.roots[label] = copy
        target = node.roots[label] / BOOT_ID
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
    return value


def test_a_state_restored_from_before_our_drain_does_not_hide_it(tmp_path, built):
    """A golden image (or snapshot) taken while the node was calm is restored after spurinv
    drained it: the state says "no drain" and the tick's memo says "nothing to do". The first
    run under the new boot reads the controller, recovers our drain and lifts it."""
    node = adopted(tmp_path, built)
    boot(node, tmp_path)
    node.tick("spx")
    node.tick("spx")
    golden = node.state_path.read_bytes()
    assert json.loads(golden)["steady"] is not None  # the image carries a fast-path memo
    busy_drain_scenario(node)
    node.tick("cpx")
    assert "DRAIN" in node.controller["state"]

    node.state_path.write_bytes(golden)  # restored; and the node rebooted
    boot(node, tmp_path)
    node.busy(0)
    first = node.tick("spx")

    actions = [step["action"] for step in first["steps"]]
    assert "recover" in actions, actions
    assert any("another boot" in note for note in first["notes"])
    actions += settle_after_revert(node)
    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]
    assert node.state()["drain"] is None


def test_a_state_of_this_boot_is_trusted_and_the_memo_holds(tmp_path, built):
    node = adopted(tmp_path, built)
    value = boot(node, tmp_path)
    node.tick("spx")
    document = node.tick("spx")

    assert not document["notes"]
    assert node.state()["boot_id"] == value
    assert f"|boot={value}" in node.state()["steady"]["key"]


def test_the_ticks_memo_is_keyed_on_the_boot():
    key = ledger.steady_key("/", "c", None, None, "h", "0" * 8 + "-0000-0000-0000-" + "0" * 12)

    assert key != ledger.steady_key("/", "c", None, None, "h", "1" * 8 + "-0000-0000-0000-" + "0" * 12)
    assert ledger.steady_key("/", "c", None, None, "h") == ledger.steady_key("/", "c", None, None, "h", "")


@given(
    st.one_of(
        st.binary(max_size=80), st.uuids().map(lambda u: f"{u}\n".encode()), st.uuids().map(lambda u: str(u).upper().encode())
    )
)
def test_a_boot_id_is_a_uuid_or_nothing(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("boot")
    target = root / BOOT_ID
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    value = boot_id(str(root))

    text = data[:64].decode("ascii", "replace").strip()
    try:
        canonical = str(uuid.UUID(text)) == text
    except ValueError:
        canonical = False
    assert value == (text if canonical else "")


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "missing"])
def test_a_boot_id_that_is_no_regular_file_is_none(tmp_path, kind):
    import os

    target = tmp_path / BOOT_ID
    target.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        (tmp_path / "real").write_text(str(uuid.uuid4()))
        target.symlink_to(tmp_path / "real")
    elif kind == "directory":
        target.mkdir()

    assert boot_id(str(tmp_path)) == ""  # and it returned: a FIFO is never waited on


# --- skew only against a time we had ----------------------------------------------------------------


def test_a_drain_recovered_from_its_reason_alone_reports_no_skew(tmp_path, built):
    """No state, no record (a controller without extra): the drain is found by its id, but the
    time we wrote it is unknown, so no clock skew may be computed against "now"."""
    node = adopted(tmp_path, built, skew=0)
    del node.controller["extra"]
    busy_drain_scenario(node)
    node.tick("cpx")
    shutil.rmtree(node.state_path.parent)
    node.state_path.parent.mkdir(mode=0o700)

    found = node.tick("cpx", minutes=600)  # ten hours later: "now" is far from the reason time

    drain = node.state()["drain"]
    assert drain is not None
    assert drain["recovered"] == "reason"
    assert state_file.drain_skew(drain) is None
    assert not any("clock skew" in note for note in found["notes"])
    assert drain_skew(json.loads(node.state_path.read_text())["drain"]) is None


def test_a_drain_recovered_from_the_record_still_reports_skew():
    drain = {"reason": "x", "set_at": "2026-12-03T09:00:00Z", "cause": "busy", "reason_changed_at": 1796288400 + 3600,
             "recovered": "controller-record"}  # fmt: skip

    assert drain_skew(drain) == 3600
    assert drain_skew({**drain, "recovered": "reason"}) is None
