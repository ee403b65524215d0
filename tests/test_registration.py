"""The command runner behind ``scontrol`` and ``controller.register_command``, and how a command's
argv and output are shown without credentials (issue #14: bounded output, blanked secrets)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from spurinv import registration
from spurinv.config import ControllerSection
from spurinv.errors import ConfigError, ControllerError
from spurinv.log import Log
from spurinv.registration import Registrar
from spurinv.scontrol import Scontrol
from spurinv.secret import BLANK, blank, blank_argv

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


def test_only_the_tail_of_a_long_output_is_kept_and_it_says_so():
    script = "head -c 3000000 /dev/zero | tr '\\0' x; printf END; printf ERR >&2"

    outcome = registration.run(["/bin/sh", "-c", script], ENV, 30, limit=4096)

    assert outcome.truncated
    assert len(outcome.stdout) == 4096
    assert outcome.stdout.endswith("xEND")
    assert outcome.stderr == "ERR"
    assert outcome.status == 0


def test_an_output_under_the_limit_is_kept_whole():
    outcome = registration.run(["/bin/sh", "-c", "printf 'a\\nb'; exit 4"], ENV, 30, limit=4096)

    assert (outcome.stdout, outcome.truncated, outcome.status) == ("a\nb", False, 4)


def test_a_command_that_prints_without_end_is_stopped_at_the_limit_when_asked():
    """``stop_over`` (scontrol: an answer over the limit is unusable): killed there, not at the timeout."""
    outcome = registration.run(["/usr/bin/yes"], ENV, 60, limit=1 << 20, stop_over=True)

    assert outcome.truncated
    assert outcome.status == -9  # killed by us, long before the 60 s timeout


def test_memory_stays_bounded_while_a_command_prints_half_a_gigabyte():
    """Output is read as it comes (the old ``communicate`` held all of it: 3 GiB for 1.5 GB)."""
    # VmHWM is this process image's own peak; ru_maxrss also counts the forking parent's (a large
    # pytest process in CI read as 284 MiB)
    probe = (
        "import os, re\n"
        "from spurinv import registration\n"
        "out = registration.run(['/bin/sh', '-c', 'head -c 500000000 /dev/zero'], dict(os.environ), 120)\n"
        "status = open('/proc/self/status').read()\n"
        "print(out.truncated, re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    truncated, peak_kib = done.stdout.split()

    assert truncated == "True"
    assert int(peak_kib) < 200 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"


def test_a_command_that_closes_its_output_but_keeps_running_is_killed_at_the_timeout():
    with pytest.raises(subprocess.TimeoutExpired):
        registration.run(["/bin/sh", "-c", "exec >&- 2>&-; sleep 30"], ENV, 0.5)


def test_waiting_for_a_command_that_closed_its_output_costs_no_cpu():
    """A closed pipe stays readable (end of file): it must leave the wait, or every later look
    returns at once and the runner spins until the command ends (issue #26, seed 4141: the
    ``unregister`` at end of file removed was caught only by the time limit). The command runs
    2 s; the wait takes a few milliseconds of CPU, a spin would take most of the 2 s."""
    started = time.thread_time()

    outcome = registration.run(["/bin/sh", "-c", "echo done; exec >&- 2>&-; sleep 2"], ENV, 20)

    assert (outcome.status, outcome.stdout) == (0, "done\n")
    assert time.thread_time() - started < 0.3


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{"token": "abc123def", "ok": 1}', "abc123def"),
        ("{'password': 'hunter2x'}", "hunter2x"),
        ("login pass hunter2x done", "hunter2x"),
        ("password hunter2x", "hunter2x"),
        ("MYSQL_PWD=hunter2x", "hunter2x"),
        ("api_key: k3yk3yk3y", "k3yk3yk3y"),
        ("fetching https://admin:hunter2x@ctl.example/reload", "hunter2x"),
        ("Authorization: Bearer s3cr3tvalue", "s3cr3tvalue"),
        ("X-SLURM-USER-TOKEN: s3cr3tvalue", "s3cr3tvalue"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyb290In0.c2lnbmF0dXJl", "eyJzdWIiOiJyb290In0"),
        # the shapes an attack round found unblanked
        ("+ /bin/true --token TRACESECRET1 --pass TRACESECRET2", "TRACESECRET"),
        ("Authorization: Token tok3nvalue", "tok3nvalue"),
        ('Authorization: Digest username="u", response="d1g3stvalue"', "d1g3stvalue"),
        ("Set-Cookie: session=c00kievalue; Path=/", "c00kievalue"),
        ("DB_PASS=hunter2x GITHUB_PAT=ghp_value1 PRIVATE_KEY=k3yk3yk3y", "hunter2x"),
        ("DB_PASS=hunter2x GITHUB_PAT=ghp_value1 PRIVATE_KEY=k3yk3yk3y", "ghp_value1"),
        ("SLURM_JWT=notajwtvalue", "notajwtvalue"),
        ("https://host/obj?sig=s1gnature1&x=1", "s1gnature1"),
        ("https://u:p@ssw0rd@host/x", "ssw0rd"),
        ("postgres://u:pa/ssw0rd@db/x", "ssw0rd"),
        ("--password hunter2x", "hunter2x"),
        ("TOKEN t0k3nvalue", "t0k3nvalue"),
        ("the token is t0k3nvalue", "t0k3nvalue"),
        ("api key: k3yk3yk3y", "k3yk3yk3y"),
        ("client_secret s3cr3tvalue", "s3cr3tvalue"),
        ("<password>hunter2x</password>", "hunter2x"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA"),
    ],
)
def test_credentials_in_a_commands_output_are_blanked(text, secret):
    shown = blank(text)

    assert secret not in shown
    assert BLANK in shown


def test_ordinary_output_is_left_alone():
    for text in (
        "Restarted spurd.service; node n1 registered 64 GPUs in 2.1 s",
        "slurm_reconfigure: Success; gres.conf updated for n1 (gpu:mi300x:64)",
        "bypass=1 passed=3 signal=15 monkey business",
    ):
        assert blank(text) == text


@pytest.mark.parametrize(
    ("argv", "secret"),
    [
        (["/usr/local/bin/rereg", "--token", "abc123def"], "abc123def"),
        (["/usr/local/bin/rereg", "--password=hunter2x"], "hunter2x"),
        (["curl", "-H", "Authorization: Bearer s3cr3tvalue", "https://ctl/reload"], "s3cr3tvalue"),
        (["curl", "https://admin:hunter2x@ctl/reload"], "hunter2x"),
        (["env", "API_KEY=k3yk3yk3y", "rereg"], "k3yk3yk3y"),
        (["rereg", "--token", "-Xtok3nvalue"], "-Xtok3nvalue"),  # base64url may start with '-'
        (["rereg", "--pass=hunter2x"], "hunter2x"),
        (["rereg", "--auth", "hunter2x"], "hunter2x"),
        (["rereg", "--key", "k3yk3yk3y"], "k3yk3yk3y"),
        (["sshpass", "-p", "hunter2x", "ssh", "ctl"], "hunter2x"),
        (["curl", "-u", "admin:hunter2x", "https://ctl/reload"], "hunter2x"),
    ],
)
def test_credentials_in_a_commands_argv_are_blanked(argv, secret):
    shown = blank_argv(argv)

    assert secret not in " ".join(shown)
    assert shown[0] == argv[0]
    assert len(shown) == len(argv)


def test_an_argv_without_credentials_is_shown_as_is():
    argv = ["systemctl", "restart", "spurd", "--no-block"]

    assert blank_argv(argv) == argv


_VALUE = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%^*_+.~", min_size=6, max_size=40)
_TEMPLATES = (
    "token={}",
    "TOKEN = {}",
    '{{"token": "{}"}}',
    "password: {}",
    "db_password='{}'",
    "pass {}",
    "Bearer {}",
    "https://root:{}@host/x",
)


@given(value=_VALUE, template=st.sampled_from(_TEMPLATES), before=st.sampled_from(["", "ok ", "error: ", "{"]))
def test_a_keyed_credential_never_survives_blanking(value, template, before):
    assume(value not in before + template)
    text = before + template.format(value)

    assert value not in blank(text)


def test_config_show_blanks_credentials_in_register_command(cli, env, tmp_path):
    config = tmp_path / "spurinv.toml"
    config.write_text('[controller]\ntransport = "scontrol"\nregister_command = ["/bin/true", "--token", "abc123def"]\n')

    shown = cli("config", "show", "--config", config)
    as_json = cli("config", "show", "--config", config, "--json")

    assert 0 == shown.code, shown.err
    assert "abc123def" not in shown.out + as_json.out
    assert json.loads(as_json.out)["values"]["controller.register_command"] == ["/bin/true", "--token", BLANK]


def test_a_daemon_the_command_leaves_holding_its_output_neither_fails_it_nor_dies(tmp_path):
    """`spurd &` in a site script: the command exits 0 at once; the daemon keeps the pipes. The
    outcome is the command's own, shortly after it exits, and the daemon is left running."""
    pid_file = tmp_path / "daemon.pid"
    script = f"setsid sleep 30 & echo $! > {pid_file}; echo started; exit 0"
    try:
        outcome = registration.run(["/bin/sh", "-c", script], ENV, 20)

        assert (outcome.status, outcome.stdout.strip()) == (0, "started")
        # alive, not a zombie: a runner that waited for the pipes to close returns only once the
        # daemon has ended, and a dead daemon may stay in /proc as a zombie nothing reaps
        assert _alive(int(pid_file.read_text()))
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the daemon we started, by PID


