"""The SLO rule (ours, mixed loops): the most supply within every predicted limit, else the
greatest smallest slack (``ppsched.dcp.rule_slo``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from test_dcp_support import LinearFake, make_snap, waiting

from ppsched.core.batch import BatchShape
from ppsched.core.slo import Slo
from ppsched.core.snapshots import Launch, StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.predictive import PredictiveChunk
from ppsched.dcp.queue_drain import RecentPrompts, first_token_ms, queue_deadlines
from ppsched.dcp.regime import Regime
from ppsched.dcp.rounds import RoundMeter, steady_tpot
from ppsched.dcp.rule_slo import SloRule, _Plan, kv_round_ms
from ppsched.dcp.signals import percentile

SLO = Slo(2000.0, 200.0)
SIZES = tuple(range(128, 2049, 128))
# One decode in slot 1: someone has a TPOT to keep, while the asking slot 0 carries no decodes.
ELSEWHERE = (0, 1, 0, 0)
# LinearFake: stage = 10 + 0.02 * batched + 1e-4 * decode_ctx; in a mixed loop a budget c is c
# batched tokens whatever the decodes.


def mixed_ctl(slo: Slo = SLO, fake: LinearFake | None = None) -> PredictiveChunk:
    ctl = PredictiveChunk(slo, 4, fake or LinearFake())
    # exactly what the fake predicts, so the residual correction stays 0
    # (every tile up to 2048 tokens has run: no candidate is priced by exploration)
    for tokens in range(128, 2049, 128):
        shape = BatchShape(((0, tokens - 2),), 2, 100)
        ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * tokens + 1e-4 * 100))
    assert ctl.mixed_seen
    return ctl


def rule(slo: Slo = SLO, fake: LinearFake | None = None) -> SloRule:
    return SloRule(slo, 4, fake or LinearFake(), TileResidual())


@pytest.mark.parametrize("arrival_tok_s", [0.0, 10_000.0, 25_000.0, 40_000.0])
@pytest.mark.parametrize("slo", [SLO, Slo(1000.0, 60.0), Slo(400.0, 50.0)])
def test_the_choice_is_the_objective_over_every_candidate(arrival_tok_s, slo):
    # the greatest smallest slack over TTFT, TPOT and KV (ties: the most supply); the decision
    # carries the slacks of the candidate it took
    snap = make_snap(queue=[waiting(0, 99.9, 3000), waiting(1, 100.0, 500)],
                     decodes=(20,) * 4, stage_ms=(20.0,) * 8, kv_free=60_000)
    r = rule(slo)
    d = r.choose(snap, SIZES, arrival_tok_s)
    plan = _Plan(r, snap, d.costs, arrival_tok_s, 20)
    stage, slacks = d.costs.stage_ms, plan.slacks
    worst = [min(x for x in sl if x is not None) for sl in slacks]
    supply = [d.costs.prefill[i] / (s + plan.gap) for i, s in enumerate(stage)]
    assert d.index == max(range(len(SIZES)), key=lambda i: (worst[i], supply[i]))
    assert d.regime is (Regime.WITHIN if worst[d.index] >= 0 else Regime.SHORT)
    assert (d.ttft_slack, d.tpot_slack) == slacks[d.index][:2]
    assert dict(d.inputs).get("kv_slack") == slacks[d.index][2]


def test_arriving_prompts_grow_the_choice():
    # decodes in every slot. Nothing arriving: every round is pp decode stages whatever the
    # size, the slacks tie, and the most supply wins. Arrivals: a piece lengthens its round to
    # pp times its stage, so the margin favours small pieces until the arrivals need supply
    snap = make_snap(queue=[waiting(0, 100.0, 500)], decodes=(20,) * 4)
    r = rule(Slo(2000.0, 80.0))
    chosen = [d.costs.candidates[d.index] for d in
              (r.choose(snap, SIZES, a) for a in (0.0, 6_000.0, 12_000.0, 18_000.0))]
    assert chosen[0] == 2048
    assert chosen[1] < chosen[2] < chosen[3]
    # more than any size keeps up within the TPOT: every limit missed, the least miss
    d = r.choose(snap, SIZES, 30_000.0)
    assert d.regime is Regime.SHORT and d.costs.candidates[d.index] > chosen[3]


def test_a_deadline_no_candidate_meets_sets_none():
    # request 0 has 10 ms left and needs 3 crossing stages of >= 12.5 ms: no size brings it in
    # time. It decides nothing; the same queue with it already late decides the same
    fresh = [waiting(1, 99.9, 4000), waiting(2, 100.0, 200)]
    hopeless = make_snap(queue=[waiting(0, 98.01, 600), *fresh], decodes=(20,) * 4)
    late = make_snap(queue=[waiting(0, 97.0, 600), *fresh], decodes=(20,) * 4)
    for a in (0.0, 20_000.0):
        d, e = rule().choose(hopeless, SIZES, a), rule().choose(late, SIZES, a)
        assert (d.index, d.regime, d.ttft_slack, d.tpot_slack) == \
            (e.index, e.regime, e.ttft_slack, e.tpot_slack)
        # the two fresh requests, and a P90 prompt arriving now and at the horizon
        assert dict(d.inputs)["deadlines"] == 4.0


def test_the_kv_budget_is_a_limit_like_the_slos():
    # half the KV in use at an 80 ms round (4 x 20 ms stages): the cache fills at a 160 ms round
    q = [waiting(0, 100.0, 2000)]
    half = make_snap(queue=q, stage_ms=(20.0,) * 8, kv_free=50_000, decodes=(20,) * 4)
    full = replace(half, kv_free_tokens=10_000)  # 90% in use: an 88.9 ms round
    d = rule().choose(half, SIZES, 30_000.0)
    assert dict(d.inputs)["kv_round_ms"] == pytest.approx(160.0)
    tight = rule().choose(full, SIZES, 30_000.0)
    assert tight.index < d.index  # a fuller cache: a shorter round, given up TTFT for
    assert dict(tight.inputs)["kv_slack"] < 0 and tight.ttft_slack < 0  # the miss spread
    # prompts arriving faster than any size supplies: the least miss is the most supply
    flood = rule().choose(full, SIZES, 60_000.0)
    assert flood.regime is Regime.SHORT and flood.costs.candidates[flood.index] == 2048


def test_the_gap_is_the_measured_round_less_the_models():
    rounds = RoundMeter(4, horizon_s=10.0)
    for i in range(12):  # every slot decoding, a launch every 25 ms: a 100 ms round
        rounds.launch(Launch(0.025 * i, i % 4, 0, 2))
    r = SloRule(SLO, 4, LinearFake(), TileResidual(), rounds)
    # stage samples 20 ms: the model's round is 4 x 20 = 80 ms, so 5 ms a microbatch is rank 0's
    snap = make_snap(queue=[waiting(0, 100.0, 500)], stage_ms=(20.0,) * 8, decodes=ELSEWHERE)
    d = r.choose(snap, SIZES, 0.0)
    assert dict(d.inputs)["gap_ms"] == pytest.approx(5.0)
    assert dict(d.inputs)["kv_round_ms"] == pytest.approx(100.0 * 100_000 / 50_000)
    # a round of pp stages lasts pp times its longest: (10, 30) pairs make a 4 x 30 = 120 ms
    # round, above the measured one: no gap
    uneven = replace(snap, recent_stage_ms=(10.0, 30.0) * 4)
    assert dict(r.choose(uneven, SIZES, 0.0).inputs)["gap_ms"] == 0.0


class OverPredictsAbove384(LinearFake):
    """ALP's extrapolation past the sizes it has run, too high: +40 ms above 400 tokens."""

    def predict(self, shape: BatchShape) -> float:
        return super().predict(shape) + (40.0 if shape.batched_tokens > 400 else 0.0)


