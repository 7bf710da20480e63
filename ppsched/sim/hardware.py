"""GPUs and links the simulator knows, every number with its source (see docs/COST_MODEL.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ppsched.core.errors import UserError

MIB = 1024 * 1024
LINK_MODELS = ("nccl-ring", "latency-bandwidth")


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """The GPU-to-GPU path of a box, as NCCL drives it.

    p2p: GPUs read and write each other's memory over PCIe (NCCL's P2P transport); otherwise
    every transfer is staged through pinned host memory (NCCL's SHM transport). bus_gbps is
    the bandwidth one GPU sustains in each direction while it sends and receives at once,
    which is what every GPU of a ring collective does (NCCL's "bus bandwidth").
    """

    name: str
    p2p: bool
    bus_gbps: float
    sources: tuple[tuple[str, str], ...] = ()
    # "nccl-ring": NCCL's per-protocol ring cost (ppsched/sim/cost/link.py); "latency-bandwidth":
    # one fixed latency_us per operation plus bytes over bus_gbps, the model the published
    # tables were measured with.
    model: str = "nccl-ring"
    latency_us: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserError(f"link name {self.name!r}: expected a non-empty string")
        if self.model not in LINK_MODELS:
            raise UserError(f"link {self.name!r}: model={self.model!r}, expected one of "
                            f"{', '.join(LINK_MODELS)}")
        if not (math.isfinite(self.latency_us) and self.latency_us >= 0):
            raise UserError(f"link {self.name!r}: latency_us={self.latency_us!r}, expected >= 0")
        if not isinstance(self.p2p, bool):
            raise UserError(f"link {self.name!r}: p2p={self.p2p!r}, expected True or False")
        if not (isinstance(self.bus_gbps, (int, float)) and math.isfinite(self.bus_gbps)
                and self.bus_gbps > 0):
            raise UserError(f"link {self.name!r}: bus_gbps={self.bus_gbps!r}, expected > 0")

    @property
    def bytes_per_ms(self) -> float:
        return self.bus_gbps * 1e6


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One GPU model plus the GPU-to-GPU link of the box it sits in.

    gpu_mem_gb is the capacity the CUDA runtime reports (decimal GB), which is what SGLang's
    mem_fraction_static multiplies.
    """

    name: str
    gpu_mem_gb: float
    hbm_gbps: float
    bf16_tflops: float
    link: LinkSpec
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for field_name in ("gpu_mem_gb", "hbm_gbps", "bf16_tflops"):
            value = getattr(self, field_name)
            if not (math.isfinite(value) and value > 0):
                raise UserError(f"hardware {self.name!r}: {field_name}={value!r}, expected > 0")
        if not isinstance(self.link, LinkSpec):
            raise UserError(f"hardware {self.name!r}: link={self.link!r}, expected a LinkSpec")

    @property
    def gpu_mem_bytes(self) -> float:
        return self.gpu_mem_gb * 1e9

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity above which an op is compute-bound on this GPU (roofline)."""
        return self.bf16_tflops * 1e12 / (self.hbm_gbps * 1e9)

    def describe(self) -> dict[str, object]:
        out = asdict(self)
        out["sources"] = dict(self.sources)
        out["link"]["sources"] = dict(self.link.sources)
        return out


# PCIe 4.0 x16 between GPUs with peer-to-peer access (a PCIe switch, or a root complex that
# forwards peer traffic). Measured on Ampere PCIe 4.0 cards (8x A40, AMD EPYC): 40-50 GB/s
# bidirectional between GPUs on different root ports, i.e. 20-25 GB/s each way.
PCIE4_P2P = LinkSpec(
    name="pcie4-p2p", p2p=True, bus_gbps=22.5,
    sources=(
        ("bus_gbps", "NVIDIA/nccl-tests issue #74: p2pBandwidthLatencyTest on 8x A40 (PCIe 4.0, "
                     "AMD EPYC 7302), bidirectional P2P=Enabled 40-50 GB/s between GPUs on "
                     "different root ports, 20-25 GB/s each way; tinygrad/open-gpu-kernel-"
                     "modules issue #36: 4x RTX 4090 with P2P on an AMD EPYC 7773X, all-reduce "
                     "bus bandwidth 25.7-26.0 GB/s at 256 MB-2 GB; NVIDIA/nccl "
                     "src/graph/topo.cc prices a 16 GT/s x16 link at 16 x 120 / 80 = 24 GB/s"),
        ("p2p", "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p: P2P up to PATH_SYS on AMD "
                "hosts, up to PATH_PXB (through PCIe switches only) on Intel hosts"),
    ),
)
# The same box without peer-to-peer: NCCL's SHM transport writes into pinned host memory and
# the peer reads it back, so each transfer crosses PCIe twice and the host's memory and
# socket interconnect carry every byte.
PCIE4_HOST_STAGED = LinkSpec(
    name="pcie4-host-staged", p2p=False, bus_gbps=10.0,
    sources=(
        ("bus_gbps", "NVIDIA/nccl-tests issue #74: the same 8x A40 box, bidirectional "
                     "P2P=Disabled 19-21 GB/s between any two GPUs, ~10 GB/s each way; "
                     "NVIDIA/nccl src/graph/topo.h prices a Skylake-to-Ice-Lake socket "
                     "link (SKL_QPI_BW) at 10 GB/s; NVIDIA/nccl issue #406: SHM between sockets "
                     "reaches 9 or 6 GB/s where a NIC path reaches 12"),
        ("p2p", "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p: on Intel hosts GPUs that "
                "meet only at the CPU (PATH_PHB, PATH_SYS) do not use P2P and their traffic "
                "is diverted through the CPU; NVIDIA/nccl issue #428: P2P through recent "
                "Intel CPUs is slow, so it is off by default"),
    ),
)

# The link every published table was measured with: calculon's A100 system file gives its
# PCIe-class network 25 GB/s at efficiency 0.9, and one NCCL operation a fixed ~42 us. It prices
# TP4's all-reduces below what a box without P2P pays (docs/COST_MODEL.md, "Links"); the named
# variants -p2p and -nop2p use NCCL's ring model.
PCIE4_LATENCY_BANDWIDTH = LinkSpec(
    name="pcie4-latency-bandwidth", p2p=True, bus_gbps=25.0 * 0.9,
    model="latency-bandwidth", latency_us=42.0,
    sources=(
        ("bus_gbps", "calculon-ai/calculon systems/a100_80g.json PCIe-class network: 25 GB/s, "
                     "efficiency 0.9 (PCIe 4.0 x16 raw: 31.5 GB/s per direction)"),
        ("latency_us", "NVIDIA/nccl issue #1530: ~42 us for an 8-byte all-reduce over PCIe "
                       "GPUs (the smallest NCCL operation's fixed cost)"),
    ),
)

_A100_40G_PCIE_SOURCES = (
    ("gpu_mem_gb", "torch total memory of an NVIDIA A100-PCIE-40GB: 40339.3125 MiB "
                   "(reported in a PrunaAI results.json on the HF hub)"),
    ("hbm_gbps", "NVIDIA A100 datasheet: A100 40GB PCIe 1,555 GB/s"),
    ("bf16_tflops", "NVIDIA A100 datasheet: BF16 tensor core 312 TFLOP/s dense"),
)


def _a100_40g_pcie(name: str, link: LinkSpec) -> HardwareSpec:
    return HardwareSpec(name=name, gpu_mem_gb=40339.3125 * MIB / 1e9,  # 42.30 GB
                        hbm_gbps=1555.0, bf16_tflops=312.0, link=link,
                        sources=_A100_40G_PCIE_SOURCES)


# The plain name keeps the link the published tables were measured with; moving it to the
# host-staged ring (NCCL's default on an Intel host whose GPUs sit on the CPU's root ports)
# changes every simulated figure, PP's activation sends included, and needs the tables
# re-measured first (docs/COST_MODEL.md, "Links").
DEFAULT_PCIE_LINK = PCIE4_LATENCY_BANDWIDTH

_HARDWARE: dict[str, HardwareSpec] = {
    "a100-40g-pcie": _a100_40g_pcie("a100-40g-pcie", DEFAULT_PCIE_LINK),
    "a100-40g-pcie-p2p": _a100_40g_pcie("a100-40g-pcie-p2p", PCIE4_P2P),
    "a100-40g-pcie-nop2p": _a100_40g_pcie("a100-40g-pcie-nop2p", PCIE4_HOST_STAGED),
    "a100-80g": HardwareSpec(
        name="a100-80g",
        gpu_mem_gb=81920 * MIB / 1e9,  # 85.90 GB
        hbm_gbps=2039.0,
        bf16_tflops=312.0,
        link=PCIE4_LATENCY_BANDWIDTH,
        sources=(
            ("gpu_mem_gb", "vidur configs/device_configs/a100.yml: 80 GB (nvidia-smi: 81920 MiB)"),
            ("hbm_gbps", "NVIDIA A100 datasheet: A100 80GB SXM 2,039 GB/s (the profiles' form "
                         "factor is not stated; we assume SXM)"),
            ("bf16_tflops", "vidur configs/device_configs/a100.yml: fp16_tflops 312"),
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
