"""The evaluation as a library: goodput curves, fixed-load figures (the CLI is cli/cmd_paper).

Layout under --out: ``goodput/<model>/`` and ``goodput/ds-<workload>/`` (goodput.csv +
goodput_vs_slo.png), ``figures/`` (one PNG + CSV per figure), ``REPORT.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

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
from ppsched.experiments.goodput_runs import measurement_window, run_spec
from ppsched.experiments.paper_refs import SYNTHETIC_RATES
from ppsched.experiments.plan import Setup
from ppsched.experiments.policies import ALL_POLICY_KEYS
from ppsched.experiments.runner import Runner
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.metrics.steady import Window

SCALES = (1.0, 0.8, 0.6, 0.4, 0.2)
TAIL_WORKLOADS = ("azure-conv", "summarization", "sharegpt")
PAPER_MODELS = ("qwen2.5-32b", "qwen2.5-14b")
# Delay scheduling's goodput on the decode-heavy synthetic workload only: on the CNN-Reversed
# stand-in (summarization-reversed) DS never acts (its slots stay below the first boundary,
# bench/ds.md), and its ~2700-token outputs make each sustained run ~10x a conversation run.
DS_WORKLOADS = ("synthetic-decode",)
DS_SCALES = (1.0, 0.6, 0.4)
PAPER_POLICIES = ALL_POLICY_KEYS + ("predictive-paper",)  # ours and the paper's rule
DS_POLICIES = ("static-2048", "predictive", "predictive-ds")


@dataclass(frozen=True, slots=True)
class PaperPlan:
    load_fraction: float = 0.8  # fixed-load figures run at this share of PP_static's goodput
    settings: SearchSettings = SearchSettings(seeds=3, verify=True)
    ds_seeds: int = 1  # DS runs are decode-heavy (several times a conversation run's cost)
    # The goodput curves' workload (both models): azure-conv unless the user gives a trace file
    # (--trace-file/--format/--max-context); the figures always use the catalog workloads.
    main_workload: WorkloadSpec | None = None
    replay_window_min: float = 15.0
    replay_speedup: float = 0.9

    @property
    def figure_settings(self) -> SearchSettings:
        """Fixed-load rates come from one seed (its runs are shared with the goodput search)."""
        return replace(self.settings, seeds=1, verify=False)


def spec_for(workload: str, setup: Setup) -> WorkloadSpec:
    return WorkloadSpec(workload, rate=1.0, seed=setup.seed)


def goodput_step(runner: Runner, setup: Setup, workload: str | WorkloadSpec, out: Path,
                 plan: PaperPlan, policies: tuple[str, ...] = PAPER_POLICIES,
                 scales: tuple[float, ...] = SCALES,
                 settings: SearchSettings | None = None) -> pd.DataFrame:
    spec = workload if isinstance(workload, WorkloadSpec) else spec_for(workload, setup)
    table = goodput_table(runner, setup, spec, policies, scales, settings or plan.settings)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "goodput.csv", index=False)
    plot_goodput(table, out)
    print(f"\n{setup.model} / {spec.name}:\n{format_table(table)}")
    return table


def fixed_load(runner: Runner, setup: Setup, workload: str, plan: PaperPlan
               ) -> tuple[float, WorkloadSpec]:
    """(rate, spec): ``load_fraction`` x PP_static's sustained goodput at SLO 1.0, with the
    workload's steady-state window (the figures score its measured requests)."""
    spec = spec_for(workload, setup)
    settings = plan.figure_settings
    table = goodput_table(runner, setup, spec, ("oracle-static",), (1.0,), settings)
    best = float(table["goodput_rps"].iloc[0])
    rate = float(f"{max(best, settings.floor) * plan.load_fraction:.3g}")
    return rate, run_spec(spec, rate, setup.seed, _window(spec, setup, plan))


def _window(spec: WorkloadSpec, setup: Setup, plan: PaperPlan) -> Window:
    return plan.settings.window or measurement_window(spec, setup.base_slo)


def figures_step(runner: Runner, setup: Setup, out: Path, plan: PaperPlan) -> None:
    figs = out / "figures"
    rows, azure = [], None
    for workload in TAIL_WORKLOADS:
        rate, spec = fixed_load(runner, setup, workload, plan)
        runs = run_policies(runner, setup, spec, PAPER_POLICIES,
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
        base = spec_for(workload, setup)
        spec = run_spec(base, rate, setup.seed, _window(base, setup, plan))
        rows += policy_rows(workload, rate, run_policies(runner, setup, spec, PAPER_POLICIES))
    plot_synthetic(pd.DataFrame(rows), figs)

    spec = WorkloadSpec("azure-conv", replay=True, window_min=plan.replay_window_min,
                        speedup=plan.replay_speedup, seed=setup.seed)
    rows = []
    for tpot in (200.0, 150.0):
        slo = Slo(setup.base_slo.ttft_ms, tpot)
        for key, run in run_policies(runner, setup, spec, PAPER_POLICIES, slo=slo).items():
            rows.append({"policy": key, "chosen": run.chosen, "tpot_slo_ms": tpot,
                         "ttft_slo_ms": slo.ttft_ms, "requests": len(run.outcome.records),
                         "slo_attainment": attainment(run.outcome, slo),
                         "ds_holds": run.outcome.summary.get("ds_holds")})
    plot_replay(pd.DataFrame(rows), figs,
                f"{setup.model}, azure-conv first {plan.replay_window_min:g} min replayed at "
                f"{plan.replay_speedup:g}× speed ({rows[0]['requests']} requests)")


def run_paper(runner: Runner, setup_for: Callable[[str], Setup], out: Path,
              plan: PaperPlan) -> None:
    """Every goodput curve (both models on azure-conv, DS on its workloads), then the figures."""
    for model in PAPER_MODELS:
        goodput_step(runner, setup_for(model), plan.main_workload or "azure-conv",
                     out / "goodput" / model, plan)
    for workload in DS_WORKLOADS:
        goodput_step(runner, setup_for("qwen2.5-32b"), workload,
                     out / "goodput" / f"ds-{workload}", plan, DS_POLICIES, DS_SCALES,
                     replace(plan.settings, seeds=plan.ds_seeds))
    figures_step(runner, setup_for("qwen2.5-32b"), out, plan)
