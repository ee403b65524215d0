"""The filesystem root every source reads under (procfs's ``FS`` idea).

``--root`` defaults to ``/``; tests, benchmarks and containers that mount the host at ``/host``
pass another directory. Every path spurinv reads is built here, so nothing else in the code
names ``/sys`` or ``/proc``. Stdlib only: this is on the timer's hot path.
"""

import os

# Relative to the root. The KFD path is the one libhsakmt reads (/sys/class/kfd/kfd/topology,
# a symlink to /sys/devices/virtual/kfd/kfd/topology on real kernels).
PCI_DEVICES = "sys/bus/pci/devices"
PCI_BUS = "sys/bus/pci"
DRM_CLASS = "sys/class/drm"
KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
KFD_CLASS = "sys/class/kfd"
CPU_ONLINE = "sys/devices/system/cpu/online"
NUMA_NODES = "sys/devices/system/node"
SYS = "sys"
MEMINFO = "proc/meminfo"
CPUINFO = "proc/cpuinfo"
BOOT_ID = "proc/sys/kernel/random/boot_id"  # a new random UUID at every boot (proc(5))
NVIDIA_GPUS = "proc/driver/nvidia/gpus"
NVIDIA_ABSENT = "NVIDIA driver not loaded"  # NVIDIA_GPUS missing: what discovery says without its reader
NVIDIA_CAPABILITIES = "proc/driver/nvidia/capabilities"  # MIG: gpu<minor>/mig/gi<G>/ci<C>/access
NVIDIA_MIG_MINORS = "proc/driver/nvidia-caps/mig-minors"  # the driver's static minor table
CDI_DIRS = ("etc/cdi", "var/run/cdi")  # the CDI spec's default directories, in priority order
# Not under the root: the state lock is this machine's, and so is the process holding it.
PROCESS_COMMAND_LINE = "/proc/{pid}/cmdline"


class RootError(Exception):
    """The root itself is unusable (missing, not a directory)."""


class Root:
    """A node's filesystem root; turns relative paths into paths on disk."""

    __slots__ = ("path",)

    def __init__(self, path: str = "/") -> None:
        full = os.path.abspath(path)
        if not os.path.isdir(full):
            raise RootError(f"--root {path}: not a directory")
        self.path = full

    def __repr__(self) -> str:
        return f"Root({self.path!r})"

    def join(self, *parts: str) -> str:
        """Return the on-disk path of ``parts`` (relative to the root)."""
        return os.path.join(self.path, *parts)

    def resolver(self) -> "RealPaths":
        """A symlink resolver for one walk under this root (see :class:`RealPaths`)."""
        return RealPaths(self)

    def host_path(self, on_disk: str) -> str:
        """Return ``on_disk`` as the node would name it (``/sys/...``), for messages and CDI."""
        rel = os.path.relpath(on_disk, self.path)
        return "/" + rel if not rel.startswith("..") else on_disk


