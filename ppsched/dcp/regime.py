"""Which path of a predictive rule chose a chunk: the regime each decision carries.

Control flow tests the regime, never a label; the label is what the decision log writes as the
reason, with the shell's modifiers appended (``:explore``, ``+safety-floor``). Each regime says
which of the SLO rule's adjustments apply to it (plain attributes: the rule reads them on every
decision).
"""

from __future__ import annotations

from enum import Enum


class Regime(Enum):
    # (label, floored, raised, eased, priced)
    # floored: the P90 prompt's floor applies (a base choice of the TPOT price);
    # raised: the deadline check applies (a base choice, or one the floor raised);
    # eased: the TPOT ease applies (a base choice that fit the price's budget: not a floor,
    #   whose long prompts the queue of the moment does not show, not the least stage, not an
    #   escalation);
    # priced: a slot decodes, so the choice has a TPOT price and the slacks are predicted.

    # SloRule (mixed loop): the TPOT price's base choice
    MAX_SUPPLY = ("slo:max-supply", True, True, True, True)  # most supply within the budget
    MAX_SUPPLY_KV_BOUND = ("slo:max-supply:kv-bound", True, True, True, True)  # KV the tighter
    KEEP_UP = ("slo:keep-up", True, True, True, True)  # least size within SLO_TPOT keeping up
    TPOT_TIGHT = ("tpot-tight:least-stage", True, True, False, True)  # none fits: least stage
    # SloRule: the adjustments of the price's choice
    P90_PROMPT = ("slo:p90-prompt", False, True, False, True)  # raised to the P90 prompt's floor
    KEPT = ("ttft:kept", False, False, False, True)  # an escalation kept for its request
    IN_TIME = ("ttft:least-in-time", False, False, False, True)  # raised: the queue in time
    EASED = ("tpot:least-in-time", False, False, False, True)  # lowered where TTFT has room
    # SloRule: nothing decodes in the asking slot
    NO_DECODES_WITHIN_TTFT = ("no-decodes:most-within-ttft", False, False, False, False)
    NO_DECODES_MAX_SUPPLY = ("no-decodes:max-supply", False, False, False, False)
    # SteadyRule (plain loop)
    STEADY_WITHIN_TPOT = ("feasible:min-tpot", False, False, False, False)
    STEADY_TPOT_TIGHT = ("tpot-tight:min-tpot", False, False, False, False)
    NO_DECODES_MEETING_TPOT = ("no-decodes:largest-meeting-tpot", False, False, False, False)
    # PaperRule, and SteadyRule's last resorts
    KV_WATERMARK = ("kv-watermark", False, False, False, False)
    TPOT_INFEASIBLE = ("tpot-infeasible:min", False, False, False, False)
    FEASIBLE_SMALLEST = ("feasible:smallest", False, False, False, False)
    OVERLOADED = ("overloaded:largest-meeting-tpot", False, False, False, False)

    def __init__(self, label: str, floored: bool, raised: bool, eased: bool,
                 priced: bool) -> None:
        self.label = label  # the reason the decision log writes
        self.floored = floored
        self.raised = raised
        self.eased = eased
        self.priced = priced
