"""Rank 0's scheduler state: limits, queue, decode sets, KV, and SGLang's new-token estimate.

What ``batches`` (building a slot's next batch), ``views`` (policy snapshots) and ``loop``
(events) share; none of them owns another.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ppsched.core.errors import UserError
from ppsched.core.snapshots import QueuedRequest, SlotLoad
from ppsched.sim.engine.kv import KvPool
from ppsched.sim.engine.state import Req

RECENT = 64  # recent TTFT/TPOT/stage samples a snapshot carries
# SGLang global_config defaults: init_new_token_ratio 0.7, min = 0.7 * 0.14, linear decay to the
# min over 600 decode steps; after a retraction the ratio jumps to what the survivors need, with
# retract_decode_steps = 20 tokens of headroom each.
INIT_TOKEN_RATIO = 0.7
MIN_TOKEN_RATIO = INIT_TOKEN_RATIO * 0.14
TOKEN_RATIO_DECAY = (INIT_TOKEN_RATIO - MIN_TOKEN_RATIO) / 600
RETRACT_DECODE_STEPS = 20


QUEUE_VIEW = 256  # FCFS-oldest queued requests a snapshot lists; the totals stay exact


class QueueView:
    """The FCFS-oldest ``QUEUE_VIEW`` queued requests' views as a tuple, kept in step with the
    queue: each queue operation moves one entry in or out of the window (``SchedState``'s
    queue methods), and ``get`` builds the views of the entries that came in since it last
    ran, so a long queue costs what changed, not ``QUEUE_VIEW`` views per admission. A queued
    request's view changes only when its remaining tokens do (``set_remaining``), which
    re-enters it. The tuple is rebuilt only when the scheduler's queue version moved."""

    __slots__ = ("version", "view", "reqs", "views", "unbuilt")

    def __init__(self) -> None:
        self.version = -1
        self.view: tuple[QueuedRequest, ...] = ()
        self.reqs: deque[Req] = deque()  # the window's requests, queue order
        self.views: deque[QueuedRequest | None] = deque()  # None: not built since it came in
        # how many of ``views`` are None: ``get`` scans the window for them only while some
        # are left after building both ends (``None in views`` would call every view's __eq__)
        self.unbuilt = 0

    def pushed_back(self, req: Req) -> None:
        if len(self.reqs) < QUEUE_VIEW:
            self.reqs.append(req)
            self.views.append(None)
            self.unbuilt += 1

    def popped_front(self, queue: deque[Req]) -> None:
        self.reqs.popleft()
        if self.views.popleft() is None:
            self.unbuilt -= 1
        if len(queue) >= QUEUE_VIEW:  # the next request slides into the window
            req = queue[QUEUE_VIEW - 1]
            self.reqs.append(req)
            self.views.append(None)
            self.unbuilt += 1

    def pushed_front(self, req: Req) -> None:
        self.reqs.appendleft(req)
        self.views.appendleft(None)
        self.unbuilt += 1
        if len(self.reqs) > QUEUE_VIEW:
            self.reqs.pop()
            if self.views.pop() is None:
                self.unbuilt -= 1

    def changed(self, req: Req) -> None:
        for i, queued in enumerate(self.reqs):
            if queued is req:
                if self.views[i] is not None:
                    self.views[i] = None
                    self.unbuilt += 1
                return

    def get(self, st: SchedState) -> tuple[QueuedRequest, ...]:
        if self.version != st.queue_version:
            views, reqs = self.views, self.reqs
            # entries come in at either end only: build those, then anything else missed
            n = len(views)
            front = 0
            while front < n and views[front] is None:
                views[front] = reqs[front].queued_view()
                front += 1
            back = n - 1
            while back > front and views[back] is None:
                views[back] = reqs[back].queued_view()
                back -= 1
            self.unbuilt -= front + (n - 1 - back)
            if self.unbuilt:
                for i, req in enumerate(reqs):
                    if views[i] is None:
                        views[i] = req.queued_view()
                self.unbuilt = 0
            self.view = tuple(views)  # type: ignore[arg-type]
            self.version = st.queue_version
        return self.view


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """The engine's fixed settings (SGLang server arguments)."""

    slots: int  # PP microbatch slots (pp_size); 1 for TP
    tp: bool
    max_running: int
    per_slot_cap: int
    mixed_chunk: bool
    max_chunk_tokens: int
    max_context: int
    ds_max_consecutive: int
    prefix_cache: bool = False

    def __post_init__(self) -> None:
        for name in ("slots", "max_running", "per_slot_cap", "max_chunk_tokens", "max_context"):
            if getattr(self, name) < 1:
                raise UserError(f"engine {name}={getattr(self, name)!r}: expected >= 1")
        if self.tp and self.slots != 1:
            raise UserError(f"a TP engine has one slot, got slots={self.slots}")


