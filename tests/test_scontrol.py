"""The scontrol transport's pure parts and edges: spur's `show node` text, the configuration keys,
and the mapping of scontrol's own failure messages to exit statuses (fault injection with a
one-line fake scontrol; the real messages are exercised in tests/e2e/test_converge_scontrol.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spurinv import exitcode
from spurinv.config.settings import Config, ControllerSection, render_default
from spurinv.controller.nodeview import gpu_counts, parse_spur_nodes
from spurinv.controller.scontrol import Scontrol
from spurinv.errors import ConfigError, ControllerError
from spurinv.secret import blank as scrub

# The layout of spur's `scontrol show node` (ROCm/spur crates/spur-cli/src/scontrol.rs @ 4cc3da8, `show`)
SPUR_SHOW = """NodeName=n1
   State=MIXED Reason=
   Partitions=gpu
   CPUTot=192 CPUAlloc=4 RealMemory=2063991 FreeMem=2000000
   Gres=gpu:mi300x:1,gpu:mi300x:1,gpu:mi300x:1
   Arch=x86_64 OS=Linux
   Labels=rack=2
   CpuLoad=0.12

NodeName=n2
   State=DRAINED Reason=spurinv: 8 → 64 GPUs; re-registers when idle
   CPUTot=64 CPUAlloc=0 RealMemory=1000 FreeMem=900
   Arch=x86_64 OS=Linux
   CpuLoad=0

