"""Configuration: defaults < TOML file < command-line flags, each value remembering its origin.

The file is ``--config`` > ``$SPURINV_CONFIG`` > ``/etc/spurinv/config.toml``; a missing default
file means "all defaults" (observe mode), a missing explicit file is an error. Read with
``tomllib``, written by ``spurinv config init`` with ``tomli-w``. A group- or world-writable file
is refused: whoever can write it can point spurinv (and its token) at another controller.
"""

from __future__ import annotations

import os
import re
import tomllib
from typing import Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spurinv.errors import ConfigError
from spurinv.sources.pci import BDF

API = re.compile(r"^(auto|slurm/v0\.0\.\d{2}|api/v1)$")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeSection(_Section):
    name: str = Field("", description="Node name the controller knows; empty = the short hostname")


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
    transport: Literal["rest", "scontrol"] = Field(
        "rest", description='"rest" (slurmrestd or a REST gateway at url) or "scontrol" (Slurm\'s or spur\'s scontrol)'
    )
    scontrol: str = Field("", description='The scontrol program for transport = "scontrol"; empty = scontrol on PATH')
    register_command: tuple[str, ...] = Field(
        (), description='Command (argv, no shell) that re-registers the node, e.g. ["systemctl", "restart", "spurd"]'
    )
    register_timeout: float = Field(120.0, gt=0, le=600, description="Seconds register_command may run (then exit 69)")
    register_wait: float = Field(
        60.0, ge=0, le=600, description="Seconds to read back until the controller shows the new inventory"
    )

    @field_validator("api")
    @classmethod
    def _api(cls, value: str) -> str:
        if not API.match(value):
            raise ValueError('expected "auto", "slurm/v0.0.NN" or "api/v1"')
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
        for argument in value:
            if not argument or len(argument) > 4096 or any(ord(c) < 32 or c == "\x7f" for c in argument):
                raise ValueError(f"argument {argument[:40]!r} is empty, too long or holds control characters")
        if value:
            _program(value[0])
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("expected http://host[:port] or https://host[:port]")
        return value.rstrip("/")


def _program(value: str) -> str:
    """A program is an absolute path or a bare name looked up on PATH: a relative path would
    depend on the directory the timer happens to start in."""
    if "/" in value and not value.startswith("/"):
        raise ValueError(f"{value!r}: give an absolute path or a bare program name")
    if any(ord(c) < 32 or c == "\x7f" for c in value) or value.strip() != value:
        raise ValueError(f"{value!r} holds whitespace or control characters")
    return value


class DiscoverySection(_Section):
    cdi_dirs: tuple[str, ...] = Field((), description="Extra CDI spec directories (after /etc/cdi and /var/run/cdi)")
    ignore_pci: tuple[str, ...] = Field((), description="PCI functions to leave out, e.g. GPUs passed to VMs")

    @field_validator("ignore_pci")
    @classmethod
    def _bdfs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not BDF.match(item):
                raise ValueError(f"{item!r} is not a PCI address like 0000:05:00.0")
        return value


class PolicySection(_Section):
    confirm_interval: float = Field(3.0, ge=0, le=300, description="Seconds before a first sighting is re-read; 0 = next tick")
    drain_on_suspicious: bool = Field(False, description="Drain (never re-register) on a suspicious reading")
    backoff_initial: int = Field(60, ge=1, description="Seconds of backoff after the first controller error")
    backoff_max: int = Field(3600, ge=1, description="Upper bound of the backoff, in seconds")


class StateSection(_Section):
    lock_timeout: float = Field(10.0, ge=0, le=3600, description="Seconds to wait for another run's state lock")


class MetricsSection(_Section):
    file: str = Field("", description="node_exporter textfile-collector file to write; empty = none")


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

    def node_name(self, hostname: str) -> str:
        """The configured node name, else the short hostname."""
        return self.node.name or hostname.split(".", maxsplit=1)[0]


SECTIONS: dict[str, type[_Section]] = {
    name: info.annotation  # type: ignore[misc]
    for name, info in Config.model_fields.items()
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
    mask = 0o077 if readable else 0o022
    if info.st_mode & mask:
        kind = "readable or writable" if readable else "writable"
        raise error(f"{what} {path} is group- or world-{kind} (mode {info.st_mode & 0o777:o}); chmod go-rwx it")
    return info


def load(path: str, explicit: bool, overrides: dict[str, Any] | None = None) -> tuple[Config, dict[str, str]]:
    """Read the config file and apply ``overrides`` (``{"controller.url": ...}`` from flags).

    Returns the config and, for every key, where its value came from.
    """
    origins = dict.fromkeys(keys(), "default")
    raw: dict[str, Any] = {}
    if os.path.exists(path) or explicit:
        check_private(path, "config file", ConfigError, readable=False)
        try:
            with open(path, "rb") as handle:
                raw = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: {exc.strerror}") from None
        for section, values in raw.items():
            if isinstance(values, dict):
                for key in values:
                    origins[f"{section}.{key}"] = path
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".")
        raw.setdefault(section, {})[key] = value
        origins[dotted] = "command line"
    try:
        return Config.model_validate(raw), origins
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        source = "command line" if origins.get(where) == "command line" else path
        raise ConfigError(f"{source}: {where}: {first['msg']}") from None


def render_default() -> str:
    """A commented default config file (values written by tomli-w)."""
    lines = ["# spurinv configuration. Every key is optional; shown with its default.", ""]
    defaults = Config()
    for section, model in SECTIONS.items():
        lines.append(f"[{section}]")
        values = getattr(defaults, section)
        for key, info in model.model_fields.items():
            lines.append(f"# {info.description}")
            value = getattr(values, key)
            if isinstance(value, tuple):
                value = list(value)
            lines.append(tomli_w.dumps({key: value}).strip())
        lines.append("")
    return "\n".join(lines)


def read_token(section: ControllerSection, environ: dict[str, str]) -> str | None:
    """The controller token: the systemd credential if present, else ``token_file``.

    Refused when the file is group- or world-readable; never logged, never put in argv.
    """
    from spurinv.errors import TokenError

    if section.auth == "none":
        return None
    credentials = environ.get("CREDENTIALS_DIRECTORY")
    path = os.path.join(credentials, section.credential) if credentials else ""
    if not (path and os.path.exists(path)):
        path = section.token_file
    if not path:
        raise TokenError(f"controller.auth is {section.auth!r} but there is no token: set controller.token_file")
    check_private(path, "token file", TokenError, readable=True)
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read(65536).strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"token file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise TokenError(f"token file {path} is empty")
    if token.startswith("SLURM_JWT="):  # the form `scontrol token` prints
        token = token.removeprefix("SLURM_JWT=")
    return token
