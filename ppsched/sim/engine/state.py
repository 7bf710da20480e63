"""Per-request engine state and the microbatches that carry it (private to the simulator;
policies see snapshots only)."""

from __future__ import annotations

import math

from ppsched.core.batch import BatchShape
from ppsched.core.requests import RequestRecord, RequestSpec, new_request_record
from ppsched.core.snapshots import QueuedRequest


class Req:
    __slots__ = ("spec", "rid", "arrival_s", "prompt", "output", "generated", "kv", "remaining",
                 "first_s", "last_s", "finish_s", "slot", "retractions", "held_streak",
                 "rejected", "reject_reason", "cache_path", "cached", "_qview")

    def __init__(self, spec: RequestSpec) -> None:
        self.spec = spec
        self.rid = spec.req_id
        self.arrival_s = spec.arrival_s
        self.prompt = spec.prompt_tokens
        self.output = spec.output_tokens
        self.generated = 0
        self.kv = 0  # KV tokens allocated to this request (a decode step's once it returns)
        self.remaining = spec.prompt_tokens  # tokens still to prefill (prompt, or recompute)
        self.first_s = math.nan
        self.last_s = math.nan
        self.finish_s = math.nan
        self.slot = -1
        self.retractions = 0
        self.held_streak = 0
        self.rejected = False
        self.reject_reason = ""
        self.cache_path: list = []  # prefix-cache nodes this request locks (engine.prefix_cache)
        self.cached = 0  # of ``kv``, tokens held by those nodes (shared KV, not the request's)
        self._qview: QueuedRequest | None = None

    @property
    def prefill_len(self) -> int:
        """Tokens this (re)prefill covers: the prompt, or prompt + generated after a retraction."""
        return self.prompt + self.generated

    def queued_view(self) -> QueuedRequest:
        """Cached while ``remaining`` is unchanged: snapshots list up to 256 of these per build."""
        view = self._qview
        if view is None or view.remaining_prompt_tokens != self.remaining \
                or view.prompt_tokens != self.prefill_len:
            view = self._qview = QueuedRequest(self.rid, self.arrival_s, self.prefill_len,
                                               self.remaining,
                                               self.cached if self.kv
                                               else self.prefill_len - self.remaining)
        return view

    def tpot_ms(self) -> float:
        if self.generated < 2:
            return 0.0
        return 1000.0 * (self.last_s - self.first_s) / (self.generated - 1)

    def record(self) -> RequestRecord:
        return new_request_record(self.rid, self.arrival_s, self.prompt, self.output,
                                  self.first_s, self.finish_s, self.rejected,
                                  self.reject_reason, self.slot, self.retractions)


class PrefillPiece:
    """One request's share of a prefill batch (a slotted class, not a NamedTuple: compiled, its
    fields are read directly; one is made per request per prefill microbatch)."""

    __slots__ = ("req", "prefix", "extend", "completes")

    def __init__(self, req: Req, prefix: int, extend: int, completes: bool) -> None:
        self.req = req
        self.prefix = prefix  # tokens before this piece (cached prefix + earlier chunks)
        self.extend = extend  # tokens this piece computes
        self.completes = completes  # the last piece of the request's (re)prefill


class Launched:
    """A microbatch in flight: what it carries and when its result is back on rank 0."""

    __slots__ = ("slot", "prefill", "decodes", "shape", "chunk", "predicted_ms", "decision",
                 "trim", "return_s")

    def __init__(self, slot: int, prefill: list[PrefillPiece], decodes: list[Req],
                 shape: BatchShape, chunk: int, predicted_ms: float,
                 decision: dict | None, trim: dict | None) -> None:
        self.slot = slot
        self.prefill = prefill
        self.decodes = decodes
        self.shape = shape
        self.chunk = chunk  # the chunk budget this prefill batch was built under; 0 for decode
        self.predicted_ms = predicted_ms
        self.decision = decision
        self.trim = trim
        self.return_s = math.nan
