"""Our rule for mixed loops (SGLang --enable-mixed-chunk): one objective over one model.

Objective: the greatest prefill supply among the candidates whose predicted TTFT, TPOT and round
meet their limits (the SLO's two, the KV budget); none does: the greatest smallest slack (slack =
1 - predicted / limit). Supply (prefill tokens per ms of stage 0) is what sustains a rate, the
limits bound what it may cost, and where they cannot all hold a miss is spread over them. The
model, for a budget c whose microbatch carries p = c - d prefill tokens beside the asking slot's
d decodes in ALP's stage time s (shifted by its tile's measured residual):
- Rank 0 launches a microbatch every s + g: g is its time per microbatch that no stage shows, the
  measured round (``rounds.RoundMeter``) less the model's (below) for the recent stages, over pp.
  Supply = p / (s + g).
- TPOT: a decode advances once a round, and a round lasts pp times its longest microbatch
  (``rounds.steady_tpot``: the share of turns carrying a piece keeps up with the measured arrival
  of prompt tokens; pp (s + g) when none is left without one). It counts where some slot decodes.
- KV budget: the KV decoding requests hold grows with that round (Little's law): with U of K
  tokens in use at the measured round R, a round past R K / U fills the cache, and admission stalls
  (a queue that outgrows the supply stalls it too: the budget is a limit to trade, not a wall).
- TTFT (``queue_drain``, FCFS) of every queued request still in time, and of a recent-P90 prompt
  arriving now behind the queue and at the horizon (the span the arrival rate is measured over)
  behind the prompts arriving meanwhile at that rate: a size that cannot keep up misses it. A
  deadline no candidate meets sets none: it is among the tenth the P90 lets miss, and would
  otherwise hold every size hostage.
- ALP extrapolates to sizes it has not run, so the size above the choice, unmeasured lately where
  the choice is measured, is priced at its lower bound, the choice's stage, and tried once if the
  objective prefers it at that price (``calibrate.explore_above``).
The inputs are the SLO, ALP, the engine's KV counters, its measured stages and rounds, and the
arrivals: no constant. The ``predictive`` shell holds each choice for 2 pp iterations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
        round_ms = modelled if round_ms is None else round_ms
        self.kv_round = kv_round_ms(snap, round_ms)
        self.decoding = snap.max_slot_decode_reqs > 0
        self.arrival_tok_ms = arrival_tok_s / 1000.0
        self._rounds: dict[tuple[int, float], float] = {}
        ttft = rule.slo.ttft_ms
        terms = queue_deadlines(snap, ttft)
        prompt = rule.prompts.percentile(SLO_PERCENTILE)
        # a P90 prompt arriving now, and at the horizon (before ten are seen: the arrivals)
        queued = snap.queued_prompt_tokens + (prompt or 0.0)
        horizon = 1000.0 * rule.horizon_s
        terms += [(ttft, queued), (horizon + ttft, queued + arrival_tok_s * rule.horizon_s)]
        self.terms = [(left, tokens) for left, tokens in terms if any(
            self._first_token(i, tokens, s) <= left for i, s in enumerate(costs.stage_ms))]
        self.inputs = (("arrival_tok_s", arrival_tok_s), ("kv_round_ms", self.kv_round),
                       ("gap_ms", self.gap), ("slot_decodes", float(d_reqs)),
                       ("p90_prompt_tokens", -1.0 if prompt is None else prompt),
                       ("deadlines", float(len(self.terms))))

    def round_ms(self, i: int, stage: float) -> float:
        """The mean round while candidate i, at a stage time of ``stage``, keeps up with the
        arriving prompt tokens; every turn a piece where it cannot."""
        known = self._rounds.get((i, stage))
        if known is not None:
            return known
        pp, gap = self.rule.pp, self.gap
        rnd = steady_tpot((self.costs.prefill[i],), (stage,), self.costs.decode_ms,
                          self.arrival_tok_ms, pp, lost_turn=False, gap_ms=gap)[0]
        rnd = self._rounds[(i, stage)] = rnd if rnd < INF else pp * (stage + gap)
        return rnd

    def _first_token(self, i: int, tokens: float, stage: float) -> float:
        return first_token_ms(tokens, self.costs.prefill[i], stage, self.gap, self.rule.pp)

    def slacks(self, i: int, stage: float) -> tuple[float | None, float | None, float | None]:
        """(TTFT, TPOT, KV) slack of candidate i at a stage time of ``stage``; None where
        unpriced."""
        slo = self.rule.slo
        ttft = None if not self.terms else min(
            left - self._first_token(i, tokens, stage) for left, tokens in self.terms
        ) / slo.ttft_ms
        rnd = self.round_ms(i, stage)
        tpot = 1.0 - rnd / slo.tpot_ms if self.decoding else None
        kv = 1.0 - rnd / self.kv_round if self.kv_round < INF else None
        return ttft, tpot, kv

    def key(self, i: int, stage: float) -> tuple[int, float, float]:
        """The objective's order: within the SLO by supply (ties: the shorter stage), then the
        rest by their smaller slack (ties: the greater supply)."""
        smaller = min((s for s in self.slacks(i, stage) if s is not None), default=None)
        step = stage + self.gap
        supply = self.costs.prefill[i] / step if step > 0 else 0.0
        if smaller is None or smaller >= 0:
            return (1, supply, -stage)
        return (0, smaller, supply)

    def choice(self) -> Choice:
        costs, inputs = self.costs, self.inputs
        stage = costs.stage_ms
        keys = [self.key(i, s) for i, s in enumerate(stage)]
        best = max(range(len(keys)), key=keys.__getitem__)
        lower = explore_above(self.rule.residual, costs, best, self.d_reqs)
        explored = lower is not None and self.key(best + 1, stage[best]) > keys[best]
        i, priced_at = (best + 1, stage[best]) if explored else (best, stage[best])
        if explored:
            costs = lower  # the trial is priced at its lower bound
        ttft, tpot, kv = self.slacks(i, priced_at)
        regime = Regime.WITHIN_SLO if self.key(i, priced_at)[0] else Regime.BALANCED
        if kv is not None:
            inputs = (*inputs, ("kv_slack", kv))
        return Choice(i, regime, costs, inputs, explored, ttft_slack=ttft, tpot_slack=tpot)
