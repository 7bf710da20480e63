"""`ppsched figures` / `ppsched paper` / `ppsched report`: every figure of the evaluation.

Layout under --out: ``goodput/<model>/`` and ``goodput/ds-<workload>/`` (goodput.csv +
goodput_vs_slo.png), ``figures/`` (one PNG + CSV per figure), ``REPORT.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.core.slo import Slo
from ppsched.experiments.fig_goodput import format_table, plot_goodput
from ppsched.experiments.fig_iter import (
    alp_frame,
    iteration_ms,
    percentile_table,
    plot_alp,
    plot_cdf,
)
from ppsched.experiments.fig_replay import plot_replay
from ppsched.experiments.fig_tail import plot_synthetic, plot_tail, policy_rows, tail_frame
from ppsched.experiments.fixed_rate import attainment, run_policies
from ppsched.experiments.goodput import SearchSettings, goodput_table
from ppsched.experiments.paper_refs import SYNTHETIC_RATES
from ppsched.experiments.plan import Setup
from ppsched.experiments.policies import ALL_POLICY_KEYS
from ppsched.experiments.runner import Runner
from ppsched.experiments.workload_spec import WorkloadSpec

SCALES = (1.0, 0.8, 0.6, 0.4, 0.2)
TAIL_WORKLOADS = ("azure-conv", "summarization", "sharegpt")
PAPER_MODELS = ("qwen2.5-32b", "qwen2.5-14b")
# Decode-heavy workloads for delay scheduling: the CNN-Reversed stand-in, and the synthetic one
# (on the stand-in DS never acts: its slots stay below the first boundary, bench/ds.md).
DS_WORKLOADS = ("summarization-reversed", "synthetic-decode")
# Runs of a fixed duration, not a fixed count, where the KV cache holds a whole count at once: 600
# short-prompt requests at a high rate are one burst that never reaches a steady state.
FIXED_DURATION_S = {"synthetic-decode": 240.0}


@dataclass(frozen=True, slots=True)
class PaperPlan:
    goodput_requests: int = 600  # requests per goodput-search run
    figure_requests: int = 600  # requests per fixed-load figure run
    load_fraction: float = 0.8  # fixed-load figures run at this share of PP_static's goodput
    settings: SearchSettings = SearchSettings()
    replay_window_min: float = 15.0
    replay_speedup: float = 0.9


def goodput_step(runner: Runner, setup: Setup, workload: str, out: Path, plan: PaperPlan,
                 policies: tuple[str, ...] = ALL_POLICY_KEYS) -> pd.DataFrame:
    duration = FIXED_DURATION_S.get(workload)
    spec = WorkloadSpec(workload, rate=1.0, seed=setup.seed, duration_s=duration,
                        num_requests=None if duration else plan.goodput_requests)
    table = goodput_table(runner, setup, spec, policies, SCALES, plan.settings)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "goodput.csv", index=False)
    plot_goodput(table, out)
    print(f"\n{setup.model} / {workload}:\n{format_table(table)}")
    return table


def fixed_load(runner: Runner, setup: Setup, workload: str, plan: PaperPlan) -> float:
    """``load_fraction`` × PP_static goodput at SLO 1.0 (searched on the static candidates)."""
    duration = FIXED_DURATION_S.get(workload)
    spec = WorkloadSpec(workload, rate=1.0, seed=setup.seed, duration_s=duration,
                        num_requests=None if duration else plan.goodput_requests)
    table = goodput_table(runner, setup, spec, ("oracle-static",), (1.0,), plan.settings)
    best = float(table["goodput_rps"].iloc[0])
    return float(f"{max(best, plan.settings.lo) * plan.load_fraction:.3g}")


def figures_step(runner: Runner, setup: Setup, out: Path, plan: PaperPlan) -> None:
    figs = out / "figures"
    rows, azure = [], None
    for workload in TAIL_WORKLOADS:
        rate = fixed_load(runner, setup, workload, plan)
        spec = WorkloadSpec(workload, rate=rate, num_requests=plan.figure_requests,
                            seed=setup.seed)
        runs = run_policies(runner, setup, spec, ALL_POLICY_KEYS,
                            keep_iterations=workload == "azure-conv")
        rows += policy_rows(workload, rate, runs)
        if workload == "azure-conv":
            azure = (rate, runs)
    plot_tail(tail_frame(rows), figs)

    rate, runs = azure
    lat = {k: iteration_ms(runs[k].outcome.iterations()) for k in
           ("oracle-static", "greedy", "predictive")}
    title = (f"{setup.model}, azure-conv @ {rate:g} req/s: PP_static "
             f"({runs['oracle-static'].chosen}) vs greedy vs predictive")
    plot_cdf(lat, figs, title)
    pd.DataFrame([{"policy": k, **v} for k, v in percentile_table(lat).items()]).to_csv(
        figs / "iteration_latency_percentiles.csv", index=False)
    predictive = runs["predictive"].outcome
    plot_alp(alp_frame(predictive.iterations(), predictive.task.config), figs,
             f"ALP on {setup.model}, azure-conv @ {rate:g} req/s (predictive DCP)")

    rows = []
    for workload, rate in SYNTHETIC_RATES.items():
        spec = WorkloadSpec(workload, rate=rate, num_requests=plan.figure_requests,
                            seed=setup.seed)
        rows += policy_rows(workload, rate, run_policies(runner, setup, spec, ALL_POLICY_KEYS))
    plot_synthetic(pd.DataFrame(rows), figs)

    spec = WorkloadSpec("azure-conv", replay=True, window_min=plan.replay_window_min,
                        speedup=plan.replay_speedup, seed=setup.seed)
    rows = []
    for tpot in (200.0, 150.0):
        slo = Slo(setup.base_slo.ttft_ms, tpot)
        for key, run in run_policies(runner, setup, spec, ALL_POLICY_KEYS, slo=slo).items():
            rows.append({"policy": key, "chosen": run.chosen, "tpot_slo_ms": tpot,
                         "ttft_slo_ms": slo.ttft_ms, "requests": len(run.outcome.records),
                         "slo_attainment": attainment(run.outcome, slo),
                         "ds_holds": run.outcome.summary.get("ds_holds")})
    plot_replay(pd.DataFrame(rows), figs,
                f"{setup.model}, azure-conv first {plan.replay_window_min:g} min replayed at "
                f"{plan.replay_speedup:g}× speed ({rows[0]['requests']} requests)")


def _plan(args: argparse.Namespace) -> PaperPlan:
    from ppsched.core.errors import UserError

    for flag, value in (("--num-requests", args.num_requests),
                        ("--figure-requests", args.figure_requests)):
        if value < 1:
            raise UserError(f"{flag} {value}: expected an integer >= 1")
    return PaperPlan(goodput_requests=args.num_requests, figure_requests=args.figure_requests,
                     settings=SearchSettings(args.lo, args.hi, args.rel_tol, args.max_steps))


def cmd_figures(args: argparse.Namespace) -> int:
    from ppsched.cli.cmd_experiments import _setup, make_runner

    out, start = Path(args.out), time.monotonic()
    with make_runner(args, "figures") as runner:
        figures_step(runner, _setup(args), out, _plan(args))
    print(f"figures in {out / 'figures'} ({time.monotonic() - start:.0f} s)")
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from ppsched.cli.cmd_experiments import _setup, make_runner
    from ppsched.experiments.report import write_report

    out, start, plan = Path(args.out), time.monotonic(), _plan(args)
    with make_runner(args, "paper") as runner:
        for model in PAPER_MODELS:
            goodput_step(runner, _setup(args, model), "azure-conv", out / "goodput" / model, plan)
        for workload in DS_WORKLOADS:
            goodput_step(runner, _setup(args, "qwen2.5-32b"), workload,
                         out / "goodput" / f"ds-{workload}", plan,
                         ("static-2048", "oracle-static", "predictive", "predictive-ds"))
        figures_step(runner, _setup(args, "qwen2.5-32b"), out, plan)
    elapsed = time.monotonic() - start
    (out / "paper_run.json").write_text(json.dumps(
        {"wall_s": round(elapsed, 1), "runs_simulated": runner.computed,
         "runs_cached": runner.reused, "jobs": runner.jobs}))
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


def register_paper_commands(subparsers, common) -> None:
    from ppsched.cli.cmd_experiments import _search_args

    for name, handler, text in (("figures", cmd_figures, "the paper's fixed-load figures"),
                                ("paper", cmd_paper, "goodput curves, figures and REPORT.md")):
        p = subparsers.add_parser(name, help=text)
        common(p)
        _search_args(p, PaperPlan().goodput_requests)
        p.add_argument("--figure-requests", type=int, default=PaperPlan().figure_requests,
                       help="requests per fixed-load figure run")
        p.add_argument("--out", default="results")
        p.set_defaults(handler=handler)
    p = subparsers.add_parser("report", help="write REPORT.md from the CSVs under --out")
    p.add_argument("--out", default="results")
    p.set_defaults(handler=cmd_report)


__all__ = ["PaperPlan", "cmd_figures", "cmd_paper", "cmd_report", "figures_step",
           "goodput_step"]
