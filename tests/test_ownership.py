"""The one ownership rule, the drain id, the controller's reason time and the record in ``extra``."""

from __future__ import annotations

import json
import re

import pytest
from effort import examples
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from spurinv.controller import ownership
from spurinv.controller.nodeview import parse_node
from spurinv.controller.ownership import (
    KEY,
    MAX_EPOCH,
    MAX_REASON,
    PREFIX,
    Claim,
    changed_at,
    controller_claim,
    extra_record,
    owns,
    parse_extra,
    reason_for,
    reason_id,
    record_value,
    splice,
)
from spurinv.report import fleet
from spurinv.shape import stamp

AT = 1796288400  # 2026-12-03T09:00:00Z, our clock when we wrote the drain
HOUR = 3600

# ------------------------------------------------------------------ the controller's reason time


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (AT, AT),
        ({"set": True, "infinite": False, "number": AT}, AT),
        ({"set": True, "number": AT}, AT),
        ({"number": AT}, None),  # a dict without "set": true says nothing
        ({"set": False, "infinite": False, "number": AT}, None),
        ({"set": True, "infinite": True, "number": AT}, None),
        ({"set": 1, "number": AT}, None),
        (float(AT), None),  # Slurm sends integers; a float is no Slurm timestamp
        (True, None),
        (0, None),
        (-5, None),
        (MAX_EPOCH, None),
        (MAX_EPOCH - 1, MAX_EPOCH - 1),
        ("1796288400", None),
        (None, None),
        ({"set": True, "number": 1e400}, None),
    ],
)
def test_the_one_parser_of_reason_changed_at(value, expected):
    assert changed_at(value) == expected


_TIMES = st.one_of(
    st.integers(-(10**12), 10**13),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.fixed_dictionaries(
        {},
        optional={
            "set": st.one_of(st.booleans(), st.integers(0, 1), st.none()),
            "infinite": st.one_of(st.booleans(), st.none()),
            "number": st.one_of(st.integers(-5, 10**13), st.floats(allow_nan=True)),
        },
    ),
)


@settings(max_examples=examples(300))
@given(value=_TIMES, flags=st.sampled_from([["IDLE", "DRAIN"], ["MIXED", "DRAIN"], ["IDLE"]]))
def test_refresh_and_fleet_read_the_same_reason_time(value, flags):
    """Fleet and the node view parsed the time with different rules."""
    node = {"name": "n1", "state": flags, "reason": "x", "reason_changed_at": value}

    view = parse_node({"nodes": [node]}, "n1")
    row = fleet.row(node, MAX_EPOCH)

    assert view.reason_changed_at == changed_at(value)
    assert row["reason_since"] == (stamp(view.reason_changed_at) if view.reason_changed_at else None)


# ------------------------------------------------------------------------------ the drain id

# The id's digest has 16 bits: an edited or copied reason passes for ours once in 65,536 (by
# design: the digest tells mistakes apart, no more). Properties that rely on it not colliding run
# a fixed sample (derandomize), so they cannot fail by chance on one run and pass on the next.
DIGEST = settings(max_examples=examples(200), derandomize=True)
NODES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True)
NONCES = st.binary(min_size=2, max_size=2).map(ownership.nonce_of)
TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)  # type: ignore[arg-type]  # category literals


def test_a_reason_carries_its_id_after_our_prefix():
    reason = reason_for("n1", "3f9a", "mi300x 8→7; re-registers when idle")

    assert re.fullmatch(r"spurinv: \[3f9a[0-9a-f]{4}\] mi300x 8→7; re-registers when idle", reason)
    assert reason_id(reason, "n1") == reason[10:18]


@DIGEST
@given(node=NODES, other=NODES, nonce=NONCES, text=TEXTS)
def test_an_id_is_valid_only_for_its_node_and_its_text(node, other, nonce, text):
    reason = reason_for(node, nonce, text)

    assert len(reason) <= MAX_REASON
    assert reason_id(reason, node) is not None
    if other != node:
        assert reason_id(reason, other) is None  # copied to another node: not ours there