def test_the_rule_tries_the_size_above_its_choice_once():
    # tiles up to 384 measured (as predicted); at ALP's prices every size above breaks the
    # TPOT SLO, so the choice is 384. 512, right above it and never run, is tried once at 384's
    # stage; 640 and above are not (their neighbour 512 has not run yet)
    slo = Slo(2000.0, 80.0)
    ctl = PredictiveChunk(slo, 4, OverPredictsAbove384())
    for tokens in (128, 256, 384):
        shape = BatchShape(((0, tokens - 2),), 2, 100)
        ctl.observe(StageMeasurement(0.0, 0, 0, shape, 10 + 0.02 * tokens + 1e-4 * 100))
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=(20,) * 4,
                     arrived_tokens=200_000)  # 20,000 prompt tokens/s over the 10 s window
    ctl.decide(replace(snap, now_s=90.0, arrived_prompt_tokens_total=0))
    d = ctl.decide(replace(snap, iteration=8))
    assert (d.chunk_tokens, d.reason) == (512, "slo:max-min-slack:explore")
    # the lower bound: 384's stage, the slot's 20 decodes of 1000 context included
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * 384 + 1e-4 * 20_000)
    # measured as ALP says (+40 ms): priced by its own tile from now on, and the choice is 384
    ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 510),), 2, 100),
                                 50 + 0.02 * 512 + 1e-4 * 100))
    d = ctl.decide(replace(snap, iteration=16))
    assert (d.chunk_tokens, d.reason) == (384, "slo:max-min-slack")