"""


def test_spur_show_node_parses_state_reason_cpus_and_gres():
    mixed, drained = parse_spur_nodes(SPUR_SHOW)

    assert (mixed.name, mixed.base, mixed.flags, mixed.alloc_cpus, mixed.idle) == ("n1", "MIXED", (), 4, False)
    assert {"mi300x": 3} == gpu_counts(mixed.gres or "")
    assert (drained.base, drained.flags, drained.idle, drained.gres) == ("IDLE", ("DRAIN",), True, "")  # no Gres= line: no GPUs
    assert drained.reason == "spurinv: 8 → 64 GPUs; re-registers when idle"


def test_nothing_printed_is_no_node():
    assert [] == parse_spur_nodes("")


@pytest.mark.parametrize(
    "text",
    ["NodeName=\n   State=IDLE Reason=\n", "NodeName=n1\n   CPUTot=1 CPUAlloc=0\n", "NodeName=n1\n   State=IDLE Reason=\n"],
)
def test_a_block_without_name_state_or_cpualloc_is_a_protocol_error(text):
    with pytest.raises(ControllerError) as caught:
        parse_spur_nodes(text)
    assert "protocol" == caught.value.kind


WORDS = ["IDLE", "ALLOCATED", "MIXED", "DOWN", "DRAINED", "DRAINING", "ERROR", "UNKNOWN", "SUSPENDED", "DRAIN"]
reasons = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=80)
names = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)


@given(
    st.lists(
        st.tuples(
            names, st.sampled_from(WORDS), reasons, st.integers(0, 10**6), st.integers(0, 64), st.sampled_from(["mi300x", ""])
        ),
        max_size=5,
        unique_by=lambda t: t[0],
    )
)
def test_what_spur_prints_parses_back(nodes):
    text = ""
    for name, word, reason, cpus, gpus, model in nodes:
        text += f"NodeName={name}\n   State={word} Reason={reason}\n   CPUTot=999 CPUAlloc={cpus} RealMemory=1 FreeMem=1\n"
        if gpus:
            text += "   Gres=" + ",".join([f"gpu:{model}:1"] * gpus) + "\n"
        text += "   Arch=x86_64 OS=Linux\n   CpuLoad=0.5\n\n"

    views = parse_spur_nodes(text)

    assert [n[0] for n in nodes] == [v.name for v in views]
    for (_name, word, reason, cpus, gpus, _model), view in zip(nodes, views, strict=True):
        assert view.reason == reason
        assert view.alloc_cpus == cpus
        assert sum(gpu_counts(view.gres or "").values()) == gpus
        assert view.drained == word.startswith("DRAIN")
        assert not view.idle or (cpus == 0 and word not in ("ALLOCATED", "MIXED", "DRAINING"))


@given(st.text(max_size=300))
def test_any_text_parses_or_is_a_protocol_error(text):
    kind = None
    try:
        parse_spur_nodes(text)
    except ControllerError as exc:
        kind = exc.kind
    assert kind in (None, "protocol")


# --- configuration ---------------------------------------------------------------------------


def test_scontrol_transport_without_url_is_not_observe_mode():
    assert Config().observe
    assert not Config(controller=ControllerSection(transport="scontrol")).observe


@pytest.mark.parametrize(
    "values",
    [
        {"transport": "grpc"},
        {"scontrol": "bin/scontrol"},
        {"scontrol": "/usr/bin/scontrol\n"},
        {"register_command": ["./restart"]},
        {"register_command": [""]},
        {"register_command": ["systemctl", "restart\nspurd"]},
        {"register_command": ["x"] * 65},
        {"register_timeout": 0},
        {"register_timeout": 601},
        {"register_wait": -1},
        {"register_wait": 601},
    ],
)
def test_bad_values_are_refused(values):
    with pytest.raises(ValueError):
        ControllerSection(**values)


def test_config_init_shows_the_new_keys():
    text = render_default()

    keys = ('transport = "rest"', 'scontrol = ""', "register_command = []", "register_timeout = 120.0", "register_wait = 60.0")
    for line in keys:
        assert line in text


def test_a_register_command_not_on_path_is_78(cli, built, tmp_path, env):
    fake = fake_scontrol(tmp_path, "echo 'slurm 24.11.5'")
    (tmp_path / "config.toml").write_text(
        f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{fake}"\n'
        'register_command = ["no-such-program-spurinv"]\n'
    )
    root = built("mi300x-spx")
    state = tmp_path / "state.json"
    cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0")

    result = cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0", "--json")

    assert exitcode.CONFIG == result.code, result.out
    assert "controller.register_command" in result.out


# --- scontrol's failure messages -------------------------------------------------------------


def fake_scontrol(tmp: Path, body: str) -> str:
    """A scontrol that says 'slurm 24.11.5' to --version and runs ``body`` otherwise."""
    path = tmp / "scontrol"
    path.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "slurm 24.11.5"; exit 0; fi\n{body}\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("stderr", "kind", "code"),
    [
        ("slurm_update error: Invalid generic resource (gres) specification", "refused", exitcode.PROTOCOL),
        ("slurm_update error: Invalid node state specified", "refused", exitcode.PROTOCOL),
        ("slurm_update error: Invalid node name specified", "unknown-node", exitcode.NOHOST),
        ("slurm_update error: Invalid user id", "auth", exitcode.NOPERM),
        ("slurm_update error: Access/permission denied", "auth", exitcode.NOPERM),
        ("slurm_update error: Unable to contact slurm controller (connect failure)", "unreachable", exitcode.UNAVAILABLE),
        ("slurm_update error: Socket timed out on send/recv operation", "unreachable", exitcode.UNAVAILABLE),
        (
            'scontrol: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file\n'
            "slurm_update error: Protocol authentication error",
            "unreachable",
            exitcode.UNAVAILABLE,
        ),
    ],
)
def test_update_failures_map_by_scontrols_words(tmp_path, stderr, kind, code):
    fake = fake_scontrol(tmp_path, f"cat >&2 <<'EOF'\n{stderr}\nEOF\nexit 1")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert (caught.value.kind, caught.value.exit_code) == (kind, code)


@pytest.mark.parametrize(
    ("stderr", "sent"),
    [
        ("slurm_update error: Unable to contact slurm controller (connect failure)", False),
        ('scontrol: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file', False),
        ("slurm_update error: Socket timed out on send/recv operation", True),  # it may have arrived
        ("slurm_update error: Invalid generic resource (gres) specification", True),
    ],
)
def test_an_update_that_never_reached_the_controller_is_not_sent(tmp_path, stderr, sent):
    fake = fake_scontrol(tmp_path, f"cat >&2 <<'EOF'\n{stderr}\nEOF\nexit 1")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert caught.value.sent is sent


def test_a_show_that_is_not_json_is_76(tmp_path):
    fake = fake_scontrol(tmp_path, "echo '{nope'")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)


def test_a_scontrol_that_is_not_executable_is_78(tmp_path):
    path = tmp_path / "scontrol"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o644)

    with pytest.raises(ConfigError):
        Scontrol(ControllerSection(transport="scontrol", scontrol=str(path)), "n1", os.environ)


@pytest.mark.parametrize("reason", ['"spurinv: quoted', 'spurinv: ends with a quote"', "spurinv: a\nb", "spurinv: a\x1fb", ""])
def test_a_reason_scontrol_would_alter_is_never_sent(tmp_path, reason):
    log = tmp_path / "ran"
    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, f"touch {log}")), "n1", os.environ
    )

    with pytest.raises(ControllerError):
        client.post({"state": ["DRAIN"], "reason": reason})

    assert not log.exists()


def test_secrets_are_scrubbed_from_command_output():
    text = "ok token=abc Authorization: Bearer xyz password: hunter2 eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyb290In0.sig and KEEP"

    scrubbed = scrub(text, ("KEEP",))

    for secret in ("abc", "xyz", "hunter2", "eyJhbGci", "KEEP"):
        assert secret not in scrubbed
    assert scrubbed.startswith("ok token=<secret>")


def slurm_reason(argument: str) -> str:
    """What Slurm's scontrol makes of ``Reason=…`` (src/scontrol/update_node.c, 24.11): one
    leading and one trailing double quote are removed."""
    value = argument.split("=", 1)[1]
    value = value[1:] if value.startswith('"') else value
    return value[:-1] if value.endswith('"') else value


@given(st.text(max_size=300))
def test_a_reason_is_sent_exactly_as_one_argument_or_not_at_all(reason):
    # never run: the property is about the argv only (any executable will do as the program)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=sys.executable), "n1", os.environ)
    client.flavor = "slurm"
    try:
        args = client._update_args({"state": ["DRAIN"], "reason": reason})
    except ControllerError:
        return
    assert args[:3] == ["update", "NodeName=n1", "State=DRAIN"]
    assert [f"Reason={reason}"] == args[3:]
    assert slurm_reason(args[3]) == reason


def test_an_answer_about_one_node_over_a_mebibyte_is_cut_there_and_76(tmp_path):
    """One node's answer is ~5 kB; one that goes on is stopped at 1 MiB, not read to 64 MiB (an
    attack measured 300 MB of RSS for that), and never waited out to the timeout."""
    program = fake_scontrol(tmp_path, "exec /usr/bin/yes '{\"nodes\": ['")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program, timeout=60), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)
    # named by its first four words, without the node's name
    assert caught.value.message == f"`{program} --json show node …` printed more than 1048576 bytes"


@pytest.mark.parametrize(("size", "refused"), [(64 << 20, False), ((64 << 20) + 1, True)])
def test_every_nodes_answer_is_read_up_to_sixty_four_mebibytes(tmp_path, size, refused):
    """The fleet's ``--json show node`` (~5 kB a node) is read up to 64 MiB (67108864 bytes, a
    literal here); one byte more is refused, named, not parsed."""
    head = '{"nodes": []}'
    program = fake_scontrol(tmp_path, f"printf '{head}'; head -c {size - len(head)} /dev/zero | tr '\\0' ' '")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program, timeout=60), "n1", os.environ)

    if not refused:
        assert client.all_nodes() == []
        return
    with pytest.raises(ControllerError) as caught:
        client.all_nodes()
    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"`{program} --json show node …` printed more than 67108864 bytes",
    )


def test_a_command_the_deadline_stops_before_it_starts_is_not_recorded_as_sent(tmp_path):
    """The step's report lists what this step sent: a command never started is not among it."""
    from spurinv.budget import Budget
    from spurinv.errors import DeadlineError

    ran = tmp_path / "ran"
    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, f"touch {ran}")), "n1", os.environ,
        budget=Budget(0),
    )  # fmt: skip

    with pytest.raises(DeadlineError):
        client.view()

    assert client.sent == []
    assert not ran.exists()


