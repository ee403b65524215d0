"""The AMD KFD topology (``sys/class/kfd/kfd/topology``): one node per CPU socket and per GPU
partition.

The walk is bracketed by ``generation_id`` reads and retried when it moved, as libhsakmt does
(ROCT ``topology.c``: ``if (gen_start != gen_end) goto retry``): during an SPX↔CPX switch the
driver tears nodes down and builds new ones, and a half-built tree must never be taken for the
node's hardware. A node directory that vanishes mid-walk is the same event.
"""

import os

from spurinv.inventory import root as places
from spurinv.inventory.sources.attribute import ReadError, parse_int, read_properties, read_text
from spurinv.inventory.sources.status import Report
from spurinv.shape import counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypedDict

    from spurinv.inventory.root import Root

    class KfdNode(TypedDict):
        node: int
        path: str
        properties: dict[str, int]
        vram_bytes: int | None
        links: list[tuple[int, int]] | None


WALK_ATTEMPTS = 3
HEAP_FB_PUBLIC = 1  # kfd_crat.h HSA_MEM_HEAP_TYPE_FB_PUBLIC: the VRAM bank
IO_LINK_PCIE = 2  # kfd_crat.h CRAT_IOLINK_TYPE_PCIEXPRESS (spur mistook it for XGMI: docs/spur.md)
IO_LINK_XGMI = 11  # kfd_crat.h CRAT_IOLINK_TYPE_XGMI
# What discovery reads of a node's properties (is_gpu, _vram_bytes, discovery._amd_devices): the
# rest of each file is checked, not kept.
NODE_KEYS = ("cpu_cores_count", "device_id", "domain", "drm_render_minor", "local_mem_size", "location_id",
             "simd_count", "unique_id", "vendor_id")  # fmt: skip


class _TornRead(Exception):
    """A node vanished or changed while we walked: retry the whole walk."""


def is_gpu(properties: "dict[str, int]") -> bool:
    """KFD GPU node: SIMDs and no CPU cores (fixtures README: "GPU node = simd_count > 0")."""
    return properties.get("simd_count", 0) > 0 and properties.get("cpu_cores_count", 0) == 0


def read_kfd(root: "Root", report: "Report", *, topology: bool = False) -> "list[KfdNode]":
    """Return every KFD node; GPU nodes carry VRAM and (with ``topology``) their io_links."""
    base = root.join(places.KFD_TOPOLOGY)
    try:  # class/kfd/kfd is a link: resolve it through the root, never out of it
        base = root.resolver().resolve(base)
    except OSError as exc:
        report.fail(base, str(exc))
        return []
    if not os.path.isdir(base):
        if os.path.lexists(root.join(places.KFD_CLASS)) and not os.path.isdir(root.join(places.KFD_CLASS)):
            report.fail(root.join(places.KFD_CLASS), "not a directory")
        else:
            report.absent("no KFD topology (amdgpu not loaded, or no AMD GPU)")
        return []
    generation_path = os.path.join(base, "generation_id")
    last = ""
    for _attempt in range(WALK_ATTEMPTS):
        try:
            before = parse_int(read_text(generation_path), generation_path)
            nodes = _walk(os.path.join(base, "nodes"), topology)
            after = parse_int(read_text(generation_path), generation_path)
        except _TornRead as exc:
            last = str(exc)
            continue
        except ReadError as exc:
            report.fail(exc.path, exc.reason)
            return []
        if before == after:
            gpus = sum(1 for node in nodes if is_gpu(node["properties"]))
            report.detail = f"{counted(len(nodes) - gpus, 'CPU node')}, {counted(gpus, 'GPU node')} (generation {after})"
            return nodes
        last = f"generation_id moved from {before} to {after} during the walk"
    # KFD renumbers and rebuilds its tree on every add and remove: a partition switch (§2.2)
    report.switching(generation_path, f"topology kept changing over {WALK_ATTEMPTS} walks ({last})")
    return []


def _walk(nodes_dir: str, topology: bool) -> "list[KfdNode]":
    try:
        names = os.listdir(nodes_dir)
    except FileNotFoundError:
        raise _TornRead(f"{nodes_dir} vanished") from None
    except OSError as exc:
        raise ReadError(nodes_dir, exc.strerror or str(exc)) from None
    nodes: list[KfdNode] = []
    for name in sorted((n for n in names if n.isascii() and n.isdigit()), key=int):
        # f-strings, not os.path.join (~330 calls a tick): nodes_dir ends in "nodes", a name is digits
        node_dir = f"{nodes_dir}/{name}"
        properties_path = f"{node_dir}/properties"
        try:
            properties = read_properties(properties_path, NODE_KEYS)
        except ReadError:
            if not os.path.lexists(node_dir):
                raise _TornRead(f"node {name} vanished mid-walk") from None
            raise
        vram = None
        links = None
        if is_gpu(properties):
            vram = _vram_bytes(node_dir, properties)
            if topology:
                links = _links(node_dir)
        nodes.append(
            {
                "node": int(name),
                "path": node_dir,
                "properties": properties,
                "vram_bytes": vram,
                "links": links,
            }
        )
    return nodes


def _numbered(directory: str) -> "list[str]":
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ReadError(directory, exc.strerror or str(exc)) from None
    return [os.path.join(directory, n) for n in sorted((n for n in names if n.isascii() and n.isdigit()), key=int)]


def _vram_bytes(node_dir: str, properties: "dict[str, int]") -> "int | None":
    """The first public frame-buffer bank's size, else ``local_mem_size`` (old kernels), else None.

    The MI300X CPX capture has ``mem_banks_count 1`` but no ``mem_banks/`` and
    ``local_mem_size 0``: its VRAM is unknown, which is not an error.
    """
    for bank in _numbered(f"{node_dir}/mem_banks"):
        path = os.path.join(bank, "properties")
        bank_properties = read_properties(path, ("heap_type", "size_in_bytes"))
        if "heap_type" not in bank_properties or "size_in_bytes" not in bank_properties:
            raise ReadError(path, "missing heap_type or size_in_bytes")
        if bank_properties["heap_type"] == HEAP_FB_PUBLIC:
            return bank_properties["size_in_bytes"]
    local = properties.get("local_mem_size", 0)
    return local or None


def _links(node_dir: str) -> "list[tuple[int, int]]":
    links = []
    for link in _numbered(os.path.join(node_dir, "io_links")):
        path = os.path.join(link, "properties")
        link_properties = read_properties(path, ("type", "node_to"))
        if "type" not in link_properties or "node_to" not in link_properties:
            raise ReadError(path, "missing type or node_to")
        links.append((link_properties["type"], link_properties["node_to"]))
    return links
