"""The engine's policies and the stage measurements they are fed, never ahead of time."""

from __future__ import annotations

from collections import deque

from ppsched.admission import AdmissionGate
from ppsched.core.batch import BatchShape
from ppsched.core.policy import ChunkController, ChunkDecision, DecodeTrimmer
from ppsched.core.snapshots import StageMeasurement, new_launch


class PolicyFeed:
    """Chunk controller, delay-scheduling trimmer (optional), admission gate (optional), and the
    stage-0 measurements waiting until simulated time reaches their end."""

    __slots__ = ("controller", "trimmer", "admission", "_trimmer_observe", "_launched",
                 "pending", "fixed_decision", "held_decision", "_logged")

    def __init__(self, controller: ChunkController, trimmer: DecodeTrimmer | None,
                 admission: AdmissionGate | None) -> None:
        self.controller = controller
        self.trimmer = trimmer
        self.admission = admission  # None: admit every request that can ever fit
        self._trimmer_observe = getattr(trimmer, "observe", None)
        self._launched = getattr(controller, "observe_launch", None)
        # a controller that decides the same whatever it sees: no snapshot is built for it
        self.fixed_decision: ChunkDecision | None = getattr(controller, "fixed_decision", None)
        # a controller that holds its decision between re-plans: asked before a snapshot is built
        self.held_decision = getattr(controller, "held_decision", None)
        self.pending: deque[tuple[float, StageMeasurement]] = deque()
        # the last decision logged and its log fields: a controller holding its choice (or a
        # fixed one) returns the same decision object build after build
        self._logged: tuple[ChunkDecision | None, dict, dict] = (None, {}, {})

    def log_fields(self, decision: ChunkDecision) -> tuple[dict, dict]:
        """The decision log's ``inputs`` (a fresh dict per entry) and regime fields of
        ``decision`` (frozen: the same object logs the same fields)."""
        last, inputs, regime = self._logged
        if decision is not last:
            inputs, regime = dict(decision.inputs), decision.regime_fields()
            self._logged = (decision, inputs, regime)
        return inputs.copy(), regime

    def measured(self, measurement: StageMeasurement) -> None:
        """A stage-0 run was placed; policies may see it once ``now`` reaches its end."""
        self.pending.append((measurement.now_s, measurement))

    def launched(self, now_s: float, slot: int, shape: BatchShape) -> None:
        """A microbatch starts on stage 0 now: the scheduler's own act, known at once (built
        only for a controller that listens: this runs every microbatch)."""
        if self._launched is not None:
            self._launched(new_launch(now_s, slot, shape.prefill_tokens, shape.decode_count))

    def flush(self, now: float, recent_stage: deque[float]) -> None:
        """Feed stage-0 measurements that have completed by ``now`` (never the future)."""
        pending = self.pending
        while pending and pending[0][0] <= now:
            measurement = pending.popleft()[1]
            self.controller.observe(measurement)
            if self._trimmer_observe is not None:
                self._trimmer_observe(measurement)
            if self.admission is not None:
                self.admission.observe(measurement)
            recent_stage.append(measurement.measured_ms)
