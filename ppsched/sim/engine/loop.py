"""Rank 0's scheduler loop of SGLang 0.5.23's PP event loop (its TP loop: PP with one slot).

For slot k in round robin: take slot k's previous result once it has come back (first tokens,
decode tokens, finishes), then build slot k's next batch: a prefill batch if one can be built (the
chunked request's next chunk first, then FCFS new requests within the chunk budget and free KV),
optionally mixed with the slot's decodes, else a decode batch of the slot's decode set (trimmed
by the delay-scheduling trimmer, if any). Rank 0 spends the scheduler CPU overhead before each
launch. Stage timing is in ``timing.Pipeline``; the loop itself only ever waits for a slot's
result or for the next arrival, so those are its only events (the offered arrivals in time order
and one return time per slot: the event order is fixed by the round robin, no general heap is
needed). ``run`` offers every arrival up front; a fleet's router offers each one as it routes it,
having advanced the engine to just before its arrival time (``advance_until``), and sees the same
turns.
"""

from __future__ import annotations

from collections import deque

from ppsched.core.requests import RequestSpec
from ppsched.core.snapshots import new_stage_measurement
from ppsched.metrics.early_stop import LateCount
from ppsched.sim.engine.batches import build_decode, build_prefill
from ppsched.sim.engine.feed import PolicyFeed
from ppsched.sim.engine.log import RunLog
from ppsched.sim.engine.sched_state import INIT_TOKEN_RATIO, EngineLimits, SchedState
from ppsched.sim.engine.state import Launched, Req
from ppsched.sim.engine.timing import CostModel, Pipeline
from ppsched.sim.invariants import SimInvariantError


