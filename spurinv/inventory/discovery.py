"""Discovery: run every source under a root and assemble one inventory, or a failure.

Devices are built from the driver views (KFD for AMD, ``/proc/driver/nvidia`` for NVIDIA, DRM
for Intel) and checked against the PCI bus, the ground truth. When the bus shows a GPU that the
driver does not, or KFD lists fewer partitions than the package's mode implies, the result is a
failure that names the source, the path and the reason: **a discovery error is never "no
GPUs"**. The result has ``inventory`` only when no source failed (``ok``); that is the single
constructor, :func:`_result`.

Identity: the physical function's PCI BDF, plus ``/p<index>`` for a package split into several
partitions. In CPX every KFD partition carries its own function bits in ``location_id``
(1280…1287 = 0000:05:00.0 … .7 in the MI300X capture) and all of them share ``unique_id``; the
index is those function bits, so a missing partition never renumbers the others. Never a
positional index, never the render minor (reused across modes: docs/spur.md "Identity").
"""

import errno
import os

from spurinv.inventory import catalog
from spurinv.inventory import root as places
from spurinv.inventory.fingerprint import fingerprint
from spurinv.inventory.sources.attribute import ReadError, decimal, is_bdf, numbered, read_optional
from spurinv.inventory.sources.cdi import SpecCache, read_cdi
from spurinv.inventory.sources.drm import read_drm
from spurinv.inventory.sources.host import read_cpus, read_memory
from spurinv.inventory.sources.kfd import IO_LINK_XGMI, is_gpu, read_kfd
from spurinv.inventory.sources.pci import MAX_ACCELERATORS, canonical, read_pci, sort_key
from spurinv.inventory.sources.status import ABSENT, FAILED, Report
from spurinv.shape import device_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spurinv.inventory.model import Device, Discovery, Inventory, Partition, Problem
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.cdi import CdiDevice
    from spurinv.inventory.sources.drm import DrmNode
    from spurinv.inventory.sources.kfd import KfdNode
    from spurinv.inventory.sources.mig import MigGpu
    from spurinv.inventory.sources.nvidia import NvidiaGpu
    from spurinv.inventory.sources.pci import PciFunction

SOURCES = ("pci", "drm", "kfd", "nvidia", "cdi", "cpus", "memory")
MIB = 1 << 20
_CAP_PREFIX = "/dev/nvidia-caps/nvidia-cap"


