"""Experiment commands: sweep, goodput, figures, demo, paper, report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ppsched.cli.executor_args import add_executor_args, executor_choice
from ppsched.core.errors import UserError

DEFAULT_SCALES = "1.0,0.8,0.6,0.4,0.2"


def _common(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    if model:
        p.add_argument("--model", default="qwen2.5-32b", help="built-in name or HF config.json")
        p.add_argument("--hardware", default="a100-40g-pcie")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-mixed-chunk", dest="mixed_chunk", action="store_false",
                   help="SGLang's default loop: prefill batches carry no decodes (the paper's "
                        "system mixes them, so experiments do by default)")
    p.add_argument("--jobs", type=int, default=None,
                   help="worker processes (default: os.cpu_count())")
    p.add_argument("--cache", default="results/cache", help="run cache folder")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_executor_args(p)


def _search_args(p: argparse.ArgumentParser, num_requests: int) -> None:
    p.add_argument("--num-requests", type=int, default=num_requests,
                   help="requests per simulated run")
    p.add_argument("--lo", type=float, default=0.25, help="lowest rate tried (req/s)")
    p.add_argument("--hi", type=float, default=4.0, help="first upper rate (grows if met)")
    p.add_argument("--rel-tol", type=float, default=0.05, help="bisection relative tolerance")
    p.add_argument("--max-steps", type=int, default=10)


def register(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="rates x policies x workloads on the simulator")
    _common(p)
    p.add_argument("--workload", default="azure-conv", help="comma-separated workload names")
    p.add_argument("--policies", default="all", help="comma-separated policy keys or 'all'")
    p.add_argument("--rates", required=True, help="comma-separated Poisson rates (req/s)")
    p.add_argument("--num-requests", type=int, default=400)
    p.add_argument("--slo-scale", type=float, default=1.0)
    p.add_argument("--out", required=True, help="folder for sweep.csv")
    p.set_defaults(handler=cmd_sweep)

    p = subparsers.add_parser("goodput", help="goodput vs SLO scale per policy")
    _common(p)
    p.add_argument("--workload", default="azure-conv")
    p.add_argument("--policies", default="all")
    p.add_argument("--slo-scales", default=DEFAULT_SCALES)
    _search_args(p, 600)
    p.add_argument("--out", required=True, help="folder for goodput.csv and goodput_vs_slo.png")
    p.set_defaults(handler=cmd_goodput)

    p = subparsers.add_parser("demo", help="goodput vs SLO on azure-conv, qwen2.5-32b (make demo)")
    _common(p, model=False)
    _search_args(p, 600)
    p.add_argument("--out", default="results/demo")
    p.set_defaults(handler=cmd_demo)

    from ppsched.experiments.paper import register_paper_commands

    register_paper_commands(subparsers, _common)


def make_runner(args: argparse.Namespace, label: str):
    from ppsched.experiments.progress import Progress
    from ppsched.experiments.runner import Runner

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: expected an integer >= 1")
    return Runner(args.cache, jobs=args.jobs, executor=executor_choice(args),
                  progress=Progress(label, enabled=not args.no_progress))


def _setup(args: argparse.Namespace, model: str | None = None):
    from ppsched.core.models import load_model_config
    from ppsched.experiments.plan import Setup
    from ppsched.experiments.run_config import HARDWARE

    name = model or args.model
    load_model_config(name)  # fail early with the model's own message
    if args.hardware not in HARDWARE:
        raise UserError(f"--hardware {args.hardware!r}: expected one of {', '.join(HARDWARE)}")
    if args.seed < 0:
        raise UserError(f"--seed {args.seed}: expected an integer >= 0")
    return Setup(model=name, hardware=args.hardware, seed=args.seed,
                 mixed_chunk=getattr(args, "mixed_chunk", True))


def _check_requests(n: int) -> None:
    if n < 1:
        raise UserError(f"--num-requests {n}: expected an integer >= 1")


def cmd_sweep(args: argparse.Namespace) -> int:
    from ppsched.experiments.policies import parse_floats, parse_policies
    from ppsched.experiments.sweep import sweep
    from ppsched.experiments.workload_spec import WorkloadSpec

    _check_requests(args.num_requests)
    setup = _setup(args)
    policies = parse_policies(args.policies)
    rates = parse_floats(args.rates, "rate")
    parse_floats(str(args.slo_scale), "SLO scale")
    workloads = [WorkloadSpec(w.strip(), rate=1.0, num_requests=args.num_requests,
                              seed=args.seed) for w in args.workload.split(",") if w.strip()]
    if not workloads:
        raise UserError(f"--workload {args.workload!r}: expected at least one workload name")
    with make_runner(args, "sweep") as runner:
        table = sweep(runner, setup, workloads, policies, rates, args.slo_scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sweep.csv", index=False)
    print(f"{len(table)} runs ({runner.computed} computed, {runner.reused} from cache) -> "
          f"{out / 'sweep.csv'}")
    return 0


def run_goodput(args: argparse.Namespace, *, model: str, workload: str, policies: str,
                scales: str, out: Path, label: str):
    from ppsched.experiments.fig_goodput import format_table, plot_goodput
    from ppsched.experiments.goodput import SearchSettings, goodput_table
    from ppsched.experiments.policies import parse_floats, parse_policies
    from ppsched.experiments.workload_spec import WorkloadSpec

    _check_requests(args.num_requests)
    setup = _setup(args, model)
    keys = parse_policies(policies)
    scale_values = parse_floats(scales, "SLO scale")
    settings = SearchSettings(args.lo, args.hi, args.rel_tol, args.max_steps)
    spec = WorkloadSpec(workload, rate=1.0, num_requests=args.num_requests, seed=args.seed)
    with make_runner(args, label) as runner:
        table = goodput_table(runner, setup, spec, keys, scale_values, settings)
    png, csv = plot_goodput(table, out)
    table.to_csv(out / "goodput.csv", index=False)
    print(format_table(table))
    print(f"runs: {runner.computed} simulated, {runner.reused} from cache")
    return table, png, csv


def cmd_goodput(args: argparse.Namespace) -> int:
    out = Path(args.out)
    _, png, _ = run_goodput(args, model=args.model, workload=args.workload,
                            policies=args.policies, scales=args.slo_scales, out=out,
                            label="goodput")
    print(f"table: {out / 'goodput.csv'}\nplot:  {png}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    args.hardware = "a100-40g-pcie"
    start = time.monotonic()
    out = Path(args.out)
    print("demo: goodput vs SLO scale, qwen2.5-32b on 4xA100 40GB PCIe (simulated), azure-conv, "
          f"{args.num_requests} requests per run")
    _, png, _ = run_goodput(args, model="qwen2.5-32b", workload="azure-conv", policies="all",
                            scales=DEFAULT_SCALES, out=out, label="demo")
    print(f"table: {out / 'goodput.csv'}\nplot:  {png}\n"
          f"wall time: {time.monotonic() - start:.0f} s")
    return 0
