"""``controller.register_command``: how a command's argv and output are shown without credentials
(blanked secrets), its environment and the read-back after it (the runner itself:
tests/test_process.py)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from spurinv.config.settings import ControllerSection
from spurinv.controller.registration import Registrar, inventory_file
from spurinv.controller.scontrol import Scontrol
from spurinv.errors import ConfigError, ControllerError
from spurinv.log import Log
from spurinv.secret import BLANK, blank, blank_argv

ENV = {"PATH": os.environ.get("PATH", os.defpath)}


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
        # credential shapes that once went through unblanked
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


# --- the read-back after the command, and the command's path -------------------------

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
    (``"8"``: the captured idle n1 with that many GPUs), ``"down"`` (slurmctld unreachable) or
    ``"gone"`` (the node unknown). Past the plan it prints what no Slurm prints, which is no "not
    yet": a loop that looks once too often fails at once instead of hanging."""
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
        "  '') echo 'past the plan'; exit 0 ;;\n"
        "  gone) echo 'slurm_load_node error: Invalid node name specified' >&2; exit 1 ;;\n"
        "  down) echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; exit 1 ;;\n"
        f'  *) cat "{tmp}/show-$step.json" ;;\n'
        "esac\n"
    )
    script.chmod(0o755)
    return Scontrol(ControllerSection(transport="scontrol", scontrol=str(script)), "n1", ENV), calls


def registrar(
    wait: float, clock: Clock, argv: tuple[str, ...] = ("/bin/true",), timeout: float = 5, stream: io.StringIO | None = None
) -> Registrar:
    """A register command on ``clock`` (the read-back's pauses and times), logging to ``stream``."""
    log = Log({}, stream=stream if stream is not None else io.StringIO())
    return Registrar(argv, timeout, wait, ENV, log, sleep=clock.sleep, monotonic=clock.monotonic)


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


@given(st.sampled_from(["SLURM", "AWS", "MY", ""]),
       st.sampled_from(["JWT", "TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIALS"]),
       st.sampled_from(["", "_DIRECTORY", "_FILE", "_ACCESS_KEY"]))  # fmt: skip
def test_a_credential_in_the_environment_never_reaches_the_register_command(prefix, word, suffix):
    from spurinv.controller.registration import Details, command_environment

    name = f"{prefix}_{word}{suffix}".lstrip("_")
    environ = {name: "hunter2", "PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf", "LANG": "C.UTF-8"}

    passed = command_environment(environ, Details(node="n1"), "gpu:8", "f", "/tmp/i.json")

    assert name not in passed
    assert {"PATH", "SLURM_CONF", "LANG"} <= set(passed)


@given(st.sampled_from(["", "MY_", "db", "Ldap_"]),
       st.sampled_from(["PASS", "pwd", "Token", "SECRET", "AUTH", "BINDPW", "KEY", "BEARER", "PASSPHRASE"]),
       st.sampled_from(["", "WORD", "_FILE", "1", "42"]))  # fmt: skip
def test_a_credential_part_anywhere_in_a_name_is_a_secret(prefix, part, suffix):
    from spurinv.controller.registration import secret_name

    assume(f"{prefix}{part}{suffix}".upper() not in ("PWD", "OLDPWD"))
    assert secret_name(f"{prefix}{part}{suffix}")


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "PATH", "HOME", "LANG", "SLURM_CONF", "TMPDIR", "USER"])
def test_the_working_directories_and_plain_variables_are_no_secret(name):
    from spurinv.controller.registration import secret_name

    assert not secret_name(name)


@given(st.sampled_from(["https", "http", "ldaps", "git+ssh"]),
       st.from_regex(r"[A-Za-z0-9._~%!$&'()*+,;=:-]{1,12}", fullmatch=True),
       st.from_regex(r"[a-z0-9.-]{1,10}", fullmatch=True))  # fmt: skip
def test_a_urls_userinfo_never_reaches_the_register_command(scheme, userinfo, host):
    from spurinv.controller.registration import Details, command_environment

    environ = {"HTTPS_PROXY": f"{scheme}://{userinfo}@{host}:3128/x", "PATH": "/usr/bin"}

    passed = command_environment(environ, Details(node="n1"), "gpu:8", "f", "/tmp/i.json")

    assert passed["HTTPS_PROXY"] == f"{scheme}://***@{host}:3128/x"
    assert passed["PATH"] == "/usr/bin"


