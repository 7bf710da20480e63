"""GPU-to-GPU transfers priced as NCCL's own tuner prices a ring on PCIe (docs/COST_MODEL.md,
"Links"): per protocol a fixed cost plus one latency per ring step, plus the bytes each GPU
moves over the link at the protocol's share of the bus bandwidth; the cheaper protocol wins,
as NCCL picks it per call. Nothing overlaps: TP's all-reduces sit between the layer's GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.errors import UserError
from ppsched.sim.hardware import LinkSpec

# NVIDIA/nccl issue #1530: an 8-byte all-reduce over 8 PCIe 4.0 GPUs (RTX 4090s, whose stock
# driver has no P2P, so most likely host-staged) takes ~42 us: 14 ring steps after LL's base.
MEASURED_8GPU_ALLREDUCE_US = 42.0


@dataclass(frozen=True, slots=True)
class Protocol:
    """One NCCL protocol on a ring: base_us once per call, hop_us per ring step, and the
    share of the link's bus bandwidth its payload gets."""

    name: str
    base_us: float
    hop_us: float
    bandwidth_share: float

    def __post_init__(self) -> None:
        if self.base_us < 0 or self.hop_us < 0:
            raise UserError(f"protocol {self.name!r}: base_us={self.base_us!r}, "
                            f"hop_us={self.hop_us!r}, expected >= 0")
        if not 0 < self.bandwidth_share <= 1:
            raise UserError(f"protocol {self.name!r}: bandwidth_share="
                            f"{self.bandwidth_share!r}, expected in (0, 1]")


# NVIDIA/nccl src/graph/tuning.cc (ring on PCI): LL base 6.6 us, bus bandwidth / 4 (an 8-byte
# flag travels with every 8 bytes); Simple base 8.4 us, hop 5.7 us, full bus bandwidth. LL128
# is enabled over NVLink only. LL's hop is the measured one: (42 - 6.6) / 14 = 2.5 us, where
# the tuner assumes 1.0.
LL = Protocol("LL", base_us=6.6, hop_us=(MEASURED_8GPU_ALLREDUCE_US - 6.6) / 14,
              bandwidth_share=0.25)
SIMPLE = Protocol("Simple", base_us=8.4, hop_us=5.7, bandwidth_share=1.0)
PROTOCOLS = (LL, SIMPLE)


class LinkModel:
    """Ring collectives and point-to-point sends over ``link``. A ring all-reduce over n GPUs
    takes 2(n-1) steps and moves 2(n-1)/n of the buffer through every GPU's link; an
    all-gather n-1 steps and (n-1)/n of the gathered buffer; a send one step and its bytes."""

    __slots__ = ("link", "_bytes_per_ms")

    def __init__(self, link: LinkSpec) -> None:
        self.link = link
        self._bytes_per_ms = tuple(link.bytes_per_ms * p.bandwidth_share for p in PROTOCOLS)

    def _ring_ms(self, steps: int, nbytes_per_link: float) -> float:
        return min((p.base_us + steps * p.hop_us) / 1000.0 + nbytes_per_link / bw
                   for p, bw in zip(PROTOCOLS, self._bytes_per_ms, strict=True))

    def p2p_ms(self, nbytes: float) -> float:
        return self._ring_ms(1, nbytes) if nbytes > 0 else 0.0

    def all_reduce_ms(self, nbytes: float, n: int) -> float:
        if n <= 1 or nbytes <= 0:
            return 0.0
        return self._ring_ms(2 * (n - 1), 2.0 * (n - 1) / n * nbytes)

    def all_gather_ms(self, nbytes_total: float, n: int) -> float:
        if n <= 1 or nbytes_total <= 0:
            return 0.0
        return self._ring_ms(n - 1, (n - 1) / n * nbytes_total)

    def describe(self) -> dict[str, object]:
        return {"link": self.link.name, "model": self.link.model, "p2p": self.link.p2p,
                "bus_gbps": self.link.bus_gbps,
                "protocols": {p.name: {"base_us": round(p.base_us, 3),
                                       "hop_us": round(p.hop_us, 3),
                                       "bandwidth_share": p.bandwidth_share}
                              for p in PROTOCOLS}}


class LatencyBandwidthLink:
    """One fixed latency per operation plus the bytes each GPU moves over the bus bandwidth
    (a ring all-reduce 2(n-1)/n of the buffer, an all-gather (n-1)/n): no per-step latency,
    no protocol choice."""

    __slots__ = ("link", "latency_ms", "bytes_per_ms")

    def __init__(self, link: LinkSpec) -> None:
        self.link = link
        self.latency_ms = link.latency_us / 1000.0
        self.bytes_per_ms = link.bytes_per_ms

    def p2p_ms(self, nbytes: float) -> float:
        return self.latency_ms + nbytes / self.bytes_per_ms if nbytes > 0 else 0.0

    def all_reduce_ms(self, nbytes: float, n: int) -> float:
        if n <= 1 or nbytes <= 0:
            return 0.0
        return self.latency_ms + 2.0 * (n - 1) / n * nbytes / self.bytes_per_ms

    def all_gather_ms(self, nbytes_total: float, n: int) -> float:
        if n <= 1 or nbytes_total <= 0:
            return 0.0
        return self.latency_ms + (n - 1) / n * nbytes_total / self.bytes_per_ms

    def describe(self) -> dict[str, object]:
        return {"link": self.link.name, "model": self.link.model, "p2p": self.link.p2p,
                "bus_gbps": self.link.bus_gbps, "latency_us": self.link.latency_us}


def link_model(link: LinkSpec) -> LinkModel | LatencyBandwidthLink:
    """The cost of ``link``'s transfers under the model it names."""
    return LatencyBandwidthLink(link) if link.model == "latency-bandwidth" else LinkModel(link)
