"""SGLang state → snapshots, on fake Req objects (no SGLang needed)."""

import math

from ppsched.sglang_patch import translate
from ppsched.sglang_patch.translate import RequestClock


class FakeReq:
    def __init__(self, rid, prompt, out=0, done=False, prefix_len=0, extend_end=0):
        self.rid = rid
        self.origin_input_ids = list(range(prompt))
        self.output_ids = list(range(out))
        self._done = done
        self.prefix_len = prefix_len
        self.extend_end = extend_end

    def finished(self):
        return self._done


def test_clock_ids_arrivals_and_token_times():
    clock = RequestClock()
    a = clock.arrive("a", 10, 1.0)
    b = clock.arrive("b", 5, 2.0)
    assert (a.req_id, b.req_id) == (0, 1)
    assert clock.arrive("a", 10, 9.0).arrival_s == 1.0  # first sight wins
    assert (clock.arrived_requests, clock.arrived_prompt_tokens) == (2, 15)
    req = FakeReq("a", 10, out=1)
    clock.observe(req, 1.5)
    assert clock.get("a").first_token_s == 1.5
    assert list(clock.recent_ttft_ms) == [500.0]
    req.output_ids = list(range(3))
    clock.observe(req, 2.5)
    req._done = True
    clock.observe(req, 2.5)
    assert math.isclose(clock.recent_tpot_ms[-1], 500.0)  # (2.5 - 1.5) s over 2 gaps
    assert clock.get("a") is None  # finished requests are forgotten


def test_remaining_prompt_uses_progress():
    assert translate.remaining_prompt(FakeReq("x", 100)) == 100
    assert translate.remaining_prompt(FakeReq("x", 100, extend_end=64)) == 36
    assert translate.remaining_prompt(FakeReq("x", 100, prefix_len=80, extend_end=64)) == 20


def test_queued_view_counts_exactly_and_truncates():
    clock = RequestClock()
    waiting = [FakeReq(f"w{i}", 10 + i) for i in range(5)]
    chunked = FakeReq("c", 300, extend_end=128)
    view, count, tokens, cq = translate.queued_view(waiting, chunked, clock, 0.0, limit=3)
    assert count == 6 and tokens == sum(10 + i for i in range(5)) + 172
    assert len(view) == 3 and view[0] == cq and cq.remaining_prompt_tokens == 172


def test_chunk_snapshot_slots_and_kv():
    clock = RequestClock()
    slot0 = [FakeReq("r0", 10, out=3), FakeReq("r1", 20, out=1, done=True)]
    slot1 = [FakeReq("r2", 5, out=2)]
    snap = translate.chunk_snapshot(
        now_s=3.0, iteration=7, slot=1, pp_size=2, waiting=[FakeReq("w", 40)], chunked=None,
        slot_reqs=[slot0, slot1], kv_free=100, kv_total=400, clock=clock,
        recent_stage_ms=[1.0, 2.0], max_chunk=128, queue_view=8)
    assert snap.slot == 1 and snap.iteration == 7 and snap.queued_prompt_tokens == 40
    assert [(s.decode_reqs, s.decode_ctx_sum) for s in snap.slots] == [(1, 13), (1, 7)]
    assert snap.kv_free_fraction == 0.25 and snap.recent_stage_ms == (1.0, 2.0)
    assert snap.max_chunk_tokens == 128


def test_decode_snapshot_orders_by_arrival_and_tracks_streaks():
    clock = RequestClock()
    late, early = FakeReq("late", 8, out=2), FakeReq("early", 8, out=4)
    clock.arrive("early", 8, 0.0)
    clock.arrive("late", 8, 1.0)
    clock.get("late").held_streak = 2
    snap = translate.decode_snapshot(
        now_s=5.0, slot=0, pp_size=2, running=[late], held=[early], slot_sizes=[2, 0],
        kv_free=10, kv_total=20, queued_requests=0, queued_prompt_tokens=0, clock=clock)
    assert [d.req_id for d in snap.held] == [clock.get("early").req_id]
    assert snap.running[0].held_streak == 2 and snap.running[0].context_len == 10
    assert snap.running[0].generated_tokens == 2


def test_batch_shapes():
    dec = translate.batch_shape(True, None, None, [10, 20, 30])
    assert (dec.kind, dec.decode_count, dec.decode_ctx_sum) == ("decode", 3, 60)
    pre = translate.batch_shape(False, [0, 64], [128, 36], None)
    assert pre.prefill == ((0, 128), (64, 36)) and pre.kind == "prefill"
    mixed = translate.batch_shape(False, [0, 9, 19], [50, 1, 1], None, num_decode_in_mixed=2)
    assert mixed.kind == "mixed" and mixed.decode_count == 2 and mixed.decode_ctx_sum == 30
    assert mixed.prefill_tokens == 50