def discover(
    root: "Root",
    *,
    cdi_dirs: "tuple[str, ...]" = (),
    ignore_pci: "frozenset[str]" = frozenset(),
    topology: bool = False,
    cdi_cache: "SpecCache | None" = None,
) -> "Discovery":
    """Read the node under ``root``; ``topology`` also reads KFD io_links for XGMI peers;
    ``cdi_cache``: CDI specs parsed before (:class:`~spurinv.inventory.sources.cdi.SpecCache`).

    Refresh does not need peers (they are not part of the fingerprint) and skips the io_links
    walk, which grows with the square of the partitions: 4,032 files on an 8×MI300X CPX node.
    """
    reports = {name: Report(name) for name in SOURCES}
    ignore_pci = frozenset(canonical(bdf) if is_bdf(bdf) else bdf for bdf in ignore_pci)
    pci, bus = read_pci(root, reports["pci"], ignore_pci)
    drm = read_drm(root, reports["drm"])
    kfd = read_kfd(root, reports["kfd"], topology=topology)
    nvidia = _read_nvidia(root, reports["nvidia"])
    mig: dict[str, MigGpu] = {}
    if nvidia:  # no MIG tree without an NVIDIA GPU: an AMD node's tick does not import its reader
        from spurinv.inventory.sources.mig import read_mig

        mig = read_mig(root, reports["nvidia"], nvidia)
    cdi = read_cdi(root, reports["cdi"], cdi_dirs, cdi_cache)
    cpus = read_cpus(root, reports["cpus"])
    memory = read_memory(root, reports["memory"])

    nodes = _DrmIndex(drm)
    caps = {  # a MIG device's own device node, the one a CDI spec names it by
        f"{bdf}/mig{i['gi']}.{i['ci']}": f"/dev/nvidia-caps/nvidia-cap{i['ci_minor']}"
        for bdf, layout in mig.items()
        for i in layout["instances"]
    }
    if reports["pci"].status != FAILED:
        _check_drm_on_bus(drm, bus, ignore_pci, reports["drm"])
    devices = [
        *_amd_devices(root, pci, kfd, nodes, reports),
        *_nvidia_devices(root, pci, nvidia, mig, nodes, ignore_pci, reports),
        *_intel_devices(pci, nodes, reports),
    ]
    for function in pci:
        link = function["link"]
        # a presence problem, not a link fact: like a GPU the bus shows and the driver does not,
        # the reading fails (never a reading with one GPU fewer, never silent on the fast path)
        if link is not None and link["state"] == "gone":
            what = "link width 63, speed Unknown: config space reads all ones"
            reason = f"GPU {function['bdf']} on the bus does not answer ({what})"
            reports["pci"].fail(function["path"], reason)
        elif link is not None and link["state"] == "down":
            reason = f"GPU {function['bdf']} on the bus does not answer (PCIe link down, x0)"
            reports["pci"].fail(function["path"], reason)
    devices.sort(key=device_key)
    seen: set[str] = set()
    for device in devices:
        if device["id"] in seen:
            reports["pci"].fail(device["pci_bdf"], f"two devices claim the identity {device['id']}")
        seen.add(device["id"])
    if len(devices) > MAX_ACCELERATORS:
        reason = f"{len(devices)} devices: beyond {MAX_ACCELERATORS}, the physical limit"
        reports["pci"].fail(root.join(places.PCI_DEVICES), reason)
    _mig_only_in_spec(nvidia, mig, cdi, reports["nvidia"])
    _cross_check_cdi(devices, cdi, caps, reports["cdi"])
    return _result(reports, cpus, memory, devices, [function["bdf"] for function in pci])


def _read_nvidia(root: "Root", report: "Report") -> "list[NvidiaGpu]":
    """The NVIDIA driver's GPUs. Its reader is imported only when the driver's directory is there
    (an AMD node's tick does without the module); the reader's own answer for a missing one."""
    try:
        os.lstat(root.join(places.NVIDIA_GPUS))
    except FileNotFoundError:
        report.absent(places.NVIDIA_ABSENT)
        return []
    except OSError:
        pass  # the reader says what is wrong with it
    from spurinv.inventory.sources.nvidia import read_nvidia

    return read_nvidia(root, report)


def _result(
    reports: "dict[str, Report]",
    cpus: "int | None",
    memory: "int | None",
    devices: "list[Device]",
    pci_functions: "list[str]",
) -> "Discovery":
    listed = [report.listed() for report in reports.values()]
    # a switch in progress explains the rest: its evidence comes first (the reading's headline)
    evidence: list[Problem] = [problem for report in reports.values() for problem in report.evidence]
    errors: list[Problem] = evidence + [error for found, _ in listed for error in found]
    flags: list[Problem] = [flag for _, found in listed for flag in found]
    sources = {name: report.as_dict() for name, report in reports.items()}
    if errors or cpus is None or memory is None:
        if not errors:  # unreachable by construction; keeps the invariant local and explicit
            errors = [{"source": "discovery", "path": "", "reason": "incomplete reading"}]
        return {"ok": False, "inventory": None, "sources": sources, "errors": errors, "flags": flags}
    inventory: Inventory = {
        "cpus": cpus,
        "memory_mb": memory,
        "fingerprint": fingerprint(cpus, memory, devices),
        "devices": devices,
        "pci_functions": pci_functions,
    }
    return {"ok": True, "inventory": inventory, "sources": sources, "errors": [], "flags": flags}


def _check_drm_on_bus(drm: "list[DrmNode]", bus: "frozenset[str]", ignore: "frozenset[str]", report: "Report") -> None:
    """Every DRM node's PCI device must be on the bus: otherwise the PCI view is incomplete."""
    for node in drm:
        bdf = node["bdf"]
        if bdf is not None and bdf not in bus and bdf not in ignore:
            name = f"{'card' if node['kind'] == 'card' else 'renderD'}{node['minor']}"
            report.fail(node["device"], f"{name} belongs to PCI device {bdf}, which the PCI bus does not show")


