"""The SLO rule (ours, mixed loops): most efficient chunk within the SLO's and the KV's TPOT."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.candidate_costs import CandidateCosts
from ppsched.dcp.predictive import PredictiveChunk
from ppsched.dcp.queue_drain import first_late, queue_deadlines, tokens_within_ms
from ppsched.dcp.rule_slo import KeptSizes, SloRule, kv_round_ms

SLO = Slo(2000.0, 200.0)
# One decode in slot 1: someone has a TPOT to keep, while the asking slot 0 carries no decodes.
ELSEWHERE = (0, 1, 0, 0)
# LinearFake: stage = 10 + 0.02 * batched + 1e-4 * decode_ctx; in a mixed loop a budget c is c
# batched tokens whatever the decodes. pp = 4: the SLO allows stages up to 50 ms.


def mixed_ctl(slo: Slo = SLO, fake: LinearFake | None = None) -> PredictiveChunk:
    ctl = PredictiveChunk(slo, 4, fake or LinearFake())
    # exactly what the fake predicts, so the residual correction stays 0
    # (every tile up to 2048 tokens has run: no candidate is priced by exploration)
    for tokens in range(128, 2049, 128):
        shape = BatchShape(((0, tokens - 2),), 2, 100)
        ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * tokens + 1e-4 * 100))
    assert ctl.mixed_seen
    return ctl


def test_most_efficient_chunk_within_the_slo_tpot():
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)  # 10 + 0.02 c <= 50 -> c <= 2000 -> 1920, the best supply
    assert (d.chunk_tokens, d.reason) == (1920, "slo:max-supply")
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 1920)
    assert dict(d.inputs)["tpot_budget_ms"] == 200.0
    # a tighter SLO shrinks it: 10 + 0.02 c <= 25 -> c <= 750 -> 640
    assert mixed_ctl(Slo(2000.0, 100.0)).decide(snap).chunk_tokens == 640


class OverPredictsAbove384(LinearFake):
    """ALP's extrapolation past the sizes it has run, too high: +40 ms above 400 tokens."""

    def predict(self, shape: BatchShape) -> float:
        return super().predict(shape) + (40.0 if shape.batched_tokens > 400 else 0.0)


def test_the_rule_tries_the_size_above_its_choice_once():
    # tiles up to 384 measured (as predicted); at ALP's prices every size above breaks the SLO's
    # 50 ms stage, so the choice is 384. 512, right above it and never run, is tried once at
    # 384's stage; 640 and above are not (their neighbour 512 has not run yet)
    ctl = PredictiveChunk(SLO, 4, OverPredictsAbove384())
    for tokens in (128, 256, 384):
        shape = BatchShape(((0, tokens - 2),), 2, 100)
        ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * tokens + 1e-4 * 100))
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    d = ctl.decide(snap)
    assert (d.chunk_tokens, d.reason) == (512, "slo:max-supply:explore")
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 384)  # the lower bound
    # measured as ALP says (+40 ms): priced by its own tile from now on, and the choice is 384
    ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 510),), 2, 100),
                                 50 + 0.02 * 512 + 1e-4 * 100))
    d = ctl.decide(replace(snap, iteration=8))
    assert (d.chunk_tokens, d.reason) == (384, "slo:max-supply")


def test_kv_bound_budget_from_littles_law():
    q = [waiting(0, 100.0, 8000)]
    # mean stage 20 ms: round 80 ms; half the KV in use: the cache fills at a 160 ms round,
    # below the SLO's 200: 4 (10 + 0.02 c) <= 160 -> c <= 1500 -> 1408
    snap = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=50_000, kv_total=100_000,
                     decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (1408, "slo:max-supply:kv-bound")
    assert dict(d.inputs)["kv_round_ms"] == pytest.approx(160.0)
    # a tenth in use: the cache allows an 800 ms round, the SLO binds
    roomy = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=90_000, kv_total=100_000,
                      decodes=ELSEWHERE)
    assert mixed_ctl().decide(roomy).reason == "slo:max-supply"


