"""Building one slot's next batch, as SGLang's get_new_batch_prefill / update_running_batch do."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ppsched.core.batch import BatchShape
from ppsched.sim.engine.state import Req
from ppsched.sim.engine.views import chunk_snapshot, decode_snapshot
from ppsched.sim.invariants import SimInvariantError

if TYPE_CHECKING:
    from ppsched.sim.engine.loop import Engine


class Launched:
    """A microbatch in flight: what it carries and when its result is back on rank 0."""

    __slots__ = ("slot", "prefill", "decodes", "shape", "chunk", "predicted_ms", "decision",
                 "trim", "return_s")

    def __init__(self, slot: int, prefill: list[tuple[Req, int, int, bool]], decodes: list[Req],
                 shape: BatchShape, chunk: int, predicted_ms: float,
                 decision: dict | None, trim: dict | None) -> None:
        self.slot = slot
        self.prefill = prefill  # (request, prefix, extend, completes its prompt)
        self.decodes = decodes
        self.shape = shape
        self.chunk = chunk  # the chunk budget this prefill batch was built under; 0 for decode
        self.predicted_ms = predicted_ms
        self.decision = decision
        self.trim = trim
        self.return_s = math.nan


def _take(eng: Engine, req: Req, budget: int, *, reserved: bool
          ) -> tuple[Req, int, int, bool]:
    """Prefill the next ``min(remaining, budget)`` tokens of ``req`` (KV allocated now)."""
    extend = min(req.remaining, budget)
    prefix = req.prefill_len - req.remaining
    eng.allocate(extend, reserved=reserved)
    req.kv += extend
    req.remaining -= extend
    eng.queued_tokens -= extend
    return req, prefix, extend, req.remaining == 0


def build_prefill(eng: Engine, slot: int, now: float) -> Launched | None:
    if not eng.queue and eng.chunked is None:
        return None
    eng.flush_observations(now)
    decision = eng.controller.decide(chunk_snapshot(eng, slot, now))
    chunk = min(decision.chunk_tokens, eng.max_chunk_tokens)
    entry = {"type": "chunk", "time_s": now, "slot": slot, "iteration": eng.mb_count,
             "chunk": chunk, "requested_chunk": decision.chunk_tokens, "reason": decision.reason,
             "inputs": dict(decision.inputs), "predicted_ms": decision.predicted_stage_ms,
             "mb": -1}
    eng.log.decisions.append(entry)
    members = eng.members[slot]
    # --mixed-chunk: the slot's decodes ride along and spend chunk budget (one token each).
    mixed = eng.mixed_chunk and members and eng.kv_free() >= len(members)
    budget = chunk - (len(members) if mixed else 0)
    pieces: list[tuple[Req, int, int, bool]] = []
    if eng.chunked is not None and budget > 0:
        piece = _take(eng, eng.chunked, budget, reserved=True)
        pieces.append(piece)
        budget -= piece[2]
        if piece[3]:
            eng.chunked = None
    admitted = 0
    # SGLang's PrefillAdder: running requests are charged their remaining output tokens times
    # new_token_ratio; a new request needs its whole input plus its remaining output.
    room = eng.kv_free() - eng.rem_output * eng.new_token_ratio - (len(members) if mixed else 0)
    while budget > 0 and eng.queue and eng.chunked is None:
        req = eng.queue[0]
        if eng.active >= eng.max_running or len(members) + admitted >= eng.per_slot_cap:
            break
        lost = 0
        if eng.cache is not None and req.spec.prefix_block_ids:
            lost = eng.match_and_lock(req, now)  # remaining drops to the uncached part
        need = req.remaining + req.output - req.generated
        if need + lost >= room:
            if eng.cache is not None and req.spec.prefix_block_ids:
                eng.unlock_unadmitted(req, now)
            break  # FCFS: the head waits for KV, nobody overtakes it
        room -= need + lost
        eng.queue.popleft()
        eng.queue_version += 1
        eng.active += 1
        eng.rem_output += req.output - req.generated
        admitted += 1
        eng.kv_reserved += req.remaining  # the whole (re)prefill is set aside now
        piece = _take(eng, req, budget, reserved=True)
        pieces.append(piece)
        budget -= piece[2]
        if not piece[3]:
            eng.chunked = req
    if not pieces:
        return None
    decodes: list[Req] = list(members) if mixed else []
    if decodes:
        _grow(eng, slot, decodes)
        for req in decodes:  # the trimmer is bypassed by mixed batches, as in SGLang
            req.held_streak = 0
    shape = BatchShape(prefill=tuple((p[1], p[2]) for p in pieces), decode_count=len(decodes),
                       decode_ctx_sum=sum(r.kv for r in decodes))
    predicted = decision.predicted_stage_ms
    return Launched(slot, pieces, decodes, shape, chunk,
                    math.nan if predicted is None else float(predicted), entry, None)


def _grow(eng: Engine, slot: int, run: list[Req]) -> None:
    """Allocate the KV slot of this step's input token for every running decode."""
    eng.allocate(len(run))
    for req in run:
        req.kv += 1
    eng.slot_ctx[slot] += len(run)


def _retract_order(req: Req) -> tuple[int, int, float]:
    # SGLang retract_decode pops the request with the fewest output tokens, ties: longest prompt;
    # we break remaining ties by newest arrival.
    return (req.generated, -req.prompt, -req.arrival_s)


def _trim(eng: Engine, slot: int, now: float, members: list[Req]) -> tuple[list[Req], dict | None]:
    decision = eng.trimmer.select(decode_snapshot(eng, slot, now))
    by_id = {r.rid: r for r in members}
    run_ids, hold_ids = list(decision.run_ids), list(decision.hold_ids)
    if (sorted(run_ids + hold_ids) != sorted(by_id) or not run_ids):
        raise SimInvariantError(
            f"trimmer {eng.trimmer.name!r} at t={now:.3f}s slot {slot}: run {run_ids} + hold "
            f"{hold_ids} must partition the slot's decode set {sorted(by_id)} with run non-empty")
    for rid in hold_ids:
        req = by_id[rid]
        req.held_streak += 1
        eng.max_held_streak = max(eng.max_held_streak, req.held_streak)
    eng.ds_holds += len(hold_ids)
    run = [by_id[rid] for rid in run_ids]
    for req in run:
        req.held_streak = 0
    if not hold_ids:
        return run, None
    entry = {"type": "trim", "time_s": now, "slot": slot, "run": len(run),
             "held_ids": sorted(hold_ids), "reason": decision.reason,
             "inputs": dict(decision.inputs), "mb": -1}
    eng.log.decisions.append(entry)
    return run, entry


def build_decode(eng: Engine, slot: int, now: float) -> Launched | None:
    members = eng.members[slot]
    if not members:
        return None
    trim = None
    if eng.trimmer is not None:
        eng.flush_observations(now)
        run, trim = _trim(eng, slot, now, members)
    else:
        run = list(members)
    if eng.kv_free() < len(run):
        # Out of KV for this step: retract until the rest can grow, as update_running_batch does.
        run.sort(key=_retract_order, reverse=True)
        while run and eng.kv_free() < len(run):
            victim = run.pop()
            members.remove(victim)
            eng.retract(victim, now)
        eng.retracted_ratio(run)
        if not run:
            return None
    else:
        eng.decay_ratio()
    _grow(eng, slot, run)
    shape = BatchShape(decode_count=len(run), decode_ctx_sum=sum(r.kv for r in run))
    return Launched(slot, [], run, shape, 0, math.nan, None, trim)
