"""SGLang state → ``ppsched.core.snapshots``, engine-free (duck-typed on Req/ScheduleBatch fields).

A request here is anything with ``rid``, ``origin_input_ids``, ``output_ids``, ``finished()``
and, for a partly prefilled one, ``prefix_len``/``extend_end``. Times are this rank's
``perf_counter`` seconds since the plugin started; request times are first-seen times (arrival
at the scheduler, a token when its count grows), so they lag the true ones by < 1 iteration.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, gt, is_

from ppsched.core.batch import BatchShape
from ppsched.core.snapshots import (
    ChunkSnapshot,
    DecodeSnapshot,
    DecodingRequest,
    QueuedRequest,
    SlotLoad,
    new_decoding_request,
)
from ppsched.sglang_patch import fast_scan
from ppsched.sglang_patch.fast_scan import remaining_prompt

MAX_TRACKED = 100_000  # rids remembered (aborted ones are never seen finishing)
RECENT = 64  # recent TTFT/TPOT/stage samples kept
_BY_ARRIVAL = attrgetter("arrival_s", "req_id")
_RID = attrgetter("rid")
_N_OUT = attrgetter("n_out")
_STEP = attrgetter("step")
_consume = deque(maxlen=0).extend  # runs a map to its end in C


@dataclass(slots=True, eq=False)  # identity: `in`/`==` on lists of them stay in C
class _Times:
    req_id: int
    arrival_s: float
    n_out: int = 0
    first_token_s: float = float("nan")
    last_token_s: float = float("nan")
    held_streak: int = 0
    queued: QueuedRequest | None = None  # its last queue entry, reused while unchanged
    step: object = None  # the group of the deferred decode step that holds it, if any


class RequestClock:
    """Per-request ids and times as this rank observes them, plus recent TTFT/TPOT."""

    def __init__(self) -> None:
        self._times: OrderedDict[str, _Times] = OrderedDict()
        self._next_id = 0
        self.recent_ttft_ms: deque[float] = deque(maxlen=RECENT)
        self.recent_tpot_ms: deque[float] = deque(maxlen=RECENT)
        self.arrived_requests = 0
        self.arrived_prompt_tokens = 0
        self._head: tuple | None = None  # head_view's last (rids, times, prompts, remaining)
        self._head_view: list[QueuedRequest] = []
        # group -> (requests, their times, output counts, when): a decode step whose writes
        # (n_out, last_token_s) are deferred until something reads them (``settle``)
        self._steps: dict[object, tuple[list, list[_Times], list[int], float]] = {}
        self.forgotten = 0  # requests dropped so far (finished or evicted)
        self._tracked: tuple[list, int] = ([], 0)  # track's last requests, at ``forgotten``

    def arrive(self, rid: str, prompt_tokens: int, now_s: float) -> _Times:
        t = self._times.get(rid)
        if t is None:
            t = _Times(self._next_id, now_s)
            self._next_id += 1
            self._times[rid] = t
            self.arrived_requests += 1
            self.arrived_prompt_tokens += prompt_tokens
            if len(self._times) > MAX_TRACKED:
                self.settle()  # no deferred step may keep a forgotten request's times
                self._times.popitem(last=False)
                self.forgotten += 1
        return t

    def observe(self, req, now_s: float) -> _Times:
        """Update a request's token times from its output count; record TTFT/TPOT samples."""
        return self.observe_counts(req, len(req.origin_input_ids), len(req.output_ids), now_s)

    def observe_unfinished(self, reqs: Sequence, now_s: float, group: object = None
                           ) -> list[_Times]:
        """``[self.observe(r, now_s) for r in reqs]`` for requests the caller knows are unfinished
        (none is forgotten here), with distinct rids (SGLang refuses a duplicate rid).

        A slot's decode step -- every request tracked, each showing more tokens than last seen
        and none its first -- only sets each one's ``n_out`` and ``last_token_s``. With a
        ``group`` (the caller's name for the set, e.g. a slot's running requests) those writes
        are deferred: when the same requests step again the new counts are compared with the
        deferred ones (in C) and replace them, so a steady slot costs no call and no write per
        request; ``settle`` writes them before anything reads them. Any other case takes the
        per-request path after settling everything."""
        if not reqs:
            return []
        outs = fast_scan.output_lens(reqs)
        step = self._steps.get(group) if group is not None else None
        if step is not None and len(step[0]) == len(reqs) and all(map(is_, step[0], reqs)):
            if outs == step[2]:
                return step[1]  # nothing new since the deferred step
            if all(map(gt, outs, step[2])):
                self._steps[group] = (step[0], step[1], outs, now_s)
                return step[1]
        times = list(map(self._times.get, map(_RID, reqs)))
        if None in times:
            self.settle()
            return [self.observe_counts(req, len(req.origin_input_ids), n, now_s)
                    for req, n in zip(reqs, outs, strict=True)]
        # the deferred steps holding any of these requests, and this group's own, are written
        # first (a request is in at most one step: the one its ``step`` names)
        for pending in {*map(_STEP, times), group} - {None}:
            self._settle_step(pending)
        seen = list(map(_N_OUT, times))
        if outs == seen:  # nothing new: observe would change nothing
            return times
        if all(seen) and all(map(gt, outs, seen)):
            self._steps[group] = (list(reqs), times, outs, now_s)
            if group is None:
                self._settle_step(None)
            else:
                _consume(map(setattr, times, repeat("step"), repeat(group, len(times))))
            return times
        # these requests' steps are written: the per-request path needs nothing else settled
        return [self._observe_counts(req, len(req.origin_input_ids), n, now_s)
                for req, n in zip(reqs, outs, strict=True)]

    def _settle_step(self, group: object) -> None:
        step = self._steps.pop(group, None)
        if step is not None:
            _, times, outs, now_s = step
            _consume(map(setattr, times, repeat("n_out"), outs))
            _consume(map(setattr, times, repeat("last_token_s"), repeat(now_s, len(times))))

    def settle(self) -> None:
        """Write every deferred decode step into its requests' times (the writes ``observe``
        would have made, in the same order)."""
        while self._steps:
            self._settle_step(next(iter(self._steps)))

    def finish(self, reqs: Iterable, now_s: float) -> None:
        """Finished requests still in a slot's batch: their last token and TPOT sample, then
        forgotten. Only tracked ones: an untracked finished request was never seen decoding."""
        self.settle()
        get = self._times.get
        for req in reqs:
            if get(req.rid) is not None:
                self.observe_counts(req, len(req.origin_input_ids), len(req.output_ids), now_s)

    def track(self, reqs: Sequence, now_s: float) -> None:
        """Arrive every request of ``reqs`` the clock does not know yet, in order (what
        ``queued`` does for each), without building their queue entries. The same requests as
        last time, with nothing forgotten since, are all known: nothing to look up."""
        last, forgotten = self._tracked
        if forgotten == self.forgotten and len(last) == len(reqs) and all(map(is_, last, reqs)):
            return
        self._tracked = (list(reqs), self.forgotten)
        get = self._times.get
        if None in map(get, map(_RID, reqs)):
            for req in reqs:
                if get(req.rid) is None:
                    self.arrive(req.rid, len(req.origin_input_ids), now_s)

    def observe_counts(self, req, prompt: int, n: int, now_s: float) -> _Times:
        """``observe`` with the request's prompt and output lengths already read."""
        self.settle()
        return self._observe_counts(req, prompt, n, now_s)

    def _observe_counts(self, req, prompt: int, n: int, now_s: float) -> _Times:
        t = self._times.get(req.rid) or self.arrive(req.rid, prompt, now_s)
        if n > t.n_out:
            if t.n_out == 0:
                t.first_token_s = now_s
                self.recent_ttft_ms.append(1000.0 * (now_s - t.arrival_s))
            t.last_token_s = now_s
            t.n_out = n
        if req.finished():
            if t.n_out >= 2:
                self.recent_tpot_ms.append(
                    1000.0 * (t.last_token_s - t.first_token_s) / (t.n_out - 1))
            if self._times.pop(req.rid, None) is not None:
                self.forgotten += 1
        return t

    def queued(self, rid: str, prompt: int, remaining: int, now_s: float) -> QueuedRequest:
        """The request's queue entry (arriving it if new). Built again only when its counts
        change: the same value as a fresh one, without a frozen-dataclass build per turn."""
        t = self._times.get(rid) or self.arrive(rid, prompt, now_s)
        q = t.queued
        if q is None or q.remaining_prompt_tokens != remaining or q.prompt_tokens != prompt:
            q = t.queued = QueuedRequest(t.req_id, t.arrival_s, prompt, remaining)
        return q

    def head_view(self, head: Sequence, prompts: list[int], remaining: list[int], now_s: float
                  ) -> list[QueuedRequest]:
        """The queue entries of ``head`` (arriving new ones) in arrival order. When the same
        tracked requests show the same counts as last turn (compared in C, no call per
        request), that turn's sorted entries: the same values, without rebuilding them."""
        rids = list(map(_RID, head))
        if self._head is not None and self._head == (
                rids, list(map(self._times.get, rids)), prompts, remaining):
            return list(self._head_view)
        view = [self.queued(rid, n, rem, now_s)
                for rid, n, rem in zip(rids, prompts, remaining, strict=True)]
        view.sort(key=_BY_ARRIVAL)
        self._head = (rids, list(map(self._times.get, rids)), prompts, remaining)
        self._head_view = view
        return list(view)

    def get(self, rid: str) -> _Times | None:
        self.settle()
        return self._times.get(rid)

    def __len__(self) -> int:
        return len(self._times)


