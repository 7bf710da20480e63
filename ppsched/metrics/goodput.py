"""Goodput search: the highest request rate at which a monotone pass/fail criterion still holds."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ppsched.core.errors import UserError

GROWTH = 2.0  # hi grows geometrically by this factor while it still passes


@dataclass(frozen=True)
class GoodputResult:
    """goodput_rps: highest rate seen to pass (0 if `lo` failed). tried: every (rate, ok) in the
    order evaluated. bracket: (highest pass, lowest fail); the fail is inf if none was found."""

    goodput_rps: float
    tried: tuple[tuple[float, bool], ...]
    bracket: tuple[float, float]

    def __post_init__(self) -> None:
        if self.goodput_rps < 0 or not self.tried:
            raise ValueError(f"goodput {self.goodput_rps} with {len(self.tried)} rates tried")


def goodput_search(evaluate: Callable[[float], bool], *, lo: float, hi: float,
                   rel_tol: float = 0.05, max_steps: int = 12) -> GoodputResult:
    """Find the largest rate r with evaluate(r) True, assuming evaluate is monotone (passes below
    some rate, fails above). Checks lo, then hi; while hi passes, raises it by GROWTH; then bisects
    (pass, fail) until the gap is <= rel_tol * fail rate. At most max_steps evaluations in all."""
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise UserError(f"goodput search range lo={lo!r}, hi={hi!r}: expected 0 < lo < hi")
    if not (0 < rel_tol < 1):
        raise UserError(f"goodput rel_tol={rel_tol!r}: expected a number in (0, 1)")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise UserError(f"goodput max_steps={max_steps!r}: expected a whole number >= 1")
    tried: list[tuple[float, bool]] = []

    def check(rate: float) -> bool:
        ok = bool(evaluate(rate))
        tried.append((rate, ok))
        return ok

    if not check(lo):
        return GoodputResult(0.0, tuple(tried), (0.0, lo))
    passed, failed = lo, math.inf
    rate = hi
    while len(tried) < max_steps:
        if check(rate):
            passed = rate
            rate *= GROWTH
        else:
            failed = rate
            break
    while math.isfinite(failed) and len(tried) < max_steps \
            and failed - passed > rel_tol * failed:
        mid = 0.5 * (passed + failed)
        if check(mid):
            passed = mid
        else:
            failed = mid
    return GoodputResult(passed, tuple(tried), (passed, failed))