@DIGEST
@given(node=NODES, nonce=NONCES, text=TEXTS)
@example(node="n1", nonce="abcd", text="SPX/NPS4\x1b[2J\x1b]0;owned\x07 (8→1)")
def test_a_reason_holds_no_control_character_and_its_id_covers_it_as_sent(node, nonce, text):
    """Every `sinfo -R` prints the reason: an escape sequence in what it is given (a sysfs
    file's text in the change summary) would reach the admin's terminal."""
    reason = reason_for(node, nonce, text)

    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", reason), repr(reason)
    assert len(reason) <= MAX_REASON
    assert reason_id(reason, node) is not None


def test_a_memory_mode_with_control_characters_reaches_the_drain_reason_printable():
    """The summary the drain reason is made of, with a mode no discovery passes now (it reads
    such a mode as a failure): the reason is printable all the same."""
    from factories import device, inventory

    from spurinv.inventory.classify import compare, diff_summary
    from spurinv.policy import drain_reason

    bdf = "0000:05:00.0"
    old = inventory([device(bdf, mode="CPX", index=i, split=True, memory_mode="NPS1") for i in range(8)])
    new = inventory([device(bdf, mode="SPX", memory_mode="NPS4\x1b[2J\x1b]0;owned\x07")])

    reason = drain_reason(f"{diff_summary(compare(old, new))}; re-registers when idle", "n1", "abcd")

    assert reason.startswith("spurinv: [abcd")
    assert len(reason) <= 240
    assert not any(ord(char) < 0x20 or ord(char) == 0x7F for char in reason), repr(reason)
    assert "CPX/NPS1→SPX/NPS4\\x1b[2J" in reason


@DIGEST
@given(node=NODES, nonce=NONCES, text=TEXTS.filter(lambda t: t.strip()), edit=st.text(min_size=1, max_size=20))
def test_an_edited_reason_carries_no_valid_id(node, nonce, text, edit):
    reason = reason_for(node, nonce, text)
    edited = reason + edit if not edit.isspace() else reason.replace(reason[-1], "X")
    assume(edited != reason)

    assert reason_id(edited, node) is None


@pytest.mark.parametrize(
    "reason",
    [
        "spurinv: 8 GPUs SPX→CPX (1→8 each); mi300x 8→64; re-registers when idle",  # before ids: no id
        "NHC: bad ECC on GPU 3",
        "spurinv: [3F9A1C07] upper-case hex is not ours",
        "spurinv: [3f9a1c0] seven digits",
        "spurinv: [3f9a1c07]no space",
        "spurinv:[3f9a1c07] x",
        "",
    ],
)
def test_reasons_without_a_valid_id(reason):
    assert reason_id(reason, "n1") is None
    assert controller_claim("n1", reason, "") is None


# -------------------------------------------------------------------- the record in extra

_SPACE = st.text(" \t\n\r", max_size=3)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8
)


@st.composite
def objects(draw, with_ours: bool | None = None) -> tuple[str, dict]:
    """A JSON object as an admin might type it: any key order, spacing and number spelling."""
    keys = draw(st.lists(st.text(max_size=8).filter(lambda k: k != KEY), unique=True, max_size=5))
    members = {key: draw(_VALUES) for key in keys}
    ours = draw(st.booleans()) if with_ours is None else with_ours
    if ours:
        members[KEY] = draw(_VALUES)
        keys = draw(st.permutations([*keys, KEY]))
    parts = []
    for key in keys:
        value = members[key]
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        if isinstance(value, float) and draw(st.booleans()):
            text = repr(value).replace("e+", "E")  # 1E5, not 100000.0: must survive byte for byte
        parts.append(f"{draw(_SPACE)}{json.dumps(key)}{draw(_SPACE)}:{draw(_SPACE)}{text}{draw(_SPACE)}")
    body = ",".join(parts) or draw(_SPACE)
    return f"{draw(_SPACE)}{{{body}}}{draw(_SPACE)}", members


RECORD = {"node": "n1", "fingerprint": "ab" * 8, "drain": {"id": "3f9a1c07", "reason": "spurinv: [3f9a1c07] x → y"}}


