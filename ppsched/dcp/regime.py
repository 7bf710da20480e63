"""Which path of a predictive rule chose a chunk: the regime each decision carries.

Control flow tests the regime, never a label; the label is what the decision log writes as the
reason, with the shell's modifiers appended (``:explore``, ``+safety-floor``).
"""

from __future__ import annotations

from enum import Enum


class Regime(Enum):
    # SloRule (mixed loop), ``rule_slo``'s objective
    WITHIN = "slo:max-min-slack"  # the greatest smallest slack, every limit predicted met
    SHORT = "slo:max-min-slack:short"  # the same, and some limit predicted missed
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
