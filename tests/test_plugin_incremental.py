"""The fast per-turn path decides exactly what the per-request (full snapshot) path decided.

Two plugin states with the same policies (predictive chunk controller + DS) see the same
randomized fake scheduler state turn after turn: one runs ``decide.decide`` (C-speed scans, lazy
snapshot fields, DS settled from counts when it can be), the other the reference -- the
pre-optimisation path, every total summed and every decode-set request built each turn. The
chunk snapshots (every field, read inside the turn), DS's reasons, the decode snapshots whenever
the fast path builds one, decisions and hold sets must match exactly.
"""

import random
import sys
import types

import pytest

from ppsched.core.snapshots import (
    ChunkSnapshot,
    DecodeSnapshot,
    DecodingRequest,
    QueuedRequest,
    SlotLoad,
)
from ppsched.sglang_patch import fast_scan, stage_feed, translate
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decide import _kv_free_tokens, _slot_decode_set, decide
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.preflight import ServerFacts, build_checked
from ppsched.sglang_patch.state import PluginState, PpschedDecision
from ppsched.sglang_patch.turn_reads import materialized

PP = 4


class Req:
    def __init__(self, rid, prompt, out, rng):
        self.rid = rid
        self.origin_input_ids = [1] * prompt
        self.output_ids = [1] * out
        self.prefix_len = rng.choice([0, 0, rng.randrange(0, prompt + 50)])
        self.extend_end = rng.choice([None, 0, rng.randrange(0, prompt + 50)])
        self.done = False

    def finished(self):
        return self.done


class Mode:
    def __init__(self, kind):
        self.kind = kind

    def is_extend(self):
        return self.kind == "extend"


class Batch:
    def __init__(self, reqs, kind="decode"):
        self.reqs = reqs
        self.forward_mode = Mode(kind)
        self.chunked_req = None


class Pool:
    def __init__(self, n):
        self.n = n

    def available_size(self):
        return self.n

    def evictable_size(self):
        return 0


# ---- the reference: the full per-request snapshot path ------------------------------------

def _ref_remaining(req):
    done = max(int(getattr(req, "prefix_len", 0) or 0), int(getattr(req, "extend_end", 0) or 0))
    return max(len(req.origin_input_ids) - done, 0)


def _ref_loads(slot_reqs):
    out = []
    for slot, reqs in enumerate(slot_reqs):
        live = [r for r in reqs if not r.finished()]
        out.append(SlotLoad(slot, len(live), sum(
            len(r.origin_input_ids) + len(r.output_ids) for r in live)))
    return tuple(out)


def _ref_queued(req, clock, now):
    t = clock.arrive(req.rid, len(req.origin_input_ids), now)
    return QueuedRequest(t.req_id, t.arrival_s, len(req.origin_input_ids), _ref_remaining(req))


def _ref_chunk_snapshot(st, now, waiting, chunked, slot_reqs, kv_free, kv_total):
    chunked_q = _ref_queued(chunked, st.clock, now) if chunked is not None else None
    view = sorted((_ref_queued(r, st.clock, now) for r in waiting[:st.cfg.queue_view]),
                  key=lambda q: (q.arrival_s, q.req_id))
    tokens = sum(_ref_remaining(r) for r in waiting)
    count = len(waiting)
    if chunked_q is not None:
        tokens += chunked_q.remaining_prompt_tokens
        count += 1
        view.insert(0, chunked_q)
    c = st.clock
    return ChunkSnapshot(
        now_s=now, iteration=st.iteration, slot=st.slot, pp_size=st.slots,
        queue=tuple(view[:st.cfg.queue_view]), queued_requests=count,
        queued_prompt_tokens=tokens, chunked=chunked_q, slots=_ref_loads(slot_reqs),
        kv_free_tokens=kv_free, kv_total_tokens=kv_total,
        recent_ttft_ms=tuple(c.recent_ttft_ms), recent_tpot_ms=tuple(c.recent_tpot_ms),
        recent_stage_ms=tuple(st.recent_stage_ms), arrived_requests_total=c.arrived_requests,
        arrived_prompt_tokens_total=c.arrived_prompt_tokens,
        max_chunk_tokens=min(st.launch_chunk, max(st.cfg.candidates)))


