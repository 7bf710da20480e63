"""``predictive`` / ``predictive-paper``: chunk choice from ALP-predicted stage latency.

The controller is a shell around one rule at a time (each a small class over the shared
``candidate_costs`` helper):

- ``predictive-paper`` (``Variant.PAPER``): ``PaperRule`` always, the paper's reading.
- ``predictive`` (``Variant.OURS``): the engine loop is learned from ``observe``. Until a mixed
  batch is seen (SGLang's default loop) ``SteadyRule``; from the first mixed batch
  (--enable-mixed-chunk) ``SloRule``.

The shell owns what is common: the candidates (the user's, or the paper's grid), the arrival
window, ALP learning from every measurement, the cadence (every rule decides every 2*pp_size
iterations and the shell holds its choice in between) and the safety floor (a chunk never at or
below the fullest slot's decode count, re-checked while holding: a slot's decodes can jump).
"""

from __future__ import annotations

from dataclasses import replace
from enum import Enum

from ppsched.core.policy import ChunkDecision
from ppsched.core.rounds import RoundMeter
from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot, Launch, StageMeasurement
from ppsched.dcp.calibrate import TileResidual
from ppsched.dcp.candidate_costs import StagePredictor, chunk_prefix
from ppsched.dcp.knobs import PredictiveConfig
from ppsched.dcp.rule_base import Choice, Rule
from ppsched.dcp.rule_paper import PaperRule
from ppsched.dcp.rule_slo import SloRule
from ppsched.dcp.rule_steady import SteadyRule
from ppsched.dcp.signals import ArrivalWindow, check_candidates, safe_floor, usable_candidates

__all__ = ["PredictiveChunk", "StagePredictor", "Variant"]

# a re-plan ``held_decision`` found due: (now, iteration, arrival rate, candidates, floor)
_Replan = tuple[float, int, float, tuple[int, ...], int]


class Variant(Enum):
    PAPER = "paper"  # the paper's rule in every loop
    OURS = "ours"  # SteadyRule in the plain loop, SloRule once a mixed batch is seen


class PredictiveChunk:
    def __init__(self, slo: Slo, pp_size: int, predictor: StagePredictor,
                 variant: Variant = Variant.OURS, name: str = "predictive",
                 candidates: tuple[int, ...] | None = None,
                 config: PredictiveConfig | None = None) -> None:
        if pp_size < 1:
            raise ValueError(f"pp_size={pp_size}: expected >= 1")
        self.name = name
        self.slo = slo
        self.pp_size = pp_size
        self.predictor = predictor
        self.variant = variant
        self.candidates = None if candidates is None else check_candidates(candidates)
        self.config = config or PredictiveConfig()
        self._arrivals = ArrivalWindow(self.config.window_s)
        self._next_iteration = 0
        self._last: ChunkDecision | None = None
        self._due: _Replan | None = None  # a re-plan held_decision found due
        self.mixed_seen = False  # has the engine ever run decodes inside a prefill batch?
        # measured residuals, used by the SLO rule; they fade with ALP's own forgetting
        forgetting = getattr(predictor, "forgetting", None)
        self._residual = TileResidual() if forgetting is None else TileResidual(
            forgetting=forgetting)
        k = self.config
        self._rounds: RoundMeter | None = None
        if variant is Variant.PAPER:
            self._plain_rule: Rule = PaperRule(slo, pp_size, predictor, k)
            self._mixed_rule: Rule = self._plain_rule
        else:
            self._plain_rule = SteadyRule(slo, pp_size, predictor, k)
            self._rounds = RoundMeter(pp_size, k.window_s)
            self._mixed_rule = SloRule(slo, pp_size, predictor, self._residual, self._rounds)

    @property
    def rule(self) -> Rule:
        return self._mixed_rule if self.mixed_seen else self._plain_rule

    def observe(self, measurement: StageMeasurement) -> None:
        # ALP learns from every measured iteration, prefill or decode, any stage
        kind = measurement.shape.kind
        if kind != "empty" and measurement.measured_ms > 0:
            if self.variant is Variant.OURS:  # residual of the prediction made before learning
                # (of ALP's profile-anchored formula: the residual shifts only its scans)
                formula = getattr(self.predictor, "predict_formula", None)
                predicted = formula(measurement.shape) if formula is not None else \
                    self.predictor.predict_many((measurement.shape,))[0]
                self._residual.update(measurement.shape, predicted, measurement.measured_ms)
            self.predictor.update(measurement.shape, measurement.measured_ms)
        if kind == "mixed":
            self.mixed_seen = True

    def observe_launch(self, launch: Launch) -> None:
        """A microbatch started on stage 0: the SLO rule's KV budget uses the measured round."""
        if self._rounds is not None:
            self._rounds.launch(launch)

    def held_decision(self, now_s: float, iteration: int, arrived_prompt_tokens_total: int,
                      max_chunk_tokens: int, max_slot_decode_reqs: int) -> ChunkDecision | None:
        """The decision while the cadence holds it, from the snapshot's counters alone (an
        engine asks this before it builds a snapshot); None when a re-plan is due, and then
        ``decide`` with this instant's snapshot re-plans without reading the counters again."""
        arrival = self._arrivals.update(now_s, arrived_prompt_tokens_total)
        candidates = usable_candidates(self.candidates, max_chunk_tokens)
        floor = safe_floor(candidates, max_slot_decode_reqs)
        last = self._last
        if iteration < self._next_iteration and last is not None:
            if last.chunk_tokens >= floor or last.chunk_tokens >= candidates[-1]:
                return last
            # the held decision's regime and slacks: what the rule acted on
            self._last = replace(last, chunk_tokens=floor, reason="hold+safety-floor")
            return self._last
        self._due = (now_s, iteration, arrival, candidates, floor)
        return None

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        due: _Replan | None = self._due
        self._due = None
        if due is None or due[:2] != (snap.now_s, snap.iteration):
            held = self.held_decision(snap.now_s, snap.iteration,
                                      snap.arrived_prompt_tokens_total, snap.max_chunk_tokens,
                                      snap.max_slot_decode_reqs)
            if held is not None:
                return held
            due = self._take_due()
            assert due is not None  # held_decision returned None: it set the re-plan due
        _, _, arrival, candidates, floor = due
        self._next_iteration = snap.iteration + self.config.cadence * self.pp_size
        self._last = self._finish(self.rule.choose(snap, candidates, arrival), floor, snap)
        return self._last

    def _take_due(self) -> _Replan | None:
        """The re-plan ``held_decision`` set, cleared (a method of its own: read in ``decide``
        after ``held_decision`` ran, not what ``decide`` last assigned)."""
        due, self._due = self._due, None
        return due

    def _finish(self, choice: Choice, floor: int, snap: ChunkSnapshot) -> ChunkDecision:
        costs = choice.costs
        idx, reason = choice.index, choice.reason
        if costs.candidates[idx] < floor:
            idx, reason = costs.candidates.index(floor), reason + "+safety-floor"
        stage = costs.stage_ms[idx]
        return ChunkDecision(costs.candidates[idx], reason, choice.inputs + (
            ("stage_supply_tok_s", 1000.0 * costs.supply(idx)),
            ("period_ms", stage * self.pp_size), ("mixed_seen", float(self.mixed_seen)),
            ("prefix", float(chunk_prefix(snap))), ("kv_free_frac", snap.kv_free_fraction),
        ), float(stage), choice.regime, choice.ttft_slack, choice.tpot_slack)

