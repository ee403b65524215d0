"""PCI functions from ``sys/bus/pci/devices``: the ground truth of what is on the bus.

Only display (base class 0x03) and processing-accelerator (0x12) functions of AMD, NVIDIA and
Intel are kept; BMC VGA chips (ASPEED, Matrox) and co-processors such as QAT or NEC VE
(class 0x0b40) are not GPUs (fixtures: NFD rootfs-1, hwloc 32intel64+8ve).
"""

import os

from spurinv.inventory import root as places
from spurinv.inventory.catalog import AMD_VENDOR, INTEL_VENDOR, NVIDIA_VENDOR
from spurinv.inventory.sources.attribute import (
    ReadError,
    is_bdf,
    parse_int,
    parse_keyed_lines,
    read_optional,
    read_text,
    sysfs_names,
)
from spurinv.inventory.sources.link import read_link
from spurinv.inventory.sources.status import Report
from spurinv.shape import UNPARSED, bdf_key, counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.model import Link, Vendor
    from spurinv.inventory.root import Root

    class PciFunction(TypedDict):
        bdf: str
        vendor: Vendor
        vendor_id: int
        device_id: int
        pci_class: int
        driver: str | None
        numa_node: int | None
        product: str | None
        path: str
        link: Link | None


VENDORS: "dict[int, Vendor]" = {AMD_VENDOR: "amd", NVIDIA_VENDOR: "nvidia", INTEL_VENDOR: "intel"}
ACCELERATOR_CLASSES = (0x03, 0x12)
# Config space that reads as all ones means the device stopped answering ("fell off the bus":
# NVIDIA Xid 79, https://docs.nvidia.com/deploy/xid-errors/, leaves the function enumerated and
# reading 0xffff / rev ff).
ALL_ONES_VENDOR = 0xFFFF
ALL_ONES_CLASS = 0xFFFFFF

MAX_ACCELERATORS = 1024  # accelerator functions (and devices) per node: beyond any machine built


def canonical(bdf: str) -> str:
    """The kernel's spelling of a BDF (``%04x:%02x:%02x.%d``): ``00000000:18:00.0`` is
    ``0000:18:00.0``, the same function (counted twice)."""
    return spelled(sort_key(bdf))


def spelled(key: "tuple[int, int, int, int]") -> str:
    """A BDF's :func:`sort_key` in the kernel's spelling (:func:`canonical`)."""
    domain, bus, device, function = key
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function}"


def sort_key(bdf: str) -> "tuple[int, int, int, int]":
    """Order BDFs numerically; another spelling sorts last (:func:`spurinv.shape.bdf_key`)."""
    return bdf_key(bdf) or UNPARSED


def driver_name(function_dir: str) -> "str | None":
    """Return the bound driver's name: the ``driver`` link's target, else uevent's DRIVER=."""
    try:
        return os.path.basename(os.readlink(os.path.join(function_dir, "driver")))
    except OSError:
        pass
    uevent = read_optional(os.path.join(function_dir, "uevent"))
    if uevent:
        return parse_keyed_lines(uevent, "=").get("DRIVER") or None
    return None


def read_pci(
    root: "Root", report: "Report", ignore: "frozenset[str]" = frozenset()
) -> "tuple[list[PciFunction], frozenset[str]]":
    """Return the GPU/accelerator functions on the bus, and every function's address."""
    base = root.join(places.PCI_DEVICES)

    def missing() -> None:
        if not os.path.isdir(root.join(places.PCI_BUS)):
            report.absent("no PCI bus in sysfs")
        else:
            report.fail(base, "missing")

    names = sysfs_names(root, report, base, missing)
    if names is None:
        return [], frozenset()
    functions: list[PciFunction] = []
    spelled: dict[str, str] = {}  # canonical BDF → the entry's name
    paths = root.resolver()
    for name in sorted(names, key=sort_key):
        link = os.path.join(base, name)
        if not is_bdf(name):
            report.fail(link, "not a PCI address")
            continue
        bdf = canonical(name)
        if bdf in spelled:
            report.fail(link, f"the same PCI function as {spelled[bdf]} (one function listed twice)")
            continue
        spelled[bdf] = name
        if bdf in ignore:
            continue
        try:  # through the root's resolver: an absolute link must not lead out of --root
            path, proven = paths.resolve_proven(link)  # a directory the resolution proved needs no isdir
        except OSError as exc:
            report.fail(link, str(exc))
            continue
        if not proven and not os.path.isdir(path):
            report.fail(link, "dangling link" if os.path.islink(link) else "not a directory")
            continue
        function = _read_function(path, bdf, report)
        if function is not None:
            functions.append(function)
    if len(functions) > MAX_ACCELERATORS:
        report.fail(base, f"{len(functions)} accelerator functions: beyond {MAX_ACCELERATORS}, the physical limit")
    counts: dict[str, int] = {}
    for function in functions:
        counts[function["vendor"]] = counts.get(function["vendor"], 0) + 1
    summary = ", ".join(f"{vendor} {count}" for vendor, count in sorted(counts.items()))
    report.detail = (
        f"{counted(len(functions), 'accelerator function')} ({summary})"
        if functions
        else (f"{counted(len(names), 'function')}, no GPU or accelerator")
    )
    return functions, frozenset(spelled)


def _read_function(path: str, bdf: str, report: "Report") -> "PciFunction | None":
    try:
        pci_class = parse_int(read_text(os.path.join(path, "class")), os.path.join(path, "class"), base=16)
        if pci_class == ALL_ONES_CLASS:
            report.fail(path, "config space reads as all ones: the device is not responding")
            return None
        if pci_class >> 16 not in ACCELERATOR_CLASSES:
            return None
        vendor_path = os.path.join(path, "vendor")
        vendor_id = parse_int(read_text(vendor_path), vendor_path, base=16)
        if vendor_id == ALL_ONES_VENDOR:
            report.fail(path, "vendor reads 0xffff: the device is not responding")
            return None
        vendor = VENDORS.get(vendor_id)
        if vendor is None:
            return None
        device_path = os.path.join(path, "device")
        device_id = parse_int(read_text(device_path), device_path, base=16)
        numa_path = os.path.join(path, "numa_node")
        numa_text = read_optional(numa_path)
        numa = parse_int(numa_text, numa_path, signed=True, bits=32) if numa_text is not None else -1
        product = read_optional(os.path.join(path, "product_name"))
    except ReadError as exc:
        report.fail(exc.path, exc.reason)
        return None
    return {
        "bdf": bdf,
        "vendor": vendor,
        "vendor_id": vendor_id,
        "device_id": device_id,
        "pci_class": pci_class,
        "driver": driver_name(path),
        "numa_node": numa if numa >= 0 else None,
        "product": (product or "").strip() or None,
        "path": path,
        "link": read_link(path, vendor_id),
    }
