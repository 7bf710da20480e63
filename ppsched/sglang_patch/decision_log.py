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
from collections import Counter

logger = logging.getLogger("ppsched.sglang_patch")

COUNTERS = ("decisions", "chunk_applied", "held_requests", "hold_turns", "stage_measurements",
            "fallbacks", "errors", "hold_decisions", "holds_dropped", "stage_refused")


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class DecisionLog:
    def __init__(self, path: str | None, rank: int) -> None:
        self.rank = rank
        self.counts: Counter[str] = Counter()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
        self._prom = self._prometheus()
        self._broken = False

    def _prometheus(self) -> dict:
        try:
            from prometheus_client import Counter as PromCounter
        except ImportError:
            return {}
        try:
            return {name: PromCounter(f"ppsched_{name}", f"ppsched plugin: {name}", ["pp_rank"])
                    for name in COUNTERS}
        except ValueError:  # already registered in this process
            return {}

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n
        metric = self._prom.get(name)
        if metric is not None:
            metric.labels(pp_rank=str(self.rank)).inc(n)

    def write(self, kind: str, **fields) -> None:
        if self._fd is None or self._broken:
            return
        record = {"t": round(time.time(), 6), "rank": self.rank, "kind": kind, **fields}
        try:
            os.write(self._fd, (json.dumps(_clean(record), allow_nan=False) + "\n").encode())
        except (OSError, TypeError, ValueError) as exc:
            self._broken = True  # a full disk must not stop serving
            logger.error("ppsched: decision log write failed, logging stops: %s", exc)
