"""A request as a workload states it, and as an engine reports it back."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload: arrival time (s from the start) and exact token counts."""

    req_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    # Prefix identity (Mooncake traces): one id per 512-token prompt block; equal ids are equal
    # blocks, so a prefix cache can reuse them. Empty: the trace carries no prefix identity.
    prefix_block_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.arrival_s) and self.arrival_s >= 0):
            raise ValueError(f"request {self.req_id}: arrival_s={self.arrival_s}, expected >= 0")
        if self.prompt_tokens <= 0 or self.output_tokens <= 0:
            raise ValueError(f"request {self.req_id}: prompt_tokens={self.prompt_tokens}, "
                             f"output_tokens={self.output_tokens}, expected both > 0")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one request. Rejected requests have no token times.

    TPOT is the mean gap between output tokens after the first (undefined, NaN, for 1 token).
    """

    req_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    first_token_s: float = math.nan
    finish_s: float = math.nan
    rejected: bool = False
    reject_reason: str = ""
    slot: int = -1
    retractions: int = 0

    def __reduce__(self) -> tuple:
        # A run's records cross from worker to driver by pickle, thousands per run; the
        # dataclass default (state by ``fields()``, per record) costs 4x this positional form.
        return (RequestRecord, (self.req_id, self.arrival_s, self.prompt_tokens,
                                self.output_tokens, self.first_token_s, self.finish_s,
                                self.rejected, self.reject_reason, self.slot, self.retractions))

    @property
    def ttft_ms(self) -> float:
        return 1000.0 * (self.first_token_s - self.arrival_s)

    @property
    def tpot_ms(self) -> float:
        if self.output_tokens < 2:
            return math.nan
        return 1000.0 * (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def e2e_ms(self) -> float:
        return 1000.0 * (self.finish_s - self.arrival_s)