def test_a_command_that_failed_after_the_gpus_were_listed_is_applied_with_a_warning(tmp_path):
    """The GPUs are there, but the command exited non-zero (spurinv-slurm-dynamic could not put
    the node's extra back): applied, and the report says to run it again."""
    client, _ = planned_scontrol(tmp_path, ["64", "64"])
    clock = Clock()
    failing = registrar(1.0, clock, ("/bin/false",))

    result = failing.register(client, {"mi300x": 64})

    assert result.applied
    assert result.warning is not None
    assert "exited 1" in result.warning


def test_a_register_command_past_its_timeout_is_logged_with_both_its_streams(tmp_path):
    """What the command printed before it was killed is what an operator needs: stdout and
    stderr both, in the error log line."""
    client, _ = planned_scontrol(tmp_path, ["8"])
    stream = io.StringIO()
    clock = Clock()
    slow = registrar(1.0, clock, ("/bin/sh", "-c", "echo out-words; echo err-words >&2; exec sleep 30"), 1, stream)

    with pytest.raises(ControllerError) as caught:
        slow.register(client, {"mi300x": 64})

    assert caught.value.kind == "unreachable"
    # the command line holds both words too: only what follows "its output:" is its output
    logged = stream.getvalue()
    assert logged.endswith("did not finish within 1 s; killed; its output: out-words err-words\n")


class _Looks:
    """A controller whose n-th look answers ``plan[n]``: a view, or an error it raises. A look past
    the plan fails the test: one nobody should take."""

    def __init__(self, *plan: object) -> None:
        self.plan = list(plan)

    def view(self, confirm_busy: bool = False) -> object:
        assert self.plan, "the controller was looked at again after the run's deadline"
        step = self.plan.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


def test_the_runs_deadline_during_the_read_back_ends_it_on_the_last_look(tmp_path):
    """The deadline comes between two looks: the read-back stops there and judges
    by the look it had (not listed yet: a refusal), without looking again."""
    from spurinv.controller.nodeview import parse_node
    from spurinv.errors import DeadlineError

    document = json.loads(IDLE_N1.read_text())
    document["nodes"][0].update(gres="gpu:mi300x:8", gres_used="gpu:mi300x:0(IDX:N/A)")
    client = _Looks(parse_node(document, "n1"), DeadlineError("controller.run_deadline (60 s) reached"))
    clock = Clock()

    result = registrar(10.0, clock).read_back(client, {"mi300x": 64}, "EXEC /bin/true")  # type: ignore[arg-type]

    assert client.plan == []
    assert clock.sleeps == [0.25]
    assert not result.applied
    assert result.error == "after register_command the controller still lists 'gpu:mi300x:8', not gpu:mi300x:64, after 10.0 s"


def test_the_runs_deadline_at_the_first_look_of_the_read_back_is_the_deadlines_error(tmp_path):
    """No look at all before the deadline: nothing to judge by, so the run stops there (75, state
    saved), never a refusal and never a crash."""
    from spurinv.errors import DeadlineError

    client = _Looks(DeadlineError("controller.run_deadline (60 s) reached"))

    with pytest.raises(DeadlineError) as caught:
        registrar(10.0, Clock()).read_back(client, {"mi300x": 64}, "EXEC /bin/true")  # type: ignore[arg-type]

    assert str(caught.value) == "controller.run_deadline reached before the controller could be read back; state saved"
    assert client.plan == []


@pytest.mark.parametrize(("argv", "status"), [(("/bin/true",), 0), (("/bin/false",), 1)])
def test_the_register_commands_request_line_carries_its_exit_status(tmp_path, argv, status):
    """What the report lists for the command (``EXEC … → 0``) is its exit status, read after it ran."""
    client, _ = planned_scontrol(tmp_path, ["64", "64"])
    clock = Clock()
    command = registrar(1.0, clock, argv)

    command.register(client, {"mi300x": 64})

    executed = [request for request in client.sent if request.path == argv[0]]  # not scontrol's own
    assert [(request.method, request.status) for request in executed] == [("EXEC", status)]
    assert executed[0].line().endswith(f" → {status}")


def test_a_register_commands_output_is_logged_by_its_last_400_characters(tmp_path):
    """The end of what the command printed is what explains it: 400 characters of it, no more."""
    client, _ = planned_scontrol(tmp_path, ["64", "64"])
    stream = io.StringIO()
    clock = Clock()
    words = "a" + "b" * 400
    talking = registrar(1.0, clock, ("/bin/sh", "-c", f"echo {words}"), stream=stream)

    talking.register(client, {"mi300x": 64})

    finished = [line for line in stream.getvalue().splitlines() if "finished in" in line]
    assert len(finished) == 1
    assert finished[0].endswith(": " + "b" * 400)


