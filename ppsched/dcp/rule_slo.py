"""Our rule for mixed loops (SGLang --enable-mixed-chunk): one objective over one model.

Objective: the candidate with the greatest smallest slack (1 - predicted / limit) over its
predicted TTFT and TPOT (the SLO's limits) and round (the KV budget); ties: the most prefill
supply. A margin to the nearest limit absorbs what the model misses (noise, a long prompt's
growing prefix); supply (prefill tokens per ms of stage 0) enters where a rate needs it, through
the arrivals' deadline below. For a budget c whose microbatch carries p = c - d prefill tokens
beside the asking slot's d decodes in ALP's stage time s (shifted by its tile's residual):
- Rank 0 launches a microbatch every s + g, g the measured round (``rounds.RoundMeter``) less the
  model's for the recent stages, over pp. Supply = p / (s + g).
- TPOT: a decode advances once a round, which lasts pp times its longest microbatch; the share of
  turns carrying a piece keeps up with the measured prompt-token arrivals (``rounds.steady_tpot``;
  every turn when none is left without one). It counts where some slot decodes.
- KV: the KV decoding requests hold grows with their round (Little's law): at U of K tokens in use
  and a measured round R, a round past R K / U fills the cache and stalls admission (as a queue
  outgrowing the supply does: a limit to trade, not a wall).
- TTFT (``queue_drain``, FCFS): of every queued request in time, and of a recent-P90 prompt
  arriving now and at the horizon the arrival rate is measured over, behind the prompts arriving
  meanwhile (a size that cannot keep up misses it). A queued request no candidate brings in time
  sets no deadline: it is among the tenth the P90 lets miss and would hold every size hostage.
- ALP extrapolates to sizes it has not run: the size above the choice, unmeasured lately where the
  choice is measured, is priced at its lower bound, the choice's stage, and tried once if the
  objective prefers it there (``calibrate.explore_above``).
Inputs: the SLO, ALP, the engine's KV counters, stages, rounds and arrivals; no constant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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
from ppsched.dcp.queue_drain import RecentPrompts, first_token_ms, queue_deadlines
from ppsched.dcp.regime import Regime
from ppsched.dcp.rounds import RoundMeter, steady_tpot
from ppsched.dcp.rule_base import Choice

INF = float("inf")
SLO_PERCENTILE = 90.0  # the SLO holds on P90 TTFT and P90 TPOT (metrics.steady.verdict)


def kv_round_ms(snap: ChunkSnapshot, round_ms: float | None) -> float:
    """The round (ms) at which the decoding requests would fill the KV cache, R K / U; inf when
    nothing is known (no round, no KV in use)."""
    used = snap.kv_total_tokens - snap.kv_free_tokens
    if used <= 0 or snap.kv_total_tokens <= 0 or round_ms is None:
        return INF
    return round_ms * snap.kv_total_tokens / used


@dataclass(frozen=True)
class SloRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    residual: TileResidual
    rounds: RoundMeter | None = None  # the measured round, when the engine reports launches
    horizon_s: float = 10.0  # the span the arrival rate is measured over, predicted as far
    prompts: RecentPrompts = field(default_factory=RecentPrompts)  # the recent P90 prompt's window

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        n = len(snap.slots) or 1  # a decode-only turn: the mean slot's decodes
        mean_load = (sum(s.decode_reqs for s in snap.slots) // n,
                     sum(s.decode_ctx_sum for s in snap.slots) // n)
        costs = predict_costs(self.predictor, candidates, BatchModel.MIXED, chunk_prefix(snap),
                              d_reqs, d_ctx, decode_load=mean_load,
                              correct=self.residual.correct_scan)
        self.prompts.see(snap)
        return _Plan(self, snap, costs, arrival_tok_s, d_reqs).choice()


class _Plan:
    """One decision: the model's predictions for every candidate and the objective over them."""

    def __init__(self, rule: SloRule, snap: ChunkSnapshot, costs: CandidateCosts,
                 arrival_tok_s: float, d_reqs: int) -> None:
        self.rule, self.costs, self.d_reqs, pp = rule, costs, d_reqs, rule.pp
        stages = snap.recent_stage_ms  # launch order: each pp in a row make a round
        longest = [max(stages[k:k + pp]) for k in range(0, len(stages) - pp + 1, pp)]
        modelled = pp * sum(longest) / len(longest) if longest else None
        round_ms = None if rule.rounds is None else rule.rounds.mean_round_ms
        self.gap = 0.0 if round_ms is None or modelled is None else \
            max(0.0, (round_ms - modelled) / pp)
        self.kv_round = kv_round_ms(snap, modelled if round_ms is None else round_ms)
        self.decoding = snap.max_slot_decode_reqs > 0
        self.arrival_tok_ms = arrival_tok_s / 1000.0
        ttft = rule.slo.ttft_ms
        terms = queue_deadlines(snap, ttft)
        prompt = rule.prompts.percentile(SLO_PERCENTILE)
        # a P90 prompt arriving now, and at the horizon (before ten are seen: the arrivals)
        queued = snap.queued_prompt_tokens + (prompt or 0.0)
        terms += [(ttft, queued),
                  (1000.0 * rule.horizon_s + ttft, queued + arrival_tok_s * rule.horizon_s)]
        first = first_token_ms([t[1] for t in terms], costs.prefill, costs.stage_ms, self.gap, pp)
        left = np.array([t[0] for t in terms])
        met = (first <= left[:, None]).any(axis=1)  # the deadlines some candidate meets
        met[-2:] = True  # and the arrivals' two, met or not: they stand for the stream
        self.left, self.tokens = left[met], [t[1] for t, m in zip(terms, met, strict=True) if m]
        self.slacks = self.price(costs.prefill, costs.stage_ms, first[met])
        self.inputs = (("arrival_tok_s", arrival_tok_s), ("kv_round_ms", self.kv_round),
                       ("gap_ms", self.gap), ("slot_decodes", float(d_reqs)),
                       ("p90_prompt_tokens", -1.0 if prompt is None else prompt),
                       ("deadlines", float(len(self.tokens))))

    def price(self, prefill: tuple[int, ...], stage: tuple[float, ...],
              first: np.ndarray | None = None) -> list[tuple[float | None, ...]]:
        """(TTFT, TPOT, KV) slack of each candidate; None where unpriced. ``first``: the
        deadlines' first tokens (``queue_drain.first_token_ms``), when already drained."""
        rule, gap, kv_round = self.rule, self.gap, self.kv_round
        if first is None:
            first = first_token_ms(self.tokens, prefill, stage, gap, rule.pp)
        ttft = ((self.left[:, None] - first).min(axis=0) / rule.slo.ttft_ms).tolist() \
            if len(self.tokens) else [None] * len(stage)
        rounds = steady_tpot(prefill, stage, self.costs.decode_ms, self.arrival_tok_ms, rule.pp,
                             lost_turn=False, gap_ms=gap)
        out = []
        for t, rnd, s in zip(ttft, rounds, stage, strict=True):
            rnd = rnd if rnd < INF else rule.pp * (s + gap)  # every turn a piece
            out.append((t, 1.0 - rnd / rule.slo.tpot_ms if self.decoding else None,
                        1.0 - rnd / kv_round if kv_round < INF else None))
        return out

    def key(self, i: int, stage: float, slacks: tuple[float | None, ...]) -> tuple[float, float]:
        """The objective's order: the smallest slack (inf where no limit is priced), then the
        greater supply."""
        smaller = min((s for s in slacks if s is not None), default=INF)
        step = stage + self.gap
        return smaller, self.costs.prefill[i] / step if step > 0 else 0.0

    def choice(self) -> Choice:
        costs, inputs, stage, slacks = self.costs, self.inputs, self.costs.stage_ms, self.slacks
        keys = [self.key(i, s, sl) for i, (s, sl) in enumerate(zip(stage, slacks, strict=True))]
        best = max(range(len(keys)), key=keys.__getitem__)
        i, chosen, explored = best, slacks[best], False
        lower = explore_above(self.rule.residual, costs, best, self.d_reqs)
        if lower is not None:  # the size above, priced at the choice's stage
            trial = self.price((costs.prefill[best + 1],), (stage[best],))[0]
            if self.key(best + 1, stage[best], trial) > keys[best]:
                i, chosen, explored, costs = best + 1, trial, True, lower
        ttft, tpot, kv = chosen
        regime = Regime.WITHIN if self.key(i, costs.stage_ms[i], chosen)[0] >= 0 else \
            Regime.SHORT
        if kv is not None:
            inputs = (*inputs, ("kv_slack", kv))
        return Choice(i, regime, costs, inputs, explored, ttft_slack=ttft, tpot_slack=tpot)
