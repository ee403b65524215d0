"""The systemd units, the udev rule and the cron entry: they verify and parse, they ask
for what the issue asks, and the cron line behaves as its comment says."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import analyzer
import pytest

from spurinv import exitcode
from spurinv.config import settings as config
from spurinv.inventory import root as places
from spurinv.state import store

REPO = Path(__file__).resolve().parent.parent
SYSTEMD = REPO / "systemd"
SERVICE = SYSTEMD / "spurinv-refresh.service"
TIMER = SYSTEMD / "spurinv-refresh.timer"
RULES = SYSTEMD / "90-spurinv.rules"
CRON = SYSTEMD / "spurinv.cron"
SPURINV = Path(sys.executable).parent / "spurinv"  # the console script of the venv running the tests
INSTALLED = "/usr/local/bin/spurinv"  # where README.md installs it, and what ExecStart names


def unit_entries(path: Path) -> list[tuple[str, str, str]]:
    """``(section, key, value)`` for every assignment of a unit file, in order (keys may repeat)."""
    entries, section = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        entries.append((section, key.strip(), value.strip()))
    return entries


def unit_values(path: Path) -> dict[str, list[str]]:
    """Every key's values (``Section.Key``), in order."""
    values: dict[str, list[str]] = {}
    for section, key, value in unit_entries(path):
        values.setdefault(f"{section}.{key}", []).append(value)
    return values


def seconds(value: str) -> float:
    """A systemd time span such as ``180s``, ``2min`` or ``90`` in seconds."""
    units = {"": 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


def analyzable_units(directory: Path, service_text: str | None = None) -> tuple[Path, Path, dict[str, str]]:
    """Copies of the units that systemd-analyze can check here: ExecStart points at this venv's
    spurinv (verify insists the binary exists), and MANPATH finds man/spurinv.8 for the
    Documentation=man:spurinv(8) check."""
    service = directory / SERVICE.name
    timer = directory / TIMER.name
    text = service_text if service_text is not None else SERVICE.read_text()
    service.write_text(text.replace(f"ExecStart={INSTALLED} ", f"ExecStart={SPURINV} "))
    shutil.copy(TIMER, timer)
    man8 = directory / "man" / "man8"
    man8.mkdir(parents=True)
    shutil.copy(REPO / "man" / "spurinv.8", man8 / "spurinv.8")
    return service, timer, {**os.environ, "MANPATH": str(directory / "man"), "SYSTEMD_LOG_COLOR": "0"}


def need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (scripts/test-setup installs it on Debian)")
    return found


# --- systemd-analyze ---------------------------------------------------------------------------


def test_units_verify_without_a_single_warning(tmp_path):
    """`systemd-analyze verify` exits 0 even for an unknown key; its warnings are the signal."""
    service, timer, env = analyzable_units(tmp_path)
    run = analyzer.analyze("verify", str(service), str(timer), env=env)
    assert (0, "") == (run.returncode, run.stderr)


def test_systemd_analyze_leaves_the_hosts_run_alone(tmp_path):
    """Its manager rewrites /run/systemd/systemd-units-load whatever --root says: the tests run it
    where /run/systemd is a tmpfs of its own (tests/analyzer.py)."""
    marker = Path("/run/systemd/systemd-units-load")
    if not marker.exists():
        pytest.skip("no /run/systemd/systemd-units-load here to watch (no systemd manager has run)")
    before = marker.stat().st_mtime_ns
    service, timer, env = analyzable_units(tmp_path)
    run = analyzer.analyze("verify", str(service), str(timer), env=env)
    assert (0, "", before) == (run.returncode, run.stderr, marker.stat().st_mtime_ns)


def test_verify_catches_a_typo_in_the_unit(tmp_path):
    """The check above can fail: a misspelt key is reported."""
    broken = SERVICE.read_text().replace("\nNice=", "\nNicee=")
    service, timer, env = analyzable_units(tmp_path, broken)
    run = analyzer.analyze("verify", str(service), str(timer), env=env)
    assert "Unknown key 'Nicee'" in run.stderr


def test_security_exposure_is_ok_and_is_the_figure_in_the_readme(tmp_path):
    service, _timer, env = analyzable_units(tmp_path)
    run = analyzer.analyze("security", "--offline=true", "--no-pager", str(service), env=env)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d) (\w+)", run.stdout)
    if match is None and "offline" in run.stderr:
        pytest.skip(f"this systemd-analyze has no --offline: {run.stderr.strip()}")
    assert match, run.stdout + run.stderr
    score, level = float(match.group(1)), match.group(2)
    assert level in ("SAFE", "OK")
    version = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True, check=True).stdout
    recorded = re.search(r"rates it \*\*(\d+\.\d) (\w+)\*\*", (REPO / "README.md").read_text())
    assert recorded, "README.md records the exposure score"
    if not version.startswith("systemd 252 "):
        pytest.skip(f"the README's figure is for systemd 252; this is {version.splitlines()[0]} (score {score} {level})")
    assert (recorded.group(1), recorded.group(2)) == (f"{score:.1f}", level)