def test_a_command_past_its_timeout_is_unreachable_and_one_the_deadline_cut_is_the_deadlines(tmp_path):
    """Both name the command by its first four words: the timeout is the
    controller's (backed off), the deadline's cut is not."""
    from spurinv.budget import Budget
    from spurinv.errors import DeadlineError

    program = fake_scontrol(tmp_path, "exec sleep 30")
    slow = Scontrol(ControllerSection(transport="scontrol", scontrol=program, timeout=1), "n1", os.environ)
    slow.flavor = "slurm"
    budget = Budget(1, clock=lambda: 0.0)  # a stopped clock: 1 s left whenever the command starts
    cut = Scontrol(ControllerSection(transport="scontrol", scontrol=program, timeout=30), "n1", os.environ, budget=budget)
    cut.flavor = "slurm"

    with pytest.raises(ControllerError) as timed_out:
        slow.view()
    with pytest.raises(DeadlineError) as deadline:
        cut.view()

    assert (timed_out.value.kind, timed_out.value.message) == (
        "unreachable",
        f"`{program} --json show node …` did not answer within 1 s; killed",
    )
    assert str(deadline.value) == f"controller.run_deadline (1 s) reached during `{program} --json show node`; state saved"


# --- reading a node through Slurm's scontrol, and its failures -------------------------

