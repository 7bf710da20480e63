"""What every predictive rule returns, and the knobs the predictive controllers share."""

from __future__ import annotations

from typing import Final, Protocol

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import CandidateCosts
from ppsched.dcp.regime import Regime


class Choice:
    """A rule's pick: an index into ``costs.candidates`` and the regime that picked it; the
    controller applies the safety floor and builds the ChunkDecision (chunk, regime, reason,
    inputs, predicted stage time, slacks).

    ``explored``: the pick is a trial of the size above, priced at its lower bound
    (``calibrate.explore_above``). ``ttft_slack`` / ``tpot_slack``: the predicted P90 TTFT and
    TPOT slack the rule acted on, each relative to its SLO (1 - predicted / SLO; negative: a
    predicted miss), None where the rule computes no such prediction. Read-only (``Final``), a
    plain class for the reason ``rule_slo.Measured`` gives."""

    def __init__(self, index: int, regime: Regime, costs: CandidateCosts,
                 inputs: tuple[tuple[str, float], ...], explored: bool = False,
                 ttft_slack: float | None = None, tpot_slack: float | None = None) -> None:
        self.index: Final = index
        self.regime: Final = regime
        self.costs: Final = costs
        self.inputs: Final = inputs
        self.explored: Final = explored
        self.ttft_slack: Final = ttft_slack
        self.tpot_slack: Final = tpot_slack

    @property
    def reason(self) -> str:
        """The decision log's label: the regime's, marked when the pick is an exploring trial."""
        return self.regime.label + (":explore" if self.explored else "")


class Rule(Protocol):
    """One way of choosing a chunk from the candidates' predicted costs (the ``predictive`` shell
    asks every cadence * pp iterations and holds the choice in between)."""

    def choose(self, snap: ChunkSnapshot, candidates: tuple[int, ...], arrival_tok_s: float
               ) -> Choice: ...