# --- what the issue asks of the units ----------------------------------------------------------


def test_service_runs_one_quiet_refresh_with_state_directory_and_credential():
    values = unit_values(SERVICE)
    assert ["oneshot"] == values["Service.Type"]
    assert [f"{INSTALLED} refresh --quiet"] == values["Service.ExecStart"]
    assert ["spurinv"] == values["Service.StateDirectory"]
    assert ["0700"] == values["Service.StateDirectoryMode"]  # the state file is 0600 inside it
    # The credential's name is the config's default, so a default config finds the token.
    credential = config.ControllerSection().credential
    assert [f"{credential}:/etc/spurinv/token"] == values["Service.LoadCredential"]


def test_timer_ticks_soon_after_boot_then_every_minute_spread_and_accurate():
    values = unit_values(TIMER)
    assert seconds(values["Timer.OnBootSec"][0]) <= 300
    assert 60 == seconds(values["Timer.OnUnitActiveSec"][0])
    assert 0 < seconds(values["Timer.RandomizedDelaySec"][0]) <= 30
    assert seconds(values["Timer.AccuracySec"][0]) <= 5  # the default (1 min) would double the interval
    assert ["timers.target"] == values["Install.WantedBy"]


def test_timeout_is_well_above_the_longest_run_deadline_the_config_allows():
    """controller.run_deadline bounds a whole run; even its largest allowed value stays
    well inside TimeoutStartSec, and the default is far inside it."""
    field = config.ControllerSection.model_fields["run_deadline"]
    largest = next(rule.le for rule in field.metadata if getattr(rule, "le", None) is not None)
    start = seconds(unit_values(SERVICE)["Service.TimeoutStartSec"][0])
    assert start >= 1.5 * largest
    assert start >= 3 * config.Config().controller.run_deadline


def test_stopping_fits_a_run_that_saves_and_exits_75_on_sigterm():
    """SIGTERM to spurinv first (KillMode=mixed), time to save (the run needs ≤ 2 s), and 75 is no failure."""
    values = unit_values(SERVICE)
    assert ["mixed"] == values["Service.KillMode"]
    assert 2 * 2 <= seconds(values["Service.TimeoutStopSec"][0]) <= 30
    assert str(exitcode.TEMPFAIL) in values["Service.SuccessExitStatus"][0].split()


def test_hardening_is_in_place_and_private_devices_is_explained():
    values = unit_values(SERVICE)
    expected = {
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "NoNewPrivileges": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "CapabilityBoundingSet": "",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectControlGroups": "yes",
        "LockPersonality": "yes",
        "MemoryDenyWriteExecute": "yes",
        "RestrictRealtime": "yes",
        "RestrictNamespaces": "yes",
        "Nice": "10",
        "IOSchedulingClass": "idle",
    }
    assert expected == {key: values[f"Service.{key}"][0] for key in expected}
    assert "@system-service" in values["Service.SystemCallFilter"]
    assert "Service.ProcSubset" not in values  # would hide /proc/meminfo, /proc/cpuinfo, /proc/driver
    # PrivateDevices=yes is safe because spurinv names /dev nodes from sysfs minors and never
    # reads /dev: every path it reads is a constant in spurinv/inventory/root.py, and none is under dev/.
    assert "never opens /dev" in SERVICE.read_text()
    read_paths = [value for name, value in vars(places).items() if name.isupper() and not isinstance(value, int)]
    assert read_paths
    assert not any(path.startswith("dev") for value in read_paths for path in ([value] if isinstance(value, str) else value))


def test_every_hardening_line_says_when_to_relax_it():
    """Each group of hardening settings is preceded by a comment."""
    lines = SERVICE.read_text().splitlines()
    start = lines.index("# Hardening. Each line says when to relax it.")
    previous_was_comment = False
    uncommented = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            previous_was_comment = True
        elif line.strip():
            key = line.partition("=")[0]
            if not previous_was_comment and key not in GROUPED:
                uncommented.append(key)
            previous_was_comment = False
    assert [] == uncommented


