"""The SLO rule (ours, mixed loops): one objective, its terms in order (rule_slo's docstring)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.rounds import kv_round_ms
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.candidate_costs import CandidateCosts
from ppsched.dcp.predictive import PredictiveChunk
from ppsched.dcp.queue_drain import first_token_ms, most_in_time, queue_deadlines
from ppsched.dcp.rule_slo import SloRule

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



def chooser(slo: Slo = SLO, snap_kw: dict | None = None):
    """The rule's chunk and label for a snapshot, at an arrival rate (tokens/s)."""
    rule = SloRule(slo, 4, LinearFake(), TileResidual())
    grid = tuple(range(128, 2049, 128))

    def chunk(arrival_tok_s: float = 0.0, **kw) -> tuple[int, str]:
        choice = rule.choose(make_snap(**{**(snap_kw or {}), **kw}), grid, arrival_tok_s)
        return grid[choice.index], choice.reason

    return chunk


def test_most_supply_within_the_tpot_budget():
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)  # 10 + 0.02 c <= 50 -> c <= 2000 -> 1920, the best supply
    assert (d.chunk_tokens, d.reason) == (1920, "slo:within-budget")
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
    assert (d.chunk_tokens, d.reason) == (512, "slo:within-budget:explore")
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 384)  # the lower bound
    # measured as ALP says (+40 ms): priced by its own tile from now on, and the choice is 384
    ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 510),), 2, 100),
                                 50 + 0.02 * 512 + 1e-4 * 100))
    d = ctl.decide(replace(snap, iteration=8))
    assert (d.chunk_tokens, d.reason) == (384, "slo:within-budget")


def test_kv_ceiling_from_littles_law():
    q = [waiting(0, 100.0, 8000)]
    # mean stage 20 ms: round 80 ms; half the KV in use: the cache fills at a 160 ms round,
    # below the SLO's 200: 4 (10 + 0.02 c) <= 160 -> c <= 1500 -> 1408
    snap = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=50_000, kv_total=100_000,
                     decodes=ELSEWHERE)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (1408, "slo:within-budget")
    inputs = dict(d.inputs)
    assert inputs["kv_round_ms"] == pytest.approx(160.0)
    assert inputs["tpot_budget_ms"] == inputs["ceiling_ms"] == pytest.approx(160.0)
    # a tenth in use: the cache allows an 800 ms round, the SLO binds
    roomy = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=90_000, kv_total=100_000,
                      decodes=ELSEWHERE)
    assert mixed_ctl().decide(roomy).chunk_tokens == 1920


def test_keeping_up_comes_first():
    # mean stage 20 ms: round 80 ms; 90% of the KV in use: the cache fills at an 88.9 ms round,
    # 4 (10 + 0.02 c) <= 88.9 -> c <= 611 -> 512, whose supply is 512 / 20.24 = 25.3 tokens/ms
    chunk = chooser(snap_kw=dict(queue=[waiting(0, 100.0, 500)], stage_ms=(20.0,) * 8,
                                 kv_free=10_000, decodes=ELSEWHERE))
    assert chunk(20_000.0) == (512, "slo:within-budget")  # 512 keeps up: the KV's choice
    # prompts arrive at 30 tokens/ms: no size within the KV ceiling keeps up, and a queue that
    # grows misses every TTFT: the ceiling is SLO_TPOT's, and 768 (30.3) the least that keeps up
    assert chunk(30_000.0) == (768, "slo:over-budget")
    # no size within SLO_TPOT keeps up with 60 tokens/ms (1920's 39.7 is the most): the KV's
    assert chunk(60_000.0) == (512, "slo:within-budget")
    # with room in the cache, keeping up outranks SLO_TPOT too: at 40 tokens/ms 1920 (39.67)
    # falls behind and 2048 (40.19, a 203.8 ms round) keeps up
    assert chunk(39_000.0, kv_free=90_000) == (1920, "slo:within-budget")
    assert chunk(40_000.0, kv_free=90_000) == (2048, "slo:over-budget")


def test_queue_deadlines_are_fcfs_with_the_chunked_request_first():
    chunked = waiting(7, 99.5, 3000, remaining=1000)
    snap = make_snap(now_s=100.0, chunked=chunked,
                     queue=[waiting(1, 97.0, 500), waiting(2, 99.9, 200)])
    # the chunked request (500 ms waited: 1500 left), the late one (3 s: no deadline, but its
    # 500 tokens come first), the fresh one (100 ms waited) after all 1700 tokens
    (left0, cum0), (left2, cum2) = queue_deadlines(snap, 2000.0)
    assert (cum0, cum2) == (1000, 1700)
    assert left0 == pytest.approx(1500.0) and left2 == pytest.approx(1900.0)
    assert queue_deadlines(make_snap(), 2000.0) == []