def queued_view(waiting: Sequence, chunked, clock: RequestClock, now_s: float, limit: int
                ) -> tuple[tuple[QueuedRequest, ...], int, int, QueuedRequest | None]:
    """(FCFS view of at most ``limit``, exact count, exact remaining tokens, the chunked one)."""
    chunked_q = clock.queued(chunked.rid, len(chunked.origin_input_ids),
                             remaining_prompt(chunked), now_s) if chunked is not None else None
    lens, remaining = fast_scan.prompts_and_remaining(waiting)
    view = clock.head_view(waiting[:limit], lens[:limit], remaining[:limit], now_s)
    tokens = sum(remaining)
    count = len(waiting)
    if chunked_q is not None:
        tokens += chunked_q.remaining_prompt_tokens
        count += 1
        view.insert(0, chunked_q)
    return tuple(view[:limit]), count, tokens, chunked_q


def context_len(req) -> int:
    return len(req.origin_input_ids) + len(req.output_ids)


def slot_loads(slot_reqs: Sequence[Sequence]) -> tuple[SlotLoad, ...]:
    """Decode load per slot from its running + held requests (finished ones excluded)."""
    return tuple(SlotLoad(slot, *fast_scan.live_load(reqs)) for slot, reqs in enumerate(slot_reqs))


