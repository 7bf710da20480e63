"""The plugin's Prometheus series, created at start-up so a scraper sees 0, not nothing.

``ppsched_<name>_total{pp_rank}`` counters (COUNTERS) and the ``ppsched_enabled{pp_rank}`` gauge
(1: this rank applies decisions; 0: off, failed or not yet agreed). With SGLang's
``--enable-metrics`` (prometheus multiprocess mode) they appear on its ``/metrics``; the gauge
takes the minimum over a rank's TP processes. Without prometheus_client: counts stay in memory.

``count`` only adds to the in-memory ``counts`` (a dict update): an increment in multiprocess
mode takes a lock and writes an mmap (~2 us), three times per turn. ``publish`` pushes what was
counted since the last call; the decision log's writer thread calls it every 50 ms and at exit
(``DecisionLog.flush``), so ``/metrics`` trails the counts by at most that.
"""

from __future__ import annotations

from collections import Counter

COUNTERS = ("decisions", "chunk_applied", "held_requests", "hold_turns", "stage_measurements",
            "fallbacks", "errors",
            # counted by the device-timing and hold-accounting code
            "hold_decisions", "holds_dropped", "stage_refused")

_CREATED: dict[str, object] = {}  # one registration per process (re-created on a test reset)


def _prometheus() -> dict[str, object]:
    if _CREATED:
        return _CREATED
    try:
        from prometheus_client import Counter as PromCounter
        from prometheus_client import Gauge
    except ImportError:
        return {}
    try:
        for name in COUNTERS:
            _CREATED[name] = PromCounter(f"ppsched_{name}", f"ppsched plugin: {name}",
                                         ["pp_rank"])
        _CREATED["enabled"] = Gauge("ppsched_enabled", "ppsched plugin applies decisions on "
                                    "this PP rank (1) or not (0)", ["pp_rank"],
                                    multiprocess_mode="min")
    except ValueError:  # already registered by someone else in this process
        _CREATED.clear()
    return _CREATED


class PluginMetrics:
    def __init__(self, rank: int) -> None:
        self.rank = str(rank)
        self.counts: Counter[str] = Counter()
        prom = _prometheus()
        # Bound label children, made now: each series exists from start-up at 0.
        self._children = {name: metric.labels(pp_rank=self.rank) for name, metric in prom.items()}
        self._published: Counter[str] = Counter()
        self.set_enabled(False)

    @property
    def exported(self) -> bool:
        """Whether there are Prometheus series to publish to."""
        return bool(self._children)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def publish(self) -> None:
        """Add to each Prometheus counter what was counted since the last publish."""
        for name, total in list(self.counts.items()):
            child = self._children.get(name)
            delta = total - self._published[name]
            if child is not None and delta:
                child.inc(delta)
                self._published[name] = total

    def set_enabled(self, on: bool) -> None:
        self.enabled = on
        child = self._children.get("enabled")
        if child is not None:
            child.set(1 if on else 0)
