"""The staircase of efficient decode batch sizes, and the sizes DS aims a slot at.

Decode cost is flat inside a step and jumps right after a boundary (128, 256, 384 … on A100), so
a batch just above a boundary pays for a whole extra step. ``unit(b)`` is the width of the step
that ends at ``b``; the suppression band is a fraction of it.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BoundaryLadder:
    """Sorted, distinct, positive efficient batch sizes and the suppression band fraction."""

    boundaries: tuple[int, ...]
    band_fraction: float = 0.4  # artifact: only trim when the excess is < 0.4 of the unit

    def __post_init__(self) -> None:
        if not self.boundaries:
            raise ValueError("boundaries=(): expected at least one efficient batch size")
        if any(not isinstance(b, int) or b <= 0 for b in self.boundaries):
            raise ValueError(f"boundaries={self.boundaries}: expected positive ints")
        if any(a >= b for a, b in zip(self.boundaries, self.boundaries[1:], strict=False)):
            raise ValueError(f"boundaries={self.boundaries}: expected strictly increasing")
        if not (0.0 < self.band_fraction < 1.0):
            raise ValueError(f"band_fraction={self.band_fraction}: expected in (0, 1)")

    def unit(self, index: int) -> int:
        """Width of the step ending at boundaries[index]."""
        prev = self.boundaries[index - 1] if index > 0 else 0
        return self.boundaries[index] - prev

    def band(self, index: int) -> float:
        return self.band_fraction * self.unit(index)

    def floor_index(self, size: float) -> int:
        """Index of the largest boundary strictly below ``size`` (-1 if none)."""
        return bisect_left(self.boundaries, size) - 1

    def just_above(self, size: float) -> int | None:
        """The boundary that ``size`` exceeds by a small excess (within the band), else None."""
        i = self.floor_index(size)
        if i < 0:
            return None
        b = self.boundaries[i]
        return b if size - b <= self.band(i) else None

    def efficient_size(self, size: float) -> int:
        """The size a slot of ``size`` requests should run: the boundary it barely exceeds, else
        the next boundary at or above it (same cost step), else ``ceil(size)`` past the ladder."""
        below = self.just_above(size)
        if below is not None:
            return below
        j = bisect_right(self.boundaries, math.ceil(size) - 1)
        if j < len(self.boundaries):
            return self.boundaries[j]
        return math.ceil(size)
