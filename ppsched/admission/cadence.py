"""The TPOT decoding requests get right now, from the cadence of recent microbatches.

A decoding request gains one token each time its slot runs a batch that carries decodes. Over
the last ``window`` stage-0 measurements spanning ``span`` seconds, with ``n`` of them carrying
decodes, each of the ``slots`` slots ran about n / slots decode turns: the current mean gap
between tokens is span x slots / n. Unlike the TPOT of finished requests it has no lag of a
request lifetime: it rises as soon as prefill batches start displacing decode turns.
"""

from __future__ import annotations

from collections import deque

from ppsched.core.snapshots import StageMeasurement


class DecodeCadence:
    def __init__(self, window: int = 64, stale_s: float = 1.0) -> None:
        if window < 2:
            raise ValueError(f"window={window}: expected >= 2 measurements")
        self.stale_s = stale_s
        self._seen: deque[tuple[float, bool]] = deque(maxlen=window)
        self._decodes = 0  # entries of _seen that carried decodes

    def observe(self, m: StageMeasurement) -> None:
        if m.stage != 0:
            return
        if len(self._seen) == self._seen.maxlen and self._seen[0][1]:
            self._decodes -= 1
        carries = m.shape.decode_count > 0
        self._seen.append((m.now_s, carries))
        self._decodes += carries

    def tpot_ms(self, now_s: float, slots: int) -> float | None:
        """Current mean inter-token gap in ms; None with too little recent decoding."""
        seen = self._seen
        if len(seen) < 2 or now_s - seen[-1][0] > self.stale_s:
            return None
        turns = self._decodes - seen[0][1]  # intervals: the first entry only opens the span
        if turns < 1:
            return None
        return 1000.0 * (seen[-1][0] - seen[0][0]) * slots / turns