@settings(max_examples=examples(400))
@given(obj=objects(), record=st.fixed_dictionaries({"fingerprint": st.text(max_size=10), "n": st.integers()}))
def test_a_splice_changes_only_our_key_every_other_byte_stays(obj, record):
    """Re-serialising lost duplicate keys and rewrote 1E5 and 1e400."""
    text, members = obj
    result = splice(text, record)

    if "\ufffd" in text:  # maybe bytes cleaned on input: never written back (docs/security.md)
        assert result is None
        return
    assert result is not None
    assert json.loads(result) == {**members, KEY: record}
    extra = parse_extra(text)
    assert extra is not None
    if extra.span is not None:
        start, end = extra.span
        assert result[:start] == text[:start]
        assert result[len(result) - (len(text) - end) :] == text[end:]
    else:  # inserted at one place: removing our member gives back the text, byte for byte
        inserted = len(result) - len(text)
        position = next(i for i in range(len(text) + 1) if result[:i] + result[i + inserted :] == text)
        assert result[:position] + result[position + inserted :] == text
    assert splice(result, record) == result  # the same record again changes nothing


@settings(max_examples=examples(200))
@given(obj=objects(), first=st.integers(), second=st.integers())
def test_a_splice_of_a_spliced_text_only_changes_our_value(obj, first, second):
    text, _members = obj
    once = splice(text, {"n": first})
    twice = splice(once, {"n": second})

    assert twice == splice(text, {"n": second})


@pytest.mark.parametrize(
    "text",
    [
        '{"rack": 1, "rack": 2}',  # a duplicate key: re-serialised, one value would be lost
        '{"a": {"b": 1, "b": 2}}',
        '{"spurinv": {}, "spurinv": {}}',
        '{"big": 1e400}',  # became Infinity, which is no JSON
        '{"n": NaN}',
        '{"n": -Infinity}',
        '{"n": ' + "9" * 5000 + "}",  # longer than Python reads an int
        "[1, 2]",
        '"text"',
        "operator note",
        '{"a": 1} trailing',
        '{"a": 1}{"b": 2}',
        '{"a": 1,}',
        '{"a" 1}',
        "{",
        '{"a": "\ud800"}',  # a raw lone surrogate: no UTF-8 text to send anywhere
    ],
)
def test_extra_we_never_rewrite(text):
    assert splice(text, {"fingerprint": "f"}) is None
    assert extra_record(text) is None


@pytest.mark.parametrize("depth", [50, 2000, 100_000])
def test_deeply_nested_extra_is_foreign_never_a_recursion_error(depth):
    """Every run that had to re-register crashed with RecursionError."""
    text = '{"a": ' + "[" * depth + "]" * depth + "}"

    result = splice(text, {"fingerprint": "f"})

    if depth < 500:
        assert result is not None
    else:
        assert result is None
        assert extra_record(text) is None


def test_an_empty_extra_takes_just_our_key_and_none_means_no_extra_at_all():
    assert splice("", {"a": 1}) == '{"spurinv":{"a":1}}'
    assert splice("  \n", {"a": 1}) == '{"spurinv":{"a":1}}'
    assert splice("{ }", {"a": 1}) == '{ "spurinv":{"a":1}}'
    assert splice(None, {"a": 1}) is None  # the controller has no extra (spur, Slurm 22.05)


def test_our_record_is_ascii_whatever_it_holds():
    result = splice('{"rack": "r2 ü"}', {"reason": "spurinv: [3f9a1c07] mi300x 8→7"})

    assert result == '{"rack": "r2 ü","spurinv":{"reason":"spurinv: [3f9a1c07] mi300x 8\\u21927"}}'
    assert json.loads(result)[KEY]["reason"] == "spurinv: [3f9a1c07] mi300x 8→7"


def test_a_splice_longer_than_the_limit_is_not_made():
    text = json.dumps({"blob": "x" * 1000})
    fits = splice(text, {"a": 1}, limit=2000)

    assert fits is not None
    assert splice(text, {"a": 1}, limit=len(fits.encode())) == fits
    assert splice(text, {"a": 1}, limit=len(fits.encode()) - 1) is None
    assert splice(json.dumps({"blob": "ü" * 600}), {"a": 1}, limit=1300) is None  # counted in UTF-8 bytes


