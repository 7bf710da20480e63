"""When a launched microbatch runs on each stage: FIFO stages joined by links. Bubbles emerge here.

A microbatch enters stage s+1 once stage s finished it, its activations crossed the link, and stage
s+1 finished everything launched before it. Because every stage serves microbatches in launch order,
the whole path of a microbatch is known at launch; only the result's return is an event.
"""

from __future__ import annotations

from typing import Protocol

from ppsched.core.batch import BatchShape

# The sampled token ids travel back to rank 0: a payload of a few bytes per request, so the link
# latency dominates; we charge the cost model's link time for a one-row activation.
_RETURN_SHAPE = BatchShape(decode_count=1, decode_ctx_sum=1)


class CostModel(Protocol):
    kv_capacity_tokens: int

    def stage_ms(self, stage: int, shape: BatchShape) -> float: ...

    def link_ms(self, shape: BatchShape) -> float: ...

    def tp_step_ms(self, shape: BatchShape) -> float: ...

    def cpu_overhead_ms(self, shape: BatchShape) -> float: ...


# Per stage run, four floats: start_s, end_s, idle_before_s (this stage's gap since its previous
# microbatch), measured_ms; a microbatch's runs are one flat list in stage order, the run log's
# own layout (no tuple per stage on the hot path).
STAGE_VALUES = 4


class Pipeline:
    """``stages`` FIFO servers. ``tp=True``: one server timed by the TP whole-model step."""

    def __init__(self, cost: CostModel, stages: int, *, tp: bool) -> None:
        if stages < 1:
            raise ValueError(f"stages={stages}: expected >= 1")
        if tp and stages != 1:
            raise ValueError("a TP engine is one stage")
        self.cost = cost
        self.stages = stages
        self.tp = tp
        self.free_at = [0.0] * stages  # when each stage finishes its last microbatch
        self.started = [False] * stages
        self.busy_s = [0.0] * stages
        self.return_s = 0.0 if tp else cost.link_ms(_RETURN_SHAPE) / 1000.0
        # a cost model may price every stage at once (sharing the per-layer part); optional,
        # so test doubles need only stage_ms
        self._stage_times = getattr(cost, "stage_times", None)

    def stage_times(self, shape: BatchShape) -> list[float]:
        """Every stage's ms for this microbatch, in stage order (one noise draw each, in order)."""
        cost = self.cost
        if self.tp:
            return [cost.tp_step_ms(shape)]
        if self._stage_times is not None:
            return self._stage_times(shape)
        return [cost.stage_ms(stage, shape) for stage in range(self.stages)]

    def run(self, launch_s: float, shape: BatchShape) -> tuple[list[float], float]:
        """Place a microbatch launched at ``launch_s``; return its stage runs (``STAGE_VALUES``
        floats per stage, in stage order) and its result time."""
        values: list[float] = []
        ready = launch_s
        link_s = 0.0 if self.tp else self.cost.link_ms(shape) / 1000.0
        free_at, started, busy_s = self.free_at, self.started, self.busy_s
        stage = 0
        for ms in self.stage_times(shape):
            free = free_at[stage]
            start = ready if ready > free else free
            idle = start - free if started[stage] else 0.0
            end = start + ms / 1000.0
            free_at[stage] = end
            started[stage] = True
            busy_s[stage] += end - start
            values += (start, end, idle, ms)
            ready = end + link_s
            stage += 1
        return values, end + self.return_s
