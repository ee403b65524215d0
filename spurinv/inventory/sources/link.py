"""PCIe link health of a GPU: current and maximum width and speed, from the function's sysfs
attributes (``drivers/pci/pci-sysfs.c``; docs/partitions.md §3).

Width is judged, speed only reported: GPUs lower the link speed when idle, and a Gen5 card in a
Gen4 server reads 16 of 32 GT/s forever, while a width below what the link can reach is the
stable symptom of a bad riser, slot or retimer. What the link can reach is the smaller of the two
ends' maximum widths (a x16 card in a slot wired x8 is the platform, not a fault). Values that
are not link facts are never a verdict: ``255`` (Link Capabilities unreadable), ``63`` with
``Unknown`` speed (an all-ones config read: the device does not answer), a missing attribute.

An AMD dGPU sits behind its own switch whose endpoint link is internal and always full width;
the physical link is the topmost AMD bridge's (amdgpu's ``amdgpu_device_init_pcie_links`` skips
every upstream bridge of vendor 0x1002 the same way).
"""

import os

from spurinv.inventory.catalog import AMD_VENDOR
from spurinv.inventory.sources.attribute import ReadError, is_bdf, read_optional

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any, Final

    from spurinv.inventory.model import Link, LinkState

UNKNOWN_WIDTH = 255  # PCIE_LNK_WIDTH_UNKNOWN: Link Capabilities read 0
ALL_ONES_WIDTH = 63  # (0xffff & 0x3f0) >> 4: the config read failed, the device is gone
MAX_WIDTH = 32  # x32 is the widest link PCIe defines
_DIGITS = frozenset("0123456789")

OK: "Final" = "ok"
DEGRADED: "Final" = "degraded"
DOWN: "Final" = "down"
UNKNOWN: "Final" = "unknown"
GONE: "Final" = "gone"


def parse_width(text: "str | None") -> "int | None":
    """A width attribute (``"16\\n"``) as an integer; None when absent or not a decimal."""
    word = (text or "").strip()
    if not (word.isascii() and word.isdigit() and len(word) <= 3):
        return None
    return int(word)


def parse_speed(text: "str | None") -> "str | None":
    """A speed attribute, normalised (``8 GT/s`` and ``8.0 GT/s PCIe`` → ``8.0 GT/s``); None for
    ``Unknown``, ``Unknown speed`` or anything else."""
    number = _speed_number((text or "").strip())
    if number is None:
        return None
    value = number if "." in number else f"{number}.0"
    return f"{value} GT/s"


def _speed_number(text: str) -> "str | None":
    """The number of ``re.match(r"^([0-9]{1,3}(?:\\.[0-9]{1,2})?) GT/s(?: PCIe)?$", text)`` (``text``
    is stripped: no final newline for ``$``), in str methods: the tick imports no ``re``."""
    number, unit, rest = text.partition(" GT/s")
    if not unit or rest not in ("", " PCIe"):
        return None
    whole, dot, fraction = number.partition(".")
    if not (1 <= len(whole) <= 3 and _DIGITS.issuperset(whole)):
        return None
    if dot and not (1 <= len(fraction) <= 2 and _DIGITS.issuperset(fraction)):
        return None
    return number


def verdict(width: "int | None", max_width: "int | None", port_max_width: "int | None", speed: "str | None") -> "LinkState":
    """``ok``, ``degraded`` (0 < width < what the link can reach), ``down`` (width 0), ``gone``
    (the all-ones read) or ``unknown`` (nothing to judge). Pure."""
    if width == ALL_ONES_WIDTH and speed is None:
        return GONE
    if width is None or max_width is None or max_width == UNKNOWN_WIDTH or not 0 <= width <= MAX_WIDTH:
        return UNKNOWN
    if max_width > MAX_WIDTH:
        return UNKNOWN
    if width == 0:
        return DOWN
    reachable = max_width
    if port_max_width is not None and 0 < port_max_width <= MAX_WIDTH:
        reachable = min(reachable, port_max_width)
    return DEGRADED if width < reachable else OK


def link_device(path: str, vendor_id: int) -> str:
    """The function whose link is the GPU's physical one: for AMD the topmost AMD bridge above it."""
    if vendor_id != AMD_VENDOR:
        return path
    current = path
    while True:
        parent = os.path.dirname(current)
        if not is_bdf(os.path.basename(parent)) or _vendor(parent) != AMD_VENDOR:
            return current
        current = parent


def read_link(path: str, vendor_id: int) -> "Link | None":
    """The GPU's link as read under its sysfs directory ``path``; None when it has no PCIe attributes."""
    device = link_device(path, vendor_id)
    try:
        width_text = read_optional(os.path.join(device, "current_link_width"))
        if width_text is None:
            return None
        width = parse_width(width_text)
        max_width = parse_width(read_optional(os.path.join(device, "max_link_width")))
        speed = parse_speed(read_optional(os.path.join(device, "current_link_speed")))
        max_speed = parse_speed(read_optional(os.path.join(device, "max_link_speed")))
    except ReadError:
        # an attribute that fails to read (EINVAL: the config read failed) is no link fact
        return {"device": os.path.basename(device), "width": None, "max_width": None, "speed": None,
                "max_speed": None, "state": UNKNOWN}  # fmt: skip
    port = os.path.dirname(device)
    port_max = None
    if is_bdf(os.path.basename(port)):
        try:
            port_max = parse_width(read_optional(os.path.join(port, "max_link_width")))
        except ReadError:
            port_max = None
    return {
        "device": os.path.basename(device),
        "width": width,
        "max_width": max_width,
        "speed": speed,
        "max_speed": max_speed,
        "state": verdict(width, max_width, port_max, speed),
    }