# `scontrol --json show node n1` prints the data parser's document, the shape of the REST API's
# answer (docs/slurm-rest.md); this capture is slurmrestd 24.11's (tests/fixtures/slurm/responses)
SHOW_N1 = Path(__file__).resolve().parent / "fixtures/slurm/responses/24.11/v0.0.42/node-n1-mixed-job-gres.json"


def _shows(tmp: Path, document: dict) -> Scontrol:
    (tmp / "show.json").write_text(json.dumps(document))
    fake = fake_scontrol(tmp, f'[ "$*" = "--json show node n1" ] || exit 9\ncat {tmp / "show.json"}')
    return Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)


def test_slurms_json_view_through_scontrol_is_the_nodes_view(tmp_path):
    client = _shows(tmp_path, json.loads(SHOW_N1.read_text()))

    view = client.view()

    assert (view.name, view.base, view.gres, view.gres_used, view.idle) == (
        "n1", "MIXED", "gpu:mi300x:8", "gpu:mi300x:2(IDX:0-1)", False,
    )  # fmt: skip
    assert client.rechecked  # `show node` loads every node: never a stale single-node answer
    assert [r.line() for r in client.sent][-1].endswith("scontrol --json show node n1 → 0")


@pytest.mark.parametrize(
    ("field", "value"),
    [("gres_used", "gpu:mi300x:99999999999999999999999(IDX:0)"), ("gres", "gpu:mi300x:99999999999999999999999")],
)
def test_a_slurm_view_with_an_unusable_gres_count_is_a_protocol_error(tmp_path, field, value):
    """An absurd count in either GRES string is refused when the node is read, not later in the
    middle of a decision (where it would be a traceback)."""
    document = json.loads(SHOW_N1.read_text())
    document["nodes"][0][field] = value
    client = _shows(tmp_path, document)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)


SHOW_ALL = SHOW_N1.with_name("nodes-n1-idle-n2-drained.json")


def test_every_node_through_slurms_scontrol_is_read_from_its_json_view(tmp_path):
    """``nodes()`` had a test through spur only; Slurm's ``scontrol`` answers
    ``--json show node`` (a stand-in printing slurmrestd 24.11's capture of two nodes)."""
    fake = fake_scontrol(tmp_path, f'[ "$*" = "--json show node" ] || exit 9\ncat {SHOW_ALL}')
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    views = client.nodes()

    assert [(v.name, v.base, v.flags, v.gres, v.reason) for v in views] == [
        ("n1", "IDLE", (), "gpu:mi300x:8", "spurinv: batch drain"),
        ("n2", "IDLE", ("DRAIN",), "gpu:4,fpga:4", "NHC: spurinv idle drain test"),
    ]
    assert client.flavor == "slurm"


def test_a_show_failure_scontrol_does_not_explain_is_a_protocol_error_with_its_words(tmp_path):
    fake = fake_scontrol(tmp_path, "echo 'slurm_load_node error: Something nobody has seen yet' >&2; exit 1")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("protocol", exitcode.PROTOCOL)
    assert str(caught.value) == "scontrol: slurm_load_node error: Something nobody has seen yet"


def test_a_silent_failure_is_named_by_its_exit_status(tmp_path):
    fake = fake_scontrol(tmp_path, "exit 3")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, str(caught.value)) == ("protocol", "scontrol: exit status 3")


def test_an_unknown_node_is_named_in_the_error(tmp_path):
    fake = fake_scontrol(tmp_path, "echo 'slurm_load_node error: Invalid node name specified' >&2; exit 1")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.exit_code) == ("unknown-node", exitcode.NOHOST)
    assert str(caught.value) == "the controller does not know node 'n1' (slurm_load_node error: Invalid node name specified)"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("echo 'slurm_load_node error: Invalid node name specified'; exit 1", "Invalid node name specified"),
        ("echo 'loading'; echo 'slurm_load_node error: Invalid node name specified' >&2; exit 1",
         "Invalid node name specified"),
        ("echo 'slurm_load_node error: Invalid node name specified'; echo 'Zero Bytes were transmitted' >&2; exit 1",
         "Zero Bytes were transmitted"),
    ],
)  # fmt: skip
def test_a_failure_is_read_from_stderr_and_from_stdout_only_when_stderr_is_empty(tmp_path, body, said):
    """which stream holds scontrol's words (``stderr or stdout``)."""
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, body)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert said in caught.value.message
    assert ("loading" in caught.value.message, caught.value.kind) == (
        False,
        "unknown-node" if said.startswith("Invalid") else "unreachable",
    )


