"""``spurinv-slurm-dynamic``: the register command for Slurm dynamic nodes, and what
spurinv tells any register command in its environment. The real delete-and-restart on Slurm
24.11 is tests/e2e/test_dynamic_lab.py; here ``scontrol`` and the restart are stand-ins that
record what they were asked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_refusal_look import Slurm

from spurinv import exitcode, slurmdynamic
from spurinv.controller.ownership import reason_for
from spurinv.slurmdynamic import Failed, in_hostlist, main, merged_gres_conf, parser, register, restore_plan

NEW = "NodeName=d1 Name=gpu Type=mi300x File=/dev/dri/renderD[128-191]\n"
lines = st.sampled_from([
    "NodeName=d1 Name=gpu Type=mi300x File=/dev/dri/renderD[128-135]",
    "NodeName=d2 Name=gpu Type=mi300x File=/dev/dri/renderD[128-135]",
    "NodeName=d1 Name=nic File=/dev/infiniband/uverbs0",
    "AutoDetect=off",
    "# a comment naming NodeName=d1 Name=gpu",
    "",
])  # fmt: skip


@given(st.lists(lines, max_size=12))
def test_the_nodes_gpu_lines_are_replaced_and_every_other_line_kept(current):
    text = "".join(f"{line}\n" for line in current)

    merged = merged_gres_conf(text, "d1", NEW)

    ours = [line for line in merged.splitlines() if line.startswith("NodeName=d1 Name=gpu")]
    assert ours == [NEW.strip()]
    others = [line for line in current if not line.startswith("NodeName=d1 Name=gpu")]
    assert [line for line in merged.splitlines() if line != NEW.strip()] == others
    assert merged_gres_conf(merged, "d1", NEW) == merged  # idempotent


class Cluster:
    """A runner standing in for scontrol and the restart: one node, and what was run."""

    def __init__(self, node: dict[str, Any] | None, delete_status: int = 0) -> None:
        self.node = node
        self.delete_status = delete_status
        self.ran: list[list[str]] = []

    def __call__(self, argv, timeout):
        argv = list(argv)
        self.ran.append(argv)
        if argv[1:3] == ["--json", "show"]:
            if self.node is None:
                return subprocess.CompletedProcess(argv, 1, "", "slurm_load_node error: Invalid node name specified")
            return subprocess.CompletedProcess(argv, 0, json.dumps({"nodes": [self.node]}), "")
        if argv[0].endswith("restart-slurmd"):
            self.node = {"name": "d1", "state": ["IDLE"], "reason": "", "gres": "gpu:mi300x:64", "extra": ""}
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[1] == "delete":
            if self.delete_status:
                return subprocess.CompletedProcess(argv, 1, "", "delete_nodes error: Node has jobs")
            self.saved, self.node = self.node, None
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[1] == "update":
            key, _, value = argv[3].partition("=")
            self.node = {**(self.node or {}), key.lower(): value}
            return subprocess.CompletedProcess(argv, 0, "", "")
        raise AssertionError(argv)


ENV = {"SPURINV_NODE": "d1", "SPURINV_GRES": "gpu:mi300x:64", "SPURINV_GRES_CONF": NEW}


def options(tmp_path: Path, *extra: str):
    restart = tmp_path / "restart-slurmd"  # checked to exist before any delete
    restart.write_text("#!/bin/sh\n")
    restart.chmod(0o755)
    return parser().parse_args(["--gres-conf", str(tmp_path / "gres.conf"), "--env-file", str(tmp_path / "slurmd.env"),
                                "--restart", str(restart), "--scontrol", "scontrol", "--wait", "1",
                                "--saved", str(tmp_path / "slurmd.env.saved"), *extra])  # fmt: skip


def restarted(cluster: Cluster) -> bool:
    return any(argv[0].endswith("restart-slurmd") for argv in cluster.ran)


def idle(**fields: Any) -> dict[str, Any]:
    return {"name": "d1", "state": ["IDLE"], "reason": "", "gres": "gpu:mi300x:8", "extra": "", **fields}


def test_an_idle_node_is_deleted_and_restarted_with_its_files_written(tmp_path):
    (tmp_path / "gres.conf").write_text("AutoDetect=off\nNodeName=d1 Name=gpu Type=mi300x File=/dev/dri/renderD[128-135]\n")
    cluster = Cluster(idle(extra='{"rack": "r2"}'))

    said = register(options(tmp_path), ENV, cluster, sleep=lambda _: None)

    assert ["scontrol", "delete", "nodename=d1"] in cluster.ran
    assert restarted(cluster)
    assert (tmp_path / "gres.conf").read_text() == "AutoDetect=off\n" + NEW
    assert (tmp_path / "slurmd.env").read_text() == "SLURMD_GRES=gpu:mi300x:64\n"
    assert cluster.node["extra"] == '{"rack": "r2"}'  # the admin's extra, back byte for byte
    assert "deleted node d1" in said


def test_a_refused_delete_is_75_and_nothing_is_restarted(tmp_path):
    cluster = Cluster(idle(state=["MIXED"]), delete_status=1)

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster)

    assert exitcode.TEMPFAIL == caught.value.status
    assert "Node has jobs" in str(caught.value)
    assert not restarted(cluster)


def test_a_node_drained_by_someone_else_is_never_deleted(tmp_path):
    cluster = Cluster(idle(state=["IDLE", "DRAIN"], reason="admin: burn-in"))

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster)

    assert exitcode.NOPERM == caught.value.status
    assert [argv[1] for argv in cluster.ran] == ["--json"]  # read, nothing else
    assert not (tmp_path / "gres.conf").exists()


OUR_REASON = reason_for("d1", "ab12", "controller refused gpu 8→64; fix slurm.conf")


def test_our_own_drain_does_not_stop_it(tmp_path):
    cluster = Cluster(idle(state=["IDLE", "DRAIN"], reason=OUR_REASON))

    register(options(tmp_path), ENV, cluster)

    assert ["scontrol", "delete", "nodename=d1"] in cluster.ran


def test_a_second_run_after_it_is_done_does_nothing(tmp_path):
    cluster = Cluster(idle())
    register(options(tmp_path), ENV, cluster)
    cluster.ran.clear()

    said = register(options(tmp_path), ENV, cluster)

    assert [argv[1] for argv in cluster.ran] == ["--json"]
    assert "nothing to do" in said


def test_a_run_that_died_after_the_delete_restarts_without_deleting_again(tmp_path):
    cluster = Cluster(None)

    register(options(tmp_path), ENV, cluster)

    assert [argv for argv in cluster.ran if "delete" in argv] == []
    assert restarted(cluster)


def test_without_spurinvs_environment_it_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "spurinv.slurmdynamic", "--restart", "true"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"}, check=False)  # fmt: skip

    assert exitcode.USAGE == done.returncode
    assert "controller.register_command" in done.stderr


def test_it_imports_only_the_standard_library():
    done = subprocess.run([sys.executable, "-c", "import sys, spurinv.slurmdynamic; print(sorted(sys.modules))"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    loaded = done.stdout
    for heavy in ("'pydantic'", "'typer'", "'rich'", "'requests'"):
        assert heavy not in loaded
    assert slurmdynamic.__doc__


# --- what spurinv tells a register command ---------------------------------------------------
# The fake commands below run with -S: they need only the standard library, and site-packages
# cost each start about a third of its CPU.

DUMP = r"""
import json, os, sys
seen = {k: v for k, v in os.environ.items() if k.startswith("SPURINV_")}
seen["others"] = sorted(k for k in os.environ if not k.startswith("SPURINV_"))
path = seen.get("SPURINV_INVENTORY")
seen["inventory"] = json.load(open(path)) if path and os.path.exists(path) else None
json.dump(seen, open(os.environ["DUMP_TO"], "w"))
state = os.environ["FAKE_SLURM_STATE"]
node = json.load(open(state)); node["gres"] = seen["SPURINV_GRES"]; json.dump(node, open(state, "w"))
"""


def test_the_register_command_is_told_the_node_gres_gres_conf_fingerprint_and_inventory(cli, built, tmp_path, monkeypatch):
    slurm = Slurm(tmp_path)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(slurm.path))
    monkeypatch.setenv("SPURINV_STATE", "/not/for/the/command")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", "/run/credentials/spurinv.service")
    monkeypatch.setenv("SLURM_JWT", "eyJhbGciOi.secret")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    monkeypatch.setenv("DUMP_TO", str(tmp_path / "seen.json"))
    command = tmp_path / "register"
    command.write_text(f"#!{sys.executable} -S\n{DUMP}")
    command.chmod(0o755)
    slurm.config.write_text(slurm.config.read_text().replace('transport = "scontrol"\n',
                            f'transport = "scontrol"\nregister_command = ["{command}"]\n'))  # fmt: skip
    slurm.update(gres="gpu:mi300x:8,nic:2")
    run = lambda root: cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config, "--json")  # noqa: E731
    for _ in range(2):
        assert run(built("mi300x-spx")).code == 0
    run(built("mi300x-cpx"))

    done = run(built("mi300x-cpx"))

    assert done.code == 0, done.out
    seen = json.loads((tmp_path / "seen.json").read_text())
    fingerprint = done.json()["fingerprint"]
    assert seen["SPURINV_NODE"] == "n1"
    assert seen["SPURINV_GRES"] == "gpu:mi300x:64,nic:2"  # GPUs rebuilt, every other GRES kept
    assert seen["SPURINV_FINGERPRINT"] == fingerprint
    assert seen["SPURINV_GRES_CONF"].startswith("NodeName=n1 Name=gpu Type=mi300x File=/dev/dri/renderD[")
    assert seen["inventory"]["inventory"]["fingerprint"] == fingerprint  # discover --json's document
    assert "SPURINV_STATE" not in seen  # inherited SPURINV_* never reach it
    # a minimal environment: spurinv's credentials never reach the command
    assert "CREDENTIALS_DIRECTORY" not in seen["others"]
    assert "SLURM_JWT" not in seen["others"]
    assert "SLURM_CONF" in seen["others"]
    assert "PATH" in seen["others"]
    assert not Path(seen["SPURINV_INVENTORY"]).exists()  # removed after the command


GONE = r"""
import json, os, time
state = os.environ["FAKE_SLURM_STATE"]
node = json.load(open(state))
node.update(gres=os.environ["SPURINV_GRES"], absent_until=time.time() + 1.5)  # deleted; back in 1.5 s
json.dump(node, open(state, "w"))
"""


def test_the_read_back_waits_out_a_node_that_is_briefly_unknown(cli, built, tmp_path, monkeypatch):
    """A dynamic node between its delete and the restarted slurmd's registration is unknown to
    the controller: "not yet", within register_wait (before, 68 at the first look)."""
    slurm = Slurm(tmp_path)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(slurm.path))
    command = tmp_path / "register"
    command.write_text(f"#!{sys.executable} -S\n{GONE}")
    command.chmod(0o755)
    slurm.config.write_text(slurm.config.read_text().replace('transport = "scontrol"\n',
                            f'transport = "scontrol"\nregister_command = ["{command}"]\nregister_wait = 20\n'))  # fmt: skip
    run = lambda root: cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config, "--json")  # noqa: E731
    for _ in range(2):
        assert run(built("mi300x-spx")).code == 0
    run(built("mi300x-cpx"))

    done = run(built("mi300x-cpx"))

    assert done.code == 0, done.out
    assert ["read-view", "register", "none"] == [step["action"] for step in done.json()["steps"]]
    assert slurm.node["gres"] == "gpu:mi300x:64"


# --- what the dynamic-node script deletes, restores and refuses -----------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"state": ["DOWN", "DYNAMIC_NORM"], "reason": "Not responding"},
        {"state": ["IDLE", "FAIL"], "reason": "bad DIMM"},
        {"state": ["IDLE", "MAINTENANCE", "RESERVED"]},
        {"state": ["IDLE", "DRAIN"], "reason": "spurinv: [ab12cd34] forged, no valid id"},
        {"state": ["IDLE", "DRAIN"], "reason": "spurinv: not ours at all"},
        {"state": ["IDLE"], "reason": "admin: note left after a resume"},
        {
            "state": ["IDLE", "DRAIN"],
            "reason": OUR_REASON,  # our id, but the record names another drain
            "extra": '{"spurinv": {"node": "d1", "drain": {"id": "ab12' + OUR_REASON[14:18] + '", "reason": "other"}}}',
        },
    ],
)
def test_a_node_not_plainly_idle_or_not_drained_by_spurinv_is_never_deleted(tmp_path, fields):
    cluster = Cluster(idle(**fields))

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster)

    assert exitcode.NOPERM == caught.value.status
    assert [argv[1] for argv in cluster.ran] == ["--json"]
    assert not (tmp_path / "gres.conf").exists()


def test_a_dynamic_node_in_its_plain_state_is_deleted(tmp_path):
    cluster = Cluster(idle(state=["IDLE", "DYNAMIC_NORM"]))

    register(options(tmp_path), ENV, cluster)

    assert ["scontrol", "delete", "nodename=d1"] in cluster.ran


class FailingRestart(Cluster):
    def __call__(self, argv, timeout):
        if argv[0].endswith("restart-slurmd"):
            self.ran.append(list(argv))
            return subprocess.CompletedProcess(argv, 1, "", "Job for slurmd.service failed")
        return super().__call__(argv, timeout)


def test_a_failed_restart_keeps_the_extra_and_comment_and_the_next_run_restores_them(tmp_path):
    cluster = FailingRestart(idle(extra='{"rack": "r2"}', comment="bought 2025"))

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster)

    assert exitcode.UNAVAILABLE == caught.value.status
    assert cluster.node is None  # deleted, not back
    saved = tmp_path / "slurmd.env.saved"
    assert json.loads(saved.read_text()) == {"node": "d1", "Extra": '{"rack": "r2"}', "Comment": "bought 2025"}
    assert saved.stat().st_mode & 0o777 == 0o600

    fixed = Cluster(None)  # the restart works now
    register(options(tmp_path), ENV, fixed)

    assert fixed.node["extra"] == '{"rack": "r2"}'
    assert fixed.node["comment"] == "bought 2025"
    assert not saved.exists()


def test_a_missing_restart_program_is_78_before_the_delete(tmp_path):
    cluster = Cluster(idle())
    opts = options(tmp_path)
    opts.restart = [str(tmp_path / "no-such-program")]

    with pytest.raises(Failed) as caught:
        register(opts, ENV, cluster)

    assert exitcode.CONFIG == caught.value.status
    assert [argv for argv in cluster.ran if "delete" in argv] == []


def test_sigterm_during_the_restart_waits_until_the_extra_is_back(tmp_path):
    import os
    import signal

    class Stopped(Cluster):
        def __call__(self, argv, timeout):
            if argv[0].endswith("restart-slurmd"):
                os.kill(os.getpid(), signal.SIGTERM)  # systemd stops spurinv.service mid-way
            return super().__call__(argv, timeout)

    cluster = Stopped(idle(extra='{"rack": "r2"}'))

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster, sleep=lambda _: None)

    assert exitcode.TEMPFAIL == caught.value.status
    assert cluster.node["extra"] == '{"rack": "r2"}'  # put back before it stopped
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


@pytest.mark.parametrize(
    "line",
    [
        "Name=gpu Type=mi300x File=/dev/dri/renderD[128-135]",  # no NodeName: every node
        "NodeName=d[1-2] Name=gpu Type=mi300x File=/dev/dri/renderD[128-135]",
        "NodeName=ALL Name=gpu File=/dev/dri/renderD128",
        "nodename=x,d[0-3] name=gpu File=/dev/dri/renderD128",
        "AutoDetect=rsmi",
        "NodeName=d1 AutoDetect=nvml",
        'NodeName="d1" Name=gpu File=/dev/dri/renderD128',  # quoted: Slurm reads d1
        "NodeName = d[1-4] Name=gpu File=/dev/dri/renderD128",  # spaces around =
        "Name = gpu File=/dev/dri/renderD128",
        "AutoDetect = nvml",
        'NodeName=d1 Name="gpu" File=/dev/dri/renderD128',
        "NodeName=d1 Name=gpu File+=/dev/dri/renderD128",  # an operator
        "Include /etc/slurm/gres.d/*.conf",
        "include gres-extra.conf",
    ],
)
def test_a_line_that_could_also_give_the_node_gpus_is_refused_before_the_delete(tmp_path, line):
    (tmp_path / "gres.conf").write_text(f"{line}\n")
    cluster = Cluster(idle())

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster)

    assert exitcode.CONFIG == caught.value.status
    assert line[:40] in str(caught.value)
    assert [argv[1] for argv in cluster.ran] == ["--json"]
    assert (tmp_path / "gres.conf").read_text() == f"{line}\n"
    assert not (tmp_path / "slurmd.env").exists()


def test_the_nodes_own_lines_are_found_in_any_key_order_and_case_and_crlf_bytes_kept():
    current = b"AutoDetect=off\r\nname=gpu nodename=d1 File=/dev/dri/renderD128\r\nNodeName=d2 Name=gpu \xff\r\n"
    text = current.decode("utf-8", "surrogateescape")

    merged = merged_gres_conf(text, "d1", NEW).encode("utf-8", "surrogateescape")

    assert merged == b"AutoDetect=off\r\n" + NEW.strip().encode() + b"\r\nNodeName=d2 Name=gpu \xff\r\n"


@given(st.sampled_from(["d", "gpu-", "n0"]), st.integers(0, 300), st.integers(0, 300), st.integers(0, 300))
def test_hostlist_membership_agrees_with_the_expanded_range(prefix, low, span, number):
    high = low + span
    assert in_hostlist(f"{prefix}{number}", f"x1,{prefix}[{low}-{high}]") == (low <= number <= high)


def test_a_fifo_or_symlink_gres_conf_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "gres.conf")
    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, Cluster(idle()))
    assert exitcode.CONFIG == caught.value.status
    (tmp_path / "gres.conf").unlink()
    (tmp_path / "real").write_text("")
    (tmp_path / "gres.conf").symlink_to(tmp_path / "real")
    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, Cluster(idle()))
    assert exitcode.CONFIG == caught.value.status


@pytest.mark.parametrize("argv", [["--timeout", "soon"], ["--env-name", "A B;rm"], ["--no-such"]])
def test_a_bad_command_line_is_64(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert exitcode.USAGE == caught.value.code


def test_a_concurrent_run_is_75(tmp_path, monkeypatch, capsys):
    import fcntl
    import os

    monkeypatch.setenv("SPURINV_NODE", "d1")
    monkeypatch.setenv("SPURINV_GRES", "gpu:mi300x:64")
    lock = os.open(tmp_path / "slurmd.env.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        status = main(["--env-file", str(tmp_path / "slurmd.env"), "--restart", "true", "--scontrol", "false"])
    finally:
        os.close(lock)
    assert exitcode.TEMPFAIL == status
    assert "lock" in capsys.readouterr().err


FLAKY = r"""
import json, os, sys, time
state, calls = os.environ["FAKE_SLURM_STATE"], os.environ["FAKE_SLURM_STATE"] + ".calls"
count = int(open(calls).read()) + 1 if os.path.exists(calls) else 1
open(calls, "w").write(str(count))
node = json.load(open(state))
if count == 1:  # deleted, then the restart fails: the node stays unknown
    node["absent_until"] = time.time() + 3600
    json.dump(node, open(state, "w"))
    sys.exit(69)
