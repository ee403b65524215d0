"""Configuration: defaults < TOML file < command-line flags, each value remembering its origin.

The file is ``--config`` > ``$SPURINV_CONFIG`` > ``/etc/spurinv/config.toml``; a missing default
file means "all defaults" (observe mode), a missing explicit file is an error. Read with
``tomllib``, written by ``spurinv config init`` with ``tomli-w``. A group- or world-writable file
is refused: whoever can write it can point spurinv (and its token) at another controller.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spurinv import nodename, regularfile
from spurinv.errors import ConfigError, UsageError
from spurinv.inventory.sources.attribute import is_bdf
from spurinv.secret import blank_argv

API = re.compile(r"^(auto|slurm/v0\.0\.\d{2}|api/v1)$")
SCONTROL_ALL = 'is not a node for controller.transport = "scontrol": scontrol reads ALL, in any case, as every node'
# Every number in the file is bounded (a 10^12 s backoff passed validation, then
# overflowed the clock arithmetic and lost the pending reading): waits at most 600 s
# (controller.timeout 120 s), backoff at most 7 days, confirm_interval at most 300 s; no inf/nan.
MAX_TIMEOUT = 600.0
MAX_BACKOFF = 7 * 24 * 3600
MAX_CONFIG = 1 << 20  # a config file is a few hundred bytes
MAX_TOKEN = 65536


class _Section(BaseModel):
    # strict: TOML has types, so `timeout = "5"` or `verify = "off"` is a mistake to report (78),
    # not a value to coerce ("off" is not even false to pydantic's lax mode: it is one of its
    # spellings of False). Arrays stay lax only so TOML's lists may fill the tuples.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)


class NodeSection(_Section):
    name: str = Field("", description="Node name the controller knows; empty = the short hostname")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if value and not nodename.valid(value):
            raise ValueError(f"{value[:80]!r} is not a node name ({nodename.RULE})")
        return value


class ControllerSection(_Section):
    url: str = Field("", description="REST gateway base URL, e.g. https://slurmrestd:6820; empty = observe mode")
    api: str = Field("auto", description='"auto" (detect and cache) or a version such as "slurm/v0.0.42"')
    auth: Literal["none", "slurm-jwt", "bearer"] = Field("none", description="none, slurm-jwt (X-SLURM-USER-*) or bearer")
    user: str = Field("root", description="X-SLURM-USER-NAME for slurm-jwt (an admin or SlurmUser)")
    token_file: str = Field("", description="File holding the token (mode 0600 or stricter)")
    credential: str = Field("spurinv-token", description="Name of the systemd credential ($CREDENTIALS_DIRECTORY)")
    ca_file: str = Field("", description="CA bundle for TLS verification; empty = system store")
    verify: bool = Field(True, description="Verify the controller's TLS certificate")
    timeout: float = Field(5.0, gt=0, le=120, description="Seconds allowed per request (connect, read, whole body)")
    allow_plain_http_token: bool = Field(False, description="Send the token over plain HTTP to a non-loopback host")
    run_deadline: float = Field(
        60.0,
        gt=0,
        le=120,
        description="Seconds a whole run may take; no request starts after it (then exit 75, state saved; not in a dry run)",
    )
    busy_recheck: int = Field(
        300, ge=60, le=86400, description="Least seconds between all-nodes queries confirming a busy node (jittered per node)"
    )
    transport: Literal["rest", "scontrol"] = Field(
        "rest", description='"rest" (slurmrestd or a REST gateway at url) or "scontrol" (Slurm\'s or spur\'s scontrol)'
    )
    scontrol: str = Field("", description='The scontrol program for transport = "scontrol"; empty = scontrol on PATH')
    register_command: tuple[str, ...] = Field(
        (),
        strict=False,
        description='Command (argv, no shell) that re-registers the node, e.g. ["systemctl", "restart", "spurd"]; '
        "run only when no job at all runs on the node",
    )
    register_timeout: float = Field(
        120.0, gt=0, le=600, description="Seconds register_command may run, never past run_deadline (then killed: exit 69)"
    )
    register_wait: float = Field(
        60.0, ge=0, le=600, description="Seconds to read back until the controller shows the new inventory"
    )

    @field_validator("api")
    @classmethod
    def _api(cls, value: str) -> str:
        if not API.match(value):
            raise ValueError('expected "auto", "slurm/v0.0.NN" or "api/v1"')
        return value

    @field_validator("credential")
    @classmethod
    def _credential(cls, value: str) -> str:
        # joined to $CREDENTIALS_DIRECTORY: "../../etc/x" or "/etc/x" would read a file outside it
        if value.startswith("/") or not value.strip(". /") or ".." in value.split("/"):
            raise ValueError('expected a credential name inside $CREDENTIALS_DIRECTORY (no ".." component, not absolute)')
        return value

    @field_validator("scontrol")
    @classmethod
    def _scontrol(cls, value: str) -> str:
        return _program(value) if value else value

    @field_validator("register_command")
    @classmethod
    def _register_command(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > 64:
            raise ValueError("at most 64 arguments")
        for number, argument in enumerate(value, 1):
            if not argument or len(argument) > 4096 or any(ord(c) < 32 or c == "\x7f" for c in argument):
                # named by position: the argument itself may be a credential with a stray newline
                raise ValueError(f"argument {number} is empty, too long or holds control characters")
        if value:
            _program(value[0])
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("expected http://host[:port] or https://host[:port]")
        if value:
            from urllib.parse import urlsplit

            parts = urlsplit(value)
            if "@" in parts.netloc:  # requests would send it as Basic auth, plain HTTP included
                raise ValueError("expected no user or password in the URL (the token goes in controller.token_file)")
            try:
                port = parts.port  # ValueError beyond 65535
            except ValueError:
                port = 0
            if port == 0:
                raise ValueError("expected http://host[:port] or https://host[:port] with a port from 1 to 65535")
            if parts.path.strip("/") or parts.query or parts.fragment:
                # spurinv adds /slurm/v0.0.NN/... itself (controller.api picks the version): a
                # path here would be requested as .../slurm/v0.0.42/slurm/v0.0.42/node/x
                got = [f"path {parts.path[:40]!r}"] if parts.path.strip("/") else []
                got += [f"query {parts.query[:40]!r}"] if parts.query else []
                got += [f"fragment {parts.fragment[:40]!r}"] if parts.fragment else []
                raise ValueError(
                    f"expected http://host[:port] or https://host[:port] without a path, query or fragment "
                    f"(got {', '.join(got)}); set the version with controller.api"
                )
        return value.rstrip("/")

    @field_validator("token_file", "ca_file")
    @classmethod
    def _absolute(cls, value: str) -> str:
        return _absolute_path(value)


def _absolute_path(value: str) -> str:
    """A file the service reads: an absolute path, or empty. A relative one would be resolved
    against whatever directory the timer, cron or an operator's shell happens to start in."""
    if value and not value.startswith("/"):
        raise ValueError(f"{value[:80]!r} is a relative path; give an absolute path")
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise ValueError("holds control characters")
    return value


