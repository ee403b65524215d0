"""CDI spec files (``etc/cdi``, ``var/run/cdi`` and extra directories from the config).

The qualified names here (``amd.com/gpu=0``, ``nvidia.com/gpu=GPU-…``) are what a container
runtime would inject. Problems with specs are *flags*, not errors: a stale or invalid spec does
not change the hardware, but the operator must hear about it. Validation follows the CDI spec
(cncf-tags/container-device-interface SPEC.md and ``specs-go/version.go``): ``cdiVersion`` from
0.3.0 to 1.1.0, ``kind`` ``vendor/class``, at least one device, valid unique device names.
Duplicate qualified names resolve as spur does: the later directory (higher priority) wins.
"""

import os
import stat

from spurinv import __version__, jsontext
from spurinv.inventory import root as places
from spurinv.inventory.fingerprint import sha256
from spurinv.inventory.sources.attribute import ReadError, decoded, read_bytes
from spurinv.inventory.sources.status import Report, has_surrogate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.root import Root

    class CdiDevice(TypedDict):
        qualified: str
        name: str
        kind: str
        nodes: list[str]
        file: str


# What one run reads of CDI specs at most. A real node has a few specs of some kB (nvidia-ctk's
# for one GPU is 13 kB; with MIG on eight, some hundred kB), a Kubernetes node perhaps a small
# transient spec per claim. YAML costs ~1 s of CPU a MiB even with libyaml (PyYAML builds the
# objects in Python; bench/cdi.py), so the bounds are what keeps discovery's cost bounded.
MAX_SPEC = 1 << 20
MAX_SPECS = 64
MAX_SPEC_BYTES = 2 << 20
# YAML costs 20-60 times JSON's CPU a byte (bench/cdi.py: 1 MiB is ~1 s with libyaml, ~6 s with
# the pure-Python parser), and discovery runs on every tick: YAML specs get their own budget, a
# quarter of it without libyaml. A YAML spec past it is flagged and skipped (JSON ones still read).
MAX_YAML_BYTES = 1 << 20
MAX_YAML_BYTES_PURE = 256 << 10
VERSIONS = ((0, 3, 0), (1, 1, 0))
MAX_NAME = 255  # characters of a kind or a device name: each goes into the state file's readings
SUFFIXES = (".json", ".yaml", ".yml")
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


def _libyaml() -> bool:
    """Does PyYAML have its C loader? (Importing yaml costs ~10 ms: only asked once a YAML spec is met.)"""
    import yaml

    return hasattr(yaml, "CSafeLoader")


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


class _Bounds:
    """What one run may read of CDI specs: MAX_SPECS files, MAX_SPEC_BYTES, and the YAML budget."""

    def __init__(self, report: "Report") -> None:
        self.report = report
        self.files = 0
        self.read = 0  # bytes of specs read or tried
        self.stopped = False
        self.yaml_read = 0
        self.yaml_budget = 0  # known once a YAML spec is met (importing yaml costs the tick ~10 ms)

    def admit(self, file_path: str, yaml_format: bool, size: int) -> bool:
        """May this spec of ``size`` bytes be read? Flags it when not."""
        if self.stopped:
            return False
        size = min(size, MAX_SPEC + 1)  # a larger one is refused after MAX_SPEC + 1 bytes
        if self.files >= MAX_SPECS or self.read + size > MAX_SPEC_BYTES:
            self.stopped = True
            self.report.flag(
                file_path,
                f"not read, nor any spec after it: {self.files} specs of {self.read} bytes were read "
                f"(at most {MAX_SPECS} specs and {MAX_SPEC_BYTES >> 20} MiB a run); remove stale ones",
            )
            return False
        if yaml_format and not self.yaml_budget and self.yaml_read + size > MAX_YAML_BYTES_PURE:
            # within the smaller budget, either answer admits it: a cached YAML spec imports no yaml
            self.yaml_budget = MAX_YAML_BYTES if _libyaml() else MAX_YAML_BYTES_PURE
        if yaml_format and self.yaml_read + size > (self.yaml_budget or MAX_YAML_BYTES_PURE):
            self.report.flag(
                file_path,
                f"YAML spec not read: {self.yaml_read} bytes of YAML were read, at most {self.yaml_budget >> 10} KiB "
                f"a run ({'with' if self.yaml_budget == MAX_YAML_BYTES else 'without'} libyaml); write large specs as JSON",
            )
            return False
        self.files += 1
        self.read += size
        if yaml_format:
            self.yaml_read += size
        return True


