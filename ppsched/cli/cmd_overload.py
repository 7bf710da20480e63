"""`ppsched overload`: every policy at a multiple of the goodput rate; stability and admission.

Each (policy, admission) pair replays the same seeded Poisson workload at ``factor x base
rate`` for ``minutes`` of arrivals on the simulator, then lets it drain. Reported per run: no
crash (the engine's invariant checks run inside every simulation); peak memory (``--memory rss``:
each run in a fresh forked process, its peak RSS and the growth over the RSS at fork; ``heap``:
tracemalloc's peak Python heap, exact but about ten times slower); queue growth (requests
waiting for their first token, sampled every ``--sample-s``); rejection rate; SLO-meeting
requests per second; the admitted requests' P90 TTFT/TPOT. ``--size ci`` is the small version
the tests run, ``--size soak`` the 10-minute one behind ``make soak``; explicit flags override a
size's numbers.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import multiprocessing
import resource
import time
import tracemalloc
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.experiments.policies import get_policy, parse_policies
from ppsched.policy_config import PolicyConfig, load_policy_config

OVERLOAD_POLICIES = ("static-2048", "greedy", "predictive", "sglang-dynamic", "predictive-ds",
                     "tp4")
# PP static-2048's goodput on azure-conv, Qwen2.5-32B, 4xA100-40G, paper SLO: measured with
# `ppsched goodput --policies static-2048 --workload azure-conv --slo-scales 1` (see
# bench/reliability.md). 10x of it is the overload the issue asks for.
BASE_RATE_RPS = 2.36
SIZES: dict[str, dict[str, float]] = {
    "ci": {"minutes": 0.5, "factor": 10.0},
    "soak": {"minutes": 10.0, "factor": 10.0},
}
COLUMNS = ("policy", "admission", "requests", "admitted", "rejected_frac", "goodput_rps",
           "admitted_attainment", "p90_ttft_ms", "p90_tpot_ms", "queue_max", "queue_at_end",
           "queue_growth_per_min", "drain_s", "peak_mb", "mem_growth_mb", "wall_s")


@dataclass(frozen=True, slots=True)
class OverloadSpec:
    workload: str = "azure-conv"
    base_rate: float = BASE_RATE_RPS
    factor: float = 10.0
    minutes: float = 10.0
    seed: int = 0
    sample_s: float = 10.0
    model: str = "qwen2.5-32b"
    hardware: str = "a100-40g-pcie"
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)  # --policy-config

    def __post_init__(self) -> None:
        for name in ("base_rate", "factor", "minutes", "sample_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"--{name.replace('_', '-')} {value!r}: expected a finite "
                                "number > 0")

    @property
    def rate(self) -> float:
        return self.base_rate * self.factor

    @property
    def duration_s(self) -> float:
        return 60.0 * self.minutes


def queue_series(records: list[RequestRecord], times: np.ndarray) -> np.ndarray:
    """Admitted requests that have arrived but not yet had their first token, at each time."""
    adm = [r for r in records if not r.rejected]
    arrival = np.sort(np.fromiter((r.arrival_s for r in adm), float, len(adm)))
    first = np.sort(np.fromiter((r.first_token_s for r in adm), float, len(adm)))
    return np.searchsorted(arrival, times, side="right") - np.searchsorted(first, times,
                                                                           side="right")


def growth_per_min(times: np.ndarray, queue: np.ndarray) -> float:
    """Least-squares slope of the queue over the second half of the arrival window."""
    half = times >= times[-1] / 2
    if half.sum() < 2:
        return 0.0
    return float(np.polyfit(times[half], queue[half], 1)[0] * 60.0)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_one(spec: OverloadSpec, policy_key: str, admission: str, workload, *,
            memory: str = "rss") -> dict:
    """One simulation, measured here (``memory='heap'``: tracemalloc) or in a fresh forked
    child (``'rss'``: peak RSS of that process alone)."""
    if memory == "heap":
        tracemalloc.start()
        try:
            row = _simulate_row(spec, policy_key, admission, workload)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return {**row, "peak_mb": peak / 2**20, "mem_growth_mb": peak / 2**20}
    if memory != "rss":
        raise UserError(f"--memory {memory!r}: expected rss or heap")
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:  # one run per process
        return pool.submit(_rss_child, spec, policy_key, admission, workload).result()


def _rss_child(spec: OverloadSpec, policy_key: str, admission: str, workload) -> dict:
    before = _rss_mb()
    row = _simulate_row(spec, policy_key, admission, workload)
    peak = _rss_mb()
    return {**row, "peak_mb": peak, "mem_growth_mb": peak - before}


def _simulate_row(spec: OverloadSpec, policy_key: str, admission: str, workload) -> dict:
    from ppsched.experiments.plan import Setup, make_config
    from ppsched.metrics import summarize
    from ppsched.sim import simulate

    config = make_config(get_policy(policy_key), Setup(model=spec.model, hardware=spec.hardware,
                                                       seed=spec.seed, policy=spec.policy))
    config = dataclasses.replace(config, admission=admission)
    wall0 = time.perf_counter()
    result = simulate(config, workload)
    wall = time.perf_counter() - wall0
    records = result.records
    admitted = [r for r in records if not r.rejected]
    adm = summarize(admitted, config.slo) if admitted else None
    met = summarize(records, config.slo)["slo_attainment"] * len(records)
    times = np.arange(0.0, spec.duration_s + 1e-9, spec.sample_s)
    queue = queue_series(records, times)
    last_arrival = max(r.arrival_s for r in records)
    return {
        "policy": policy_key, "admission": admission, "requests": len(records),
        "admitted": len(admitted), "rejected_frac": 1.0 - len(admitted) / len(records),
        "goodput_rps": met / spec.duration_s,
        "admitted_attainment": adm["slo_attainment"] if adm else math.nan,
        "p90_ttft_ms": adm["ttft_ms"]["p90"] if adm else math.nan,
        "p90_tpot_ms": adm["tpot_ms"]["p90"] if adm else math.nan,
        "queue_max": int(queue.max()), "queue_at_end": int(queue[-1]),
        "queue_growth_per_min": growth_per_min(times, queue),
        "drain_s": result.summary["sim_end_s"] - last_arrival,
        "wall_s": wall,
    }


def run_overload(spec: OverloadSpec, policies: tuple[str, ...], admissions: tuple[str, ...],
                 *, memory: str = "rss", echo: bool = False) -> list[dict]:
    from ppsched.traces import load_workload

    workload = load_workload(spec.workload, rate=spec.rate, duration_s=spec.duration_s,
                             seed=spec.seed)
    rows = []
    for key in policies:
        for admission in admissions:
            row = run_one(spec, key, admission, workload, memory=memory)
            rows.append(row)
            if echo:
                print(format_row(row), flush=True)
    return rows


def format_header() -> str:
    return (f"{'policy':15s} {'adm':3s} {'reqs':>6s} {'admit':>6s} {'rej%':>5s} "
            f"{'goodput':>7s} {'att%':>5s} {'p90TTFT':>9s} {'p90TPOT':>8s} {'qmax':>6s} "
            f"{'qend':>6s} {'q/min':>7s} {'drain_s':>8s} {'peakMB':>7s} {'+MB':>6s} {'wall_s':>6s}")


def format_row(r: dict) -> str:
    return (f"{r['policy']:15s} {r['admission']:3s} {r['requests']:6d} {r['admitted']:6d} "
            f"{100 * r['rejected_frac']:5.1f} {r['goodput_rps']:7.2f} "
            f"{100 * r['admitted_attainment']:5.1f} {r['p90_ttft_ms']:9.0f} "
            f"{r['p90_tpot_ms']:8.0f} {r['queue_max']:6d} {r['queue_at_end']:6d} "
            f"{r['queue_growth_per_min']:7.1f} {r['drain_s']:8.1f} {r['peak_mb']:7.1f} "
            f"{r['mem_growth_mb']:6.1f} "
            f"{r['wall_s']:6.1f}")


def _choices(text: str, allowed: tuple[str, ...], flag: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise UserError(f"{flag} {text!r}: expected a comma-separated subset of "
                        f"{', '.join(allowed)}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "overload", help="every policy at 10x the goodput rate: stability, admission control",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    parser.add_argument("--size", default="ci", help=f"preset: {', '.join(SIZES)} (default ci)")
    parser.add_argument("--policies", default=",".join(OVERLOAD_POLICIES),
                        help="comma-separated policy keys (default: the six of the issue)")
    parser.add_argument("--admission", default="off,on", help="off, on or off,on (default)")
    parser.add_argument("--workload", default="azure-conv")
    parser.add_argument("--base-rate", type=float, default=BASE_RATE_RPS,
                        help=f"the goodput rate in req/s the factor multiplies "
                             f"(default {BASE_RATE_RPS}: PP static-2048 on azure-conv)")
    parser.add_argument("--factor", type=float, default=None, help="overload factor (size's)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="minutes of arrivals (size's)")
    parser.add_argument("--sample-s", type=float, default=10.0,
                        help="queue sampling period in simulated seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="qwen2.5-32b")
    parser.add_argument("--hardware", default="a100-40g-pcie")
    parser.add_argument("--memory", default="rss",
                        help="rss (each run in a forked process; default) or heap (tracemalloc)")
    parser.add_argument("--policy-config", default=None, metavar="FILE",
                        help="JSON of policy knobs over the defaults (admission's among them; "
                             "`ppsched policy-config` prints them)")
    parser.add_argument("--out", default=None, help="also write overload.csv and config.json here")
    parser.set_defaults(handler=overload_command)


def overload_command(args: argparse.Namespace) -> int:
    if args.size not in SIZES:
        raise UserError(f"--size {args.size!r}: expected one of {', '.join(SIZES)}")
    if args.seed < 0:
        raise UserError(f"--seed {args.seed}: expected an integer >= 0")
    preset = SIZES[args.size]
    spec = OverloadSpec(workload=args.workload, base_rate=args.base_rate,
                        factor=args.factor if args.factor is not None else preset["factor"],
                        minutes=args.minutes if args.minutes is not None else preset["minutes"],
                        seed=args.seed, sample_s=args.sample_s, model=args.model,
                        hardware=args.hardware,
                        policy=load_policy_config(args.policy_config))
    policies = parse_policies(args.policies)
    admissions = _choices(args.admission, ("off", "on"), "--admission")
    from ppsched.experiments.run_config import RunConfig

    RunConfig(model=args.model, hardware=args.hardware).model_config()  # validate before runs
    print(f"overload: {spec.workload} at {spec.factor:g} x {spec.base_rate:g} = {spec.rate:g} "
          f"req/s for {spec.minutes:g} min (seed {spec.seed}), {spec.model} on {spec.hardware}")
    print(format_header())
    if args.memory not in ("rss", "heap"):
        raise UserError(f"--memory {args.memory!r}: expected rss or heap")
    out = Path(args.out) if args.out else None
    if out is not None:  # before the runs: a bad folder should not cost a soak's worth of time
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--out {args.out!r}: cannot create it ({exc.strerror})") from None
    rows = run_overload(spec, policies, admissions, memory=args.memory, echo=True)
    if out is not None:
        with open(out / "overload.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        from ppsched.experiments.outputs import write_experiment_config

        write_experiment_config(out, overload=spec, policies=list(policies),
                                admission=list(admissions))
        print(f"outputs    {out / 'overload.csv'}, {out / 'config.json'}")
    return 0