def test_a_dry_run_shows_the_record_as_its_own_update_after_the_gres(tmp_path):
    """What `--dry-run` and the log print for a registration with our record: Slurm applies
    ``extra`` even when it refuses the GRES of the same update, so the record is its own exec."""
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, "exit 0")), "n1", os.environ)
    program = client.program

    both = client.describe({"gres": "gpu:mi300x:64", "extra": '{"spurinv":{}}'})
    alone = client.describe({"gres": "gpu:mi300x:64"})

    assert both == (
        f"EXEC {program} update NodeName=n1 Gres=gpu:mi300x:64; "
        f"then EXEC {program} update NodeName=n1 'Extra={{\"spurinv\":{{}}}}'"
    )
    assert alone == f"EXEC {program} update NodeName=n1 Gres=gpu:mi300x:64"


def test_a_dry_run_shows_the_record_after_the_register_command_as_the_run_names_it(tmp_path):
    """With ``controller.register_command`` the real run's step reads ``EXEC <command>; then EXEC
    scontrol update … Extra=…`` (the record is written after the command); the dry run said only
    ``EXEC <command>``."""
    import io

    from spurinv.controller.registration import Registrar
    from spurinv.log import Log

    registrar = Registrar(("/usr/bin/true", "n1"), 5, 1, {"PATH": "/usr/bin:/bin"}, Log({}, stream=io.StringIO()))
    section = ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, "exit 0"))
    client = Scontrol(section, "n1", os.environ, registrar=registrar)

    both = client.describe({"gres": "gpu:mi300x:64", "extra": '{"spurinv":{}}'})
    alone = client.describe({"gres": "gpu:mi300x:64"})

    assert both == f"EXEC /usr/bin/true n1; then EXEC {client.program} update NodeName=n1 'Extra={{\"spurinv\":{{}}}}'"
    assert alone == "EXEC /usr/bin/true n1"


@pytest.mark.parametrize(
    "body",
    [{}, {"reason": "spurinv: x"}, {"state": ["DOWN"]}, {"state": ["DOWN"], "extra": "{}"}, {"state": [], "extra": "{}"}],
)
def test_a_body_scontrol_has_no_update_for_is_refused_before_anything_runs(tmp_path, body):
    """only a drain, a resume, a GRES or our record alone becomes an
    ``scontrol update``; anything else is a protocol error, never a partial update (a state
    dropped, the record written alone) or an ``update`` with nothing in it."""
    ran = tmp_path / "ran"
    fake = fake_scontrol(tmp_path, f"touch {ran}")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post(body)

    assert (caught.value.kind, caught.value.message) == ("protocol", f"no scontrol update for {sorted(body)}")
    assert not ran.exists()
    assert client.describe({"extra": "{}"}) == f"EXEC {client.program} update NodeName=n1 'Extra={{}}'"  # alone: fine


def test_a_refused_reason_is_quoted_in_the_error_up_to_sixty_characters(tmp_path):
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, "exit 0")), "n1", os.environ)
    reason = '"' + "x" * 100

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": reason})

    assert repr(reason[:60]) in str(caught.value)
    assert repr(reason[:61]) not in str(caught.value)


def test_spurs_bare_update_failure_before_any_read_is_a_refusal_not_a_crash(tmp_path):
    """spur prints only "node update failed"; it is read as an auth problem only for a node this
    client has just read (listed); before any read it is the update refused, never an error of ours."""
    fake = tmp_path / "scontrol"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.1.0"; exit 0; fi\necho "node update failed" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(fake)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": "spurinv: [00000000] x"})

    assert caught.value.kind == "refused"
    assert client.rechecked is False  # no read was made: nothing was an all-nodes query


def test_scontrol_never_gets_slurm_jwt_it_authenticates_with_munge(tmp_path):
    """A SLURM_JWT in spurinv's environment (meant for slurmrestd) would make scontrol use
    auth/jwt instead of munge; it is not passed."""
    seen = tmp_path / "env"
    program = fake_scontrol(tmp_path, f"env > {seen}; echo '{{\"nodes\": []}}'")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1",
                      {**os.environ, "SLURM_JWT": "eyJhbGciOi.stale"})  # fmt: skip

    with contextlib.suppress(ControllerError):
        client.view()

    assert seen.exists()
    assert "SLURM_JWT" not in seen.read_text()
    assert "PATH=" in seen.read_text()


