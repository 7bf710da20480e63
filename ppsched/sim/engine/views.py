"""Snapshots for the policies, from the engine's running sums (cheap: no scan of every request)."""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from ppsched.core.snapshots import ChunkSnapshot, DecodeSnapshot, QueuedRequest, SlotLoad

if TYPE_CHECKING:
    from ppsched.sim.engine.loop import Engine

QUEUE_VIEW = 256  # FCFS-oldest queued requests a snapshot lists; the totals stay exact


class QueueView:
    """The FCFS-oldest ``QUEUE_VIEW`` queued requests as a tuple, rebuilt only when the engine
    says the head of its queue changed (queued requests' remaining tokens never change)."""

    def __init__(self) -> None:
        self.version = -1
        self.view: tuple[QueuedRequest, ...] = ()

    def get(self, eng: Engine) -> tuple[QueuedRequest, ...]:
        if self.version != eng.queue_version:
            self.view = tuple(r.queued_view() for r in islice(eng.queue, QUEUE_VIEW))
            self.version = eng.queue_version
        return self.view


def chunk_snapshot(eng: Engine, slot: int, now: float) -> ChunkSnapshot:
    chunked = eng.chunked.queued_view() if eng.chunked is not None else None
    return ChunkSnapshot(
        now_s=now,
        iteration=eng.mb_count,
        slot=slot,
        pp_size=eng.slots,
        queue=eng.queue_view.get(eng),
        queued_requests=len(eng.queue) + (chunked is not None),
        queued_prompt_tokens=eng.queued_tokens,
        chunked=chunked,
        slots=tuple(SlotLoad(s, len(eng.members[s]), eng.slot_ctx[s]) for s in range(eng.slots)),
        kv_free_tokens=eng.kv_free(),
        kv_total_tokens=eng.capacity,
        recent_ttft_ms=tuple(eng.recent_ttft),
        recent_tpot_ms=tuple(eng.recent_tpot),
        recent_stage_ms=tuple(eng.recent_stage),
        arrived_requests_total=eng.arrived,
        arrived_prompt_tokens_total=eng.arrived_tokens,
        max_chunk_tokens=eng.max_chunk_tokens,
    )


def decode_snapshot(eng: Engine, slot: int, now: float) -> DecodeSnapshot:
    # members are kept in admission order; the snapshot promises arrival order.
    members = sorted(eng.members[slot], key=lambda r: (r.arrival_s, r.rid))
    return DecodeSnapshot(
        now_s=now,
        slot=slot,
        pp_size=eng.slots,
        running=tuple(r.decoding_view() for r in members if r.held_streak == 0),
        held=tuple(r.decoding_view() for r in members if r.held_streak > 0),
        slot_sizes=tuple(len(m) for m in eng.members),
        kv_free_tokens=eng.kv_free(),
        kv_total_tokens=eng.capacity,
        queued_requests=len(eng.queue) + (eng.chunked is not None),
        queued_prompt_tokens=eng.queued_tokens,
        recent_tpot_ms=tuple(eng.recent_tpot),
    )