def _program(value: str) -> str:
    """A program is an absolute path or a bare name looked up on PATH: a relative path would
    depend on the directory the timer happens to start in."""
    if "/" in value and not value.startswith("/"):
        raise ValueError(f"{value!r}: give an absolute path or a bare program name")
    if any(ord(c) < 32 or c == "\x7f" for c in value) or value.strip() != value:
        raise ValueError(f"{value!r} holds whitespace or control characters")
    return value


class DiscoverySection(_Section):
    cdi_dirs: tuple[str, ...] = Field(
        (), strict=False, description="Extra CDI spec directories (after /etc/cdi and /var/run/cdi)"
    )
    ignore_pci: tuple[str, ...] = Field((), strict=False, description="PCI functions to leave out, e.g. GPUs passed to VMs")

    @field_validator("ignore_pci")
    @classmethod
    def _bdfs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not is_bdf(item):
                raise ValueError(f"expected PCI addresses like 0000:05:00.0 ({item!r} is not one)")
        return value

    @field_validator("cdi_dirs")
    @classmethod
    def _dirs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            _absolute_path(item)
        return value


class PolicySection(_Section):
    confirm_interval: float = Field(3.0, ge=0, le=300, description="Seconds before a first sighting is re-read; 0 = next tick")
    drain_on_suspicious: bool = Field(False, description="Drain (never re-register) on a suspicious reading")
    backoff_initial: int = Field(60, ge=1, le=MAX_BACKOFF, description="Seconds of backoff after the first controller error")
    backoff_max: int = Field(3600, ge=1, le=MAX_BACKOFF, description="Upper bound of the backoff, in seconds")
    switch_timeout: int = Field(
        600, ge=0, le=3600, description="Seconds a partition switch may stay in progress before it counts as a failure"
    )
    drain_on_degraded_link: bool = Field(False, description="Drain the node while a GPU's PCIe link is narrower than it can be")