node.update(gres=os.environ["SPURINV_GRES"], absent_until=0)  # the restart works now
json.dump(node, open(state, "w"))
"""


def test_our_own_register_that_left_the_node_unknown_is_run_again_not_68_forever(cli, built, tmp_path, monkeypatch):
    slurm = Slurm(tmp_path)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(slurm.path))
    command = tmp_path / "register"
    command.write_text(f"#!{sys.executable} -S\n{FLAKY}")
    command.chmod(0o755)
    slurm.config.write_text(slurm.config.read_text().replace('transport = "scontrol"\n',
                            f'transport = "scontrol"\nregister_command = ["{command}"]\nregister_wait = 1\n'))  # fmt: skip
    run = lambda root, *more: cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config,  # noqa: E731
                                  "--json", *more)  # fmt: skip
    for _ in range(2):
        assert run(built("mi300x-spx")).code == 0
    run(built("mi300x-cpx"))
    failed = run(built("mi300x-cpx"))
    assert exitcode.NOHOST == failed.code, failed.out  # the command failed and the node is gone

    done = run(built("mi300x-cpx"), "--ignore-backoff")

    assert done.code == 0, done.out
    assert "register" in [step["action"] for step in done.json()["steps"]]
    assert slurm.node["gres"] == "gpu:mi300x:64"


def test_a_listed_gres_with_a_socket_suffix_is_already_registered(tmp_path):
    cluster = Cluster(idle())
    register(options(tmp_path), ENV, cluster)
    cluster.node["gres"] = "gpu:mi300x:64(S:0-1)"  # how Slurm lists it with Cores= in gres.conf
    cluster.ran.clear()

    said = register(options(tmp_path), ENV, cluster)

    assert "nothing to do" in said
    assert [argv for argv in cluster.ran if "delete" in argv] == []


names = st.sampled_from(["NodeName=d1", "nodename=d1", "NODENAME=d[0-3]", "NodeName=d2", "NodeName=x[1-9]", "NodeName=ALL", ""])
gres_names = st.sampled_from(["Name=gpu", "name=gpu", "Name=nic", "AutoDetect=off", "AutoDetect=nvml"])
ends = st.sampled_from(["\n", "\r\n"])


@given(st.lists(st.tuples(names, gres_names, st.booleans(), ends), max_size=8))
def test_after_a_merge_only_our_lines_can_give_the_node_gpus_else_78(rows):
    """Slurm reads keys in any case and order: whatever the lines, the merge either refuses (78)
    or leaves no line but ours that gives d1 GPUs, and every other line byte for byte."""
    current = "".join(f"{a} {b} File=/dev/x{i}{end}" if flip else f"{b} {a} File=/dev/x{i}{end}"
                      for i, (a, b, flip, end) in enumerate(rows))  # fmt: skip
    status = None
    try:
        merged = merged_gres_conf(current, "d1", NEW)
    except Failed as failed:
        status, merged = failed.status, ""
    if status is not None:
        assert exitcode.CONFIG == status
        return
    theirs = [line for line in merged.splitlines(keepends=True) if line.rstrip("\r\n") != NEW.strip()]
    for line in theirs:
        fields = slurmdynamic.gres_conf_fields(line)
        names_d1 = "nodename" not in fields or in_hostlist("d1", fields["nodename"])
        assert not (names_d1 and fields.get("name", "").lower() == "gpu")
        assert line in current.splitlines(keepends=True)


def test_a_message_in_an_ascii_locale_is_no_traceback():
    import io

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")

    slurmdynamic._say("node d1: reason 'spurinv: [ab12cd34] 8→64 …' \udcff", stream)

    assert raw.getvalue().startswith(b"node d1: reason 'spurinv: [ab12cd34] 8\\u2192")


SLOW = r"""
import json, os, time
state = os.environ["FAKE_SLURM_STATE"]
open(state + ".calls", "a").write("x")
node = json.load(open(state)); node["gres"] = os.environ["SPURINV_GRES"]; json.dump(node, open(state, "w"))
time.sleep(30)  # registered, but the answer never comes: killed at register_timeout
"""


def test_an_unanswered_register_the_controller_took_is_recorded_not_run_again(cli, built, tmp_path, monkeypatch):
    slurm = Slurm(tmp_path)
    monkeypatch.setenv("FAKE_SLURM_STATE", str(slurm.path))
    command = tmp_path / "register"
    command.write_text(f"#!{sys.executable} -S\n{SLOW}")
    command.chmod(0o755)
    slurm.config.write_text(slurm.config.read_text().replace('transport = "scontrol"\n',
                            f'transport = "scontrol"\nregister_command = ["{command}"]\nregister_timeout = 1\n'))  # fmt: skip
    run = lambda root, *more: cli("refresh", "--root", root, "--state", slurm.state, "--config", slurm.config,  # noqa: E731
                                  "--json", *more)  # fmt: skip
    for _ in range(2):
        assert run(built("mi300x-spx")).code == 0
    run(built("mi300x-cpx"))
    assert run(built("mi300x-cpx")).code != 0  # killed: no answer

    done = run(built("mi300x-cpx"), "--ignore-backoff")

    assert done.code == 0, done.out
    assert "register" not in [step["action"] for step in done.json()["steps"]]
    assert Path(f"{slurm.path}.calls").read_text() == "x"  # run once


class RefusedRestore(Cluster):
    """The node comes back with the new GRES, but the controller refuses the update of extra."""

    def __call__(self, argv, timeout):
        if argv[1:2] == ["update"]:
            self.ran.append(list(argv))
            return subprocess.CompletedProcess(argv, 1, "", "Invalid node state specified")
        return super().__call__(argv, timeout)


def test_a_node_back_with_the_new_gres_but_not_its_extra_gets_it_on_the_next_run(tmp_path):
    cluster = RefusedRestore(idle(extra='{"rack": "r2"}', comment="bought 2025"))
    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster, sleep=lambda _: None)
    assert exitcode.UNAVAILABLE == caught.value.status
    assert cluster.node["gres"] == "gpu:mi300x:64"
    assert cluster.node["extra"] == ""
    saved = tmp_path / "slurmd.env.saved"
    assert saved.exists()

    again = Cluster(cluster.node)  # the same node, the update works now; files already written
    said = register(options(tmp_path), ENV, again, sleep=lambda _: None)

    assert again.node["extra"] == '{"rack": "r2"}'
    assert again.node["comment"] == "bought 2025"
    assert not saved.exists()
    assert [argv for argv in again.ran if argv[1:2] == ["delete"] or argv[0].endswith("restart-slurmd")] == []
    assert "restored" in said


def test_a_saved_file_is_restored_first_even_when_the_gres_still_differs(tmp_path):
    saved = tmp_path / "slurmd.env.saved"
    saved.write_text(json.dumps({"node": "d1", "Extra": '{"rack": "r2"}'}))
    cluster = Cluster(idle(extra=""))  # came back with the old GRES, extra empty

    register(options(tmp_path), ENV, cluster, sleep=lambda _: None)

    updates = [argv for argv in cluster.ran if argv[1:2] == ["update"]]
    assert updates[0] == ["scontrol", "update", "nodename=d1", 'Extra={"rack": "r2"}']
    assert cluster.ran.index(updates[0]) < next(i for i, a in enumerate(cluster.ran) if a[1:2] == ["delete"])
    assert cluster.node["extra"] == '{"rack": "r2"}'  # and carried over the second delete
    assert not saved.exists()


def test_a_stale_saved_file_never_overwrites_a_newer_extra(tmp_path):
    saved = tmp_path / "slurmd.env.saved"
    saved.write_text(json.dumps({"node": "d1", "Extra": "old"}))
    cluster = Cluster(idle(extra="newer", gres="gpu:mi300x:64"))

    with pytest.raises(Failed) as caught:
        register(options(tmp_path), ENV, cluster, sleep=lambda _: None)

    assert exitcode.CONFIG == caught.value.status
    assert "'newer'" in str(caught.value)
    assert "'old'" in str(caught.value)
    assert [argv for argv in cluster.ran if argv[1:2] in (["update"], ["delete"])] == []
    assert cluster.node["extra"] == "newer"
    assert saved.exists()


@given(st.text(max_size=8), st.text(max_size=8))
def test_restore_plan_writes_only_into_an_empty_field(now, kept):
    if now and now != kept:
        with pytest.raises(Failed) as caught:
            restore_plan("d1", {"Extra": kept}, {"extra": now}, None)
        assert caught.value.status == exitcode.CONFIG
    else:
        assert restore_plan("d1", {"Extra": kept}, {"extra": now}, None) == ([("Extra", kept)] if kept and not now else [])


@given(st.sampled_from(["NodeName", "nodename", "Name", "AUTODETECT"]), st.from_regex(r"[a-z0-9\[\]\-,]{1,8}", fullmatch=True),
       st.sampled_from(["", " ", "\t "]), st.sampled_from(["", " "]), st.booleans(),
       st.sampled_from(["", "+", "-"]))  # fmt: skip
def test_a_pair_is_read_as_slurm_reads_it_and_only_the_bare_form_is_plain(key, value, before, after, quoted, operator):
    written = f'"{value}"' if quoted else value
    fields, plain = slurmdynamic.gres_conf_pairs(f"  {key}{before}{operator}={after}{written} File=/dev/x # c") or ({}, None)
    assert fields[key.lower()] == value
    assert fields["file"] == "/dev/x"
    assert plain == (not before and not after and not quoted and not operator)


@pytest.mark.parametrize(
    ("node", "hostlist"),
    [
        ("d\u00b2", "d[1-4]"),
        ("d\u0663", "d[1-4]"),
        ("d2", "d[\u00b2-4]"),
        ("d2", "d[1-\u00b2]"),
        ("d" + "9" * 5000, "d[1-4]"),
        ("d2", "d[1-" + "9" * 5000 + "]"),
    ],
)
def test_a_hostlist_range_or_name_no_int_can_read_matches_nothing(node, hostlist):
    """ "²".isdigit() is True but int("²") raises, and so does int() of 4,301 digits: such a
    range or number matches nothing instead of ending the run."""
    assert in_hostlist(node, hostlist) is False
    assert in_hostlist("d3", "d[1-4]") is True