def test_a_record_for_another_node_is_never_rewritten():
    drain = {"id": "x", "reason": "r"}
    mine = json.dumps({KEY: {"node": "n1", "gres": "gpu:8", "drain": drain}})
    theirs = json.dumps({KEY: {"node": "n9", "gres": "gpu:8", "drain": drain}})
    old = json.dumps({KEY: {"fingerprint": "f", "gres": "gpu:8"}})  # before records named their node

    assert record_value(mine, "n1", {"fingerprint": "g"}) == {"node": "n1", "gres": "gpu:8", "drain": drain,
                                                               "fingerprint": "g"}  # fmt: skip
    # another node's record (renamed, or copied with the admin's extra) is that node's evidence
    assert record_value(theirs, "n1", {"fingerprint": "g"}) is None
    assert record_value(old, "n1", {"fingerprint": "g"}) == {"node": "n1", "gres": "gpu:8", "fingerprint": "g"}


# -------------------------------------------------------------------------------- the rule


def our_extra(node: str, reason: str, *, record_node: str | None = None, record_reason: str | None = None,
              drain_id: str | None = None, other: str = '{"rack": "r2"}') -> str:  # fmt: skip
    drain = {"id": drain_id or reason[10:18], "reason": record_reason or reason, "cause": "busy", "at": stamp(AT)}
    return splice(other, {"node": record_node or node, "drain": drain}) or ""


@settings(max_examples=examples(300))
@given(node=NODES, nonce=NONCES, text=TEXTS, offset=st.integers(-HOUR, HOUR), extra=st.booleans())
def test_our_drain_is_ours_whatever_the_clocks_say(node, nonce, text, offset, extra):
    """A node clock 400 s off made spurinv forget its own drain."""
    reason = reason_for(node, nonce, text)
    seen_at = AT + offset  # the controller's clock, ±1 h from ours
    state_claim = Claim(reason, "state", at=AT)
    from_controller = controller_claim(node, reason, our_extra(node, reason) if extra else None)

    assert owns(True, reason, seen_at, state_claim)
    assert from_controller is not None
    assert owns(True, reason, seen_at, from_controller)
    assert from_controller.source == ("controller-record" if extra else "reason")
    if extra:
        assert ownership.skew(seen_at, from_controller.at) == offset


@settings(max_examples=examples(300), derandomize=True)  # copied and edited reasons: see DIGEST
@given(
    node=NODES,
    nonce=NONCES,
    text=TEXTS,
    offset=st.integers(-HOUR, HOUR),
    later=st.integers(1, 30 * 86400),
    seen=st.sampled_from(["re-drained", "edited", "operator", "copied", "resumed", "forged-node", "forged-reason"]),
)
def test_what_is_not_our_drain_is_never_ours(node, nonce, text, offset, later, seen):
    """A generated mix of what others do with our drain: re-drain keeping our text (after we saw
    ours), edit it, drain with their own words, copy another node's drain, resume it, forge a
    record — never ours, by the state's claim or by the controller's."""
    reason = reason_for(node, nonce, text)
    pinned = AT + offset
    state_claim = Claim(reason, "state", at=AT, pinned=pinned)
    extra = our_extra(node, reason)
    drained, shown, shown_at = True, reason, pinned
    if seen == "re-drained":
        shown_at = pinned + later
    elif seen == "edited":
        shown = reason + " -- DO NOT RESUME (ops)"
    elif seen == "operator":
        shown = "NHC: bad ECC on GPU 3"
    elif seen == "copied":
        shown = reason_for(node + "x", nonce, text)  # the same words, drained on another node
        extra = our_extra(node + "x", shown)
    elif seen == "resumed":
        drained = False
    elif seen == "forged-node":
        extra = our_extra(node, reason, record_node=node + "x")
    elif seen == "forged-reason":
        extra = our_extra(node, reason, record_reason=reason_for(node, nonce, text + " (edited)"))

    if seen in ("forged-node", "forged-reason"):  # the controller's word contradicts itself
        assert controller_claim(node, shown, extra) is None
        return
    assert not owns(drained, shown, shown_at, state_claim)
    claim = controller_claim(node, shown, extra)
    if seen != "re-drained":  # from the controller alone a re-drain keeping our text cannot be told
        assert not owns(drained, shown, shown_at, claim)


def test_an_unpinned_claim_and_a_controller_that_does_not_say_when():
    reason = reason_for("n1", "3f9a", "x")

    assert owns(True, reason, None, Claim(reason, "state", pinned=AT))  # spur says no time: the text decides
    assert owns(True, reason, AT + 99, Claim(reason, "state"))  # not pinned yet: the first sight pins it
    assert not owns(True, reason, AT + 1, Claim(reason, "state", pinned=AT))
    assert not owns(True, reason, AT, None)


