"""Rank 0's scheduler loop of SGLang 0.5.23's PP event loop (its TP loop: PP with one slot).

For slot k in round robin: take slot k's previous result once it has come back (first tokens,
decode tokens, finishes), then build slot k's next batch: a prefill batch if one can be built (the
chunked request's next chunk first, then FCFS new requests within the chunk budget and free KV),
optionally mixed with the slot's decodes, else a decode batch of the slot's decode set (trimmed
by the delay-scheduling trimmer, if any). Rank 0 spends the scheduler CPU overhead before each
launch. Stage timing is in ``timing.Pipeline``; the loop itself only ever waits for a slot's
result or for the next arrival, so those are its only events (a sorted arrival list and one
return time per slot: the event order is fixed by the round robin, no general heap is needed).
"""

from __future__ import annotations

from ppsched.core.requests import RequestSpec
from ppsched.core.snapshots import StageMeasurement
from ppsched.metrics.early_stop import LateCount
from ppsched.sim.engine.batches import build_decode, build_prefill
from ppsched.sim.engine.feed import PolicyFeed
from ppsched.sim.engine.log import RunLog
from ppsched.sim.engine.sched_state import INIT_TOKEN_RATIO, QUEUE_VIEW, EngineLimits, SchedState
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
        if len(st.queue) < QUEUE_VIEW:
            st.queue_version += 1
        st.queue.append(req)
        st.queued_tokens += req.remaining

    def emit(self, req: Req, now: float) -> bool:
        """One output token for ``req`` at ``now``; True when it finished."""
        st = self.st
        if req.generated == 0:
            req.first_s = now
            st.recent_ttft.append(1000.0 * (now - req.arrival_s))
        req.generated += 1
        req.last_s = now
        st.rem_output -= 1
        if req.generated < req.output:
            return False
        req.finish_s = now
        if req.output >= 2:
            st.recent_tpot.append(req.tpot_ms())
        st.kv.release(req, now)
        st.active -= 1
        self.in_system -= 1
        if st.active == 0:
            st.new_token_ratio = INIT_TOKEN_RATIO  # idle again: SGLang resets the estimate
        if self.in_system == 0:
            self.work_s += now - self.busy_since
        return True

    def complete(self, batch: Launched, now: float) -> None:
        st = self.st
        slot = batch.slot
        members = st.members[slot]
        finished = False
        for req in batch.decodes:
            if self.emit(req, now):
                finished = True
        if finished:
            kept = [r for r in members if r.generated < r.output]
            st.decoding -= len(members) - len(kept)
            st.members[slot] = members = kept
            st.slot_ctx[slot] = sum(r.kv for r in kept)
        for piece in batch.prefill:
            if not piece.completes:
                continue
            req = piece.req
            if st.kv.cache is not None and req.spec.prefix_block_ids:
                st.kv.cache_prompt(req, now)
            req.slot = slot
            if not self.emit(req, now):
                members.append(req)
                st.slot_ctx[slot] += req.kv
                st.decoding += 1

    # --- the loop -----------------------------------------------------------------------------
    def launch(self, batch: Launched, now: float) -> float:
        shape = batch.shape
        launch_s = now + self.cost.cpu_overhead_ms(shape) / 1000.0
        runs, return_s = self.pipe.run(launch_s, shape)
        batch.return_s = return_s
        self.inflight[batch.slot] = batch
        stage0 = runs[0]
        self.feed.launched(launch_s, batch.slot, shape)
        self.feed.measured(StageMeasurement(stage0[2], batch.slot, 0, shape, stage0[4]))
        self.log.add_batch(self.st.mb_count, batch, runs)
        self.st.mb_count += 1
        return launch_s

    def run(self, specs: tuple[RequestSpec, ...], stop: LateCount | None = None) -> None:
        st, feed, log = self.st, self.feed, self.log
        slots = self.limits.slots
        arrivals = sorted(specs, key=lambda s: (s.arrival_s, s.req_id))
        n_arr = len(arrivals)
        ai = 0
        now = 0.0
        cursor = 0
        idle_turns = 0
        mark = st.progress_mark()
        while True:
            batch = self.inflight[cursor]
            if batch is not None:
                if batch.return_s > now:
                    now = batch.return_s
                self.inflight[cursor] = None
            while ai < n_arr and arrivals[ai].arrival_s <= now:
                self.arrive(arrivals[ai])
                ai += 1
            if batch is not None:
                self.complete(batch, now)
            if stop is not None and stop.decided(self.reqs, now):
                break  # the verdict has failed whatever happens next (metrics.early_stop)
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
                elif ai < n_arr:
                    now = max(now, arrivals[ai].arrival_s)
                    idle_turns = 0
                elif st.queue or st.chunked is not None or st.decoding:
                    raise SimInvariantError(
                        f"engine stuck at t={now:.3f}s: {len(st.queue)} queued, "
                        f"{st.decoding} decoding, KV free {st.kv.free()}/{st.kv.capacity}")
                else:
                    break
        feed.flush(float("inf"), st.recent_stage)
        self.end_s = now
