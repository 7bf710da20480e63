"""Building one slot's next batch, as SGLang's get_new_batch_prefill / update_running_batch do.

Free functions over the scheduler state (``SchedState``), the policies (``PolicyFeed``) and the
decision log; they never see the event loop.
"""

from __future__ import annotations

import math

from ppsched.core.batch import BatchShape
from ppsched.sim.engine.feed import PolicyFeed
from ppsched.sim.engine.log import RunLog
from ppsched.sim.engine.sched_state import SchedState
from ppsched.sim.engine.state import Launched, PrefillPiece, Req
from ppsched.sim.engine.views import arrival_order, chunk_snapshot, decode_snapshot
from ppsched.sim.invariants import SimInvariantError


def _take(st: SchedState, req: Req, budget: int) -> PrefillPiece:
    """Prefill the next ``min(remaining, budget)`` tokens of ``req`` (KV allocated now, out of
    what admission reserved)."""
    extend = min(req.remaining, budget)
    prefix = req.prefill_len - req.remaining
    st.kv.allocate(extend, reserved=True)
    req.kv += extend
    req.remaining -= extend
    st.queued_tokens -= extend
    return PrefillPiece(req, prefix, extend, req.remaining == 0)


def _admit_one(st: SchedState, req: Req, room: float, now: float) -> float | None:
    """Admit the head of the queue if its KV need fits ``room``; the room left, else None.

    SGLang's PrefillAdder: a new request needs its whole (uncached) input plus its remaining
    output; with a prefix cache the match is locked first, which takes its tokens out of the
    evictable pool."""
    lost = 0
    cached_lookup = st.kv.cache is not None and bool(req.spec.prefix_block_ids)
    if cached_lookup:
        remaining, lost = st.kv.match_and_lock(req, now)
        st.set_remaining(req, remaining)
    need = req.remaining + req.output - req.generated
    if need + lost >= room:
        if cached_lookup:
            st.kv.unlock_unadmitted(req, now)
        return None
    st.dequeue_head()
    st.active += 1
    st.rem_output += req.output - req.generated
    st.kv.reserved += req.remaining  # the whole (re)prefill is set aside now
    return room - need - lost


def build_prefill(st: SchedState, feed: PolicyFeed, log: RunLog, slot: int,
                  now: float) -> Launched | None:
    if not st.queue and st.chunked is None:
        return None
    limits = st.limits
    feed.flush(now, st.recent_stage)
    decision = feed.fixed_decision
    if decision is None and feed.held_decision is not None:
        decision = feed.held_decision(now, st.mb_count, st.arrived_tokens,
                                      limits.max_chunk_tokens, max([len(m) for m in st.members]))
    if decision is None:
        decision = feed.controller.decide(chunk_snapshot(st, slot, now))
    chunk = min(decision.chunk_tokens, limits.max_chunk_tokens)
    inputs, regime = feed.log_fields(decision)
    entry = {"type": "chunk", "time_s": now, "slot": slot, "iteration": st.mb_count,
             "chunk": chunk, "requested_chunk": decision.chunk_tokens, "reason": decision.reason,
             "inputs": inputs, "predicted_ms": decision.predicted_stage_ms, **regime, "mb": -1}
    log.decisions.append(entry)
    members = st.members[slot]
    # --mixed-chunk: the slot's decodes ride along and spend chunk budget (one token each).
    mixed = limits.mixed_chunk and members and st.kv.free() >= len(members)
    budget = chunk - (len(members) if mixed else 0)
    pieces: list[PrefillPiece] = []
    if st.chunked is not None and budget > 0:
        piece = _take(st, st.chunked, budget)
        pieces.append(piece)
        budget -= piece.extend
        if piece.completes:
            st.chunked = None
    admitted = 0
    # Running requests are charged their remaining output tokens times new_token_ratio.
    room: float = st.kv.free() - st.rem_output * st.new_token_ratio \
        - (len(members) if mixed else 0)
    while budget > 0 and st.queue and st.chunked is None:
        if st.active >= limits.max_running or len(members) + admitted >= limits.per_slot_cap:
            break
        req = st.queue[0]
        left = _admit_one(st, req, room, now)
        if left is None:
            break  # FCFS: the head waits for KV, nobody overtakes it
        room = left
        admitted += 1
        piece = _take(st, req, budget)
        pieces.append(piece)
        budget -= piece.extend
        if not piece.completes:
            st.chunked = req
    if not pieces:
        return None
    decodes: list[Req] = list(members) if mixed else []
    if decodes:
        st.grow(slot, decodes)
        if feed.trimmer is not None:  # without one, nobody is ever held
            for req in decodes:  # the trimmer is bypassed by mixed batches, as in SGLang
                req.held_streak = 0
    # the decodes are the slot's whole decode set: its context sum (this step's token included)
    shape = BatchShape(prefill=tuple((p.prefix, p.extend) for p in pieces),
                       decode_count=len(decodes),
                       decode_ctx_sum=st.slot_ctx[slot] if decodes else 0)
    predicted = decision.predicted_stage_ms
    return Launched(slot, pieces, decodes, shape, chunk,
                    math.nan if predicted is None else float(predicted), entry, None)


