"""Parsing and validating one CDI spec (JSON or YAML), for :mod:`spurinv.inventory.sources.cdi`.

Its own module: a tick whose specs are all in the CDI spec cache parses none, and did not need
to read this code in (~0.3 M instructions of a tick). The rules are the CDI spec's
(cncf-tags/container-device-interface SPEC.md and ``specs-go/version.go``).
"""

from spurinv import jsontext
from spurinv.inventory.sources.status import has_surrogate

VERSIONS = ((0, 3, 0), (1, 1, 0))
MAX_NAME = 255  # characters of a kind or a device name: each goes into the state file's readings
_DIGITS = frozenset("0123456789")
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_VENDOR_EDGE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def _word(text: str, edge: "frozenset[str]", inner: "frozenset[str]") -> bool:
    """``text`` is one ``[edge]([inner]*[edge])?`` (``edge`` within ``inner``)."""
    return bool(text) and text[0] in edge and text[-1] in edge and inner.issuperset(text)


def valid_kind(kind: str) -> bool:
    """``re.match(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$", kind)``
    (one final newline allowed, as ``$`` allows it), in str methods: the tick imports no ``re``."""
    parts = (kind[:-1] if kind.endswith("\n") else kind).split("/")
    return (
        len(parts) == 2
        and _word(parts[0], _VENDOR_EDGE, _VENDOR_EDGE | {".", "-"})
        and _word(parts[1], _ALNUM, _ALNUM | {"_", ".", "-"})
    )


def valid_name(name: str) -> bool:
    """``re.match(r"^[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?$", name)``, as :func:`valid_kind`."""
    return _word(name[:-1] if name.endswith("\n") else name, _ALNUM, _ALNUM | {"_", ".", ":", "-"})


def valid_version(version: str) -> bool:
    """``re.fullmatch(r"[0-9]{1,9}\\.[0-9]{1,9}\\.[0-9]{1,9}", version)``."""
    parts = version.split(".")
    return len(parts) == 3 and all(1 <= len(part) <= 9 and _DIGITS.issuperset(part) for part in parts)


class SpecError(Exception):
    """A CDI spec that cannot be used, with the reason."""