def _ref_decoding(req, clock, now):
    t = clock.observe(req, now)
    first = t.first_token_s if t.n_out else now
    last = t.last_token_s if t.n_out else now
    return DecodingRequest(t.req_id, t.arrival_s, len(req.origin_input_ids) + len(req.output_ids),
                           len(req.output_ids), first, last, t.held_streak)


def _ref_decode_snapshot(st, now, running, held, sizes, kv_free, kv_total, queued, tokens):
    def by_arrival(reqs):
        return tuple(sorted((_ref_decoding(r, st.clock, now) for r in reqs),
                            key=lambda d: (d.arrival_s, d.req_id)))

    run, hold = by_arrival(running), by_arrival(held)
    return DecodeSnapshot(now_s=now, slot=st.slot, pp_size=st.slots, running=run, held=hold,
                          slot_sizes=tuple(sizes), kv_free_tokens=kv_free,
                          kv_total_tokens=kv_total, queued_requests=queued,
                          queued_prompt_tokens=tokens,
                          recent_tpot_ms=tuple(st.clock.recent_tpot_ms))


def reference_decide(st, sched):
    now = st.now()
    waiting = list(sched.waiting_queue)
    chunked = sched.chunked_req
    mbs = sched.running_mbs
    slot_reqs = []
    for i, batch in enumerate(mbs):
        held = st.held.get(i)
        slot_reqs.append(list(batch.reqs) + (list(held.reqs) if held is not None else []))
    kv_free, kv_total = _kv_free_tokens(sched), int(sched.max_total_num_tokens)
    chunk = predicted = queued_tokens = None
    reason = []
    if st.controller is not None and (waiting or chunked is not None):
        snap = _ref_chunk_snapshot(st, now, waiting, chunked, slot_reqs, kv_free, kv_total)
        queued_tokens = snap.queued_prompt_tokens - (
            snap.chunked.remaining_prompt_tokens if snap.chunked is not None else 0)
        decision = st.controller.decide(snap)
        chunk = min(st.cfg.snap_chunk(int(decision.chunk_tokens)), st.launch_chunk)
        predicted = decision.predicted_stage_ms
        reason.append(decision.reason)
    hold_rids = ()
    if queued_tokens is None:
        queued_tokens = sum(_ref_remaining(r) for r in waiting)
    for r in slot_reqs[st.slot]:  # the slot's finished requests: their TPOT, then forgotten
        if r.finished() and st.clock.get(r.rid) is not None:
            st.clock.observe(r, now)
    running = _slot_decode_set(sched, mbs, st.slot)
    hb = st.held.get(st.slot)
    held = [r for r in hb.reqs if not r.finished()] if hb is not None else []
    if len(running) + len(held) >= 2:
        sizes = [sum(not r.finished() for r in reqs) for reqs in slot_reqs]
        dsnap = _ref_decode_snapshot(st, now, running, held, sizes, kv_free, kv_total,
                                     len(waiting), queued_tokens)
        ds = st.trimmer.select(dsnap)
        by_id = {st.clock.get(r.rid).req_id: r.rid for r in running + held
                 if st.clock.get(r.rid) is not None}
        hold_rids = tuple(sorted(by_id[i] for i in ds.hold_ids if i in by_id))
        if hold_rids:
            reason.append(f"hold {len(hold_rids)}")
    if chunk is None and not hold_rids:
        return None
    return PpschedDecision(st.iteration, st.slot, chunk, hold_rids, reason="; ".join(reason),
                           predicted_stage_ms=predicted)


# ---- the side-by-side run ------------------------------------------------------------------

def _state(now):
    cfg = PluginConfig(chunk="predictive", ds="on", candidates=tuple(range(128, 2049, 128)),
                       boundaries=tuple(range(8, 513, 8)), model="qwen2.5-32b")
    controller, trimmer, _ = build_checked(cfg, ServerFacts(None, None, PP, 1, 2048))
    st = PluginState(cfg=cfg, rank=0, pp_size=PP, launch_chunk=2048, controller=controller,
                     trimmer=trimmer, log=DecisionLog(None, 0))
    st.now = lambda: now[0]
    return st


