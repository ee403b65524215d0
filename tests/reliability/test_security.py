"""Security checks: the token stays secret, unsafe files are refused, the state file is
never followed through a planted symlink, and the service runs as a dedicated unprivileged user.

``docs/security.md`` states each rule and names the test here that proves it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import hostile
import pytest
import rootbuilder as rb
from faultserver import ERRORS, FaultServer, Gateway, Reply

from spurinv import exitcode

NODE_PATH = "/slurm/v0.0.42/node/n1"


@pytest.fixture
def gateway_server() -> Iterator[FaultServer]:
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1", gres="gpu:mi300x:8")
    with FaultServer(gateway=gateway) as server:
        yield server


def leaks(text: str) -> bool:
    return hostile.TOKEN in text or hostile.TOKEN[-24:] in text  # the whole token, or its tail alone


def test_the_token_appears_in_no_output_file_argv_or_message(tmp_path, built, spurinv_here, gateway_server, ledger):
    """Every command, successful and failing, with the token in use; grep everything for it."""
    server, _gateway = gateway_server, gateway_server.gateway
    token = hostile.write_private(tmp_path / "secrets" / "token", f"SLURM_JWT={hostile.TOKEN}\n")  # `scontrol token` form
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    metrics = tmp_path / "metrics" / "spurinv.prom"
    metrics.parent.mkdir()
    observe = hostile.config(tmp_path / "observe.toml")
    config = hostile.config(tmp_path / "config.toml", server.url, token_file=token)
    spx, cpx = built("mi300x-spx"), built("mi300x-cpx")
    outputs: list[tuple[str, str]] = []

    def run(name: str, *args: object, expect: int | None = None, **kwargs: object) -> None:
        ran = spurinv_here(*args, **kwargs)
        outputs.append((name, ran.out + ran.err))
        if expect is not None:
            assert ran.code == expect, (name, ran)

    def refresh(root: Path, *extra: object, cfg: Path = config, expect: int | None = None, both: bool = False) -> None:
        """``--json``, then (dry runs, and failing runs with ``both``) the human form too."""
        for form in (("--json",), ()):
            if form == () and json.loads(state.read_text()).get("backoff"):
                hostile.rewind_backoff(state)
            run(f"refresh {' '.join(map(str, extra + form))}", "refresh", "--root", root, "--state", state, "--config", cfg,
                "--metrics-file", metrics, *extra, *form, expect=expect)  # fmt: skip
            if "--dry-run" not in extra and not both:
                break

    refresh(spx, cfg=observe, expect=0)
    refresh(spx, "--dry-run", expect=0)
    refresh(spx, expect=0)  # adopts gpu:mi300x:8: the token went to the controller
    assert server.requests("GET")[-1].headers["x-slurm-user-token"] == hostile.TOKEN
    refresh(cpx, cfg=observe, expect=0)
    refresh(cpx, "--dry-run", expect=0)  # shows the POST it would send
    refresh(cpx, expect=exitcode.PROTOCOL)  # POST gres → 2072 (captured) → drain
    for behaviour in (Reply(401, "Authentication failure"), Reply(503), Reply(200, ERRORS["query-missing"])):
        server.script("GET", NODE_PATH, behaviour)
        hostile.rewind_backoff(state)
        refresh(cpx, both=True)
    for args in (("status",), ("status", "--json"), ("diff", "--root", cpx), ("diff", "--root", cpx, "--json")):
        run(" ".join(map(str, args)), *args, "--state", state, extra_env={"SPURINV_CONFIG": str(config)})
    for args in (("config", "show"), ("config", "show", "--json"), ("discover", "--root", spx), ("discover", "--root", spx,
                 "--json"), ("version",)):  # fmt: skip
        run(" ".join(map(str, args)), *args, *(("--config", config) if args[0] != "version" else ()))
    # A systemd credential instead of token_file.
    credentials = tmp_path / "credentials"
    hostile.write_private(credentials / "spurinv-token", hostile.TOKEN, 0o400)
    hostile.rewind_backoff(state)
    run("refresh with $CREDENTIALS_DIRECTORY", "refresh", "--root", cpx, "--state", state, "--config",
        hostile.config(tmp_path / "cred.toml", server.url, token_file=None, extra='auth = "slurm-jwt"\n'),
        extra_env={"CREDENTIALS_DIRECTORY": str(credentials)})  # fmt: skip

    files = [f for f in hostile.files_under(state.parent, metrics.parent) if f.is_file()]
    for name, text in outputs:
        ledger.record("security", f"token in output of `{name}`", "clean" if not leaks(text) else "LEAKED", lost=leaks(text))
    for path in files:
        text = path.read_bytes().decode(errors="replace")
        ledger.record("security", f"token in {path.name}", "clean" if not leaks(text) else "LEAKED", lost=leaks(text))
    assert not [name for name, text in outputs if leaks(text)]
    assert not [path for path in files if leaks(path.read_bytes().decode(errors="replace"))]
    assert {path.name for path in files} >= {"state.json", "state.json.lock", "spurinv.prom"}
    assert len(outputs) >= 20
    assert sum(1 for seen in server.seen if seen.headers.get("x-slurm-user-token") == hostile.TOKEN) >= 4


ECHO = f"rejected X-SLURM-USER-TOKEN={hostile.TOKEN}"
ECHOES = {
    "in a Slurm error body": Reply(500, {"errors": [{"error_number": 9001, "description": ECHO}]}),
    "in a redirect's Location": Reply(302, "", {"Location": f"https://evil.example/?t={hostile.TOKEN}"}),
    "in a node query error": Reply(200, {"nodes": [], "errors": [{"error_number": 0, "description": ECHO}]}),
}


@pytest.mark.parametrize("where", ECHOES)
def test_a_server_echoing_the_token_back_never_gets_it_logged_or_stored(where, tmp_path, built, spurinv_here, cli, ledger):
    """An error page quoting the request's headers: its text becomes our message (stderr, journal)
    and the backoff record in the state file, so the token is scrubbed out of it first."""
    gateway = Gateway(token=hostile.TOKEN)
    gateway.add_node("n1")
    state = tmp_path / "state.json"
    assert (
        cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", hostile.config(tmp_path / "o.toml")).code
        == 0
    )
    with FaultServer(gateway=gateway) as server:
        server.script("GET", NODE_PATH, ECHOES[where])
        config = hostile.config(tmp_path / "c.toml", server.url, token_file=hostile.token(tmp_path / "token"))
        runs = [spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config, "--json")]
        hostile.rewind_backoff(state)
        runs.append(spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config))
        runs.append(spurinv_here("status", "--state", state))
    text = "".join(ran.out + ran.err for ran in runs) + state.read_text()
    ledger.record("security", f"token echoed back {where}", "scrubbed" if not leaks(text) else "LEAKED", lost=leaks(text))
    assert not leaks(text)
    assert "<token>" in text  # the message is still there, with the token replaced
    assert runs[0].code in (exitcode.PROTOCOL, exitcode.NOHOST), runs[0].err


def test_a_token_file_with_a_second_line_is_refused_without_printing_it(
    tmp_path, built, spurinv_here, cli, gateway_server, ledger
):
    """requests quotes an invalid header value, token and all, in its error: refuse it first."""
    state = tmp_path / "state.json"
    assert (
        cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", hostile.config(tmp_path / "o.toml")).code
        == 0
    )
    broken = hostile.write_private(tmp_path / "token", f"{hostile.TOKEN}\nsecond line\n")
    config = hostile.config(tmp_path / "c.toml", gateway_server.url, token_file=broken)

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config)

    ledger.record("security", "token file with a second line", f"refused, exit {ran.code}", lost=leaks(ran.out + ran.err))
    assert ran.code == exitcode.NOPERM, ran.err
    assert not leaks(ran.out + ran.err)
    assert gateway_server.seen == []


def test_the_token_is_not_in_the_argv_of_any_process(tmp_path, built, env, gateway_server, ledger, cli):
    """While a refresh waits on the controller, no process's command line holds the token."""
    server = gateway_server
    token = hostile.token(tmp_path / "token")
    state = tmp_path / "state.json"
    result = cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", hostile.config(tmp_path / "o.toml"))
    assert result.code == 0, result.err
    server.script("GET", NODE_PATH, Reply(200, {}, delay=30))
    config = hostile.config(tmp_path / "c.toml", server.url, token_file=token, timeout=20)
    process = subprocess.Popen([sys.executable, "-m", "spurinv", "refresh", "--root", str(built("mi300x-spx")),
                                "--state", str(state), "--config", str(config)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not server.requests("GET"):  # the request is in flight: the token is loaded and in use
            assert time.monotonic() < deadline
            assert process.poll() is None
            time.sleep(0.05)
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes()
                except OSError:
                    continue  # exited meanwhile
                if hostile.TOKEN.encode() in argv:
                    found.append(entry.name)
        own = (Path("/proc") / str(process.pid) / "cmdline").read_bytes().split(b"\0")
    finally:
        os.kill(process.pid, 9)
        process.wait()
    ledger.record("security", "token in any process's argv", "clean" if not found else "LEAKED", lost=bool(found))
    assert not found
    assert b"refresh" in own


@pytest.mark.parametrize(
    ("what", "mode", "code"),
    [
        ("config", 0o620, exitcode.CONFIG),
        ("config", 0o602, exitcode.CONFIG),
        ("token", 0o620, exitcode.NOPERM),
        ("token", 0o602, exitcode.NOPERM),
        ("token", 0o640, exitcode.NOPERM),
        ("token", 0o604, exitcode.NOPERM),
    ],
    ids=[
        "config-group-writable",
        "config-world-writable",
        "token-group-writable",
        "token-world-writable",
        "token-group-readable",
        "token-world-readable",
    ],
)
def test_unsafe_config_and_token_files_are_refused(
    tmp_path, built, spurinv_here, cli, gateway_server, ledger, what, mode, code
):
    state = tmp_path / "state.json"
    assert (
        cli("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", hostile.config(tmp_path / "o.toml")).code
        == 0
    )
    token = hostile.token(tmp_path / "token", mode if what == "token" else 0o600)
    config = hostile.config(tmp_path / "c.toml", gateway_server.url, token_file=token, mode=mode if what == "config" else 0o600)

    ran = spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", state, "--config", config)

    path = config if what == "config" else token
    ledger.record("security", f"{what} file mode {mode:o}", f"refused, exit {ran.code}", lost=bool(gateway_server.seen))
    assert ran.code == code, ran.err
    assert str(path) in ran.err
    assert "chmod go-rwx" in ran.err
    assert len(ran.err.strip().splitlines()) == 1
    assert gateway_server.seen == []


@pytest.mark.parametrize("planted", ["state.json", "state.json.lock"])
def test_a_planted_symlink_is_never_followed(tmp_path, built, spurinv_here, ledger, planted):
    """Another user plants ``state.json`` (or its lock) as a symlink to a file of theirs."""
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    link = directory / planted
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)  # owned by nobody, as a planted link would be
    config = hostile.config(tmp_path / "c.toml")

    runs = [spurinv_here("refresh", "--root", built("mi300x-spx"), "--state", directory / "state.json", "--config", config)]
    if planted == "state.json":
        state = directory / "state.json"
        runs += [
            spurinv_here("status", "--state", state),
            spurinv_here("status", "--state", state, "--json"),
            spurinv_here("diff", "--root", built("mi300x-spx"), "--state", state, "--config", config),
        ]

    followed = victim.read_text() != "someone else's file\n" or not link.is_symlink()
    ledger.record("security", f"planted symlink at {planted}", "not followed" if not followed else "FOLLOWED", lost=followed)
    assert not followed
    assert runs[0].code == exitcode.CANTCREAT, runs[0].err
    # refresh cannot create it (73); status and diff cannot read it (66); never 70, a bug
    assert [ran.code for ran in runs[1:]] == [exitcode.NOINPUT] * len(runs[1:]), runs
    for ran in runs:
        assert f"{link} is a symlink; refusing to follow it" in ran.err + ran.out, ran
    said = " ".join((Path(__file__).parents[2] / "docs" / "security.md").read_text().split())
    assert "exit 73 from `refresh`, 66 from `status` and `diff`" in said  # what the proof above sees


def test_state_is_0600_in_a_0700_directory_even_with_a_permissive_umask(tmp_path, built, env, ledger):
    state = tmp_path / "new" / "dir" / "state.json"  # the default place ($STATE_DIRECTORY), created when missing
    command = (f"umask 000; exec {sys.executable} -m spurinv refresh --root {built('mi300x-spx')} "
               f"--config {hostile.config(tmp_path / 'c.toml')}")  # fmt: skip
    default = {**{k: v for k, v in env.items() if k != "SPURINV_STATE"}, "STATE_DIRECTORY": str(state.parent)}
    result = subprocess.run(["sh", "-c", command], env=default, capture_output=True, text=True, check=False)

    paths = (state, state.parent, state.parent.parent, Path(f"{state}.lock"))
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in paths}
    wanted = {"state.json": 0o600, "dir": 0o700, "new": 0o700, "state.json.lock": 0o600}
    ledger.record("security", "file modes under umask 000", " ".join(f"{k} {v:o}" for k, v in modes.items()),
                  lost=modes != wanted)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert modes == wanted