def test_a_kv_budget_that_cannot_keep_up_gives_way_to_the_least_size_that_does():
    # mean stage 20 ms: round 80 ms; 90% of the KV in use: the cache fills at an 88.9 ms round,
    # 4 (10 + 0.02 c) <= 88.9 -> c <= 611 -> 512, whose supply is 512 / 20.24 = 25.3 tokens/ms
    snap = make_snap(queue=[waiting(0, 100.0, 500)], stage_ms=(20.0,) * 8, kv_free=10_000,
                     kv_total=100_000, decodes=ELSEWHERE)
    rule = SloRule(SLO, 4, LinearFake(), TileResidual())
    sizes = tuple(range(128, 2049, 128))

    def chunk(arrival_tok_s: float) -> tuple[int, str]:
        d = rule.choose(snap, sizes, arrival_tok_s)
        return d.costs.candidates[d.index], d.reason

    assert chunk(20_000.0) == (512, "slo:max-supply:kv-bound")  # 512 keeps up: the KV's choice
    # prompts arrive at 30 tokens/ms: 512 falls behind and its queue would grow without end;
    # 640 (28.1) does too, 768 (30.3) keeps up, within the SLO's 200 ms round (4 x 25.4 ms)
    d = rule.choose(snap, sizes, 30_000.0)
    assert (d.costs.candidates[d.index], d.reason) == (768, "slo:keep-up")
    assert dict(d.inputs)["kv_choice"] == 512.0
    # no size within SLO_TPOT keeps up with 60 tokens/ms (1920's 39.7 is the most): the KV's
    assert chunk(60_000.0) == (512, "slo:max-supply:kv-bound")
    # where the SLO binds, not the KV, the price's choice is already the greatest supply
    roomy = replace(snap, kv_free_tokens=90_000)
    d = rule.choose(roomy, sizes, 60_000.0)
    assert (d.costs.candidates[d.index], d.reason) == (1920, "slo:max-supply")


def test_queue_deadlines_are_fcfs_with_the_chunked_request_first():
    chunked = waiting(7, 99.5, 3000, remaining=1000)
    snap = make_snap(now_s=100.0, chunked=chunked,
                     queue=[waiting(1, 97.0, 500), waiting(2, 99.9, 200)])
    # the chunked request (500 ms waited: 1500 left), the late one (3 s: no deadline, but its
    # 500 tokens come first), the fresh one (100 ms waited) after all 1700 tokens
    (left0, cum0, id0), (left2, cum2, id2) = queue_deadlines(snap, 2000.0)
    assert (cum0, cum2, id0, id2) == (1000, 1700, 7, 2)
    assert left0 == pytest.approx(1500.0) and left2 == pytest.approx(1900.0)
    assert queue_deadlines(make_snap(), 2000.0) == []


def test_first_late_checks_every_deadline_without_the_arrivals_share():
    costs = CandidateCosts((256,), (256,), (20.0,), 0.0)
    # 300 ms: (300 - 3 * 20) / 20 = 12 pieces of 256 = 3072 tokens; 100 ms: 2 pieces
    assert first_late(costs, 0, [(300.0, 3072, 0)], 4, 0.0) is None
    assert first_late(costs, 0, [(300.0, 3073, 0)], 4, 0.0) == 0
    assert first_late(costs, 0, [(300.0, 1000, 0), (100.0, 600, 1)], 4, 0.0) == 1
    # 5 ms between microbatches that no stage shows: (300 - 75) / 25 = 9 pieces
    assert first_late(costs, 0, [(300.0, 3072, 0)], 4, 5.0) == 0
    assert first_late(costs, 0, [(300.0, 9 * 256, 0)], 4, 5.0) is None
    assert first_late(costs, 0, [], 4, 0.0) is None
    # the same as tokens_within_ms without arrivals, on a grid
    for left in range(0, 400, 7):
        for cum in range(1, 4000, 97):
            within = tokens_within_ms(costs, 0, float(left), 4)
            assert (first_late(costs, 0, [(float(left), cum, 0)], 4, 0.0) is None) == \
                (within >= cum)


