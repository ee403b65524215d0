"""What we know about GPU models: PCI device ids, XCC counts, partition modes, name normalising.

The AMD table is spur's ``detect_amd_gpu_type_from_id`` (docs/spur.md §1), so a node reports the
same GPU type to spur and to Slurm. Stdlib only (hot path).
"""

# PCI vendor ids, as sysfs ``vendor`` and KFD's ``vendor_id`` give them (the PCI-SIG's assignments)
AMD_VENDOR = 0x1002
NVIDIA_VENDOR = 0x10DE
INTEL_VENDOR = 0x8086

AMD_MODELS = {
    0x74A1: "mi300x", 0x74A9: "mi300x", 0x74BD: "mi300x",
    0x74A0: "mi300a",
    0x74A5: "mi325x",
    0x74A2: "mi308x", 0x74A8: "mi308x",
    0x75A0: "mi350x",
    0x75A3: "mi355x",
    0x740F: "mi210",
    0x7408: "mi250x", 0x740C: "mi250x",
    0x738C: "mi100", 0x738E: "mi100",
    0x7550: "rx9070", 0x7551: "rx9070",
}  # fmt: skip

# XCCs per package = partitions in CPX (kernel aqua_vanjaram.c: 8 XCCs → SPX/DPX/QPX/CPX,
# 6 → SPX/TPX/CPX, 4 → SPX/DPX/CPX; the MI308X capture shows 4 partitions in CPX).
XCC_COUNT = {"mi300x": 8, "mi325x": 8, "mi350x": 8, "mi355x": 8, "mi300a": 6, "mi308x": 4}
FIXED_PARTITIONS = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4}

INTEL_MODELS = {0x0BD5: "max1550", 0x0BDA: "max1100", 0x56C0: "flex170", 0x56C1: "flex140"}

_VENDOR_WORDS = r"(?i)\b(nvidia|amd|intel|tesla|radeon|instinct|geforce)\b"
_SEPARATORS = r"[^a-z0-9.]+"


def normalize(product: str) -> str:
    """Turn a product name into a GRES-friendly type: "NVIDIA H100 80GB HBM3" → "h100-80gb-hbm3"."""
    import re  # not at the top: a model the tables know (the tick's case) needs no re, ~8 ms

    words = re.sub(_VENDOR_WORDS, " ", product.lower())
    return re.sub(_SEPARATORS, "-", words).strip("-") or "gpu"


def model_for(vendor: str, device_id: int, product: "str | None") -> str:
    """The GPU type: from the PCI device id where known, else from the product name."""
    if vendor == "amd" and device_id in AMD_MODELS:
        return AMD_MODELS[device_id]
    if vendor == "intel" and device_id in INTEL_MODELS:
        return INTEL_MODELS[device_id]
    if product:
        return normalize(product)
    return f"{'amdgpu' if vendor == 'amd' else vendor}-0x{device_id:04x}"


def expected_partitions(mode: "str | None", model: str) -> "int | None":
    """How many logical devices one package shows in ``mode``; None when we cannot tell."""
    if mode is None:
        return None
    if mode in FIXED_PARTITIONS:
        return FIXED_PARTITIONS[mode]
    if mode == "CPX":
        return XCC_COUNT.get(model)
    return None