def test_a_json_view_whose_nodes_is_null_is_a_protocol_error(tmp_path):
    """``"nodes": null`` is a key without a list: refused, never handed on as no nodes."""
    fake = fake_scontrol(tmp_path, '[ "$*" = "--json show node" ] || exit 9\necho \'{"nodes": null, "errors": []}\'')
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.all_nodes()

    assert (caught.value.kind, caught.value.message) == ("protocol", "scontrol --json show node: no 'nodes' list")


def test_a_drain_the_deadline_stops_before_it_starts_is_named_by_its_first_four_words(tmp_path):
    """The label quotes the program and three words, never the reason after them."""
    from spurinv.budget import Budget
    from spurinv.errors import DeadlineError

    ran = tmp_path / "ran"
    program = fake_scontrol(tmp_path, f"touch {ran}")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1", os.environ, budget=Budget(0))
    client.flavor = "slurm"

    with pytest.raises(DeadlineError) as caught:
        client.post({"state": ["DRAIN"], "reason": "spurinv: 8 → 64 GPUs"})

    assert str(caught.value) == (
        f"controller.run_deadline (0 s) reached before `{program} update NodeName=n1 State=DRAIN`; state saved"
    )
    assert client.sent == []
    assert not ran.exists()


def test_an_argument_of_131072_bytes_is_refused_before_exec_and_131071_runs(tmp_path):
    """With its NUL, 131072 bytes would be one beyond MAX_ARG_STRLEN (the kernel's E2BIG);
    131071 bytes and the NUL fit exactly."""
    ran = tmp_path / "ran"
    program = fake_scontrol(tmp_path, f"touch {ran}")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1", os.environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": "x" * (131072 - len("Reason="))})

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"`{program} update NodeName=n1 …`: Reason= would be 131072 bytes, "
        "beyond Linux's 131072-byte limit for one argument (MAX_ARG_STRLEN); not run",
    )
    assert caught.value.sent is False  # never ran: its step says "not sent"
    assert client.sent == []
    assert not ran.exists()

    client.post({"state": ["DRAIN"], "reason": "x" * (131071 - len("Reason="))})

    assert [r.status for r in client.sent] == [0]
    assert ran.exists()


def test_a_nul_in_an_argument_is_refused_naming_the_command_by_its_first_three_words(tmp_path):
    """The program, ``update`` and the node, never the arguments after them (the GRES itself is
    quoted once, as the entry that holds the NUL)."""
    ran = tmp_path / "ran"
    program = fake_scontrol(tmp_path, f"touch {ran}")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1", os.environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post({"gres": "gpu:mi300x:8,nic:cx\0x7:2"})

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"`{program} update NodeName=n1 …`: Gres= entry `nic:cx\\0x7:2` holds a NUL byte, "
        "which no command line can carry; not run",
    )
    assert caught.value.exit_code == exitcode.PROTOCOL  # 76, never 70 (the exec's ValueError)
    assert caught.value.sent is False
    assert client.sent == []
    assert not ran.exists()


def test_spurs_text_that_is_not_utf8_is_read_and_the_node_holding_it_is_named(tmp_path):
    """spur prints text, not JSON: a Latin-1 byte in a reason or a GRES reads as U+FFFD and the
    log names the nodes that held it, as for Slurm's JSON view."""
    import io

    from spurinv.log import Log

    shown = tmp_path / "show.txt"
    text = SPUR_SHOW.replace("spurinv: 8 → 64 GPUs; re-registers when idle", "Zo\xeb")
    shown.write_bytes(text.replace("Gres=gpu:mi300x:1,", "Gres=fpga:\xe9:1,gpu:mi300x:1,").encode("latin-1"))
    program = tmp_path / "scontrol"
    program.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.1.0"; exit 0; fi\ncat "{shown}"\n')
    program.chmod(0o755)
    stream = io.StringIO()
    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ, log=Log({}, stream=stream)
    )

    views = client.nodes()

    assert [(v.name, v.reason, v.gres) for v in views] == [
        ("n1", "", "fpga:\ufffd:1,gpu:mi300x:1,gpu:mi300x:1,gpu:mi300x:1"),
        ("n2", "Zo\ufffd", ""),
    ]
    assert "scontrol show node: text that is not UTF-8 (read as U+FFFD) in node n1, n2\n" in stream.getvalue()