class StateSection(_Section):
    lock_timeout: float = Field(10.0, ge=0, le=MAX_TIMEOUT, description="Seconds to wait for another run's state lock")


class MetricsSection(_Section):
    file: str = Field("", description="node_exporter textfile-collector file to write; empty = none")

    @field_validator("file")
    @classmethod
    def _file(cls, value: str) -> str:
        return _absolute_path(value)


class Config(_Section):
    node: NodeSection = NodeSection()
    controller: ControllerSection = ControllerSection()
    discovery: DiscoverySection = DiscoverySection()
    policy: PolicySection = PolicySection()
    state: StateSection = StateSection()
    metrics: MetricsSection = MetricsSection()

    @property
    def observe(self) -> bool:
        """No controller configured: discover, confirm and record, but send nothing.

        ``transport = "scontrol"`` needs no URL: it is a controller configuration.
        """
        return self.controller.transport == "rest" and not self.controller.url

    def shown(self) -> dict[str, dict[str, Any]]:
        """The values as ``config show`` prints them: ``register_command``'s credentials blanked
        (its output gets pasted into tickets)."""
        values = self.model_dump()
        values["controller"]["register_command"] = tuple(blank_argv(self.controller.register_command))
        return values

    def node_name(self, hostname: str) -> str:
        """The configured node name, else the short hostname (which must be a valid name too)."""
        name = self.node.name or hostname.split(".", maxsplit=1)[0]
        if not nodename.valid(name):
            raise ConfigError(f"the hostname {name[:80]!r} is not a node name ({nodename.RULE}); set node.name")
        if self.misread(name):
            raise ConfigError(f"the hostname {name!r} {SCONTROL_ALL}; set node.name")
        return name

    def misread(self, name: str) -> bool:
        """Would the transport take ``name`` for something other than one node? ``scontrol``
        reads ``ALL`` (any case) as every node; the REST API has no such word."""
        return self.controller.transport == "scontrol" and nodename.every_node(name)


SECTIONS: dict[str, type[_Section]] = {
    name: info.annotation
    for name, info in Config.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, _Section)
}


def keys() -> list[str]:
    """Every ``section.key`` the file understands, in documentation order."""
    return [f"{section}.{key}" for section, model in SECTIONS.items() for key in model.model_fields]