def test_the_drain_model():
    # ceil(Q / p) microbatches of a stage and the gap each, then pp - 1 stages to cross
    assert first_token_ms(3072, 256, 20.0, 0.0, 4) == 12 * 20.0 + 3 * 20.0
    assert first_token_ms(3073, 256, 20.0, 0.0, 4) == 13 * 20.0 + 3 * 20.0
    assert first_token_ms(256, 256, 20.0, 5.0, 4) == 25.0 + 60.0  # no gap on the crossing
    deadlines = [(300.0, 1000), (100.0, 1200), (400.0, 3072)]
    prefill, stage = (256, 256, 512), (20.0, 20.0, 30.0)
    key = {0: (1.0,), 1: (0.0,), 2: (2.0,)}.__getitem__  # the objective's order of the sizes
    # size 0 brings two in time (160, 160 > 100, 300); with a 10 ms gap one (180, 210, 420)
    assert most_in_time([0], key, deadlines, prefill, stage, 0.0, 4) == (0, 2)
    assert most_in_time([0], key, deadlines, prefill, stage, 10.0, 4) == (0, 1)
    # 512 (30 ms) brings two as well (150, 180 > 100, 270): a tie goes to the greater key
    assert most_in_time([0, 2], key, deadlines, prefill, stage, 0.0, 4) == (2, 2)
    assert most_in_time([0, 2], lambda i: -key(i)[0], deadlines, prefill, stage, 0.0, 4) == (0, 2)
    # no deadline left to count: the greatest key, the first of equal ones
    assert most_in_time([1, 0], key, [], prefill, stage, 0.0, 4) == (0, 0)
    assert most_in_time([1, 0], lambda i: (0.0,), [], prefill, stage, 0.0, 4) == (1, 0)


def test_ttft_outranks_slo_tpot_but_not_the_kv_cache():
    tight = Slo(300.0, 100.0)
    # the budget admits 640 (22.8 ms). A fresh 6500-token prompt, 300 ms TTFT: 640 brings it in
    # 14 x 22.8 = 319 ms, 768 in 12 x 25.36, 896 in 11 x 27.92, 1024 in 10 x 30.48 (all late);
    # 1152 in 9 x 33.04 = 297 ms: the least round past the budget that brings it in time
    snap = make_snap(queue=[waiting(0, 100.0, 6500)], decodes=ELSEWHERE)
    d = mixed_ctl(tight).decide(snap)
    assert (d.chunk_tokens, d.reason) == (1152, "slo:over-budget")
    assert dict(d.inputs)["in_time"] == 1.0
    # in time within the budget already: the most supply there
    short = make_snap(queue=[waiting(0, 100.0, 5000)], decodes=ELSEWHERE)
    assert mixed_ctl(tight).decide(short).reason == "slo:within-budget"
    # the KV ceiling (a 100.5 ms round fills the cache) admits 640's 91.2 ms round, not 768's
    # 101.4: no size past it
    kv = make_snap(queue=[waiting(0, 100.0, 6500)], decodes=ELSEWHERE, stage_ms=(20.0,) * 8,
                   kv_free=100_000 - round(100_000 * 80 / 100.5))
    assert mixed_ctl(tight).decide(kv).chunk_tokens == 640
    # nothing brings 9000 tokens within 300 ms (2048: 8 x 50.96 = 408 ms): the budget's size
    far = make_snap(queue=[waiting(0, 100.0, 9000)], decodes=ELSEWHERE)
    assert mixed_ctl(tight).decide(far).chunk_tokens == 640


def test_the_most_queued_requests_in_time_when_not_all_can_be():
    # behind the 6500-token prompt a 2000-token one that no size brings within 300 ms (8500
    # tokens: 2048 takes 8 x 50.96 ms): 1152 still brings the first in time
    queue = [waiting(0, 100.0, 6500), waiting(1, 100.0, 2000)]
    d = mixed_ctl(Slo(300.0, 100.0)).decide(make_snap(queue=queue, decodes=ELSEWHERE))
    assert (d.chunk_tokens, dict(d.inputs)["in_time"]) == (1152, 1.0)