def test_the_least_size_that_brings_the_queue_in_time_past_the_tpot_price():
    tight = Slo(300.0, 100.0)
    # the price admits 640 (22.8 ms). A fresh 6500-token prompt, 300 ms TTFT: within it 640
    # brings floor((300 - 3 * 22.8) / 22.8) = 10 pieces = 6400 tokens; 768, 896, 1024 bring
    # 8 x 768, 7 x 896, 6 x 1024 (< 6500); 1152 (33.04 ms) 6 x 1152 = 6912: the least in time
    snap = make_snap(queue=[waiting(0, 100.0, 6500)], decodes=ELSEWHERE)
    d = mixed_ctl(tight).decide(snap)
    assert (d.chunk_tokens, d.reason) == (1152, "ttft:least-in-time")
    assert dict(d.inputs)["tpot_choice"] == 640.0
    # in time at the price already: the price's choice
    short = make_snap(queue=[waiting(0, 100.0, 5000)], decodes=ELSEWHERE)
    assert mixed_ctl(tight).decide(short).reason == "slo:max-supply"
    # the KV budget (a 100.5 ms round fills the cache) admits 640's 91.2 ms round, not 768's
    # 101.4: no size past it
    kv = make_snap(queue=[waiting(0, 100.0, 6500)], decodes=ELSEWHERE, stage_ms=(20.0,) * 8,
                   kv_free=100_000 - round(100_000 * 80 / 100.5))
    d = mixed_ctl(tight).decide(kv)
    assert (d.chunk_tokens, d.reason) == (640, "slo:max-supply")
    # nothing brings 9000 tokens within 300 ms (at most 6912): the price's choice
    far = make_snap(queue=[waiting(0, 100.0, 9000)], decodes=ELSEWHERE)
    assert mixed_ctl(tight).decide(far).chunk_tokens == 640


def test_an_escalation_is_kept_until_its_request_is_served():
    """Re-planned from the TPOT price at every decision, an escalated prompt went back to the
    price's size as soon as it was just in time again, and reached its first token at its
    deadline: late on any error of the drain (32B sharegpt SLO 0.4)."""
    tight = Slo(300.0, 100.0)
    ctl = mixed_ctl(tight)
    first = ctl.decide(make_snap(queue=[waiting(0, 100.0, 6500)], decodes=ELSEWHERE))
    assert (first.chunk_tokens, first.reason) == (1152, "ttft:least-in-time")
    # two pieces later, 66 ms on: 4196 tokens left, 234 ms; the price's 640 brings it in time
    # again (7 pieces + 3 crossings of 22.8 ms = 228 ms), and the rule keeps 1152 for it
    later = waiting(0, 100.0, 6500, remaining=6500 - 2 * 1152)
    again = make_snap(iteration=8, now_s=100.066, chunked=later, decodes=ELSEWHERE)
    assert mixed_ctl(tight).decide(again).reason == "slo:max-supply"  # without the escalation
    kept = ctl.decide(again)
    assert (kept.chunk_tokens, kept.reason) == (1152, "ttft:kept")
    assert dict(kept.inputs)["tpot_choice"] == 640.0
    # TPOT the tighter SLO (P90 95 of 100 ms, TTFT 150 of 300): not spent on TTFT
    tpot_bound = replace(again, iteration=16, recent_ttft_ms=(150.0,) * 10,
                         recent_tpot_ms=(95.0,) * 10)
    assert ctl.decide(tpot_bound).reason == "slo:max-supply"
    ttft_bound = replace(tpot_bound, iteration=24, recent_ttft_ms=(290.0,) * 10)
    assert ctl.decide(ttft_bound).reason == "ttft:kept"
    # past the KV budget (a 100.5 ms round fills the cache), the kept size is not taken
    full = replace(again, iteration=32, recent_stage_ms=(20.0,) * 8,
                   kv_free_tokens=100_000 - round(100_000 * 80 / 100.5))
    assert ctl.decide(full).chunk_tokens == 640
    # served (it left the queue): forgotten, the price's size for the next request
    nxt = make_snap(iteration=40, now_s=100.3, queue=[waiting(1, 100.3, 1000)], decodes=ELSEWHERE)
    assert (ctl.decide(nxt).chunk_tokens, ctl.decide(nxt).reason) == (640, "slo:max-supply")