@pytest.mark.parametrize(
    ("seconds", "warned"), [(None, False), (0, False), (300, False), (-300, False), (301, True), (-301, True), (-400, True)]
)
def test_skew_beyond_five_minutes_is_reported(seconds, warned):
    warning = ownership.skew_warning(seconds)

    assert (warning is not None) == warned
    if warned:
        assert ("ahead of" if seconds > 0 else "behind") in warning


def test_a_claim_from_the_record_carries_its_time_and_cause():
    reason = reason_for("n1", "3f9a", "controller refused mi300x 8→64; update the controller config")
    extra = splice("", {"node": "n1", "drain": {"id": reason[10:18], "reason": reason, "cause": "refused",
                                                "fingerprint": "ab" * 8, "at": stamp(AT)}})  # fmt: skip

    claim = controller_claim("n1", reason, extra)
    bare = controller_claim("n1", reason, "")

    assert claim is not None
    assert (claim.source, claim.at, claim.cause, claim.fingerprint) == ("controller-record", AT, "refused", "ab" * 8)
    assert bare is not None
    assert (bare.source, bare.at, bare.cause) == ("reason", None, "refused")  # from our own words


def test_a_prefix_alone_is_no_claim():
    assert controller_claim("n1", f"{PREFIX} mi300x 8→7", "") is None


def _record_extra(node: str, **record: object) -> str:
    return splice('{"rack": "r2"}', {"node": node, **record}) or ""


@settings(max_examples=examples(200))
@given(
    node=NODES,
    nonce=NONCES,
    other=NONCES,
    text=TEXTS,
    shape=st.sampled_from(["lifted", "lifted-and-registered", "other-drain", "no-drain"]),
)
def test_a_record_that_contradicts_the_reason_gives_no_claim(node, nonce, other, text, shape):
    """After our lift Slurm keeps the reason text; a later drain
    without a reason of its own (``State=DRAIN``, drain_nodes(), NHC) shows our words and id. The
    record says that drain was lifted (or names another, or none): never ours, and ``fleet``
    does not count it as spurinv's recorded drain."""
    assume(other != nonce)
    reason = reason_for(node, nonce, text)
    drain_id = reason_id(reason, node)
    lifted = {"id": drain_id, "at": stamp(AT)}
    current = reason_for(node, other, text)
    extra = {
        "lifted": _record_extra(node, lifted=lifted),
        "lifted-and-registered": _record_extra(node, lifted=lifted, fingerprint="ab" * 8, gres="gpu:8"),
        "other-drain": _record_extra(node, drain={"id": reason_id(current, node), "reason": current}),
        "no-drain": _record_extra(node, fingerprint="ab" * 8, gres="gpu:8"),
    }[shape]

    assert controller_claim(node, reason, extra) is None
    row = fleet.row({"name": node, "state": ["IDLE", "DRAIN"], "reason": reason, "extra": extra}, AT)
    assert row["drain_recorded"] is False
    assert fleet.ORPHANED_DRAIN in row["attention"]


def test_a_record_of_another_node_or_none_leaves_the_id_in_the_reason_to_decide():
    reason = reason_for("n1", "3f9a", "mi300x 8→7")

    assert controller_claim("n1", reason, "") is not None  # spur: no extra at all
    assert controller_claim("n1", reason, '{"rack": "r2"}') is not None  # no record of ours
    copied = _record_extra("n9", lifted={"id": "00000000", "at": stamp(AT)})
    assert controller_claim("n1", reason, copied) is not None  # another node's record says nothing of ours


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"gres": "admin-note"},
        {"drain": "manual hold"},
        {"node": "n1", "drain": "manual hold"},
        {"node": "n1", "drain": {"id": 7, "reason": "r"}},
        {"node": "n1", "lifted": "yesterday"},
        {"node": "n1", "gres": 8},
        {"node": 1},
        {"node": "n1", "drain": {"id": "x", "reason": "r", "cause": "because"}},
    ],
)
def test_a_value_not_of_our_records_shape_is_the_admins(value):
    """Only the key names were checked; an admin's ``{}`` or
    ``{"drain": "manual hold"}`` under our key was taken for our record and rewritten."""
    extra = json.dumps({"rack": "r2", KEY: value})

    assert ownership.foreign_key(extra, "n1") is not None
    assert record_value(extra, "n1", {"fingerprint": "g"}) is None
    assert ownership.retired_value(extra, "n1", "x", "2026-12-03T09:00:00Z") is None


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False)
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)  # fmt: skip