def test_the_p90_prompt_outranks_the_queue_of_the_moment():
    # TTFT 400 ms, TPOT 60 ms (stages up to 15 ms: 128's 12.56 ms fits, 256's 15.12 does not).
    # The queue of the moment is one short prompt, which 128 brings in time; ten recent prompts
    # of 4000 tokens, which 128 cannot prefill within 400 ms (32 x 12.56 + 3 x 12.56) and 256
    # can (16 x 15.12 + 3 x 15.12 = 287 ms)
    slo = Slo(400.0, 60.0)
    short = dict(iteration=800, queue=[waiting(1, 100.0, 100)], decodes=ELSEWHERE,
                 ttft=(100.0,) * 64)

    def seen(ctl: PredictiveChunk, count: int) -> PredictiveChunk:
        for k in range(count):
            ctl.decide(make_snap(iteration=8 * k, queue=[waiting(1000 + k, 100.0, 4000)],
                                 decodes=ELSEWHERE, ttft=(100.0,) * 64))
        return ctl

    d = seen(mixed_ctl(slo), 8).decide(make_snap(**short))  # nine prompts: no P90 yet
    assert (d.chunk_tokens, d.reason, d.ttft_slack) == (128, "slo:within-budget", None)
    d = seen(mixed_ctl(slo), 10).decide(make_snap(**short))
    assert (d.chunk_tokens, d.reason) == (256, "slo:over-budget")
    assert d.ttft_slack == pytest.approx(1 - 19 * 15.12 / 400)
    # nor does easing TPOT go below it (P90 TPOT 59 of 60 ms, TTFT 100 of 400)
    d = seen(mixed_ctl(slo), 10).decide(make_snap(**short, tpot=(59.0,) * 64))
    assert d.chunk_tokens == 256


def test_ttfts_margin_goes_to_tpot_while_tpot_is_measured_the_closer():
    """At the budget's top every round costs TPOT that a slack TTFT does not need (14B
    azure-code at SLO 1: P90 TPOT 200.7 of 200 ms, TTFT 1,348 of 2,000)."""
    chunk = chooser(snap_kw=dict(queue=[waiting(0, 100.0, 3000)], decodes=ELSEWHERE,
                                 ttft=(500.0,) * 10, tpot=(190.0,) * 10, stage_ms=(40.0,) * 10,
                                 kv_free=90_000))
    # TPOT 0.95 of its SLO, TTFT 0.25, and 1920 (48.4 ms) would take it past 200 ms (recent
    # stages of 40 ms): the most supply among the sizes it fits at, 190 x s / 40 <= 200 ->
    # s <= 42.1 ms -> 1536 (40.72 ms), a step down rather than to the least round
    assert chunk() == (1536, "slo:eased")
    # TTFT the closer (1,900 of 2,000 ms), or either P90 unknown: the most supply
    for ttft, tpot in (((1900.0,) * 10, (190.0,) * 10), ((), (190.0,) * 10), ((500.0,), ())):
        assert chunk(ttft=ttft, tpot=tpot) == (1920, "slo:within-budget")
    # recent stages of 10 ms: no size fits (190 x 12.56 / 10 > 200), so the least round that
    # keeps the TTFT terms, 128 (24 pieces + 3 crossings of 12.56 ms = 339 ms < 2000) ...
    assert chunk(stage_ms=(10.0,) * 10) == (128, "slo:eased")
    # ... keeping up with 12 tok/ms: more than 128's supply (10.2), less than 256's (16.9)
    assert chunk(12_000.0, stage_ms=(10.0,) * 10) == (256, "slo:eased")
    # ... and 300 ms left before the TTFT SLO: 128 brings it late (339 ms), 256 in time
    assert chunk(queue=[waiting(0, 98.3, 3000)], stage_ms=(10.0,) * 10) == (256, "slo:eased")


