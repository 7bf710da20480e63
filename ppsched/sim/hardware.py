"""GPUs and links the simulator knows, every number with its source (see docs/COST_MODEL.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ppsched.core.errors import UserError

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One GPU model plus the GPU-to-GPU link of the box it sits in.

    gpu_mem_gb is the capacity the CUDA runtime reports (decimal GB), which is what SGLang's
    mem_fraction_static multiplies. link_gbps is the nominal one-direction link bandwidth;
    link_efficiency the fraction a large NCCL transfer achieves; link_latency_us the fixed cost
    of one NCCL operation (send/recv or a whole collective).
    """

    name: str
    gpu_mem_gb: float
    hbm_gbps: float
    bf16_tflops: float
    link_latency_us: float
    link_gbps: float
    link_efficiency: float = 1.0
    link_kind: str = "pcie4-x16"
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for field_name in ("gpu_mem_gb", "hbm_gbps", "bf16_tflops", "link_gbps"):
            value = getattr(self, field_name)
            if not (math.isfinite(value) and value > 0):
                raise UserError(f"hardware {self.name!r}: {field_name}={value!r}, expected > 0")
        if not (math.isfinite(self.link_latency_us) and self.link_latency_us >= 0):
            raise UserError(f"hardware {self.name!r}: link_latency_us={self.link_latency_us!r}, "
                            "expected >= 0")
        if not 0 < self.link_efficiency <= 1:
            raise UserError(f"hardware {self.name!r}: link_efficiency={self.link_efficiency!r}, "
                            "expected in (0, 1]")

    @property
    def gpu_mem_bytes(self) -> float:
        return self.gpu_mem_gb * 1e9

    @property
    def link_bytes_per_ms(self) -> float:
        """Achieved link bandwidth in bytes per millisecond."""
        return self.link_gbps * self.link_efficiency * 1e6

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity above which an op is compute-bound on this GPU (roofline)."""
        return self.bf16_tflops * 1e12 / (self.hbm_gbps * 1e9)

    def describe(self) -> dict[str, object]:
        out = asdict(self)
        out["sources"] = dict(self.sources)
        return out


# The link is modelled, not measured (no PCIe profile exists): calculon's A100 system file gives
# its PCIe-class network 25 GB/s, efficiency 0.9; PCIe 4.0 x16 itself is
# 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction, which 25 GB/s of payload is ~80% of.
# Latency: NVIDIA/nccl issue #1530 measures ~42 us for an 8-byte all-reduce over PCIe GPUs
# (calculon's 20 us is a network figure, not a measured PCIe NCCL operation).
PCIE_NCCL_LATENCY_US = 42.0
_PCIE_SOURCES = (
    ("link_gbps", "calculon-ai/calculon systems/a100_80g.json PCIe-class network: 25 GB/s "
                  "(PCIe 4.0 x16 raw: 16 GT/s * 16 lanes * 128/130 = 31.5 GB/s per direction)"),
    ("link_efficiency", "calculon-ai/calculon systems/a100_80g.json: efficiency 0.9"),
    ("link_latency_us", "NVIDIA/nccl issue #1530: ~42 us for an 8-byte all-reduce over PCIe "
                        "GPUs (the smallest NCCL operation's fixed cost)"),
)

_HARDWARE: dict[str, HardwareSpec] = {
    "a100-40g-pcie": HardwareSpec(
        name="a100-40g-pcie",
        gpu_mem_gb=40339.3125 * MIB / 1e9,  # 42.30 GB
        hbm_gbps=1555.0,
        bf16_tflops=312.0,
        link_latency_us=PCIE_NCCL_LATENCY_US,
        link_gbps=25.0,
        link_efficiency=0.9,
        sources=(
            ("gpu_mem_gb", "torch total memory of an NVIDIA A100-PCIE-40GB: 40339.3125 MiB "
                           "(reported in a PrunaAI results.json on the HF hub)"),
            ("hbm_gbps", "NVIDIA A100 datasheet: A100 40GB PCIe 1,555 GB/s"),
            ("bf16_tflops", "NVIDIA A100 datasheet: BF16 tensor core 312 TFLOP/s dense"),
            *_PCIE_SOURCES,
        ),
    ),
    "a100-80g": HardwareSpec(
        name="a100-80g",
        gpu_mem_gb=81920 * MIB / 1e9,  # 85.90 GB
        hbm_gbps=2039.0,
        bf16_tflops=312.0,
        link_latency_us=PCIE_NCCL_LATENCY_US,
        link_gbps=25.0,
        link_efficiency=0.9,
        sources=(
            ("gpu_mem_gb", "vidur configs/device_configs/a100.yml: 80 GB (nvidia-smi: 81920 MiB)"),
            ("hbm_gbps", "NVIDIA A100 datasheet: A100 80GB SXM 2,039 GB/s (the profiles' form "
                         "factor is not stated; we assume SXM)"),
            ("bf16_tflops", "vidur configs/device_configs/a100.yml: fp16_tflops 312"),
            *_PCIE_SOURCES,
        ),
    ),
}

# The GPU the vendored vidur profiles were measured on.
PROFILE_HARDWARE = "a100-80g"


def known_hardware() -> tuple[str, ...]:
    return tuple(sorted(_HARDWARE))


def get_hardware(name: str) -> HardwareSpec:
    """The spec for ``name`` (case-insensitive); UserError listing the known names otherwise."""
    spec = _HARDWARE.get(str(name).lower())
    if spec is None:
        raise UserError(f"unknown hardware {name!r}: expected one of {list(known_hardware())}")
    return spec