# --- a dedicated unprivileged system user ---------------------------------------------------------


@pytest.fixture
def system_user() -> str:
    """An unprivileged account to stand in for the dedicated one docs/security.md creates: Debian's
    and Ubuntu's ``nobody``, so the suite never rewrites /etc/passwd, /etc/shadow or /etc/group."""
    if os.geteuid() != 0:
        pytest.skip("running as another user needs root")
    if shutil.which("runuser") is None:
        pytest.skip("runuser is not installed")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("there is no user nobody on this machine")
    return "nobody"


def interpreter_for(user: str) -> tuple[list[str], dict[str, str]]:
    """A Python the user can run with spurinv importable: the venv's, else the system python3
    with the venv's packages on PYTHONPATH (a pyenv interpreter under /root (0700) is not
    executable by anyone else; CI's venv is made from /usr/bin/python3 and is)."""
    import site

    repo = str(Path(__file__).resolve().parents[2])
    candidates: list[tuple[list[str], dict[str, str]]] = [([sys.executable], {})]
    system = shutil.which("python3", path="/usr/bin:/usr/local/bin")
    if system:
        candidates.append(([system], {"PYTHONPATH": os.pathsep.join([repo, *site.getsitepackages()])}))
    for command, extra in candidates:
        probe = subprocess.run(["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in extra.items()), *command,
                                "-c", "import sys, spurinv, pydantic, requests; print(sys.version_info[:2])"],
                               capture_output=True, text=True, check=False, cwd="/")  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == str(sys.version_info[:2]):
            return command, extra
    pytest.skip(f"no Python {sys.version_info[:2]} with spurinv importable is executable by an unprivileged user here")