def _slot(bdf: str) -> "tuple[int, int, int]":
    domain, bus, device, _function = sort_key(bdf)
    return domain, bus, device


class _DrmIndex:
    """DRM nodes looked up by render minor, by device directory and by PCI function."""

    def __init__(self, drm: "list[DrmNode]") -> None:
        self.render = {node["minor"]: node for node in drm if node["kind"] == "render"}
        self.card_of_device = {node["device"]: node["minor"] for node in drm if node["kind"] == "card"}
        self.by_bdf: dict[str, dict[str, int]] = {}
        for node in drm:
            if node["bdf"] is not None:
                self.by_bdf.setdefault(node["bdf"], {}).setdefault(node["kind"], node["minor"])


def _device(
    function: "PciFunction",
    model: str,
    *,
    render: "int | None",
    card: "int | None",
    node: "str | None",
    ident: "str | None" = None,
    memory_mb: "int | None" = None,
    partition: "Partition | None" = None,
    unique_id: "str | None" = None,
) -> "Device":
    return {
        "id": ident or function["bdf"],
        "vendor": function["vendor"],
        "model": model,
        "pci_bdf": function["bdf"],
        "pci_device": f"0x{function['device_id']:04x}",
        "memory_mb": memory_mb,
        "partition": partition,
        "numa_node": function["numa_node"],
        "render_minor": render,
        "card": card,
        "device_node": node,
        "unique_id": unique_id,
        "driver": function["driver"],
        "peers": [],
        "cdi_names": [],
        "link": function["link"],
    }


def _amd_devices(
    root: "Root", pci: "list[PciFunction]", kfd: "list[KfdNode]", drm: "_DrmIndex", reports: "dict[str, Report]"
) -> "list[Device]":
    kfd_report = reports["kfd"]
    functions = [f for f in pci if f["vendor"] == "amd"]
    bound = []
    for function in functions:
        if function["driver"] == "amdgpu":
            bound.append(function)
        elif function["driver"] is None:
            # amdgpu unloading or probing (an NPS change reloads it): a switch, until switch_timeout
            reports["pci"].switching(function["path"], f"AMD GPU {function['bdf']} has no driver (amdgpu loading?)")
        else:
            driver = function["driver"]
            reports["pci"].fail(function["path"], f"AMD GPU bound to {driver}, not amdgpu: the driver does not show it")
    if kfd_report.status == FAILED or kfd_report.evidence:
        return []
    if bound and kfd_report.status == ABSENT:
        reason = f"missing, but PCI shows {len(bound)} AMD GPUs bound to amdgpu (amdgpu loading?)"
        kfd_report.switching(root.join(places.KFD_TOPOLOGY), reason)
        return []
    groups: dict[tuple[int, int, int], list[tuple[int, KfdNode]]] = {}
    for node in kfd:
        properties = node["properties"]
        if not is_gpu(properties) or properties.get("vendor_id", catalog.AMD_VENDOR) != catalog.AMD_VENDOR:
            continue
        if "location_id" not in properties or "drm_render_minor" not in properties or "device_id" not in properties:
            missing = [key for key in ("location_id", "drm_render_minor", "device_id") if key not in properties]
            kfd_report.fail(os.path.join(node["path"], "properties"), f"missing {', '.join(missing)}")
            continue
        location = properties["location_id"]
        slot = (properties.get("domain", 0), (location >> 8) & 0xFF, (location >> 3) & 0x1F)
        groups.setdefault(slot, []).append((location & 7, node))
    by_slot = {_slot(function["bdf"]): function for function in functions}
    devices: list[Device] = []
    kfd_ids: dict[int, str] = {}
    for slot, members in sorted(groups.items()):
        owner = by_slot.get(slot)
        if owner is None:
            pseudo = "{:04x}:{:02x}:{:02x}".format(*slot)
            kfd_report.fail(members[0][1]["path"], f"GPU node at {pseudo} has no AMD GPU on the PCI bus")
        elif owner["driver"] == "amdgpu":
            for node_id, device in _package(root, owner, members, drm, reports):
                kfd_ids[node_id] = device["id"]
                devices.append(device)
    for function in bound:
        if _slot(function["bdf"]) not in groups:
            where = root.join(places.KFD_TOPOLOGY)
            reason = f"PCI shows AMD GPU {function['bdf']} but KFD has no node for it"
            if not kfd_report.failed() and os.path.lexists(os.path.join(function["path"], "current_compute_partition")):
                # a partitionable package whose nodes left KFD and are not back yet (§2.2)
                kfd_report.switching(where, reason + " (its partitions are being re-created?)")
            else:
                kfd_report.fail(where, reason)
    _link_peers(devices, kfd, kfd_ids)
    return devices


