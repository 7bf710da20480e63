"""An admission controller bound to one run's fixed facts, so an engine's arrival hook passes
only what changes (time, the request, the queue, recent stage times)."""

from __future__ import annotations

from collections.abc import Iterable

from ppsched.admission.controller import AdmissionController
from ppsched.admission.snapshot import AdmissionDecision, AdmissionSnapshot
from ppsched.core.slo import Slo
from ppsched.core.snapshots import StageMeasurement


class AdmissionGate:
    def __init__(self, controller: AdmissionController, slo: Slo, *, pp_size: int,
                 chunk_tokens: int) -> None:
        self.controller = controller
        self.slo = slo
        self.pp_size = pp_size
        self.chunk_tokens = chunk_tokens

    def observe(self, measurement: StageMeasurement) -> None:
        self.controller.observe(measurement)

    def check(self, now_s: float, prompt_tokens: int, queued_prompt_tokens: int,
              queued_requests: int, recent_stage_ms: Iterable[float],
              recent_tpot_ms: Iterable[float] = ()) -> AdmissionDecision:
        return self.controller.admit(AdmissionSnapshot(
            now_s=now_s, prompt_tokens=prompt_tokens, queued_prompt_tokens=queued_prompt_tokens,
            queued_requests=queued_requests, slo=self.slo, pp_size=self.pp_size,
            chunk_tokens=self.chunk_tokens, recent_stage_ms=tuple(recent_stage_ms),
            recent_tpot_ms=tuple(recent_tpot_ms)))
