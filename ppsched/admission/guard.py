"""The TPOT guard: stop admitting while recently finished requests already miss the TPOT SLO.

The TTFT prediction sees only the wait for the first token. An SGLang-style engine gives prefill
priority, so every admitted prompt also pauses the decodes of the slot it lands in; that shows
up in the TPOT of recently finished requests. The guard fires when their percentile (the goodput
criterion's P90 by default) is above the SLO. Samples that have not changed for ``stale_s`` are
ignored: a guard must never lock the door for good on old news.

A TTFT guard on recent first tokens was tried and dropped: while it rejects, no new first tokens
arrive, so its window of samples flushes only slowly and it kept rejecting after the queue had
drained (on 10x overload of azure-conv it cost a quarter of the goodput).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of a non-empty sequence (plain Python: <= 64 samples)."""
    ordered = sorted(values)
    pos = q / 100.0 * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class SampleGuard:
    def __init__(self, q: float, min_samples: int, stale_s: float) -> None:
        if not 0 < q <= 100:
            raise ValueError(f"guard percentile {q}: expected in (0, 100]")
        self.q, self.min_samples, self.stale_s = q, min_samples, stale_s
        self._seen: tuple[float, ...] = ()
        self._changed_s = -math.inf

    def level(self, now_s: float, samples: tuple[float, ...]) -> float | None:
        """The samples' percentile, or None if too few or stale."""
        if samples != self._seen:
            self._seen, self._changed_s = samples, now_s
        if now_s - self._changed_s > self.stale_s:
            return None
        finite = [v for v in samples if math.isfinite(v)]
        if len(finite) < max(1, self.min_samples):
            return None
        return percentile(finite, self.q)
