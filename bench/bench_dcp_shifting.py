"""Sustained goodput on shifting-load workloads (``ppsched.traces.shifting``), per chunk controller.

Usage: .venv/bin/python bench/bench_dcp_shifting.py --workload alternating [--model qwen2.5-32b]
              [--chunks static:128,...,predictive] [--seeds 0] [--slo-scale 1.0]
              [--only code|conv|chat|batch]  (code-conv, chat-batch: one phase for the whole run)
Same verdict as ``ppsched goodput`` (``ppsched.metrics.steady``: P90 TTFT/TPOT on the
measurement window, admissions keep up, the last quarter too), window from the median output of
the requests that decode (``decoding_output_p50``); search: double/halve from --start, then
bisect to 2%. Goodput per seed and the lowest
over seeds; oracle-static = the best static chunk of --chunks in hindsight. Mixed loop, PP4.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.core.slo import Slo  # noqa: E402
from ppsched.experiments.run_config import RunConfig  # noqa: E402
from ppsched.metrics.steady import verdict, window_for  # noqa: E402
from ppsched.sim import simulate  # noqa: E402
from ppsched.traces.shifting import decoding_output_p50, shifting_workload  # noqa: E402

STATICS = "static:128,static:256,static:384,static:512,static:768,static:1024,static:2048"


def passes(args: argparse.Namespace, chunk: str, rate: float, seed: int) -> bool:
    slo = Slo().scaled(args.slo_scale)
    probe = shifting_workload(args.workload, 1.0, 600.0, seed)  # whole mix: same window --only
    window = window_for(decoding_output_p50(probe), Slo())
    wl = shifting_workload(args.workload, rate, window.arrivals_s, seed, only=args.only)
    cfg = RunConfig(model=args.model, chunk=chunk, slo=slo, seed=seed, mixed_chunk=True)
    v = verdict(simulate(cfg, wl).records, window, slo)
    print(f"  {chunk:<18} seed {seed} rate {rate:6.3f}: {v.reason}", flush=True)
    return v.ok


def goodput(args: argparse.Namespace, chunk: str, seed: int) -> float:
    lo, hi, rate = 0.0, float("inf"), args.start
    while hi == float("inf") or lo == 0.0:  # bracket
        if passes(args, chunk, rate, seed):
            lo = rate
            if hi < float("inf"):
                break
            rate *= 2
        else:
            hi = rate
            if rate < 0.1:
                return 0.0
            if lo > 0:
                break
            rate /= 2
    while hi - lo > 0.02 * hi:
        mid = (lo + hi) / 2
        if passes(args, chunk, mid, seed):
            lo = mid
        else:
            hi = mid
    return lo


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="alternating")
    ap.add_argument("--model", default="qwen2.5-32b")
    ap.add_argument("--chunks", default=STATICS + ",predictive,predictive-paper,greedy")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--slo-scale", type=float, default=1.0)
    ap.add_argument("--start", type=float, default=4.0)
    ap.add_argument("--only", default=None,
                    help="code-conv: keep one phase (code or conv); chat-batch: chat or batch")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    result: dict[str, list[float]] = {}
    for chunk in args.chunks.split(","):
        result[chunk] = [goodput(args, chunk, s) for s in seeds]
        print(f"GOODPUT {chunk}: min {min(result[chunk]):.3f} per seed {result[chunk]}",
              flush=True)
    statics = {c: min(g) for c, g in result.items() if c.startswith("static:")}
    if statics:
        best = max(statics, key=statics.__getitem__)
        print(f"oracle-static = {best}: {statics[best]:.3f} req/s")
        for c, g in result.items():
            if not c.startswith("static:") and statics[best] > 0:
                print(f"{c}: {min(g):.3f} req/s = {min(g) / statics[best]:.2f}x oracle-static")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
