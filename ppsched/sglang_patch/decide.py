"""Rank 0's per-turn decision: SGLang state → snapshots → controller/trimmer → PpschedDecision.

Runs inside ``_pull_raw_reqs`` on PP rank 0 / TP rank 0 only (see hooks.py); the result travels
to every rank with that turn's requests.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_, not_

from ppsched.core.snapshots import DecodeSnapshot
from ppsched.sglang_patch import fast_scan, translate
from ppsched.sglang_patch.state import PluginState, PpschedDecision
from ppsched.sglang_patch.turn_reads import TurnReads, lazy_chunk_snapshot


class _Arrival:
    """A request pulled this turn, not yet in the waiting queue (for the controller's view)."""

    __slots__ = ("rid", "origin_input_ids", "output_ids")

    def __init__(self, rid: str, input_ids) -> None:
        self.rid = rid
        self.origin_input_ids = input_ids
        self.output_ids = ()

    def finished(self) -> bool:
        return False


def decide(st: PluginState, sched, pulled: list) -> PpschedDecision | None:
    now = st.now()
    clock = st.clock
    arrivals = []
    if pulled:
        from sglang.srt.managers.io_struct import TokenizedGenerateReqInput

        for item in pulled:
            if isinstance(item, TokenizedGenerateReqInput) and item.input_ids is not None:
                clock.arrive(item.rid, len(item.input_ids), now)
                arrivals.append(_Arrival(item.rid, item.input_ids))
    # SGLang's own list when nothing joins it: nothing changes it while rank 0 decides
    queue = sched.waiting_queue
    waiting = queue if not arrivals and type(queue) is list else list(queue) + arrivals
    chunked = sched.chunked_req
    mbs = getattr(sched, "running_mbs", None) or [sched.running_batch]
    slot_reqs = []
    for i, batch in enumerate(mbs):
        held = st.held.get(i)
        slot_reqs.append(batch.reqs + held.reqs if held is not None else batch.reqs)
    kv_free = _kv_free_tokens(sched)
    kv_total = int(sched.max_total_num_tokens)
    view_limit = st.cfg.queue_view
    has_queue = bool(waiting) or chunked is not None
    # the chunked request and the queue head are tracked first, as the eager snapshot did
    chunked_q = clock.queued(chunked.rid, len(chunked.origin_input_ids),
                             fast_scan.remaining_prompt(chunked), now) \
        if chunked is not None and st.controller is not None else None
    reads = TurnReads(waiting, chunked_q, slot_reqs, clock, now, view_limit, st.slot)
    try:
        chunk, predicted, reason = _decide_chunk(st, reads, kv_free, kv_total) \
            if st.controller is not None and has_queue else (None, None, [])
        hold_rids: tuple[str, ...] = ()
        if st.trimmer is not None:
            hold_rids = _decide_holds(st, sched, mbs, reads, now, kv_free, kv_total)
            if hold_rids:
                st.log.count("hold_decisions")  # each is applied or logged as hold_dropped
                reason.append(f"hold {len(hold_rids)}")
    finally:
        reads.close()
    if chunk is None and not hold_rids:
        return None
    return PpschedDecision(st.iteration, st.slot, chunk, hold_rids, reason="; ".join(reason),
                           predicted_stage_ms=predicted)


def _decide_chunk(st: PluginState, reads: TurnReads, kv_free: int, kv_total: int):
    clock = st.clock
    now = reads.now_s
    clock.track(reads.waiting[:reads.view_limit], now)
    snap = lazy_chunk_snapshot(
        reads, now_s=now, iteration=st.iteration, slot=st.slot, pp_size=st.slots,
        queued_requests=len(reads.waiting) + (reads.chunked_q is not None),
        chunked=reads.chunked_q, kv_free_tokens=int(kv_free), kv_total_tokens=int(kv_total),
        recent_ttft_ms=tuple(clock.recent_ttft_ms), recent_tpot_ms=tuple(clock.recent_tpot_ms),
        recent_stage_ms=tuple(st.recent_stage_ms), arrived_requests_total=clock.arrived_requests,
        arrived_prompt_tokens_total=clock.arrived_prompt_tokens,
        max_chunk_tokens=min(st.launch_chunk, max(st.cfg.candidates or (st.launch_chunk,))))
    if st.learner is not None:  # never half an ALP update (the learner thread holds it)
        with st.learner.lock:
            decision = st.controller.decide(snap)
    else:
        decision = st.controller.decide(snap)
    chunk = min(st.cfg.snap_chunk(int(decision.chunk_tokens)), st.launch_chunk)
    predicted = decision.predicted_stage_ms
    st.log.count("decisions")
    # queued_tokens: logged when a policy read it this turn (summing a long queue every turn
    # only for the log would cost more than the whole turn; queued is always exact)
    st.log.write_later("decision", _decision_fields, st.iteration, st.slot, chunk, decision,
                       snap.queued_requests, reads.known_queued_tokens())
    return chunk, predicted, [decision.reason]


def _decision_fields(iteration: int, slot: int, chunk: int, decision, queued: int,
                     queued_tokens: int | None) -> dict:
    """The ``decision`` record (made by the decision log's writer thread)."""
    return dict(iteration=iteration, slot=slot, chunk=chunk,
                chunk_raw=int(decision.chunk_tokens), reason=decision.reason,
                inputs=dict(decision.inputs), predicted_ms=decision.predicted_stage_ms,
                **decision.regime_fields(), queued=queued, queued_tokens=queued_tokens)


def _kv_free_tokens(sched) -> int:
    """Free KV slots plus what the radix cache could evict (finished requests' cached prefixes)."""
    free = int(sched.token_to_kv_pool_allocator.available_size())
    evictable = getattr(sched.tree_cache, "evictable_size", None)
    return free + (int(evictable()) if callable(evictable) else 0)


def _slot_decode_set(sched, mbs, slot: int, done: list | None = None) -> list:
    """The requests that would decode in ``slot`` this turn (running + just-prefilled).
    ``done``: ``finished()`` of the slot batch's requests when the caller already read it."""
    batch = mbs[slot]
    batches = [batch]
    last_mbs = getattr(sched, "last_mbs", None)
    last = last_mbs[slot] if last_mbs else sched.last_batch
    if last is not None and last.forward_mode is not None and last.forward_mode.is_extend():
        batches.append(last)
    chunked = sched.chunked_req
    reqs: list = []
    for b in batches:  # each batch's live requests, read in C; the walk below when in doubt
        flags = done if b is batch and done is not None else fast_scan.finished_flags(b.reqs)
        part = list(compress(b.reqs, map(not_, flags))) if any(flags) else list(b.reqs)
        own_chunked = getattr(b, "chunked_req", None)
        if own_chunked is not None and any(map(is_, part, repeat(own_chunked))):
            return _decode_set_of(batches, chunked)
        reqs += part
    if (chunked is not None and any(map(is_, reqs, repeat(chunked)))) \
            or len(set(map(id, reqs))) != len(reqs):  # a chunked one, or one in both batches
        return _decode_set_of(batches, chunked)
    return reqs


def _decode_set_of(batches: list, chunked) -> list:
    """The reference walk: every live, unchunked request of ``batches`` once, in order."""
    reqs, seen = [], set()
    for batch in batches:
        own_chunked = getattr(batch, "chunked_req", None)
        for r in batch.reqs:
            if id(r) in seen or r.finished() or r is chunked or r is own_chunked:
                continue
            seen.add(id(r))
            reqs.append(r)
    return reqs


def _decide_holds(st, sched, mbs, reads: TurnReads, now, kv_free, kv_total):
    slot = st.slot
    held_batch = st.held.get(slot)
    done = reads.flags(slot)
    if any(done):  # TPOT samples of the slot's finished requests (DS and greedy read them)
        st.clock.finish(compress(reads.slot_reqs[slot], done), now)
    running = _slot_decode_set(sched, mbs, slot, done[:len(mbs[slot].reqs)])
    held = [r for r in held_batch.reqs if not r.finished()] if held_batch is not None else []
    if len(running) + len(held) < 2:
        return ()
    clock = st.clock
    run_times = clock.observe_unfinished(running, now, ("running", slot))
    held_times = clock.observe_unfinished(held, now, ("held", slot))
    settled = getattr(st.trimmer, "settled_reason", None)
    reason = settled(len(running) + len(held), reads.live_counts,
                     kv_free / kv_total if kv_total else 0.0, reads.waiting_exceeds) \
        if settled is not None else None
    hold: tuple[str, ...] = ()
    if reason is None:  # the trimmer reads the requests: build them
        snap = DecodeSnapshot(
            now_s=now, slot=slot, pp_size=st.slots,
            running=tuple(translate.decoding_from_times(running, run_times, now, clock)),
            held=tuple(translate.decoding_from_times(held, held_times, now, clock)),
            slot_sizes=tuple(reads.live_counts()), kv_free_tokens=int(kv_free),
            kv_total_tokens=int(kv_total),
            queued_requests=len(reads.waiting), queued_prompt_tokens=reads.waiting_tokens(),
            recent_tpot_ms=tuple(clock.recent_tpot_ms))
        decision = st.trimmer.select(snap)
        reason = decision.reason
        if decision.hold_ids:
            get = clock.get
            by_id = {t.req_id: r.rid for r, t in zip(running + held, run_times + held_times,
                                                      strict=True) if get(r.rid) is t}
            hold = tuple(sorted(by_id[i] for i in decision.hold_ids if i in by_id))
    st.log.write("ds_decision", iteration=st.iteration, slot=slot, reason=reason,
                 decode_set=len(running) + len(held), hold=list(hold))
    return hold