def parse_spec(text: str, yaml_format: bool) -> "list[tuple[str, str, list[str]]]":
    """Parse and validate one spec; return ``(kind, name, device node paths)`` per device."""
    if yaml_format:
        import yaml  # only when a YAML spec exists: importing it costs ~10 ms

        try:
            data = _load_yaml(text)
        except _AliasRefused as exc:
            raise SpecError(str(exc)) from None
        except yaml.YAMLError as exc:
            raise SpecError(f"invalid YAML: {str(exc).splitlines()[0]}") from None
        except (ValueError, RecursionError) as exc:  # PyYAML builds dates unguarded: 2001-02-30
            raise SpecError(f"invalid YAML: {type(exc).__name__}: {str(exc)[:80]}") from None
    else:
        try:
            data = jsontext.loads(text)
        except ValueError as exc:
            raise SpecError(f"invalid JSON: {exc}") from None
        except RecursionError:
            raise SpecError("invalid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise SpecError("not a mapping")
    if yaml_format or "\\u" in text:  # decoded UTF-8 JSON holds a lone surrogate only from a \u escape
        _refuse_surrogates(data)
    version = data.get("cdiVersion")
    if not isinstance(version, str) or not valid_version(version):
        raise SpecError(f"bad cdiVersion {_shown(version)}")
    number = tuple(int(p) for p in version.split("."))
    if not VERSIONS[0] <= number <= VERSIONS[1]:
        raise SpecError(f"unsupported cdiVersion {version}")
    kind = data.get("kind")
    if not isinstance(kind, str) or len(kind) > MAX_NAME or not valid_kind(kind):
        raise SpecError(f"bad kind {_shown(kind)} (expected vendor/class)")
    devices = data.get("devices")
    if not isinstance(devices, list) or not devices:
        raise SpecError("no devices")
    result = []
    seen = set()
    for position, device in enumerate(devices):
        name = device.get("name") if isinstance(device, dict) else None
        if not isinstance(name, str) or len(name) > MAX_NAME or not valid_name(name):
            raise SpecError(f"devices[{position}]: bad device name {_shown(name)}")
        if name in seen:
            raise SpecError(f"devices[{position}]: duplicate device name {_shown(name)}")
        seen.add(name)
        result.append((kind, name, _device_nodes(device.get("containerEdits"), position)))
    return result


def _refuse_surrogates(data: object) -> None:
    """A lone surrogate (``"\\ud800"`` is valid JSON; PyYAML's pure-Python scanner makes one of a
    ``\\ud800`` escape) is text no file, argv or terminal can hold: the spec is refused, not carried
    into the state file where it would fail the save (iterative: a deep spec costs no recursion)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_surrogate(item):
                raise SpecError("holds a lone surrogate escape (not valid Unicode text)")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _shown(value: object) -> str:
    """A value from the spec in a message: quoted, ASCII, bounded (no Python repr of bytes)."""
    if value is None or isinstance(value, (bool, int, float)):
        return "null" if value is None else f"of type {type(value).__name__}"
    if not isinstance(value, str):
        return f"of type {type(value).__name__}"
    return jsontext.dumps(value[:60] + ("..." if len(value) > 60 else ""))


class _AliasRefused(Exception):
    pass


def _load_yaml(text: str) -> object:
    """Safe YAML without aliases, with libyaml (PyYAML's C loader) where PyYAML has it.

    The C parser cannot be hooked where an alias is composed, so its events are read first, and
    a spec with an alias is refused before anything is built, in a twentieth of the pure-Python
    parser's time (bench/cdi.py); a spec without ``&`` has no anchor, so no alias: one pass.
    Without libyaml, the pure-Python loader refuses the alias where it meets it.
    """
    import yaml

    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None:
        return yaml.load(text, Loader=_loader())  # noqa: S506  (a SafeLoader that refuses aliases)
    if "&" not in text:  # no anchor, so no alias can resolve (an undefined one is a YAML error)
        return yaml.load(text, Loader=fast)  # noqa: S506  (CSafeLoader)
    for event in yaml.parse(text, Loader=fast):
        if isinstance(event, yaml.AliasEvent):
            raise _AliasRefused(f"YAML alias *{event.anchor} at line {_line(event)} refused (aliases are not expanded)")
    return yaml.load(text, Loader=fast)  # noqa: S506  (CSafeLoader: safe, and the text holds no alias)


def _line(event: object) -> int:
    mark = getattr(event, "start_mark", None)
    return int(mark.line) + 1 if mark is not None else 0


def _loader() -> "type":
    """``yaml.SafeLoader`` without aliases: an anchor reused 2,000 times in a 540 KB spec
    expanded to 40 M paths and 385 MB, past the unit's MemoryMax. CDI specs written
    by nvidia-ctk and the AMD tools use no anchors, so a spec with one is refused, not expanded."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        def compose_node(self, parent: "yaml.Node | None", index: int) -> "yaml.Node | None":
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise _AliasRefused(f"YAML alias *{event.anchor} at line {_line(event)} refused (aliases are not expanded)")
            return super().compose_node(parent, index)

    return NoAliases


def _device_nodes(edits: object, position: int) -> "list[str]":
    if edits is None:
        return []
    if not isinstance(edits, dict):
        raise SpecError(f"devices[{position}].containerEdits: not a mapping")
    nodes = edits.get("deviceNodes") or []
    if not isinstance(nodes, list):
        raise SpecError(f"devices[{position}].containerEdits.deviceNodes: not a list")
    paths = []
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("path"), str):
            raise SpecError(f"devices[{position}]: device node without a path")
        paths.append(node["path"])
        if isinstance(node.get("hostPath"), str):
            paths.append(node["hostPath"])
    return paths
