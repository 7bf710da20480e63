"""A profile's linear-layer term as one compiled object: ALP prices every batch it sees and every
candidate it scans with it, so it is compiled with ALP (``make native``) while the profile
itself (a frozen dataclass with derived tables) stays plain Python."""

from __future__ import annotations

from bisect import bisect_left


class LinearTerm:
    """``LinearProfile.linear_ms(tokens)`` for the profile's own variant, operation for
    operation (the same bands, the same line beyond them)."""

    def __init__(self, alpha0: float, alpha1: float, uppers: tuple[int, ...],
                 levels: tuple[float, ...], staircase: bool) -> None:
        self.alpha0 = float(alpha0)
        self.alpha1 = float(alpha1)
        self.uppers = list(uppers)
        self.levels = [float(ms) for ms in levels]
        self.staircase = staircase
        self.top = uppers[-1] if uppers else 0

    def ms(self, tokens: int) -> float:
        """Linear-layer time of one stage for ``tokens`` batched tokens (0 tokens: 0 ms)."""
        if tokens <= 0:
            return 0.0
        if self.staircase and tokens <= self.top:
            return self.levels[bisect_left(self.uppers, tokens)]
        return self.alpha0 * tokens + self.alpha1
