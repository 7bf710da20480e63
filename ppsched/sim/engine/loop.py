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

from collections import deque

from ppsched.admission import AdmissionGate
from ppsched.core.policy import ChunkController, DecodeTrimmer
from ppsched.core.requests import RequestSpec
from ppsched.core.snapshots import StageMeasurement
from ppsched.sim.engine.batches import Launched, build_decode, build_prefill
from ppsched.sim.engine.log import RunLog
from ppsched.sim.engine.prefix_cache import PrefixCache
from ppsched.sim.engine.state import Req
from ppsched.sim.engine.timing import CostModel, Pipeline
from ppsched.sim.engine.views import QUEUE_VIEW, QueueView
from ppsched.sim.invariants import SimInvariantError

RECENT = 64  # recent TTFT/TPOT/stage samples a snapshot carries
# SGLang global_config defaults: init_new_token_ratio 0.7, min = 0.7 * 0.14, linear decay to the
# min over 600 decode steps; after a retraction the ratio jumps to what the survivors need, with
# retract_decode_steps = 20 tokens of headroom each.
INIT_TOKEN_RATIO = 0.7
MIN_TOKEN_RATIO = INIT_TOKEN_RATIO * 0.14
TOKEN_RATIO_DECAY = (INIT_TOKEN_RATIO - MIN_TOKEN_RATIO) / 600
RETRACT_DECODE_STEPS = 20


