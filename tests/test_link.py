"""PCIe link health as a fact: widths judged, speeds reported, 255/63/Unknown never a
false alarm, the AMD card judged at its topmost AMD bridge, confirmed over two readings like
everything else, and shown by discover, diff, status, refresh and the metrics. Never part of the
fingerprint."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurinv.inventory import model
from spurinv.inventory.discovery import discover
from spurinv.inventory.model import Discovery
from spurinv.inventory.root import Root
from spurinv.inventory.sources import link
from spurinv.inventory.sources.pci import read_pci
from spurinv.inventory.sources.status import Report
from spurinv.report import metrics


def run(root) -> Discovery:
    return model.discovery(discover(Root(str(root))))


def links_of(result: Discovery) -> dict:
    assert result["inventory"] is not None
    return {device["pci_bdf"]: device["link"] for device in result["inventory"]["devices"]}


def test_an_h100_trained_at_x8_is_degraded_and_nothing_else_is(built):
    """h100-x8: 0000:88:00.0 at x8 of x16; 0000:c8:00.0 idles at 2.5 GT/s (speed: not judged);
    the rest are x16."""
    result = run(built("nvidia-h100-x8"))

    links = links_of(result)
    states = {bdf: found["state"] for bdf, found in links.items() if found is not None}
    assert [bdf for bdf, state in states.items() if state == "degraded"] == ["0000:88:00.0"]
    assert states["0000:c8:00.0"] == "ok"
    assert links["0000:c8:00.0"]["speed"] == "2.5 GT/s"
    assert (links["0000:88:00.0"]["width"], links["0000:88:00.0"]["max_width"]) == (8, 16)


def test_the_link_is_not_schedulable(built):
    """The same GPUs with a down-trained link have the same fingerprint: no re-registration."""
    plain, degraded = run(built("nvidia-8"))["inventory"], run(built("nvidia-h100-x8"))["inventory"]
    assert plain is not None
    assert degraded is not None
    assert plain["fingerprint"] == degraded["fingerprint"]


def test_an_amd_card_is_judged_at_its_topmost_amd_bridge(built):
    """nokyan/resources#512's values: the endpoint reads x16 of x16 (an internal link); the card's
    upstream port 0000:01:00.0 is at x8 of x16."""
    functions, _ = read_pci(Root(str(built("amd-internal-switch"))), Report("pci"))

    (gpu,) = functions
    assert gpu["bdf"] == "0000:03:00.0"
    assert gpu["link"] is not None
    assert (gpu["link"]["device"], gpu["link"]["width"], gpu["link"]["max_width"]) == ("0000:01:00.0", 8, 16)
    assert gpu["link"]["state"] == "degraded"


def test_a_card_wider_than_its_slot_is_the_platform_not_a_fault():
    assert link.verdict(8, 16, 8, "32.0 GT/s") == "ok"
    assert link.verdict(8, 16, None, "32.0 GT/s") == "degraded"
    assert link.verdict(4, 16, 8, "32.0 GT/s") == "degraded"


@pytest.mark.parametrize(
    ("text", "speed"),
    [("32.0 GT/s PCIe\n", "32.0 GT/s"), ("8 GT/s\n", "8.0 GT/s"), ("2.5 GT/s\n", "2.5 GT/s"), ("Unknown\n", None),
     ("Unknown speed\n", None), ("", None), ("fast", None)],
)  # fmt: skip
def test_speeds_in_every_kernel_format(text, speed):
    assert link.parse_speed(text) == speed


WIDTH = st.one_of(st.none(), st.integers(0, 300))


@given(WIDTH, WIDTH, WIDTH, st.sampled_from([None, "32.0 GT/s", "2.5 GT/s"]))
def test_degraded_only_when_the_width_is_below_what_the_link_can_reach(width, max_width, port, speed):
    """Never a verdict from 255, 63-with-Unknown, a missing value or an absurd one; degraded
    exactly when 0 < width < min(max, port max)."""
    found = link.verdict(width, max_width, port, speed)
    readable = width is not None and max_width is not None and 0 <= width <= 32 and max_width <= 32
    if width == 63 and speed is None:
        assert found == "gone"
    elif not readable:
        assert found == "unknown"
    else:
        assert width is not None
        assert max_width is not None
        reach = min(max_width, port) if port is not None and 0 < port <= 32 else max_width
        assert (found == "degraded") == (0 < width < reach)
        assert (found == "down") == (width == 0)


def _reading(devices):
    return {"ok": True, "inventory": {"devices": devices}}


def _gpu(width, state="degraded"):
    return {"pci_bdf": "0000:88:00.0", "link": {"width": width, "max_width": 16, "speed": "32.0 GT/s",
                                                 "max_speed": "32.0 GT/s", "state": state}}  # fmt: skip


def test_one_reading_never_confirms_a_degraded_link():
    assert link.confirmed([_reading([_gpu(8)])]) == []
    assert link.confirmed([_reading([_gpu(16, "ok")]), _reading([_gpu(8)])]) == []
    assert link.confirmed([_reading([_gpu(4)]), _reading([_gpu(8)])])[0]["width"] == 8  # flapping: degraded twice
    assert link.confirmed([{"ok": False, "inventory": None}, _reading([_gpu(8)])]) == []
    (both,) = link.confirmed([_reading([_gpu(8)]), _reading([_gpu(8)])])
    assert link.line(both) == "0000:88:00.0 PCIe x16→x8"


def test_refresh_status_and_metrics_show_a_confirmed_degraded_link(cli, built, state_path, tmp_path):
    metrics_file = tmp_path / "spurinv.prom"
    root = built("nvidia-h100-x8")

    def refresh():
        return cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0",
                   "--metrics-file", metrics_file, "--json").json()  # fmt: skip

    first = refresh()
    first_metrics = metrics_file.read_text()
    second = refresh()
    status = cli("status", "--state", state_path, "--json").json()

    assert not any("degraded PCIe link" in note for note in first["notes"])
    assert "spurinv_links_degraded 0" in first_metrics
    assert "degraded PCIe link: 0000:88:00.0 PCIe x16→x8, in the last two readings" in second["notes"]
    assert [(d["pci_bdf"], d["width"], d["max_width"]) for d in status["degraded_links"]] == [("0000:88:00.0", 8, 16)]
    assert any("0000:88:00.0 PCIe x16→x8" in note for note in status["attention"])
    text = metrics_file.read_text()
    assert 'spurinv_link_degraded{pci_bdf="0000:88:00.0",width="8",max_width="16"} 1' in text
    assert "spurinv_links_degraded 1" in text
    assert metrics.render(json.loads(state_path.read_text()), 0.0, "n1", "v").count("spurinv_link_degraded{") == 1


def test_diff_and_discover_say_the_link_beside_an_unchanged_inventory(cli, built, state_path):
    for _ in range(2):
        cli("refresh", "--root", built("nvidia-8"), "--state", state_path, "--confirm-interval", "0")

    diff = cli("diff", "--root", built("nvidia-h100-x8"), "--state", state_path, "--json").json()
    shown = cli("discover", "--root", built("nvidia-h100-x8"))

    assert diff["different"] is False
    assert diff["links"] == ["0000:88:00.0 PCIe x16→x8 (degraded)"]
    assert "0000:88:00.0 PCIe x16→x8" in shown.out


# --- policy.drain_on_degraded_link ------------------------------------------------------------------


def link_node(tmp_path, built, drain: bool):
    from test_intent import URL, Node  # tests/ is on sys.path

    from spurinv.config.settings import Config

    node = Node(tmp_path, built)
    node.roots = {"ok": built("nvidia-8"), "x8": built("nvidia-h100-x8")}
    node.controller["gres"] = "gpu:h100-80gb-hbm3:8"
    node.config = Config.model_validate(
        {"node": {"name": "n1"}, "controller": {"url": URL, "api": "slurm/v0.0.42"},
         "policy": {"confirm_interval": 0, "drain_on_degraded_link": drain}}
    )  # fmt: skip
    node.tick("ok")
    node.tick("ok")
    assert node.state()["baseline"] is not None
    return node


def test_a_confirmed_degraded_link_drains_with_our_reason_and_is_lifted_when_back(tmp_path, built):
    node = link_node(tmp_path, built, drain=True)

    once = node.tick("x8")
    assert "DRAIN" not in node.controller["state"]  # one reading never acts
    twice = node.tick("x8")
    drained_reason = node.controller["reason"]
    held = node.tick("x8")
    node.tick("ok")
    assert "DRAIN" in node.controller["state"]  # one reading at full width never lifts
    back = node.tick("ok")

    assert [step["action"] for step in once["steps"]] == ["none"]
    assert "drain" in [step["action"] for step in twice["steps"]]
    assert drained_reason.startswith("spurinv: [")
    assert drained_reason.endswith("] 0000:88:00.0 PCIe x16→x8")
    assert node.state()["drain"] is None
    assert [step["action"] for step in held["steps"]][-1] == "none"
    assert "resume" in [step["action"] for step in back["steps"]]
    assert "DRAIN" not in node.controller["state"]
    assert twice["outcome"]["kind"] == "unchanged"  # never a re-registration: the inventory is the same


def test_a_degraded_link_on_a_node_down_for_an_admin_is_held_not_drained(tmp_path, built):
    """Our drain, and our reason, went over an admin's DOWN."""
    node = link_node(tmp_path, built, drain=True)
    node.controller.update(state=["DOWN"], reason="admin: replacing GPU 3, ticket 42")

    node.tick("x8")
    twice = node.tick("x8")

    assert "drain" not in [step["action"] for step in twice["steps"]]
    assert node.controller["state"] == ["DOWN"]
    assert node.controller["reason"] == "admin: replacing GPU 3, ticket 42"
    assert "not draining, the node is DOWN" in twice["steps"][-1]["reason"]


