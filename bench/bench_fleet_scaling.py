"""Fleet goodput vs N x one box's, per sglang-router policy (docs/FLEET_SIM.md).

Usage: .venv/bin/python bench/bench_fleet_scaling.py --config static-512 --boxes 4
           [--model qwen2.5-32b] [--workload azure-conv] [--routers all] [--jobs N]
           [--cache results/cache] [--out DIR]
One box's sustained goodput g1 (the goodput search on a fleet of one, seed 0, the workload's
goodput window) and, per router, the fleet's sustained goodput with N boxes (the same search on
fleet runs, starting at N x g1). Prints fleet / (N x g1) per router, and at the rate N x g1 the
busiest box's share of requests over the run and per 30 s poll interval (1.0: even), the P90
TTFT and the boxes' prefix-cache hit rate: where a fleet falls short of N boxes, these say
whether imbalance, stale load or lost cache locality is why. Writes fleet_scaling.csv to --out.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from ppsched.experiments.executors import LOCAL  # noqa: E402
from ppsched.experiments.goodput import SearchSettings  # noqa: E402
from ppsched.experiments.goodput_runs import measurement_window  # noqa: E402
from ppsched.experiments.plan import Setup  # noqa: E402
from ppsched.experiments.runner import Runner  # noqa: E402
from ppsched.experiments.workload_spec import WorkloadSpec  # noqa: E402
from ppsched.fleet.capacity import FLEET_SIMULATE, SINGLE_BOX_ROUTER, FleetRuns  # noqa: E402
from ppsched.fleet.routers import RouterSettings, parse_router_policies  # noqa: E402

FLEET_GROWTH = 1.25  # the fleet search starts at N x g1, which is near the answer


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen2.5-32b")
    p.add_argument("--workload", default="azure-conv")
    p.add_argument("--config", default="static-512")
    p.add_argument("--boxes", type=int, default=4)
    p.add_argument("--routers", default="all")
    p.add_argument("--max-context", type=int, default=None,
                   help="cap prompt+output (the Mooncake trace's longest prompts exceed 32k)")
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--cache", default="results/cache")
    p.add_argument("--out", default="results/fleet_scaling")
    args = p.parse_args()
    start = time.monotonic()
    setup = Setup(model=args.model)
    workload = WorkloadSpec(args.workload, rate=1.0, max_context=args.max_context)
    window = measurement_window(workload, setup.base_slo)
    search = SearchSettings()
    rows = []
    with Runner(args.cache, jobs=args.jobs, simulate_ref=FLEET_SIMULATE,
                executor=LOCAL) as runner:
        runs = FleetRuns(runner, setup, workload, window, setup.base_slo)
        g1 = runs.goodput(args.config, 1, SINGLE_BOX_ROUTER, search).goodput_rps
        target = args.boxes * g1
        if target <= 0:
            print(f"one box of {args.config} sustains no rate on {args.workload}: nothing to "
                  "scale", file=sys.stderr)
            return 1
        routers = [RouterSettings(name) for name in parse_router_policies(args.routers)]
        fleet_search = replace(search, growth=FLEET_GROWTH)
        for router in routers:  # submitted together: the pool runs them side by side
            runs.submit(args.config, args.boxes, router, target)
        for router in routers:
            found = runs.goodput(args.config, args.boxes, router, fleet_search, start=target)
            at = runs.judge(args.config, args.boxes, router, target)
            rows.append({"model": args.model, "workload": args.workload,
                         "config": args.config, "boxes": args.boxes, "router": router.policy,
                         "one_box_goodput": g1, "fleet_goodput": found.goodput_rps,
                         "fleet_vs_n_boxes": found.goodput_rps / target if target else 0.0,
                         "busiest_share_at_n_g1": at.busiest_share,
                         "busiest_share_per_poll_at_n_g1": at.busiest_share_per_poll,
                         "p90_ttft_ms_at_n_g1": at.p90_ttft_ms,
                         "prefix_hit_rate_at_n_g1": at.prefix_hit_rate,
                         "runs": len(found.tried)})
        computed = runner.computed
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "fleet_scaling.csv", index=False, float_format="%.4g")
    print(table.drop(columns=["model", "workload"]).to_string(index=False,
                                                               float_format="%.3g"))
    print(f"window {window.warmup_s:g}+{window.measure_s:g}+{window.cooldown_s:g} s, seed 0; "
          f"{computed} runs simulated; wall {time.monotonic() - start:.0f} s; "
          f"-> {out / 'fleet_scaling.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