MAX_CACHE = 2 * MAX_SPEC_BYTES  # what the cache file may hold: a longer one is cut on reading, so its digest fails
# The cache's digest covers the version that wrote it: another release's parse may differ, so its
# cache is no cache here (every spec is parsed again once, and the file replaced).
_WRITER = f"spurinv {__version__} CDI spec cache\n".encode()
_HEX = b"0123456789abcdef"


class SpecCache:
    """What earlier runs parsed of CDI specs, by the SHA-256 of their bytes, for :func:`read_cdi`.

    ``known``: the entries as last written (``{path: [sha256 of the spec, kind, [[name, [node, …]],
    …]]}``); ``entries`` after a read: those of the specs it found, to write back when
    :attr:`changed`. A spec is read every run and taken from the cache only when its bytes hash
    to the digest kept: not by its inode, size or times, which a write through a shared mapping,
    an NFS attribute cache or a clock step can leave as they were while the bytes change. Only
    specs that parsed are kept: one with a problem is read again, and flagged again, every run.
    The text carries the SHA-256 of its JSON, so a damaged file (cut, torn, bit-flipped) is no
    cache; it does not stop an edit by whoever can write the state directory, who could as well
    edit the state file.
    """

    def __init__(self, known: object = None) -> None:
        self.known: dict[str, object] = known if isinstance(known, dict) else {}
        self.entries: dict[str, list[object]] = {}

    @classmethod
    def from_text(cls, data: "bytes | None") -> "SpecCache":
        """The cache in ``data`` (what :meth:`text` wrote), or an empty one."""
        digest, _newline, body = (data or b"")[:MAX_CACHE].partition(b"\n")
        if not body or sha256(_WRITER + body).hexdigest().encode() != digest:
            return cls()
        try:
            return cls(jsontext.loads(body))
        except (ValueError, RecursionError):
            return cls()

    @staticmethod
    def is_cache(data: bytes) -> bool:
        """Does ``data`` look like a cache file, whatever its state: a SHA-256 in hex on its own
        first line, then a JSON object (a damaged or another release's cache is still replaced;
        a TOML file, or a hex secret such as ``openssl rand -hex 32`` prints, never is)."""
        return data[64:66] == b"\n{" and not data[:64].strip(_HEX)

    @property
    def changed(self) -> bool:
        return self.entries != self.known

    def text(self) -> "bytes | None":
        """The file to write, or None when :meth:`from_text` would not read it back (too large)."""
        body = (jsontext.dumps(self.entries) + "\n").encode()
        text = sha256(_WRITER + body).hexdigest().encode() + b"\n" + body
        return text if len(text) <= MAX_CACHE else None

    def get(self, path: str, digest: str) -> "list[tuple[str, str, list[str]]] | None":
        """The devices of the spec at ``path`` if its bytes hash to ``digest`` as cached, else None."""
        entry = self.known.get(path)
        if not isinstance(entry, list) or len(entry) != 3 or entry[0] != digest or not _parsed(entry[1], entry[2]):
            return None
        self.entries[path] = entry
        kind = entry[1]
        return [(kind, name, nodes) for name, nodes in entry[2]]

    def put(self, path: str, digest: str, devices: "list[tuple[str, str, list[str]]]") -> None:
        """Keep what the spec whose bytes hash to ``digest`` parsed to."""
        self.entries[path] = [digest, devices[0][0], [[name, nodes] for _kind, name, nodes in devices]]


