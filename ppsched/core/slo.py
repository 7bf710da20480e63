"""Service-level objectives (the paper's defaults: TTFT 2000 ms, TPOT 200 ms at scale 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.core.errors import UserError

PAPER_TTFT_MS = 2000.0
PAPER_TPOT_MS = 200.0


@dataclass(frozen=True, slots=True)
class Slo:
    """Per-request latency targets: time to first token and time per output token, in ms."""

    ttft_ms: float = PAPER_TTFT_MS
    tpot_ms: float = PAPER_TPOT_MS

    def __post_init__(self) -> None:
        for name, value in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"SLO {name}={value!r}: expected a finite number > 0")

    def scaled(self, scale: float) -> Slo:
        if not (math.isfinite(scale) and scale > 0):
            raise UserError(f"SLO scale {scale!r}: expected a finite number > 0")
        return Slo(self.ttft_ms * scale, self.tpot_ms * scale)
