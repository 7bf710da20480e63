"""Scripted decode snapshots for the DS tests (helpers only, no tests here)."""

from __future__ import annotations

from ppsched.core.snapshots import DecodeSnapshot, DecodingRequest
from ppsched.delay_sched.ladder import BoundaryLadder
from ppsched.delay_sched.trimmer import DelayTrimmer

SLO_TPOT_MS = 200.0
LADDER = (128, 256, 384, 512)


def req(req_id: int, *, held_streak: int = 0, tpot_ms: float = 50.0, generated: int = 10,
        now_s: float = 100.0) -> DecodingRequest:
    """Request ``req_id`` arrived at second ``req_id`` (so ids are arrival order)."""
    first = now_s - tpot_ms / 1000.0 * (generated - 1)
    return DecodingRequest(req_id=req_id, arrival_s=float(req_id), context_len=500 + generated,
                           generated_tokens=generated, first_token_s=first, last_token_s=now_s,
                           held_streak=held_streak)


def snap(running: list[DecodingRequest], held: list[DecodingRequest] | None = None, *,
         slot_sizes: tuple[int, ...] | None = None, recent_tpot_ms: tuple[float, ...] = (50.0,),
         kv_free: float = 0.05, queued_tokens: int = 0, slot: int = 0) -> DecodeSnapshot:
    held = held or []
    n = len(running) + len(held)
    return DecodeSnapshot(now_s=100.0, slot=slot, pp_size=len(slot_sizes or (n,)),
                          running=tuple(running), held=tuple(held),
                          slot_sizes=slot_sizes or (n,), kv_free_tokens=int(kv_free * 10_000),
                          kv_total_tokens=10_000, queued_requests=1 if queued_tokens else 0,
                          queued_prompt_tokens=queued_tokens, recent_tpot_ms=recent_tpot_ms)


def trimmer(boundaries: tuple[int, ...] = LADDER, k: int = 1) -> DelayTrimmer:
    return DelayTrimmer(BoundaryLadder(boundaries), SLO_TPOT_MS, k)