# Settings that share the comment of the line above them (same reasoning, same relaxation).
GROUPED = {
    "AmbientCapabilities",
    "SystemCallFilter",
    "SystemCallArchitectures",
    "SystemCallErrorNumber",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectClock",
    "ProtectHostname",
    "LockPersonality",
    "RestrictRealtime",
    "RestrictNamespaces",
    "RestrictSUIDSGID",
    "RemoveIPC",
    "PrivateIPC",
    "PrivateMounts",
    "KeyringMode",
    "UMask",
}


def test_memory_limit_is_several_times_the_measured_peak(built, tmp_path):
    """MemoryMax= was sized from a measurement; a tick that grows towards it fails here first.
    Peak RSS of a full change tick on the 64-partition root (observe mode, two readings)."""
    state = tmp_path / "state.json"
    empty = tmp_path / "config.toml"
    empty.write_text("")
    empty.chmod(0o600)
    probe = (
        "import resource, subprocess, sys\n"
        "for root in sys.argv[2:]:\n"
        "    subprocess.run([sys.argv[1], 'refresh', '--quiet', '--confirm-interval', '0', '--root', root,"
        f" '--state', {str(state)!r}], check=True, stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    roots = [str(built("mi300x-spx")), str(built("mi300x-cpx")), str(built("mi300x-cpx"))]
    run = subprocess.run(
        [sys.executable, "-c", probe, str(SPURINV), *roots],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SPURINV_CONFIG": str(empty)},
    )
    peak_mb = int(run.stdout) / 1024
    limit = unit_values(SERVICE)["Service.MemoryMax"][0]
    assert limit.endswith("M")
    print(f"peak RSS of a change tick on 64 partitions: {peak_mb:.0f} MB; MemoryMax={limit}")
    assert peak_mb * 4 <= int(limit[:-1])


# --- udev rule ---------------------------------------------------------------------------------

UDEV_TOKEN = re.compile(
    r'\s*(?P<key>[A-Z_]+)(?:\{(?P<attr>[A-Za-z0-9_]+)\})?\s*(?P<op>==|!=|\+=|-=|:=|=)\s*"(?P<value>[^"]*)"\s*'
)
UDEV_MATCH = {"ACTION", "SUBSYSTEM", "KERNEL", "ENV", "ATTR", "DRIVER"}
UDEV_ASSIGN = {"TAG", "ENV", "RUN"}


def udev_rules(text: str) -> list[list[tuple[str, str | None, str, str]]]:
    """Parse udev rule lines (udev(7): comma-separated ``KEY[{attr}]OP"value"``); raise on junk."""
    rules = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assert not line.rstrip().endswith("\\"), f"line {number}: keep each rule on one line"
        tokens = []
        for part in line.split(","):
            match = UDEV_TOKEN.fullmatch(part)
            assert match, f"line {number}: cannot parse {part!r}"
            key, attr, op, value = match.group("key", "attr", "op", "value")
            if op in ("==", "!="):
                assert key in UDEV_MATCH, f"line {number}: {key} is not a match key here"
            else:
                assert key in UDEV_ASSIGN, f"line {number}: {key} is not an assignment key here"
            tokens.append((key, attr, op, value))
        rules.append(tokens)
    return rules


def test_udev_rule_parses_and_starts_the_service_on_drm_and_kfd_add_and_remove():
    rules = udev_rules(RULES.read_text())
    covered: set[tuple[str, str]] = set()
    for tokens in rules:
        found = {(key, attr): (op, value) for key, attr, op, value in tokens}
        actions = found[("ACTION", None)][1].split("|")
        subsystem = found[("SUBSYSTEM", None)][1]
        assert subsystem in ("drm", "kfd")
        if ("ENV", "SYSTEMD_WANTS") in found:
            # SYSTEMD_WANTS needs the systemd tag and acts only when the device appears.
            assert ("+=", "spurinv-refresh.service") == found[("ENV", "SYSTEMD_WANTS")]
            assert ("+=", "systemd") == found[("TAG", None)]
            assert ["add"] == actions
        else:
            op, command = found[("RUN", None)]
            assert "+=" == op
            argv = shlex.split(command)
            assert os.path.isabs(argv[0])
            assert ["systemctl", "--no-block", "start", "spurinv-refresh.service"] == [Path(argv[0]).name, *argv[1:]]
        covered.update((action, subsystem) for action in actions)
    assert {("add", "drm"), ("add", "kfd"), ("remove", "drm"), ("remove", "kfd")} <= covered
    assert (SYSTEMD / "spurinv-refresh.service").exists()


def test_udev_parser_rejects_a_broken_rule():
    with pytest.raises(AssertionError):
        udev_rules('ACTION=="add", SUBSYSTEM="drm" TAG+="systemd"\n')
    with pytest.raises(AssertionError):
        udev_rules('ACTION=="add", RUN=="/usr/bin/true"\n')


def udevadm_complaints(rules: Path) -> list[str]:
    """What udev's own parser says about ``rules``: `udevadm test` reads every rules directory,
    so the file is put in /run/udev/rules.d inside a private mount namespace and a device every
    machine has is processed. The host is untouched: a fresh tmpfs holds /run/udev (over the
    host's, or over all of /run where there is none, rather than creating it), `mount -n` writes
    no /run/mount/utab, and /etc/udev/rules.d is hidden by an empty tmpfs, because an installed
    /etc/udev/rules.d/90-spurinv.rules would shadow the copy under test."""
    udevadm, unshare = shutil.which("udevadm"), shutil.which("unshare")
    if udevadm is None or unshare is None or os.geteuid() != 0:
        pytest.skip("needs root, unshare(1) and udevadm (Debian: apt-get install udev)")
    script = (
        "if [ -d /run/udev ]; then mount -n -t tmpfs tmpfs /run/udev; else mount -n -t tmpfs tmpfs /run && mkdir /run/udev; fi"
        " && { [ ! -d /etc/udev/rules.d ] || mount -n -t tmpfs tmpfs /etc/udev/rules.d; }"
        " && mkdir /run/udev/rules.d"
        f" && cp {shlex.quote(str(rules))} /run/udev/rules.d/90-spurinv.rules"
        f" && {udevadm} test --action=add /sys/class/net/lo"
    )
    run = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True, check=False
    )
    lines = (run.stdout + run.stderr).splitlines()
    assert any(line.startswith("Reading rules file: /run/udev/rules.d/90-spurinv.rules") for line in lines), lines[:20]
    return [line for line in lines if "90-spurinv.rules:" in line]