def _package(
    root: "Root", function: "PciFunction", members: "list[tuple[int, KfdNode]]", drm: "_DrmIndex", reports: "dict[str, Report]"
) -> "list[tuple[int, Device]]":
    """The logical devices of one AMD package (1 in SPX, up to 8 in CPX), with their KFD node ids."""
    kfd_report = reports["kfd"]
    try:
        compute = _word(read_optional(os.path.join(function["path"], "current_compute_partition")))
        memory_mode = _word(read_optional(os.path.join(function["path"], "current_memory_partition")))
    except ReadError as exc:
        if exc.errno in (errno.EPERM, errno.EBUSY):  # amdgpu answers EPERM while the package resets
            reports["pci"].switching(exc.path, f"{exc.reason} (a reset or partition switch in progress)")
        else:
            reports["pci"].fail(exc.path, exc.reason)
        return []
    for attribute, mode in (("current_compute_partition", compute), ("current_memory_partition", memory_mode)):
        if mode == "UNKNOWN":  # the hardware reports no valid mode: mid-switch (docs/partitions.md §2.4)
            reports["pci"].switching(os.path.join(function["path"], attribute), f"{function['bdf']} reports UNKNOWN")
            return []
        if mode is not None and not _mode(mode):
            # the mode goes into the summary, and so into the drain reason every `sinfo -R` prints
            reports["pci"].fail(
                os.path.join(function["path"], attribute),
                f"{function['bdf']} reports {mode[:40]!r}, not a partition mode (a word of letters and digits, as SPX or NPS4)",
            )
            return []
    model = catalog.model_for("amd", function["device_id"], function["product"])
    expected = catalog.expected_partitions(compute, model)
    if expected is not None and len(members) != expected:
        found = len(members)
        reason = f"{function['bdf']} is in {compute}: {expected} partitions expected, KFD shows {found}"
        # nodes leave and re-join KFD during a switch; a count that never settles is a failure
        # once policy.switch_timeout has passed (the real 63-node capture, docs/partitions.md §2.5)
        kfd_report.switching(members[0][1]["path"], reason)
        return []
    base_function = sort_key(function["bdf"])[3]
    split = (expected or len(members)) > 1
    result: list[tuple[int, Device]] = []
    claimed: dict[int, int] = {}
    for bits, node in sorted(members, key=lambda member: member[0]):
        properties = node["properties"]
        index = bits - base_function
        if index < 0 or index in claimed:
            other = claimed.get(index, "?")
            kfd_report.fail(
                node["path"], f"KFD nodes {other} and {node['node']} both claim {function['bdf']} partition {index}"
            )
            continue
        claimed[index] = node["node"]
        if properties["device_id"] != function["device_id"]:
            pci_id = function["device_id"]
            kfd_report.fail(node["path"], f"device_id 0x{properties['device_id']:04x}, PCI says 0x{pci_id:04x}")
            continue
        minor = properties["drm_render_minor"]
        render = drm.render.get(minor)
        if render is None:
            missing = root.join(places.DRM_CLASS, f"renderD{minor}")
            reports["drm"].fail(missing, f"KFD node {node['node']} names renderD{minor}, which DRM does not show")
            continue
        unique = properties.get("unique_id", 0)
        vram = node["vram_bytes"]
        partition: Partition | None = None
        if compute or split:
            partition = {"compute": compute, "memory": memory_mode, "index": index}
        device = _device(
            function,
            model,
            ident=f"{function['bdf']}/p{index}" if split else None,
            render=minor,
            card=drm.card_of_device.get(render["device"]),
            node=f"/dev/dri/renderD{minor}",
            memory_mb=vram // MIB if vram else None,
            partition=partition,
            unique_id=str(unique) if unique else None,
        )
        result.append((node["node"], device))
    return result


