"""README.md's "Install on a node", followed literally in a temporary prefix, then the
service's ExecStart run with the environment systemd gives it.

What is not literal, and why: every absolute path (/etc, /opt, /usr/local) is moved under a
temporary root; `/usr/bin/python3 -m venv` and the venv's `pip` are replaced by stand-ins (the pip records
what it is asked) whose spurinv runs this venv's (a real build needs PyPI and takes ~10 s; it was followed by hand in a
systemd-nspawn container booting systemd 252, where the timer then ran the unit); `systemctl`,
`udevadm` and `apt-get` are recorders. systemd's part of a start is done here by hand: the state directory
with StateDirectoryMode=, the credential copied from LoadCredential= (mode 0400, as systemd does),
Environment=, and $JOURNAL_STREAM. When this runs as root and setpriv(1) exists, the program
runs with an empty capability bounding set and no_new_privs, as CapabilityBoundingSet= and
NoNewPrivileges= give it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from test_systemd import SPURINV, unit_values  # tests/ is on sys.path (conftest.py)

from spurinv import exitcode

REPO = Path(__file__).resolve().parent.parent
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c3B1cmludi10ZXN0.c2lnbmF0dXJl"  # shaped like a Slurm JWT; never valid


def readme_install_block() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Install on a node") :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "README.md's install section has a sh block"
    return match.group(1)


def stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """Follow the README's install block under ``tmp_path/root``; return that root."""
    root = tmp_path / "root"
    stubs = tmp_path / "stubs"
    calls = tmp_path / "calls"
    stubs.mkdir()
    # The directories a fresh Debian 12 with systemd already has.
    for directory in ("etc/systemd/system", "usr/local/bin", "usr/local/share/man", "var/lib", "run/systemd/system"):
        (root / directory).mkdir(parents=True)
    block = readme_install_block()
    # the install ends with `spurinv check`: here it checks the tree being installed
    # (--root: where the timer and udev files are; the unit's state directory)
    assert block.rstrip().splitlines()[-1] == "spurinv check"
    block = block.rstrip().removesuffix("spurinv check") + f"spurinv check --root {root} --config /etc/spurinv/config.toml\n"
    # the venv comes from the system interpreter (a venv of a Python under /root breaks the unit)
    assert re.search(r"^/usr/bin/python3 -m venv /opt/spurinv ", block, re.M)
    block = block.replace("/usr/bin/python3 -m venv", f"{stubs}/python3 -m venv")
    for prefix in ("/opt/", "/usr/local/", "/etc/"):
        block = re.sub(rf"(?<![\w./-]){re.escape(prefix)}", f"{root}{prefix}", block)
    # python3 -m venv DIR: a venv whose pip records what it is asked (upgrading itself to a pip
    # that writes a command without `import re`, then installing this checkout) and does nothing
    # else, and whose spurinv runs this venv's.
    stub(
        stubs / "venv-pip",
        f'echo "pip $*" >> {calls}\n'
        f'case "$*" in "install -q pip>=25.2") ;; "install -q .") [ "$PWD" = {REPO} ] ;; *) exit 1 ;; esac\n',
    )
    stub(
        stubs / "python3",
        '[ "$1 $2" = "-m venv" ] || exit 97\n'
        'mkdir -p "$3/bin"\n'
        # a program inside the root (check follows the root's links on the root, as a chroot
        # would: a link out of it to this venv is nothing there) that runs this venv's spurinv
        f'printf \'#!/bin/sh\\nexec {SPURINV} "$@"\\n\' > "$3/bin/spurinv"\n'
        'chmod 755 "$3/bin/spurinv"\n'
        f'cp {stubs}/venv-pip "$3/bin/pip"\n',
    )
    for tool in ("systemctl", "udevadm", "apt-get"):
        stub(stubs / tool, f'echo "{tool} $*" >> {calls}\n')
    # `systemctl enable` links the timer into timers.target.wants, as systemd does
    wants = root / "etc/systemd/system/timers.target.wants"
    stub(
        stubs / "systemctl",
        f'echo "systemctl $*" >> {calls}\n'
        f'[ "$1" = enable ] && mkdir -p {wants} && ln -sf ../spurinv-refresh.timer {wants}/spurinv-refresh.timer\n'
        "exit 0\n",
    )
    env = {
        "PATH": f"{stubs}:{root}/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LC_ALL": "C.UTF-8",
        "STATE_DIRECTORY": f"{root}/var/lib/spurinv",  # what the unit's StateDirectory= gives the service
    }  # fmt: skip
    run = subprocess.run(["sh", "-eux", "-c", block], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert 0 == run.returncode, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "ready", run.stdout
    assert [
        "apt-get install -y python3-venv",
        "pip install -q pip>=25.2",
        "pip install -q .",
        "systemctl daemon-reload",
        "systemctl enable --now spurinv-refresh.timer",
        "udevadm control --reload",
    ] == calls.read_text().splitlines()
    return root


def test_every_pip_the_readme_installs_with_writes_a_command_without_import_re():
    """pip 25.0 to 25.1.1 still write a `spurinv` command that imports `re` (distlib's template:
    pip's own, without it, came in 25.2): a floor of 25 leaves Debian 13's venv (pip 25.1.1) as
    it is, and the timer's tick pays the import. Every pip upgrade in README.md admits none of them."""
    from packaging.specifiers import SpecifierSet

    readme = (REPO / "README.md").read_text()
    wanted = re.findall(r"pip install -q '(pip[^']*)'", readme)
    assert len(wanted) >= 2, "the quick start and the install upgrade pip"
    for requirement in wanted:
        allowed = SpecifierSet(requirement.removeprefix("pip"))
        assert not any(version in allowed for version in ("23.2.1", "25.0", "25.0.1", "25.1", "25.1.1")), requirement
        assert all(version in allowed for version in ("25.2", "26.3")), requirement


def test_install_puts_every_file_where_the_units_expect_it(installed: Path):
    root = installed
    for name in ("spurinv-refresh.service", "spurinv-refresh.timer"):
        assert (REPO / "systemd" / name).read_bytes() == (root / "etc/systemd/system" / name).read_bytes()
    assert (REPO / "systemd/90-spurinv.rules").read_bytes() == (root / "etc/udev/rules.d/90-spurinv.rules").read_bytes()
    assert (root / "usr/local/share/man/man8/spurinv.8").exists()
    assert (root / "usr/local/share/man/man8/spurinv-slurm-dynamic.8").exists()
    assert os.readlink(root / "usr/local/bin/spurinv-slurm-dynamic").endswith("/opt/spurinv/bin/spurinv-slurm-dynamic")
    assert os.access(root / "usr/local/bin/spurinv", os.X_OK)
    token = root / "etc/spurinv/token"
    assert 0o600 == stat.S_IMODE(token.stat().st_mode)
    config = root / "etc/spurinv/config.toml"
    assert not stat.S_IMODE(config.stat().st_mode) & 0o022  # spurinv refuses a writable-by-others config
    # The credential the unit loads is the file the README creates.
    service = unit_values(root / "etc/systemd/system/spurinv-refresh.service")
    assert service["Service.LoadCredential"][0].endswith(":/etc/spurinv/token")


def start_service(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Do what systemd does on `systemctl start spurinv-refresh.service`, then run ExecStart."""
    service = unit_values(root / "etc/systemd/system/spurinv-refresh.service")
    argv = shlex.split(service["Service.ExecStart"][0])
    assert "/usr/local/bin/spurinv" == argv[0]
    argv[0] = str(root / "usr/local/bin/spurinv")

    state_directory = root / "var/lib" / service["Service.StateDirectory"][0]
    state_directory.mkdir(parents=True, exist_ok=True)
    state_directory.chmod(int(service["Service.StateDirectoryMode"][0], 8))

    credentials = root / "run/credentials/spurinv-refresh.service"
    shutil.rmtree(credentials, ignore_errors=True)
    credentials.mkdir(parents=True)
    for entry in service["Service.LoadCredential"]:
        name, _, source = entry.partition(":")
        copy = credentials / name
        shutil.copyfile(root / source.lstrip("/"), copy)  # a missing source fails the start (status 243)
        copy.chmod(0o400)
    credentials.chmod(0o500)

    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "STATE_DIRECTORY": str(state_directory),
        "CREDENTIALS_DIRECTORY": str(credentials),
        "JOURNAL_STREAM": "8:123456",
        "INVOCATION_ID": "0123456789abcdef0123456789abcdef",
        # The one path the program itself knows: its default config is /etc/spurinv/config.toml.
        "SPURINV_CONFIG": str(root / "etc/spurinv/config.toml"),
    }
    for assignment in service.get("Service.Environment", []):
        for pair in shlex.split(assignment):
            key, _, value = pair.partition("=")
            env[key] = value
    sandbox = []
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv:
        sandbox = [setpriv, "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all"]
    return subprocess.run(
        [*sandbox, *argv, *extra], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False, timeout=120
    )


def journal_lines(text: str) -> list[str]:
    """Every stderr line must carry a syslog priority prefix; return the lines."""
    lines = text.splitlines()
    assert all(re.match(r"^<[0-7]>\S", line) for line in lines), lines
    return lines


def test_the_installed_service_runs_and_keeps_its_state_private(installed: Path, built):
    """Observe mode, as installed: exit 0, state 0600 in a 0700 directory; then a quiet tick."""
    root = installed
    fixture = str(built("mi300x-cpx"))  # hermetic: the ExecStart line plus --root

    first = start_service(root, "--root", fixture)
    assert (0, []) == (first.returncode, journal_lines(first.stderr)), first.stdout
    assert "observe mode" in first.stdout
    state_directory = root / "var/lib/spurinv"
    assert 0o700 == stat.S_IMODE(state_directory.stat().st_mode)
    files = sorted(path.name for path in state_directory.iterdir())
    assert ["state.json", "state.json.lock"] == files
    assert all(0o600 == stat.S_IMODE((state_directory / name).stat().st_mode) for name in files)

    second = start_service(root, "--root", fixture)  # the timer's next tick: nothing changed
    assert (0, "", "") == (second.returncode, second.stdout, second.stderr)


def test_with_a_controller_and_the_token_as_credential_it_logs_with_priorities_and_never_the_token(installed: Path, built):
    """The README's next step: edit the config, put the token in /etc/spurinv/token. The
    controller is a closed port on 127.0.0.1, so the run fails with 69 and says why at <3>; the
    token is found through $CREDENTIALS_DIRECTORY (without it: 77), and never printed."""
    root = installed
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        config = root / "etc/spurinv/config.toml"
        config.write_text(f'[controller]\nurl = "http://127.0.0.1:{port}"\nauth = "slurm-jwt"\n')
        (root / "etc/spurinv/token").write_text(f"SLURM_JWT={TOKEN}\n")

        run = start_service(root, "--root", str(built("mi300x-spx")))

    assert exitcode.UNAVAILABLE == run.returncode, run.stdout + run.stderr
    lines = journal_lines(run.stderr)
    assert any(line.startswith("<3>GET ") and str(port) in line for line in lines), lines
    assert TOKEN not in run.stdout + run.stderr
    assert TOKEN[:16] not in run.stdout + run.stderr
