"""A request as a workload states it, and as an engine reports it back."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppsched.core.slot_builders import new_object, slot_setters


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


_RECORD_SET = slot_setters(RequestRecord, (
    "req_id", "arrival_s", "prompt_tokens", "output_tokens", "first_token_s", "finish_s",
    "rejected", "reject_reason", "slot", "retractions"))


def new_request_record(req_id: int, arrival_s: float, prompt_tokens: int, output_tokens: int,
                       first_token_s: float, finish_s: float, rejected: bool,
                       reject_reason: str, slot: int, retractions: int) -> RequestRecord:
    """``RequestRecord(...)`` with every field given, built through the slot descriptors
    (``core/slot_builders.py``): a run records thousands, and the run cache reads them back."""
    record = new_object(RequestRecord)
    s_id, s_arr, s_prompt, s_out, s_first, s_finish, s_rej, s_reason, s_slot, s_retr = \
        _RECORD_SET
    s_id(record, req_id)
    s_arr(record, arrival_s)
    s_prompt(record, prompt_tokens)
    s_out(record, output_tokens)
    s_first(record, first_token_s)
    s_finish(record, finish_s)
    s_rej(record, rejected)
    s_reason(record, reject_reason)
    s_slot(record, slot)
    s_retr(record, retractions)
    return record