def test_a_command_dies_with_a_spurinv_that_is_killed_outright(tmp_path):
    """SIGKILL (OOM, cron's kill) leaves no register command running to overlap the next run's."""
    pid_file = tmp_path / "child.pid"
    probe = (
        "import os, sys\n"
        "from spurinv import registration\n"
        f"registration.run(['/bin/sh', '-c', 'echo $$ > {pid_file}; exec sleep 30'], dict(os.environ), 60)\n"
    )
    with subprocess.Popen([sys.executable, "-c", probe]) as parent:
        try:
            deadline = time.monotonic() + 30
            while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.05)
            child = int(pid_file.read_text())
            parent.kill()
        finally:
            parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status


def test_the_output_of_a_command_killed_at_its_timeout_is_kept_for_the_log():
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        registration.run(["/bin/sh", "-c", "echo restarting spurd; sleep 30"], ENV, 0.5)

    assert b"restarting spurd" in caught.value.output


# --- issue #26: the read-back after the command, and the command's path -------------------------

IDLE_N1 = Path(__file__).resolve().parent / "fixtures/slurm/responses/24.11/v0.0.42/node-n1-idle.json"


class Clock:
    """A monotonic clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def planned_scontrol(tmp: Path, plan: list[str]) -> tuple[Scontrol, Path]:
    """A Slurm scontrol stand-in whose n-th ``show node`` answers ``plan[n]``: a GRES count
    (``"8"``: the captured idle n1 with that many GPUs), or ``"down"`` (slurmctld unreachable).
    Past the plan it says the node is unknown, so a loop that never ends fails instead of hanging."""
    document = json.loads(IDLE_N1.read_text())
    for count in {p for p in plan if p.isdigit()}:
        document["nodes"][0].update(gres=f"gpu:mi300x:{count}", gres_used="gpu:mi300x:0(IDX:N/A)")
        (tmp / f"show-{count}.json").write_text(json.dumps(document))
    (tmp / "plan").write_text("\n".join(plan) + "\n")
    calls = tmp / "calls"
    script = tmp / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "slurm 24.11.5"; exit 0; fi\n'
        f"echo x >> {calls}\n"
        f'step=$(sed -n "$(wc -l < {calls})p" {tmp / "plan"})\n'
        'case "$step" in\n'
        "  '') echo 'slurm_load_node error: Invalid node name specified' >&2; exit 1 ;;\n"
        "  down) echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1 ;;\n"
        f'  *) cat "{tmp}/show-$step.json" ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return Scontrol(ControllerSection(transport="scontrol", scontrol=str(script)), "n1", ENV), calls


def registrar(wait: float, clock: Clock) -> Registrar:
    return Registrar(("/bin/true",), 5, wait, ENV, Log({}, stream=io.StringIO()), sleep=clock.sleep, monotonic=clock.monotonic)


def test_the_read_back_waits_longer_between_looks_and_stops_at_register_wait(tmp_path):
    """Polling a controller that does not list the GPUs yet: 0.25 s, then doubling (capped at
    5 s), never past ``register_wait``; then a refusal that says what the controller lists."""
    client, calls = planned_scontrol(tmp_path, ["8"] * 8)
    clock = Clock()

    result = registrar(3.0, clock).register(client, {"mi300x": 64})

    assert clock.sleeps == [0.25, 0.5, 1.0, 1.25]
    assert len(calls.read_text().splitlines()) == 1 + 5  # the idle check, then five looks
    assert not result.applied
    assert result.error == "after register_command the controller still lists 'gpu:mi300x:8', not gpu:mi300x:64, after 3.0 s"


def test_the_pause_between_looks_is_capped_at_five_seconds(tmp_path):
    client, _ = planned_scontrol(tmp_path, ["8"] * 12)
    clock = Clock()

    registrar(20.0, clock).register(client, {"mi300x": 64})

    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 2.25]


def test_a_controller_briefly_unreachable_during_the_read_back_is_not_yet(tmp_path):
    """slurmctld re-execs on ``scontrol reconfigure``: an unreachable look is retried, and the GPUs
    listed afterwards make the registration applied."""
    client, _ = planned_scontrol(tmp_path, ["8", "down", "down", "64"])
    clock = Clock()

    result = registrar(10.0, clock).register(client, {"mi300x": 64})

    assert result.applied, result.error
    assert result.view.gres == "gpu:mi300x:64"
    assert clock.sleeps == [0.25, 0.5]


def test_a_controller_still_unreachable_at_the_end_of_the_read_back_is_that_error(tmp_path):
    client, _ = planned_scontrol(tmp_path, ["8", *["down"] * 6])

    with pytest.raises(ControllerError) as caught:
        registrar(1.0, Clock()).register(client, {"mi300x": 64})

    assert caught.value.kind == "unreachable"


def test_a_command_path_that_is_not_a_regular_file_is_a_config_error_saying_so(tmp_path):
    """A directory is "executable" to ``access(X_OK)``: only the regular-file check names the problem."""
    for program in (tmp_path, tmp_path / "missing"):
        with pytest.raises(ConfigError) as caught:
            registration.resolve(str(program), ENV, "controller.register_command")
        assert str(caught.value) == f"controller.register_command: {program} does not exist or is not a regular file"


def test_a_bare_command_name_is_the_first_executable_file_of_that_name_on_path(tmp_path, monkeypatch):
    """As the shell looks it up, minus the current directory: a relative ``$PATH`` entry, a
    directory or a file without the execute bit of that name are passed over (issue #26, seed 4141)."""
    monkeypatch.chdir(tmp_path)
    for directory, mode in (("relative", 0o755), ("plain", 0o644), ("found", 0o755), ("later", 0o755)):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "tool").write_text("#!/bin/sh\n")
        (tmp_path / directory / "tool").chmod(mode)
    (tmp_path / "dir" / "tool").mkdir(parents=True)
    path = ":".join(["relative", *(str(tmp_path / name) for name in ("plain", "dir", "found", "later"))])

    assert registration.resolve("tool", {"PATH": path}, "controller.scontrol") == str(tmp_path / "found" / "tool")
    with pytest.raises(ConfigError) as caught:
        registration.resolve("tool", {"PATH": "relative"}, "controller.scontrol")
    assert str(caught.value) == "controller.scontrol: 'tool' is not on PATH"


