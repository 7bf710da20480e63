"""Shared builders for the DCP tests: scripted snapshots and a transparent fake predictor."""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.core.batch import BatchShape
from ppsched.core.snapshots import ChunkSnapshot, QueuedRequest, SlotLoad


def make_snap(*, iteration: int = 0, slot: int = 0, pp_size: int = 4, now_s: float = 100.0,
              queue: Sequence[QueuedRequest] = (), chunked: QueuedRequest | None = None,
              decodes: Sequence[int] = (0, 0, 0, 0), ctx_per_decode: int = 1000,
              kv_free: int = 50_000, kv_total: int = 100_000, ttft: Sequence[float] = (),
              tpot: Sequence[float] = (), arrived_tokens: int = 0, max_chunk: int = 2048,
              stage_ms: Sequence[float] = ()) -> ChunkSnapshot:
    return ChunkSnapshot(
        now_s=now_s, iteration=iteration, slot=slot, pp_size=pp_size, queue=tuple(queue),
        queued_requests=len(queue),
        queued_prompt_tokens=sum(q.remaining_prompt_tokens for q in queue),
        chunked=chunked,
        slots=tuple(SlotLoad(i, d, d * ctx_per_decode) for i, d in enumerate(decodes)),
        kv_free_tokens=kv_free, kv_total_tokens=kv_total, recent_ttft_ms=tuple(ttft),
        recent_tpot_ms=tuple(tpot), recent_stage_ms=tuple(stage_ms),
        arrived_requests_total=len(queue),
        arrived_prompt_tokens_total=arrived_tokens, max_chunk_tokens=max_chunk)


class LinearFake:
    """stage_ms = base + per_token * batched_tokens + per_ctx * decode_ctx_sum; records updates."""

    def __init__(self, base: float = 10.0, per_token: float = 0.02, per_ctx: float = 1e-4):
        self.base, self.per_token, self.per_ctx = base, per_token, per_ctx
        self.updates: list[tuple[BatchShape, float]] = []

    def predict(self, shape: BatchShape) -> float:
        return (self.base + self.per_token * shape.batched_tokens
                + self.per_ctx * shape.decode_ctx_sum)

    def predict_many(self, shapes: Sequence[BatchShape]) -> list[float]:
        return [self.predict(s) for s in shapes]

    def update(self, shape: BatchShape, measured_ms: float) -> None:
        self.updates.append((shape, measured_ms))


def waiting(req_id: int, arrival_s: float, tokens: int, remaining: int | None = None
            ) -> QueuedRequest:
    return QueuedRequest(req_id, arrival_s, tokens, tokens if remaining is None else remaining)
