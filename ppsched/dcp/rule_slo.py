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
- Sizes never run: the candidate right above the choice, whose tile has not run within the
  forgetting window while the choice's has, is priced at the choice's stage (its lower bound,
  ``calibrate.explore_above``); if the rule would take it at that price, it tries it once
  ("...:explore") instead of trusting ALP's extrapolation to it for ever. Only the choice's
  neighbour: every tile above the measured ones, each in turn, cost the pipeline a cascade of
  trials up the ladder whenever their tiles expired.
- None fits: the candidate with the least stage time, the smallest ("tpot-tight:least-stage").
- Keeping up before the KV budget: where the KV binds and its budget leaves only sizes whose
  supply is at or below the measured arrival rate of prompt tokens, the queue grows for as long
  as that lasts, a certain TTFT miss, where the budget's is a forecast (Little's law at the KV
  in use of the moment) and a full cache stalls admission only until decodes free their KV. The
  rule then takes the least size within SLO_TPOT whose supply exceeds the arrival rate
  ("slo:keep-up"); none does: the budget's choice. Measured on 32B sharegpt at SLO 0.8, 1.83
  req/s, with 95-99% of the KV in use in a burst the budget flipped 256 and 128 (~100 prefill
  tokens beside ~25 decodes, less than the prompt tokens arriving) and P90 TTFT reached 4.6 s
  where a fixed 256 kept 1.8 s; with the rule 6 of 10 fresh seeds held it, 7 with keep-up
  (bench/dcp.md, session 25).
- The P90 prompt's floor (``prompt_floor``): the price's choice is raised to the least size
  within the KV budget at which the recent P90 prompt, with nothing ahead of it, reaches its
  first token within SLO_TTFT ("slo:p90-prompt"). The deadline check sees only the queue of the
  moment, and the SLO is a percentile over every request: measured, 32B sharegpt at SLO 0.4
  took 128 in 70% of its decisions and its P90 TTFT sat at the SLO at every rate where a fixed
  256 held it (bench/dcp.md, sessions 19 and 20). The deadline check and the kept sizes below
  start from the floor, and the TPOT ease does not go under it (where it did, 5 of 10 fresh
  seeds missed the SLO at 0.72 req/s, 2 of 10 without: the queue of the moment was in time
  while the long prompts to come were not).
