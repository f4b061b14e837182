"""MIG GPU-instance profiles per product, as ``nvidia-smi mig -lgip`` lists them.

Profiles differ per product (names carry the memory size), so a profile is
validated against the product's own table. IDs are the ones ``nvidia-smi mig
-cgi`` takes. Source: NVIDIA MIG user guide, "Supported MIG Profiles".
"""

from __future__ import annotations

from dataclasses import dataclass

from gmiexp.errors import ConfigError, invalid
from gmiexp.hardware import GPUInfo


@dataclass(frozen=True)
class Profile:
    """One GPU-instance profile: ``slices`` compute slices, at most ``max_count`` per GPU."""

    name: str
    id: int  # nvidia-smi mig -cgi <id>
    slices: int
    max_count: int

    @property
    def memory_gb(self) -> int:
        return int(self.name.split(".")[1].removesuffix("gb").split("+")[0])


def _seven_slice(mem: tuple[int, int, int, int]) -> tuple[Profile, ...]:
    """The common 7-slice table (A100, H100, H200, B200); ``mem`` = GB of 1g, 1g-double, 3g, 7g."""
    one, one2, three, seven = mem
    return (
        Profile(f"1g.{one}gb", 19, 1, 7),
        Profile(f"1g.{one}gb+me", 20, 1, 1),
        Profile(f"1g.{one2}gb", 15, 1, 4),
        Profile(f"2g.{one2}gb", 14, 2, 3),
        Profile(f"3g.{three}gb", 9, 3, 2),
        Profile(f"4g.{three}gb", 5, 4, 1),
        Profile(f"7g.{seven}gb", 0, 7, 1),
    )


PRODUCTS: dict[str, tuple[Profile, ...]] = {
    "A100-40GB": _seven_slice((5, 10, 20, 40)),
    "A100-80GB": _seven_slice((10, 20, 40, 80)),
    "H100-80GB": _seven_slice((10, 20, 40, 80)),
    "H100-NVL": _seven_slice((12, 24, 47, 94)),
    "H200-141GB": _seven_slice((18, 35, 71, 141)),
    "B200": _seven_slice((23, 45, 90, 180)),
    "A30": (  # 4 compute slices
        Profile("1g.6gb", 14, 1, 4),
        Profile("1g.6gb+me", 21, 1, 1),
        Profile("2g.12gb", 5, 2, 2),
        Profile("2g.12gb+me", 6, 2, 1),
        Profile("4g.24gb", 0, 4, 1),
    ),
}


def product_of(gpu: GPUInfo) -> str | None:
    """Map an NVML product name (and memory size) to a key of PRODUCTS; None if unknown."""
    name = gpu.name.upper()
    if "A100" in name:
        return "A100-80GB" if gpu.memory_mb > 50_000 or "80GB" in name else "A100-40GB"
    if "H100" in name:
        return "H100-NVL" if "NVL" in name else "H100-80GB"
    if "H200" in name:
        return "H200-141GB"
    if "B200" in name:
        return "B200"
    if "A30" in name:
        return "A30"
    return None


def profiles_of(gpu: GPUInfo) -> tuple[Profile, ...]:
    """The product's profile table; ConfigError naming the known products if not tabulated."""
    product = product_of(gpu)
    if product is None:
        raise ConfigError(
            f"GPU {gpu.index} ({gpu.name}) has no MIG profile table in gmiexp; known products: "
            f"{', '.join(PRODUCTS)}. Create the instances yourself (nvidia-smi mig -lgip lists them) "
            "and gmiexp maps GMIs onto them, or use backend=mps"
        )
    return PRODUCTS[product]


def find(gpu: GPUInfo, name: str) -> Profile:
    """The profile called ``name`` on this GPU's product; ConfigError listing the valid names."""
    table = profiles_of(gpu)
    bare = name.removeprefix("MIG ").strip()
    for p in table:
        if p.name == bare:
            return p
    raise invalid(f"MIG profile for GPU {gpu.index} ({gpu.name})", name, [p.name for p in table])


def largest_fitting(gpu: GPUInfo, count: int) -> Profile:
    """The largest profile (most slices, then most memory) of which ``count`` fit on one GPU."""
    table = [p for p in profiles_of(gpu) if "+me" not in p.name]
    fitting = [p for p in table if p.max_count >= count]
    if not fitting:
        most = max(p.max_count for p in table)
        raise invalid("gmis_per_gpu for backend=mig", count,
                      f"1..{most} on {gpu.name} (at most {most} MIG instances per GPU)",
                      "use backend=mps, or backend.mps_in_mig=true to share instances")
    return max(fitting, key=lambda p: (p.slices, p.memory_gb))
