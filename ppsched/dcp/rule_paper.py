"""The paper's predictive rule (``predictive-paper``): smallest chunk meeting TPOT and demand.

Every 2*pp_size iterations, for each candidate c:
- stage(c) = predicted one-stage latency of c prefill tokens (prefix = what the chunked request
  already prefilled) plus the asking slot's decodes;
- TPOT bound: stage(c) * pp <= 1.05 * SLO_TPOT (a decode advances once per pipeline period);
- demand (tokens/s) = sum over requests that waited >= 0.25 SLO_TTFT of remaining tokens over
  remaining TTFT budget, plus the prompt-token arrival rate over 10 s;
- supply(c) = c / (stage(c) * pp): one chunk per pipeline period.
Smallest c with supply >= demand among those meeting TPOT; none: the largest meeting TPOT
(overloaded: drain); nothing meets TPOT: the smallest. Free KV below 10%: the smallest safe chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import (
    BatchModel,
    StagePredictor,
    asking_slot_decodes,
    chunk_prefix,
    predict_costs,
    waiting_fcfs,
)
from ppsched.dcp.knobs import PredictiveConfig
from ppsched.dcp.regime import Regime
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.signals import kv_pressure, safe_floor

INF = float("inf")


def backlog_demand(snap: ChunkSnapshot, slo: Slo, wait_fraction: float, fcfs: bool) -> float:
    """Tokens/s the queue's long-waiting requests need to meet their TTFT; inf if already late.

    ``fcfs`` False: the paper's sum of each request's rate; True: FCFS serves older requests
    first, so request i is done only when everything ahead of it is too: max over the prefix of
    (cumulative tokens / budget). ``snap.queue`` is oldest-first; the chunked request first.
    """
    now = snap.now_s
    ttft_s = slo.ttft_ms / 1000.0
    min_wait = wait_fraction * ttft_s
    reqs = waiting_fcfs(snap)
    demand = 0.0
    cum = 0
    for q in reqs:
        waited = now - q.arrival_s
        cum += q.remaining_prompt_tokens
        if waited < min_wait:
            continue  # not late yet (retracted requests can re-enter out of arrival order)
        budget = ttft_s - waited
        if budget <= 0:
            return INF
        rate = (cum if fcfs else q.remaining_prompt_tokens) / budget
        demand = max(demand, rate) if fcfs else demand + rate
    return demand


def smallest_feasible(prefill: Sequence[int], stage: Sequence[float], pp: int, tpot_cap: float,
                      demand: float, per_period: int) -> tuple[list[int], int]:
    """(indices meeting TPOT whose supply covers ``demand`` tokens/s, largest index meeting TPOT
    or -1). Supply = 1000 p / (stage * per_period) tokens/s."""
    feasible = []
    meets_tpot = -1
    for i, p in enumerate(prefill):
        if stage[i] * pp > tpot_cap:
            continue
        meets_tpot = i
        if p and 1000.0 * p / (stage[i] * per_period) >= demand:
            feasible.append(i)
    return feasible, meets_tpot


@dataclass(frozen=True)
class PaperRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    k: PredictiveConfig

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        costs = predict_costs(self.predictor, candidates, BatchModel.PAPER, chunk_prefix(snap),
                              d_reqs, d_ctx)
        pp = self.pp
        tpot_cap = self.k.tpot_margin * self.slo.tpot_ms
        demand = backlog_demand(snap, self.slo, self.k.wait_fraction, fcfs=False) + arrival_tok_s
        feasible, meets_tpot = smallest_feasible(costs.prefill, costs.stage_ms, pp, tpot_cap,
                                                 demand, per_period=pp)
        if kv_pressure(snap, self.k.kv_watermark):
            idx = candidates.index(safe_floor(candidates, snap.max_slot_decode_reqs))
            regime = Regime.KV_WATERMARK
        elif meets_tpot < 0:
            idx, regime = 0, Regime.TPOT_INFEASIBLE
        elif feasible:
            idx, regime = feasible[0], Regime.FEASIBLE_SMALLEST
        else:
            idx, regime = meets_tpot, Regime.OVERLOADED
        return Choice(idx, regime, costs, (
            ("demand_tok_s", demand), ("arrival_tok_s", arrival_tok_s), ("tpot_cap_ms", tpot_cap),
            ("max_tpot_chunk", float(candidates[meets_tpot]) if meets_tpot >= 0 else 0.0),
            ("slot_decodes", float(d_reqs))))