def check_private(path: str, what: str, error: type[Exception], *, readable: bool) -> os.stat_result:
    """Refuse a file others could write (or, with ``readable``, read); return its stat."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror}") from None
    _check_mode(path, info, what, error, readable=readable)
    return info


def _check_mode(path: str, info: os.stat_result, what: str, error: type[Exception], *, readable: bool) -> None:
    mask = 0o077 if readable else 0o022
    if info.st_mode & mask:
        kind = "readable or writable" if readable else "writable"
        raise error(f"{what} {path} is group- or world-{kind} (mode {info.st_mode & 0o777:o}); chmod go-rwx it")


def read_private(path: str, what: str, error: type[Exception], *, readable: bool, limit: int) -> str:
    """Read a config or token file as UTF-8 text: a regular file (never a FIFO, which would hang
    the run, nor a symlink), not writable (``readable``: not readable) by others, at most ``limit``
    bytes. Every problem is ``error`` naming the file."""
    try:
        fd = regularfile.open_fd(path)
    except regularfile.Refused as exc:
        raise error(f"{what} {exc}") from None
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror}") from None
    try:
        _check_mode(path, os.fstat(fd), what, error, readable=readable)
        data = b""
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data) or 1)):
            data += chunk
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{what} {path} is larger than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def load(
    path: str, explicit: bool, overrides: dict[str, Any] | None = None, flags: dict[str, str] | None = None
) -> tuple[Config, dict[str, str]]:
    """Read the config file and apply ``overrides`` (``{"controller.url": ...}`` from flags).

    Returns the config and, for every key, where its value came from. Every invalid value is
    reported at once, one line each, naming the file or (``flags``: key -> flag) the flag; only
    bad flags: :class:`UsageError` (64), anything wrong in the file: :class:`ConfigError` (78).
    """
    origins = dict.fromkeys(keys(), "default")
    raw: dict[str, Any] = {}
    if os.path.lexists(path) or explicit:
        text = read_private(path, "config file", ConfigError, readable=False, limit=MAX_CONFIG)
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        except RecursionError:  # an array or inline table nested thousands deep
            raise ConfigError(f"{path}: arrays or tables nested too deep to read") from None
        for section, values in raw.items():
            if isinstance(values, dict):
                for key in values:
                    origins[f"{section}.{key}"] = path
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".")
        raw.setdefault(section, {})[key] = value
        origins[dotted] = "command line"
    try:
        loaded = Config.model_validate(raw)
    except ValidationError as exc:
        from spurinv.config.problem import Problems

        found = Problems(Config, path, origins, flags or {}).lines(exc)
        message = "\n".join(line for _origin, line in found)
        if all(origin == "command line" for origin, _line in found):
            raise UsageError(message) from None
        raise ConfigError(message) from None
    if loaded.misread(loaded.node.name):  # refused before a run writes anything, not at its first controller call
        if origins["node.name"] == "command line":
            where = (flags or {}).get("node.name", "command line")
            raise UsageError(f"{where}: node.name: {json.dumps(loaded.node.name)} {SCONTROL_ALL}")
        raise ConfigError(f"{path}: node.name: {json.dumps(loaded.node.name)} {SCONTROL_ALL}")
    return loaded, origins


def render_default() -> str:
    """The template ``config init`` writes: every key commented out with its default (as
    sshd_config does), so the file documents the defaults without setting any of them."""
    lines = [
        "# spurinv configuration (TOML). Every key is optional; each is shown commented out with",
        "# its default. Uncomment a line to change it; `spurinv config show` prints what is in force.",
        "",
    ]
    defaults = Config()
    for section, model in SECTIONS.items():
        lines.append(f"[{section}]")
        values = getattr(defaults, section)
        for key, info in model.model_fields.items():
            lines.append(f"# {info.description}")
            lines.append("#" + _toml_line(key, getattr(values, key)))
        lines.append("")
    return "\n".join(lines)


def _toml_line(key: str, value: Any) -> str:
    return tomli_w.dumps({key: list(value) if isinstance(value, tuple) else value}).strip()


def render_show(loaded: Config, origins: dict[str, str], path: str, found: bool) -> str:
    """``config show``: the effective configuration as TOML, each key's origin as a comment."""
    head = f"# read {path}" if found else f"# {path} does not exist: every value is a default or a flag"
    lines = [head]
    for section, values in loaded.shown().items():
        lines.extend(["", f"[{section}]"])
        body = [(_toml_line(key, value), origins.get(f"{section}.{key}", "default")) for key, value in values.items()]
        width = max((len(text) for text, _origin in body if len(text) <= 48), default=0)  # a long value: no padding
        lines.extend(f"{text:<{width}}  # {origin}" for text, origin in body)
    return "\n".join(lines) + "\n"


def read_token(section: ControllerSection, environ: dict[str, str]) -> str | None:
    """The controller token: the systemd credential if present, else ``token_file``.

    Refused when the file is group- or world-readable; never logged, never put in argv.
    """
    from spurinv.errors import TokenError

    if section.auth == "none":
        return None
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    path = os.path.join(credentials, section.credential) if credentials else ""
    key = f"controller.credential ({section.credential!r} in $CREDENTIALS_DIRECTORY)"
    if not (path and os.path.exists(path)):
        path, key = section.token_file, "controller.token_file"
    if not path:
        raise TokenError(
            f"controller.auth is {section.auth!r} but there is no token: set controller.token_file "
            '(e.g. "/etc/spurinv/token", mode 0600), or controller.auth = "none"'
        )
    fix = f"put the controller's token (`scontrol token`) in {path}, owned by root, mode 0600, or change {key}"
    try:
        token = read_private(path, "token file", TokenError, readable=True, limit=MAX_TOKEN).strip()
    except TokenError as exc:
        raise TokenError(f"{key}: {exc.message}; {fix}") from None
    if not token:
        raise TokenError(f"{key}: token file {path} is empty; {fix}")
    if token.startswith("SLURM_JWT="):  # the form `scontrol token` prints
        token = token.removeprefix("SLURM_JWT=").strip()
        if not token:  # `SLURM_JWT=` alone would send every request without authentication
            raise TokenError(f"{key}: token file {path} holds an empty SLURM_JWT=; {fix}")
    if "\n" in token or "\r" in token:
        raise TokenError(f"{key}: token file {path} holds more than one line; {fix}")
    return token
