"""Our rule for mixed loops (SGLang --enable-mixed-chunk): the most efficient chunk within the
TPOT the SLO and the KV cache allow, decided every 2 * pp iterations and held in between (the
paper's cadence, kept by the ``predictive`` shell).

In a mixed loop the asking slot's d decodes ride in the microbatch and spend one budget token
each, so a budget c carries c - d prefill tokens in a predicted stage time s(c) (ALP, shifted by
the measured residual of its 128-token tile, ``calibrate``). A decode advances once per round of
pp microbatches, and a microbatch needs pp stage times to cross the pipeline, so the round of
the slot that runs it lasts at least pp * s(c).

- TPOT budget: the user's SLO_TPOT, or less when the KV cache binds. By Little's law the KV
  that decoding requests hold is proportional to their lifetime, i.e. to TPOT, at a given
  arrival rate; a mean round of R ms with U of the K KV tokens in use would fill the cache at
  R * K / U. R is measured: the time between a decoding slot's launches (``rounds.RoundMeter``,
  over the arrival window), which includes the scheduler's time and the result's return that no
  stage time shows; pp * the mean recent stage-0 time until the engine has reported a round.
  Past that, admission stalls, queued requests miss TTFT while every chunk gets slower
  (measured: fixed chunks above the knee lose TTFT to a full cache, not to prefill throughput).
  Budget = min(SLO_TPOT, R * K / U).
- Choice: among candidates whose pp * s(c) fits the budget, the greatest prefill supply
  (c - d) / s(c): the per-token efficiency of the chunk, which drains the queue fastest and so
  keeps TTFT's margin, not the cheapest chunk that just covers the arrival rate (which served
  requests just before their deadline). Ties: the shorter stage.
- Sizes never run: a candidate whose tile has not run yet, right above one that has, is priced
  at the measured stage below it (its lower bound, ``calibrate.explore_next_tiles``), so the rule
  tries it once instead of trusting ALP's extrapolation to it for ever.
- None fits: the candidate with the least stage time, the smallest ("tpot-tight:least-stage").
- Held for a round and more: a pipeline's microbatches cross the same stages one after
  another, so a slot's round waits for the longest microbatch ahead of it. Chosen afresh for
  every microbatch, the best supply differs from piece to piece (a prompt's first piece attends
  to no prefix and is cheaper per token), the slots run unlike sizes and the stages idle behind
  the long ones: measured on azure-code 32B at 3.5 req/s, 640 beside 384 left stage 0 idle
  60 s of 300 where a fixed 384 left 43 s, at the same prefill tokens per stage-ms (bench/dcp.md,
  session 9). Holding the choice for the shell's cadence keeps the slots alike.
- Nothing decodes in any slot (e.g. prefill-only jobs: 1 output token, no TPOT): there is no
  TPOT to keep, and the SLO left is TTFT. The queued prompts' Q tokens take ceil(Q / p(c))
  microbatches of s(c) on stage 0, and the last one pp - 1 more stage times to cross the
  pipeline; prompts arriving meanwhile (the measured arrival rate a, in tokens) take a share
  rho = a / supply(c) of stage 0, so the drain stretches by 1 / (1 - rho): they all have their
  first token after ceil(Q / p(c)) * s(c) / (1 - rho) + (pp - 1) * s(c), and the rule takes the
  candidate minimising it ("no-decodes:min-queue-ttft"; none keeps up: the greatest supply).
  Small queues at low load favour short stages (the crossing), long queues and high load
  per-token efficiency (the drain). Q is at least the mean arriving prompt (over the arrival
  window): the choice is held for the cadence and serves the prompts that arrive meanwhile, not
  only the queue of the moment. Planned for a short queue alone, the rule took 128-256 where a
  fixed 384 kept the prompts' P90 lower (chat-batch's batch phase, bench/dcp.md sessions 6 and
  10). The first request that decodes brings the TPOT budget back at the next decision.
No constant here is tuned: the SLO, ALP's predictions, the engine's KV counters and its measured
stage times are the only inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.calibrate import TileResidual, explore_next_tiles
from ppsched.dcp.candidate_costs import (
    BatchModel,
    CandidateCosts,
    StagePredictor,
    asking_slot_decodes,
    chunk_prefix,
    predict_costs,
)
from ppsched.dcp.rounds import RoundMeter
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.signals import ArrivalWindow

INF = float("inf")


def queue_first_token_ms(costs: CandidateCosts, i: int, queued_tokens: int, pp: int,
                         arrival_tok_ms: float = 0.0) -> float:
    """Predicted time until all ``queued_tokens`` have been prefilled with candidate i and the last
    microbatch has crossed the pipeline, while prompt tokens keep arriving at ``arrival_tok_ms``
    per ms: the drain ceil(Q / p) * s stretches by 1 / (1 - rho), rho = arrival / supply (the
    share of stage 0 the arrivals take at this chunk). inf when the candidate carries no prefill
    or cannot keep up with the arrivals."""
    p = costs.prefill[i]
    supply = costs.supply(i)
    if p <= 0 or supply <= arrival_tok_ms:
        return INF
    drain = math.ceil(queued_tokens / p) * costs.stage_ms[i] / (1.0 - arrival_tok_ms / supply)
    return drain + (pp - 1) * costs.stage_ms[i]


def kv_round_ms(snap: ChunkSnapshot, pp: int, measured_round_ms: float | None = None) -> float:
    """The mean round (ms) at which the decoding requests would fill the KV cache; inf when
    nothing is known (no round, no KV in use). The round is the measured one when the engine
    reports launches (``rounds.RoundMeter``), else pp times the mean recent stage-0 time."""
    stages = snap.recent_stage_ms
    used = snap.kv_total_tokens - snap.kv_free_tokens
    if used <= 0 or snap.kv_total_tokens <= 0:
        return INF
    if measured_round_ms is not None:
        round_ms = measured_round_ms
    elif stages:
        round_ms = pp * sum(stages) / len(stages)
    else:
        return INF
    return round_ms * snap.kv_total_tokens / used


@dataclass(frozen=True)
class SloRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    residual: TileResidual
    rounds: RoundMeter | None = None  # the measured round, when the engine reports launches
    requests: ArrivalWindow | None = None  # arriving requests, for the mean arriving prompt

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        costs = explore_next_tiles(self.residual, predict_costs(
            self.predictor, candidates, BatchModel.MIXED, chunk_prefix(snap), d_reqs, d_ctx,
            correct=self.residual.correct), d_reqs)
        pp = self.pp
        queued = snap.queued_prompt_tokens
        # requests per s over the arrival window; with the token rate, the mean arriving prompt
        req_s = 0.0 if self.requests is None else self.requests.update(
            snap.now_s, snap.arrived_requests_total)
        if snap.max_slot_decode_reqs == 0 and queued > 0:
            mean_prompt = math.ceil(arrival_tok_s / req_s) if req_s > 0 else 0
            plan = max(queued, mean_prompt)
            ttft = [queue_first_token_ms(costs, i, plan, pp, arrival_tok_s / 1000.0)
                    for i in range(len(candidates))]
            # none keeps up with the arrivals (all inf): the greatest supply drains best
            idx = min(range(len(candidates)),
                      key=lambda i: (ttft[i], -costs.supply(i), costs.stage_ms[i]))
            return Choice(idx, "no-decodes:min-queue-ttft", costs, (
                ("arrival_tok_s", arrival_tok_s), ("queue_first_token_ms", ttft[idx]),
                ("queued_prompt_tokens", float(queued)), ("mean_prompt_tokens", float(mean_prompt)),
                ("slot_decodes", 0.0)))
        kv_round = kv_round_ms(snap, pp, None if self.rounds is None else
                               self.rounds.mean_round_ms)
        budget = min(self.slo.tpot_ms, kv_round)
        stage = costs.stage_ms
        fits = [i for i, p in enumerate(costs.prefill) if p > 0 and stage[i] * pp <= budget]
        if fits:
            idx = max(fits, key=lambda i: (costs.supply(i), -stage[i]))
            reason = "slo:max-supply" + (":kv-bound" if kv_round < self.slo.tpot_ms else "")
        else:
            # the least stage is the smallest candidate: a larger microbatch is never faster.
            # ALP's online fit can rank them otherwise where its data are confounded (live CPU
            # server: 128 below 8-64 under a 5.5 ms SLO); on the simulator the two agree
            idx = 0
            reason = "tpot-tight:least-stage"
        return Choice(idx, reason, costs, (
            ("arrival_tok_s", arrival_tok_s), ("tpot_budget_ms", budget),
            ("kv_round_ms", kv_round), ("slot_decodes", float(d_reqs))))