def test_udev_itself_accepts_the_rule():
    assert [] == udevadm_complaints(RULES)


def test_udev_itself_rejects_a_misspelt_key(tmp_path):
    broken = tmp_path / "90-spurinv.rules"
    broken.write_text(RULES.read_text().replace('TAG+="systemd"', 'TAGG+="systemd"', 1))
    assert any("Invalid key 'TAGG'" in line for line in udevadm_complaints(broken))


# --- cron entry --------------------------------------------------------------------------------

CRON_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")


def cron_entries(text: str) -> tuple[dict[str, str], list[tuple[list[str], str, str]]]:
    """Parse an /etc/cron.d file (crontab(5)): NAME=value lines and ``m h dom mon dow user command``.

    The command is returned as cron runs it: text after the first unescaped ``%`` would become
    stdin, so there must be none, and ``\\%`` becomes ``%``.
    """
    environment, jobs = {}, []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assignment = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)", line)
        if assignment:
            environment[assignment.group(1)] = assignment.group(2)
            continue
        fields = line.split(None, 6)
        assert 7 == len(fields), f"not `m h dom mon dow user command`: {line!r}"
        times, user, command = fields[:5], fields[5], fields[6]
        assert all(CRON_FIELD.match(field) for field in times), times
        assert re.search(r"(?<!\\)%", command) is None, "an unescaped % would cut the command"
        jobs.append((times, user, command.replace("\\%", "%")))
    return environment, jobs


def test_cron_file_parses_runs_every_minute_as_root_and_is_valid_sh():
    environment, jobs = cron_entries(CRON.read_text())
    assert "/bin/sh" == environment["SHELL"]
    assert 1 == len(jobs)
    times, user, command = jobs[0]
    assert (["*"] * 5, "root") == (times, user)
    assert f"{INSTALLED} refresh --quiet" in command
    assert "shuf -i 0-20 -n 1" in command
    assert 0 == subprocess.run(["sh", "-n", "-c", command], check=False).returncode
    assert re.fullmatch(r"[A-Za-z0-9_-]+", "spurinv"), "cron.d skips file names with dots: README installs it as spurinv"


