"""Experiment commands: sweep, goodput, demo (figures/paper/report: cmd_paper)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ppsched.cli.experiment_args import (
    DEFAULT_SCALES,
    add_common,
    add_profile,
    add_search,
    add_trace,
    add_window,
    make_runner,
    make_settings,
    make_setup,
    make_workload,
    search_flags,
)
from ppsched.core.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="rates x policies x workloads on the simulator")
    add_common(p)
    p.add_argument("--workload", default="azure-conv", help="comma-separated workload names")
    add_trace(p)
    p.add_argument("--policies", default="all", help="comma-separated policy keys or 'all'")
    p.add_argument("--rates", required=True, help="comma-separated Poisson rates (req/s)")
    p.add_argument("--slo-scale", type=float, default=1.0)
    add_profile(p)
    add_window(p)
    p.add_argument("--no-stop-early", dest="stop_early", action="store_false",
                   help="simulate every run to the end (by default a run stops once its verdict "
                        "has certainly failed; its goodput_ok is the same)")
    p.add_argument("--out", required=True, help="folder for sweep.csv")
    p.set_defaults(handler=cmd_sweep)

    p = subparsers.add_parser("goodput", help="sustained goodput vs SLO scale per policy")
    add_common(p)
    p.add_argument("--workload", default="azure-conv")
    add_trace(p)
    p.add_argument("--policies", default="all")
    p.add_argument("--slo-scales", default=DEFAULT_SCALES)
    p.add_argument("--arrivals", default="poisson",
                   help="poisson (default): Poisson arrivals at each rate; trace: the trace's "
                        "recorded timestamps, each gap divided by the speed factor rate / the "
                        "trace's mean rate (timestamped traces only)")
    p.add_argument("--window-min", type=float, default=None,
                   help="--arrivals trace: replay only the trace's first MIN minutes")
    add_profile(p)
    add_search(p)
    p.add_argument("--out", required=True, help="folder for goodput.csv and goodput_vs_slo.png")
    p.set_defaults(handler=cmd_goodput)

    p = subparsers.add_parser("demo", help="goodput vs SLO on azure-conv, qwen2.5-32b (make demo)")
    add_common(p, model=False)
    add_search(p)
    p.add_argument("--out", default="results/demo")
    p.set_defaults(handler=cmd_demo)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ppsched.experiments.outputs import write_experiment_config
    from ppsched.experiments.policies import parse_floats, parse_policies
    from ppsched.experiments.sweep import sweep
    from ppsched.metrics.steady import Window

    setup = make_setup(args)
    policies = parse_policies(args.policies)
    rates = parse_floats(args.rates, "rate")
    parse_floats(str(args.slo_scale), "SLO scale")
    if args.trace_file is not None:
        workloads = [make_workload(args, None)]
    else:
        workloads = [make_workload(args, w.strip()) for w in args.workload.split(",")
                     if w.strip()]
    if not workloads:
        raise UserError(f"--workload {args.workload!r}: expected at least one workload name")
    window = None
    if args.measure_s is not None:
        window = Window(args.warmup_s or 0.0, args.measure_s, args.cooldown_s or 0.0)
    elif args.warmup_s is not None or args.cooldown_s is not None:
        raise UserError("--warmup-s/--cooldown-s need --measure-s in sweep")
    with make_runner(args, "sweep") as runner:
        table = sweep(runner, setup, workloads, policies, rates, args.slo_scale, window,
                      stop_early=args.stop_early)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sweep.csv", index=False)
    write_experiment_config(out, setup=setup, workloads=[w.to_dict() for w in workloads],
                            policies=list(policies), rates=list(rates),
                            slo_scale=args.slo_scale, window=window)
    print(f"{len(table)} runs ({runner.computed} computed, {runner.reused} from cache) -> "
          f"{out / 'sweep.csv'}")
    return 0


def run_goodput(args: argparse.Namespace, *, model: str, workload: str | None, policies: str,
                scales: str, out: Path, label: str):
    from ppsched.experiments.fig_goodput import format_table, plot_goodput
    from ppsched.experiments.goodput import goodput_table
    from ppsched.experiments.outputs import write_experiment_config
    from ppsched.experiments.policies import parse_floats, parse_policies
    from ppsched.experiments.recorded_arrivals import with_arrivals

    setup = make_setup(args, model)
    keys = parse_policies(policies)
    scale_values = parse_floats(scales, "SLO scale")
    spec = with_arrivals(make_workload(args, workload), getattr(args, "arrivals", "poisson"),
                         getattr(args, "window_min", None))
    settings = make_settings(args, spec, setup)
    with make_runner(args, label) as runner:
        table = goodput_table(runner, setup, spec, keys, scale_values, settings)
    png, csv = plot_goodput(table, out)
    table.to_csv(out / "goodput.csv", index=False)
    write_experiment_config(out, setup=setup, workload=spec.to_dict(), search=settings,
                            policies=list(keys), slo_scales=list(scale_values))
    print(format_table(table))
    print(f"runs: {runner.computed} simulated, {runner.reused} from cache, "
          f"{runner.same_as_twin} taken from the same run with DS switched")
    return table, png, csv


def cmd_goodput(args: argparse.Namespace) -> int:
    out = Path(args.out)
    print(f"goodput: {settings_line(args)}")
    workload = None if args.trace_file is not None else args.workload
    _, png, _ = run_goodput(args, model=args.model, workload=workload,
                            policies=args.policies, scales=args.slo_scales, out=out,
                            label="goodput")
    print(f"table: {out / 'goodput.csv'}\nplot:  {png}")
    return 0


def settings_line(args: argparse.Namespace) -> str:
    flags = search_flags(args)
    verify = "verified at 4x the window" if flags["verify"] else "unverified"
    return f"{flags['seeds']} seed(s), {verify}"


def cmd_demo(args: argparse.Namespace) -> int:
    args.hardware = "a100-40g-pcie"
    start = time.monotonic()
    out = Path(args.out)
    print("demo: sustained goodput vs SLO scale, qwen2.5-32b on 4xA100 40GB PCIe (simulated), "
          f"azure-conv, {settings_line(args)}")
    _, png, _ = run_goodput(args, model="qwen2.5-32b", workload="azure-conv", policies="all",
                            scales=DEFAULT_SCALES, out=out, label="demo")
    print(f"table: {out / 'goodput.csv'}\nplot:  {png}\n"
          f"wall time: {time.monotonic() - start:.0f} s")
    return 0