@settings(max_examples=examples(300))
@given(value=st.dictionaries(st.sampled_from(sorted(ownership.RECORD_KEYS)), VALUES, max_size=4))
@example(value={"fingerprint": "", "drain": None})  # a null entry is no drain spurinv wrote
@example(value={"fingerprint": "", "lifted": None})
def test_only_our_records_shape_is_ever_rewritten(value):
    """Whatever an admin puts under our key: rewritten only when it is a record we could have written."""
    extra = json.dumps({KEY: value})
    rewritable = ownership.foreign_key(extra, "n1") is None

    if rewritable:
        assert value.get("node", "n1") == "n1"
        assert all(isinstance(value[key], str) for key in ("node", "fingerprint", "inventory", "gres") if key in value)
        assert isinstance(value.get("drain", {"id": "", "reason": ""}), dict)
        assert isinstance(value.get("lifted", {}), dict)
        assert value
    else:
        assert record_value(extra, "n1", {"fingerprint": "g"}) is None


def test_records_we_write_are_ours():
    reason = reason_for("n1", "3f9a", "mi300x 8→7")
    drain = {
        "id": reason_id(reason, "n1"),
        "reason": reason,
        "cause": "busy",
        "fingerprint": None,
        "at": "2026-12-03T09:00:00Z",
    }
    for value in (
        {"node": "n1", "fingerprint": "f", "inventory": "8x mi300x", "gres": "gpu:mi300x:8"},
        {"node": "n1", "drain": drain},
        {"node": "n1", "lifted": {"id": None, "at": "2026-12-03T09:00:00Z"}, "gres": "gpu:8"},
        {"fingerprint": "f", "inventory": "8x", "gres": "gpu:8"},  # before records named their node
    ):
        assert ownership.foreign_key(json.dumps({KEY: value}), "n1") is None, value


# ------------------------------------------- pinned by the mutation sweep of this module


def test_the_last_reason_time_read_is_the_last_second_of_9999():
    assert changed_at(253402300799) == 253402300799  # 9999-12-31T23:59:59Z
    assert changed_at(253402300800) is None  # 10000-01-01T00:00:00Z: no timestamp
    assert changed_at(1) == 1


def test_a_drain_id_takes_two_bytes_of_entropy_and_refuses_fewer():
    assert ownership.nonce_of(b"\x3f\x9a") == "3f9a"
    assert ownership.nonce_of(b"\x3f\x9a\xff") == "3f9a"
    with pytest.raises(ValueError, match=r"^a drain id needs 2 bytes of entropy, got 1$"):
        ownership.nonce_of(b"\x3f")


def test_a_reason_too_long_is_cut_to_240_characters_ending_in_an_ellipsis():
    reason = reason_for("n1", "3f9a", "x" * 300)

    assert len(reason) == 240
    assert reason.endswith("x…")
    assert reason[20:] == "x" * 219 + "…"
    assert ownership.reason_id(reason, "n1") == reason[10:18]


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("0000:05:00.0 PCIe x16→x8", "link"),
        ("0000:05:00.0 PCIe x16 degraded", "busy"),
        ("mi300x 8→x", "busy"),
        ("suspicious reading mi300x 8→0", "suspicious"),
        ("controller refused mi300x 8→64", "refused"),
        ("mi300x 8→7; re-registers when idle", "busy"),
    ],
)
def test_the_cause_of_a_drain_without_a_record_is_read_from_its_words(text, cause):
    claim = controller_claim("n1", reason_for("n1", "3f9a", text), "")

    assert claim is not None
    assert claim.cause == cause


@pytest.mark.parametrize(("recorded", "cause"), [("suspicious", "suspicious"), (None, "busy"), ("because", "busy")])
def test_the_cause_a_record_names_wins_over_the_words_and_a_missing_one_falls_back_to_them(recorded, cause):
    reason = reason_for("n1", "3f9a", "mi300x 8→7")
    drain = {"id": reason[10:18], "reason": reason, "at": stamp(AT)}
    if recorded is not None:
        drain["cause"] = recorded
    claim = controller_claim("n1", reason, splice("", {"node": "n1", "drain": drain}))

    assert claim is not None
    assert (claim.source, claim.cause) == ("controller-record", cause)