def run_cron_command(
    tmp_path: Path, spurinv: str, extra_env: dict[str, str] | None = None, mailed: str = "", syslog: bool = True
) -> list[str]:
    """Run the cron job's command as cron would (sh -c, the file's environment), with sleep and
    logger replaced by recorders and /usr/local/bin/spurinv by ``spurinv``; return the logger calls.
    ``mailed``: what must appear on stderr (what cron mails); ``syslog=False``: logger fails as it
    does without /dev/log."""
    environment, jobs = cron_entries(CRON.read_text())
    command = jobs[0][2].replace(INSTALLED, spurinv)
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    calls = tmp_path / "logger.calls"
    (stubs / "sleep").write_text('#!/bin/sh\ncase "$1" in [0-9]|1[0-9]|20) exit 0;; esac\necho "bad sleep $1" >&2; exit 9\n')
    # logger(1): options, then a message, or else one syslog entry per line of stdin.
    (stubs / "logger").write_text(
        "#!/bin/sh\n"
        "tag=; priority=user.notice\n"
        'while [ $# -gt 0 ]; do case "$1" in -t) tag=$2; shift 2;; -p) priority=$2; shift 2;; *) break;; esac; done\n'
        + ("" if syslog else 'echo "logger: socket /dev/log: No such file or directory" >&2; exit 1\n')
        + f'if [ $# -gt 0 ]; then echo "$tag $priority $*" >> {calls}; exit 0; fi\n'
        f'while IFS= read -r line; do echo "$tag $priority $line" >> {calls}; done\n'
    )
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {
        **environment,
        "PATH": f"{stubs}:{environment['PATH']}",
        "SPURINV_STATE": str(tmp_path / "state" / "state.json"),
        **(extra_env or {}),
    }
    run = subprocess.run(
        [environment["SHELL"], "-c", command], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    assert "" == run.stdout
    assert (mailed in run.stderr) if mailed else ("" == run.stderr)  # cron mails anything printed here
    return calls.read_text().splitlines() if calls.exists() else []


def fake_spurinv(tmp_path: Path, code: int, output: str) -> str:
    path = tmp_path / f"spurinv-{code}"
    path.write_text(f"#!/bin/sh\nprintf '%s' {shlex.quote(output)}\nexit {code}\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize(
    ("code", "output", "expected"),
    [
        (0, "", []),  # the quiet no-change tick
        (
            0,
            "spurinv refresh · node n1\nexit 0\n",
            ["spurinv daemon.notice spurinv refresh · node n1", "spurinv daemon.notice exit 0"],
        ),
        (75, "spurinv: error: state lock held\n", []),  # lock held or backoff: silent
        (
            74,
            "spurinv: error: kfd failed\n",
            ["spurinv daemon.notice spurinv: error: kfd failed", "spurinv daemon.err spurinv refresh exited 74"],
        ),
    ],
)
def test_cron_command_logs_to_syslog_and_is_quiet_about_exit_75(tmp_path, code, output, expected):
    mailed = f"spurinv refresh exited {code}" if code not in (0, 75) else ""
    assert expected == run_cron_command(tmp_path, fake_spurinv(tmp_path, code, output), mailed=mailed)


@pytest.mark.parametrize("syslog", [True, False])
def test_a_failed_cron_run_leaves_a_trace_on_stderr_and_beside_the_state(tmp_path, syslog):
    """where /dev/log is absent logger drops everything; cron still mails stderr, and
    cron.log beside the state keeps the failure with its time and exit status."""
    spurinv = fake_spurinv(tmp_path, 78, "spurinv: error: /etc/spurinv/config.toml: controller.url: 5 is an integer\n")

    run_cron_command(tmp_path, spurinv, mailed="controller.url: 5 is an integer", syslog=syslog)

    log = (tmp_path / "state" / "cron.log").read_text().splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ spurinv refresh exited 78", log[0])
    assert "spurinv: error: /etc/spurinv/config.toml: controller.url: 5 is an integer" == log[1]
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o700


def test_cron_command_with_the_real_program_and_a_held_lock_is_silent(tmp_path):
    """The real spurinv, a lock held by another run: exit 75, nothing in syslog, nothing mailed."""
    state = tmp_path / "state" / "state.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)  # an explicit state path's directory exists
    settings = tmp_path / "config.toml"
    settings.write_text("[state]\nlock_timeout = 0\n")
    settings.chmod(0o600)
    holder = store.Lock(str(state), 0, "test")
    assert holder.try_acquire()
    try:
        extra = {"SPURINV_STATE": str(state), "SPURINV_CONFIG": str(settings)}
        assert [] == run_cron_command(tmp_path, str(SPURINV), extra)
        direct = subprocess.run(
            [str(SPURINV), "refresh", "--quiet"], env={**os.environ, **extra}, capture_output=True, text=True, check=False
        )
        assert exitcode.TEMPFAIL == direct.returncode  # so the silence above was the exit-75 branch
    finally:
        holder.release()
    assert stat.S_IMODE(os.stat(state.parent).st_mode) == 0o700