def test_without_the_option_a_degraded_link_is_reported_not_drained(tmp_path, built):
    node = link_node(tmp_path, built, drain=False)

    node.tick("x8")
    twice = node.tick("x8")

    assert "DRAIN" not in node.controller["state"]
    assert any("degraded PCIe link: 0000:88:00.0 PCIe x16→x8" in note for note in twice["notes"])


def test_a_memo_never_replays_over_a_degraded_link_the_config_would_drain():
    from spurinv.state import ledger

    devices = [{"pci_bdf": "0000:88:00.0", "link": {"width": 8, "max_width": 16, "speed": None, "max_speed": None,
                                                    "state": "degraded"}}]  # fmt: skip
    inventory = {"fingerprint": "f", "devices": devices}
    state = {"baseline": {"inventory": inventory}, "readings": [{"ok": True, "inventory": inventory, "fingerprint": "f"}]}
    discovery = {"ok": True, "inventory": inventory, "errors": [], "flags": []}

    def replay(drain_links):
        steady = ledger.memo("f", "k", (), (), None, "n1", False, drain_links)
        return ledger.replay(state, steady, discovery, "2026-12-04T10:00:00Z")

    assert replay(True) is None
    assert replay(False) is not None


# --- follow-ups: no lift while the link is still bad, no drain/lift loop -----------------------------

