"""Stop a run once its goodput verdict is decided: the P90 TTFT criterion has certainly failed.

The criterion (``steady.verdict``, ``summary.percentile_with_misses``) takes the P90 of the
measured requests' TTFTs, sorted, interpolating between positions lo = floor(0.9 (n - 1)) and
lo + 1. Once at least n - lo of the n measured requests are certainly late, the value at lo is
late, so the P90 is above the SLO whatever happens next. A request is certainly late when it was
rejected, when its first token came after the SLO, or when the SLO has passed with no first token
(its TTFT can only grow). The engine keeps its requests in arrival order, so ``LateCount``
examines each one once, when its deadline passes: one comparison per engine turn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ppsched.core.errors import UserError
from ppsched.metrics.summary import GOODPUT_PERCENTILE


class Waiting(Protocol):
    """What the count reads of an engine's request (the simulator's ``Req``)."""

    arrival_s: float
    first_s: float  # NaN until the first token
    rejected: bool


@dataclass(frozen=True, slots=True)
class StopRule:
    """Stop when the P90 TTFT of the requests arriving in [measure_from_s, measure_to_s) after
    the first arrival has certainly failed ``ttft_ms``. A run scored at several SLOs stops on
    the loosest: failing it fails every tighter one."""

    ttft_ms: float
    measure_from_s: float = 0.0
    measure_to_s: float = math.inf

    def __post_init__(self) -> None:
        if not (isinstance(self.ttft_ms, (int, float)) and math.isfinite(self.ttft_ms)
                and self.ttft_ms > 0):
            raise UserError(f"early stop ttft_ms={self.ttft_ms!r}: expected a TTFT SLO in ms > 0")
        if not (isinstance(self.measure_from_s, (int, float))
                and math.isfinite(self.measure_from_s) and self.measure_from_s >= 0):
            raise UserError(f"early stop measure_from_s={self.measure_from_s!r}: expected "
                            "seconds >= 0")
        if not (isinstance(self.measure_to_s, (int, float))
                and self.measure_to_s > self.measure_from_s):
            raise UserError(f"early stop measure_to_s={self.measure_to_s!r}: expected seconds "
                            f"> measure_from_s={self.measure_from_s!r}")

    def to_dict(self) -> dict:
        to = self.measure_to_s if math.isfinite(self.measure_to_s) else None
        return {"ttft_ms": self.ttft_ms, "measure_from_s": self.measure_from_s,
                "measure_to_s": to}

    def counter(self, arrivals: Sequence[float]) -> LateCount:
        """A fresh count for one run whose requests arrive at ``arrivals`` (all of them)."""
        return LateCount(self, arrivals)


def late_needed(measured: int) -> int:
    """Certainly-late requests that decide a failed P90 over ``measured`` requests (the same
    arithmetic as ``percentile_with_misses``); 0 when nothing is measured (never decided)."""
    if measured <= 0:
        return 0
    return measured - math.floor(GOODPUT_PERCENTILE / 100.0 * (measured - 1))


class LateCount:
    """The running count one run keeps (mutable; the engine calls ``decided`` every turn)."""

    __slots__ = ("rule", "start", "measured", "needed", "late", "next", "stopped_at_s")

    def __init__(self, rule: StopRule, arrivals: Sequence[float]) -> None:
        self.rule = rule
        self.start = min(arrivals) if len(arrivals) else 0.0
        self.measured = sum(1 for a in arrivals
                            if rule.measure_from_s <= a - self.start < rule.measure_to_s)
        self.needed = late_needed(self.measured)
        self.late = 0
        self.next = 0  # the first request (in arrival order) whose deadline has not passed
        self.stopped_at_s = math.nan

    def decided(self, reqs: Sequence[Waiting], now: float) -> bool:
        """True once the verdict has failed; ``reqs`` in arrival order, ``now`` never earlier
        than any first token already given (so a request without one gets it at >= now)."""
        i, ttft_ms = self.next, self.rule.ttft_ms
        while i < len(reqs) and (now - reqs[i].arrival_s) * 1000.0 > ttft_ms:
            req = reqs[i]
            i += 1
            if not self.rule.measure_from_s <= req.arrival_s - self.start < self.rule.measure_to_s:
                continue
            # NaN (no first token yet) compares False: late, like a rejection
            if req.rejected or not (req.first_s - req.arrival_s) * 1000.0 <= ttft_ms:
                self.late += 1
        self.next = i
        if self.needed and self.late >= self.needed:
            self.stopped_at_s = now
            return True
        return False

    @property
    def reason(self) -> str:
        if math.isnan(self.stopped_at_s):
            return ""
        return (f"{self.late} of {self.measured} measured requests certainly past the "
                f"{self.rule.ttft_ms:g} ms TTFT SLO at t={self.stopped_at_s - self.start:.1f} s "
                f"(P90 fails from {self.needed})")
