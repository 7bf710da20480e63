"""What every predictive rule returns, and the paper's artifact constants the rules share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import CandidateCosts
from ppsched.dcp.regime import Regime
from ppsched.dcp.signals import PAPER_KV_WATERMARK


@dataclass(frozen=True, slots=True)
class PaperConstants:
    """The artifact's constants (PAPER.md), used by the paper rule and our plain-loop rule."""

    kv_watermark: float = PAPER_KV_WATERMARK  # free KV below 10% -> smallest safe chunk
    tpot_margin: float = 1.05  # stage * pp <= 1.05 SLO_TPOT
    wait_fraction: float = 0.25  # backlog counts requests that waited >= 0.25 SLO_TTFT
    window_s: float = 10.0  # arrival-rate window
    cadence: int = 2  # decide every cadence * pp_size iterations

    def __post_init__(self) -> None:
        if not (self.tpot_margin > 0 and 0 <= self.wait_fraction < 1 and self.window_s > 0
                and self.cadence >= 1 and 0 <= self.kv_watermark < 1):
            raise ValueError("predictive: expected tpot_margin > 0, 0 <= wait_fraction < 1, "
                             "window_s > 0, cadence >= 1, 0 <= kv_watermark < 1")


@dataclass(frozen=True, slots=True)
class Choice:
    """A rule's pick: an index into ``costs.candidates`` and the regime that picked it; the
    controller applies the safety floor and builds the ChunkDecision (chunk, regime, reason,
    inputs, predicted stage time, slacks).

    ``explored``: the pick is a trial of the size above, priced at its lower bound
    (``calibrate.explore_above``). ``ttft_slack`` / ``tpot_slack``: the predicted P90 TTFT and
    TPOT slack the rule acted on, each relative to its SLO (1 - predicted / SLO; negative: a
    predicted miss), None where the rule computes no such prediction."""

    index: int
    regime: Regime
    costs: CandidateCosts
    inputs: tuple[tuple[str, float], ...]
    explored: bool = False
    ttft_slack: float | None = None
    tpot_slack: float | None = None

    @property
    def reason(self) -> str:
        """The decision log's label: the regime's, marked when the pick is an exploring trial."""
        return self.regime.label + (":explore" if self.explored else "")


class Rule(Protocol):
    """One way of choosing a chunk from the candidates' predicted costs (the ``predictive`` shell
    asks every cadence * pp iterations and holds the choice in between)."""

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice: ...