- The queue's deadlines before the price. The price is the round of a slot whose every
  microbatch carries a piece, a bound: rounds without one are shorter, and a request's TPOT is
  its mean round (measured, 32B sharegpt at SLO 0.4 and 0.7 req/s: fixed 128 and 256 give P90
  TPOT 75.2 and 76.9 ms under an 80 ms SLO, where 4 s(256) = 95 ms; 128 misses TTFT on 93% of
  the prompts over 4k tokens). So when the price's choice would bring a queued request to its
  first token after its SLO_TTFT, the rule takes the least larger size within the KV budget that
  brings every queued request in time ("ttft:least-in-time"); none does: the price's choice. In
  time by the drain model below, FCFS: a request waits for the tokens ahead of it, not for the
  arrivals after it (no rho), and each microbatch also waits rank 0's time that no stage time
  shows (the measured round's excess over its stages, per microbatch). A request already past
  its SLO_TTFT sets no deadline.
- An escalation is kept until the request it was for (the one the size below brings late) has
  left the queue: until then the price's choice is raised to it ("ttft:kept"), within the KV
  budget, and the check goes on from there. Re-planned from the price at every decision, an
  escalated prompt went back to the price's size as soon as it was just in time again, so it
  reached its first token at its deadline and any error of the drain made it late (32B sharegpt
  at SLO 0.4, 0.5 req/s: the decisions during the long prompts' drains took 128 in 63%, half of
  those prompts came late; bench/dcp.md, session 15). Kept only while the recent P90 TTFT is at
  least as close to its SLO as the recent P90 TPOT to its own: a kept size spends TPOT on TTFT,
  and where TPOT is the tighter one it pushed P90 TPOT over (32B azure-conv at SLO 0.4, 2.0 req/s:
  81 ms over 80, with P90 TTFT at 596 of 800 ms).
- The mirror case: while the recent P90 TPOT is the closer to its SLO, the price's choice is
  eased to the least size below it that keeps up with the arriving prompt tokens (supply above
  the measured arrival rate) and still brings every queued request in time
  ("tpot:least-in-time"). The price lets every round cost up to SLO_TPOT, and the most efficient
  size within it then spends TPOT on a TTFT margin the SLO does not need. Measured on 14B
  azure-code at SLO 1, 9.44 req/s (median output 13 tokens: a request's TPOT is a dozen rounds):
  the price's choice ran 1152-1280 in 52% of decisions, P90 TPOT 200.7 ms over 200 with P90 TTFT
  1,348 of 2,000; eased (256-640 in 89%), 112.8 and 1,573, for 5% more stage-0 time in pieces
  (bench/dcp.md, session 16). Only while the measured TPOT says the choice would overrun: the
  recent P90 TPOT, scaled from the recent mean stage to the choice's (each with the round's
  gap), above the price's budget. The closer SLO alone let the ease act with P90 TPOT at 58-63%
  of its limit, and bursts met 128-570-token pieces (14B azure-code SLO 1: 4 of 10 fresh seeds
  held 9.44 req/s where static:1024 held 8; with the scaled test 8; bench/dcp.md, session 24).
  Against the budget, not SLO_TPOT alone: where the KV cache binds, easing is what keeps the
  decoding requests' KV within it (14B azure-conv at SLO 1, 14.2 req/s: 1 of 10 seeds against
  SLO_TPOT, 7 against the budget, as before).
- Held for a round and more: a pipeline's microbatches cross the same stages one after
  another, so a slot's round waits for the longest microbatch ahead of it. Chosen afresh for
  every microbatch, the best supply differs from piece to piece (a prompt's first piece attends
  to no prefix and is cheaper per token), the slots run unlike sizes and the stages idle behind
  the long ones: measured on azure-code 32B at 3.5 req/s, 640 beside 384 left stage 0 idle
  60 s of 300 where a fixed 384 left 43 s, at the same prefill tokens per stage-ms (bench/dcp.md,
  session 9). Holding the choice for the shell's cadence keeps the slots alike.
- Nothing decodes in any slot (e.g. prefill-only jobs: 1 output token, no TPOT): there is no
  TPOT to keep, and the SLO left is TTFT. Q queued prompt tokens take ceil(Q / p(c))
  microbatches of s(c) on stage 0, and the last one pp - 1 more stage times to cross the
  pipeline; prompts arriving meanwhile (the measured arrival rate a, in tokens) take a share
  rho = a / supply(c) of stage 0, so the drain stretches by 1 / (1 - rho). The requests that
  decide the P90 are those that wait near the SLO's TTFT, not the queue of the moment, so the
  rule takes the candidate that brings the most queued tokens to their first token within
  SLO_TTFT ("no-decodes:most-within-ttft"; ties: the shorter stage); none does (it cannot keep
  up, or not even the crossing fits): the greatest supply ("no-decodes:max-supply"). Sized for
  the queue of the moment, as before, the choice flipped between 256 and 384 (and up to 1152
  when the queue was long) where a fixed 384 kept the P90 lower (chat-batch's batch phase,
  bench/dcp.md sessions 6, 10 and 11). The first request that decodes brings the TPOT budget
  back at the next decision.
No constant here is tuned: the SLO, ALP's predictions, the engine's KV counters and its measured
stage times are the only inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

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
    waiting_fcfs,
)
from ppsched.dcp.prompt_floor import RecentPrompts, prompt_floor
from ppsched.dcp.queue_drain import first_late, queue_deadlines, tokens_within_ms
from ppsched.dcp.rounds import RoundMeter
from ppsched.dcp.rule_base import Choice
from ppsched.dcp.signals import percentile