def _link_peers(devices: "list[Device]", kfd: "list[KfdNode]", kfd_ids: "dict[int, str]") -> None:
    """Fill XGMI peers by identity; links to CPU nodes (type 2, PCIe) are not peers."""
    links = {node["node"]: node["links"] or [] for node in kfd}
    ids = {ident: node for node, ident in kfd_ids.items()}
    for device in devices:
        own = links.get(ids[device["id"]], [])
        if own:  # none without topology (a tick): the device's peers stay []
            device["peers"] = sorted({kfd_ids[to] for kind, to in own if kind == IO_LINK_XGMI and to in kfd_ids})


def _word(text: "str | None") -> "str | None":
    return (text.strip() or None) if text is not None else None


def _mode(word: str) -> bool:
    """Whether ``word`` reads as a partition mode: amdgpu prints SPX, DPX, TPX, QPX or CPX, and
    NPS1 to NPS8 (amdgpu_gfx.c, amdgpu_gmc.c ``nps_desc``); any ASCII word of letters and digits
    up to 16 long passes, so a mode a newer kernel adds is read, not an error."""
    return len(word) <= 16 and word.isascii() and word.isalnum()


def _nvidia_devices(
    root: "Root",
    pci: "list[PciFunction]",
    gpus: "list[NvidiaGpu]",
    mig: "dict[str, MigGpu]",
    drm: "_DrmIndex",
    ignore: "frozenset[str]",
    reports: "dict[str, Report]",
) -> "list[Device]":
    """One device per GPU, or per MIG compute instance (``<BDF>/mig<gi>.<ci>``) of a GPU that has any."""
    report = reports["nvidia"]
    if report.status == FAILED:
        return []
    known = {gpu["bdf"]: gpu for gpu in gpus}
    devices: list[Device] = []
    for function in (f for f in pci if f["vendor"] == "nvidia"):
        gpu = known.pop(function["bdf"], None)
        if gpu is None:
            where = root.join(places.NVIDIA_GPUS, function["bdf"])
            driver = function["driver"] or "none"
            report.fail(where, f"PCI shows NVIDIA GPU {function['bdf']} (driver {driver}) but the NVIDIA driver does not")
            continue
        nodes = drm.by_bdf.get(function["bdf"], {})
        model = catalog.normalize(gpu["model"])
        layout = mig.get(function["bdf"])
        if layout and layout["empty_gis"]:
            gis = ", ".join(str(gi) for gi in layout["empty_gis"])
            where = root.join(places.NVIDIA_CAPABILITIES, f"gpu{gpu['minor']}", "mig")
            # mig-parted's in-between state; one left so on purpose (-cgi without -C) fails after
            # policy.switch_timeout, and the reason says what settles it (docs/partitions.md §6.1)
            reason = (
                f"GPU instance {gis} of {function['bdf']} has no compute instance (a MIG layout being applied; "
                f"if it stays: nvidia-smi mig -i {function['bdf']} -gi {gis} -cci, or -dgi)"
            )
            report.switching(where, reason)
        if layout and layout["instances"]:
            from spurinv.inventory.sources.mig import index as mig_index

            # The type stays the GPU's model: profile names (1g.10gb) only NVML knows.
            devices.extend(
                _device(
                    function,
                    model,
                    ident=f"{function['bdf']}/mig{instance['gi']}.{instance['ci']}",
                    render=nodes.get("render"),
                    card=nodes.get("card"),
                    node=f"/dev/nvidia{gpu['minor']}",
                    partition={"compute": "MIG", "memory": None, "index": mig_index(instance["gi"], instance["ci"])},
                )
                for instance in layout["instances"]
            )
            continue
        devices.append(
            _device(
                function,
                model,
                render=nodes.get("render"),
                card=nodes.get("card"),
                node=f"/dev/nvidia{gpu['minor']}",
                unique_id=gpu["uuid"],
            )
        )
    for bdf, gpu in known.items():
        if bdf not in ignore:
            report.fail(gpu["path"], f"the NVIDIA driver lists {bdf}, which is not on the PCI bus")
    return devices