class SchedState:
    """Mutable: everything rank 0's scheduler reads and changes between events."""

    __slots__ = ("limits", "kv", "queue", "queued_tokens", "queue_version", "queue_view",
                 "chunked", "members", "slot_ctx", "decoding", "active", "rem_output",
                 "new_token_ratio", "mb_count", "arrived", "arrived_tokens", "recent_ttft",
                 "recent_tpot", "recent_stage", "retractions", "ds_holds", "max_held_streak",
                 "slot_loads", "slot_loads_view", "recent_samples", "recent_view",
                 "max_slot_decodes", "decode_sets_in_arrival_order")

    def __init__(self, limits: EngineLimits, capacity: int) -> None:
        self.limits = limits
        self.kv = KvPool(capacity, prefix_cache=limits.prefix_cache)
        self.queue: deque[Req] = deque()
        self.queued_tokens = 0  # remaining prefill tokens of the queue and the chunked request
        self.queue_version = 0  # bumped whenever the head of the queue (the snapshot view) changes
        self.queue_view = QueueView()
        self.chunked: Req | None = None
        self.members: list[list[Req]] = [[] for _ in range(limits.slots)]  # decode set per slot
        self.slot_ctx = [0] * limits.slots  # KV tokens of each slot's decode set
        # the snapshots' per-slot loads, refreshed where a slot moved (``views``)
        self.slot_loads = [SlotLoad(s, 0, 0) for s in range(limits.slots)]
        self.slot_loads_view: tuple[SlotLoad, ...] | None = None
        self.decoding = 0  # requests in any decode set
        self.active = 0  # admitted, not finished, not retracted (SGLang's running count)
        self.rem_output = 0  # output tokens still to come from the active requests
        self.new_token_ratio = INIT_TOKEN_RATIO
        self.mb_count = 0
        self.arrived = 0
        self.arrived_tokens = 0
        self.recent_ttft: deque[float] = deque(maxlen=RECENT)
        self.recent_tpot: deque[float] = deque(maxlen=RECENT)
        self.recent_stage: deque[float] = deque(maxlen=RECENT)
        # TTFT and TPOT samples appended so far, and the snapshots' tuples of both windows as
        # of a sample count (``views``): rebuilt only after a first token or a finish
        self.recent_samples = 0
        self.recent_view: tuple[int, tuple[float, ...], tuple[float, ...]] = (-1, (), ())
        self.retractions = 0
        self.ds_holds = 0
        self.max_held_streak = 0
        # Whether delay scheduling could have acted on this run (``experiments.ds_twin``): the
        # largest decode set any slot held, and whether every set stayed in arrival order.
        self.max_slot_decodes = 0
        self.decode_sets_in_arrival_order = True

    # --- queue --------------------------------------------------------------------------------
    def enqueue(self, req: Req) -> None:
        """A new request joins the back of the queue."""
        if len(self.queue) < QUEUE_VIEW:
            self.queue_version += 1  # the view lists it
        self.queue.append(req)
        self.queue_view.pushed_back(req)
        self.queued_tokens += req.remaining

    def dequeue_head(self) -> Req:
        """The head of the queue is admitted."""
        req = self.queue.popleft()
        self.queue_version += 1
        self.queue_view.popped_front(self.queue)
        return req

    def requeue_front(self, req: Req) -> None:
        """A retracted request goes back to the head of the queue."""
        self.queue.appendleft(req)
        self.queue_version += 1
        self.queue_view.pushed_front(req)
        self.queued_tokens += req.remaining

    def set_remaining(self, req: Req, remaining: int) -> None:
        """A queued request's prefill shrank or grew (prefix cache match): keep the sums."""
        if remaining != req.remaining:
            self.queued_tokens += remaining - req.remaining
            req.remaining = remaining
            self.queue_version += 1  # the head's view changed
            self.queue_view.changed(req)

    # --- decode sets --------------------------------------------------------------------------
    def grow(self, slot: int, run: list[Req]) -> None:
        """Allocate the KV slot of this step's input token for every running decode: in the
        pool and the slot's context sum now; each request's own ``kv`` counts it when the
        step's result comes back (``Engine.complete``). Nothing reads a request's ``kv``
        while its step is in flight: only its own slot's next build does, after the return."""
        self.kv.allocate(len(run))
        self.slot_ctx[slot] += len(run)

    def retract(self, req: Req, now: float) -> None:
        """SGLang's retract_decode: free the KV, requeue for recompute of prompt + generated."""
        self.slot_ctx[req.slot] -= req.kv
        self.kv.release(req, now)
        req.remaining = req.prefill_len
        req.retractions += 1
        req.held_streak = 0
        self.retractions += 1
        self.active -= 1
        self.rem_output -= req.output - req.generated
        self.decoding -= 1
        # At the head of the queue: it arrived before (almost) everything still waiting.
        self.requeue_front(req)

    # --- SGLang's new_token_ratio ---------------------------------------------------------------
    def decay_ratio(self) -> None:
        self.new_token_ratio = max(self.new_token_ratio - TOKEN_RATIO_DECAY, MIN_TOKEN_RATIO)

    def retracted_ratio(self, survivors: list[Req]) -> None:
        total = sum(r.output for r in survivors)
        decoded = sum(r.generated for r in survivors)
        estimate = (decoded + RETRACT_DECODE_STEPS * len(survivors)) / total if total else 1.0
        self.new_token_ratio = min(1.0, estimate)

    def progress_mark(self) -> tuple[int, int, int]:
        """Changes whenever an idle turn still altered the state (retractions, holds, queue)."""
        return self.retractions, self.ds_holds, self.queue_version
