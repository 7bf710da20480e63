"""The TPOT decoding requests get right now, from the cadence of recent microbatches.

A decoding request gains one token each time its slot runs a batch that carries decodes. Over
the last ``window`` stage-0 measurements spanning ``span`` seconds, with ``n`` of them carrying
decodes from ``k`` distinct slots, each of those slots ran about n / k decode turns: the current
mean gap between tokens is span x k / n. (Slots without decodes launch nothing, so k, not the
pipeline depth, is what divides the turns.) Unlike the TPOT of finished requests it has no lag
of a request lifetime: it rises as soon as prefill batches start displacing decode turns.
"""

from __future__ import annotations

from collections import deque

from ppsched.core.snapshots import StageMeasurement


class DecodeCadence:
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