def _intel_devices(pci: "list[PciFunction]", drm: "_DrmIndex", reports: "dict[str, Report]") -> "list[Device]":
    devices: list[Device] = []
    for function in (f for f in pci if f["vendor"] == "intel"):
        nodes = drm.by_bdf.get(function["bdf"], {})
        if "card" not in nodes:
            driver = function["driver"] or "none"
            reason = f"Intel GPU {function['bdf']} (driver {driver}) has no DRM card: the driver does not show it"
            reports["drm"].fail(function["path"], reason)
            continue
        render = nodes.get("render")
        devices.append(
            _device(
                function,
                catalog.model_for("intel", function["device_id"], function["product"]),
                render=render,
                card=nodes["card"],
                node=f"/dev/dri/renderD{render}" if render is not None else f"/dev/dri/card{nodes['card']}",
            )
        )
    return devices


def _mig_only_in_spec(gpus: "list[NvidiaGpu]", mig: "dict[str, MigGpu]", cdi: "list[CdiDevice]", report: "Report") -> None:
    """A GPU that reads whole while the CDI spec lists MIG devices on it: a switch in progress.

    mig-parted applies a layout by clearing every GPU first, then creating GI and CI one GPU at a
    time (docs/partitions.md §1.5), and ``/proc`` cannot tell MIG mode (§1.4): a GPU caught cleared
    reads exactly like a whole one. The spec's ``nvidia-cap`` minors name ``(GPU minor, GI, CI)``
    through the driver's static table (§1.2, §1.6), so a spec naming MIG devices of a GPU with no
    instance at all is the evidence. A spec left stale after MIG was really switched off is the same
    evidence: it stays a switch until ``policy.switch_timeout``, then fails, and regenerating the
    spec (``nvidia-ctk cdi generate``) settles it.
    """
    whole: dict[int, str] = {}
    partial: dict[int, tuple[str, set[tuple[int, int | None]]]] = {}  # GPUs with some instances
    for gpu in gpus:
        layout = mig.get(gpu["bdf"])
        if layout is None or not (layout["instances"] or layout["empty_gis"]):
            whole[gpu["minor"]] = gpu["bdf"]
        else:
            present: set[tuple[int, int | None]] = {(i["gi"], i["ci"]) for i in layout["instances"]}
            present |= {(i["gi"], None) for i in layout["instances"]} | {(gi, None) for gi in layout["empty_gis"]}
            partial[gpu["minor"]] = (gpu["bdf"], present)
    if not whole and not partial:  # no NVIDIA GPU: no spec entry can name one of its MIG devices
        return
    said: set[int] = set()
    for entry in cdi:
        for path in entry["nodes"]:
            number = decimal(path.removeprefix(_CAP_PREFIX), 9) if path.startswith(_CAP_PREFIX) else None
            if number is None:
                continue
            from spurinv.inventory.sources.mig import decode

            decoded = decode(number)
            if decoded is None or decoded[0] in said:
                continue
            what = f"gi{decoded[1]}" + ("" if decoded[2] is None else f"/ci{decoded[2]}")
            if decoded[0] in whole:
                state = f"{whole[decoded[0]]} reads whole (no MIG instance)"
            elif decoded[0] in partial and (decoded[1], decoded[2]) not in partial[decoded[0]][1]:
                # some instances made, others not yet: a layout caught half-applied reads valid
                state = f"{partial[decoded[0]][0]} has no MIG instance {what}"
            else:
                continue
            said.add(decoded[0])
            reason = (
                f"{state} but {entry['qualified']} in {entry['file']} names its MIG "
                f"device {what} ({path}): a MIG layout being applied, or a stale spec (regenerate it)"
            )
            report.switching(entry["file"], reason)