def _vendor(path: str) -> "int | None":
    try:
        text = read_optional(os.path.join(path, "vendor"))
    except ReadError:
        return None
    try:
        return int(text.strip(), 16) if text else None
    except ValueError:
        return None


def degraded(devices: "Iterable[Mapping[str, Any]]") -> "dict[str, Mapping[str, Any]]":
    """The degraded links of one reading's devices (JSON form), by GPU (``pci_bdf``)."""
    found: dict[str, Mapping[str, Any]] = {}
    for device in devices:
        link = device.get("link")
        if isinstance(link, dict) and link.get("state") == DEGRADED:
            found.setdefault(str(device["pci_bdf"]), link)
    return found


def confirmed(readings: "Sequence[Mapping[str, Any]]") -> "list[dict[str, Any]]":
    """Links degraded in the last two successful readings (JSON form), like every other fact: one
    reading never acts. A link flapping between two narrow widths (x8, x4) is degraded in both;
    the latest width is the one said. ``[{"pci_bdf", "width", "max_width", "speed", "max_speed"}]``."""
    if len(readings) < 2 or not all(reading.get("ok") and reading.get("inventory") for reading in readings[-2:]):
        return []
    before = degraded(readings[-2]["inventory"]["devices"])
    now = degraded(readings[-1]["inventory"]["devices"])
    return [
        {"pci_bdf": bdf, **{key: link.get(key) for key in ("width", "max_width", "speed", "max_speed")}}
        for bdf, link in sorted(now.items())
        if bdf in before
    ]


def still_accepted(accepted: "Sequence[str]", readings: "Sequence[Mapping[str, Any]]") -> "list[str]":
    """The accepted links (``"<bdf> x<width>"``, :attr:`spurinv.state.file.State.accepted_links`) that
    stay accepted: one is dropped only when the last two successful readings both show its GPU's
    link at a known width other than the accepted one, like every other fact; an unreadable,
    unknown or failed reading, or one odd reading, keeps it."""
    if len(readings) < 2 or not all(reading.get("ok") and reading.get("inventory") for reading in readings[-2:]):
        return list(accepted)
    widths: list[dict[str, Any]] = []
    for reading in readings[-2:]:
        seen: dict[str, Any] = {}
        for device in reading["inventory"]["devices"]:
            found = device.get("link")
            if isinstance(found, dict) and found.get("state") in (OK, DEGRADED):
                seen.setdefault(str(device["pci_bdf"]), found.get("width"))
        widths.append(seen)
    kept = []
    for key in accepted:
        bdf, _, width = key.rpartition(" x")
        moved = all(bdf in seen and f"{seen[bdf]}" != width for seen in widths)
        if not moved:
            kept.append(key)
    return kept


BAD = frozenset({DEGRADED, DOWN, GONE})
_BDF_WORD = r"\b[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b"


def named(reason: str) -> "set[str]":
    """The GPUs a link drain's reason names (``… 0000:88:00.0 PCIe x16→x8``)."""
    import re  # not at the top: the timer's tick reads no reason, and importing re costs it ~8 ms

    return set(re.findall(_BDF_WORD, reason))


def back(readings: "Sequence[Mapping[str, Any]]", gpus: "Iterable[str]") -> bool:
    """Whether a link drain may be lifted: the last two readings succeeded, each GPU in ``gpus``
    (the drain's) shows its link ``ok`` (full width, or no link attributes) in both, and no other link is degraded, down
    or gone in either. A narrower width, x0, an unreadable link or a failed reading between keeps
    the drain: lifting on anything less is how a drain and a lift would take turns."""
    if len(readings) < 2 or not all(reading.get("ok") and reading.get("inventory") for reading in readings[-2:]):
        return False
    wanted = set(gpus)
    for reading in readings[-2:]:
        states: dict[str, str] = {}
        for device in reading["inventory"]["devices"]:
            link = device.get("link")
            # no PCIe attributes at all (link None) is a kernel without them, not a bad read
            state = str(link.get("state")) if isinstance(link, dict) else OK
            if state in BAD:
                return False
            states.setdefault(str(device.get("pci_bdf")), state)
        if any(states.get(bdf) != OK for bdf in wanted):
            return False
    return True


def line(link: "Mapping[str, Any]") -> str:
    """``0000:05:00.0 PCIe x16→x8`` (the words of a drain reason)."""
    return f"{link['pci_bdf']} PCIe x{link['max_width']}→x{link['width']}"


def changes(before: "Iterable[Mapping[str, Any]] | None", after: "Iterable[Mapping[str, Any]]") -> "list[str]":
    """What differs in link health from ``before`` to ``after`` (devices, JSON form), one line per
    GPU: ``0000:88:00.0 PCIe x16→x8 (degraded; was x16)`` or ``… back to x16``. Not schedulable:
    a diff reports it beside the inventory's difference, never in it."""
    old = degraded(before or ())
    widths = {str(d["pci_bdf"]): d["link"] for d in before or () if isinstance(d.get("link"), dict)}
    new = degraded(after)
    lines = []
    for bdf, link in sorted(new.items()):
        was = widths.get(bdf)
        if bdf not in old or old[bdf].get("width") != link.get("width"):
            previously = f"; was x{was['width']}" if was and was.get("width") is not None else ""
            lines.append(f"{line({'pci_bdf': bdf, **link})} (degraded{previously})")
    for bdf, link in sorted(old.items()):
        if bdf not in new:
            lines.append(f"{bdf} PCIe back to x{link.get('max_width')} (was x{link.get('width')})")
    return lines
