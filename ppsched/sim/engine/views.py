"""Snapshots for the policies, from the scheduler's running sums (no scan of every request)."""

from __future__ import annotations

from ppsched.core.snapshots import ChunkSnapshot, DecodeSnapshot, SlotLoad, new_decoding_request
from ppsched.sim.engine.sched_state import SchedState
from ppsched.sim.engine.state import Req


def _slot_loads(st: SchedState) -> tuple[SlotLoad, ...]:
    """Every slot's load; a slot's ``SlotLoad`` is rebuilt only when its decode count or
    context sum moved since the last snapshot (between two prefill builds most slots' did not)."""
    loads = st.slot_loads
    members, ctx = st.members, st.slot_ctx
    changed = False
    for s, load in enumerate(loads):
        count = len(members[s])
        if load.decode_reqs != count or load.decode_ctx_sum != ctx[s]:
            loads[s] = SlotLoad(s, count, ctx[s])
            changed = True
    if changed or st.slot_loads_view is None:
        st.slot_loads_view = tuple(loads)
    return st.slot_loads_view


def _recent(st: SchedState) -> tuple[int, tuple[float, ...], tuple[float, ...]]:
    """(sample count, recent TTFTs, recent TPOTs), the tuples rebuilt only when a sample came."""
    view = st.recent_view
    if view[0] != st.recent_samples:
        view = st.recent_view = (st.recent_samples, tuple(st.recent_ttft), tuple(st.recent_tpot))
    return view


def chunk_snapshot(st: SchedState, slot: int, now: float) -> ChunkSnapshot:
    chunked = st.chunked.queued_view() if st.chunked is not None else None
    slots = st.limits.slots
    _, recent_ttft, recent_tpot = _recent(st)
    return ChunkSnapshot(
        now_s=now,
        iteration=st.mb_count,
        slot=slot,
        pp_size=slots,
        queue=st.queue_view.get(st),
        queued_requests=len(st.queue) + (chunked is not None),
        queued_prompt_tokens=st.queued_tokens,
        chunked=chunked,
        slots=_slot_loads(st),
        kv_free_tokens=st.kv.free(),
        kv_total_tokens=st.kv.capacity,
        recent_ttft_ms=recent_ttft,
        recent_tpot_ms=recent_tpot,
        recent_stage_ms=tuple(st.recent_stage),
        arrived_requests_total=st.arrived,
        arrived_prompt_tokens_total=st.arrived_tokens,
        max_chunk_tokens=st.limits.max_chunk_tokens,
    )


def arrival_order(req: Req) -> tuple[float, int]:
    """The order DS reads a decode set in (arrival, then id)."""
    return (req.arrival_s, req.rid)


def decode_snapshot(st: SchedState, slot: int, now: float) -> DecodeSnapshot:
    # members are kept in admission order (arrival order unless a request rejoined, which the
    # state tracks); the snapshot promises arrival order.
    members = st.members[slot]
    if not st.decode_sets_in_arrival_order:
        members = sorted(members, key=arrival_order)
    running: list = []
    held: list = []
    view = new_decoding_request  # once per member per DS turn
    for r in members:
        (held if r.held_streak else running).append(view(
            r.rid, r.arrival_s, r.kv, r.generated, r.first_s, r.last_s, r.held_streak))
    return DecodeSnapshot(
        now_s=now,
        slot=slot,
        pp_size=st.limits.slots,
        running=tuple(running),
        held=tuple(held),
        slot_sizes=tuple(len(m) for m in st.members),
        kv_free_tokens=st.kv.free(),
        kv_total_tokens=st.kv.capacity,
        queued_requests=len(st.queue) + (st.chunked is not None),
        queued_prompt_tokens=st.queued_tokens,
        recent_tpot_ms=_recent(st)[2],
    )