def test_a_record_with_every_key_we_write_is_ours_to_rewrite():
    """A node drained, lifted, registered and drained again: its record holds all six keys."""
    reason = reason_for("n1", "3f9a", "mi300x 8→7")
    value = {
        "node": "n1",
        "fingerprint": "ab" * 8,
        "inventory": "8x mi300x",
        "gres": "gpu:mi300x:8",
        "lifted": {"id": "00001111", "at": "2026-12-02T09:00:00Z"},
        "drain": {
            "id": reason[10:18],
            "reason": reason,
            "cause": "busy",
            "fingerprint": "ab" * 8,
            "at": "2026-12-03T09:00:00Z",
        },
    }
    extra = json.dumps({KEY: value})

    assert ownership.foreign_key(extra, "n1") is None
    assert record_value(extra, "n1", {"gres": "gpu:mi300x:7"}) == {**value, "gres": "gpu:mi300x:7"}


def test_only_our_prefix_and_the_bracket_then_a_space_make_a_reason_ours():
    reason = reason_for("n1", "3f9a", "mi300x 8→7")
    assert reason_id(reason, "n1") == reason[10:18]

    assert reason_id("SPURINV: " + reason[9:], "n1") is None  # another prefix of the same length
    assert reason_id(reason[:18] + ")" + reason[19:], "n1") is None  # the id not closed by "]"
    assert reason_id(reason[:19] + "_" + reason[20:], "n1") is None  # no space after the id
    assert ownership.text_of("spurinv: [3f9a1c07]no space") == "[3f9a1c07]no space"
    assert ownership.text_of(reason) == "mi300x 8→7"
    # an id of eight characters that are not all lower-case hex is no id of ours
    assert ownership.text_of("spurinv: [3f9a1cZ7] mi300x 8→7") == "[3f9a1cZ7] mi300x 8→7"
    assert ownership.cause_in("spurinv: [3F9A1C07] suspicious reading") != "suspicious"
    assert ownership.cause_in("spurinv: [3f9a1c07] suspicious reading") == "suspicious"


def test_a_drain_entry_whose_fingerprint_is_a_number_is_the_admins():
    extra = '{"spurinv": {"node": "n1", "drain": {"id": "3f9a1c07", "reason": "r", "fingerprint": 1.5}}}'

    assert ownership.foreign_key(extra, "n1") is not None
    assert record_value(extra, "n1", {"fingerprint": "g"}) is None
    assert parse_extra('{"a": 1.5, "b": 2E3}').members == {"a": 1.5, "b": 2000.0}


@pytest.mark.parametrize("text", [None, 5, b'{"a": 1}', ["{}"]])
def test_extra_that_is_not_text_is_no_object(text):
    assert parse_extra(text) is None


@pytest.mark.parametrize("text", ["{1: 2}", "{null: 1}", '{[1]: 2, "a": 3}', '{"a": 1, 2: 3}'])
def test_an_object_whose_key_is_not_a_string_is_never_rewritten(text):
    assert parse_extra(text) is None
    assert splice(text, {"fingerprint": "f"}) is None


@pytest.mark.parametrize("text", ["x}", '["a": 1}', '( "a": 1}', 'note"a": 1}'])
def test_extra_that_does_not_open_with_a_brace_is_never_rewritten(text):
    """A text whose second character could start an object's body is still no object."""
    assert parse_extra(text) is None
    assert splice(text, {"fingerprint": "f"}) is None


@pytest.mark.parametrize("text", ['{"a"=1}', '{"a";"b"}', '{"a": 1]', '{"a": 1)', '{"a": 1 x'])
def test_extra_with_another_separator_or_closing_is_never_rewritten(text):
    assert parse_extra(text) is None
    assert splice(text, {"fingerprint": "f"}) is None


def test_a_reason_of_ours_holding_the_separator_itself_is_still_found_under_slurms_message():
    reason = reason_for("n1", "3f9a", "mi300x 8→7 : spx")

    assert ownership.unamended(reason + " : Not responding", "n1") == (reason, "Not responding")
    assert ownership.unamended("NHC: x : y : z", "n1") is None