def test_the_price_is_eased_while_tpot_is_the_tighter_slo():
    """At the price's top every round costs TPOT that a slack TTFT does not need (14B azure-code
    at SLO 1: P90 TPOT 200.7 of 200 ms, TTFT 1,348 of 2,000)."""
    rule = SloRule(SLO, 4, LinearFake(), TileResidual())
    grid = tuple(range(128, 2049, 128))
    fresh = [waiting(0, 100.0, 3000)]
    tpot_bound = dict(decodes=ELSEWHERE, ttft=(500.0,) * 10, tpot=(190.0,) * 10)
    # the price admits 1920; TPOT 0.95 of its SLO, TTFT 0.25: the least size that brings the
    # queue in time, 128 (24 pieces + 3 crossings of 12.56 ms = 339 ms < 2000)
    eased = rule.choose(make_snap(queue=fresh, **tpot_bound), grid, 0.0)
    assert (grid[eased.index], eased.reason) == (128, "tpot:least-in-time")
    assert dict(eased.inputs)["tpot_choice"] == 1920.0
    # and that keeps up with the arriving prompt tokens: 12 tok/ms, more than 128's supply
    # (10.2), less than 256's (16.9)
    busy = rule.choose(make_snap(queue=fresh, **tpot_bound), grid, 12_000.0)
    assert grid[busy.index] == 256
    # 300 ms left before the TTFT SLO: 128 brings it late (339 ms), 256 in time (15 x 15.12)
    old = [waiting(0, 98.3, 3000)]
    assert grid[rule.choose(make_snap(queue=old, **tpot_bound), grid, 0.0).index] == 256
    # TTFT the tighter (1,900 of 2,000 ms), or either P90 unknown: the price's choice
    for ttft, tpot in (((1900.0,) * 10, (190.0,) * 10), ((), (190.0,) * 10), ((500.0,), ())):
        snap = make_snap(queue=fresh, decodes=ELSEWHERE, ttft=ttft, tpot=tpot)
        kept = rule.choose(snap, grid, 0.0)
        assert (grid[kept.index], kept.reason) == (1920, "slo:max-supply")


def test_the_ease_waits_until_the_measured_tpot_says_the_price_would_overrun():
    """TPOT the closer SLO (100 of 200 ms against TTFT's 500 of 2,000) is not enough: the ease
    acts only when the recent P90 TPOT, scaled from the recent mean stage to the price's choice,
    passes SLO_TPOT (14B mooncake-synthetic at SLO 0.6: eased to 128-256 at a burst's start with
    P90 TPOT at 63% of its limit)."""
    rule = SloRule(SLO, 4, LinearFake(), TileResidual())
    grid = tuple(range(128, 2049, 128))
    fresh = [waiting(0, 100.0, 3000)]
    gate_open = dict(queue=fresh, decodes=ELSEWHERE, ttft=(500.0,) * 10, tpot=(100.0,) * 10,
                     kv_free=90_000)  # the KV cache far from binding at these stages
    # recent stages at 1920's own 48.4 ms: 100 ms scales to 100, within 200: the price stands
    kept = rule.choose(make_snap(stage_ms=(48.4,) * 10, **gate_open), grid, 0.0)
    assert (grid[kept.index], kept.reason) == (1920, "slo:max-supply")
    # recent stages of 20 ms: 1920 would take P90 TPOT to 100 x 48.4 / 20 = 242 ms: eased
    eased = rule.choose(make_snap(stage_ms=(20.0,) * 10, **gate_open), grid, 0.0)
    assert (grid[eased.index], eased.reason) == (128, "tpot:least-in-time")
    # either side of the line: 100 x 48.4 / 24.3 = 199.2 stands, / 24.1 = 200.8 is eased
    under = rule.choose(make_snap(stage_ms=(24.3,) * 10, **gate_open), grid, 0.0)
    assert grid[under.index] == 1920
    over = rule.choose(make_snap(stage_ms=(24.1,) * 10, **gate_open), grid, 0.0)
    assert grid[over.index] == 128


def test_kept_sizes_keep_the_largest_per_request_and_forget_the_served():
    kept = KeptSizes()
    snap = make_snap(queue=[waiting(3, 99.0, 500), waiting(4, 99.5, 800)])
    assert kept.largest(snap) == 0
    kept.keep(3, 384)
    kept.keep(3, 256)  # a later, smaller escalation does not lower it
    kept.keep(4, 512)
    assert kept.largest(snap) == 512
    assert kept.largest(make_snap(queue=[waiting(3, 99.0, 500)])) == 384  # 4 served
    assert kept.largest(make_snap()) == 0 and kept.largest(snap) == 0  # forgotten