@pytest.mark.parametrize("kind", ["auth", "protocol", "refused"])
def test_a_read_back_answered_by_an_error_that_is_not_a_not_yet_ends_at_once(kind):
    """Only an unreachable controller or a node it does not list yet is "not yet": any other
    error is raised at the look that met it, without a pause or another look."""
    client = _Looks(ControllerError(kind, "what the controller said"))
    clock = Clock()

    with pytest.raises(ControllerError) as caught:
        registrar(10.0, clock).read_back(client, {"mi300x": 64}, "EXEC /bin/true")  # type: ignore[arg-type]

    assert (caught.value.kind, clock.sleeps, client.plan) == (kind, [], [])


def test_the_inventory_file_is_one_private_json_line_removed_afterwards():
    """What ``SPURINV_INVENTORY`` names: mode 0600, the document on one line with sorted keys and
    a final newline (a shell's ``read`` returns 1 on a line without one), gone after the run."""
    with inventory_file({"b": 1, "a": ["x"]}) as path:
        text = Path(path).read_text(encoding="utf-8")
        mode = os.stat(path).st_mode & 0o777
    assert text == '{"a": ["x"], "b": 1}\n'
    assert mode == 0o600
    assert not os.path.exists(path)


def test_a_node_briefly_unknown_during_the_read_back_is_not_yet(tmp_path):
    """A dynamic node is absent between its ``scontrol delete`` and the restarted slurmd's
    registration: one look that finds no such node is retried like an unreachable one."""
    client, _ = planned_scontrol(tmp_path, ["8", "gone", "64"])
    clock = Clock()

    result = registrar(10.0, clock).register(client, {"mi300x": 64})

    assert result.applied, result.error
    assert clock.sleeps == [0.25]


def test_a_read_back_of_one_second_looks_three_times(tmp_path):
    """``register_wait = 1``: looks at 0, 0.25 and 0.75 s, a last one at 1 s, then the refusal."""
    client, calls = planned_scontrol(tmp_path, ["8"] * 5)
    clock = Clock()

    result = registrar(1.0, clock).register(client, {"mi300x": 64})

    assert clock.sleeps == [0.25, 0.5, 0.25]
    assert len(calls.read_text().splitlines()) == 1 + 4
    assert result.error == "after register_command the controller still lists 'gpu:mi300x:8', not gpu:mi300x:64, after 1.0 s"


def test_a_register_command_that_fails_is_logged_with_its_status_time_and_output(tmp_path):
    """A non-zero exit: the error log line names the command, its status, how long it ran and
    what it printed; the refusal quotes the status and the output."""
    client, _ = planned_scontrol(tmp_path, ["8", "8"])
    stream = io.StringIO()
    clock = Clock()
    failing = registrar(1.0, clock, ("/bin/sh", "-c", "echo partial-words; exit 3"), stream=stream)

    result = failing.register(client, {"mi300x": 64})

    command = "/bin/sh -c 'echo partial-words; exit 3'"
    assert not result.applied
    assert result.error == f"register_command `{command}` exited 3: partial-words"
    assert f"register_command `{command}` exited 3 after 0.0 s: partial-words\n" in stream.getvalue()


def test_a_register_command_the_kernel_cannot_execute_is_a_configuration_error_naming_it(tmp_path):
    """An executable file that is no program (no ``#!`` line, no ELF header): ``execve`` says
    ENOEXEC; spurinv names the file and the kernel's words, a configuration error (78)."""
    client, _ = planned_scontrol(tmp_path, ["8"])
    program = tmp_path / "not-a-program"
    program.write_text("these words are no program\n")
    program.chmod(0o755)
    clock = Clock()
    command = registrar(1.0, clock, (str(program),))

    with pytest.raises(ConfigError) as caught:
        command.register(client, {"mi300x": 64})

    assert str(caught.value) == f"controller.register_command: cannot run {program}: Exec format error"
    assert caught.value.exit_code == 78


def test_a_controller_that_answered_once_then_stayed_unreachable_is_that_error(tmp_path):
    """The read-back saw the node without the GPUs, then lost the controller until the end:
    the unreachable error (69, retried), not a refusal judged by a look from before the loss."""
    client, _ = planned_scontrol(tmp_path, ["8", "8", "down", "down", "down"])

    with pytest.raises(ControllerError) as caught:
        registrar(1.0, Clock()).register(client, {"mi300x": 64})

    assert caught.value.kind == "unreachable"
