"""GPU-to-GPU transfers over the box's link: latency + size / achieved bandwidth (no profile)."""

from __future__ import annotations

from ppsched.sim.hardware import HardwareSpec


class LinkModel:
    """NCCL-style transfers. One operation pays the link latency once; a ring collective over
    n GPUs moves 2(n-1)/n of the buffer through each link (all-reduce) or (n-1)/n (all-gather)."""

    __slots__ = ("latency_ms", "bytes_per_ms")

    def __init__(self, hw: HardwareSpec) -> None:
        self.latency_ms = hw.link_latency_us / 1000.0
        self.bytes_per_ms = hw.link_bytes_per_ms

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
