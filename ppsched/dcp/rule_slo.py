"""Our rule for mixed loops (SGLang --enable-mixed-chunk): the most efficient chunk within the
TPOT the SLO and the KV cache allow, decided for every microbatch.

In a mixed loop the asking slot's d decodes ride in the microbatch and spend one budget token
each, so a budget c carries c - d prefill tokens in a predicted stage time s(c) (ALP, shifted by
the measured residual of its 128-token tile, ``calibrate``). A decode advances once per round of
pp microbatches, and a microbatch needs pp stage times to cross the pipeline, so the round of
the slot that runs it lasts at least pp * s(c).

- TPOT budget: the user's SLO_TPOT, or less when the KV cache binds. By Little's law the KV
  that decoding requests hold is proportional to their lifetime, i.e. to TPOT, at a given
  arrival rate; a mean round of R ms (measured: pp * the mean recent stage-0 time) with U of the
  K KV tokens in use would fill the cache at R * K / U. Past that, admission stalls, queued
  requests miss TTFT while every chunk gets slower (measured: fixed chunks above the knee lose
  TTFT to a full cache, not to prefill throughput). Budget = min(SLO_TPOT, R * K / U).
- Choice: among candidates whose pp * s(c) fits the budget, the greatest prefill supply
  (c - d) / s(c): the per-token efficiency of the chunk, which drains the queue fastest and so
  keeps TTFT's margin, not the cheapest chunk that just covers the arrival rate (which served
  requests just before their deadline). Ties: the shorter stage.
- None fits: the candidate with the least stage time ("tpot-tight:least-stage").
No constant here is tuned: the SLO, ALP's predictions, the engine's KV counters and its measured
stage times are the only inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.candidate_costs import (
    BatchModel,
    StagePredictor,
    asking_slot_decodes,
    chunk_prefix,
    predict_costs,
)
from ppsched.dcp.rule_base import Choice

INF = float("inf")


def kv_round_ms(snap: ChunkSnapshot, pp: int) -> float:
    """The mean round (ms) at which the decoding requests would fill the KV cache; inf when
    nothing is known (no stage samples, no KV in use)."""
    stages = snap.recent_stage_ms
    used = snap.kv_total_tokens - snap.kv_free_tokens
    if not stages or used <= 0 or snap.kv_total_tokens <= 0:
        return INF
    round_ms = pp * sum(stages) / len(stages)
    return round_ms * snap.kv_total_tokens / used


@dataclass(frozen=True)
class SloRule:
    per_microbatch: ClassVar[bool] = True
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    residual: TileResidual

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        costs = predict_costs(self.predictor, candidates, BatchModel.MIXED, chunk_prefix(snap),
                              d_reqs, d_ctx, correct=self.residual.correct)
        pp = self.pp
        kv_round = kv_round_ms(snap, pp)
        budget = min(self.slo.tpot_ms, kv_round)
        stage = costs.stage_ms
        fits = [i for i, p in enumerate(costs.prefill) if p > 0 and stage[i] * pp <= budget]
        if fits:
            idx = max(fits, key=lambda i: (costs.supply(i), -stage[i]))
            reason = "slo:max-supply" + (":kv-bound" if kv_round < self.slo.tpot_ms else "")
        else:
            idx = min(range(len(candidates)), key=stage.__getitem__)
            reason = "tpot-tight:least-stage"
        return Choice(idx, reason, costs, (
            ("arrival_tok_s", arrival_tok_s), ("tpot_budget_ms", budget),
            ("kv_round_ms", kv_round), ("slot_decodes", float(d_reqs))))
