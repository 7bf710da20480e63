"""Where delay scheduling can act: decode-only microbatches at or above the first boundary.

DS trims decode-only microbatches that sit just above an efficient batch size (boundary unit 128
on A100); a microbatch below the first boundary has nothing to trim to, and in the mixed loop a
microbatch that carries prefill bypasses DS (as SGLang's --enable-mixed-chunk does). For each
(model, workload, rate): one run with DS on, predictive chunking, mixed loop; prints the share of
stage-0 microbatches that are decode-only, the share of those with >= 128 decodes, their P50/P90
size, and DS's holds.

Usage: .venv/bin/python bench/bench_ds_reach.py --cells qwen2.5-32b:azure-conv:5.5,...
              [--duration 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from ppsched.experiments.run_config import RunConfig  # noqa: E402
from ppsched.sim import simulate  # noqa: E402
from ppsched.traces.load import load_workload  # noqa: E402

FIRST_BOUNDARY = 128


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", required=True, help="model:workload:rate,...")
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("model workload rate | decode-only share | >=128 of those | size P50/P90 | holds")
    for cell in args.cells.split(","):
        model, workload, rate = cell.split(":")
        wl = load_workload(workload, rate=float(rate), duration_s=args.duration, seed=args.seed,
                           max_context=32768)
        cfg = RunConfig(model=model, chunk="predictive", ds="on", seed=args.seed,
                        mixed_chunk=True)
        res = simulate(cfg, wl)
        it = res.iterations
        stage0 = it[(it["stage"] == 0) & (it["start_s"] > 60.0)]
        dec = stage0[stage0["kind"] == "decode"]["decode_reqs"].to_numpy()
        share = len(dec) / max(len(stage0), 1)
        above = float(np.mean(dec >= FIRST_BOUNDARY)) if len(dec) else 0.0
        p50, p90 = (np.percentile(dec, [50, 90]) if len(dec) else (0.0, 0.0))
        print(f"{model} {workload} {rate} | {share:.2f} | {above:.3f} | {p50:.0f}/{p90:.0f} | "
              f"{res.summary['ds_holds']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
