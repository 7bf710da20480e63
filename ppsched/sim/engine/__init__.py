"""The SGLang-style PP/TP engine: scheduler loop, batch building, stage timing, logs.

Modelling choices (SGLang 0.5.23 unless said otherwise):
- PP: ``pp_size`` slots (``pp_async_batch_depth`` = 0); rank 0 serves slots in strict round
  robin and blocks on the next slot's result, so requests arriving meanwhile wait and then join
  that slot (this is where the D-D imbalance comes from). TP is the same loop with one slot and
  one "stage" timed by ``tp_step_ms``.
- Prefill before decode: a slot whose prefill batch can be built skips its decodes that turn
  unless ``mixed_chunk`` (then its decodes ride along and spend chunk budget; no trimming).
- Admission (PrefillAdder): FCFS, the head never overtaken; a request needs input + remaining
  output < free KV - (remaining output of running requests) x new_token_ratio (0.7 decaying to
  0.098 over 600 decode steps, reset to the retraction estimate, +20 tokens each). The
  CLIP_MAX_NEW_TOKENS=4096 clip is not modelled. The chunked request's whole prompt is reserved
  at admission so its later chunks never wait.
- Retraction (retract_decode): fewest generated tokens first, ties longest prompt, then newest;
  KV freed, requeued at the head for recompute of prompt + generated.
- Rejected at arrival: prompt + output > context length, or >= KV capacity (never admittable);
  with ``admission="on"`` also what ``ppsched.admission`` predicts cannot meet its TTFT SLO.
- Scheduler CPU overhead is spent on rank 0 before each launch; the result returns to rank 0
  over one link latency; tokens are stamped when rank 0 processes the result.
- Prefix cache (RadixAttention, ``prefix_cache.py``) for traces with prefix block ids: matched at
  admission, locked while running, prompt blocks inserted once prefilled, LRU eviction of
  unlocked leaves when KV runs short; a chunk costs only the uncached part (docs/COST_MODEL.md).

Layout: ``loop.Engine`` (events) -> ``batches`` (building a slot's batch) -> ``views`` (policy
snapshots) -> ``sched_state.SchedState`` (the scheduler's mutable state) -> ``kv.KvPool`` (KV and
the prefix cache) -> ``state`` (requests, typed prefill pieces, launched microbatches); the
policies and their measurement feed are ``feed.PolicyFeed``. No module imports one above it.
"""