def test_measured_residual_corrects_the_stage_predictions():
    fake = LinearFake()
    ctl = mixed_ctl(fake=fake)
    snap = make_snap(queue=[waiting(0, 100.0, 8000)], decodes=ELSEWHERE)
    first = ctl.decide(snap)
    assert first.predicted_stage_ms == pytest.approx(10 + 0.02 * first.chunk_tokens)
    # the chosen size's tile runs 30 ms slow: its drain is 30 ms a piece longer, and the next
    # decision (the first is held for 2 * pp iterations) takes a neighbour priced as measured
    shape = BatchShape(((0, first.chunk_tokens - 10),))
    ctl.observe(StageMeasurement(0.0, 0, 0, shape, fake.predict(shape) + 30.0))
    d = ctl.decide(replace(snap, iteration=8))
    assert d.chunk_tokens != first.chunk_tokens
    assert d.predicted_stage_ms == pytest.approx(10 + 0.02 * d.chunk_tokens)


def test_sized_by_the_asking_slot_and_held_for_the_cadence():
    q = [waiting(0, 100.0, 8000)]
    ctl = mixed_ctl()
    d0 = ctl.decide(make_snap(slot=0, queue=q, decodes=(100, 0, 0, 0)))
    assert dict(d0.inputs)["slot_decodes"] == 100
    # the other slots run the same size until 2 * pp iterations have passed (alike microbatches
    # keep the pipeline's stages from idling behind a longer one)
    for it in range(1, 8):
        assert ctl.decide(make_snap(slot=it % 4, iteration=it, queue=q,
                                    decodes=(100, 0, 0, 0))) is d0
    d8 = ctl.decide(make_snap(slot=1, iteration=8, queue=q, decodes=(100, 0, 0, 0)))
    assert dict(d8.inputs)["slot_decodes"] == 0  # slot 1's own


def test_every_candidate_at_or_below_the_decodes_gets_the_safety_floor():
    # 150 decodes in every slot: a budget of 128 carries no prefill; the shell's floor lifts it
    snap = make_snap(queue=[waiting(0, 99.0, 1000)], decodes=(150,) * 4)
    d = mixed_ctl(Slo(2000.0, 10.0)).decide(snap)
    assert d.chunk_tokens > 150


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


def test_first_token_is_the_pieces_then_the_crossing():
    # 1000 tokens at 256 a microbatch: 4 pieces of 20 + 2 ms, then 3 stages to cross; 256
    # tokens: one piece; a candidate carrying no prefill never brings them
    first = first_token_ms([1000.0, 256.0], (256, 0), (20.0, 20.0), 2.0, 4)
    assert first.shape == (2, 2)
    assert first[0, 0] == pytest.approx(4 * 22.0 + 3 * 20.0)
    assert first[1, 0] == pytest.approx(22.0 + 3 * 20.0)
    assert math.isinf(first[0, 1]) and math.isinf(first[1, 1])


def test_the_steady_round_adds_the_gap_to_every_turn():
    prefill, stage = (256, 512), (20.0, 30.0)
    assert steady_tpot(prefill, stage, 12.0, 0.0, 4, lost_turn=False) == [48.0, 48.0]
    assert steady_tpot(prefill, stage, 12.0, 0.0, 4, lost_turn=False, gap_ms=3.0) == \
        [60.0, 60.0]
    assert steady_tpot(prefill, stage, 12.0, 5.0, 4, lost_turn=False, gap_ms=0.0) == \
        steady_tpot(prefill, stage, 12.0, 5.0, 4, lost_turn=False)
    busy = steady_tpot(prefill, stage, 12.0, 5.0, 4, lost_turn=False, gap_ms=3.0)
    assert 60.0 < busy[0] <= 4 * (20.0 + 3.0)
    assert math.isinf(steady_tpot(prefill, stage, 12.0, 50.0, 4, lost_turn=False)[0])


def test_kv_round_ms():
    snap = make_snap(kv_free=25_000)
    assert kv_round_ms(snap, 96.0) == pytest.approx(96.0 * 100_000 / 75_000)
    assert math.isinf(kv_round_ms(snap, None))  # no round known yet
    assert math.isinf(kv_round_ms(make_snap(kv_free=100_000), 96.0))  # KV empty


def test_recent_prompts_keep_the_window_and_wait_for_ten():
    prompts = RecentPrompts()
    snap = make_snap(queue=[waiting(i, 99.0, 100 * (i + 1)) for i in range(9)], ttft=(1.0,) * 12)
    prompts.see(snap)
    assert prompts.window == 12 and prompts.percentile(90.0) is None  # nine seen
    prompts.see(make_snap(queue=[waiting(9, 99.5, 1000), waiting(10, 99.6, 5000)]))
    assert prompts.percentile(90.0) == percentile((*range(100, 1000, 100), 1000, 5000), 90.0)
    # a chunked request's rest is not a new prompt; the cached part is not prefilled
    prompts.see(make_snap(queue=[waiting(10, 99.6, 5000, remaining=10)]))
    prompts.see(make_snap(queue=[replace(waiting(11, 99.7, 3000), cached_prompt_tokens=2000)]))
    assert len(prompts._tokens) == 12 and prompts._tokens[11] == 1000
    prompts.see(make_snap(queue=[waiting(12, 99.8, 100)]))
    assert len(prompts._tokens) == 12 and 0 not in prompts._tokens  # the oldest leaves
