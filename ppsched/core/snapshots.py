"""Immutable views of engine state that policies read.

Engines build them; policies never see an engine.

Cost matters: engines build one snapshot per scheduling iteration, so aggregates are running sums
kept by the engine, and the queue view may be truncated (``queue`` holds at most the engine's view
limit of FCFS-oldest requests; ``queued_requests``/``queued_prompt_tokens`` are always exact).
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.batch import BatchShape
from ppsched.core.slot_builders import new_object, slot_setters


@dataclass(frozen=True, slots=True)
class QueuedRequest:
    """A request waiting for (more) prefill. With a prefix cache, ``remaining_prompt_tokens``
    excludes the prompt tokens the cache holds (``cached_prompt_tokens``): a chunk costs only
    its uncached part."""

    req_id: int
    arrival_s: float
    prompt_tokens: int
    remaining_prompt_tokens: int
    cached_prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class SlotLoad:
    """Decode load of one microbatch slot (running + held requests)."""

    slot: int
    decode_reqs: int
    decode_ctx_sum: int


@dataclass(frozen=True, slots=True)
class ChunkSnapshot:
    """What a chunk-size controller sees before a prefill-batch build of ``slot``."""

    now_s: float
    iteration: int  # scheduling iterations so far (all slots), starts at 0
    slot: int
    pp_size: int
    # FCFS, oldest first; possibly truncated. SGLang's view puts the chunked request first, the
    # simulator's leaves it out (rules read both through candidate_costs.waiting_fcfs)
    queue: tuple[QueuedRequest, ...]
    queued_requests: int
    queued_prompt_tokens: int  # remaining prompt tokens of every queued request, incl. chunked
    chunked: QueuedRequest | None  # the request being chunked across slots, if any
    slots: tuple[SlotLoad, ...]
    kv_free_tokens: int
    kv_total_tokens: int
    recent_ttft_ms: tuple[float, ...]  # most recent last
    recent_tpot_ms: tuple[float, ...]  # per finished-or-decoding request mean TPOT, recent last
    recent_stage_ms: tuple[float, ...]  # measured stage-0 latency of recent iterations
    arrived_requests_total: int  # cumulative since start: windowed rates come from differences
    arrived_prompt_tokens_total: int
    max_chunk_tokens: int  # the engine's hard cap (launch chunk size / max prefill tokens)

    @property
    def kv_free_fraction(self) -> float:
        return self.kv_free_tokens / self.kv_total_tokens if self.kv_total_tokens else 0.0

    @property
    def max_slot_decode_reqs(self) -> int:
        return max([s.decode_reqs for s in self.slots], default=0)  # a list: no generator


@dataclass(frozen=True, slots=True)
class DecodingRequest:
    """A request in a slot's decode set (running or held)."""

    req_id: int
    arrival_s: float
    context_len: int  # tokens in KV (prompt + generated)
    generated_tokens: int
    first_token_s: float
    last_token_s: float
    held_streak: int  # consecutive decode turns of its slot this request has been held

    def tpot_so_far_ms(self) -> float:
        """Mean time between output tokens so far (0 before the second token)."""
        if self.generated_tokens < 2:
            return 0.0
        return 1000.0 * (self.last_token_s - self.first_token_s) / (self.generated_tokens - 1)


_DECODING_SET = slot_setters(DecodingRequest, (
    "req_id", "arrival_s", "context_len", "generated_tokens", "first_token_s", "last_token_s",
    "held_streak"))


def new_decoding_request(req_id: int, arrival_s: float, context_len: int,
                         generated_tokens: int, first_token_s: float, last_token_s: float,
                         held_streak: int) -> DecodingRequest:
    """``DecodingRequest(...)``, built through the slot descriptors (``core/slot_builders.py``).
    Engines build one per decoding request per delay-scheduling turn: a decode snapshot's main
    cost."""
    d = new_object(DecodingRequest)
    s_id, s_arr, s_ctx, s_gen, s_first, s_last, s_streak = _DECODING_SET
    s_id(d, req_id)
    s_arr(d, arrival_s)
    s_ctx(d, context_len)
    s_gen(d, generated_tokens)
    s_first(d, first_token_s)
    s_last(d, last_token_s)
    s_streak(d, held_streak)
    return d


@dataclass(frozen=True, slots=True)
class DecodeSnapshot:
    """What a decode trimmer sees before a decode batch of ``slot``.

    ``running`` and ``held`` are this slot's requests ordered by arrival (oldest first); the
    trimmer partitions their union into run and hold.
    """

    now_s: float
    slot: int
    pp_size: int
    running: tuple[DecodingRequest, ...]
    held: tuple[DecodingRequest, ...]
    slot_sizes: tuple[int, ...]  # running + held per slot, indexed by slot
    kv_free_tokens: int
    kv_total_tokens: int
    queued_requests: int
    queued_prompt_tokens: int
    recent_tpot_ms: tuple[float, ...]

    @property
    def kv_free_fraction(self) -> float:
        return self.kv_free_tokens / self.kv_total_tokens if self.kv_total_tokens else 0.0


@dataclass(frozen=True, slots=True)
class StageMeasurement:
    """One measured stage iteration, fed back to the policies (ALP learns from these)."""

    now_s: float
    slot: int
    stage: int
    shape: BatchShape
    measured_ms: float


@dataclass(frozen=True, slots=True)
class Launch:
    """A microbatch launched on stage 0 (rank 0's forward), told to the policies as it starts.

    A slot's round is the time between two of its launches: what each of its decodes waits per
    output token. Engines report every launch, decode-only ones included (CUDA-graph replays
    too): a round is only known when no launch in it is missing."""

    now_s: float
    slot: int
    prefill_tokens: int  # prompt tokens the microbatch carries (0: decode-only)
    decode_reqs: int


_MEASUREMENT_SET = slot_setters(StageMeasurement,
                                 ("now_s", "slot", "stage", "shape", "measured_ms"))
_LAUNCH_SET = slot_setters(Launch, ("now_s", "slot", "prefill_tokens", "decode_reqs"))


def new_stage_measurement(now_s: float, slot: int, stage: int, shape: BatchShape,
                          measured_ms: float) -> StageMeasurement:
    """``StageMeasurement(...)`` through the slot descriptors (``core/slot_builders.py``): the
    simulator builds one per microbatch."""
    m = new_object(StageMeasurement)
    s_now, s_slot, s_stage, s_shape, s_ms = _MEASUREMENT_SET
    s_now(m, now_s)
    s_slot(m, slot)
    s_stage(m, stage)
    s_shape(m, shape)
    s_ms(m, measured_ms)
    return m


def new_launch(now_s: float, slot: int, prefill_tokens: int, decode_reqs: int) -> Launch:
    """``Launch(...)`` through the slot descriptors (``core/slot_builders.py``): one per
    microbatch."""
    launch = new_object(Launch)
    s_now, s_slot, s_prefill, s_decodes = _LAUNCH_SET
    s_now(launch, now_s)
    s_slot(launch, slot)
    s_prefill(launch, prefill_tokens)
    s_decodes(launch, decode_reqs)
    return launch