LINK_STATES = st.sampled_from(["ok", "x8", "x4", "x0", "unknown", "gone", "failed"])


def _one(kind):
    if kind == "failed":
        return {"ok": False, "inventory": None}
    width, state = {"ok": (16, "ok"), "x8": (8, "degraded"), "x4": (4, "degraded"), "x0": (0, "down"),
                    "unknown": (None, "unknown"), "gone": (63, "gone")}[kind]  # fmt: skip
    return _reading([_gpu(width, state)])


@pytest.mark.parametrize("between", ["x4", "x0", "unknown", "gone", "failed"])
def test_a_link_drain_is_not_lifted_while_the_link_is_still_bad(between):
    drained = {"0000:88:00.0"}
    assert not link.back([_one("x8"), _one(between)], drained)
    assert not link.back([_one(between), _one("ok")], drained)
    assert link.back([_one("ok"), _one("ok")], drained)


@given(st.lists(LINK_STATES, min_size=3, max_size=12))
def test_no_drain_and_lift_take_turns_for_any_sequence(kinds):
    """Simulate the policy over any sequence of readings: drained when two readings are degraded,
    lifted only by :func:`link.back`. A lift is never followed by a drain at the next reading, nor
    a drain by a lift: between them there are always two readings that agree."""
    readings = [_one(kind) for kind in kinds]
    drained = False
    actions: list[str] = []
    for end in range(2, len(readings) + 1):
        window = readings[end - 2 : end]
        if drained and not link.confirmed(window) and link.back(window, {"0000:88:00.0"}):
            drained = False
            actions.append("lift")
        elif not drained and link.confirmed(window):
            drained = True
            actions.append("drain")
        else:
            actions.append("none")
    for first, second in itertools.pairwise(actions):
        assert {first, second} != {"drain", "lift"}, actions


