"""Goodput bisection for several SLO scales at once on shared runs.

For a policy that does not read the SLO, one run at rate r answers the criterion for every scale
(P90 TTFT and TPOT against 2000·s and 200·s ms). Every evaluated rate therefore updates every
scale's (pass, fail) bracket; each round proposes the next rate per unfinished scale — doubling
until a failure is seen, then the midpoint — and evaluates the distinct proposals together (in
parallel). With one scale this is the same search as ``ppsched.metrics.goodput_search``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ppsched.metrics import GoodputResult
from ppsched.metrics.goodput import GROWTH

# evaluate(rates) -> for each rate, {scale: criterion met}
BatchEvaluate = Callable[[Sequence[float]], Sequence[dict[float, bool]]]


def _round(rate: float) -> float:
    return float(f"{rate:.6g}")  # equal proposals from different scales become one run


def joint_search(evaluate: BatchEvaluate, scales: Sequence[float], *, lo: float, hi: float,
                 rel_tol: float, max_steps: int) -> dict[float, GoodputResult]:
    """Per scale: the highest passing rate (0 if ``lo`` fails), every rate tried, the bracket.

    Monotone criterion assumed; a pass above a known failure is ignored (conservative).
    ``max_steps`` bounds the rounds after the first, so each scale sees at most that many
    rates of its own choosing."""
    seen: dict[float, dict[float, bool]] = {}
    order: list[float] = []

    def run(rates: Sequence[float]) -> None:
        fresh = [r for r in dict.fromkeys(_round(r) for r in rates) if r not in seen]
        for rate, oks in zip(fresh, evaluate(fresh), strict=True):
            seen[rate] = dict(oks)
            order.append(rate)

    def bracket(scale: float) -> tuple[float, float]:
        fails = [r for r in order if not seen[r][scale]]
        fail = min(fails, default=math.inf)
        passed = max((r for r in order if seen[r][scale] and r < fail), default=0.0)
        return passed, fail

    def proposal(scale: float) -> float | None:
        passed, fail = bracket(scale)
        if passed == 0.0:
            return None  # lo failed: goodput 0
        if math.isinf(fail):
            return max(hi, passed * GROWTH) if passed < hi else passed * GROWTH
        return 0.5 * (passed + fail) if fail - passed > rel_tol * fail else None

    run([lo])
    for _ in range(max_steps - 1):
        wanted = [p for s in scales if (p := proposal(s)) is not None]
        if not wanted:
            break
        run(wanted)
    out = {}
    for scale in scales:
        passed, fail = bracket(scale)
        tried = tuple((r, seen[r][scale]) for r in order)
        out[scale] = GoodputResult(passed, tried, (passed, fail if passed else lo))
    return out