def test_a_failure_is_quoted_by_its_last_600_characters(tmp_path):
    """scontrol's words, whitespace folded, are kept from their end: the cause comes last."""
    words = "a" + "b" * 600
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=fake_scontrol(tmp_path, f"echo {words} >&2; exit 1")),
                      "n1", os.environ)  # fmt: skip

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert str(caught.value) == "scontrol: " + "b" * 600


def test_a_version_line_of_another_program_is_quoted_by_its_first_80_characters(tmp_path):
    """A program at controller.scontrol that is no scontrol: its --version line, cut to 80
    characters, names what it is."""
    path = tmp_path / "scontrol"
    path.write_text("#!/bin/sh\necho " + "v" * 80 + "w\n")
    path.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(path)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert caught.value.kind == "protocol"
    assert f"--version printed {'v' * 80!r}: neither Slurm's nor spur's scontrol" in str(caught.value)


# --- edges no test pinned (a read of every mutant of scontrol.py, 2026-12-04) -------------


def test_an_update_spur_answers_with_an_ignored_key_is_refused_quoting_its_first_200_characters(tmp_path):
    """spur prints ``unknown update key`` and exits 0: not applied; its words, whitespace folded,
    are quoted up to 200 characters."""
    program = tmp_path / "scontrol"
    program.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.5.0 (4cc3da8)"; exit 0; fi\n'
        f"echo \"scontrol: unknown update key 'gres'\n  {'y' * 300}\" >&2\n"
    )
    program.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.post({"gres": "gpu:mi300x:64"})

    assert (caught.value.kind, caught.value.message) == (
        "refused",
        "spur's scontrol ignored the update (scontrol: unknown update key 'gres' " + "y" * 164 + "): not applied",
    )


def test_a_command_timeout_the_run_deadline_left_whole_is_the_controllers_not_the_deadlines(tmp_path):
    """The run has exactly the command's timeout left (a stopped clock): the timeout was not cut,
    so a command that outlives it is an unreachable controller, backed off."""
    from spurinv.budget import Budget

    program = fake_scontrol(tmp_path, "exec sleep 30")
    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=program, timeout=0.3), "n1", os.environ,
        budget=Budget(0.3, clock=lambda: 0.0),
    )  # fmt: skip
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.message) == (
        "unreachable",
        f"`{program} --json show node …` did not answer within 0.3 s; killed",
    )


def test_a_version_that_prints_nothing_is_quoted_as_empty(tmp_path):
    path = tmp_path / "scontrol"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(path)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"{path} --version printed '': neither Slurm's nor spur's scontrol",
    )


def test_a_scontrol_gone_after_the_start_is_a_configuration_error_in_the_systems_words(tmp_path):
    program = fake_scontrol(tmp_path, "exit 0")
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1", os.environ)
    os.unlink(program)

    with pytest.raises(ConfigError) as caught:
        client.view()

    assert str(caught.value) == f"controller.scontrol: cannot run {program}: No such file or directory"


def test_spurs_answer_about_one_node_with_a_second_block_is_refused_as_ambiguous(tmp_path):
    """Asked for n1, spur printed two node blocks: only text in n1's reason can make the second
    (spur prints a reason as it is, line breaks included), so the answer is not read at all."""
    shown = tmp_path / "show.txt"
    shown.write_text(SPUR_SHOW.replace("NodeName=n2", "NodeName=ghost"))
    program = tmp_path / "scontrol"
    program.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.5.0"; exit 0; fi\ncat "{shown}"\n')
    program.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ)

    with pytest.raises(ControllerError) as caught:
        client.view()

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        "spur's scontrol output for node 'n1' is ambiguous (2 node blocks for one node; "
        "a reason holding a line break?): not read",
    )
    assert [view.name for view in client.nodes()] == ["n1", "ghost"]  # all nodes: every block is a node


def test_spurs_fleet_view_is_each_node_reduced_by_keep_and_an_empty_reason_is_none(tmp_path):
    """``fleet`` hands a ``keep`` that reduces each node as it is read (and drops what it returns
    None for); spur's empty ``Reason=`` is the data parser's missing reason, None."""
    shown = tmp_path / "show.txt"
    shown.write_text(SPUR_SHOW)
    program = tmp_path / "scontrol"
    program.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.5.0"; exit 0; fi\ncat "{shown}"\n')
    program.chmod(0o755)
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ)

    assert [(node["name"], node["reason"]) for node in client.all_nodes()] == [
        ("n1", None),
        ("n2", "spurinv: 8 → 64 GPUs; re-registers when idle"),
    ]
    assert client.all_nodes(keep=lambda node: None if node["name"] == "n1" else node["name"].upper()) == ["N2"]