def test_the_service_runs_as_a_dedicated_unprivileged_user(system_user, built, gateway_server, ledger):
    python, extra = interpreter_for(system_user)
    work = Path(tempfile.mkdtemp(prefix="spurinv-user-"))
    try:
        work.chmod(0o755)  # pytest's tmp_path is 0700 (root's): the user could not enter it
        root = work / "root"
        rb.copy_root(built("mi300x-spx"), root)  # sysfs-like: world-readable files
        owned = work / "var-lib-spurinv"
        owned.mkdir(mode=0o700)
        token = hostile.token(work / "token")  # 0600: readable by its owner only
        account = pwd.getpwnam(system_user)
        for path in (owned, token):
            os.chown(path, account.pw_uid, account.pw_gid)
        config = hostile.config(work / "config.toml", gateway_server.url, token_file=token, mode=0o644)  # root's, read-only
        observe = hostile.config(work / "observe.toml", mode=0o644)
        state = owned / "state.json"

        def as_user(*args: object) -> subprocess.CompletedProcess[str]:
            command = ["runuser", "-u", system_user, "--", "env", "-i", "PATH=/usr/bin:/bin",
                       *(f"{k}={v}" for k, v in extra.items()), *python, "-m", "spurinv", *map(str, args)]  # fmt: skip
            return subprocess.run(command, capture_output=True, text=True, check=False, cwd="/", timeout=120)

        first = as_user("refresh", "--root", root, "--state", state, "--config", observe)
        # The control: a token the user cannot read (root's 0600) is refused with 77, never sent.
        root_token = hostile.token(work / "root-token")
        root_config = hostile.config(work / "root-token.toml", gateway_server.url, token_file=root_token, mode=0o644)
        refused = as_user("refresh", "--root", root, "--state", state, "--config", root_config)
        assert gateway_server.seen == []
        second = as_user("refresh", "--root", root, "--state", state, "--config", config, "--json")
        status = as_user("status", "--state", state, "--json")
        info = state.stat()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ok = first.returncode == 0 and second.returncode == 0
    ledger.record("security", "refresh as a dedicated system user", "ran unprivileged" if ok else "FAILED", lost=not ok)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["steps"][0]["action"] == "read-view"
    assert json.loads(status.stdout)["baseline"]["source"] == "adopted"
    assert gateway_server.requests("GET")[0].headers["x-slurm-user-token"] == hostile.TOKEN
    assert info.st_uid != 0
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert refused.returncode == exitcode.NOPERM, refused.stderr
    assert "Permission denied" in refused.stderr
