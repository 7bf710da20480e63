"""The Python API: simulate a policy on a workload, search its sustained goodput, build the
controllers an engine runs. Thin wrappers over ``ppsched.sim``, ``ppsched.experiments`` and the
policy registries; ``ppsched`` re-exports every name here (docs/API.md)."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence

import pandas as pd

from ppsched.admission import AdmissionConfig, AdmissionController, build_admission
from ppsched.core.errors import UserError
from ppsched.core.policy import ChunkController, DecodeTrimmer
from ppsched.core.policy_context import PolicyContext
from ppsched.dcp.registry import build_chunk_controller
from ppsched.delay_sched.registry import build_decode_trimmer
from ppsched.experiments.goodput import SearchSettings, goodput_table
from ppsched.experiments.plan import Setup
from ppsched.experiments.policies import parse_policies
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.runner import Runner
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.policy_config import PolicyConfig
from ppsched.sim.engine.result import SimResult
from ppsched.sim.engine.simulate import simulate as _simulate
from ppsched.traces import Workload
from ppsched.traces.catalog import lookup


def simulate(config: RunConfig, workload: Workload) -> SimResult:
    """Simulate one run of ``config`` (model, hardware, parallelism, chunk controller, DS,
    admission, SLO, seed) on ``workload`` (from ``load_workload``).

    Returns a ``SimResult``: ``summary`` (SLO attainment, TTFT/TPOT/E2E percentiles, throughput,
    the goodput criterion, engine figures, the config), ``requests`` (a DataFrame, one row per
    request), ``iterations`` (one row per stage and microbatch) and ``decisions`` (every chunk
    decision, every trim that held a request). The simulator's invariants are checked on the
    run; a violation raises ``ppsched.sim.SimInvariantError``.
    """
    if not isinstance(config, RunConfig):
        raise UserError(f"simulate: config {config!r}: expected a ppsched.RunConfig")
    if not isinstance(workload, Workload):
        raise UserError(f"simulate: workload {workload!r}: expected a ppsched.Workload "
                        "(ppsched.load_workload)")
    return _simulate(config, workload)


def goodput(workload: str | WorkloadSpec, policies: Sequence[str] = ("predictive",),
            slo_scales: Sequence[float] = (1.0,), *, setup: Setup | None = None,
            settings: SearchSettings | None = None,
            cache_dir: str | os.PathLike[str] | None = None, jobs: int | None = None
            ) -> pd.DataFrame:
    """The sustained goodput (req/s) of each policy at each SLO scale (docs/GOODPUT.md).

    ``workload``: a catalog name (``WORKLOAD_NAMES``) or a ``WorkloadSpec`` (a user trace:
    ``WorkloadSpec(name, rate=1.0, trace_file=..., trace_format=...)``); each search run draws
    Poisson arrivals at the rate tried. ``policies``: keys such as ``predictive``,
    ``predictive-ds``, ``greedy``, ``static-512``, ``sglang-dynamic``, ``tp4`` or
    ``oracle-static`` (the best of static 128..2048). ``setup``: model, hardware, seed, base SLO
    (default ``Setup()``: Qwen2.5-32B on 4xA100 40 GB PCIe, TTFT 2000 ms / TPOT 200 ms).
    ``settings``: the search (start rate, resolution, seeds, measurement ``window``, verify).
    Runs are cached under ``cache_dir`` (default: a temporary folder removed afterwards) and
    spread over ``jobs`` local processes (default: the CPU count).

    Returns one row per (policy, scale), the columns of ``ppsched goodput``'s goodput.csv:
    ``goodput_rps``, ``ratio_vs_2048`` (static-2048 is always searched as the baseline),
    ``runs``, ``tried`` (every rate and its verdict), the window, ...
    """
    setup = setup if setup is not None else Setup()
    settings = settings if settings is not None else SearchSettings()
    spec = _workload_spec(workload, setup.seed)
    if isinstance(policies, str) or not policies:
        raise UserError(f"goodput: policies {policies!r}: expected a non-empty sequence of "
                        "policy keys such as ('predictive', 'static-512')")
    keys = parse_policies(",".join(policies))
    scales = tuple(slo_scales)
    if not scales or any(isinstance(s, bool) or not isinstance(s, (int, float))
                         or not (math.isfinite(s) and s > 0) for s in scales):
        raise UserError(f"goodput: slo_scales {slo_scales!r}: expected a non-empty sequence "
                        "of finite numbers > 0")
    if cache_dir is not None:
        with Runner(cache_dir, jobs=jobs) as runner:
            return goodput_table(runner, setup, spec, keys, scales, settings)
    with tempfile.TemporaryDirectory(prefix="ppsched-goodput-") as tmp, \
            Runner(tmp, jobs=jobs) as runner:
        return goodput_table(runner, setup, spec, keys, scales, settings)


def _workload_spec(workload: str | WorkloadSpec, seed: int) -> WorkloadSpec:
    if isinstance(workload, WorkloadSpec):
        return workload
    if not isinstance(workload, str):
        raise UserError(f"goodput: workload {workload!r}: expected a catalog name or a "
                        "ppsched.WorkloadSpec")
    lookup(workload)  # an unknown name fails here with the catalog's message
    return WorkloadSpec(workload, rate=1.0, seed=seed)


def chunk_controller(spec: str, context: PolicyContext, *,
                     prefill_timer: Callable[[int], float] | None = None,
                     policy: PolicyConfig | None = None) -> ChunkController:
    """The chunk controller ``spec`` names: ``static:N``, ``greedy``, ``predictive``,
    ``predictive-paper``, ``greedy-paper``, ``predictive-paper-alp`` or ``sglang-dynamic``
    (which needs ``prefill_timer``: ms of one prefix-free prefill of L tokens on stage 0).
    ``context``: pipeline size, SLO, model, hardware, candidates (``RunConfig.policy_context()``
    builds one). ``policy``: the knobs (``PolicyConfig``; its predictive and greedy sections
    count here; None: the defaults). An engine calls ``decide(ChunkSnapshot)`` before each
    prefill batch and ``observe(StageMeasurement)`` after each stage iteration."""
    knobs = policy or PolicyConfig()
    return build_chunk_controller(spec, context, prefill_timer=prefill_timer,
                                  predictive=knobs.predictive, greedy=knobs.greedy)


def decode_trimmer(mode: str, context: PolicyContext, max_consecutive_holds: int = 1,
                   policy: PolicyConfig | None = None) -> DecodeTrimmer | None:
    """Delay scheduling: ``on`` builds the trimmer (decode microbatches cut to efficient batch
    sizes, a request held at most ``max_consecutive_holds`` turns in a row); ``off`` gives None
    (every decode request runs). ``policy``: the knobs (its ds section counts here). An engine
    calls ``select(DecodeSnapshot)`` per decode batch."""
    return build_decode_trimmer(mode, context, max_consecutive_holds,
                                (policy or PolicyConfig()).ds)


def admission_controller(mode: str, config: AdmissionConfig | None = None
                         ) -> AdmissionController | None:
    """Admission control: ``on`` builds a controller that rejects at arrival a request whose
    predicted TTFT misses its SLO (``config`` tunes it); ``off`` gives None (admit all)."""
    return build_admission(mode, config)
