"""Which path of a predictive rule chose a chunk: the regime each decision carries.

Control flow tests the regime, never a label; the label is what the decision log writes as the
reason, with the shell's modifiers appended (``:explore``, ``+safety-floor``).
"""

from __future__ import annotations

from enum import Enum


class Regime(Enum):
    # SloRule (mixed loop): which term of its objective decided
    WITHIN_BUDGET = "slo:within-budget"  # the most supply within the TPOT budget
    OVER_BUDGET = "slo:over-budget"  # a TTFT term bought a round past the budget, or none fits
    EASED = "slo:eased"  # the least round meeting the TTFT terms: TPOT measured the closer
    TPOT_TIGHT = "tpot-tight:least-stage"  # no size within the KV ceiling: the least stage
    # SteadyRule (plain loop)
    STEADY_WITHIN_TPOT = "feasible:min-tpot"
    STEADY_TPOT_TIGHT = "tpot-tight:min-tpot"
    NO_DECODES_MEETING_TPOT = "no-decodes:largest-meeting-tpot"
    # PaperRule, and SteadyRule's last resorts
    KV_WATERMARK = "kv-watermark"
    TPOT_INFEASIBLE = "tpot-infeasible:min"
    FEASIBLE_SMALLEST = "feasible:smallest"
    OVERLOADED = "overloaded:largest-meeting-tpot"

    @property
    def label(self) -> str:
        """The reason the decision log writes."""
        return self.value