def test_a_commands_output_is_kept_up_to_sixty_four_kibibytes_by_default():
    """``MAX_OUTPUT`` pinned with a literal: the register command's tail that the log and the
    refusal quote (issue #26: only explicit limits were tested)."""
    limit = 64 * 1024

    whole = registration.run(["/bin/sh", "-c", f"head -c {limit} /dev/zero | tr '\\0' x"], ENV, 30)
    over = registration.run(["/bin/sh", "-c", f"head -c {limit + 1} /dev/zero | tr '\\0' x"], ENV, 30)

    assert (len(whole.stdout), whole.truncated) == (limit, False)
    assert (len(over.stdout), over.truncated) == (limit, True)


def test_a_command_that_ends_inside_its_last_second_is_not_killed():
    """The timeout is the timeout: a command that ends 0.8 s before it is not cut off a second early."""
    outcome = registration.run(["/bin/sh", "-c", "sleep 2.2; echo done"], ENV, 3)

    assert (outcome.status, outcome.stdout) == (0, "done\n")


@given(st.sampled_from(["SLURM", "AWS", "MY", ""]),
       st.sampled_from(["JWT", "TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIALS"]),
       st.sampled_from(["", "_DIRECTORY", "_FILE", "_ACCESS_KEY"]))  # fmt: skip
