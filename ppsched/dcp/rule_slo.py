"""Our rule for mixed loops (SGLang --enable-mixed-chunk): one objective over one model, decided
every 2 * pp iterations and held in between (the ``predictive`` shell's cadence).

Model, per candidate budget c: its microbatch carries the asking slot's d decodes and p = c - d
prefill tokens in a stage of s(c) ms (ALP shifted by its tile's measured residual; the untried
size right above the choice at its lower bound, ``calibrate.explore_above``); a decode advances
once per round, so the size's TPOT is its round pp * s(c). One FCFS drain (``queue_drain``)
says when a prompt reaches its first token. KV ceiling: R * K / U (``core.rounds``:
decoding requests hold KV in proportion to their TPOT, and past it the cache fills and
admission stalls), raised to SLO_TPOT where no size within it keeps up with the arrivals.
Objective: among the sizes within the KV ceiling, lexicographically
  1. keep up with the arriving prompt tokens (a growing queue misses every TTFT);
  2. bring the recent P90 prompt, alone, to its first token within SLO_TTFT (the SLO is a P90
     over every request; the queue of the moment does not show the long prompts to come);
  3. bring the most queued requests to their first token within SLO_TTFT;
  4. the least round past the TPOT budget, min(SLO_TPOT, KV ceiling) while any slot decodes
     (a round costs TPOT only to the requests decoding in it; none while none does);
  5. the most prompt tokens brought to their first token within SLO_TTFT (the drain inverted);
     while the recent P90 TPOT, nearer its SLO than TTFT, scaled to the pick's stage is over the
     budget: the most among the sizes it fits at scaled to theirs, else the least round.
So TTFT outranks SLO_TPOT but not the KV cache (a stalled admission misses TTFT too), and the
slack left goes to the SLO the engine measures nearer its bound. No constant is tuned: the SLO,
ALP, the KV counters and the measured stages, rounds and P90s are the only inputs. A decision
carries its regime and predicted slacks: TPOT's, the round; TTFT's, the P90 prompt's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from ppsched.core.rounds import RoundMeter, kv_round_ms
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
from ppsched.dcp.queue_drain import (
    first_token_ms,
    most_in_time,
    queue_deadlines,
    tokens_within_ms,
)
from ppsched.dcp.regime import Regime
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.signals import percentile, percentile_below

SLO_PERCENTILE = 90.0  # the SLO holds on P90 TTFT and P90 TPOT (metrics.steady.verdict)


class Measured:
    """What one decision reads of the engine, each once. Read-only (``Final``); not a frozen
    dataclass, whose __init__ runs interpreted even compiled (1.5 us for these nine fields)."""

    def __init__(self, arrival_tok_ms: float, decoding: bool, kv_round_ms: float, gap_ms: float,
                 p90_prompt: float | None, deadlines: list[tuple[float, int]],
                 mean_stage_ms: float | None, recent_tpot_ms: tuple[float, ...],
                 recent_ttft_ms: tuple[float, ...]) -> None:
        self.arrival_tok_ms: Final = arrival_tok_ms
        self.decoding: Final = decoding  # does any slot decode (a round costs TPOT only to them)
        self.kv_round_ms: Final = kv_round_ms
        self.gap_ms: Final = gap_ms  # rank 0's time per microbatch that no stage time shows
        self.p90_prompt: Final = p90_prompt  # tokens of the recent P90 prompt (None: too few)
        self.deadlines: Final = deadlines  # ``queue_deadlines``
        self.mean_stage_ms: Final = mean_stage_ms
        self.recent_tpot_ms: Final = recent_tpot_ms  # their P90 read only where the gate can open
        self.recent_ttft_ms: Final = recent_ttft_ms

    def tpot_closer(self, p90_tpot_ms: float, slo: Slo) -> bool:
        """Whether TPOT is the SLO measured closer to its bound (read only once the scaled TPOT
        is over budget: it reads the whole TTFT window)."""
        return percentile_below(self.recent_ttft_ms, SLO_PERCENTILE, p90_tpot_ms / slo.tpot_ms,
                                slo.ttft_ms)


def measure(rule: SloRule, snap: ChunkSnapshot, arrival_tok_s: float) -> Measured:
    slo, pp = rule.slo, rule.pp
    stages = snap.recent_stage_ms
    mean_stage = sum(stages) / len(stages) if stages else None
    round_ms = None if rule.rounds is None else rule.rounds.mean_round_ms
    gap = 0.0 if round_ms is None or mean_stage is None else max(0.0, round_ms / pp - mean_stage)
    return Measured(arrival_tok_s / 1000.0, snap.max_slot_decode_reqs > 0,
                    kv_round_ms(snap, pp, round_ms), gap,
                    rule.prompts.percentile(SLO_PERCENTILE),
                    queue_deadlines(snap, slo.ttft_ms), mean_stage,
                    snap.recent_tpot_ms, snap.recent_ttft_ms)


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
        # the size above, untried lately, at its lower bound (the choice's stage): no worse on
        # any term, so the objective takes it, unless it aimed at the least round
        explored = explore_above(self.residual, costs, choice.index, d_reqs)
        if explored is None or choice.regime is Regime.TPOT_TIGHT:
            return choice
        above = choice.index + 1
        trial = self.best(explored, seen, d_reqs) if choice.regime is Regime.EASED else choice
        if trial is not choice and trial.index != above:
            return choice
        return self._priced(above, trial.regime, explored, trial.inputs, seen, explored=True)

    def best(self, costs: CandidateCosts, seen: Measured, d_reqs: int) -> Choice:
        """The objective's size at these prices (the module docstring)."""
        pp, slo, gap = self.pp, self.slo, seen.gap_ms
        stage, prefill = costs.stage_ms, costs.prefill
        rounds, n = [pp * s for s in stage], len(prefill)  # indexed loops below: compiled, no zip
        keeps = [prefill[i] > 0 and prefill[i] > seen.arrival_tok_ms * stage[i] for i in range(n)]
        ceiling = seen.kv_round_ms
        if not any(keeps[i] and rounds[i] <= ceiling for i in range(n)):
            ceiling = max(ceiling, slo.tpot_ms)
        budget = min(slo.tpot_ms, seen.kv_round_ms) if seen.decoding else math.inf
        inputs = (("arrival_tok_s", 1000.0 * seen.arrival_tok_ms), ("tpot_budget_ms", budget),
                  ("kv_round_ms", seen.kv_round_ms), ("ceiling_ms", ceiling),
                  ("slot_decodes", float(d_reqs)), ("decoding", float(seen.decoding)),
                  ("queued_deadlines", float(len(seen.deadlines))))
        sizes = [i for i in range(n) if prefill[i] > 0 and rounds[i] <= ceiling]
        if not sizes:  # the least stage is the smallest candidate (a larger one is never faster)
            return self._priced(0, Regime.TPOT_TIGHT, costs, inputs, seen)
        p90, ttft_ms = seen.p90_prompt, slo.ttft_ms
        head = [2 * keeps[i] + (p90 is None or first_token_ms(
                p90, prefill[i], stage[i], gap, pp) <= ttft_ms) for i in sizes]  # terms 1, 2
        top = max(head)
        tied = [sizes[j] for j in range(len(sizes)) if head[j] == top]
        # a request no size brings in time counts for none: dropped, so that a size bringing
        # every other in time ends the search for term 3 (``queue_drain.most_in_time``)
        rate = max([prefill[i] / (stage[i] + gap) for i in tied])
        crossing = (pp - 1) * min([stage[i] for i in tied])
        deadlines = [d for d in seen.deadlines if d[0] >= d[1] / rate + crossing]
        keys = {i: (-max(0.0, rounds[i] - budget),
                    tokens_within_ms(ttft_ms, prefill[i], stage[i], gap, pp), -rounds[i])
                for i in tied}
        idx, count = most_in_time(tied, keys.__getitem__, deadlines, prefill, stage, gap, pp)
        regime = Regime.OVER_BUDGET if rounds[idx] > budget else Regime.WITHIN_BUDGET
        mean = seen.mean_stage_ms
        tpot = percentile(seen.recent_tpot_ms, SLO_PERCENTILE) if regime is \
            Regime.WITHIN_BUDGET and mean is not None and budget < math.inf else None
        if tpot is not None and mean is not None and \
                tpot * ((stage[idx] + gap) / (mean + gap)) > budget and seen.tpot_closer(tpot, slo):
            # a step down to the sizes the TPOT fits at, not a jump to the least round (which
            # over-corrects: TPOT left with margin, TTFT paying for it)
            fits = {i: tpot * ((stage[i] + gap) / (mean + gap)) <= budget for i in tied}
            eased = {i: (keys[i][0], fits[i], keys[i][1] if fits[i] else 0.0, -rounds[i])
                     for i in tied}
            idx, count = most_in_time(tied, eased.__getitem__, deadlines, prefill, stage, gap,
                                      pp)
            regime = Regime.EASED
        return self._priced(idx, regime, costs, (*inputs, ("in_time", float(count))), seen)

    def _priced(self, i: int, regime: Regime, costs: CandidateCosts,
                inputs: tuple[tuple[str, float], ...], seen: Measured, explored: bool = False
                ) -> Choice:
        """Candidate i with the predicted slacks it was priced at, each relative to its SLO."""
        p, stage, slo = costs.prefill[i], costs.stage_ms[i], self.slo
        ttft = None if seen.p90_prompt is None or p <= 0 else first_token_ms(
            seen.p90_prompt, p, stage, seen.gap_ms, self.pp)
        return Choice(i, regime, costs, inputs, explored,
                      None if ttft is None else 1.0 - ttft / slo.ttft_ms,
                      1.0 - self.pp * stage / slo.tpot_ms)