def _recording(st, seen):
    """Record the chunk snapshots (every field read while the turn is on), the decode snapshots
    and DS's reasons: from ``select`` (reference) or the ds_decision record (fast path)."""
    decide_fn, select_fn, write_fn = st.controller.decide, st.trimmer.select, st.log.write

    def decide_rec(snap):
        out = decide_fn(snap)
        seen["chunk"].append(materialized(snap))
        return out

    def select_rec(snap):
        out = select_fn(snap)
        seen["decode"].append(snap)
        seen["ds_reason"].append(out.reason)
        return out

    def write_rec(kind, **fields):
        if kind == "ds_decision":
            seen["ds_logged"].append(fields["reason"])
        write_fn(kind, **fields)

    st.controller.decide, st.trimmer.select, st.log.write = decide_rec, select_rec, write_rec


def _seen():
    return {"chunk": [], "decode": [], "ds_reason": [], "ds_logged": []}


def _mutate(sched, held, rng, serial):
    """One turn of scheduler churn: arrivals, prefill progress, decoding, finishing, moves."""
    quiet_queue = rng.random() < 0.4  # turns where the queue head is unchanged happen too
    for _ in range(0 if quiet_queue else rng.randrange(0, 6)):
        serial[0] += 1
        sched.waiting_queue.insert(rng.randrange(len(sched.waiting_queue) + 1),
                                   Req(f"w{serial[0]}", rng.randrange(1, 3000), 0, rng))
    for r in rng.sample(sched.waiting_queue, 0 if quiet_queue else min(
            5, len(sched.waiting_queue))):
        r.prefix_len = rng.choice([0, rng.randrange(0, len(r.origin_input_ids) + 20)])
        r.extend_end = rng.choice([None, r.extend_end, rng.randrange(0, 4000)])
    for _ in range(0 if quiet_queue else rng.randrange(0, 4)):  # prefilled: to a slot
        if sched.waiting_queue:
            req = sched.waiting_queue.pop(rng.randrange(len(sched.waiting_queue)))
            req.output_ids = [1]
            rng.choice(sched.running_mbs).reqs.append(req)
    sched.chunked_req = rng.choice([None, sched.chunked_req,
                                    Req("c", rng.randrange(1, 5000), 0, rng)])
    for batch in [*sched.running_mbs, *held.values()]:
        for r in batch.reqs:
            if rng.random() < 0.5:
                r.output_ids.append(1)
            if rng.random() < 0.01:
                r.done = True
        if rng.random() < 0.2:
            batch.reqs = [r for r in batch.reqs if not r.done]
    # KV tight on half the turns: DS then cannot skip on headroom and sizes the slot
    sched.token_to_kv_pool_allocator.n = rng.randrange(0, 300_000 if rng.random() < 0.5
                                                       else 40_000)
    for slot in list(held):
        if rng.random() < 0.3:
            del held[slot]
    slot = rng.randrange(PP)
    if slot not in held and sched.running_mbs[slot].reqs and rng.random() < 0.3:
        held[slot] = Batch(rng.sample(sched.running_mbs[slot].reqs, 1))
    sched.last_mbs = [Batch(list(rng.sample(b.reqs, min(2, len(b.reqs)))),
                            rng.choice(["extend", "decode"])) for b in sched.running_mbs]