def _parsed(kind: object, devices: object) -> bool:
    """Is this what :meth:`SpecCache.put` keeps of a spec that parsed: a kind, and one or more
    ``[name, [node, …]]``, all text? Anything else is no entry (a hand edit), parsed again."""
    if not (isinstance(kind, str) and kind and isinstance(devices, list) and devices):
        return False
    for device in devices:  # a loop and map(), no generators: 66 devices and 386 nodes a tick
        if not (
            isinstance(device, list)
            and len(device) == 2
            and isinstance(device[0], str)
            and isinstance(device[1], list)
            and all(map(_IS_TEXT, device[1]))
        ):
            return False
    return True


_IS_TEXT = str.__instancecheck__  # isinstance(node, str), called from C by map()


def _devices(
    file_path: str, yaml_format: bool, report: "Report", cache: "SpecCache | None"
) -> "list[tuple[str, str, list[str]]] | None":
    """The spec's devices (from ``cache`` when its bytes are those parsed before), or None when it
    has a problem (flagged)."""
    try:
        data = read_bytes(file_path, MAX_SPEC)
    except ReadError as exc:
        report.flag(exc.path, exc.reason)
        return None
    digest = ""
    if cache is not None:
        digest = sha256(data).hexdigest()
        devices = cache.get(file_path, digest)
        if devices is not None:
            return devices
    try:
        devices = parse_spec(decoded(data, file_path), yaml_format)
    except ReadError as exc:
        report.flag(exc.path, exc.reason)
        return None
    except SpecError as exc:
        report.flag(file_path, str(exc))
        return None
    if cache is not None:
        cache.put(file_path, digest, devices)
    return devices


def read_cdi(
    root: "Root", report: "Report", extra_dirs: "tuple[str, ...]" = (), cache: "SpecCache | None" = None
) -> "list[CdiDevice]":
    """Return every valid CDI device, later directories overriding earlier ones; a spec in
    ``cache`` is not parsed again while its bytes are the same."""
    found: dict[str, CdiDevice] = {}
    directories = 0
    bounds = _Bounds(report)
    paths = root.resolver()
    for directory in (*places.CDI_DIRS, *(d.lstrip("/") for d in extra_dirs)):
        path = root.join(directory)
        try:  # var/run is a link to /run on most systems: resolved under the root, never out of it
            names = sorted(os.listdir(paths.resolve(path)))
        except FileNotFoundError:
            continue
        except OSError as exc:
            report.flag(path, exc.strerror or str(exc))
            continue
        directories += 1
        for name in names:
            if not name.endswith(SUFFIXES):
                continue
            file_path = os.path.join(path, name)
            try:
                info = os.lstat(file_path)
            except OSError:
                info = None
            if info is None or not stat.S_ISREG(info.st_mode):
                # spur's is_cdi_spec_file: only regular files are specs. Container runtimes read
                # symlinked specs, so one we skip must be heard of, not silently dropped.
                report.flag(file_path, "not a regular file (a symlink or a directory): ignored")
                continue
            yaml_format = not name.endswith(".json")
            if not bounds.admit(file_path, yaml_format, info.st_size):
                continue
            devices = _devices(file_path, yaml_format, report, cache)
            if devices is None:
                continue
            for kind, device_name, nodes in devices:
                qualified = f"{kind}={device_name}"
                if qualified in found:
                    report.flag(file_path, f"duplicate CDI device {qualified} (also in {found[qualified]['file']})")
                found[qualified] = {
                    "qualified": qualified,
                    "name": device_name,
                    "kind": kind,
                    "nodes": nodes,
                    "file": file_path,
                }
    if not directories:
        report.absent("no CDI spec directory")
    else:
        report.detail = f"{bounds.files} specs, {len(found)} devices"
    return list(found.values())