def chunk_snapshot(*, now_s: float, iteration: int, slot: int, pp_size: int, waiting: Sequence,
                   chunked, slot_reqs: Sequence[Sequence], kv_free: int, kv_total: int,
                   clock: RequestClock, recent_stage_ms: Iterable[float], max_chunk: int,
                   queue_view: int, slots: tuple[SlotLoad, ...] | None = None
                   ) -> ChunkSnapshot:
    """``slots``: ``slot_loads(slot_reqs)`` when the caller already has it."""
    queue, count, tokens, chunked_q = queued_view(waiting, chunked, clock, now_s, queue_view)
    return ChunkSnapshot(
        now_s=now_s, iteration=iteration, slot=slot, pp_size=pp_size, queue=queue,
        queued_requests=count, queued_prompt_tokens=tokens, chunked=chunked_q,
        slots=slots if slots is not None else slot_loads(slot_reqs),
        kv_free_tokens=int(kv_free), kv_total_tokens=int(kv_total),
        recent_ttft_ms=tuple(clock.recent_ttft_ms), recent_tpot_ms=tuple(clock.recent_tpot_ms),
        recent_stage_ms=tuple(recent_stage_ms),
        arrived_requests_total=clock.arrived_requests,
        arrived_prompt_tokens_total=clock.arrived_prompt_tokens, max_chunk_tokens=max_chunk)


def decoding_request(req, clock: RequestClock, now_s: float) -> DecodingRequest:
    t = clock.observe(req, now_s)
    first = t.first_token_s if t.n_out else now_s
    last = t.last_token_s if t.n_out else now_s
    return DecodingRequest(req_id=t.req_id, arrival_s=t.arrival_s, context_len=context_len(req),
                           generated_tokens=len(req.output_ids), first_token_s=first,
                           last_token_s=last, held_streak=t.held_streak)