INF = float("inf")
SLO_PERCENTILE = 90.0  # the SLO holds on P90 TTFT and P90 TPOT (metrics.steady.verdict)


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


def _instead(priced: Choice, i: int, reason: str) -> Choice:
    """Candidate i instead of the TPOT price's choice, which the inputs record."""
    costs = priced.costs
    return Choice(i, reason, costs, (
        *priced.inputs, ("tpot_choice", float(costs.candidates[priced.index]))))


class KeptSizes:
    """The sizes the deadline check escalated to, each kept until the request it was chosen for
    has left the queue (its last piece launched, or it was rejected): ``SloRule._in_time``."""

    def __init__(self) -> None:
        self._size: dict[int, int] = {}  # req_id -> the chunk tokens its escalation chose

    def keep(self, req_id: int, chunk: int) -> None:
        self._size[req_id] = max(chunk, self._size.get(req_id, 0))

    def largest(self, snap: ChunkSnapshot) -> int:
        """The largest size kept for a request still queued, 0 if none; forgets the others."""
        if not self._size:
            return 0
        queued = {q.req_id for q in waiting_fcfs(snap)}
        for req_id in [r for r in self._size if r not in queued]:
            del self._size[req_id]
        return max(self._size.values(), default=0)


@dataclass(frozen=True)
class SloRule:
    slo: Slo
    pp: int  # pipeline stages (pp_size)
    predictor: StagePredictor
    residual: TileResidual
    rounds: RoundMeter | None = None  # the measured round, when the engine reports launches
    kept: KeptSizes = field(default_factory=KeptSizes)  # escalations, until their request is served
    prompts: RecentPrompts = field(default_factory=RecentPrompts)  # the P90 prompt's window

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice:
        d_reqs, d_ctx = asking_slot_decodes(snap)
        costs = predict_costs(self.predictor, candidates, BatchModel.MIXED, chunk_prefix(snap),
                              d_reqs, d_ctx, correct=self.residual.correct_scan)
        kv_round = kv_round_ms(snap, self.pp, None if self.rounds is None else
                               self.rounds.mean_round_ms)
        choice = self._select(snap, costs, arrival_tok_s, d_reqs, kv_round)
        queue = _DecisionQueue(self, snap)
        self.prompts.see(snap)
        choice = self._floored(queue, costs, kv_round, choice)
        choice = self._in_time(queue, costs, kv_round, choice)
        choice = self._eased(queue, costs, arrival_tok_s, kv_round, choice)
        # the size above the choice, never run (or not lately): tried once if, at its lower
        # bound, the rule would take it
        explored = explore_above(self.residual, costs, choice.index, d_reqs)
        if explored is not None:
            trial = self._select(snap, explored, arrival_tok_s, d_reqs, kv_round)
            if trial.index == choice.index + 1:
                return Choice(trial.index, trial.reason + ":explore", trial.costs, trial.inputs)
        return choice

    def _floored(self, queue: _DecisionQueue, costs: CandidateCosts, kv_round: float,
                 choice: Choice) -> Choice:
        """The price's choice raised to the P90 prompt's floor (``prompt_floor``)."""
        if not choice.reason.startswith(("slo:", "tpot-tight")):
            return choice  # the nothing-decodes plan sizes for the queue's tokens itself
        tokens = self.prompts.percentile(SLO_PERCENTILE)
        if tokens is None:
            return choice
        i = prompt_floor(costs, tokens, self.pp, queue.gap_ms, self.slo.ttft_ms, kv_round)
        if i is None or i <= choice.index:
            return choice
        return Choice(i, "slo:p90-prompt", costs, (
            *choice.inputs, ("p90_prompt_tokens", tokens),
            ("price_choice", float(costs.candidates[choice.index]))))

    def _in_time(self, queue: _DecisionQueue, costs: CandidateCosts, kv_round: float,
                 choice: Choice) -> Choice:
        if not choice.reason.startswith(("slo:", "tpot-tight")):
            return choice  # the nothing-decodes plan: no TPOT price to raise
        priced = choice
        kept = self.kept.largest(queue.snap)
        if kept and kept in costs.candidates and queue.ttft_is_tighter:
            i = costs.candidates.index(kept)
            if i > priced.index and costs.stage_ms[i] * self.pp <= kv_round:
                choice = _instead(priced, i, "ttft:kept")
        nxt = choice.index + 1
        if nxt == len(costs.prefill) or costs.stage_ms[nxt] * self.pp > kv_round:
            return choice  # nothing larger within the KV budget: nothing to check
        deadlines, gap = queue.deadlines, queue.gap_ms
        late = first_late(costs, choice.index, deadlines, self.pp, gap)
        if late is None:
            return choice
        for i in range(nxt, len(costs.prefill)):
            if costs.stage_ms[i] * self.pp > kv_round:
                break  # a full cache stalls admission: no size past the KV budget
            needs = late  # the request the size below brings late: this size is for it
            late = first_late(costs, i, deadlines, self.pp, gap, hint=late)
            if late is None:
                self.kept.keep(deadlines[needs][2], costs.candidates[i])
                return _instead(priced, i, "ttft:least-in-time")
        return choice

    def _eased(self, queue: _DecisionQueue, costs: CandidateCosts, arrival_tok_s: float,
               kv_round: float, choice: Choice) -> Choice:
        """The least size below the price's choice that keeps up with the arriving prompt
        tokens and brings every queued request in time, while the recent P90 TPOT is closer to
        its SLO than the recent P90 TTFT to its own and, scaled to the choice's stage, over the
        price's budget: the price's choice then spends TPOT the SLO does not have on a TTFT
        margin it does not need. Never below the P90 prompt's floor: the queue of the moment in
        time says nothing of the long prompts to come."""
        if (choice.index == 0 or not choice.reason.startswith("slo:") or queue.ttft_is_tighter
                or choice.reason == "slo:p90-prompt"):
            return choice
        scaled = queue.scaled_tpot_ms(costs.stage_ms[choice.index])
        if scaled is not None and scaled <= min(self.slo.tpot_ms, kv_round):
            return choice  # measured, the choice keeps the price's budget: easing spends TTFT
        deadlines, gap = queue.deadlines, queue.gap_ms
        arrival_tok_ms = arrival_tok_s / 1000.0
        late = None
        for i in range(choice.index):
            if costs.prefill[i] <= 0 or costs.supply(i) <= arrival_tok_ms:
                continue
            late = first_late(costs, i, deadlines, self.pp, gap, hint=late)
            if late is None:
                return _instead(choice, i, "tpot:least-in-time")
        return choice

    def _select(self, snap: ChunkSnapshot, costs: CandidateCosts, arrival_tok_s: float,
                d_reqs: int, kv_round: float) -> Choice:
        pp = self.pp
        n = len(costs.prefill)
        queued = snap.queued_prompt_tokens
        if snap.max_slot_decode_reqs == 0 and queued > 0:
            arrival_tok_ms = arrival_tok_s / 1000.0
            within = [tokens_within_ms(costs, i, self.slo.ttft_ms, pp, arrival_tok_ms)
                      for i in range(n)]
            best = max(range(n), key=lambda i: (within[i], -costs.stage_ms[i]))
            if within[best] > 0:
                return Choice(best, "no-decodes:most-within-ttft", costs, (
                    ("arrival_tok_s", arrival_tok_s), ("tokens_within_ttft", float(within[best])),
                    ("queued_prompt_tokens", float(queued)), ("slot_decodes", 0.0)))
            # none brings a token in time or keeps up with the arrivals: the greatest supply
            idx = max(range(n), key=lambda i: (costs.supply(i), -costs.stage_ms[i]))
            return Choice(idx, "no-decodes:max-supply", costs, (
                ("arrival_tok_s", arrival_tok_s), ("queued_prompt_tokens", float(queued)),
                ("slot_decodes", 0.0)))
        budget = min(self.slo.tpot_ms, kv_round)
        idx = costs.best_supply(pp, budget)
        if idx is not None:
            reason = "slo:max-supply" + (":kv-bound" if kv_round < self.slo.tpot_ms else "")
        else:
            # the least stage is the smallest candidate: a larger microbatch is never faster.
            # ALP's online fit can rank them otherwise where its data are confounded (live CPU
            # server: 128 below 8-64 under a 5.5 ms SLO); on the simulator the two agree
            idx = 0
            reason = "tpot-tight:least-stage"
        inputs = (("arrival_tok_s", arrival_tok_s), ("tpot_budget_ms", budget),
                  ("kv_round_ms", kv_round), ("slot_decodes", float(d_reqs)))
        if kv_round < self.slo.tpot_ms:
            kept_up = self._keeping_up(costs, idx, arrival_tok_s / 1000.0)
            if kept_up is not None:
                return Choice(kept_up, "slo:keep-up", costs, (
                    *inputs, ("kv_choice", float(costs.candidates[idx]))))
        return Choice(idx, reason, costs, inputs)

    def _keeping_up(self, costs: CandidateCosts, idx: int, arrival_tok_ms: float
                    ) -> int | None:
        """The least size above candidate ``idx`` (the KV budget's choice) within SLO_TPOT
        whose supply exceeds the arriving prompt tokens, when ``idx``'s does not; None when
        ``idx`` keeps up or no size within SLO_TPOT does."""
        if costs.supply(idx) > arrival_tok_ms:
            return None
        for i in range(idx + 1, len(costs.prefill)):
            if costs.stage_ms[i] * self.pp > self.slo.tpot_ms:
                return None
            if costs.supply(i) > arrival_tok_ms:
                return i
        return None


