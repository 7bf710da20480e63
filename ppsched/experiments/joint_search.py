"""Monotone goodput search for several SLO scales at once on shared runs.

For a policy that does not read the SLO, one run at rate r answers the criterion for every scale.
Every evaluated rate therefore updates every scale's (pass, fail) bracket; each round proposes
the next rate per unfinished scale and evaluates the distinct proposals together (in parallel):
from the start rate, multiply by ``growth`` while it passes, divide while it fails (down to
``floor``: below it the goodput is 0), then bisect until the gap is within ``rel_tol`` of the
failing rate. A pass is then kept only if a rate ``backing`` below it also passes on the same
seed (probed when no tried rate shows it): near the threshold the verdict is not monotone, and an
isolated pass above failing rates is not a rate the server holds. A failing backing probe is a
failure like any other, so the search goes on below it. Every rate tried is recorded, in order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

# evaluate(rates) -> for each rate, {scale: passes}
BatchEvaluate = Callable[[Sequence[float]], Sequence[dict[float, bool]]]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """goodput_rps: highest passing rate below the lowest failing one (0 if none passed above
    ``floor``); tried: every (rate, passed) in order; bracket: (highest pass, lowest fail)."""

    goodput_rps: float
    tried: tuple[tuple[float, bool], ...]
    bracket: tuple[float, float]


@dataclass(frozen=True, slots=True)
class Measured:
    """One policy's searches at one scale: one SearchResult per seed."""

    per_seed: tuple[SearchResult, ...]

    @property
    def goodputs(self) -> tuple[float, ...]:
        return tuple(r.goodput_rps for r in self.per_seed)

    @property
    def goodput(self) -> float:
        return min(self.goodputs)  # the rate every seed sustains

    @property
    def runs(self) -> int:
        return sum(len(r.tried) for r in self.per_seed)


# search(policy_key, seed index, seed 0's goodput per scale or None, reseed) -> per scale
SeedSearch = Callable[[str, int, "dict[float, float] | None", bool], dict[float, SearchResult]]


def _round(rate: float) -> float:
    return float(f"{rate:.6g}")  # equal proposals from different scales become one run


def lowest_rung(start: float, growth: float, floor: float) -> float:
    """The last rate a search from ``start`` tries on its way down before it reports 0 (each
    step divides the failing rate by ``growth`` while the result stays >= ``floor``)."""
    rate = _round(max(floor, start))
    while rate / growth >= floor:
        rate = _round(rate / growth)
    return rate


def joint_search(evaluate: BatchEvaluate, scales: Sequence[float], *,
                 start: float | Mapping[float, float], growth: float, floor: float,
                 rel_tol: float, max_steps: int, backing: float
                 ) -> dict[float, SearchResult]:
    """Per scale: the highest backed passing rate, every rate tried, the final bracket.

    A pass above a known failure is ignored (conservative), and so is one whose rate
    ``backing`` lower fails. ``max_steps`` bounds the rounds, so each scale sees at most that
    many rates of its own (a pass still unbacked when they run out is reported as found)."""
    if not 0 < backing < 1:
        raise ValueError(f"backing={backing!r}: expected a fraction in (0, 1)")
    starts = start if isinstance(start, Mapping) else {s: start for s in scales}
    seen: dict[float, dict[float, bool]] = {}
    order: list[float] = []

    def run(rates: Sequence[float]) -> None:
        fresh = [r for r in dict.fromkeys(_round(r) for r in rates) if r not in seen]
        for rate, oks in zip(fresh, evaluate(fresh), strict=True):
            seen[rate] = dict(oks)
            order.append(rate)

    def bracket(scale: float) -> tuple[float, float]:
        fail = min((r for r in order if not seen[r][scale]), default=math.inf)
        passed = max((r for r in order if seen[r][scale] and r < fail), default=0.0)
        return passed, fail

    def backed(passed: float) -> bool:
        # every tried rate below the bracket's failure passed, so any one near enough backs it
        lowest = _round(passed * (1 - backing))
        return any(lowest <= r < passed for r in order)

    def proposal(scale: float) -> float | None:
        passed, fail = bracket(scale)
        if math.isinf(fail):
            return passed * growth
        if passed == 0.0:
            lower = fail / growth
            return lower if lower >= floor else None  # below the floor: goodput 0
        if fail - passed > rel_tol * fail:
            return 0.5 * (passed + fail)
        return None if backed(passed) else passed * (1 - backing)

    run([max(floor, starts[s]) for s in scales])
    for _ in range(max_steps - 1):
        wanted = [p for s in scales if (p := proposal(s)) is not None]
        if not wanted:
            break
        run(wanted)
    out = {}
    for scale in scales:
        passed, fail = bracket(scale)
        tried = tuple((r, seen[r][scale]) for r in order)
        out[scale] = SearchResult(passed, tried, (passed, fail))
    return out
