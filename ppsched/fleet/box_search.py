"""The least number of boxes that passes, searched from a lower bound.

One box's goodput g1 bounds a fleet from below for a random router (each box then sees a Poisson
share of the rate): N0 = ceil(rate / g1). A router that balances load can do better than N0, and
imbalance, stale load or lost cache locality worse, so the search checks both sides: from N0 down
while it passes, else up (N0+1, N0+2, N0+4, ...) to the first pass, then bisects the gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ppsched.core.errors import UserError


@dataclass(frozen=True, slots=True)
class BoxSearch:
    """boxes: the least passing count (0: none up to ``max_boxes``); tried: (boxes, passed)
    in the order evaluated."""

    boxes: int
    lower_bound: int
    tried: tuple[tuple[int, bool], ...]


def lower_bound(rate: float, box_goodput: float) -> int:
    """ceil(rate / one box's goodput), at least 1; 0 when one box sustains no rate."""
    if box_goodput <= 0:
        return 0
    return max(1, math.ceil(rate / box_goodput - 1e-9))


def least_boxes(passes: Callable[[int], bool], start: int, max_boxes: int) -> BoxSearch:
    if not (isinstance(start, int) and 1 <= start <= max_boxes):
        raise UserError(f"box search start {start!r}: expected an integer in [1, {max_boxes}] "
                        "(--max-boxes)")
    tried: list[tuple[int, bool]] = []

    def check(n: int) -> bool:
        ok = bool(passes(n))
        tried.append((n, ok))
        return ok

    if check(start):
        n = start
        while n > 1 and check(n - 1):
            n -= 1
        return BoxSearch(n, start, tuple(tried))
    failed, step = start, 1
    while True:
        n = min(failed + step, max_boxes)
        if check(n):
            break
        if n == max_boxes:
            return BoxSearch(0, start, tuple(tried))
        failed, step = n, step * 2
    passed = n
    while passed - failed > 1:
        mid = (passed + failed) // 2
        if check(mid):
            passed = mid
        else:
            failed = mid
    return BoxSearch(passed, start, tuple(tried))
