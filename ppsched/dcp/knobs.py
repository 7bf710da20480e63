"""The chunk controllers' knobs, each with its meaning: ``PredictiveConfig`` and ``GreedyConfig``
(``ppsched.policy_config`` composes them with DS's and admission's). Shared by every run, so a
controller family's own files stay free of them (``experiments.cache``)."""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.errors import UserError
from ppsched.core.knob_checks import check_knobs, finite_number, whole_number
from ppsched.dcp.signals import PAPER_KV_WATERMARK, PAPER_STEP

SIGNALS = ("leading", "completed")


@dataclass(frozen=True, slots=True)
class PredictiveConfig:
    """Every knob of the ``predictive`` controllers. The shell reads ``cadence`` and
    ``window_s``; the paper's rule and our plain-loop rule read all five (the artifact's values,
    PAPER.md). Our mixed-loop rule (``rule_slo``) has no knob of its own: the SLO, ALP and the
    engine's counters are its inputs."""

    cadence: int = 2  # re-plan every cadence * pp_size iterations, hold the chunk in between
    window_s: float = 10.0  # the arrival rate's (and the measured round's) window
    kv_watermark: float = PAPER_KV_WATERMARK  # free KV below it: the smallest safe chunk
    tpot_margin: float = 1.05  # the paper's TPOT bound: stage * pp <= tpot_margin * SLO_TPOT
    wait_fraction: float = 0.25  # the backlog counts requests that waited >= this * SLO_TTFT

    def __post_init__(self) -> None:
        check_knobs("predictive", self, (
            ("cadence", whole_number(self.cadence) and self.cadence >= 1, "an integer >= 1"),
            ("window_s", _positive(self.window_s), "a finite number > 0"),
            ("kv_watermark", _fraction(self.kv_watermark), "a number in [0, 1)"),
            ("tpot_margin", _positive(self.tpot_margin), "a finite number > 0"),
            ("wait_fraction", _fraction(self.wait_fraction), "a number in [0, 1)")))


def _positive(value: float) -> bool:
    return finite_number(value) and value > 0


def _fraction(value: float) -> bool:
    return finite_number(value) and 0 <= value < 1


@dataclass(frozen=True, slots=True)
class GreedyConfig:
    """The knobs of ``greedy`` / ``greedy-paper`` (the artifact's values, PAPER.md): a decision
    steps the chunk down on ``shrink_*``, up on ``grow_*``, reading the ``q``-th percentile."""

    initial_tokens: int = PAPER_STEP  # start small (snapped to a candidate): light load at start
    kv_watermark: float = PAPER_KV_WATERMARK
    shrink_tpot: float = 1.08  # shrink if TPOT > 1.08 SLO ...
    shrink_ttft: float = 0.10  # ... or TTFT < 0.1 SLO (light load)
    grow_ttft: float = 0.30  # grow if TTFT > 0.3 SLO and TPOT < 0.85 SLO
    grow_tpot: float = 0.85
    q: float = 90.0  # percentile of the recent samples compared with the SLO
    signals: str = "leading"  # or "completed" (greedy-paper): dcp/greedy.py says what each reads

    def __post_init__(self) -> None:
        check_knobs("greedy", self, (
            ("initial_tokens", whole_number(self.initial_tokens) and self.initial_tokens > 0,
             "an integer > 0"),
            ("kv_watermark", _fraction(self.kv_watermark), "a number in [0, 1)"),
            ("q", finite_number(self.q) and 0.0 < self.q <= 100.0, "a percentile in (0, 100]"),
            ("signals", self.signals in SIGNALS, f"one of {', '.join(SIGNALS)}")))
        if not (self.shrink_ttft < self.grow_ttft and self.grow_tpot < self.shrink_tpot):
            raise UserError(f"greedy shrink_ttft={self.shrink_ttft!r}, grow_ttft="
                            f"{self.grow_ttft!r}, grow_tpot={self.grow_tpot!r}, shrink_tpot="
                            f"{self.shrink_tpot!r}: "
                            "expected shrink_ttft < grow_ttft and grow_tpot < shrink_tpot (else "
                            "shrink and grow overlap)")