def decoding_requests(reqs: Sequence, clock: RequestClock, now_s: float
                      ) -> tuple[list[DecodingRequest], list[tuple[str, _Times]]]:
    """``[decoding_request(r) for r in reqs]`` ordered by arrival, and each request's
    (rid, times) in ``reqs`` order. ``reqs`` must be unfinished."""
    times = clock.observe_unfinished(reqs, now_s)
    return (decoding_from_times(reqs, times, now_s, clock),
            list(zip(map(_RID, reqs), times, strict=True)))


def decoding_from_times(reqs: Sequence, times: Sequence[_Times], now_s: float,
                        clock: RequestClock) -> list[DecodingRequest]:
    """The decode-set entries of ``reqs`` (already observed at ``now_s``, ``times`` in the same
    order, from ``clock``), oldest first."""
    clock.settle()
    out = []
    lens = zip(times, fast_scan.prompt_lens(reqs), fast_scan.output_lens(reqs), strict=True)
    for t, prompt, n in lens:
        first, last = (t.first_token_s, t.last_token_s) if t.n_out else (now_s, now_s)
        out.append(new_decoding_request(t.req_id, t.arrival_s, prompt + n, n, first, last,
                                        t.held_streak))
    out.sort(key=_BY_ARRIVAL)
    return out


def decode_snapshot(*, now_s: float, slot: int, pp_size: int, running: Sequence, held: Sequence,
                    slot_sizes: Sequence[int], kv_free: int, kv_total: int, queued_requests: int,
                    queued_prompt_tokens: int, clock: RequestClock) -> DecodeSnapshot:
    """Finished requests must already be filtered out of ``running`` and ``held``."""
    return decode_snapshot_and_rids(
        now_s=now_s, slot=slot, pp_size=pp_size, running=running, held=held,
        slot_sizes=slot_sizes, kv_free=kv_free, kv_total=kv_total,
        queued_requests=queued_requests, queued_prompt_tokens=queued_prompt_tokens,
        clock=clock)[0]


def decode_snapshot_and_rids(*, now_s: float, slot: int, pp_size: int, running: Sequence,
                             held: Sequence, slot_sizes: Sequence[int], kv_free: int,
                             kv_total: int, queued_requests: int, queued_prompt_tokens: int,
                             clock: RequestClock) -> tuple[DecodeSnapshot, dict[int, str]]:
    """``decode_snapshot`` and req_id -> rid of its requests the clock still tracks (as
    ``clock.get`` finds them afterwards), to name the trimmer's holds."""
    run, run_rids = decoding_requests(running, clock, now_s)
    hold, held_rids = decoding_requests(held, clock, now_s)
    get = clock.get
    rids = {t.req_id: rid for rid, t in run_rids + held_rids if get(rid) is t}
    return DecodeSnapshot(now_s=now_s, slot=slot, pp_size=pp_size, running=tuple(run),
                          held=tuple(hold), slot_sizes=tuple(int(s) for s in slot_sizes),
                          kv_free_tokens=int(kv_free), kv_total_tokens=int(kv_total),
                          queued_requests=queued_requests,
                          queued_prompt_tokens=queued_prompt_tokens,
                          recent_tpot_ms=tuple(clock.recent_tpot_ms)), rids


def batch_shape(is_decode: bool, prefix_lens: Sequence[int] | None,
                extend_lens: Sequence[int] | None, seq_lens: Sequence[int] | None,
                num_decode_in_mixed: int = 0) -> BatchShape:
    """A forward batch as the cost model sees it. Decode: one token per request over its context.

    Mixed (``num_decode_in_mixed`` > 0): SGLang puts the decodes last in an extend batch, each
    with extend length 1.
    """
    if is_decode:
        lens = list(map(int, seq_lens or ()))
        return BatchShape(decode_count=len(lens), decode_ctx_sum=sum(lens))
    prefixes = list(map(int, prefix_lens or ()))
    extends = list(map(int, extend_lens or ()))
    n_pre = len(extends) - num_decode_in_mixed
    pieces = tuple((p, e) for p, e in zip(prefixes[:n_pre], extends[:n_pre], strict=True)
                   if e > 0)
    dec_ctx = sum(p + 1 for p in prefixes[n_pre:])
    return BatchShape(prefill=pieces, decode_count=num_decode_in_mixed, decode_ctx_sum=dec_ctx)
