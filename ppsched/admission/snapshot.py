"""What an admission controller sees when a request arrives, and what it answers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.core.slo import Slo


@dataclass(frozen=True, slots=True)
class AdmissionSnapshot:
    """Engine state at the arrival of one request.

    ``queued_prompt_tokens`` are the prefill tokens ahead of the arriving request (every queued
    request's remaining prompt, the chunked one included). ``recent_stage_ms`` are measured
    stage-0 latencies of recent microbatches (most recent last) and ``chunk_tokens`` the prefill
    budget of one microbatch: together a fallback drain-rate estimate before any backlog was seen.
    ``recent_tpot_ms`` feed the TPOT guard (``guard.py``).
    """

    now_s: float
    prompt_tokens: int
    queued_prompt_tokens: int
    queued_requests: int
    slo: Slo
    pp_size: int = 1
    chunk_tokens: int = 2048
    recent_stage_ms: tuple[float, ...] = ()
    recent_tpot_ms: tuple[float, ...] = ()  # mean TPOT of recently finished requests, recent last

    def __post_init__(self) -> None:
        if not (math.isfinite(self.now_s) and self.now_s >= 0):
            raise ValueError(f"now_s={self.now_s}: expected a finite time >= 0")
        if self.prompt_tokens <= 0:
            raise ValueError(f"prompt_tokens={self.prompt_tokens}: expected > 0")
        if self.queued_prompt_tokens < 0 or self.queued_requests < 0:
            raise ValueError(f"queued_prompt_tokens={self.queued_prompt_tokens}, queued_requests="
                             f"{self.queued_requests}: expected both >= 0")
        if self.pp_size < 1 or self.chunk_tokens < 1:
            raise ValueError(f"pp_size={self.pp_size}, chunk_tokens={self.chunk_tokens}: "
                             "expected both >= 1")


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """``admit`` or not, why (one line, for RequestRecord.reject_reason), and the prediction.

    ``predicted_ttft_ms`` is NaN when there was nothing to predict from yet (cold start).
    """

    admit: bool
    reason: str
    predicted_ttft_ms: float = math.nan