class _DecisionQueue:
    """What the deadline check and the ease both read in one decision, each computed at most
    once (the queue scan, the round's gap, the gate's two percentiles)."""

    def __init__(self, rule: SloRule, snap: ChunkSnapshot) -> None:
        self.rule = rule
        self.snap = snap

    @cached_property
    def deadlines(self) -> list[tuple[float, int, int]]:
        return queue_deadlines(self.snap, self.rule.slo.ttft_ms)

    @cached_property
    def mean_stage_ms(self) -> float | None:
        stages = self.snap.recent_stage_ms
        return sum(stages) / len(stages) if stages else None

    @cached_property
    def p90_tpot_ms(self) -> float | None:
        return percentile(self.snap.recent_tpot_ms, SLO_PERCENTILE)

    @cached_property
    def gap_ms(self) -> float:
        """Rank 0's time between two microbatches that no stage time shows: the measured
        round's excess over pp * the mean recent stage, per microbatch (0 until measured)."""
        rounds, mean_stage = self.rule.rounds, self.mean_stage_ms
        round_ms = None if rounds is None else rounds.mean_round_ms
        if round_ms is None or mean_stage is None:
            return 0.0
        return max(0.0, round_ms / self.rule.pp - mean_stage)

    def scaled_tpot_ms(self, stage_ms: float) -> float | None:
        """The recent P90 TPOT had every microbatch cost ``stage_ms``: scaled by it over the
        recent mean stage, each with the round's gap (None until both are measured)."""
        tpot, mean_stage = self.p90_tpot_ms, self.mean_stage_ms
        if tpot is None or mean_stage is None:
            return None
        return tpot * (stage_ms + self.gap_ms) / (mean_stage + self.gap_ms)

    @cached_property
    def ttft_is_tighter(self) -> bool:
        """Whether the recent P90 TTFT is at least as close to its SLO as the recent P90 TPOT
        to its own (True until both are measured): a kept size spends TPOT on TTFT, an eased
        one TTFT on TPOT."""
        slo = self.rule.slo
        ttft = percentile(self.snap.recent_ttft_ms, SLO_PERCENTILE)
        tpot = self.p90_tpot_ms
        if ttft is None or tpot is None:
            return True
        return ttft / slo.ttft_ms >= tpot / slo.tpot_ms
