"""A tiny deterministic cost model for engine tests (the real one is ppsched.sim.cost)."""

from __future__ import annotations

from ppsched.core.batch import BatchShape
from ppsched.core.requests import RequestSpec


class FakeCost:
    """Stage time = base + per-token slope, with a step after every 128 batched tokens."""

    def __init__(self, capacity: int = 100_000, *, base_ms: float = 5.0, per_token_ms: float = 0.05,
                 step_ms: float = 2.0, link_ms: float = 0.5, cpu_ms: float = 0.2) -> None:
        self.kv_capacity_tokens = capacity
        self.base_ms, self.per_token_ms, self.step_ms = base_ms, per_token_ms, step_ms
        self._link, self._cpu = link_ms, cpu_ms

    def stage_ms(self, stage: int, shape: BatchShape) -> float:
        n = shape.batched_tokens
        return (self.base_ms + self.per_token_ms * n + self.step_ms * ((n - 1) // 128)
                + 1e-5 * shape.decode_ctx_sum)

    def link_ms(self, shape: BatchShape) -> float:
        return self._link

    def tp_step_ms(self, shape: BatchShape) -> float:
        return 1.5 * self.stage_ms(0, shape)

    def cpu_overhead_ms(self, shape: BatchShape) -> float:
        return self._cpu

    def describe(self) -> dict:
        return {"type": "fake"}


class FakeWorkload:
    def __init__(self, requests: list[RequestSpec]) -> None:
        self.requests = tuple(requests)


def specs(rows: list[tuple[float, int, int]]) -> FakeWorkload:
    """(arrival_s, prompt, output) rows -> a workload with ids 0..n-1."""
    return FakeWorkload([RequestSpec(i, a, p, o) for i, (a, p, o) in enumerate(rows)])