def test_a_link_drain_is_kept_when_the_width_gets_worse(tmp_path, built, root_copy):
    """x8 twice drains; x8→x4 and a failed reading in between keep the drain (the old rule lifted
    it, because the two readings did not agree on one width)."""
    node = link_node(tmp_path, built, drain=True)
    x4 = root_copy("nvidia-h100-x8")
    for path in (x4 / "sys").rglob("current_link_width"):
        if path.read_text().strip() == "8":
            path.write_text("4\n")
    node.roots["x4"] = x4
    node.tick("x8")
    node.tick("x8")
    drained = node.controller["reason"]

    worse = node.tick("x4")

    assert "DRAIN" in node.controller["state"]
    assert node.controller["reason"] == drained
    assert "resume" not in [step["action"] for step in worse["steps"]]


def _admin_resume(node) -> None:
    body = json.dumps({"state": ["RESUME"], "reason": ""}).encode()
    reply = node.gateway.answer("POST", "/slurm/v0.0.42/node/n1", {}, body)
    assert reply.status == 200, reply
    assert "DRAIN" not in node.controller["state"]


def test_an_operators_resume_of_a_link_drain_is_not_overridden(tmp_path, built, root_copy):
    """The operator resumed our link drain: they accept that link at that width. spurinv does not
    drain again (not in the same run, not later) until the link changes; a worse width drains."""
    node = link_node(tmp_path, built, drain=True)
    x4 = root_copy("nvidia-h100-x8")
    for path in (x4 / "sys").rglob("current_link_width"):
        if path.read_text().strip() == "8":
            path.write_text("4\n")
    node.roots["x4"] = x4
    node.tick("x8")
    node.tick("x8")
    assert "DRAIN" in node.controller["state"]
    _admin_resume(node)

    same_run = node.tick("x8")
    later = node.tick("x8")

    assert "drain" not in [step["action"] for step in same_run["steps"] + later["steps"]]
    assert "DRAIN" not in node.controller["state"]
    assert node.state()["accepted_links"] == ("0000:88:00.0 x8",)

    worse = node.tick("x4")  # degraded in both readings, at a width never accepted
    assert "drain" in [step["action"] for step in worse["steps"]], worse["steps"]
    node.tick("x4")  # the second reading at another width: the acceptance is gone
    assert node.state()["accepted_links"] == ()


@pytest.mark.parametrize(("width", "speed"), [("63", "Unknown"), ("0", "Unknown"), ("0", "32.0 GT/s PCIe")])
def test_a_gpu_that_stops_answering_fails_the_reading(root_copy, width, speed):
    """All-ones config space (width 63, speed Unknown) or a link down (x0): the GPU is on the bus
    but does not answer, like a GPU the driver does not show: the reading fails, naming it."""
    root = root_copy("nvidia-h100-x8")
    device = root / "sys/devices/pci0000:c0/0000:cb:00.0"
    (device / "current_link_width").write_text(f"{width}\n")
    (device / "current_link_speed").write_text(f"{speed}\n")

    result = run(root)

    assert not result["ok"]
    assert any("GPU 0000:cb:00.0 on the bus does not answer" in error["reason"] for error in result["errors"])