class Engine:
    """The event loop: arrivals, launches and results. The scheduler's state is ``st``
    (``SchedState``), the policies ``feed``; batch building lives in ``batches``."""

    def __init__(self, cost: CostModel, feed: PolicyFeed, limits: EngineLimits) -> None:
        self.cost = cost
        self.feed = feed
        self.limits = limits
        self.st = SchedState(limits, int(cost.kv_capacity_tokens))
        self.pipe = Pipeline(cost, limits.slots, tp=limits.tp)
        self.log = RunLog(limits.slots)
        self.inflight: list[Launched | None] = [None] * limits.slots
        self.reqs: list[Req] = []
        self.admission_rejected = 0
        self.context_rejected = 0
        self.in_system = 0  # arrived and not yet finished (rejections excluded)
        self.busy_since = 0.0
        self.work_s = 0.0  # total time with requests in the system (bubble denominator)
        self.end_s = 0.0
        self.start()

    # --- arrivals and results -----------------------------------------------------------------
    def _reject_reason(self, spec: RequestSpec) -> str:
        st, limits = self.st, self.limits
        need = spec.prompt_tokens + spec.output_tokens
        if need > limits.max_context:  # SGLang's tokenizer_manager: input + max_new > context
            self.context_rejected += 1
            return f"prompt+output {need} tokens > context length {limits.max_context}"
        if need >= st.kv.capacity:  # SGLang admits only while input + max_new < free KV
            return (f"prompt+output {need} tokens >= KV capacity {st.kv.capacity}: can never "
                    "be admitted")
        admission = self.feed.admission
        if admission is not None:
            verdict = admission.check(spec.arrival_s, spec.prompt_tokens, st.queued_tokens,
                                      len(st.queue) + (st.chunked is not None), st.recent_stage,
                                      st.recent_tpot)
            if not verdict.admit:
                self.admission_rejected += 1
                return verdict.reason
        return ""

    def arrive(self, spec: RequestSpec) -> None:
        st = self.st
        req = Req(spec)
        self.reqs.append(req)
        st.arrived += 1
        st.arrived_tokens += spec.prompt_tokens
        reason = self._reject_reason(spec)
        if reason:
            req.rejected = True
            req.reject_reason = reason
            return
        if self.in_system == 0:
            self.busy_since = spec.arrival_s
        self.in_system += 1
        cache = st.kv.cache
        if cache is not None and spec.prefix_block_ids:
            # what the cache holds now: the queue's view of the prompt's cost (re-matched at
            # admission, when the cache may have changed)
            req.remaining -= cache.match(spec.prefix_block_ids, spec.prompt_tokens)[1]
        st.enqueue(req)

    def emit(self, req: Req, now: float) -> bool:
        """One output token for ``req`` at ``now``; True when it finished."""
        st = self.st
        if req.generated == 0:
            req.first_s = now
            st.recent_ttft.append(1000.0 * (now - req.arrival_s))
            st.recent_samples += 1
        req.generated += 1
        req.last_s = now
        st.rem_output -= 1
        if req.generated < req.output:
            return False
        self.retire(req, now)
        return True

    def retire(self, req: Req, now: float) -> None:
        """``req`` produced its last token at ``now``: free its KV, leave the system."""
        st = self.st
        req.finish_s = now
        if req.output >= 2:
            st.recent_tpot.append(req.tpot_ms())
            st.recent_samples += 1
        st.kv.release(req, now)
        st.active -= 1
        self.in_system -= 1
        if st.active == 0:
            st.new_token_ratio = INIT_TOKEN_RATIO  # idle again: SGLang resets the estimate
        if self.in_system == 0:
            self.work_s += now - self.busy_since

    def complete(self, batch: Launched, now: float) -> None:
        st = self.st
        slot = batch.slot
        members = st.members[slot]
        decodes = batch.decodes
        if decodes:
            # one decode token each (``emit`` inlined: this loop runs for every decoding request
            # on every step); the step's KV slot joins the request's own count now (``grow``)
            finished = None
            for req in decodes:
                generated = req.generated + 1
                req.generated = generated
                req.kv += 1
                req.last_s = now
                if generated >= req.output:
                    if finished is None:
                        finished = [req]
                    else:
                        finished.append(req)
            st.rem_output -= len(decodes)
            if finished is not None:
                freed = 0  # the finished requests' context, out of the slot's sum
                for req in finished:
                    freed += req.kv
                    self.retire(req, now)
                kept = [r for r in members if r.generated < r.output]
                st.decoding -= len(members) - len(kept)
                st.members[slot] = members = kept
                st.slot_ctx[slot] -= freed  # a running total (``finish`` checks it)
        for piece in batch.prefill:
            if not piece.completes:
                continue
            req = piece.req
            if st.kv.cache is not None and req.spec.prefix_block_ids:
                st.kv.cache_prompt(req, now)
            req.slot = slot
            if not self.emit(req, now):
                if members and (members[-1].arrival_s, members[-1].rid) > (req.arrival_s,
                                                                           req.rid):
                    st.decode_sets_in_arrival_order = False
                members.append(req)
                if len(members) > st.max_slot_decodes:
                    st.max_slot_decodes = len(members)
                st.slot_ctx[slot] += req.kv
                st.decoding += 1

    # --- the loop -----------------------------------------------------------------------------
    def launch(self, batch: Launched, now: float) -> float:
        shape = batch.shape
        launch_s = now + self.cost.cpu_overhead_ms(shape) / 1000.0
        runs, return_s = self.pipe.run(launch_s, shape)
        batch.return_s = return_s
        self.inflight[batch.slot] = batch
        self.feed.launched(launch_s, batch.slot, shape)
        # stage 0's run: runs[1] its end, runs[3] its measured ms (``Pipeline.run``'s layout)
        self.feed.measured(new_stage_measurement(runs[1], batch.slot, 0, shape, runs[3]))
        self.log.add_batch(self.st.mb_count, batch, runs)
        self.st.mb_count += 1
        return launch_s

    # --- stepping: one engine driven by an outside event loop (a fleet's router) -------------
    def start(self, stop: LateCount | None = None) -> None:
        """Reset the loop's clock; then ``offer`` arrivals in time order and ``advance_until``.
        ``stop``: end the run once its TTFT verdict has certainly failed (metrics.early_stop)."""
        self.stop = stop
        self.stopped = False
        self.now = 0.0
        self.cursor = 0
        self.idle_turns = 0
        self.mark = self.st.progress_mark()
        self.pending: deque[RequestSpec] = deque()  # offered, not yet taken by a turn
        self.waiting = False  # idle on every slot: the next turn needs the next arrival

    def offer(self, spec: RequestSpec) -> None:
        """One arrival routed here; arrivals come in (arrival_s, req_id) order."""
        pending = self.pending
        if pending and (spec.arrival_s, spec.req_id) < (pending[-1].arrival_s,
                                                        pending[-1].req_id):
            raise SimInvariantError(f"request {spec.req_id} offered at {spec.arrival_s}s after "
                                    f"request {pending[-1].req_id} at {pending[-1].arrival_s}s: "
                                    "expected arrivals in time order")
        pending.append(spec)

    def next_event_time(self) -> float:
        """When the next scheduler turn starts (inf: idle until another arrival is offered)."""
        if self.waiting:
            return max(self.now, self.pending[0].arrival_s) if self.pending else float("inf")
        batch = self.inflight[self.cursor]
        return self.now if batch is None or batch.return_s <= self.now else batch.return_s

    def in_flight(self) -> int:
        """Requests offered and not yet finished or rejected (a router's own count)."""
        return len(self.pending) + self.in_system

    def token_load(self) -> int:
        """SGLang's /get_load num_tokens: KV tokens in use plus the waiting prompts' tokens."""
        st = self.st
        return (st.kv.capacity - st.kv.free() + st.queued_tokens
                + sum(s.prompt_tokens for s in self.pending))

    def advance_until(self, until: float) -> None:
        """Run every scheduler turn that starts before ``until``: an arrival offered at
        ``until`` afterwards is taken exactly where ``run`` would take it."""
        if self.stopped:
            return
        st, feed, log, pending, stop = self.st, self.feed, self.log, self.pending, self.stop
        slots = self.limits.slots
        now, cursor, idle_turns, mark = self.now, self.cursor, self.idle_turns, self.mark
        while True:
            if self.waiting:
                if not pending or max(now, pending[0].arrival_s) >= until:
                    break
                now = max(now, pending[0].arrival_s)
                idle_turns = 0
                self.waiting = False
            batch = self.inflight[cursor]
            turn_s = now if batch is None or batch.return_s <= now else batch.return_s
            if turn_s >= until:
                break
            now = turn_s
            if batch is not None:
                self.inflight[cursor] = None
            while pending and pending[0].arrival_s <= now:
                self.arrive(pending.popleft())
            if batch is not None:
                self.complete(batch, now)
            if stop is not None and stop.decided(self.reqs, now):
                self.stopped = True  # the verdict has failed whatever happens next
                break
            feed.flush(now, st.recent_stage)  # every turn, so the pending list stays short
            new = (build_prefill(st, feed, log, cursor, now)
                   or build_decode(st, feed, log, cursor, now))
            if new is not None:
                now = self.launch(new, now)
                idle_turns = 0
            else:
                if idle_turns == 0:
                    mark = st.progress_mark()
                idle_turns += 1
            cursor = (cursor + 1) % slots
            if idle_turns >= slots and not any(self.inflight):
                if st.progress_mark() != mark:
                    idle_turns = 0  # a retraction or hold changed the state: go round again
                else:
                    self.waiting = True  # resumes at the next offered arrival
        self.now, self.cursor, self.idle_turns, self.mark = now, cursor, idle_turns, mark

    def finish(self) -> None:
        """After the last arrival: run to the end, check nothing is stuck, flush the feed."""
        self.advance_until(float("inf"))
        st = self.st
        if not self.stopped and (st.queue or st.chunked is not None or st.decoding):
            raise SimInvariantError(
                f"engine stuck at t={self.now:.3f}s: {len(st.queue)} queued, "
                f"{st.decoding} decoding, KV free {st.kv.free()}/{st.kv.capacity}")
        # the slots' running context sums held: at the end (nothing in flight) each equals its
        # decode set's KV (0 once every request finished); a drift would never cancel out
        for slot, members in enumerate(() if self.stopped else st.members):
            held = sum(r.kv for r in members)
            if st.slot_ctx[slot] != held:
                raise SimInvariantError(f"slot {slot}: context sum {st.slot_ctx[slot]} != its "
                                        f"decode set's KV {held}")
        self.feed.flush(float("inf"), st.recent_stage)
        self.end_s = self.now

    def run(self, specs: tuple[RequestSpec, ...], stop: LateCount | None = None) -> None:
        """Every arrival known up front: the single-box run."""
        self.start(stop)
        for spec in sorted(specs, key=lambda s: (s.arrival_s, s.req_id)):
            self.offer(spec)
        self.finish()
