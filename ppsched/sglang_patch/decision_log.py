"""Decision log (JSONL, one file shared by all ranks) and counters (Prometheus when available).

Every record carries ``t`` (unix s), ``rank`` and ``kind``; see docs/SGLANG_PLUGIN.md for kinds.
A writer thread appends buffered lines every 50 ms, each batch with one ``os.write`` on an
``O_APPEND`` descriptor so ranks do not interleave, and publishes the counters to Prometheus.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import threading
import time
from collections import deque

from ppsched.sglang_patch.metrics import PluginMetrics

logger = logging.getLogger("ppsched.sglang_patch")


_ENCODE = json.JSONEncoder(allow_nan=False).encode  # json.dumps with options builds one a call


def _line(record: dict) -> str:
    """The record's JSON, NaN/inf as null. Records rarely carry one: the walk that replaces
    them runs only when the encoder refuses a record."""
    try:
        return _ENCODE(record)
    except ValueError:
        return _ENCODE(_clean(record))


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class DecisionLog:
    """JSONL records plus the counters. The file is opened here, so a bad path fails at start-up
    (inside the caller's guard), never mid-run. ``write`` only appends the record to a buffer (no
    thread wake-up, ~0.1 us); a writer thread serializes and appends the buffer every
    ``FLUSH_EVERY_S``, off the scheduler's critical path. ``flush`` writes what is buffered now
    (it also runs at exit). Counters reach Prometheus the same way (``PluginMetrics.publish``).
    ``busy_s``: CPU seconds the flushes took (the writer's work: off the turn, in this process).
    The writer releases the GIL every ``YIELD_EVERY`` records so it never holds the scheduler
    thread up for long."""

    FLUSH_EVERY_S = 0.05
    # Records serialized between GIL releases: the writer holds the GIL while it works, so a
    # flush of 50 ms of records in one go would stall the scheduler thread for milliseconds.
    YIELD_EVERY = 16

    def __init__(self, path: str | None, rank: int, metrics: PluginMetrics | None = None) -> None:
        self.rank = rank
        self.metrics = metrics or PluginMetrics(rank)
        self.counts = self.metrics.counts
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
        self._broken = False
        self._buffer: deque = deque()
        self._lock = threading.Lock()  # one writer at a time (thread or flush)
        self.busy_s = 0.0
        if self._fd is not None or self.metrics.exported:
            threading.Thread(target=self._loop, name=f"ppsched-log-{rank}", daemon=True).start()
            atexit.register(self.flush)

    def count(self, name: str, n: int = 1) -> None:
        self.metrics.count(name, n)

    def write(self, kind: str, **fields) -> None:
        """Buffer one record (the caller must not mutate what it passes afterwards)."""
        if self._fd is None or self._broken:
            return
        self._buffer.append((time.time(), kind, fields, None))

    def write_later(self, kind: str, build, *args) -> None:
        """Buffer one record whose fields ``build(*args)`` makes in the writer thread, off the
        turn (``args`` must be immutable: frozen records, numbers, strings, tuples)."""
        if self._fd is None or self._broken:
            return
        self._buffer.append((time.time(), kind, args, build))

    def _loop(self) -> None:
        while True:
            time.sleep(self.FLUSH_EVERY_S)
            self.flush()

    def flush(self) -> None:
        """Publish the counters; serialize and append every buffered record (one ``os.write``)."""
        start = time.thread_time()
        with self._lock:
            self.metrics.publish()
            if self._fd is not None:
                self._write_buffered()
        self.busy_s += time.thread_time() - start

    def _write_buffered(self) -> None:
        lines = []
        while self._buffer:
            if len(lines) % self.YIELD_EVERY == self.YIELD_EVERY - 1:
                time.sleep(0)  # let the scheduler thread take the GIL between small batches
            t, kind, fields, build = self._buffer.popleft()
            try:
                if build is not None:
                    fields = build(*fields)
                record = {"t": round(t, 6), "rank": self.rank, "kind": kind, **fields}
                lines.append(_line(record))
            except Exception as exc:  # noqa: BLE001 - a bad record is dropped, never the log
                logger.error("ppsched: decision log record %r not serializable: %s", kind,
                             exc)
        if not lines or self._broken:
            return
        try:
            os.write(self._fd, ("\n".join(lines) + "\n").encode())
        except OSError as exc:
            self._broken = True  # a full disk must not stop serving
            logger.error("ppsched: decision log write failed, logging stops: %s", exc)
