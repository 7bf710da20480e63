"""Chunk controllers: per-decision cost in CPython (budget <= 50 us), and end-to-end on the sim.

Usage: .venv/bin/python bench/bench_dcp.py [--calls N]
       .venv/bin/python bench/bench_dcp.py --bound --rates 6 [--workload sharegpt]
       .venv/bin/python bench/bench_dcp.py --e2e [--mixed] --chunks greedy,predictive
              --rates 3,4,5 --seeds 0,1 [--requests 1000]
--e2e runs --workload (default azure-conv) Poisson on qwen2.5-32b PP4 (a100-40g-pcie) at SLO
scale 1.0 and prints one line per (chunk, rate, seed) and a goodput summary (highest rate on the
grid where every seed and every lower rate meets P90 TTFT <= 2000 ms and P90 TPOT <= 200 ms).
Two figures per controller: 'per call' with the controller's own cadence (what the scheduler pays
on average per iteration), and 'full decision' where every call is a decision iteration (the
worst single call); "predictive@mixed" is predictive after it has seen a mixed batch (its
mixed-loop SLO rule; like every predictive rule it decides every 2*pp
iterations, so 'full decision' is its cost per decision); "+roomy-kv" runs it with 10% of the KV
cache in use instead of 80%, where a size larger than the price's choice fits the KV budget and
the rule checks every queued request's TTFT deadline. Snapshots are realistic in size: a
32-request queue view, 4 slots of ~100 decodes, 64 TTFT/TPOT samples. Predictive uses ALP when
ppsched.predictor provides it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.core.batch import BatchShape  # noqa: E402
from ppsched.core.models import BUILTIN_MODELS  # noqa: E402
from ppsched.core.policy_context import PolicyContext  # noqa: E402
from ppsched.core.slo import Slo  # noqa: E402
from ppsched.core.snapshots import (  # noqa: E402
    ChunkSnapshot,
    QueuedRequest,
    SlotLoad,
    StageMeasurement,
)
from ppsched.dcp.registry import build_chunk_controller, default_predictor  # noqa: E402


def snapshots(n: int, rng: random.Random) -> list[ChunkSnapshot]:
    out = []
    for i in range(n):
        now = 100.0 + 0.03 * i
        queue = tuple(QueuedRequest(j, now - rng.uniform(0, 2.5), p, p)
                      for j, p in enumerate(rng.randint(100, 4000) for _ in range(32)))
        queue = tuple(sorted(queue, key=lambda q: q.arrival_s))
        chunked = QueuedRequest(999, now - 3, 6000, rng.randint(100, 5000))
        slots = tuple(SlotLoad(s, d, d * rng.randint(500, 2000))
                      for s, d in enumerate(rng.randint(50, 150) for _ in range(4)))
        out.append(ChunkSnapshot(
            now_s=now, iteration=i, slot=i % 4, pp_size=4, queue=queue, queued_requests=200,
            queued_prompt_tokens=400_000, chunked=chunked, slots=slots, kv_free_tokens=40_000,
            kv_total_tokens=200_000,
            recent_ttft_ms=tuple(rng.uniform(100, 3000) for _ in range(64)),
            recent_tpot_ms=tuple(rng.uniform(50, 250) for _ in range(64)),
            recent_stage_ms=tuple(rng.uniform(20, 60) for _ in range(16)),
            arrived_requests_total=1000 + i, arrived_prompt_tokens_total=1_000_000 + 1000 * i,
            max_chunk_tokens=2048))
    return out


def bench(spec: str, ctx: PolicyContext, snaps: list[ChunkSnapshot], full: bool, **kw) -> float:
    roomy = spec.endswith("+roomy-kv")  # a cache with room: the SLO rule checks the deadlines
    spec = spec.removesuffix("+roomy-kv")
    mixed = spec.endswith("@mixed")  # the controller has seen a mixed batch: its mixed-loop rule
    ctl = build_chunk_controller(spec.removesuffix("@mixed"), ctx, **kw)
    if mixed:
        ctl.observe(StageMeasurement(0.0, 0, 0, BatchShape(((0, 156),), 100, 100_000), 30.0))
    if full or roomy:  # every call lands on a decision iteration
        snaps = [ChunkSnapshot(**{**{f: getattr(s, f) for f in s.__slots__},
                                  "iteration": 1000 * k if full else s.iteration,
                                  "kv_free_tokens": 180_000 if roomy else s.kv_free_tokens})
                 for k, s in enumerate(snaps)]
    t0 = time.process_time()  # CPU time: the machine is shared, wall time counts waiting
    for s in snaps:
        ctl.decide(s)
    return 1e6 * (time.process_time() - t0) / len(snaps)


def e2e(args: argparse.Namespace) -> int:
    from ppsched.experiments.run_config import RunConfig
    from ppsched.experiments.workload_spec import WorkloadSpec, load
    from ppsched.sim import simulate

    rates = [float(r) for r in args.rates.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    mode = "mixed" if args.mixed else "plain"
    print(f"{args.workload} qwen2.5-32b pp4, {args.requests} requests, loop={mode}; "
          "P90 TTFT / P90 TPOT / P90 E2E ms, iteration P90 ms, SLO attainment, goodput_ok")
    for chunk in args.chunks.split(","):
        ok_at: dict[float, bool] = {}
        for rate in rates:
            for seed in seeds:
                cfg = RunConfig(model="qwen2.5-32b", parallel="pp4", chunk=chunk, seed=seed,
                                mixed_chunk=args.mixed)
                wl = load(WorkloadSpec(args.workload, rate=rate, num_requests=args.requests,
                                       seed=seed))
                s = simulate(cfg, wl).summary
                ok_at[rate] = ok_at.get(rate, True) and bool(s["goodput_ok"])
                print(f"{mode} {chunk:<17} rate {rate:4.2f} seed {seed} "
                      f"{s['ttft_ms']['p90']:8.0f} {s['tpot_ms']['p90']:6.1f} "
                      f"{s['e2e_ms']['p90']:7.0f} it {s['iteration_ms']['p90']:5.1f} "
                      f"att {s['slo_attainment']:.3f} ok {int(s['goodput_ok'])}", flush=True)
        good = 0.0
        for rate in rates:
            if not ok_at[rate]:
                break
            good = rate
        print(f"GOODPUT {mode} {chunk}: {good:g} req/s (grid {args.rates})", flush=True)
    return 0


def bound(args: argparse.Namespace) -> int:
    """Mean-round lower bound at one rate: the cheapest mix of turn kinds (decode-only, or a budget
    of c batched tokens carrying d decodes) whose mean prefill supply covers the mean prompt-token
    arrival rate, stage times from the simulator's own cost model. Queueing is ignored (the mix may
    run at utilisation 1), so no controller can do better in the mean."""
    import numpy as np
    from scipy.optimize import linprog

    from ppsched.experiments.run_config import RunConfig
    from ppsched.experiments.workload_spec import WorkloadSpec, load
    from ppsched.sim.engine.simulate import build_cost

    cost = build_cost(RunConfig(model="qwen2.5-32b", parallel="pp4", chunk="static:256",
                                mixed_chunk=True))
    rate = float(args.rates.split(",")[0])
    reqs = load(WorkloadSpec(args.workload, rate=rate, num_requests=args.requests, seed=0)).requests
    prompt = float(np.mean([r.prompt_tokens for r in reqs]))
    ctx = int(prompt + np.mean([r.output_tokens for r in reqs]) / 2)
    demand = rate * prompt / 1000.0  # tokens/ms

    def stage(shape: BatchShape) -> float:  # the slowest stage paces the pipeline
        return max(cost.stage_ms(k, shape) for k in range(4))

    print(f"{args.workload} {rate:g} req/s: demand {demand:.2f} prompt tokens/ms, ctx {ctx}")
    for d in (20, 30, 40, 50):
        pts = [(0, stage(BatchShape((), d, d * ctx)))]
        pts += [(c - d, stage(BatchShape(((ctx // 2, c - d),), d, d * ctx)))
                for c in range(128, 1025, 128)]
        p = np.array([x[0] for x in pts], dtype=float)
        s = np.array([x[1] for x in pts])
        best = linprog(s, A_ub=[-(p - demand * s)], b_ub=[0], A_eq=[np.ones_like(s)], b_eq=[1],
                       bounds=(0, 1))
        at256 = [0, 2]  # decode-only turns and 256-token budgets: what static:256 can mix
        fixed = linprog(s[at256], A_ub=[-(p[at256] - demand * s[at256])], b_ub=[0],
                        A_eq=[[1, 1]], b_eq=[1], bounds=(0, 1))
        mix = ", ".join(f"{int(p[k]) + d}: {v:.2f}" for k, v in enumerate(best.x) if v > 1e-3)
        print(f"  {d} decodes/microbatch: decode-only round {4 * s[0]:.1f} ms; best mix round "
              f"{4 * best.fun:.1f} ms ({mix}); decode-only + 256 round {4 * fixed.fun:.1f} ms")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--e2e", action="store_true", help="end-to-end runs on the simulator")
    ap.add_argument("--mixed", action="store_true", help="SGLang --enable-mixed-chunk loop")
    ap.add_argument("--bound", action="store_true",
                    help="mixed-loop mean-round lower bound at the first of --rates")
    ap.add_argument("--chunks", default="static:256,predictive,predictive-paper")
    ap.add_argument("--rates", default="3,4,5")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--workload", default="azure-conv", help="trace name (e.g. sharegpt)")
    args = ap.parse_args()
    if args.e2e:
        return e2e(args)
    if args.bound:
        return bound(args)
    ctx = PolicyContext(pp_size=4, slo=Slo(), model=BUILTIN_MODELS["qwen2.5-32b"])
    snaps = snapshots(args.calls, random.Random(0))
    try:
        predictor_factory = lambda: default_predictor(ctx)  # noqa: E731
        predictor_factory()
        pred_label = "ALP (ppsched.predictor)"
    except Exception as exc:  # noqa: BLE001 - report and fall back to a linear stand-in
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from test_dcp_support import LinearFake
        predictor_factory = LinearFake
        pred_label = f"linear stand-in (ALP unavailable: {exc})"

    def timer(n: int) -> float:
        return 1e-6 * n * n + 0.03 * n + 4.0

    print(f"python {sys.version.split()[0]}; {args.calls} calls; predictor: {pred_label}")
    print(f"{'controller':<18} {'us/call':>9} {'us/full decision':>17}")
    for spec in ("static:512", "greedy", "predictive", "predictive@mixed",
                 "predictive@mixed+roomy-kv", "predictive-paper", "sglang-dynamic"):
        kw = {}
        if spec.startswith("predictive"):
            kw["predictor"] = None
        if spec == "sglang-dynamic":
            kw["prefill_timer"] = timer
        row = []
        for full in (False, True):
            if spec.startswith("predictive"):
                kw["predictor"] = predictor_factory()
            row.append(bench(spec, ctx, snaps, full, **kw))
        print(f"{spec:<18} {row[0]:>9.2f} {row[1]:>17.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