def test_kv_round_ms():
    assert kv_round_ms(make_snap(stage_ms=(10.0, 30.0), kv_free=25_000), 4) == \
        pytest.approx(80.0 * 100_000 / 75_000)
    assert math.isinf(kv_round_ms(make_snap(), 4))  # no stage samples yet
    assert math.isinf(kv_round_ms(make_snap(stage_ms=(10.0,), kv_free=100_000), 4))  # KV empty


def test_sized_by_the_asking_slot_and_held_for_the_cadence():
    q = [waiting(0, 100.0, 8000)]
    ctl = mixed_ctl()
    # slot 0 carries 100 decodes of 1000 context (10 ms): 20 + 0.02 c <= 50 -> 1408
    d0 = ctl.decide(make_snap(slot=0, queue=q, decodes=(100, 0, 0, 0)))
    assert d0.chunk_tokens == 1408 and dict(d0.inputs)["slot_decodes"] == 100
    # the other slots run the same size until 2 * pp iterations have passed (alike microbatches
    # keep the pipeline's stages from idling behind a longer one)
    for it in range(1, 8):
        assert ctl.decide(make_snap(slot=it % 4, iteration=it, queue=q,
                                    decodes=(100, 0, 0, 0))) is d0
    d8 = ctl.decide(make_snap(slot=1, iteration=8, queue=q, decodes=(100, 0, 0, 0)))
    assert d8.chunk_tokens == 1920 and dict(d8.inputs)["slot_decodes"] == 0  # slot 1's own


def test_nothing_fits_takes_the_least_stage_then_the_safety_floor():
    # 150 decodes of 3000 context: 45 ms of attention, so every budget breaks 50 ms. The one
    # queued request waited 3 s, past the 2 s TTFT: no size brings it in time, none is tried
    snap = make_snap(queue=[waiting(0, 97.0, 1000)], decodes=(150,) * 4, ctx_per_decode=3000)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (256, "tpot-tight:least-stage+safety-floor")


def test_nothing_fits_takes_the_smallest_even_where_alp_ranks_a_larger_one_faster():
    class Confounded(LinearFake):
        """Predicts fewer batched tokens as slower (as ALP's online fit did on the CPU server)."""

        def predict(self, shape):
            return 40.0 - 0.01 * shape.batched_tokens

    snap = make_snap(queue=[waiting(0, 99.0, 8000)], decodes=ELSEWHERE)
    rule = SloRule(Slo(2000.0, 100.0), 4, Confounded(), TileResidual())
    d = rule.choose(snap, (64, 128, 256), 0.0)  # every round 4 x ~38 ms > 100: none fits
    assert (d.index, d.reason) == (0, "tpot-tight:least-stage")
    assert d.costs.stage_ms[0] > d.costs.stage_ms[2]  # ALP said otherwise; physics wins


def test_measured_residual_corrects_the_stage_predictions():
    fake = LinearFake()
    ctl = mixed_ctl(fake=fake)
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    assert ctl.decide(snap).chunk_tokens == 1920
    shape = BatchShape(((0, 1900),))  # tile 15 (1793..1920 batched tokens) runs 30 ms slow
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, fake.predict(shape) + 30.0))
    # 1920 now predicts 78 ms; 1792 (tile 14, measured exact) keeps its own residual, 0, and fits
    # (at the next decision: the first is held for 2 * pp iterations)
    d = ctl.decide(replace(snap, iteration=8))
    assert d.chunk_tokens == 1792
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 1792)


def test_nothing_decodes_takes_the_chunk_that_brings_most_tokens_within_the_ttft():
    # Slo TTFT 400 ms, stage 10 + 0.02 c, pp 4: c brings c * floor((400 - 3 s) / s) queued tokens
    # to their first token in time; 1152 the most (9 pieces: 10,368 tokens; 1024 and 1280:
    # 10,240), whatever the queue of the moment: 100 tokens would cross fastest in 128 and
    # 20,000 drain fastest in 2048, but the P90 is decided by the requests near the TTFT
    for queued in (100, 10_368, 20_000):
        d = mixed_ctl(Slo(400.0, 40.0)).decide(make_snap(queue=[waiting(0, 100.0, queued)]))
        assert (d.chunk_tokens, d.reason) == (1152, "no-decodes:most-within-ttft")
        assert dict(d.inputs)["tokens_within_ttft"] == 10_368
    # a looser TTFT amortises the crossing over more pieces: 2000 ms brings the most in 2048
    d = mixed_ctl(Slo(2000.0, 40.0)).decide(make_snap(queue=[waiting(0, 100.0, 100)]))
    assert (d.chunk_tokens, dict(d.inputs)["tokens_within_ttft"]) == (2048, 36 * 2048)
    # the SLO's TPOT (40 ms: stages <= 10 ms) binds again as soon as anything decodes
    busy = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    assert mixed_ctl(Slo(2000.0, 40.0)).decide(busy).reason == "tpot-tight:least-stage"
    # nothing queued: no first token to hurry, the TPOT rule as before
    assert mixed_ctl().decide(make_snap()).reason == "slo:max-supply"


