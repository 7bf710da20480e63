"""Online residual correction of stage predictions, per GEMM tile of batched tokens.

Why: the SLO rule (``rule_slo``) compares stage times across budgets that sit on different tiles
of a staircase (stage time jumps every 128 batched tokens), and ALP's linear-plus-correction form
misses a fixed per-stage offset (measured on the simulator): early on it predicts 11 ms for a
40-decode stage that takes 19 ms, which makes small budgets look twice as productive as they are.
Each measured stage teaches the residual (measured - predicted) of its tile; a prediction is then
shifted by its tile's residual, or by the mean residual over all tiles until its own has data.
Microbatches that carry a prefill piece and decode-only ones learn apart: in a tile they share
they miss by different amounts, and decode-only ones are most of a light load's microbatches
(measured: 32B sharegpt at 0.25 req/s, SLO 0.4, 29,146 decode-only against 2,289 with a piece;
tile 1's shared residual priced a 128-token piece at 15.9 ms against ~18 measured, and the queue's
first tokens came 16-20% later than the drain model said).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ppsched.core.batch import BatchShape
from ppsched.dcp.candidate_costs import CandidateCosts

TILE: Final = 128  # tokens per GEMM tile step of the staircase (the candidate grid's step)


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
        self._tiles = tiles + 1
        # one slot per (kind, tile): decode-only tiles first, then tiles carrying a piece
        self._res = [0.0] * (2 * self._tiles)
        self._seen = [False] * (2 * self._tiles)
        self._last = [0] * (2 * self._tiles)  # the stage count when each tile last ran
        self._stages = 0  # every kind's: the predictor forgets with every stage it learns
        self._all = [0.0, 0.0]  # mean residual per kind (decode-only, with a piece)
        self._any = [False, False]

    def tile(self, batched_tokens: int) -> int:
        """The tile a microbatch of ``batched_tokens`` falls in (the last one holds the rest)."""
        return min(-(-batched_tokens // TILE), self._tiles - 1)

    def measured(self, tile: int, prefill: bool = True) -> bool:
        """Whether a stage of this tile, with a prefill piece or decode-only, ran within the
        last forgetting window."""
        if not 0 <= tile < self._tiles:
            return False
        k = tile + self._tiles * prefill
        return self._seen[k] and self._stages - self._last[k] <= self.window

    def update(self, shape: BatchShape, predicted_ms: float, measured_ms: float) -> None:
        """Learn one measured stage (``tile`` and ``measured`` inlined, the state bound once:
        this runs on every stage measurement)."""
        r = measured_ms - predicted_ms
        w = self.weight
        kind = 1 if shape.prefill else 0
        top = self._tiles - 1
        t = -(-(shape.prefill_tokens + shape.decode_count) // TILE)  # a batch's tile
        if t > top:
            t = top
        k = t + self._tiles * kind
        res, last = self._res, self._last
        stages = self._stages
        measured = self._seen[k] and stages - last[k] <= self.window
        stages += 1
        self._stages = stages
        if measured:
            faded = res[k] * self.forgetting ** (stages - last[k])
            res[k] = faded + w * (r - faded)
        else:
            res[k] = r
        self._seen[k] = True
        last[k] = stages
        means = self._all
        means[kind] = r if not self._any[kind] else means[kind] + w * (r - means[kind])
        self._any[kind] = True

    def correct(self, shape: BatchShape, predicted_ms: float) -> float:
        return self.correct_scan((shape.batched_tokens,), [predicted_ms], (bool(shape.prefill),))[0]

    def correct_scan(self, batched_tokens: Sequence[int], predicted_ms: list[float],
                     prefill: Sequence[bool]) -> list[float]:
        """Each prediction shifted by its tile's residual, of its kind (the batches' batched
        tokens and whether each carries a prefill piece, as ``candidate_costs.predict_costs``
        passes them); a kind with no data yet borrows the other's mean. One loop with the state
        bound once."""
        res, seen, last = self._res, self._seen, self._last
        n = self._tiles
        top = n - 1
        stages, window, forgetting = self._stages, self.window, self.forgetting
        means = [self._all[k] if self._any[k] else self._all[1 - k] if self._any[1 - k] else 0.0
                 for k in (0, 1)]
        out = []
        if not len(batched_tokens) == len(predicted_ms) == len(prefill):
            raise ValueError(f"{len(batched_tokens)} batches, {len(predicted_ms)} predictions, "
                             f"{len(prefill)} prefill flags: expected one of each per batch")
        for i in range(len(predicted_ms)):  # indexed: a compiled loop, where zip is generic
            tokens, ms, piece = batched_tokens[i], predicted_ms[i], prefill[i]
            t = -(-tokens // TILE)  # tile(), inlined: hot
            if t > top:
                t = top
            if piece:
                t += n
            if seen[t] and stages - last[t] <= window:
                out.append(ms + res[t] * forgetting ** (stages - last[t]))
            else:
                out.append(ms + means[piece])
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
    384 took 10% of the batch phase's decisions on chat-batch 14B and cost its P90 TTFT 190 ms:
    ``bench/bench_dcp_shifting.py --workload chat-batch``), while climbing from the choice
    reaches the right size all the same. ``decodes``: the decodes riding in each candidate's
    microbatch (its batched tokens are its prefill tokens plus these)."""
    above = chosen + 1
    if above >= len(costs.prefill):
        return None
    stage = costs.stage_ms
    if stage[above] <= stage[chosen] or not residual.measured(
            residual.tile(costs.prefill[chosen] + decodes), costs.prefill[chosen] > 0) \
            or residual.measured(residual.tile(costs.prefill[above] + decodes),
                                 costs.prefill[above] > 0):
        return None
    explored = list(stage)
    explored[above] = stage[chosen]
    return CandidateCosts(costs.candidates, costs.prefill, tuple(explored), costs.decode_ms)