class Engine:
    def __init__(self, cost: CostModel, controller: ChunkController,
                 trimmer: DecodeTrimmer | None, *, pp_size: int, tp: bool, max_running: int,
                 per_slot_cap: int, mixed_chunk: bool, max_chunk_tokens: int,
                 max_context: int, ds_max_consecutive: int,
                 admission: AdmissionGate | None = None, prefix_cache: bool = False) -> None:
        self.cost = cost
        self.controller = controller
        self.trimmer = trimmer
        self.trimmer_observe = getattr(trimmer, "observe", None)
        self.admission = admission  # None: admit every request that can ever fit
        self.admission_rejected = 0
        self.slots = 1 if tp else pp_size
        self.pipe = Pipeline(cost, self.slots, tp=tp)
        self.capacity = int(cost.kv_capacity_tokens)
        self.max_running = max_running
        self.per_slot_cap = per_slot_cap
        self.mixed_chunk = mixed_chunk
        self.max_chunk_tokens = max_chunk_tokens
        self.max_context = max_context
        self.ds_max_consecutive = ds_max_consecutive
        # KV: ``kv_used`` is allocated; ``kv_reserved`` is the rest of the chunked request's prompt,
        # set aside at admission so its later chunks never wait or fail.
        self.kv_used = 0  # incl. the prefix cache's tokens (shared KV)
        self.kv_reserved = 0
        # SGLang's radix cache; None for traces without prefix identity (or when switched off)
        self.cache: PrefixCache | None = PrefixCache() if prefix_cache else None
        self.context_rejected = 0
        self.kv_peak = 0
        self.queue: deque[Req] = deque()
        self.queued_tokens = 0  # remaining prefill tokens of the queue and the chunked request
        self.queue_version = 0  # bumped whenever the head of the queue (the snapshot view) changes
        self.chunked: Req | None = None
        self.members: list[list[Req]] = [[] for _ in range(self.slots)]  # decode set per slot
        self.slot_ctx = [0] * self.slots  # KV tokens of each slot's decode set
        self.decoding = 0  # requests in any decode set
        self.active = 0  # admitted, not finished, not retracted (SGLang's running count)
        self.rem_output = 0  # output tokens still to come from the active requests
        self.new_token_ratio = INIT_TOKEN_RATIO
        self.inflight: list[Launched | None] = [None] * self.slots
        self.mb_count = 0
        self.arrived = 0
        self.arrived_tokens = 0
        self.recent_ttft: deque[float] = deque(maxlen=RECENT)
        self.recent_tpot: deque[float] = deque(maxlen=RECENT)
        self.recent_stage: deque[float] = deque(maxlen=RECENT)
        self.pending_obs: deque[tuple[float, StageMeasurement]] = deque()
        self.retractions = 0
        self.ds_holds = 0
        self.max_held_streak = 0
        self.in_system = 0  # arrived and not yet finished (rejections excluded)
        self.busy_since = 0.0
        self.work_s = 0.0  # total time with requests in the system (bubble denominator)
        self.log = RunLog(self.slots)
        self.queue_view = QueueView()
        self.reqs: list[Req] = []

    # --- KV -----------------------------------------------------------------------------------
    def kv_free(self) -> int:
        """Free KV for admission and growth: unallocated plus the cache's evictable tokens."""
        free = self.capacity - self.kv_used - self.kv_reserved
        return free + self.cache.evictable if self.cache is not None else free

    def allocate(self, tokens: int, *, reserved: bool = False) -> None:
        if reserved:
            self.kv_reserved -= tokens
        if self.cache is not None:
            short = self.kv_used + tokens + self.kv_reserved - self.capacity
            if short > 0:  # evict unreferenced cached prefixes, LRU first
                self.kv_used -= self.cache.evict(short)
        self.kv_used += tokens
        if self.kv_used + self.kv_reserved > self.capacity or self.kv_reserved < 0:
            raise SimInvariantError(f"KV over capacity: used {self.kv_used} + reserved "
                                    f"{self.kv_reserved} > {self.capacity}")
        if self.kv_used > self.kv_peak:
            self.kv_peak = self.kv_used

    # --- policies -----------------------------------------------------------------------------
    def flush_observations(self, now: float) -> None:
        """Feed stage-0 measurements that have completed by ``now`` (never the future)."""
        pending = self.pending_obs
        while pending and pending[0][0] <= now:
            measurement = pending.popleft()[1]
            self.controller.observe(measurement)
            if self.trimmer_observe is not None:
                self.trimmer_observe(measurement)
            if self.admission is not None:
                self.admission.observe(measurement)
            self.recent_stage.append(measurement.measured_ms)

    # --- arrivals and results -----------------------------------------------------------------
    def arrive(self, spec: RequestSpec) -> None:
        req = Req(spec)
        self.reqs.append(req)
        self.arrived += 1
        self.arrived_tokens += spec.prompt_tokens
        need = spec.prompt_tokens + spec.output_tokens
        if need > self.max_context:  # SGLang's tokenizer_manager: input + max_new > context_len
            req.rejected = True
            req.reject_reason = (f"prompt+output {need} tokens > context length "
                                 f"{self.max_context}")
            self.context_rejected += 1
        elif need >= self.capacity:  # SGLang admits only while input + max_new < free KV
            req.rejected = True
            req.reject_reason = (f"prompt+output {need} tokens >= KV capacity {self.capacity}: "
                                 "can never be admitted")
        elif self.admission is not None:
            verdict = self.admission.check(
                spec.arrival_s, spec.prompt_tokens, self.queued_tokens,
                len(self.queue) + (self.chunked is not None), self.recent_stage, self.recent_tpot)
            if not verdict.admit:
                req.rejected = True
                req.reject_reason = verdict.reason
                self.admission_rejected += 1
        if req.rejected:
            return
        if self.in_system == 0:
            self.busy_since = spec.arrival_s
        self.in_system += 1
        if len(self.queue) < QUEUE_VIEW:
            self.queue_version += 1
        if self.cache is not None and spec.prefix_block_ids:
            # what the cache holds now: the queue's view of the prompt's cost (re-matched at
            # admission, when the cache may have changed)
            req.remaining -= self.cache.match(spec.prefix_block_ids, spec.prompt_tokens)[1]
        self.queue.append(req)
        self.queued_tokens += req.remaining

    def emit(self, req: Req, now: float) -> bool:
        """One output token for ``req`` at ``now``; True when it finished."""
        if req.generated == 0:
            req.first_s = now
            self.recent_ttft.append(1000.0 * (now - req.arrival_s))
        req.generated += 1
        req.last_s = now
        self.rem_output -= 1
        if req.generated < req.output:
            return False
        req.finish_s = now
        if req.output >= 2:
            self.recent_tpot.append(req.tpot_ms())
        self.release_kv(req, now)
        self.active -= 1
        self.in_system -= 1
        if self.active == 0:
            self.new_token_ratio = INIT_TOKEN_RATIO  # idle again: SGLang resets the estimate
        if self.in_system == 0:
            self.work_s += now - self.busy_since
        return True

    def complete(self, batch: Launched, now: float) -> None:
        slot = batch.slot
        members = self.members[slot]
        finished = False
        for req in batch.decodes:
            if self.emit(req, now):
                finished = True
        if finished:
            kept = [r for r in members if r.generated < r.output]
            self.decoding -= len(members) - len(kept)
            self.members[slot] = members = kept
            self.slot_ctx[slot] = sum(r.kv for r in kept)
        for req, _prefix, _extend, completes in batch.prefill:
            if completes and self.cache is not None and req.spec.prefix_block_ids:
                self.cache_prompt(req, now)
            if completes and not self.emit(req, now):
                req.slot = slot
                members.append(req)
                self.slot_ctx[slot] += req.kv
                self.decoding += 1
            elif completes:
                req.slot = slot

    # --- prefix cache -------------------------------------------------------------------------
    def match_and_lock(self, req: Req, now: float) -> int:
        """At admission: re-match ``req``'s prompt against the cache and lock the matched path;
        its remaining prefill drops to the uncached part. Returns the tokens the lock took out
        of the evictable pool (free KV lost)."""
        assert self.cache is not None
        spec = req.spec
        path, cached = self.cache.match(spec.prefix_block_ids, spec.prompt_tokens)
        remaining = req.prefill_len - cached
        if remaining != req.remaining:
            self.queued_tokens += remaining - req.remaining
            req.remaining = remaining
            self.queue_version += 1  # the head's view changed
        self.cache.record_lookup(req.prefill_len, cached)
        req.cache_path = path
        req.kv = req.cached = sum(n.tokens for n in path)
        return self.cache.lock(path, now)

    def unlock_unadmitted(self, req: Req, now: float) -> None:
        """Admission failed after the match: undo the lock (the request stays queued)."""
        assert self.cache is not None
        self.cache.unlock(req.cache_path, now)
        self.cache.lookup_tokens -= req.prefill_len
        self.cache.hit_tokens -= req.prefill_len - req.remaining
        req.cache_path = []
        req.kv = req.cached = 0

    def cache_prompt(self, req: Req, now: float) -> None:
        """Prompt prefilled: its blocks join the tree (locked by it), shared from now on."""
        assert self.cache is not None
        path, duplicate = self.cache.insert(req.spec.prefix_block_ids, req.spec.prompt_tokens,
                                            req.cache_path, now)
        # new blocks move from the request's own KV to the tree (used KV unchanged); blocks
        # someone else cached meanwhile are shared and the request's copy is freed. The
        # request's context (kv, what attention reads) is the same either way.
        self.kv_used -= duplicate
        req.cache_path = path
        req.cached = sum(n.tokens for n in path)

    def release_kv(self, req: Req, now: float) -> None:
        """Free the request's own KV; unlock its cached prefix (kept in the tree)."""
        self.kv_used -= req.kv - req.cached
        if req.cache_path:
            assert self.cache is not None
            self.cache.unlock(req.cache_path, now)
            req.cache_path = []
        req.kv = req.cached = 0

    def retract(self, req: Req, now: float) -> None:
        """SGLang's retract_decode: free the KV, requeue for recompute of prompt + generated."""
        self.slot_ctx[req.slot] -= req.kv
        self.release_kv(req, now)
        req.remaining = req.prefill_len
        req.retractions += 1
        req.held_streak = 0
        self.retractions += 1
        self.active -= 1
        self.rem_output -= req.output - req.generated
        self.decoding -= 1
        # At the head of the queue: it arrived before (almost) everything still waiting.
        self.queue.appendleft(req)
        self.queue_version += 1
        self.queued_tokens += req.remaining

    def progress_mark(self) -> tuple[int, int, int]:
        """Changes whenever an idle turn still altered the state (retractions, holds, queue)."""
        return self.retractions, self.ds_holds, self.queue_version

    def decay_ratio(self) -> None:
        self.new_token_ratio = max(self.new_token_ratio - TOKEN_RATIO_DECAY, MIN_TOKEN_RATIO)

    def retracted_ratio(self, survivors: list[Req]) -> None:
        total = sum(r.output for r in survivors)
        decoded = sum(r.generated for r in survivors)
        estimate = (decoded + RETRACT_DECODE_STEPS * len(survivors)) / total if total else 1.0
        self.new_token_ratio = min(1.0, estimate)

    # --- the loop -----------------------------------------------------------------------------
    def launch(self, batch: Launched, now: float) -> float:
        shape = batch.shape
        launch_s = now + self.cost.cpu_overhead_ms(shape) / 1000.0
        runs, return_s = self.pipe.run(launch_s, shape)
        batch.return_s = return_s
        self.inflight[batch.slot] = batch
        stage0 = runs[0]
        self.pending_obs.append((stage0[2], StageMeasurement(stage0[2], batch.slot, 0, shape,
                                                             stage0[4])))
        self.log.add_batch(self.mb_count, batch, runs)
        self.mb_count += 1
        return launch_s

    def run(self, specs: tuple[RequestSpec, ...]) -> None:
        arrivals = sorted(specs, key=lambda s: (s.arrival_s, s.req_id))
        n_arr = len(arrivals)
        ai = 0
        now = 0.0
        cursor = 0
        idle_turns = 0
        mark = self.progress_mark()
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
            self.flush_observations(now)  # every turn, so the pending list stays short
            new = build_prefill(self, cursor, now) or build_decode(self, cursor, now)
            if new is not None:
                now = self.launch(new, now)
                idle_turns = 0
            else:
                if idle_turns == 0:
                    mark = self.progress_mark()
                idle_turns += 1
            cursor = (cursor + 1) % self.slots
            if idle_turns >= self.slots and not any(self.inflight):
                if self.progress_mark() != mark:
                    idle_turns = 0  # a retraction or hold changed the state: go round again
                elif ai < n_arr:
                    now = max(now, arrivals[ai].arrival_s)
                    idle_turns = 0
                elif self.queue or self.chunked is not None or self.decoding:
                    raise SimInvariantError(
                        f"engine stuck at t={now:.3f}s: {len(self.queue)} queued, "
                        f"{self.decoding} decoding, KV free {self.kv_free()}/{self.capacity}")
                else:
                    break
        self.flush_observations(float("inf"))
        self.end_s = now
