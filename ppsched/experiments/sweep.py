"""Rates × policies × workloads on the simulator → one tidy CSV row per run."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import ORACLE_CANDIDATES, get_policy
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.tidy import run_row
from ppsched.experiments.workload_spec import WorkloadSpec


def expand_policies(keys: Sequence[str]) -> list[str]:
    """``oracle-static`` stands for its static candidates (the sweep shows all of them)."""
    out: list[str] = []
    for key in keys:
        for k in ([f"static-{c}" for c in ORACLE_CANDIDATES] if key == "oracle-static" else [key]):
            if k not in out:
                out.append(k)
    return out


def sweep(runner: Runner, setup: Setup, workloads: Sequence[WorkloadSpec],
          policies: Sequence[str], rates: Sequence[float], slo_scale: float = 1.0
          ) -> pd.DataFrame:
    plan = []
    slo = setup.base_slo.scaled(slo_scale)
    for workload in workloads:
        for key in expand_policies(policies):
            config = make_config(get_policy(key), setup, slo)
            for rate in rates:
                plan.append((workload, key, RunTask(config, workload.at_rate(rate))))
    futures = [runner.submit(task) for _, _, task in plan]
    rows = []
    from ppsched.metrics import summarize

    for (workload, key, task), future in zip(plan, futures, strict=True):
        outcome = future.result()
        summary = dict(outcome.summary)
        # The criterion at the requested scale (the cached summary holds the run's own SLO).
        scaled = summarize(outcome.records, setup.base_slo, slo_scale=slo_scale)
        summary["slo_attainment"] = scaled["slo_attainment"]
        summary["goodput_ok"] = scaled["goodput_ok"]
        rows.append(run_row(summary, task.config.to_dict(), workload=workload.name,
                            policy=key, rate=task.workload.rate, slo_scale=slo_scale,
                            cached=outcome.cached, run_key=outcome.key))
    return pd.DataFrame(rows)