# nvidia-ctk names a GPU by index and UUID, a MIG device by index pair and UUID: a handful. The
# names go into every reading the state file keeps, so a spec naming one GPU 10,000 times is cut.
MAX_CDI_NAMES = 32


def _gpu_nodes(nodes: "list[str]") -> "list[str]":
    """The nodes of a CDI entry that name a GPU: a MIG device's compute instance cap (the last
    ``nvidia-cap``, after the GPU instance's), else its DRM and ``/dev/nvidia<M>`` nodes. One pass,
    no comprehension (a call each, for 64 entries a tick)."""
    cap = None
    found = []
    for path in nodes:
        if path.startswith("/dev/dri/"):  # first: most nodes, and never a cap (the prefixes differ)
            found.append(path)
        elif path.startswith(_CAP_PREFIX):
            cap = path
        elif path.startswith("/dev/nvidia") and numbered(path, "/dev/nvidia") is not None:
            found.append(path)
    return [cap] if cap is not None else found


def _cross_check_cdi(devices: "list[Device]", cdi: "list[CdiDevice]", caps: "dict[str, str]", report: "Report") -> None:
    """Attach CDI names to devices; flag names that point at hardware we do not see, and GPUs
    a vendor's spec leaves out (a stale spec after a partition switch).

    A MIG device is matched by its compute instance's ``nvidia-cap`` node only: every MIG device
    of a GPU shares ``/dev/nvidia<M>``, and the ``i`` of a ``"i:j"`` name is NVML's index, not a minor.
    """
    by_node: dict[str, Device] = {}
    parents: set[str] = set()  # /dev/nvidia<M> of GPUs in MIG: a whole-GPU entry for them is not stale
    for device in devices:
        cap = caps.get(device["id"])
        if cap is not None:
            by_node[cap] = device
            parents.add(device["device_node"] or "")
            if device["render_minor"] is not None:
                parents.add(f"/dev/dri/renderD{device['render_minor']}")
            if device["card"] is not None:
                parents.add(f"/dev/dri/card{device['card']}")
            continue
        if device["device_node"]:
            by_node[device["device_node"]] = device
        if device["render_minor"] is not None:
            by_node.setdefault(f"/dev/dri/renderD{device['render_minor']}", device)
        if device["card"] is not None:
            by_node.setdefault(f"/dev/dri/card{device['card']}", device)
        if device["unique_id"]:
            by_node.setdefault(device["unique_id"], device)
    vendors_with_specs = set()
    for entry in cdi:
        if entry["name"] == "all":
            continue
        gpu_nodes = _gpu_nodes(entry["nodes"])
        if gpu_nodes and parents and all(p in parents for p in gpu_nodes):
            vendors_with_specs.add(entry["kind"].split(".", 1)[0])
            continue  # nvidia-ctk < 1.18 also lists a MIG GPU whole ("0" beside "0:0")
        matched: dict[str, Device] = {}
        lacking = None  # the first node no device has
        for p in gpu_nodes:
            found = by_node.get(p)
            if found is not None:
                matched[found["id"]] = found
            elif lacking is None:
                lacking = p
        if entry["name"] in by_node:
            matched[by_node[entry["name"]]["id"]] = by_node[entry["name"]]
        if not gpu_nodes and not matched:
            continue  # not a GPU (a NIC class, say)
        vendors_with_specs.add(entry["kind"].split(".", 1)[0])
        if lacking is not None:
            report.flag(entry["file"], f"{entry['qualified']} names {lacking}, which no discovered GPU has")
        for device in matched.values():
            device["cdi_names"].append(entry["qualified"])
    for device in devices:
        device["cdi_names"].sort()
        if len(device["cdi_names"]) > MAX_CDI_NAMES:
            report.flag(
                device["device_node"] or device["id"],
                f"{len(device['cdi_names'])} CDI names for {device['id']}: only the first {MAX_CDI_NAMES} are kept",
            )
            del device["cdi_names"][MAX_CDI_NAMES:]
        if not device["cdi_names"] and device["vendor"] in vendors_with_specs:
            where = device["device_node"] or device["id"]
            report.flag(where, f"no CDI device for {device['id']} in the {device['vendor']} spec (stale spec?)")