def _retract_order(req: Req) -> tuple[int, int, float]:
    # SGLang retract_decode pops the request with the fewest output tokens, ties: longest prompt;
    # we break remaining ties by newest arrival.
    return (req.generated, -req.prompt, -req.arrival_s)


def _trim(st: SchedState, feed: PolicyFeed, log: RunLog, slot: int, now: float,
          members: list[Req]) -> tuple[list[Req], dict | None]:
    trimmer = feed.trimmer
    assert trimmer is not None
    settled = getattr(trimmer, "settled_reason", None)
    if settled is not None and settled(
            len(members), lambda: tuple(len(m) for m in st.members),
            st.kv.free() / st.kv.capacity if st.kv.capacity else 0.0,
            lambda limit: st.queued_tokens > limit) is not None:
        # Nobody is held whichever requests the slot has (decided from counts, as the plugin
        # does): ``select`` would run them all in arrival order, so skip building the snapshot.
        run = list(members) if st.decode_sets_in_arrival_order \
            else sorted(members, key=arrival_order)
        for req in run:
            req.held_streak = 0
        return run, None
    decision = trimmer.select(decode_snapshot(st, slot, now))
    by_id = {r.rid: r for r in members}
    run_ids, hold_ids = list(decision.run_ids), list(decision.hold_ids)
    if (sorted(run_ids + hold_ids) != sorted(by_id) or not run_ids):
        raise SimInvariantError(
            f"trimmer {trimmer.name!r} at t={now:.3f}s slot {slot}: run {run_ids} + hold "
            f"{hold_ids} must partition the slot's decode set {sorted(by_id)} with run non-empty")
    for rid in hold_ids:
        req = by_id[rid]
        req.held_streak += 1
        st.max_held_streak = max(st.max_held_streak, req.held_streak)
    st.ds_holds += len(hold_ids)
    run = [by_id[rid] for rid in run_ids]
    for req in run:
        req.held_streak = 0
    if not hold_ids:
        return run, None
    entry = {"type": "trim", "time_s": now, "slot": slot, "run": len(run),
             "held_ids": sorted(hold_ids), "reason": decision.reason,
             "inputs": dict(decision.inputs), "mb": -1}
    log.decisions.append(entry)
    return run, entry


def build_decode(st: SchedState, feed: PolicyFeed, log: RunLog, slot: int,
                 now: float) -> Launched | None:
    members = st.members[slot]
    if not members:
        return None
    trim = None
    if feed.trimmer is not None:
        feed.flush(now, st.recent_stage)
        run, trim = _trim(st, feed, log, slot, now, members)
    else:
        run = list(members)
    if st.kv.free() < len(run):
        # Out of KV for this step: retract until the rest can grow, as update_running_batch does.
        run.sort(key=_retract_order, reverse=True)
        while run and st.kv.free() < len(run):
            victim = run.pop()
            members.remove(victim)
            st.retract(victim, now)
        st.retracted_ratio(run)
        if not run:
            return None
    else:
        st.decay_ratio()
    st.grow(slot, run)
    # this step's token is in the slot's sum (``grow``), not yet in the requests' own counts
    ctx = st.slot_ctx[slot] if len(run) == len(members) else sum(r.kv for r in run) + len(run)
    shape = BatchShape(decode_count=len(run), decode_ctx_sum=ctx)
    return Launched(slot, [], run, shape, 0, math.nan, None, trim)
