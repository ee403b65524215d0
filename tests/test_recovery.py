"""Ownership that outlives the node: the controller carries spurinv's record.

The real full refresh runs in-process against ``faultserver.Gateway`` (the node of
``test_intent.Node``: a controller that stamps ``reason_changed_at`` with its own clock, which
may be ahead of or behind the node's), through state loss, clock skew, refusals and renames.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from typing import Any

import pytest
from test_intent import NONCE, Node, adopted, busy_drain_scenario, settle_after_revert  # tests/ is on sys.path

from spurinv import exitcode
from spurinv.controller.ownership import KEY, extra_record, reason_for
from spurinv.shape import SCHEMA_VERSION
from spurinv.state import file as state_file


def drained_busy(node: Node) -> str:
    """Busy node, GPUs switched: our drain goes on (and stays while the job runs). Its reason."""
    busy_drain_scenario(node)
    node.tick("cpx")
    assert "DRAIN" in node.controller["state"]
    return node.controller["reason"]


def steps(document: Any) -> list[str]:
    return [step["action"] for step in document["steps"]]


# --- clock skew -----------------------------------------------------------------------------------


@pytest.mark.parametrize("skew", [-3600, -400, 400, 3600])
def test_our_drain_is_lifted_whatever_the_controllers_clock_says(tmp_path, built, skew):
    """With the node's clock 400 s off, spurinv forgot its own drain and left
    the node drained for good. Now the skew is reported, and the drain is lifted."""
    node = Node(tmp_path, built, skew=skew)
    node.tick("spx")
    node.tick("spx")
    busy_drain_scenario(node)

    drained = node.tick("cpx")

    assert "DRAIN" in node.controller["state"]
    assert node.state()["drain"]["reason_changed_at"] == int(node.epoch() + skew)  # read back and pinned at once
    drain = node.state()["drain"]
    assert drain is not None
    assert state_file.drain_skew(drain) == skew
    assert any("clock skew" in note for note in drained["notes"]) == (abs(skew) > 300)
    actions = settle_after_revert(node)
    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]
    assert node.state()["drain"] is None


def test_status_and_metrics_say_the_clock_is_off_while_our_drain_is_on(tmp_path, built, cli):
    node = Node(tmp_path, built, skew=-3600)
    node.tick("spx")
    node.tick("spx")
    drained_busy(node)
    prom = tmp_path / "spurinv.prom"
    from spurinv.report import metrics

    status = cli("status", "--state", node.state_path, "--json").json()
    metrics.write(str(prom), metrics.render(json.loads(node.state_path.read_text()), 0.1, "n1", "test"))

    assert any("behind this node's" in note and "3600 s" in note for note in status["attention"])
    assert "spurinv_drain_clock_skew_seconds -3600" in prom.read_text()


@pytest.mark.parametrize("skew", [-3600, 3600])
def test_an_unanswered_drain_under_skew_is_ours_and_lifted(tmp_path, built, skew):
    """The write applied, its answer lost (the run killed before it), the clocks an hour apart."""
    from test_intent import Killed, Points

    node = Node(tmp_path, built, skew=skew)
    node.tick("spx")
    node.tick("spx")
    busy_drain_scenario(node)
    points = Points()
    node.tick("cpx", points)  # counts the points
    node = Node(tmp_path / "again", built, skew=skew)
    node.tick("spx")
    node.tick("spx")
    busy_drain_scenario(node)
    after_post = next(i for i, label in enumerate(points.labels, 1) if label.startswith("after POST"))
    with pytest.raises(Killed):
        node.tick("cpx", Points(after_post))
    assert node.state()["intent"] is not None
    assert "DRAIN" in node.controller["state"]

    actions = settle_after_revert(node)

    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]


# --- state loss -----------------------------------------------------------------------------------


def lose_state(node: Node, how: str) -> None:
    if how == "deleted":
        shutil.rmtree(node.state_path.parent)
    else:
        node.state_path.write_text("{corrupt")


@pytest.mark.parametrize("how", ["deleted", "corrupt"])
@pytest.mark.parametrize("extra", [True, False], ids=["record in extra", "id in the reason only"])
def test_a_lost_state_rebuilds_our_drain_from_the_controller_and_lifts_it(tmp_path, built, how, extra):
    """A stateless node rebooted (or a corrupt file moved aside) while our drain
    was on. The first run reads the controller even for a first reading, finds our drain by its
    record (Slurm) or the id in its reason (a controller without extra), says so, and lifts it."""
    node = adopted(tmp_path, built)
    if not extra:
        del node.controller["extra"]  # spur's gateway: no extra at all
    reason = drained_busy(node)
    assert (extra_record(node.controller.get("extra")) is not None) == extra
    lose_state(node, how)
    node.busy(0)

    first = node.tick("spx")

    assert "recover" in steps(first)
    recovered = node.state()["drain"]
    assert recovered is not None
    assert (recovered["reason"], recovered["recovered"]) == (reason, "controller-record" if extra else "reason")
    assert first["outcome"]["kind"] == "change-pending"  # the first reading: no write yet
    actions = steps(first) + settle_after_revert(node)
    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]
    assert node.state()["drain"] is None


def test_status_says_the_drain_was_recovered(tmp_path, built, cli):
    node = adopted(tmp_path, built)
    drained_busy(node)
    lose_state(node, "deleted")

    node.tick("cpx")

    status = cli("status", "--state", node.state_path, "--json").json()
    assert any("drain recovered from the controller record" in note for note in status["attention"])
    assert status["drain"]["recovered"] == "controller-record"


@pytest.mark.parametrize(
    "other",
    ["NHC: bad ECC on GPU 3", "copied", "edited", "legacy"],
)
def test_a_lost_state_never_takes_a_drain_that_is_not_ours(tmp_path, built, other):
    """An operator's drain, our words copied from another node, our words edited, or a drain of a
    spurinv from before drain ids: with no state, nothing is ours; never lifted."""
    node = adopted(tmp_path, built)
    drained_busy(node)
    ours = node.controller["reason"]
    reason = {
        "copied": reason_for("n2", NONCE, ours[20:]),
        "edited": ours + " (do not resume: bad fan)",
        "legacy": "spurinv: 8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle",
    }.get(other, other)
    node.controller["reason"] = reason
    lose_state(node, "deleted")
    node.busy(0)

    for _ in range(4):
        document = node.tick("spx", minutes=61)
        assert "recover" not in steps(document)

    assert "DRAIN" in node.controller["state"]
    assert node.controller["reason"] == reason
    assert node.state()["drain"] is None


@pytest.mark.parametrize("how", ["deleted", "corrupt"])
def test_a_drain_reusing_the_words_of_a_drain_we_lifted_is_never_recovered(tmp_path, built, how):
    """After our lift Slurm keeps the reason text; a later drain with
    no reason of its own (``State=DRAIN`` alone, drain_nodes(), a health check) shows our words
    and id. A stateless node rebooted then must not take it from the id: the record says lifted."""
    node = adopted(tmp_path, built)
    reason = drained_busy(node)
    assert "resume" in settle_after_revert(node)
    assert node.controller["reason"] == reason  # Slurm keeps the text after UNDRAIN
    record = extra_record(node.controller["extra"])
    assert record is not None
    assert record["lifted"]["id"] == reason[10:18]
    node.controller["state"] = ["IDLE", "DRAIN"]  # someone else's drain, without a reason
    lose_state(node, how)

    actions = []
    notes = []
    for _ in range(4):
        document = node.tick("spx", minutes=61)
        actions += steps(document)
        notes += document["notes"]

    assert "recover" not in actions
    assert "resume" not in actions
    assert "DRAIN" in node.controller["state"]
    assert node.state()["drain"] is None
    assert any("our record says we lifted that drain" in note for note in notes)


def test_an_unanswered_lift_then_a_drain_without_a_reason_is_never_lifted_again(tmp_path, built):
    """Our lift applied, its answer lost (the run killed after the
    POST), then someone drains with no reason of its own (our words stay). The next run once
    concluded "the unanswered resume was not applied" and lifted their drain: the record, retired
    in the same update as the lift, says it was applied."""
    from test_intent import Killed, Points

    def drained(node: Node) -> None:
        drained_busy(node)
        node.busy(0)

    counting = adopted(tmp_path / "count", built)
    drained(counting)
    points = Points()
    counting.tick("spx", points)
    after_post = next(i for i, label in enumerate(points.labels, 1) if label.startswith("after POST"))
    node = adopted(tmp_path / "node", built)
    drained(node)
    with pytest.raises(Killed):
        node.tick("spx", Points(after_post))
    assert node.state()["intent"] is not None
    assert "DRAIN" not in node.controller["state"]  # applied
    node.controller["state"] = ["IDLE", "DRAIN"]  # someone else's drain, without a reason

    actions = []
    for _ in range(4):
        actions += steps(node.tick("spx", minutes=61))

    assert "resume" not in actions
    assert "DRAIN" in node.controller["state"]
    assert node.state()["drain"] is None
    assert node.state()["intent"] is None


def test_a_state_that_forgot_a_drain_never_takes_it_back_from_the_controller(tmp_path, built):
    """Someone re-drained with our very text after we saw ours: forgotten, and the controller's
    record (still naming that text) does not make it ours again — only a lost state asks it."""
    node = adopted(tmp_path, built)
    reason = drained_busy(node)
    node.now += timedelta(hours=2)
    node.controller["reason_changed_at"] = {"set": True, "infinite": False, "number": int(node.epoch())}
    node.busy(0)

    actions = settle_after_revert(node)

    assert "forget-drain" in actions
    assert "resume" not in actions
    assert node.controller["reason"] == reason
    assert "DRAIN" in node.controller["state"]


# --- the record in extra ---------------------------------------------------------------------------


def test_the_drain_and_its_record_go_in_one_update_beside_the_admins_keys(tmp_path, built):
    node = adopted(tmp_path, built)
    node.controller["extra"] = '{"rack": "r2",  "power": 1E5, "spurinv": {"fingerprint": "f0", "inventory": "old"}}'

    reason = drained_busy(node)

    assert len(node.gateway_posts()) == 1  # one update: a crash cannot separate drain and record
    extra = node.controller["extra"]
    assert extra.startswith('{"rack": "r2",  "power": 1E5, "spurinv": {')  # the admin's bytes, as they were
    record = json.loads(extra)[KEY]
    assert record["node"] == "n1"
    assert record["inventory"] == "old"  # our key keeps what it held, with the drain added
    assert record["drain"]["reason"] == reason
    assert record["drain"]["id"] == reason[10:18]
    assert record["drain"]["at"] == (node.now).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    "extra",
    ['{"rack": 1, "rack": 2}', '{"big": 1e400}', "rack r2, row 7", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"],
    ids=["duplicate key", "non-finite", "not JSON", "nested too deep"],
)
def test_extra_we_may_not_rewrite_stays_byte_for_byte_and_the_id_does_the_work(tmp_path, built, extra):
    """Extra is never re-serialised; text we cannot splice into is
    left alone (no RecursionError), our drain carries its id, and a lost state still finds it."""
    node = adopted(tmp_path, built)
    node.controller["extra"] = extra
    drained_busy(node)

    assert node.controller["extra"] == extra
    lose_state(node, "deleted")
    node.busy(0)
    actions = steps(node.tick("spx")) + settle_after_revert(node)

    assert "recover" in actions
    assert "resume" in actions
    assert node.controller["extra"] == extra


def test_a_refused_registration_leaves_no_record_of_it(tmp_path, built):
    """Slurm applies extra even when it refuses the GRES of the same update. The
    GRES goes first, alone; the record follows only once the controller lists it."""
    node = adopted(tmp_path, built)
    node.controller["extra"] = '{"rack": "r2"}'
    node.tick("cpx")

    refused = node.tick("cpx")  # idle: register 8 → 64, refused (2072), then our drain

    assert refused["exit_code"] == exitcode.PROTOCOL
    assert steps(refused)[:3] == ["read-view", "register", "drain"]
    record = extra_record(node.controller["extra"])
    assert "fingerprint" not in record  # no claim of a registration
    assert record["drain"]["reason"] == node.controller["reason"]
    assert json.loads(node.controller["extra"])["rack"] == "r2"


def test_an_applied_registration_records_what_the_controller_lists(tmp_path, built):
    node = Node(tmp_path, built, gres_policy="any")
    node.tick("spx")
    node.tick("spx")
    node.tick("cpx")

    registered = node.tick("cpx")

    assert registered["exit_code"] == 0
    record = extra_record(node.controller["extra"])
    assert (record["fingerprint"], record["gres"], record["node"]) == (registered["fingerprint"], "gpu:mi300x:64", "n1")


# --- the state belongs to its node ------------------------------------------------------------------


def test_a_run_for_another_node_is_refused_and_writes_nothing(tmp_path, built, cli):
    """`--node n2` with n1's state forgot n1's drain and drained n2 with n1's
    inventory. Refused: 64 from the flag, 78 from the config; nothing written anywhere."""
    node = adopted(tmp_path, built)
    drained_busy(node)
    config = tmp_path / "n2.toml"
    config.write_text(f'[node]\nname = "n2"\n[controller]\nurl = "{node.config.controller.url}"\napi = "slurm/v0.0.42"\n')
    config.chmod(0o600)
    before = node.state_path.read_bytes()
    listing = sorted(path.name for path in node.state_path.parent.iterdir())

    flag = cli("refresh", "--root", built("mi300x-spx"), "--state", node.state_path, "--node", "n2", "--json")
    configured = cli("refresh", "--root", built("mi300x-spx"), "--state", node.state_path, "--config", config)

    assert flag.code == exitcode.USAGE
    assert configured.code == exitcode.CONFIG
    message = flag.json()["error"]["message"]
    assert "'n1'" in message
    assert "'n2'" in message
    assert "--node n1" in message
    assert "move" in message
    assert "n1" in configured.err
    assert "n2" in configured.err
    assert node.state_path.read_bytes() == before
    assert sorted(path.name for path in node.state_path.parent.iterdir()) == listing
    assert "DRAIN" in node.controller["state"]


def test_an_older_state_file_loads_and_its_drain_without_an_id_is_still_lifted(tmp_path, built):
    """A version 1 state whose drain reason carries no id (spurinv before drain ids): ours by its
    exact reason, lifted; the file is written back as the current version (shape.SCHEMA_VERSION, which
    tests/test_state.py pins to the file's structure)."""
    node = adopted(tmp_path, built)
    legacy = "spurinv: 8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle"
    raw = json.loads(node.state_path.read_text())
    raw["schema_version"] = 1
    del raw["fresh"]
    raw["drain"] = {"reason": legacy, "set_at": raw["last"]["at"], "cause": "busy", "fingerprint": None,
                    "reason_changed_at": None}  # fmt: skip
    node.state_path.write_text(json.dumps(raw))
    node.controller.update(state=["IDLE", "DRAIN"], reason=legacy)
    node.controller["reason_changed_at"] = {"set": True, "infinite": False, "number": int(node.epoch()) + 4000}

    actions = settle_after_revert(node)

    assert "resume" in actions
    assert "DRAIN" not in node.controller["state"]
    assert json.loads(node.state_path.read_text())["schema_version"] == SCHEMA_VERSION > 1