def test_nothing_decodes_under_arrivals_favours_supply():
    rule = SloRule(Slo(400.0, 40.0), 4, LinearFake(), TileResidual())
    grid = tuple(range(128, 2049, 128))
    snap = make_snap(queue=[waiting(0, 100.0, 100)])
    assert grid[rule.choose(snap, grid, 0.0).index] == 1152  # idle: as above
    # 15,000 prompt tok/s arriving take rho = 15 / supply(c) of stage 0, and the drain stretches
    # by 1 / (1 - rho): 128 cannot keep up (0 tokens), 1152 now brings 5,760, 1536 and 2048
    # 6,144 each (the shorter stage, 1536, wins the tie)
    busy = rule.choose(snap, grid, 15_000.0)
    assert (grid[busy.index], busy.reason) == (1536, "no-decodes:most-within-ttft")
    assert dict(busy.inputs)["tokens_within_ttft"] == 6144
    # more than any chunk can supply (2048: 40.2 tok/ms): none in time, the greatest supply
    flood = rule.choose(snap, grid, 50_000.0)
    assert (grid[flood.index], flood.reason) == (2048, "no-decodes:max-supply")
    # a TTFT shorter than any crossing (3 stages of >= 12.56 ms): likewise
    tight = SloRule(Slo(30.0, 40.0), 4, LinearFake(), TileResidual()).choose(snap, grid, 0.0)
    assert (grid[tight.index], tight.reason) == (2048, "no-decodes:max-supply")


def first_token_ms(costs: CandidateCosts, i: int, queued: int, pp: int, arrival: float) -> float:
    """Q tokens' last first token: ceil(Q / p) stages stretched by 1 / (1 - rho), then the
    crossing (the model tokens_within_ms inverts)."""
    s = costs.stage_ms[i]
    return math.ceil(queued / costs.prefill[i]) * s / (1 - arrival / costs.supply(i)) + (pp - 1) * s


def test_tokens_within_ms_is_the_largest_queue_in_time():
    costs = CandidateCosts((128, 256), (0, 56), (12.0, 15.0), 0.0)
    assert tokens_within_ms(costs, 0, 400.0, 4) == 0  # carries no prefill
    for arrival in (0.0, 1.5):
        q = tokens_within_ms(costs, 1, 400.0, 4, arrival)
        assert q > 0
        assert first_token_ms(costs, 1, q, 4, arrival) <= 400.0
        assert first_token_ms(costs, 1, q + 1, 4, arrival) > 400.0
    assert tokens_within_ms(costs, 1, 400.0, 4) == 56 * 23  # 23 pieces + 3 crossing: 390 ms
    assert tokens_within_ms(costs, 1, 40.0, 4) == 0  # not even the crossing fits
    assert tokens_within_ms(costs, 1, 400.0, 4, arrival_tok_ms=56 / 15.0) == 0  # cannot keep up


def test_best_supply_is_the_greatest_supply_within_the_round_budget():
    import random

    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 8)
        prefill = tuple(rng.choice((0, 64, 128, 256)) for _ in range(n))
        stage = tuple(float(rng.choice((10, 12, 20, 24))) for _ in range(n))  # ties on purpose
        costs = CandidateCosts(tuple(range(1, n + 1)), prefill, stage, 0.0)
        budget = rng.choice((30.0, 50.0, 100.0))
        fits = [i for i in range(n) if prefill[i] > 0 and stage[i] * 4 <= budget]
        want = max(fits, key=lambda i: (costs.supply(i), -stage[i])) if fits else None
        assert costs.best_supply(4, budget) == want