def test_the_margin_moves_only_when_the_measured_tpot_says_the_budget_would_overrun():
    """TPOT the closer SLO (100 of 200 ms against TTFT's 500 of 2,000) is not enough: the
    recent P90 TPOT, scaled from the recent mean stage to the most-supply size's, must pass the
    budget (14B mooncake-synthetic at SLO 0.6: eased to 128-256 at a burst's start with P90 TPOT
    at 63% of its limit), and then the pick steps down only as far as the scaled TPOT fits."""
    chunk = chooser(snap_kw=dict(queue=[waiting(0, 100.0, 3000)], decodes=ELSEWHERE,
                                 ttft=(500.0,) * 10, tpot=(100.0,) * 10, kv_free=90_000))
    # recent stages at 1920's own 48.4 ms: 100 ms scales to 100, within 200
    assert chunk(stage_ms=(48.4,) * 10) == (1920, "slo:within-budget")
    # recent stages of 20 ms: 1920 would take P90 TPOT to 100 x 48.4 / 20 = 242 ms; it fits at
    # s <= 40 ms: 1408 (38.16 ms)
    assert chunk(stage_ms=(20.0,) * 10) == (1408, "slo:eased")
    # either side of the line: 100 x 48.4 / 24.3 = 199.2 stands, / 24.1 = 200.8 steps to 1792
    assert chunk(stage_ms=(24.3,) * 10)[0] == 1920
    assert chunk(stage_ms=(24.1,) * 10)[0] == 1792


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


def test_nothing_fits_the_budget_takes_the_least_round():
    # 150 decodes of 3000 context: 45 ms of attention, so every budget breaks 50 ms. The one
    # queued request waited 3 s, past the 2 s TTFT: no size brings it in time, and the least
    # round that carries prefill is 256's (128 carries none)
    snap = make_snap(queue=[waiting(0, 97.0, 1000)], decodes=(150,) * 4, ctx_per_decode=3000)
    d = mixed_ctl().decide(snap)
    assert (d.chunk_tokens, d.reason) == (256, "slo:over-budget")
    assert d.tpot_slack == pytest.approx(1 - 4 * (10 + 0.02 * 256 + 45) / 200)


def test_the_kv_ceiling_and_past_it_the_least_stage():
    # stages of 20 ms with 99.9% of the KV in use: the cache fills at an 80.08 ms round, which
    # 384 (4 x 17.68 ms) fits and 512 does not
    snap = dict(queue=[waiting(0, 100.0, 500)], decodes=ELSEWHERE, stage_ms=(20.0,) * 8,
                kv_free=100)
    assert chooser(snap_kw=snap)() == (384, "slo:within-budget")

    def choose(base: float) -> tuple[int, str]:
        rule = SloRule(SLO, 4, LinearFake(base=base), TileResidual())
        choice = rule.choose(make_snap(**snap), (128, 256), 0.0)
        return choice.index, choice.reason

    # no size within it (128: 4 x 27.56 ms), so none there keeps up: the ceiling is SLO_TPOT's
    assert choose(25.0) == (0, "slo:over-budget")
    # no size within SLO_TPOT either (128: 4 x 62.56 ms): the least stage
    assert choose(60.0) == (0, "tpot-tight:least-stage")


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


def test_nothing_decodes_leaves_ttft_alone():
    # a round costs TPOT only to the requests decoding during it: with none, no TPOT budget, and
    # the size that brings the most prompt tokens to their first token within SLO_TTFT, 400 ms:
    # c (400 - 3 s) / s tokens, the most for 1280 (10,542; 1152: 10,490; 1408: 10,534)
    slo = Slo(400.0, 40.0)
    chunk = chooser(slo, dict(queue=[waiting(0, 100.0, 100)]))
    assert chunk() == (1280, "slo:within-budget")
    # whatever the queue of the moment: 9000 tokens (1280: 8 + 3 stages of 35.6 ms = 392 ms),
    # or 20,000 that no size brings in time
    assert chunk(queue=[waiting(0, 100.0, 9000)]) == (1280, "slo:within-budget")
    assert chunk(queue=[waiting(0, 100.0, 20_000)]) == (1280, "slo:within-budget")
    # the SLO's TPOT (40 ms: stages <= 10 ms) binds as soon as anything decodes: no size fits,
    # and the least round past the budget that brings the 100 tokens in time is 128's
    assert chunk(decodes=ELSEWHERE) == (128, "slo:over-budget")


def test_the_most_tokens_within_the_ttft_weighs_the_crossing():
    # TTFT 300 ms, budget 200 ms (stages to 50 ms): the crossing (3 stages) takes a larger share
    # of a short TTFT, so 1024 (300 - 3 x 30.48 = 208.6 ms of pieces: 7,007 tokens; 1152:
    # 7,004) beats 1920 (154.8 ms: 6,141) though 1920 has the greater supply (39.7 against 33.6
    # tokens/ms)
    chunk = chooser(Slo(300.0, 200.0), dict(queue=[waiting(0, 100.0, 100)], decodes=ELSEWHERE))
    assert chunk() == (1024, "slo:within-budget")


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