class RealPaths:
    """Resolve symlinks for many paths under one root, remembering what it already resolved.

    A result outside the root is refused: sysfs links are relative, so they stay inside a root
    mounted anywhere; a link that escapes (absolute, or planted) would make us read another
    machine's view.

    Each DRM node's ``device`` link leads through the same dozen sysfs directories, and
    ``os.path.realpath`` lstat()s every one of them again on every call: that was 70 %
    of discovery on a 1024-device root (profiled). This is CPython's non-strict
    algorithm (``posixpath._joinrealpath``) with its per-call table of resolved links kept for
    the whole walk, plus the components known not to be links, so a path costs only the system
    calls of components not seen before. The answers are realpath's as long as the tree does not
    change during one discovery; a node torn down meanwhile fails a later read instead.
    """

    __slots__ = ("base", "inside", "links", "plain")

    def __init__(self, root: "Root") -> None:
        self.links: dict[str, str | None] = {}  # symlink → its resolution (None while resolving)
        self.plain: set[str] = set()  # paths known not to be symlinks (or not to exist)
        self.base = self.realpath(root.path)
        self.inside = self.base.rstrip("/") + "/"  # what a path under the root starts with

    def resolve(self, path: str) -> str:
        """Resolve symlinks in ``path``; refuse a result outside the root."""
        return self._within(self.realpath(path))

    def _within(self, real: str) -> str:
        if real != self.base and not real.startswith(self.inside):
            raise OSError(f"symlink leaves the root ({real})")
        return real

    def directory(self, path: str) -> "str | None":
        """``resolve(path)`` when it leads to a directory, proven so by the same three system calls
        (:func:`_kernel_path` with ``O_DIRECTORY``): an ``os.path.isdir`` of the answer would say
        True, and a walk that needs a directory makes no fourth (one for each of ~65 DRM devices
        a tick). None when it cannot tell so (not a directory, missing, a loop): then the caller
        asks ``resolve`` and ``isdir``. A directory outside the root is refused as ``resolve``
        refuses it."""
        real = _kernel_path(path, _O_DIRECTORY) if _O_DIRECTORY else None
        return None if real is None else self._within(real)

    def resolve_proven(self, path: str) -> "tuple[str, bool]":
        """``resolve(path)``, and whether the resolution itself proved it a directory
        (:meth:`directory`): then the walk needs no ``isdir`` of it."""
        real = self.directory(path)
        return (real, True) if real is not None else (self.resolve(path), False)

    def realpath(self, path: str) -> str:
        """``os.path.realpath(path)``."""
        known = _kernel_path(path)
        if known is not None:
            return known
        return os.path.abspath(self._join("", path)[0])

    def _join(self, path: str, rest: str) -> "tuple[str, bool]":
        # posixpath.join and split are spelled out (`name` never contains a slash): the calls
        # were half of what remained.
        if rest.startswith("/"):
            path, rest = "/", rest[1:]
        while rest:
            name, _, rest = rest.partition("/")
            if not name or name == ".":
                continue
            if name == "..":
                if path:
                    cut = path.rfind("/") + 1
                    head, name = path[:cut], path[cut:]
                    path = head.rstrip("/") or head  # os.path.split, spelled out
                    if name == "..":
                        path = os.path.join(path, "..", "..")
                else:
                    path = ".."
                continue
            newpath = path + name if not path or path.endswith("/") else f"{path}/{name}"
            if newpath in self.plain:
                path = newpath
                continue
            if newpath in self.links:
                known = self.links[newpath]
                if known is None:
                    return os.path.join(newpath, rest), False  # a symlink loop: realpath gives up here
                path = known
                continue
            try:
                target = os.readlink(newpath)  # realpath lstat()s first; EINVAL says "not a link" as well
            except OSError:  # not a link, or not there: realpath (non-strict) carries on with the name
                self.plain.add(newpath)
                path = newpath
                continue
            self.links[newpath] = None
            ok = False
            try:
                path, ok = self._join(path, target)
            finally:
                if ok:
                    self.links[newpath] = path
                else:  # a loop or an error is not remembered: the next call retries, as realpath would
                    del self.links[newpath]
            if not ok:
                return os.path.join(path, rest), False
        return path, True


_O_PATH = getattr(os, "O_PATH", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _kernel_path(path: str, flags: int = 0) -> "str | None":
    """The kernel's resolution of ``path`` when every component exists: open it with ``O_PATH``
    (nothing is read, a FIFO does not block) and read the name of the descriptor back, three
    system calls where the walk makes one per new component, and no Python loop (half of the
    DRM reading of a 64-partition node). That name is realpath's answer for a path that exists:
    both follow every link, absolute targets from ``/`` and ``..`` from the physical parent.
    None, and the walk decides, for anything else: a missing component, a loop, a file where a
    directory should be, no ``/proc``, a name that is no absolute path or was deleted meanwhile.
    ``flags``: ``O_DIRECTORY`` also asks that it lead to a directory (None for anything else)."""
    if not _O_PATH:
        return None
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC | flags)
    except OSError:
        return None
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    finally:
        os.close(fd)
    return real if real.startswith("/") and not real.endswith(" (deleted)") else None


def boot_id(root: str) -> str:
    """This boot's id, read under ``root`` (``""`` when there is none to read: a fixture root, a
    container without /proc, or anything that is not a small regular file holding a UUID).

    A state file carries the boot it was written under: one restored from a golden image, a
    snapshot rollback or another boot no longer matches, so the run re-reads the controller's
    record instead of trusting it, and the tick's memo (keyed on it) does not apply.
    """
    import stat

    try:
        fd = os.open(os.path.join(root, BOOT_ID), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""  # a FIFO or device planted in a root: never wait on it
        text = os.read(fd, 64).decode("ascii", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
    hexdigits = text.replace("-", "")
    return text if len(text) == 36 and len(hexdigits) == 32 and all(c in "0123456789abcdef" for c in hexdigits) else ""
