"""Decision log (JSONL, one file shared by all ranks) and counters (Prometheus when available).

Every record carries ``t`` (unix s), ``rank`` and ``kind``; see docs/SGLANG_PLUGIN.md for kinds.
Lines are written with one ``os.write`` on an ``O_APPEND`` descriptor so ranks do not interleave.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time

from ppsched.sglang_patch.metrics import PluginMetrics

logger = logging.getLogger("ppsched.sglang_patch")


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class DecisionLog:
    """JSONL records plus the counters; the file is opened here, so a bad path fails at start-up
    (inside the caller's guard), never mid-run."""

    def __init__(self, path: str | None, rank: int, metrics: PluginMetrics | None = None) -> None:
        self.rank = rank
        self.metrics = metrics or PluginMetrics(rank)
        self.counts = self.metrics.counts
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
        self._broken = False

    def count(self, name: str, n: int = 1) -> None:
        self.metrics.count(name, n)

    def write(self, kind: str, **fields) -> None:
        if self._fd is None or self._broken:
            return
        record = {"t": round(time.time(), 6), "rank": self.rank, "kind": kind, **fields}
        try:
            os.write(self._fd, (json.dumps(_clean(record), allow_nan=False) + "\n").encode())
        except (OSError, TypeError, ValueError) as exc:
            self._broken = True  # a full disk must not stop serving
            logger.error("ppsched: decision log write failed, logging stops: %s", exc)
