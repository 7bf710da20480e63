"""Rank 0's reads of one turn, each taken from the scheduler's requests only when a policy asks.

Most turns need little: the ``predictive`` controller between its choices reads the fullest slot's
decode count only, and DS settles from counts (``DelayTrimmer.settled_reason``) unless it trims.
Summing the whole waiting queue (~0.1 us per request and field) or every running request's
context each turn would cost more than the rest of the turn, so those totals are computed on
first read and kept for the turn. A read returns exactly what the eager path computed: the
requests do not change while rank 0 decides (SGLang runs nothing in between). After the turn
``close`` makes any read not yet taken raise instead of reading a later state.

``LazyChunkSnapshot`` is a ``ChunkSnapshot`` whose ``queue``, ``queued_prompt_tokens`` and
``slots`` are such reads; every other field is set when it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from operator import not_

from ppsched.core.snapshots import ChunkSnapshot, QueuedRequest, SlotLoad
from ppsched.sglang_patch import fast_scan
from ppsched.sglang_patch.translate import RequestClock

QUEUE_STEPS = (8, 64, 512)  # prefix lengths tried before the whole queue by ``waiting_exceeds``


class TurnReads:
    """The turn's waiting queue (``waiting``), its chunked request's queue entry, and every slot's
    running + held requests (``slot_reqs``), read lazily and at most once each."""

    def __init__(self, waiting: Sequence, chunked_q: QueuedRequest | None,
                 slot_reqs: Sequence[Sequence], clock: RequestClock, now_s: float,
                 view_limit: int, slot: int = 0) -> None:
        self.waiting = waiting
        self.slot = slot  # the turn's slot: read first among equally full ones (DS reads it too)
        self.chunked_q = chunked_q
        self.slot_reqs = slot_reqs
        self.clock = clock
        self.now_s = now_s
        self.view_limit = view_limit
        self._done: list[list | None] = [None] * len(slot_reqs)
        self._live: list[int] | None = None
        self._loads: tuple[SlotLoad, ...] | None = None
        self._waiting_tokens: int | None = None
        self._queue: tuple[QueuedRequest, ...] | None = None
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise RuntimeError("a lazy snapshot field was read after its turn ended")

    def flags(self, slot: int) -> list:
        """``[r.finished() for r in slot_reqs[slot]]``."""
        done = self._done[slot]
        if done is None:
            self._check()
            done = self._done[slot] = fast_scan.finished_flags(self.slot_reqs[slot])
        return done

    def live_counts(self) -> list[int]:
        """Unfinished requests per slot (``fast_scan.live_count``)."""
        if self._live is None:
            self._live = [sum(map(not_, self.flags(slot))) for slot in range(len(self.slot_reqs))]
        return self._live

    def max_live(self) -> int:
        """``max(live_counts(), default=0)``, reading the slots fullest first and stopping when
        no slot left holds more requests than the best live count found."""
        if self._live is not None:
            return max(self._live, default=0)
        best = 0
        order = sorted(((len(reqs), slot == self.slot, slot)
                        for slot, reqs in enumerate(self.slot_reqs)), reverse=True)
        for size, _, slot in order:
            if size <= best:
                break
            best = max(best, sum(map(not_, self.flags(slot))))
        return best

    def slot_loads(self) -> tuple[SlotLoad, ...]:
        """``translate.slot_loads(slot_reqs)``."""
        if self._loads is None:
            self._loads = tuple(
                SlotLoad(slot, *fast_scan.live_load_from_flags(reqs, self.flags(slot)))
                for slot, reqs in enumerate(self.slot_reqs))
        return self._loads

    def waiting_tokens(self) -> int:
        """Remaining prompt tokens of the whole waiting queue (the chunked request excluded)."""
        if self._waiting_tokens is None:
            self._check()
            self._waiting_tokens = fast_scan.remaining_prompt_sum(self.waiting)
        return self._waiting_tokens

    def waiting_exceeds(self, limit: int) -> bool:
        """``waiting_tokens() > limit``, reading only as much of the queue as it takes: remaining
        counts are >= 0, so a prefix already over ``limit`` decides it."""
        if self._waiting_tokens is not None:
            return self._waiting_tokens > limit
        self._check()
        total, start = 0, 0
        for end in QUEUE_STEPS:
            total += fast_scan.remaining_prompt_sum(self.waiting[start:end])
            if total > limit:
                return True
            start = end
            if end >= len(self.waiting):
                self._waiting_tokens = total
                return False
        return self.waiting_tokens() > limit

    def known_queued_tokens(self) -> int | None:
        """The snapshot's ``queued_prompt_tokens`` when this turn computed it, else None."""
        if self._waiting_tokens is None:
            return None
        return self._waiting_tokens + (self.chunked_q.remaining_prompt_tokens
                                       if self.chunked_q is not None else 0)

    def queue(self) -> tuple[QueuedRequest, ...]:
        """``translate.queued_view``'s FCFS view: the chunked request first, then the oldest of
        the queue's head (its requests were tracked when the snapshot was built)."""
        if self._queue is None:
            self._check()
            head = self.waiting[:self.view_limit]
            lens, remaining = fast_scan.prompts_and_remaining(head)
            view = self.clock.head_view(head, lens, remaining, self.now_s)
            if self.chunked_q is not None:
                view.insert(0, self.chunked_q)
            self._queue = tuple(view[:self.view_limit])
        return self._queue

    def close(self) -> None:
        self._closed = True


class LazyChunkSnapshot(ChunkSnapshot):
    """A ``ChunkSnapshot`` whose whole-queue and whole-slot fields are read on first access."""

    __slots__ = ("_reads",)

    queue = property(lambda self: self._reads.queue())  # type: ignore[assignment]
    slots = property(lambda self: self._reads.slot_loads())  # type: ignore[assignment]

    @property  # type: ignore[override]
    def queued_prompt_tokens(self) -> int:
        reads = self._reads
        return reads.waiting_tokens() + (reads.chunked_q.remaining_prompt_tokens
                                         if reads.chunked_q is not None else 0)

    @property
    def max_slot_decode_reqs(self) -> int:
        """The counts alone: the contexts (``slots``) are not summed for it."""
        return self._reads.max_live()


LAZY = ("queue", "queued_prompt_tokens", "slots")
_SET = {f.name: ChunkSnapshot.__dict__[f.name].__set__ for f in fields(ChunkSnapshot)
        if f.name not in LAZY}
if len(_SET) + len(LAZY) != len(fields(ChunkSnapshot)):
    raise ImportError("ppsched.core.snapshots.ChunkSnapshot changed: update turn_reads.LAZY")


def lazy_chunk_snapshot(reads: TurnReads, **eager) -> LazyChunkSnapshot:
    """Every ``ChunkSnapshot`` field except ``LAZY`` by keyword (all of them: a missing one
    raises), the rest from ``reads``. ``chunked`` must be ``reads.chunked_q``."""
    if eager.keys() != _SET.keys():
        raise TypeError(f"lazy_chunk_snapshot: expected fields {sorted(_SET)}, got "
                        f"{sorted(eager)}")
    snap = object.__new__(LazyChunkSnapshot)
    for name, value in eager.items():
        _SET[name](snap, value)
    object.__setattr__(snap, "_reads", reads)
    return snap


def materialized(snap: ChunkSnapshot) -> ChunkSnapshot:
    """A plain ``ChunkSnapshot`` with the same field values (reads every lazy one now)."""
    return ChunkSnapshot(**{f.name: getattr(snap, f.name) for f in fields(ChunkSnapshot)})
