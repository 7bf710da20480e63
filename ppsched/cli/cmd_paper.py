"""`ppsched figures` / `ppsched paper` / `ppsched report`: the CLI over experiments.paper."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from ppsched.cli.experiment_args import (
    add_common,
    add_search,
    add_trace,
    make_runner,
    make_setup,
    make_workload,
    search_flags,
)
from ppsched.core.errors import UserError


def register(subparsers) -> None:
    for name, handler, text in (("figures", cmd_figures, "the paper's fixed-load figures"),
                                ("paper", cmd_paper, "goodput curves, figures and REPORT.md")):
        p = subparsers.add_parser(name, help=text)
        add_common(p)
        add_search(p)
        if name == "paper":
            add_trace(p)  # replaces azure-conv in the goodput curves
        p.add_argument("--out", default="results")
        p.set_defaults(handler=handler)
    p = subparsers.add_parser("report", help="write REPORT.md from the CSVs under --out")
    p.add_argument("--out", default="results")
    p.set_defaults(handler=cmd_report)


def _plan(args: argparse.Namespace):
    from ppsched.experiments.goodput import SearchSettings
    from ppsched.experiments.paper import PaperPlan

    for flag in ("measure_s", "warmup_s", "cooldown_s"):
        if getattr(args, flag) is not None:
            raise UserError(f"--{flag.replace('_', '-')}: paper sizes each workload's window "
                            "itself (docs/GOODPUT.md); use `ppsched goodput` to override it")
    settings = SearchSettings(start=args.start, floor=args.floor, rel_tol=args.rel_tol,
                              max_steps=args.max_steps, **search_flags(args))
    main = None
    if getattr(args, "trace_file", None) is not None or getattr(args, "max_context", None):
        main = make_workload(args, None if args.trace_file else "azure-conv")
    return replace(PaperPlan(), settings=settings, main_workload=main)


def cmd_figures(args: argparse.Namespace) -> int:
    from ppsched.experiments.paper import figures_step

    out, start = Path(args.out), time.monotonic()
    with make_runner(args, "figures") as runner:
        figures_step(runner, make_setup(args), out, _plan(args))
    print(f"figures in {out / 'figures'} ({time.monotonic() - start:.0f} s)")
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from ppsched.experiments.paper import run_paper
    from ppsched.experiments.report import write_report

    out, start, plan = Path(args.out), time.monotonic(), _plan(args)
    cpu0 = time.process_time()
    with make_runner(args, "paper") as runner:
        run_paper(runner, lambda model: make_setup(args, model), out, plan)
    elapsed = time.monotonic() - start
    (out / "paper_run.json").write_text(json.dumps(
        {"wall_s": round(elapsed, 1), "runs_simulated": runner.computed,
         "runs_cached": runner.reused, "jobs": runner.jobs, "seeds": plan.settings.seeds,
         "verify": plan.settings.verify, "stop_early": plan.settings.stop_early,
         "parent_cpu_s": round(time.process_time() - cpu0, 1)}))
    path = write_report(out)
    print(f"report: {path}\nwall time: {elapsed:.0f} s ({runner.computed} runs simulated, "
          f"{runner.reused} from cache)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ppsched.experiments.report import write_report

    out = Path(args.out)
    if not (out / "goodput").is_dir() and not (out / "figures").is_dir():
        raise UserError(f"--out {str(out)!r} holds no results (no goodput/ or figures/ folder); "
                        "expected the folder of `ppsched paper`, `goodput` or `figures`")
    print(f"report: {write_report(out)}")
    return 0
