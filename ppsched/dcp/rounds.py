"""The measured pipeline round, from the engine's launches (``Launch``).

A slot's decodes advance once per round: the time between two launches of that slot, holding the
pp microbatches launched in between. ``pp`` times the mean stage-0 time is not that round: rank 0
also spends its scheduler time before each launch and waits for each result to come back over
the link, and none of that is in a stage time (measured on the simulator: about 11 ms of a 70 ms
piece-free round on qwen2.5-32b PP4). The meter measures the round itself: a time-decayed mean
over every slot's whole rounds, decoding at both ends (a round with a missing launch, or an idle
gap ended by new work, is skipped). ``kv_round_ms``: the round at which the decoding requests
would fill the KV cache (the SLO rule's KV ceiling).
"""

from __future__ import annotations

import math

from ppsched.core.snapshots import ChunkSnapshot, Launch


class RoundMeter:
    """Mean round (ms) of decoding slots over the last ``horizon_s`` seconds (exponential)."""

    def __init__(self, pp: int, horizon_s: float) -> None:
        if pp < 1 or not horizon_s > 0:
            raise ValueError(f"pp={pp}, horizon_s={horizon_s}: expected >= 1 and > 0")
        self.pp = pp
        self.horizon_s = horizon_s
        self._count = 0  # launches so far
        self._last: list[tuple[float, int, bool] | None] = [None] * pp  # (t, count, decoded)
        self._now: float | None = None
        self._sum = 0.0
        self._weight = 0.0

    def launch(self, launch: Launch) -> None:
        slot = launch.slot
        pp = self.pp
        if not 0 <= slot < pp:
            raise ValueError(f"slot={slot}: expected 0..{pp - 1}")
        last = self._last
        prev = last[slot]
        now = launch.now_s
        decoded = launch.decode_reqs > 0
        count = self._count
        # a whole round of a slot decoding at both ends (its decodes waited for it; not an idle
        # gap before new work): exactly pp launches since its previous one
        if prev is not None and prev[2] and decoded and count - prev[1] == pp \
                and now >= prev[0]:
            self._add(1000.0 * (now - prev[0]), now)
        last[slot] = (now, count, decoded)
        self._count = count + 1

    def _add(self, round_ms: float, now: float) -> None:
        if self._now is None:
            self._now = now
        elif now > self._now:
            f = math.exp(-(now - self._now) / self.horizon_s)
            self._sum *= f
            self._weight *= f
            self._now = now
        self._sum += round_ms
        self._weight += 1.0

    @property
    def mean_round_ms(self) -> float | None:
        return self._sum / self._weight if self._weight > 0 else None


def kv_round_ms(snap: ChunkSnapshot, pp: int, measured_round_ms: float | None = None) -> float:
    """The mean round (ms) at which the decoding requests would fill the KV cache; inf when
    nothing is known (no round, no KV in use). The round is the measured one when the engine
    reports launches (``RoundMeter``), else pp times the mean recent stage-0 time."""
    stages = snap.recent_stage_ms
    used = snap.kv_total_tokens - snap.kv_free_tokens
    if used <= 0 or snap.kv_total_tokens <= 0:
        return math.inf
    if measured_round_ms is not None:
        round_ms = measured_round_ms
    elif stages:
        round_ms = pp * sum(stages, 0.0) / len(stages)  # start 0.0: the sum 0 gives, typed float
    else:
        return math.inf
    return round_ms * snap.kv_total_tokens / used
