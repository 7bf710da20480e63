"""A profile's linear-layer term, one variant of it: the bands of the staircase (a token count is
rounded up to its band), the line beyond them, or the line alone. ``LinearProfile.linear_ms``
answers through it, and ALP prices every batch it sees and every candidate it scans with it, so
it is compiled with ALP (``make native``) while the profile itself (a frozen dataclass) stays
plain Python."""

from __future__ import annotations

from bisect import bisect_left


class LinearTerm:
    """One variant of a profile's term (``staircase``: the bands, then the line; else the
    line)."""

    def __init__(self, alpha0: float, alpha1: float, uppers: tuple[int, ...],
                 levels: tuple[float, ...], staircase: bool) -> None:
        self.alpha0 = float(alpha0)
        self.alpha1 = float(alpha1)
        self.uppers = list(uppers)
        self.levels = [float(ms) for ms in levels]
        self.staircase = staircase
        self.top = uppers[-1] if uppers else 0

    def __reduce__(self) -> tuple[type, tuple[float, float, tuple[int, ...], tuple[float, ...],
                                             bool]]:
        # a profile (which holds its terms) crosses processes by pickle; compiled, this class
        # has no pickling of its own
        return (LinearTerm, (self.alpha0, self.alpha1, tuple(self.uppers), tuple(self.levels),
                             self.staircase))

    def ms(self, tokens: int) -> float:
        """Linear-layer time of one stage for ``tokens`` batched tokens (0 tokens: 0 ms)."""
        if tokens <= 0:
            return 0.0
        if self.staircase and tokens <= self.top:
            return self.levels[bisect_left(self.uppers, tokens)]
        return self.alpha0 * tokens + self.alpha1