@pytest.mark.pure
def test_fast_path_decides_exactly_as_the_per_request_path():
    for name in ("sglang", "sglang.srt", "sglang.srt.managers", "sglang.srt.managers.io_struct"):
        sys.modules.setdefault(name, types.ModuleType(name))
    io = sys.modules["sglang.srt.managers.io_struct"]
    if not hasattr(io, "TokenizedGenerateReqInput"):
        io.TokenizedGenerateReqInput = type("TokenizedGenerateReqInput", (), {})
    rng = random.Random(16)
    now = [0.0]
    fast, ref = _state(now), _state(now)
    fast_seen, ref_seen = _seen(), _seen()
    _recording(fast, fast_seen)
    _recording(ref, ref_seen)
    stage_feed.attach_learner(fast, background=False)  # as on rank 0: decide under its lock
    inner, locked = fast.controller.decide, []
    fast.controller.decide = lambda snap: (locked.append(fast.learner.lock.locked()),
                                           inner(snap))[1]
    sched = types.SimpleNamespace(
        waiting_queue=[Req(f"w{i}", rng.randrange(1, 3000), 0, rng) for i in range(40)],
        chunked_req=None,
        running_mbs=[Batch([Req(f"r{s}-{i}", rng.randrange(1, 2000), rng.randrange(1, 50), rng)
                            for i in range(rng.randrange(0, 30))]) for s in range(PP)],
        last_mbs=None, token_to_kv_pool_allocator=Pool(100_000), tree_cache=Pool(0),
        max_total_num_tokens=400_000)
    held, serial, holds_seen, settled, built = {}, [0], 0, 0, 0
    for turn in range(400):
        _mutate(sched, held, rng, serial)
        now[0] += 0.02
        for st in (fast, ref):
            st.iteration, st.slot, st.held = turn, turn % PP, held
        got, want = decide(fast, sched, []), reference_decide(ref, sched)
        assert got == want, f"turn {turn}"
        assert fast_seen["chunk"] == ref_seen["chunk"], f"turn {turn}"
        assert fast_seen["ds_logged"] == ref_seen["ds_reason"], f"turn {turn}"
        if fast_seen["decode"]:  # built only when DS could not settle from counts
            assert fast_seen["decode"] == ref_seen["decode"], f"turn {turn}"
            built += 1
        else:
            settled += bool(ref_seen["decode"])
        holds_seen += bool(got and got.hold_rids)
        for seen in (fast_seen, ref_seen):
            for records in seen.values():
                records.clear()
        if turn % 7 == 0:  # both learn the same stage
            fast.recent_stage_ms.append(10.0 + turn % 5)
            ref.recent_stage_ms.append(10.0 + turn % 5)
    assert holds_seen > 0  # the run exercised DS holds, not only chunk decisions
    assert locked and all(locked)  # never a decision during an ALP update
    assert fast.clock.recent_tpot_ms  # finished requests gave TPOT samples
    assert list(fast.clock.recent_tpot_ms) == list(ref.clock.recent_tpot_ms)
    assert settled > 20 and built > 20  # and both DS paths


class Bare:
    """A request without progress fields (the per-request path's getattr defaults)."""

    def __init__(self, n):
        self.origin_input_ids = [0] * n


def test_fast_scans_match_per_request_sums_on_random_requests():
    rng = random.Random(7)
    for _ in range(300):
        reqs = [Req(str(i), rng.randrange(0, 200), rng.randrange(0, 20), rng)
                for i in range(rng.randrange(0, 30))]
        for r in reqs:
            r.done = rng.random() < 0.2
            if rng.random() < 0.1:
                r.prefix_len = None
        assert fast_scan.remaining_prompt_sum(reqs) == sum(map(_ref_remaining, reqs))
        ref = _ref_loads([reqs])[0]
        assert fast_scan.live_load(reqs) == (ref.decode_reqs, ref.decode_ctx_sum)
        assert fast_scan.live_count(reqs) == ref.decode_reqs
    bare = [Bare(5), Bare(9)]
    assert fast_scan.remaining_prompt_sum(bare) == 14


def test_queue_head_reused_only_while_its_requests_are_tracked_and_unchanged():
    rng = random.Random(3)
    clock = translate.RequestClock()
    head = [Req(f"q{i}", 100 + i, 0, rng) for i in range(4)]
    first, _, _, _ = translate.queued_view(head, None, clock, 1.0, limit=8)
    again, _, _, _ = translate.queued_view(head, None, clock, 2.0, limit=8)
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
    head[2].prefix_len, head[2].extend_end = 50, None  # the radix cache matched a prefix
    later, _, tokens, _ = translate.queued_view(head, None, clock, 3.0, limit=8)
    assert later[2].remaining_prompt_tokens == 102 - 50 and later[0] is first[0]
    assert tokens == sum(map(_ref_remaining, head))
    head[1].done = True
    clock.observe(head[1], 4.0)  # finished: forgotten by the clock, arrives anew below
    head[1].done = False
    last, _, _, _ = translate.queued_view(head, None, clock, 5.0, limit=8)
    assert last[-1].req_id == clock.get("q1").req_id == 4 and last[-1].arrival_s == 5.0