def test_a_gpu_that_stops_answering_is_never_a_fast_tick(cli, root_copy, state_path, tmp_path):
    """After two settled runs (the tick's memo written), the GPU stops answering: the tick hands
    over to the full run, which fails the reading (74); status and the metrics say so."""
    root = root_copy("nvidia-h100-x8")
    metrics_file = tmp_path / "spurinv.prom"

    def refresh():
        return cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0",
                   "--metrics-file", metrics_file)  # fmt: skip

    refresh()
    refresh()
    device = root / "sys/devices/pci0000:c0/0000:cb:00.0"
    (device / "current_link_width").write_text("63\n")
    (device / "current_link_speed").write_text("Unknown\n")

    tick = refresh()
    status = cli("status", "--state", state_path, "--json").json()

    assert tick.code == 74, tick.out + tick.err
    assert any("discovery failed 1 time(s) in a row" in note for note in status["attention"])
    assert "GPU 0000:cb:00.0 on the bus does not answer" in json.dumps(status)
    assert "spurinv_discovery_failures_consecutive 1" in metrics_file.read_text()


def test_a_memo_replays_over_an_accepted_link_and_forgets_it_once_back():
    """The tick answers for a link the operator accepted (no full run every minute), and drops
    the acceptance when two readings show the link otherwise, as State.record does."""
    from spurinv.state import ledger

    def inventory(width, state):
        return {"fingerprint": "f", "devices": [{"pci_bdf": "0000:88:00.0", "link": {
            "width": width, "max_width": 16, "speed": None, "max_speed": None, "state": state}}]}  # fmt: skip

    narrow = inventory(8, "degraded")
    steady = ledger.memo("f", "k", (), (), None, "n1", False, True)
    state = {"baseline": {"inventory": narrow}, "readings": [{"ok": True, "inventory": narrow, "fingerprint": "f"}],
             "accepted_links": ["0000:88:00.0 x8"]}  # fmt: skip

    same = ledger.replay(state, steady, {"ok": True, "inventory": narrow, "errors": [], "flags": []}, "2026-12-04T10:00:00Z")
    full = inventory(16, "ok")
    back = ledger.replay(state, steady, {"ok": True, "inventory": full, "errors": [], "flags": []}, "2026-12-04T10:00:00Z")
    assert back is not None
    again = ledger.replay(back, steady, {"ok": True, "inventory": full, "errors": [], "flags": []}, "2026-12-04T10:01:00Z")

    assert same is not None
    assert same["accepted_links"] == ["0000:88:00.0 x8"]
    assert back["accepted_links"] == ["0000:88:00.0 x8"]  # one reading at x16 is not yet a fact
    assert again is not None
    assert again["accepted_links"] == []


def test_the_fast_tick_says_a_degraded_link(cli, built, state_path, env, capsys):
    from spurinv.cli import tick

    root = built("nvidia-h100-x8")
    for _ in range(2):
        cli("refresh", "--root", root, "--state", state_path, "--confirm-interval", "0")
    capsys.readouterr()

    code = tick.run({"--root": str(root), "--state": str(state_path)}, env)

    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("unchanged: 8 devices, fingerprint"), out  # the tick's own line
    assert "degraded PCIe link 0000:88:00.0 PCIe x16→x8" in out


def _reading_with(width: int | None, state: str, ok: bool = True) -> dict:
    devices = [{"pci_bdf": "0000:88:00.0", "link": {"state": state, "width": width, "max_width": 16}}]
    return {"ok": ok, "inventory": {"devices": devices} if ok else None}


@given(st.lists(st.sampled_from([(8, "degraded"), (16, "ok"), (4, "degraded"), (255, "unknown"), (None, "unknown"),
                                 (0, "down"), (63, "gone"), (None, "failed")]), min_size=2, max_size=6))  # fmt: skip
def test_an_accepted_link_is_dropped_only_when_two_readings_show_another_known_width(sequence):
    """An admin's resume accepts the link at x8 until a width is *confirmed* otherwise: an unknown,
    unreadable or failed reading, or one odd reading, keeps the acceptance (a flaky attribute must
    not re-drain the node every tick)."""
    from spurinv.inventory.sources.link import still_accepted

    readings = [_reading_with(w, s, ok=s != "failed") for w, s in sequence]
    kept = still_accepted(["0000:88:00.0 x8"], readings)

    last_two = sequence[-2:]
    moved = all(s in ("ok", "degraded") and w != 8 for w, s in last_two)
    assert kept == ([] if moved else ["0000:88:00.0 x8"])
