"""Delay scheduling end to end: goodput on a rate grid with DS off vs on, over several seeds.

Goodput of one seed = the highest grid rate r such that every grid rate <= r meets the paper's
criterion (P90 TTFT <= 2000 ms, P90 TPOT <= 200 ms). Prints every run, then per-rate medians.

    .venv/bin/python bench/bench_ds.py --workload synthetic-decode --chunk static:256 \
        --duration 240 --max-consecutive 1 --seeds 4 --rates 3,3.5,4,4.5,5,5.5,6,6.5,7
"""

from __future__ import annotations

import argparse
import statistics

from ppsched.core.slo import Slo
from ppsched.experiments.run_config import RunConfig
from ppsched.sim import simulate
from ppsched.traces.load import load_workload


def run_grid(args: argparse.Namespace) -> list[dict]:
    slo = Slo()
    rows = []
    for seed in range(args.seeds):
        for rate in args.rates:
            workload = load_workload(args.workload, rate=rate, duration_s=args.duration,
                                     seed=seed, max_context=32768)
            for ds in ("off", "on"):
                config = RunConfig(chunk=args.chunk, ds=ds, ds_max_consecutive=args.max_consecutive,
                                   seed=seed, mixed_chunk=args.mixed_chunk,
                                   pp_max_micro_batch_size=args.pp_max_micro_batch_size)
                s = simulate(config, workload).summary
                ok = s["ttft_ms"]["p90"] <= slo.ttft_ms and s["tpot_ms"]["p90"] <= slo.tpot_ms
                row = dict(seed=seed, rate=rate, ds=ds, ok=ok, ttft90=s["ttft_ms"]["p90"],
                           tpot90=s["tpot_ms"]["p90"], tpot99=s["tpot_ms"]["p99"],
                           tpot999=s["tpot_ms"]["p999"], holds=s.get("ds_holds", 0),
                           streak=s.get("ds_max_consecutive_holds", 0),
                           bubble=s["bubble_fraction"])
                rows.append(row)
                print(f"seed {seed} rate {rate:5.2f} ds={ds:3s} ok={int(ok)} "
                      f"ttft90 {row['ttft90']:8.0f} tpot90/99/999 {row['tpot90']:6.1f}/"
                      f"{row['tpot99']:6.1f}/{row['tpot999']:6.1f} bubble {row['bubble']:.3f} "
                      f"holds {row['holds']} streak {row['streak']}", flush=True)
    return rows


def strict_goodput(rows: list[dict], seed: int, ds: str, rates: list[float]) -> float:
    best = 0.0
    for rate in rates:
        row = next(r for r in rows if r["seed"] == seed and r["rate"] == rate and r["ds"] == ds)
        if not row["ok"]:
            break
        best = rate
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="synthetic-decode")
    parser.add_argument("--chunk", default="static:256")
    parser.add_argument("--duration", type=float, default=240.0)
    parser.add_argument("--max-consecutive", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rates", type=lambda t: [float(x) for x in t.split(",")],
                        default=[3, 4, 5, 6, 7])
    parser.add_argument("--mixed-chunk", action="store_true")
    parser.add_argument("--pp-max-micro-batch-size", type=int, default=None,
                        help="per-slot admission cap (default: the engine's)")
    args = parser.parse_args()
    rows = run_grid(args)
    print(f"SUMMARY {args.workload} {args.chunk} duration {args.duration}s "
          f"K={args.max_consecutive} mixed={args.mixed_chunk}")
    means = {}
    for ds in ("off", "on"):
        per_seed = [strict_goodput(rows, seed, ds, args.rates) for seed in range(args.seeds)]
        means[ds] = statistics.mean(per_seed)
        print(f"  ds={ds}: strict goodput per seed {per_seed} mean {means[ds]:.2f}")
    print(f"  ratio of means on/off {means['on'] / max(means['off'], 1e-9):.3f}")
    for rate in args.rates:
        off = [r for r in rows if r["rate"] == rate and r["ds"] == "off"]
        on = [r for r in rows if r["rate"] == rate and r["ds"] == "on"]

        def med(rs: list[dict], key: str) -> float:
            return statistics.median(r[key] for r in rs)

        print(f"  rate {rate:5.2f}: pass off {sum(r['ok'] for r in off)}/{len(off)} "
              f"on {sum(r['ok'] for r in on)}/{len(on)}; median TPOT p90 {med(off, 'tpot90'):.1f}"
              f"->{med(on, 'tpot90'):.1f} p99 {med(off, 'tpot99'):.1f}->{med(on, 'tpot99'):.1f}"
              f" holds {med(on, 'holds'):.0f}")


if __name__ == "__main__":
    main()
