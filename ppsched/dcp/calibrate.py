"""Online residual correction of stage predictions, per GEMM tile of batched tokens.

Why: the SLO rule (``rule_slo``) compares stage times across budgets that sit on different tiles
of a staircase (stage time jumps every 128 batched tokens), and ALP's linear-plus-correction form
misses a fixed per-stage offset (bench/dcp.md, item 3): early on it predicts 11 ms for a
40-decode stage that takes 19 ms, which makes small budgets look twice as productive as they are.
Each measured stage teaches the residual (measured - predicted) of its tile; a prediction is then
shifted by its tile's residual, or by the mean residual over all tiles until its own has data.
"""

from __future__ import annotations

from ppsched.core.batch import BatchShape

TILE = 128  # tokens per GEMM tile step of the staircase (the candidate grid's step)


class TileResidual:
    """Exponentially weighted residual per tile; ``weight`` = the newest sample's share."""

    def __init__(self, tiles: int = 32, weight: float = 1.0 / 32) -> None:
        if tiles < 1 or not 0 < weight <= 1:
            raise ValueError(f"tiles={tiles}, weight={weight}: expected >= 1 and in (0, 1]")
        self.weight = weight
        self._res = [0.0] * (tiles + 1)
        self._seen = [False] * (tiles + 1)
        self._all = 0.0
        self._any = False

    def _tile(self, shape: BatchShape) -> int:
        return min(-(-shape.batched_tokens // TILE), len(self._res) - 1)

    def update(self, shape: BatchShape, predicted_ms: float, measured_ms: float) -> None:
        r = measured_ms - predicted_ms
        w = self.weight
        t = self._tile(shape)
        self._res[t] = r if not self._seen[t] else self._res[t] + w * (r - self._res[t])
        self._seen[t] = True
        self._all = r if not self._any else self._all + w * (r - self._all)
        self._any = True

    def correct(self, shape: BatchShape, predicted_ms: float) -> float:
        t = self._tile(shape)
        if self._seen[t]:
            return predicted_ms + self._res[t]
        return predicted_ms + self._all if self._any else predicted_ms
