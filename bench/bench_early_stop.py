"""Early stop leaves every goodput figure as it is: one table searched twice, side by side.

Usage: .venv/bin/python bench/bench_early_stop.py [--model qwen2.5-32b] [--workload azure-conv]
           [--policies all] [--slo-scales 1.0,0.8,0.6,0.4,0.2] [--seeds 3] [--no-verify]
           [--max-context N] [--jobs 2] [--out DIR] [--csv PATH]

Runs ``ppsched goodput``'s table (``experiments.goodput.goodput_table``) once with every run
simulated to the end and once with early stop (``metrics.early_stop``), each on its own empty
cache, and prints per pass: runs simulated, runs stopped early, simulated CPU seconds (the sum
of each run's ``sim_cpu_s``, so neighbours on a shared machine do not count) and wall seconds;
then, for every column of goodput.csv, whether the two tables are identical. Exit status 1 when
any figure differs. The defaults are ``make demo``'s grid.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.experiments.goodput import GOODPUT_COLUMNS, SearchSettings, goodput_table  # noqa: E402
from ppsched.experiments.plan import Setup  # noqa: E402
from ppsched.experiments.policies import parse_floats, parse_policies  # noqa: E402
from ppsched.experiments.runner import Runner  # noqa: E402
from ppsched.experiments.workload_spec import WorkloadSpec  # noqa: E402


def cache_figures(root: Path) -> tuple[int, int, float]:
    """(runs, runs stopped early, simulated CPU seconds) of every entry under a run cache."""
    runs = stopped = 0
    cpu = 0.0
    for path in root.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        runs += 1
        stopped += bool(summary.get("stopped_early"))
        cpu += float(summary.get("sim_cpu_s") or 0.0)
    return runs, stopped, cpu


def same(a: pd.Series, b: pd.Series) -> bool:
    return bool(((a == b) | (a.isna() & b.isna())).all())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--model", default="qwen2.5-32b")
    p.add_argument("--workload", default="azure-conv")
    p.add_argument("--policies", default="all")
    p.add_argument("--slo-scales", default="1.0,0.8,0.6,0.4,0.2")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--max-context", type=int, default=None)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default="results/bench-early-stop",
                   help="folder for the two caches and goodput CSVs (emptied first)")
    p.add_argument("--csv", default=None, help="also write the summary rows here")
    args = p.parse_args(argv)

    setup = Setup(model=args.model, seed=0)
    spec = WorkloadSpec(args.workload, rate=1.0, seed=0, max_context=args.max_context)
    policies = parse_policies(args.policies)
    scales = parse_floats(args.slo_scales, "SLO scale")
    settings = SearchSettings(seeds=args.seeds, verify=not args.no_verify)
    out = Path(args.out)
    tables, rows = {}, []
    for stop_early in (True, False):  # early stop first: it is `make demo` as it runs
        label = "early stop" if stop_early else "to the end"
        cache = out / ("cache-early" if stop_early else "cache-full")
        if cache.exists():
            import shutil

            shutil.rmtree(cache)
        wall0 = time.monotonic()
        with Runner(cache, jobs=args.jobs) as runner:
            table = goodput_table(runner, setup, spec, policies, scales,
                                  replace(settings, stop_early=stop_early))
        wall = time.monotonic() - wall0
        table.to_csv(out / f"goodput-{'early' if stop_early else 'full'}.csv", index=False)
        runs, stopped, cpu = cache_figures(cache)
        tables[stop_early] = table
        rows.append({"pass": label, "runs": runs, "stopped_early": stopped,
                     "sim_cpu_s": round(cpu, 1), "wall_s": round(wall, 1)})
        print(f"{label:>11}: {runs} runs ({stopped} stopped early), {cpu:.1f} CPU-s simulated, "
              f"{wall:.0f} s wall", flush=True)
    full, early = tables[False], tables[True]
    rows.reverse()  # to the end first in the summary
    differ = [c for c in GOODPUT_COLUMNS if not same(full[c], early[c])]
    print(f"grid: {args.model} {args.workload}, {len(policies)} policies x {len(scales)} SLO "
          f"scales, {args.seeds} seed(s), verify {'off' if args.no_verify else 'on'}")
    print(f"CPU with / without early stop: {rows[1]['sim_cpu_s']} / {rows[0]['sim_cpu_s']} s "
          f"= {rows[1]['sim_cpu_s'] / max(rows[0]['sim_cpu_s'], 1e-9):.2f}")
    for column in GOODPUT_COLUMNS:
        print(f"  {column:<22} identical: {'no' if column in differ else 'yes'}")
    print(f"identical: {'no' if differ else 'yes'} ({len(full)} rows x "
          f"{len(GOODPUT_COLUMNS)} columns)")
    if args.csv:
        summary = pd.DataFrame(rows)
        summary["grid"] = f"{args.model} {args.workload} seeds={args.seeds}" + \
            ("" if args.no_verify else " verified")
        summary["identical"] = "no" if differ else "yes"
        summary.to_csv(args.csv, index=False)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
