"""Per-phase view of one run of a shifting-load workload at one rate, per chunk controller.

Usage: .venv/bin/python bench/diag_dcp_shifting.py --workload code-conv --rate 4.0
              [--chunks predictive,static:384] [--seed 0] [--slo-scale 1.0] [--model qwen2.5-32b]
Same run as one step of ``bench_dcp_shifting.py`` (mixed loop, PP4, window from the median output
of the requests that decode). For each phase of ``ppsched.traces.shifting.phase_of``: the measured
requests' P90 TTFT / TPOT (misses as +inf); the chunk decisions taken while that phase's requests
arrive (mean chunk, the three most frequent chunks, the most frequent reason); its stage-0
microbatches (prefill tokens, decodes, stage time, decode-only and idle shares). A controller's
shortfall on one phase shows here, where the run's overall P90 hides it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ppsched.core.slo import Slo  # noqa: E402
from ppsched.experiments.run_config import RunConfig  # noqa: E402
from ppsched.metrics.steady import verdict, window_for  # noqa: E402
from ppsched.metrics.summary import percentile_with_misses  # noqa: E402
from ppsched.sim import simulate  # noqa: E402
from ppsched.traces.shifting import decoding_output_p50, phase_of, shifting_workload  # noqa: E402


def p90(values: list[float]) -> str:
    return f"{percentile_with_misses(np.asarray(values), 90):7.0f}" if values else "      -"


def idle_share(mb: pd.DataFrame) -> float:
    busy = mb["measured_ms"].sum() / 1000.0
    idle = mb["idle_before_s"].sum()
    return idle / (busy + idle) if busy + idle > 0 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="code-conv")
    ap.add_argument("--model", default="qwen2.5-32b")
    ap.add_argument("--chunks", default="predictive,static:384")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slo-scale", type=float, default=1.0)
    args = ap.parse_args()
    slo = Slo().scaled(args.slo_scale)
    probe = shifting_workload(args.workload, 1.0, 600.0, args.seed)
    window = window_for(decoding_output_p50(probe), Slo())
    wl = shifting_workload(args.workload, args.rate, window.arrivals_s, args.seed)
    start = wl.requests[0].arrival_s
    print(f"{args.workload} rate {args.rate} seed {args.seed}: {len(wl)} requests, window "
          f"{window.warmup_s:g}+{window.measure_s:g}+{window.cooldown_s:g} s")
    for chunk in args.chunks.split(","):
        cfg = RunConfig(model=args.model, chunk=chunk, slo=slo, seed=args.seed, mixed_chunk=True)
        result = simulate(cfg, wl)
        print(f"{chunk}: {verdict(result.records, window, slo).reason}")
        ttft: dict[str, list[float]] = {}
        tpot: dict[str, list[float]] = {}
        for r in result.records:
            if not window.warmup_s <= r.arrival_s - start < window.end_s:
                continue
            phase = phase_of(args.workload, r.arrival_s)
            done = not r.rejected and math.isfinite(r.finish_s)
            ttft.setdefault(phase, []).append(r.ttft_ms if done else math.inf)
            if r.output_tokens >= 2:
                tpot.setdefault(phase, []).append(r.tpot_ms if done else math.inf)
        chunks: dict[str, list[int]] = {}
        reasons: dict[str, Counter[str]] = {}
        for d in result.decisions:
            if d["type"] == "chunk" and window.warmup_s <= d["time_s"] - start < window.end_s:
                phase = phase_of(args.workload, d["time_s"])
                chunks.setdefault(phase, []).append(int(d["chunk"]))
                reasons.setdefault(phase, Counter())[str(d["reason"])] += 1
        it = result.iterations
        it = it[(it["stage"] == 0) & (it["start_s"] - start >= window.warmup_s)
                & (it["start_s"] - start < window.end_s)]
        it_phase = np.array([phase_of(args.workload, t) for t in it["start_s"]])
        for phase in sorted(ttft):
            c = chunks.get(phase, [0])
            top, count = reasons.get(phase, Counter({"-": 0})).most_common(1)[0]
            shares = ", ".join(f"{v}: {100 * n / len(c):.0f}%"
                               for v, n in Counter(c).most_common(3))
            print(f"  {phase:<14} n {len(ttft[phase]):5d}  P90 TTFT {p90(ttft[phase])} ms  "
                  f"P90 TPOT {p90(tpot.get(phase, []))} ms  "
                  f"chunks mean {np.mean(c):4.0f} ({shares})"
                  f"  top reason {top} ({100 * count / len(c):.0f}%)")
            mb = it[it_phase == phase]
            print(f"  {'':<14} stage-0 microbatches {len(mb)}: mean prefill tokens "
                  f"{mb['prefill_tokens'].mean():.0f}, decodes {mb['decode_reqs'].mean():.1f}, "
                  f"stage {mb['measured_ms'].mean():.1f} ms, decode-only "
                  f"{100 * (mb['prefill_tokens'] == 0).mean():.0f}%, idle before "
                  f"{100 * idle_share(mb):.0f}% of stage 0's time", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
