"""CDI spec files (``etc/cdi``, ``var/run/cdi`` and extra directories from the config).

The qualified names here (``amd.com/gpu=0``, ``nvidia.com/gpu=GPU-…``) are what a container
runtime would inject. Problems with specs are *flags*, not errors: a stale or invalid spec does
not change the hardware, but the operator must hear about it. Validation follows the CDI spec
(cncf-tags/container-device-interface SPEC.md and ``specs-go/version.go``): ``cdiVersion`` from
0.3.0 to 1.1.0, ``kind`` ``vendor/class``, at least one device, valid unique device names
(:mod:`spurinv.inventory.sources.cdispec`, for a spec the cache does not hold).
Duplicate qualified names resolve as spur does: the later directory (higher priority) wins.
"""

import os
import stat

from spurinv import __version__, jsontext
from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import ReadError, decoded, read_bytes
from spurinv.inventory.sources.status import Report
from spurinv.shape import counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import blake2b
else:
    # BLAKE2b, not SHA-256: a third of the instructions a byte in CPython's own modules (a tick
    # hashes every spec, some 39 kB on a 64-partition node, and the cache's text), and as
    # collision-resistant. The interpreter's module, as for the fingerprint's SHA-256: hashlib
    # would load OpenSSL.
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
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
SUFFIXES = (".json", ".yaml", ".yml")


def _libyaml() -> bool:
    """Does PyYAML have its C loader? (Importing yaml costs ~10 ms: only asked once a YAML spec is met.)"""
    import yaml

    return hasattr(yaml, "CSafeLoader")


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
                f"not read, nor any spec after it: {counted(self.files, 'spec')} of {self.read} bytes were read "
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


def digest_of(data: bytes) -> str:
    """The 32-byte BLAKE2b of ``data`` in hex: 64 characters, as the cache keeps a spec's and its own."""
    return blake2b(data, digest_size=32).hexdigest()


class SpecCache:
    """What earlier runs parsed of CDI specs, by the BLAKE2b of their bytes, for :func:`read_cdi`.

    ``known``: the entries as last written (``{path: [digest_of(the spec), kind, [[name, [node, …]],
    …]]}``); ``entries`` after a read: those of the specs it found, to write back when
    :attr:`changed`. A spec is read every run and taken from the cache only when its bytes hash
    to the digest kept: not by its inode, size or times, which a write through a shared mapping,
    an NFS attribute cache or a clock step can leave as they were while the bytes change. Only
    specs that parsed are kept: one with a problem is read again, and flagged again, every run.
    The text carries the BLAKE2b of its JSON, so a damaged file (cut, torn, bit-flipped) is no
    cache; it does not stop an edit by whoever can write the state directory, who could as well
    edit the state file.
    """

    def __init__(self, known: object = None, stale: bool = False) -> None:
        self.known: dict[str, object] = known if isinstance(known, dict) else {}
        self.entries: dict[str, list[object]] = {}
        # a file was read that is no cache of this release (another release's, damaged): it is
        # replaced even when no spec is left to keep, or it would outlive every spec
        self.stale = stale

    @classmethod
    def from_text(cls, data: "bytes | None") -> "SpecCache":
        """The cache in ``data`` (what :meth:`text` wrote), or an empty one (:attr:`stale` when
        ``data`` held something else)."""
        digest, _newline, body = (data or b"")[:MAX_CACHE].partition(b"\n")
        if not body or digest_of(_WRITER + body).encode() != digest:
            return cls(stale=bool(data))
        try:
            return cls(jsontext.loads(body))
        except (ValueError, RecursionError):
            return cls(stale=True)

    @staticmethod
    def is_cache(data: bytes) -> bool:
        """Does ``data`` look like a cache file, whatever its state: a 32-byte digest in hex on its own
        first line, then a JSON object (a damaged or another release's cache is still replaced;
        a TOML file, or a hex secret such as ``openssl rand -hex 32`` prints, never is)."""
        return data[64:66] == b"\n{" and not data[:64].strip(_HEX)

    @property
    def changed(self) -> bool:
        return self.stale or self.entries != self.known

    def text(self) -> "bytes | None":
        """The file to write, or None when :meth:`from_text` would not read it back (too large)."""
        body = (jsontext.dumps(self.entries) + "\n").encode()
        text = digest_of(_WRITER + body).encode() + b"\n" + body
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
    key = ""
    if cache is not None:
        key = digest_of(data)
        devices = cache.get(file_path, key)
        if devices is not None:
            return devices
    from spurinv.inventory.sources.cdispec import SpecError, parse_spec  # only for a spec not in the cache

    try:
        devices = parse_spec(decoded(data, file_path), yaml_format)
    except ReadError as exc:
        report.flag(exc.path, exc.reason)
        return None
    except SpecError as exc:
        report.flag(file_path, str(exc))
        return None
    if cache is not None:
        cache.put(file_path, key, devices)
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
        report.detail = f"{counted(bounds.files, 'spec')}, {counted(len(found), 'device')}"
    return list(found.values())
