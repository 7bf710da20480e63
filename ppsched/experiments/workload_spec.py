"""A workload described by the arguments that generate it: hashable, picklable, loaded lazily."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

from ppsched.core.errors import UserError


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Arguments of ``ppsched.traces.load_workload``; either a Poisson ``rate`` or ``replay``.

    ``name`` is a catalog name, or, with ``trace_file`` (and ``trace_format``), the label of a
    user trace. ``to_dict`` is what the run cache keys on; the cache adds a hash of the bytes
    of the files the workload reads (``experiments.cache.workload_fingerprint``).
    """

    name: str
    rate: float | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    replay: bool = False
    window_min: float | None = None
    speedup: float = 1.0
    seed: int = 0
    trace_file: str | None = None
    trace_format: str | None = None
    max_context: int | None = None
    data_dir: str | None = None

    def __post_init__(self) -> None:
        if self.rate is None and not self.replay:
            raise UserError(f"workload {self.name!r}: expected a rate or replay")
        if self.rate is not None and not self.rate > 0:
            raise UserError(f"workload {self.name!r}: rate={self.rate}, expected > 0")
        if self.num_requests is not None and self.num_requests <= 0:
            raise UserError(f"workload {self.name!r}: num_requests={self.num_requests}, "
                            "expected > 0")

    def at_rate(self, rate: float) -> WorkloadSpec:
        # Rounded so that searches which meet at the same rate share one cached run.
        return replace(self, rate=float(f"{rate:.6g}"), replay=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load(spec: WorkloadSpec) -> Any:
    """The Workload (``ppsched.traces.Workload``); memoised per process."""
    return _load_cached(spec)


@lru_cache(maxsize=64)
def _load_cached(spec: WorkloadSpec) -> Any:
    from ppsched.traces import load_workload

    return load_workload(None if spec.trace_file else spec.name, trace_file=spec.trace_file,
                         trace_format=spec.trace_format, rate=spec.rate, replay=spec.replay,
                         window_min=spec.window_min, speedup=spec.speedup,
                         num_requests=spec.num_requests, duration_s=spec.duration_s,
                         seed=spec.seed, max_context=spec.max_context, data_dir=spec.data_dir)
