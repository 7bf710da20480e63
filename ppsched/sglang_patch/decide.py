"""Rank 0's per-turn decision: SGLang state → snapshots → controller/trimmer → PpschedDecision.

Runs inside ``_pull_raw_reqs`` on PP rank 0 / TP rank 0 only (see hooks.py); the result travels
to every rank with that turn's requests.
"""

from __future__ import annotations

from ppsched.sglang_patch import fast_scan, translate
from ppsched.sglang_patch.state import PluginState, PpschedDecision


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
    from sglang.srt.managers.io_struct import TokenizedGenerateReqInput

    now = st.now()
    arrivals = []
    for item in pulled:
        if isinstance(item, TokenizedGenerateReqInput) and item.input_ids is not None:
            st.clock.arrive(item.rid, len(item.input_ids), now)
            arrivals.append(_Arrival(item.rid, item.input_ids))
    waiting = list(sched.waiting_queue) + arrivals
    chunked = sched.chunked_req
    mbs = getattr(sched, "running_mbs", None) or [sched.running_batch]
    slot_reqs = []
    for i, batch in enumerate(mbs):
        held = st.held.get(i)
        slot_reqs.append(batch.reqs + held.reqs if held is not None else batch.reqs)
    kv_free = _kv_free_tokens(sched)
    kv_total = int(sched.max_total_num_tokens)

    chunk = predicted = None
    queued_tokens = None  # the waiting queue's remaining prompt tokens, summed once per turn
    slot_sizes = None  # live requests per slot (running + held), counted once per turn
    reason = []
    if st.controller is not None and (waiting or chunked is not None):
        loads = translate.slot_loads(slot_reqs)
        slot_sizes = [load.decode_reqs for load in loads]
        snap = translate.chunk_snapshot(
            now_s=now, iteration=st.iteration, slot=st.slot, pp_size=st.slots,
            waiting=waiting, chunked=chunked, slot_reqs=slot_reqs, kv_free=kv_free,
            kv_total=kv_total, clock=st.clock, recent_stage_ms=st.recent_stage_ms,
            max_chunk=min(st.launch_chunk, max(st.cfg.candidates or (st.launch_chunk,))),
            queue_view=st.cfg.queue_view, slots=loads)
        queued_tokens = snap.queued_prompt_tokens - (
            snap.chunked.remaining_prompt_tokens if snap.chunked is not None else 0)
        decision = st.controller.decide(snap)
        chunk = min(st.cfg.snap_chunk(int(decision.chunk_tokens)), st.launch_chunk)
        predicted = decision.predicted_stage_ms
        reason.append(decision.reason)
        st.log.count("decisions")
        st.log.write("decision", iteration=st.iteration, slot=st.slot, chunk=chunk,
                     chunk_raw=int(decision.chunk_tokens), reason=decision.reason,
                     inputs=dict(decision.inputs), predicted_ms=predicted,
                     queued=snap.queued_requests, queued_tokens=snap.queued_prompt_tokens)

    hold_rids: tuple[str, ...] = ()
    if st.trimmer is not None:
        if queued_tokens is None:
            queued_tokens = fast_scan.remaining_prompt_sum(waiting)
        if slot_sizes is None:
            slot_sizes = [fast_scan.live_count(reqs) for reqs in slot_reqs]
        hold_rids = _decide_holds(st, sched, mbs, now, kv_free, kv_total, len(waiting),
                                  queued_tokens, slot_sizes)
        if hold_rids:
            st.log.count("hold_decisions")  # each is applied or logged as hold_dropped
            reason.append(f"hold {len(hold_rids)}")
    if chunk is None and not hold_rids:
        return None
    return PpschedDecision(st.iteration, st.slot, chunk, hold_rids, reason="; ".join(reason),
                           predicted_stage_ms=predicted)


def _kv_free_tokens(sched) -> int:
    """Free KV slots plus what the radix cache could evict (finished requests' cached prefixes)."""
    free = int(sched.token_to_kv_pool_allocator.available_size())
    evictable = getattr(sched.tree_cache, "evictable_size", None)
    return free + (int(evictable()) if callable(evictable) else 0)


def _slot_decode_set(sched, mbs, slot: int) -> list:
    """The requests that would decode in ``slot`` this turn (running + just-prefilled)."""
    reqs, seen = [], set()
    batches = [mbs[slot]]
    last_mbs = getattr(sched, "last_mbs", None)
    last = last_mbs[slot] if last_mbs else sched.last_batch
    if last is not None and last.forward_mode is not None and last.forward_mode.is_extend():
        batches.append(last)
    chunked = sched.chunked_req
    for batch in batches:
        own_chunked = getattr(batch, "chunked_req", None)
        for r in batch.reqs:
            if id(r) in seen or r.finished() or r is chunked or r is own_chunked:
                continue
            seen.add(id(r))
            reqs.append(r)
    return reqs


def _decide_holds(st, sched, mbs, now, kv_free, kv_total, queued, queued_tokens, sizes):
    running = _slot_decode_set(sched, mbs, st.slot)
    held_batch = st.held.get(st.slot)
    held = [r for r in held_batch.reqs if not r.finished()] if held_batch is not None else []
    if len(running) + len(held) < 2:
        return ()
    snap, by_id = translate.decode_snapshot_and_rids(
        now_s=now, slot=st.slot, pp_size=st.slots, running=running, held=held,
        slot_sizes=sizes, kv_free=kv_free, kv_total=kv_total, queued_requests=queued,
        queued_prompt_tokens=queued_tokens, clock=st.clock)
    decision = st.trimmer.select(snap)
    hold = tuple(sorted(by_id[i] for i in decision.hold_ids if i in by_id))
    st.log.write("ds_decision", iteration=st.iteration, slot=st.slot, reason=decision.reason,
                 decode_set=len(running) + len(held), hold=list(hold))
    return hold
