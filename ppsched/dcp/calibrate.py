"""Online residual correction of stage predictions, per GEMM tile of batched tokens.

Why: the SLO rule (``rule_slo``) compares stage times across budgets that sit on different tiles
of a staircase (stage time jumps every 128 batched tokens), and ALP's linear-plus-correction form
misses a fixed per-stage offset (bench/dcp.md, item 3): early on it predicts 11 ms for a
40-decode stage that takes 19 ms, which makes small budgets look twice as productive as they are.
Each measured stage teaches the residual (measured - predicted) of its tile; a prediction is then
shifted by its tile's residual, or by the mean residual over all tiles until its own has data.
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.core.batch import BatchShape
from ppsched.dcp.candidate_costs import CandidateCosts

TILE = 128  # tokens per GEMM tile step of the staircase (the candidate grid's step)


class TileResidual:
    """Exponentially weighted residual per tile; ``weight`` = the newest sample's share.

    A tile's residual corrects the predictor as it was when the tile last ran; the predictor
    keeps learning, so a residual not refreshed fades with the predictor's own forgetting
    (``forgetting``: ALP's lambda; shifted by r * lambda^age, age = stages measured since) and,
    older than one forgetting window (1 / (1 - lambda) stages), the tile counts as not measured.
    Measured: a +19 ms residual taught by one 256-token stage during the first iterations, while
    ALP's device scale was still far off (a x0.1 profile), priced every later 256-token chunk at
    45 ms against ~24 -- for the whole run, since the rule then never ran one again."""

    def __init__(self, tiles: int = 32, weight: float = 1.0 / 32,
                 forgetting: float = 0.9975) -> None:
        if tiles < 1 or not 0 < weight <= 1 or not 0 < forgetting < 1:
            raise ValueError(f"tiles={tiles}, weight={weight}, forgetting={forgetting}: expected "
                             ">= 1, in (0, 1] and in (0, 1)")
        self.weight = weight
        self.forgetting = forgetting
        self.window = 1.0 / (1.0 - forgetting)
        self._res = [0.0] * (tiles + 1)
        self._seen = [False] * (tiles + 1)
        self._last = [0] * (tiles + 1)  # the stage count when each tile last ran
        self._stages = 0
        self._all = 0.0
        self._any = False

    def tile(self, batched_tokens: int) -> int:
        """The tile a microbatch of ``batched_tokens`` falls in (the last one holds the rest)."""
        return min(-(-batched_tokens // TILE), len(self._res) - 1)

    def measured(self, tile: int) -> bool:
        """Whether a stage of this tile ran within the last forgetting window."""
        return 0 <= tile < len(self._seen) and self._seen[tile] and \
            self._stages - self._last[tile] <= self.window

    def update(self, shape: BatchShape, predicted_ms: float, measured_ms: float) -> None:
        r = measured_ms - predicted_ms
        w = self.weight
        t = self.tile(shape.batched_tokens)
        self._stages += 1
        if self.measured(t):
            faded = self._res[t] * self.forgetting ** (self._stages - self._last[t])
            self._res[t] = faded + w * (r - faded)
        else:
            self._res[t] = r
        self._seen[t] = True
        self._last[t] = self._stages
        self._all = r if not self._any else self._all + w * (r - self._all)
        self._any = True

    def correct(self, shape: BatchShape, predicted_ms: float) -> float:
        return self.correct_scan((shape.batched_tokens,), [predicted_ms])[0]

    def correct_scan(self, batched_tokens: Sequence[int], predicted_ms: list[float]
                     ) -> list[float]:
        """Each prediction shifted by its tile's residual (the batches' batched tokens, as
        ``candidate_costs.predict_costs`` passes them): one loop with the state bound once."""
        res, seen, last = self._res, self._seen, self._last
        top = len(res) - 1
        stages, window, forgetting = self._stages, self.window, self.forgetting
        fallback = self._all if self._any else 0.0
        out = []
        for tokens, ms in zip(batched_tokens, predicted_ms, strict=True):
            t = -(-tokens // TILE)  # tile(), inlined: hot
            if t > top:
                t = top
            if seen[t] and stages - last[t] <= window:
                out.append(ms + res[t] * forgetting ** (stages - last[t]))
            else:
                out.append(ms + fallback)
        return out


def explore_above(residual: TileResidual, costs: CandidateCosts, chosen: int, decodes: int
                  ) -> CandidateCosts | None:
    """Optimism where nothing was measured, next to the choice only: the candidate right above
    the chosen one, when its tile has not run within the forgetting window and the chosen one's
    has, priced at the chosen one's stage; None when there is nothing to explore there.

    Why: past the sizes it has run, ALP extrapolates, and narrow data cannot tell a level from
    an offset; trained on 128-token mixed microbatches it over-predicts 256-token ones by
    18-37% (the right profile, x0.1, x10; bench/predictor.md). A rule that never picks an
    over-predicted size never measures it, and the tile residual that would correct it never
    learns: predictive stayed at 128 for a whole run where 256 was right (x0.1 profile, SLO 0.6,
    goodput -44%). A larger microbatch is never faster, so the measured stage below is the
    candidate's lower bound: the rule tries it once, and from then on its own measured residual
    prices it. Only the chosen size's neighbour: priced this way above every measured tile, each
    tile that expired was tried in turn up the whole ladder (512, 640, ... 1152 beside a steady
    384 took 10% of the batch phase's decisions on chat-batch 14B and cost its P90 TTFT 190 ms,
    bench/dcp.md session 11), while climbing from the choice reaches the right size all the
    same. ``decodes``: the decodes riding in each candidate's microbatch (its batched tokens are
    its prefill tokens plus these)."""
    above = chosen + 1
    if above >= len(costs.prefill):
        return None
    stage = costs.stage_ms
    if stage[above] <= stage[chosen] or not residual.measured(
            residual.tile(costs.prefill[chosen] + decodes)) or residual.measured(
            residual.tile(costs.prefill[above] + decodes)):
        return None
    explored = list(stage)
    explored[above] = stage[chosen]
    return CandidateCosts(costs.candidates, costs.prefill, tuple(explored), costs.decode_ms)