def test_spur_without_a_register_command_says_once_in_the_log_that_it_cannot_re_register(tmp_path):
    """spur ignores ``Gres=``: a changed GPU count is not applied and the log says why, once;
    a count spur already lists (spurd restarted by hand) is applied, with nothing to say."""
    import io

    from spurinv.controller.scontrol import SPUR_CANNOT_REGISTER
    from spurinv.log import Log

    shown = tmp_path / "show.txt"
    shown.write_text(SPUR_SHOW.split("\n\n", 1)[0] + "\n")  # n1 alone, as `show node n1` prints it
    program = tmp_path / "scontrol"
    program.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "spur 0.5.0"; exit 0; fi\ncat "{shown}"\n')
    program.chmod(0o755)
    stream = io.StringIO()
    client = Scontrol(
        ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ, log=Log({}, stream=stream)
    )

    refused = client.register({"gres": "gpu:mi300x:64"}, {"mi300x": 64}, "f" * 64)
    assert (refused.applied, refused.error) == (False, SPUR_CANNOT_REGISTER)
    assert stream.getvalue().count(SPUR_CANNOT_REGISTER) == 1

    done = client.register({"gres": "gpu:mi300x:3"}, {"mi300x": 3}, "f" * 64)
    assert (done.applied, done.error, done.view.name) == (True, None, "n1")
    assert stream.getvalue().count(SPUR_CANNOT_REGISTER) == 1
    # what --dry-run and the log say of a registration there: none, and why
    assert client.describe({"gres": "gpu:mi300x:64"}) == "none: " + SPUR_CANNOT_REGISTER
    assert client.describe({"gres": "gpu:mi300x:64"}).startswith("none: spur's scontrol cannot change")

    silent = Scontrol(ControllerSection(transport="scontrol", scontrol=str(program)), "n1", os.environ)
    assert silent.register({"gres": "gpu:mi300x:64"}, {"mi300x": 64}, "f" * 64).applied is False


def test_a_command_line_linux_refuses_as_too_long_is_named_by_its_first_three_words_and_not_run(tmp_path):
    """Every argument under the one-argument limit, the whole exec over the kernel's (here an
    environment of 4 MiB, 32 variables just under 128 KiB each): E2BIG, what spurinv would pass,
    not its configuration."""
    ran = tmp_path / "ran"
    program = fake_scontrol(tmp_path, f"touch {ran}")
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    environ.update({f"SPURINV_TEST_BIG{i}": "x" * 131060 for i in range(32)})
    client = Scontrol(ControllerSection(transport="scontrol", scontrol=program), "n1", environ)
    client.flavor = "slurm"

    with pytest.raises(ControllerError) as caught:
        client.post({"state": ["DRAIN"], "reason": "spurinv: x"})

    assert (caught.value.kind, caught.value.message) == (
        "protocol",
        f"`{program} update NodeName=n1 …`: Argument list too long; not run",
    )
    assert caught.value.sent is False
    assert [request.left for request in client.sent] == [False]  # the exec failed: nothing ran
    assert not ran.exists()


def test_the_run_deadline_cuts_a_hanging_scontrol(tmp_path: Path, env: dict[str, str], built):
    """``controller.run_deadline`` bounded only REST: a hanging ``scontrol`` ran for its own
    ``controller.timeout`` (25 s here) instead of ending the run at the deadline with 75."""
    scontrol = tmp_path / "scontrol"
    scontrol.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "slurm 24.11.5"; exit 0; }\nexec sleep 25\n')
    scontrol.chmod(0o755)
    config = Path(env["SPURINV_CONFIG"])
    config.write_text(
        f'[node]\nname = "n1"\n[controller]\ntransport = "scontrol"\nscontrol = "{scontrol}"\n'
        "timeout = 30\nrun_deadline = 3\n[policy]\nconfirm_interval = 0\n"
    )
    config.chmod(0o600)
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    argv = [sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")), "--state", str(state)]

    started = time.monotonic()  # no state yet: even the first reading reads the controller
    ran = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)

    assert ran.returncode == 75, (ran.stdout, ran.stderr)
    assert time.monotonic() - started < 15
    assert "run_deadline" in ran.stdout + ran.stderr
