"""Which path of a predictive rule chose a chunk: the regime each decision carries.

Control flow tests the regime, never a label; the label (the enum's value) is what the decision
log writes as the reason, with the shell's modifiers appended (``:explore``, ``+safety-floor``).
"""

from __future__ import annotations

from enum import Enum


class Regime(Enum):
    # SloRule (mixed loop): the TPOT price's base choice
    MAX_SUPPLY = "slo:max-supply"  # the most prefill supply within min(SLO_TPOT, KV round)
    MAX_SUPPLY_KV_BOUND = "slo:max-supply:kv-bound"  # the same, the KV round the tighter
    KEEP_UP = "slo:keep-up"  # the least size within SLO_TPOT whose supply keeps up
    TPOT_TIGHT = "tpot-tight:least-stage"  # no size fits the budget: the least stage
    # SloRule: the adjustments of the price's choice
    P90_PROMPT = "slo:p90-prompt"  # raised to the P90 prompt's floor
    KEPT = "ttft:kept"  # an earlier deadline escalation, kept for its request
    IN_TIME = "ttft:least-in-time"  # raised until every queued request is in time
    EASED = "tpot:least-in-time"  # lowered to spend less TPOT where TTFT has room
    # SloRule: nothing decodes in the asking slot
    NO_DECODES_WITHIN_TTFT = "no-decodes:most-within-ttft"
    NO_DECODES_MAX_SUPPLY = "no-decodes:max-supply"
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
        """The reason the decision log writes for this regime."""
        return self.value


# The TPOT price's base choices: the ones the P90 prompt's floor and the deadline check adjust
# (the nothing-decodes plan sizes for the queue's tokens itself).
PRICED = frozenset({Regime.MAX_SUPPLY, Regime.MAX_SUPPLY_KV_BOUND, Regime.KEEP_UP,
                    Regime.TPOT_TIGHT})
# What the deadline check may raise: a base choice, or one the P90 prompt's floor raised.
RAISABLE = PRICED | {Regime.P90_PROMPT}
# What the TPOT ease may lower: a base choice that fit the price's budget. Not a floor (the
# queue of the moment says nothing of the long prompts to come), not the least stage, not an
# escalation.
EASABLE = frozenset({Regime.MAX_SUPPLY, Regime.MAX_SUPPLY_KV_BOUND, Regime.KEEP_UP})