def test_a_credential_in_the_environment_never_reaches_the_register_command(prefix, word, suffix):
    from spurinv.registration import Details, command_environment

    name = f"{prefix}_{word}{suffix}".lstrip("_")
    environ = {name: "hunter2", "PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf", "LANG": "C.UTF-8"}

    passed = command_environment(environ, Details(node="n1"), "gpu:8", "f", "/tmp/i.json")

    assert name not in passed
    assert {"PATH", "SLURM_CONF", "LANG"} <= set(passed)


@given(st.sampled_from(["", "MY_", "db", "Ldap_"]),
       st.sampled_from(["PASS", "pwd", "Token", "SECRET", "AUTH", "BINDPW", "KEY", "BEARER", "PASSPHRASE"]),
       st.sampled_from(["", "WORD", "_FILE", "1", "42"]))  # fmt: skip
def test_a_credential_part_anywhere_in_a_name_is_a_secret(prefix, part, suffix):
    from spurinv.registration import secret_name

    assume(f"{prefix}{part}{suffix}".upper() not in ("PWD", "OLDPWD"))
    assert secret_name(f"{prefix}{part}{suffix}")


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "PATH", "HOME", "LANG", "SLURM_CONF", "TMPDIR", "USER"])
def test_the_working_directories_and_plain_variables_are_no_secret(name):
    from spurinv.registration import secret_name

    assert not secret_name(name)


