"""Our rule for SGLang's default (plain) loop: the chunk with the least steady-state TPOT.

In the plain loop a prefill microbatch carries no decodes and its slot's decodes skip that turn.
Every 2*pp_size iterations, for each candidate c: stage(c) = predicted latency of a prefill-only
microbatch of c tokens. Demand = the FCFS backlog rate (max over the oldest-first prefix of
cumulative tokens / TTFT budget left, requests that waited >= 0.25 SLO_TTFT) plus the arrival
rate. Among chunks that keep up with the demand and whose period meets 1.05 SLO_TPOT: the least
steady-state TPOT (``steady_tpot``): the smallest chunk is best only when a stage has no fixed
cost, and a 128-token prefill stage costs about as much as a 30-request decode stage, so 128-token
chunks need twice the turns of 256-token ones, each a lost decode turn. No KV-watermark shrink:
smaller chunks mean more lost decode turns, and the engine's admission already waits for KV.
Nothing meets the per-stage cap but decodes run: still the least steady-state TPOT (measured live:
falling back to the smallest chunk multiplied the lost decode turns and TPOT with them). Nothing
decodes: the largest chunk meeting the cap (no decode turn to lose; the most prefill for TTFT).
A request already late (demand infinite) or no chunk keeping up: the largest meeting the cap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import BatchModel, StagePredictor, chunk_prefix, predict_costs
from ppsched.dcp.knobs import PredictiveConfig
from ppsched.dcp.regime import Regime
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.rule_paper import backlog_demand, smallest_feasible

INF = float("inf")


def steady_tpot(prefill: Sequence[int], stage: Sequence[float], decode_ms: float, demand: float,
                pp: int, *, lost_turn: bool, iters: int = 12) -> list[float]:
    """Mean TPOT (ms) per candidate when prefill turns must carry ``demand`` tokens/ms.

    Each of the pp slots takes one turn per round; a fraction f of turns prefill p tokens with
    stage time P, the rest decode with stage time D. Every stage serves the round's microbatches
    in order and a slot waits for its own result, so a round lasts pp * (longest stage in it):
    R(f) = pp (P - (P - D)(1 - f)^pp) with turns independent. Keeping up needs
    pp f p = demand R(f), solved by fixed-point iteration from f = demand D / p. A decode advances
    once per round, or only in the (1 - f) of its slot's turns that are not prefill when
    ``lost_turn`` (SGLang's default loop: a prefill batch carries no decodes). inf where the
    candidate cannot keep up (f >= 1).
    """
    out = []
    for p, big in zip(prefill, stage, strict=True):
        if p <= 0:
            out.append(INF)
            continue
        excess = big - decode_ms
        f = demand * decode_ms / p
        for _ in range(iters):
            if f >= 1.0:
                break
            nxt = demand * (big - excess * (1.0 - f) ** pp) / p
            done = abs(nxt - f) < 1e-6
            f = nxt
            if done:
                break
        if f >= 1.0:
            out.append(INF)
            continue
        rnd = pp * (big - excess * (1.0 - f) ** pp)
        out.append(rnd / (1.0 - f) if lost_turn else rnd)
    return out


@dataclass(frozen=True)
class SteadyRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    k: PredictiveConfig

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        slots = snap.slots
        n = len(slots) or 1
        avg = (sum(s.decode_reqs for s in slots) // n, sum(s.decode_ctx_sum for s in slots) // n)
        costs = predict_costs(self.predictor, candidates, BatchModel.PLAIN, chunk_prefix(snap),
                              0, 0, decode_load=avg)
        pp = self.pp
        tpot_cap = self.k.tpot_margin * self.slo.tpot_ms
        demand = backlog_demand(snap, self.slo, self.k.wait_fraction, fcfs=True) + arrival_tok_s
        _, meets_tpot = smallest_feasible(costs.prefill, costs.stage_ms, pp, tpot_cap, demand,
                                          per_period=1)
        tpot_est = [math.nan] * len(candidates)
        pool: list[int] = []
        if costs.decode_ms > 0 and demand < INF:
            tpot_est = steady_tpot(costs.prefill, costs.stage_ms, costs.decode_ms,
                                   demand / 1000.0, pp, lost_turn=True)
            keep_up = [i for i, t in enumerate(tpot_est) if t < INF]
            within = [i for i in keep_up if tpot_est[i] <= tpot_cap]
            # TPOT tight everywhere, even when no single stage meets the cap: the least-TPOT
            # chunk is the best bet -- not the smallest, whose many prefill turns are each a
            # lost decode turn
            pool = within or keep_up
        if pool:
            # ties (no demand: every chunk's TPOT is pp decode stages) to the smallest chunk,
            # not to float noise
            idx = min(pool, key=lambda i: (round(tpot_est[i], 9), i))
            regime = Regime.STEADY_WITHIN_TPOT if pool is within else Regime.STEADY_TPOT_TIGHT
        elif meets_tpot < 0:
            idx, regime = 0, Regime.TPOT_INFEASIBLE
        elif costs.decode_ms <= 0:
            # nothing decodes: no decode turn to lose, so the most prefill per period (TTFT)
            # among the chunks whose period keeps the coming decodes within the cap
            idx, regime = meets_tpot, Regime.NO_DECODES_MEETING_TPOT
        else:  # a request already late, or no chunk keeps up: drain as fast as TPOT allows
            idx, regime = meets_tpot, Regime.OVERLOADED
        tpot = tpot_est[idx]  # the steady TPOT model's prediction, where it ran
        return Choice(idx, regime, costs, (
            ("demand_tok_s", demand), ("arrival_tok_s", arrival_tok_s), ("tpot_cap_ms", tpot_cap),
            ("max_tpot_chunk", float(candidates[meets_tpot]) if meets_tpot >= 0 else 0.0),
            ("tpot_est_ms", tpot)),
            tpot_slack=1.0 - tpot / self.slo.tpot_ms if math.isfinite(tpot) else None)
