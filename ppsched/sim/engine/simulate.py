"""``simulate(config, workload)``: build the cost model and policies, run the engine, check it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ppsched.admission import AdmissionGate, build_admission
from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.core.policy_context import PolicyContext
from ppsched.core.requests import RequestSpec
from ppsched.core.slo import Slo
from ppsched.dcp.registry import build_chunk_controller
from ppsched.delay_sched.registry import build_decode_trimmer
from ppsched.metrics.early_stop import LateCount, StopRule
from ppsched.policy_config import PolicyConfig
from ppsched.sim.engine.feed import PolicyFeed
from ppsched.sim.engine.gc_pause import collector_paused
from ppsched.sim.engine.loop import Engine
from ppsched.sim.engine.result import SimResult, engine_summary
from ppsched.sim.engine.sched_state import EngineLimits
from ppsched.sim.engine.state import Req
from ppsched.sim.engine.timing import CostModel
from ppsched.sim.invariants import RunStats, check_all


class HasRequests(Protocol):
    requests: tuple[RequestSpec, ...]


class SimConfig(Protocol):
    """The settings a simulated run reads (experiments.run_config.RunConfig provides them)."""

    model: str
    hardware: str
    parallel: str
    chunk: str
    ds: str
    ds_max_consecutive: int
    slo: Slo
    seed: int
    mem_fraction_static: float
    max_running_requests: int | None
    pp_max_micro_batch_size: int | None
    mixed_chunk: bool
    max_chunk_tokens: int
    data_dir: str | None
    noise: bool
    admission: str
    prefix_cache: bool
    policy: PolicyConfig

    @property
    def pp_size(self) -> int: ...

    @property
    def tp_size(self) -> int: ...

    @property
    def max_context(self) -> int: ...

    def model_config(self) -> ModelConfig: ...

    def policy_context(self) -> PolicyContext: ...

    def to_dict(self) -> dict: ...


def default_max_running(capacity: int, max_context: int) -> int:
    """SGLang's default: min(KV tokens // 2, request-pool size), the pool being
    clamp(KV tokens / context length * 512, 2048, 4096) (model_runner's memory-based sizing)."""
    pool = min(max(capacity * 512 // max_context, 2048), 4096)
    return max(1, min(capacity // 2, pool))


def build_cost(config: SimConfig) -> CostModel:
    from ppsched.sim.cost import build_cost_model  # lazy: tests may inject their own

    return build_cost_model(config.model_config(), config.hardware, pp_size=config.pp_size,
                            tp_size=config.tp_size, data_dir=config.data_dir,
                            mem_fraction_static=config.mem_fraction_static, seed=config.seed,
                            noise=config.noise)


@dataclass(frozen=True)
class BuiltEngine:
    """An engine ready to run, with what its result needs (one box of a fleet, or the run)."""

    engine: Engine
    capacity: int
    max_running: int
    per_slot: int
    slots: int
    ds_max_consecutive: int | None  # the trimmer's hold bound; None without a trimmer


def build_engine(config: SimConfig, requests: Sequence[RequestSpec], *,
                 cost_model: CostModel | None = None) -> BuiltEngine:
    """The cost model, policies and engine ``config`` describes, for these requests (their
    prefix ids decide whether the prefix cache is on)."""
    if not callable(getattr(config, "policy_context", None)):
        raise UserError(f"simulate: config {config!r} is not a run configuration")
    model = config.model_config()
    cost = cost_model if cost_model is not None else build_cost(config)
    # policies (the delay scheduler's boundaries) see the decode graphs the engine runs
    ctx = dataclasses.replace(config.policy_context(),
                              decode_graphs=getattr(cost, "graphs", None))
    tp = config.parallel.lower().startswith("tp")

    def prefill_timer(tokens: int) -> float:
        """Stage-0 time of one prefix-free prefill (what SGLang's dynamic chunking profiles)."""
        shape = BatchShape(prefill=((0, tokens),))
        return cost.tp_step_ms(shape) if tp else cost.stage_ms(0, shape)

    knobs = config.policy
    controller = build_chunk_controller(config.chunk, ctx, prefill_timer=prefill_timer,
                                        predictive=knobs.predictive, greedy=knobs.greedy)
    trimmer = build_decode_trimmer(config.ds, ctx, config.ds_max_consecutive, knobs.ds)
    gate = _admission_gate(config, 1 if tp else config.pp_size)
    capacity = int(cost.kv_capacity_tokens)
    if capacity <= 0:
        raise UserError(f"model {model.name!r} on {config.hardware} at {config.parallel} with "
                        f"mem_fraction_static={config.mem_fraction_static}: no room for KV cache "
                        f"(capacity {capacity} tokens); expected more GPUs or a smaller model")
    max_context = config.max_context
    max_running = config.max_running_requests or default_max_running(capacity, max_context)
    slots = 1 if tp else config.pp_size
    per_slot = config.pp_max_micro_batch_size or max(1, max_running // slots)
    limits = EngineLimits(slots=slots, tp=tp, max_running=max_running, per_slot_cap=per_slot,
                          mixed_chunk=config.mixed_chunk,
                          max_chunk_tokens=config.max_chunk_tokens, max_context=max_context,
                          ds_max_consecutive=config.ds_max_consecutive,
                          prefix_cache=config.prefix_cache and any(
                              spec.prefix_block_ids for spec in requests))
    engine = Engine(cost, PolicyFeed(controller, trimmer, gate), limits)
    return BuiltEngine(engine, capacity, max_running, per_slot, slots,
                       config.ds_max_consecutive if trimmer else None)


def simulate(config: SimConfig, workload: HasRequests, *,
             cost_model: CostModel | None = None, stop: StopRule | None = None) -> SimResult:
    """One run to the end, or, with ``stop``, until its goodput verdict has certainly failed
    (then the requests it did not finish are recorded unfinished; summary ``stopped_early``)."""
    built = build_engine(config, workload.requests, cost_model=cost_model)
    count = stop.counter([s.arrival_s for s in workload.requests]) if stop else None
    with collector_paused():
        wall0, cpu0 = time.perf_counter(), time.process_time()
        built.engine.run(tuple(workload.requests), count)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        return engine_result(built, config, workload.requests, wall_s=wall, cpu_s=cpu,
                             count=count)


def engine_result(built: BuiltEngine, config: SimConfig, requests: Sequence[RequestSpec], *,
                  wall_s: float, cpu_s: float, count: LateCount | None = None) -> SimResult:
    """A finished engine's records, iterations and summary, its invariants checked against the
    requests it was given (``count``: the early-stop count the run was given, if any)."""
    engine, capacity = built.engine, built.capacity
    stopped = count is not None and count.reason != ""
    arrived = {r.rid for r in engine.reqs}
    # a stopped run records the requests that had not arrived yet too (never served)
    reqs = sorted(engine.reqs + [Req(s) for s in requests if s.req_id not in arrived],
                  key=lambda r: r.rid)
    records = [r.record() for r in reqs]
    iterations = engine.log.frame()
    st = engine.st
    stats = RunStats(kv_capacity=capacity, kv_peak=st.kv.peak,
                     generated=_generated_by_id(reqs),
                     held_left=sum(1 for m in st.members for r in m if r.held_streak),
                     max_held_streak=st.max_held_streak,
                     ds_max_consecutive=built.ds_max_consecutive,
                     stopped_early=stopped)
    check_all(requests, records, iterations, engine.log.decisions, stats)
    summary = engine_summary(records, iterations, config.slo, stages=built.slots,
                             work_s=engine.work_s, busy_s=sum(engine.pipe.busy_s),
                             end_s=engine.end_s, wall_s=wall_s, retractions=st.retractions,
                             ds_holds=st.ds_holds, max_held_streak=st.max_held_streak,
                             kv_capacity=capacity, kv_peak=st.kv.peak)
    # CPU time as well: on a shared machine wall time says as much about the neighbours.
    summary["sim_cpu_s"] = cpu_s
    summary["stopped_early"] = stopped
    summary["stop_reason"] = count.reason if count is not None else ""
    summary["sim_speed_cpu"] = engine.end_s / cpu_s if cpu_s > 0 else float("inf")
    summary["admission_rejected"] = engine.admission_rejected
    summary["context_length"] = engine.limits.max_context
    summary["context_rejected"] = engine.context_rejected
    summary["decode_sets"] = {"max_per_slot": st.max_slot_decodes,
                              "in_arrival_order": st.decode_sets_in_arrival_order}
    summary["prefix_cache"] = (st.kv.cache.summary() if st.kv.cache is not None
                               else {"enabled": False})
    summary["config"] = config.to_dict()
    summary["engine"] = {"max_running_requests": built.max_running,
                         "pp_max_micro_batch_size": built.per_slot,
                         "cost_model": _describe(engine.cost)}
    return SimResult(records, iterations, engine.log.decisions, summary, stats)


def _admission_gate(config: SimConfig, slots: int) -> AdmissionGate | None:
    controller = build_admission(config.admission, config.policy.admission)
    if controller is None:
        return None
    # The prefill budget of one microbatch: the static chunk, else the engine's cap.
    chunk = config.max_chunk_tokens
    if config.chunk.startswith("static:"):
        chunk = min(chunk, int(config.chunk.split(":", 1)[1]))
    return AdmissionGate(controller, config.slo, pp_size=slots, chunk_tokens=chunk)


def _generated_by_id(reqs: list) -> tuple[int, ...]:
    out = [0] * (max((r.rid for r in reqs), default=-1) + 1)
    for r in reqs:
        out[r.rid] = r.generated
    return tuple(out)


def _describe(cost: CostModel) -> dict:
    describe = getattr(cost, "describe", None)
    return describe() if callable(describe) else {"type": type(cost).__name__}
