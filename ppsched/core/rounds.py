"""The pipeline round: how long a decoding request waits for each output token. One quantity,
read three ways, each by the policy whose question it answers:

- ``round_bounds``: from stage-0 latencies alone, a round of pp microbatches lasts at least the
  sum of their stage times and pp times the slowest. ``greedy``'s leading TPOT (its P90): the
  baseline's own signal, kept as it is.
- ``RoundMeter``: measured between two launches of a slot. Rank 0 also spends its scheduler time
  before each launch and waits for each result to come back over the link, and none of that is
  in a stage time (about 11 ms of a 70 ms piece-free round on qwen2.5-32b PP4): the SLO rule
  prices that gap in every candidate's drain. A time-decayed mean over every slot's whole
  rounds, decoding at both ends (a round with a missing launch, or an idle gap ended by new
  work, is skipped). The rule on either other reading lost goodput over the controller table
  (docs/DESIGN_DECISIONS.md, "One round estimator for the SLO rule").
- ``DecodeCadence``: the mean gap between a decoding request's tokens over the last 64 stage-0
  microbatches, a slot's turn taken by a prefill-only batch included: admission's guard, which
  runs with every controller and in SGLang's default loop, where prefill displaces decodes.

``kv_round_ms``: the round at which the decoding requests would fill the KV cache (the SLO
rule's KV ceiling): the meter's, or pp times the mean stage-0 time until it has measured one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from ppsched.core.snapshots import ChunkSnapshot, Launch, StageMeasurement


def round_bounds(stage_ms: Sequence[float], pp_size: int) -> list[float]:
    """Lower bounds of the recent rounds (newest first) from stage-0 latencies: disjoint windows
    of ``pp_size``, each at least their sum (stage 0 runs them one after another) and
    ``pp_size`` times the slowest (it must cross every stage before its next token); a partial
    window is dropped. On a greedy replay it tracks the measured per-slot round with
    correlation 0.95 (the plain sum: 0.88)."""
    n = len(stage_ms)
    out = []
    for end in range(n, pp_size - 1, -pp_size):
        w = stage_ms[end - pp_size:end]
        out.append(max(sum(w), pp_size * max(w)))
    return out


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
    nothing is known (no round, no KV in use). The round is the measured one (``RoundMeter``),
    else, until a whole round has been measured, pp times the mean recent stage-0 time."""
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


class DecodeCadence:
    """A decoding request's current mean gap between tokens. A decoding request gains one token
    each time its slot runs a batch that carries decodes: over the last ``window`` stage-0
    measurements spanning ``span`` seconds, with ``n`` of them carrying decodes from ``k``
    distinct slots, each of those slots ran about n / k decode turns, so the gap is span x k / n.
    (Slots without decodes launch nothing, so k, not the pipeline depth, divides the turns.) No
    lag of a request lifetime, as finished requests' TPOT has: it rises as soon as prefill
    batches start displacing decode turns."""

    def __init__(self, window: int = 64, stale_s: float = 1.0) -> None:
        if window < 2:
            raise ValueError(f"window={window}: expected >= 2 measurements")
        self.stale_s = stale_s
        self._seen: deque[tuple[float, int]] = deque(maxlen=window)  # (time, slot or -1)

    def observe(self, m: StageMeasurement) -> None:
        if m.stage == 0:
            self._seen.append((m.now_s, m.slot if m.shape.decode_count > 0 else -1))

    def tpot_ms(self, now_s: float) -> float | None:
        """Current mean inter-token gap in ms; None with too little recent decoding."""
        seen = self._seen
        if len(seen) < 2 or now_s - seen[-1][0] > self.stale_s:
            return None
        # intervals: the first entry only opens the span
        slots = [slot for _, slot in list(seen)[1:] if slot >= 0]
        if not slots:
            return None
        return 1000.0 * (seen[-1][0] - seen[0][0]) * len(set(slots)) / len(slots)
