"""``ppsched plan``: how many boxes each configuration needs behind each router policy."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ppsched.cli.experiment_args import (
    add_common,
    add_profile,
    add_trace,
    add_window,
    make_settings,
    make_setup,
    make_workload,
)
from ppsched.core.errors import UserError

HYBRID_NOTE = ("the simulator runs ppN or tpN engines only; a PP x TP hybrid such as PP2xTP2 "
               "is not modelled")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="least boxes per configuration and router policy to sustain a rate")
    add_common(p)
    p.add_argument("--workload", default="azure-conv")
    add_trace(p)
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--rate", type=float, help="target Poisson rate (req/s) for the fleet")
    rate.add_argument("--rate-profile", metavar="H:R,...",
                      help="rates over a day, e.g. 0:20,8:50,18:35 (from hour H, R req/s)")
    p.add_argument("--slo-scale", type=float, default=1.0)
    p.add_argument("--configs", default=",".join(_default_configs()),
                   help="comma-separated policy keys, one box configuration each (e.g. "
                        "predictive, static-512, tp4), or all")
    p.add_argument("--routers", default="all",
                   help="comma-separated sglang-router policies: random, round_robin, "
                        "cache_aware, power_of_two, or all")
    p.add_argument("--max-boxes", type=int, default=64, help="largest fleet tried")
    p.add_argument("--start", type=float, default=2.0,
                   help="first rate of the one-box goodput search (req/s)")
    add_profile(p)
    add_window(p)
    p.add_argument("--out", required=True, help="folder for plan.csv and plan_points.png")
    p.set_defaults(handler=cmd_plan)


def _default_configs() -> tuple[str, ...]:
    from ppsched.fleet.capacity import DEFAULT_CONFIGS

    return DEFAULT_CONFIGS


def cmd_plan(args: argparse.Namespace) -> int:
    from ppsched.experiments.goodput import SearchSettings
    from ppsched.experiments.policies import get_policy, parse_policies
    from ppsched.fleet.capacity import PlanSettings, plan_capacity
    from ppsched.fleet.plan_report import format_plan, plan_table, plot_attainment
    from ppsched.fleet.rate_profile import RateProfile
    from ppsched.fleet.routers import parse_router_policies

    start = time.monotonic()
    if args.rate is not None:
        if not args.rate > 0 or args.rate == float("inf"):
            raise UserError(f"--rate {args.rate!r}: expected a finite number > 0 (req/s)")
        profile = RateProfile.constant(args.rate)
    else:
        profile = RateProfile.parse(args.rate_profile)
    if "x" in args.configs.lower().replace("static", ""):
        raise UserError(f"--configs {args.configs!r}: {HYBRID_NOTE}")
    configs = parse_policies(args.configs)
    if args.configs.strip() == "all":  # every configuration that is one run config
        configs = tuple(k for k in configs if get_policy(k).chunk != "oracle")
    routers = parse_router_policies(args.routers)
    setup = make_setup(args)
    workload = make_workload(args, None if args.trace_file is not None else args.workload)
    if args.start is None or not args.start > 0:
        raise UserError(f"--start {args.start!r}: expected a rate > 0 (req/s)")
    window = make_settings(_search_flags(args), workload, setup).window
    settings = PlanSettings(slo_scale=args.slo_scale, max_boxes=args.max_boxes, window=window,
                            single_box=SearchSettings(start=args.start,
                                                      floor=min(0.1, args.start)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with _fleet_runner(args) as runner:
        plan = plan_capacity(runner, setup, workload, profile, configs, routers, settings)
    gpus = {key: _gpus(get_policy(key).parallel) for key in configs}
    table = plan_table(plan, model=setup.model, workload=workload.name, seed=setup.seed,
                       slo_scale=args.slo_scale, gpus_per_box=gpus)
    table.to_csv(out / "plan.csv", index=False, float_format="%.6g")
    png = plot_attainment(plan, out, f"{setup.model}, {workload.name}, "
                          f"{profile.describe()} req/s, SLO x{args.slo_scale:g}")
    w = plan.window
    print(format_plan(table))
    print(f"window: {w.warmup_s:g} s warm-up + {w.measure_s:g} s measured + {w.cooldown_s:g} s "
          f"cool-down, seed {setup.seed}, one run per fleet size; one-box goodput searched to "
          f"{settings.single_box.rel_tol:.0%}")
    print(f"runs: {runner.computed} simulated, {runner.reused} from cache; "
          f"wall time {time.monotonic() - start:.0f} s")
    print(f"table: {out / 'plan.csv'}\nplot:  {png}")
    return 0


def _search_flags(args: argparse.Namespace) -> argparse.Namespace:
    """The window flags in the shape make_settings reads (the search flags at their defaults)."""
    from ppsched.experiments.goodput import SearchSettings

    d = SearchSettings()
    return argparse.Namespace(warmup_s=args.warmup_s, measure_s=args.measure_s,
                              cooldown_s=args.cooldown_s, start=d.start, floor=d.floor,
                              rel_tol=d.rel_tol, max_steps=d.max_steps, seeds=1, verify=False,
                              no_verify=True, quick=True, stop_early=d.stop_early)


def _fleet_runner(args: argparse.Namespace):
    """A Runner whose runs are fleets (a fleet of one is the single-box run), on the executor
    the flags choose."""
    from ppsched.cli.executor_args import executor_choice
    from ppsched.experiments.progress import Progress
    from ppsched.experiments.runner import Runner
    from ppsched.fleet.capacity import FLEET_SIMULATE

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: expected an integer >= 1")
    return Runner(args.cache, jobs=args.jobs, executor=executor_choice(args),
                  simulate_ref=FLEET_SIMULATE,
                  progress=Progress("plan", enabled=not args.no_progress))


def _gpus(parallel: str) -> int:
    from ppsched.experiments.run_config import parse_parallel

    pp, tp = parse_parallel(parallel)
    return pp * tp
