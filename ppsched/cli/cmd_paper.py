"""`ppsched figures` / `ppsched paper` / `ppsched report`: the CLI over experiments.paper."""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
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
    p = subparsers.add_parser(
        "report", help="write REPORT.md from the CSVs under --out; --pin GROUP: the pinned "
        "summary from them; --benchmarks: BENCHMARKS.md and the README's results block")
    p.add_argument("--out", default="results")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--pin", choices=("paper", "heldout", "heldout-models"),
                      help="write results/pinned/ (and docs/img/) from the full results of "
                      "one command under --out")
    mode.add_argument("--benchmarks", action="store_true",
                      help="write BENCHMARKS.md and README.md's results block from "
                      "results/pinned/")
    p.add_argument("--check", action="store_true",
                   help="with --benchmarks: write nothing, exit 1 if a file is out of date")
    p.add_argument("--root", default=".", help="repository root (default: .)")
    p.add_argument("--commit", help="with --pin: the commit the results were measured at "
                   "(default: git rev-parse --short HEAD in --root)")
    p.add_argument("--date", help="with --pin: YYYY-MM-DD of the measurement (default: today, "
                   "UTC)")
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
          f"{runner.reused} from cache, {runner.same_as_twin} taken from the same run with DS "
          "switched)")
    return 0


def _head_commit(root: Path) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UserError(f"--root {str(root)!r} is not a git checkout ({exc}); pass --commit "
                        "with the commit the results were measured at") from exc
    return done.stdout.strip()


def _uncommitted(root: Path) -> bool:
    """Does the checkout differ from its commit in the code that produces results?"""
    done = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "ppsched",
                           "bench"], capture_output=True, text=True, check=False)
    return bool(done.stdout.strip())


def cmd_pin(args: argparse.Namespace) -> int:
    from ppsched.experiments.benchmarks_doc import IMG_DIR
    from ppsched.experiments.pin_results import copy_plots, pin_group
    from ppsched.experiments.pinned import PINNED_DIR

    root = Path(args.root)
    commit = args.commit or _head_commit(root)
    date = args.date or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    # Said in every sidecar, so a figure never claims a commit whose code did not produce it.
    dirty = args.commit is None and _uncommitted(root)
    note = "Measured with uncommitted changes to ppsched/ or bench/ on top of this commit."
    written = pin_group(args.pin, Path(args.out), root / PINNED_DIR, commit, date,
                        note if dirty else None)
    if args.pin == "paper":
        written += copy_plots(Path(args.out), root / IMG_DIR)
    print("\n".join(f"pinned: {path}" for path in written))
    return 0


def cmd_benchmarks(args: argparse.Namespace) -> int:
    from ppsched.experiments.benchmarks_doc import REGENERATE, write_docs

    stale = write_docs(Path(args.root), check=args.check)
    if args.check:
        if stale:
            print(f"out of date: {', '.join(map(str, stale))}; run `{REGENERATE}`")
            return 1
        print("BENCHMARKS.md and README.md's results block are up to date")
        return 0
    print(f"wrote {', '.join(map(str, stale))}" if stale else "already up to date")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ppsched.experiments.report import write_report

    if args.check and not args.benchmarks:
        raise UserError("--check goes with --benchmarks (it compares the generated docs)")
    if (args.commit or args.date) and not args.pin:
        raise UserError("--commit/--date go with --pin (they stamp the pinned results)")
    if args.pin:
        return cmd_pin(args)
    if args.benchmarks:
        return cmd_benchmarks(args)
    out = Path(args.out)
    if not (out / "goodput").is_dir() and not (out / "figures").is_dir():
        raise UserError(f"--out {str(out)!r} holds no results (no goodput/ or figures/ folder); "
                        "expected the folder of `ppsched paper`, `goodput` or `figures`")
    print(f"report: {write_report(out)}")
    return 0
