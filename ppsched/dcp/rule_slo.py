"""Our rule for mixed loops (SGLang --enable-mixed-chunk): one objective over one model, decided
every 2 * pp iterations and held in between (the ``predictive`` shell's cadence).

Model, per candidate budget c: its microbatch carries the asking slot's d decodes and p = c - d
prefill tokens in a stage of s(c) ms (ALP shifted by its tile's measured residual; the untried
size right above the choice at its lower bound, ``calibrate.explore_above``); a decode advances
once per round, so the size's TPOT is its round pp * s(c). One FCFS drain (``queue_drain``)
says when a prompt reaches its first token. KV ceiling: R * K / U (``rounds.kv_round_ms``:
decoding requests hold KV in proportion to their TPOT, and past it the cache fills and
admission stalls), or SLO_TPOT where no size within it keeps up with the arriving prompts.
Objective: among the sizes within the KV ceiling, lexicographically
  1. keep up with the arriving prompt tokens (a growing queue misses every TTFT);
  2. bring the recent P90 prompt, alone, to its first token within SLO_TTFT (the SLO is a P90
     over every request; the queue of the moment does not show the long prompts to come);
  3. bring the most queued requests to their first token within SLO_TTFT;
  4. the least round past the TPOT budget, min(SLO_TPOT, KV ceiling) while any slot decodes
     (a round costs TPOT only to the requests decoding in it; none while none does);
  5. the most prompt tokens brought to their first token within SLO_TTFT (the drain inverted:
     supply, less the pipeline crossing). While the recent P90 TPOT is the SLO measured closer
     to its bound and, scaled to that size's stage, over the budget: the least round instead.
So TTFT outranks SLO_TPOT but not the KV cache (a stalled admission misses TTFT too), and the
slack left goes to the SLO the engine measures nearer its bound. No constant is tuned: the SLO,
ALP, the KV counters and the measured stages, rounds and P90s are the only inputs. A decision
carries its regime and predicted slacks: TPOT's, the round; TTFT's, the P90 prompt's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.calibrate import TileResidual, explore_above
from ppsched.dcp.candidate_costs import (
    BatchModel,
    CandidateCosts,
    StagePredictor,
    asking_slot_decodes,
    chunk_prefix,
    predict_costs,
)
from ppsched.dcp.prompt_window import RecentPrompts
from ppsched.dcp.queue_drain import first_token_ms, in_time, queue_deadlines, tokens_within_ms
from ppsched.dcp.regime import Regime
from ppsched.dcp.rounds import RoundMeter, kv_round_ms
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.signals import percentile

SLO_PERCENTILE = 90.0  # the SLO holds on P90 TTFT and P90 TPOT (metrics.steady.verdict)


@dataclass(frozen=True, slots=True)
class Measured:
    """What one decision reads of the engine, each once."""

    arrival_tok_ms: float
    decoding: bool  # does any slot decode (a round costs TPOT only to the requests decoding)
    kv_round_ms: float
    gap_ms: float  # rank 0's time per microbatch that no stage time shows
    p90_prompt: float | None  # tokens of the recent P90 prompt (None: too few seen)
    deadlines: list[tuple[float, int]]  # ``queue_deadlines``
    mean_stage_ms: float | None
    p90_tpot_ms: float | None  # set only while TPOT is the SLO measured closer to its bound


def measure(rule: SloRule, snap: ChunkSnapshot, arrival_tok_s: float) -> Measured:
    slo, pp = rule.slo, rule.pp
    stages = snap.recent_stage_ms
    mean_stage = sum(stages) / len(stages) if stages else None
    round_ms = None if rule.rounds is None else rule.rounds.mean_round_ms
    gap = 0.0 if round_ms is None or mean_stage is None else max(0.0, round_ms / pp - mean_stage)
    ttft = percentile(snap.recent_ttft_ms, SLO_PERCENTILE)
    tpot = percentile(snap.recent_tpot_ms, SLO_PERCENTILE)
    closer = ttft is not None and tpot is not None and tpot / slo.tpot_ms > ttft / slo.ttft_ms
    return Measured(arrival_tok_s / 1000.0, snap.max_slot_decode_reqs > 0,
                    kv_round_ms(snap, pp, round_ms), gap,
                    rule.prompts.percentile(SLO_PERCENTILE),
                    queue_deadlines(snap, slo.ttft_ms), mean_stage, tpot if closer else None)


@dataclass(frozen=True)
class SloRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    residual: TileResidual
    rounds: RoundMeter | None = None  # the measured round, when the engine reports launches
    prompts: RecentPrompts = field(default_factory=RecentPrompts)  # the P90 prompt's window

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        costs = predict_costs(self.predictor, candidates, BatchModel.MIXED, chunk_prefix(snap),
                              d_reqs, d_ctx, correct=self.residual.correct_scan)
        self.prompts.see(snap)
        seen = measure(self, snap, arrival_tok_s)
        choice = self.best(costs, seen, d_reqs)
        # the size above, untried lately, priced at its lower bound: tried once if taken so
        explored = explore_above(self.residual, costs, choice.index, d_reqs)
        if explored is not None:
            trial = self.best(explored, seen, d_reqs)
            if trial.index == choice.index + 1:
                choice = replace(trial, explored=True)
        return choice

    def best(self, costs: CandidateCosts, seen: Measured, d_reqs: int) -> Choice:
        """The objective's size at these prices (the module docstring)."""
        pp, slo, gap = self.pp, self.slo, seen.gap_ms
        rounds = [pp * s for s in costs.stage_ms]
        prefill = costs.prefill
        n = len(prefill)
        keeps = [p > 0 and costs.supply(i) > seen.arrival_tok_ms for i, p in enumerate(prefill)]
        ceiling = seen.kv_round_ms
        if not any(k and r <= ceiling for k, r in zip(keeps, rounds, strict=True)):
            ceiling = max(ceiling, slo.tpot_ms)
        budget = min(slo.tpot_ms, seen.kv_round_ms) if seen.decoding else math.inf
        inputs = (("arrival_tok_s", 1000.0 * seen.arrival_tok_ms), ("tpot_budget_ms", budget),
                  ("kv_round_ms", seen.kv_round_ms), ("ceiling_ms", ceiling),
                  ("slot_decodes", float(d_reqs)), ("queued_deadlines", float(len(seen.deadlines))))
        sizes = [i for i in range(n) if prefill[i] > 0 and rounds[i] <= ceiling]
        if not sizes:  # the least stage is the smallest candidate (a larger one is never faster)
            return self._priced(Choice(0, Regime.TPOT_TIGHT, costs, inputs), seen)
        ttft = {i: (keeps[i], seen.p90_prompt is None or first_token_ms(
                    seen.p90_prompt, prefill[i], costs.stage_ms[i], gap, pp) <= slo.ttft_ms,
                    in_time(seen.deadlines, prefill[i], costs.stage_ms[i], gap, pp),
                    -max(0.0, rounds[i] - budget)) for i in sizes}
        idx = max(sizes, key=lambda i: (*ttft[i], tokens_within_ms(
            slo.ttft_ms, prefill[i], costs.stage_ms[i], gap, pp), -rounds[i]))
        regime = Regime.OVER_BUDGET if rounds[idx] > budget else Regime.WITHIN_BUDGET
        tpot, mean_stage = seen.p90_tpot_ms, seen.mean_stage_ms
        if tpot is not None and mean_stage is not None and regime is Regime.WITHIN_BUDGET and \
                tpot * (costs.stage_ms[idx] + gap) / (mean_stage + gap) > budget:
            eased = max(sizes, key=lambda i: (*ttft[i], -rounds[i]))
            if eased != idx:
                idx, regime = eased, Regime.EASED
        return self._priced(Choice(idx, regime, costs, (
            *inputs, ("in_time", float(ttft[idx][2])))), seen)

    def _priced(self, choice: Choice, seen: Measured) -> Choice:
        """The choice with the predicted slacks it was priced at, each relative to its SLO."""
        costs, i, slo = choice.costs, choice.index, self.slo
        p, stage = costs.prefill[i], costs.stage_ms[i]
        ttft = None if seen.p90_prompt is None or p <= 0 else first_token_ms(
            seen.p90_prompt, p, stage, seen.gap_ms, self.pp)
        return replace(choice, ttft_slack=None if ttft is None else 1.0 - ttft / slo.ttft_ms,
                       tpot_slack=1.0 - self.pp * stage / slo.tpot_ms)
