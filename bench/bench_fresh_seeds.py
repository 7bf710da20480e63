"""Does a policy hold a rate on seeds no search saw? Pass counts side by side, per rate.

Usage: .venv/bin/python bench/bench_fresh_seeds.py --model qwen2.5-32b --workload sharegpt \
           --slo-scale 0.4 --rates 0.69,0.72338 --policies predictive,static-256 \
           [--max-context 8192] [--seeds 3000-3005] [--factor 4] [--jobs 2] [--cache DIR]
           [--search-seeds]   (allow the goodput method's own seeds: to replay its verdicts)

Each (policy, rate, seed) is one run of ``ppsched goodput``'s own run spec and verdict
(``experiments.goodput_runs.run_spec``, ``metrics.steady.verdict``: P90 TTFT/TPOT over the window,
admissions keep up, the last quarter too) at ``--factor`` times its measurement window (4: the
verification's length). The search uses seeds 0.., its 4x check 1000.. and 2000..; the default
seeds 3000-3005 are none of those. Where two policies' goodputs differ by one step of the search
or its 4x check, this says whether one holds the other's rate on fresh seeds as often as the
other does, which a single ladder cannot (bench/dcp.md, "Known shortfalls").
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ppsched.core.errors import UserError  # noqa: E402
from ppsched.experiments.goodput_runs import measurement_window, run_spec  # noqa: E402
from ppsched.experiments.goodput_verify import (  # noqa: E402
    CONFIRM_SEED_OFFSET,
    VERIFY_SEED_OFFSET,
)
from ppsched.experiments.plan import Setup, make_config  # noqa: E402
from ppsched.experiments.policies import get_policy, parse_floats, parse_policies  # noqa: E402
from ppsched.experiments.runner import Runner, RunTask  # noqa: E402
from ppsched.experiments.workload_spec import WorkloadSpec  # noqa: E402
from ppsched.metrics.steady import verdict  # noqa: E402


def parse_seeds(text: str, search_seeds: bool = False) -> list[int]:
    """'3000-3005' or '3000,3007': seeds the goodput method never uses (its searches take
    0..99, its checks 1000.. and 2000..); with ``search_seeds``, those too."""
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            seeds = list(range(lo, hi + 1))
        else:
            seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise UserError(f"--seeds {text!r}: expected 'A-B' or a comma-separated list of "
                        "integers") from None
    if search_seeds:
        if not seeds:  # a minus sign reads as a range, so no seed here is negative
            raise UserError(f"--seeds {text!r}: expected at least one seed")
        return seeds
    used = [s for s in seeds if s < 100 or VERIFY_SEED_OFFSET <= s < VERIFY_SEED_OFFSET + 100
            or CONFIRM_SEED_OFFSET <= s < CONFIRM_SEED_OFFSET + 100]
    if not seeds or used:
        raise UserError(f"--seeds {text!r}: expected seeds no goodput search or check uses "
                        f"(not 0-99, {VERIFY_SEED_OFFSET}-{VERIFY_SEED_OFFSET + 99}, "
                        f"{CONFIRM_SEED_OFFSET}-{CONFIRM_SEED_OFFSET + 99}); got {used or seeds}")
    return seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-32b")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--max-context", type=int, default=None)
    ap.add_argument("--slo-scale", required=True)
    ap.add_argument("--rates", required=True)
    ap.add_argument("--policies", required=True)
    ap.add_argument("--seeds", default="3000-3005")
    # diagnosis, not a fresh check: replay the search's or the 4x check's own verdicts at any
    # rate (e.g. --search-seeds --seeds 0-2 --factor 1), to see where a search landed and why
    ap.add_argument("--search-seeds", action="store_true")
    ap.add_argument("--factor", type=float, default=4.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default="results/cache")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    rates, seeds = parse_floats(args.rates, "--rates"), parse_seeds(args.seeds, args.search_seeds)
    keys = parse_policies(args.policies)
    scales = parse_floats(args.slo_scale, "--slo-scale")
    if len(scales) != 1:
        raise UserError(f"--slo-scale {args.slo_scale!r}: expected one scale")
    scale = scales[0]
    if not (args.factor >= 1):
        raise UserError(f"--factor {args.factor}: expected >= 1 (the search's window or longer)")
    setup = Setup(model=args.model)
    workload = WorkloadSpec(args.workload, rate=1.0, max_context=args.max_context)
    window = measurement_window(workload, setup.base_slo).longer(args.factor)
    slo = setup.base_slo.scaled(scale)
    print(f"# {args.model} {args.workload} max_context={args.max_context} SLO x{scale:g} "
          f"(P90 TTFT {slo.ttft_ms:g} / TPOT {slo.tpot_ms:g} ms), warm-up {window.warmup_s:g} s, "
          f"window {window.measure_s:g} s, cool-down {window.cooldown_s:g} s, "
          f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)})"
          + (" -- the goodput method's own seeds: its verdicts, not a fresh check"
             if args.search_seeds else ""))
    with Runner(args.cache, jobs=args.jobs) as runner:
        futures = {(key, rate, seed): runner.submit(RunTask(
            make_config(get_policy(key), replace(setup, seed=seed), slo=slo),
            run_spec(workload, rate, seed, window)))
            for rate in rates for key in keys for seed in seeds}
        verdicts = {k: verdict(f.result().records, window, slo) for k, f in futures.items()}
    print("| rate (req/s) | policy | holds | median P90 TTFT / TPOT (ms) | worst last-quarter "
          "P90 TTFT (ms) | per seed: P90 TTFT, pass |")
    print("|---|---|---|---|---|---|")
    for rate in rates:
        for key in keys:
            vs = [verdicts[(key, rate, s)] for s in seeds]
            per_seed = " ".join(f"{v.p90_ttft_ms:.0f}{'' if v.ok else '✗'}" for v in vs)
            print(f"| {rate:g} | {key} | {sum(v.ok for v in vs)}/{len(vs)} | "
                  f"{statistics.median(v.p90_ttft_ms for v in vs):.0f} / "
                  f"{statistics.median(v.p90_tpot_ms for v in vs):.1f} | "
                  f"{max(v.tail_p90_ttft_ms for v in vs):.0f} | {per_seed} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
