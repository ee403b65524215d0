"""The fingerprint of the schedulable set: what the controller schedules against.

It covers node CPUs and memory and, per device, the identity and the fields a scheduler cares
about. Render minors, card numbers, CDI names and XGMI peers are left out: render minors are
reused across modes and driver reloads (ROCm/k8s-gpu-dra-driver#83), and none of them changes
what can be scheduled. Devices are sorted by identity first, so the order in which the kernel
lists directories never matters.
"""

from _operator import itemgetter  # built into the interpreter: operator's, without reading a module

from spurinv import jsontext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from hashlib import sha256 as sha256  # noqa: PLC0414  (re-exported for the CDI spec cache)
else:
    # The interpreter's own SHA-256 (what hashlib falls back to): importing hashlib loads
    # OpenSSL, ~2.5 ms and ~1 MiB of a timer tick. Same digest either way.
    try:
        from _sha256 import sha256  # Python 3.11 (first: a failed import searches all of sys.path)
    except ImportError:
        try:
            from _sha2 import sha256  # Python >= 3.12
        except ImportError:
            from hashlib import sha256

VERSION = 1  # bump when the projection changes, so every node re-confirms once
SCHEDULABLE = ("id", "vendor", "model", "pci_device", "memory_mb", "partition", "numa_node", "unique_id")
_schedulable = itemgetter(*SCHEDULABLE)  # a device's row, built in C


def fingerprint(cpus: int, memory_mb: int, devices: "Iterable[Mapping[str, object]]") -> str:
    """Return the hex SHA-256 of the schedulable projection (of discovery's dicts or a model's dump)."""
    rows = sorted(map(_schedulable, devices), key=lambda row: str(row[0]))  # tuples: the same JSON arrays
    blob = jsontext.dumps([VERSION, cpus, memory_mb, rows], sort_keys=True)
    return sha256(blob.encode()).hexdigest()