@given(st.sampled_from(["https", "http", "ldaps", "git+ssh"]),
       st.from_regex(r"[A-Za-z0-9._~%!$&'()*+,;=:-]{1,12}", fullmatch=True),
       st.from_regex(r"[a-z0-9.-]{1,10}", fullmatch=True))  # fmt: skip
def test_a_urls_userinfo_never_reaches_the_register_command(scheme, userinfo, host):
    from spurinv.registration import Details, command_environment

    environ = {"HTTPS_PROXY": f"{scheme}://{userinfo}@{host}:3128/x", "PATH": "/usr/bin"}

    passed = command_environment(environ, Details(node="n1"), "gpu:8", "f", "/tmp/i.json")

    assert passed["HTTPS_PROXY"] == f"{scheme}://***@{host}:3128/x"
    assert passed["PATH"] == "/usr/bin"


def test_a_command_that_failed_after_the_gpus_were_listed_is_applied_with_a_warning(tmp_path):
    """The GPUs are there, but the command exited non-zero (spurinv-slurm-dynamic could not put
    the node's extra back): applied, and the report says to run it again."""
    client, _ = planned_scontrol(tmp_path, ["64", "64"])
    clock = Clock()
    failing = Registrar(("/bin/false",), 5, 1.0, ENV, Log({}, stream=io.StringIO()), sleep=clock.sleep,
                        monotonic=clock.monotonic)  # fmt: skip

    result = failing.register(client, {"mi300x": 64})

    assert result.applied
    assert result.warning is not None
    assert "exited 1" in result.warning
