"""Rates × policies × workloads on the simulator → one tidy CSV row per run.

Each run covers the workload's steady-state window (warm-up + measurement + cool-down, see
docs/GOODPUT.md) and is scored like a goodput search scores it: ``goodput_ok`` is the P90
criterion on the measured requests AND the stability test. With ``stop_early`` (the default) a
run ends once that verdict has certainly failed (``stopped_early``; its latency columns then
cover what it served until the stop, its misses counted infinite).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ppsched.experiments.goodput import SearchSettings, stop_rule
from ppsched.experiments.goodput_runs import measurement_window, run_spec
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import ORACLE_CANDIDATES, get_policy
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.tidy import run_row
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.metrics.steady import Window, verdict


def expand_policies(keys: Sequence[str]) -> list[str]:
    """``oracle-static`` stands for its static candidates (the sweep shows all of them)."""
    out: list[str] = []
    for key in keys:
        for k in ([f"static-{c}" for c in ORACLE_CANDIDATES] if key == "oracle-static" else [key]):
            if k not in out:
                out.append(k)
    return out


def sweep(runner: Runner, setup: Setup, workloads: Sequence[WorkloadSpec],
          policies: Sequence[str], rates: Sequence[float], slo_scale: float = 1.0,
          window: Window | None = None, stop_early: bool = True) -> pd.DataFrame:
    plan = []
    slo = setup.base_slo.scaled(slo_scale)
    for workload in workloads:
        win = window or measurement_window(workload, setup.base_slo)
        stop = stop_rule(SearchSettings(stop_early=stop_early), win, slo)
        for key in expand_policies(policies):
            config = make_config(get_policy(key), setup, slo)
            for rate in rates:
                task = RunTask(config, run_spec(workload, rate, setup.seed, win), stop=stop)
                plan.append((workload, key, win, task))
    futures = [runner.submit(task) for *_, task in plan]
    rows = []
    for (workload, key, win, task), future in zip(plan, futures, strict=True):
        outcome = future.result()
        summary = dict(outcome.summary)
        # Scored on the measurement window at the requested scale (the cached summary holds the
        # whole run at the run's own SLO).
        result = verdict(outcome.records, win, slo)
        summary.update({"goodput_ok": result.ok, "meets_p90": result.meets_p90,
                        "stable": result.stable, "balance": result.balance,
                        "measured": result.measured, "measured_p90_ttft_ms": result.p90_ttft_ms,
                        "measured_p90_tpot_ms": result.p90_tpot_ms,
                        "tail_p90_ttft_ms": result.tail_p90_ttft_ms, "verdict": result.reason,
                        "warmup_s": win.warmup_s, "measure_s": win.measure_s,
                        "cooldown_s": win.cooldown_s,
                        "stopped_early": bool(summary.get("stopped_early", False))})
        rows.append(run_row(summary, task.config.to_dict(), workload=workload.name,
                            policy=key, rate=task.workload.rate, slo_scale=slo_scale,
                            cached=outcome.cached, run_key=outcome.key))
    return pd.DataFrame(rows)
