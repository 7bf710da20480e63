"""Goodput (highest Poisson rate meeting the paper's P90 criterion) per policy and SLO scale.

A policy that does not read the SLO runs once per rate and serves every scale (one joint search
over all scales, see ``joint_search``); a policy that reads it runs its own search per scale.
Searches run in threads that share one Runner (runs go to worker processes, each computed once
and cached). ``oracle-static`` is the best static candidate at each scale and names the winner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.experiments.joint_search import joint_search
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import BASELINE_KEY, ORACLE_CANDIDATES, get_policy
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.workload_spec import WorkloadSpec

GOODPUT_COLUMNS = ("model", "workload", "policy", "slo_scale", "goodput_rps", "ratio_vs_2048",
                   "chosen", "runs", "bracket_lo", "bracket_hi", "tried")


@dataclass(frozen=True, slots=True)
class SearchSettings:
    lo: float = 0.25
    hi: float = 4.0
    rel_tol: float = 0.05
    max_steps: int = 10

    def __post_init__(self) -> None:
        if not (0 < self.lo < self.hi):
            raise UserError(f"goodput search bracket lo={self.lo}, hi={self.hi}: expected "
                            "0 < lo < hi")
        if not (0 < self.rel_tol < 1) or self.max_steps < 1:
            raise UserError(f"goodput search rel_tol={self.rel_tol}, max_steps="
                            f"{self.max_steps}: expected 0 < rel_tol < 1 and max_steps >= 1")


def meets_criterion(records, setup: Setup, scale: float) -> bool:
    from ppsched.metrics import summarize

    return bool(summarize(records, setup.base_slo, slo_scale=scale)["goodput_ok"])


def _search(runner: Runner, setup: Setup, workload: WorkloadSpec, policy_key: str,
            scales: Sequence[float], settings: SearchSettings):
    policy = get_policy(policy_key)
    # SLO-blind policies: one config for all scales (make_config ignores the SLO given).
    config = make_config(policy, setup, setup.base_slo.scaled(scales[0]))

    def evaluate(rates: Sequence[float]) -> list[dict[float, bool]]:
        futures = [runner.submit(RunTask(config, workload.at_rate(r))) for r in rates]
        return [{s: meets_criterion(f.result().records, setup, s) for s in scales}
                for f in futures]

    return joint_search(evaluate, scales, lo=settings.lo, hi=settings.hi,
                        rel_tol=settings.rel_tol, max_steps=settings.max_steps)


def _run_keys(policies: Sequence[str]) -> list[str]:
    keys: list[str] = []
    for key in list(policies) + [BASELINE_KEY]:
        expanded = [f"static-{c}" for c in ORACLE_CANDIDATES] if key == "oracle-static" else [key]
        keys += [k for k in expanded if k not in keys]
    return keys


def goodput_table(runner: Runner, setup: Setup, workload: WorkloadSpec,
                  policies: Sequence[str], scales: Sequence[float],
                  settings: SearchSettings = SearchSettings()) -> pd.DataFrame:
    """One row per (policy, scale); ``ratio_vs_2048`` against static-2048 at the same scale."""
    groups: list[tuple[str, tuple[float, ...]]] = []
    for key in _run_keys(policies):
        if get_policy(key).reads_slo:
            groups += [(key, (s,)) for s in scales]
        else:
            groups.append((key, tuple(scales)))
    with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:
        futures = [(key, pool.submit(_search, runner, setup, workload, key, group, settings))
                   for key, group in groups]
        results = {}
        for key, future in futures:
            for scale, result in future.result().items():
                results[(key, scale)] = result

    rows = []
    for key in policies:
        for scale in scales:
            if key == "oracle-static":
                candidates = [(results[(f"static-{c}", scale)], c) for c in ORACLE_CANDIDATES]
                best, chunk = max(candidates, key=lambda rc: rc[0].goodput_rps)
                chosen = f"static:{chunk}"
            else:
                best, chosen = results[(key, scale)], ""
            base = results[(BASELINE_KEY, scale)].goodput_rps
            rows.append({
                "model": setup.model, "workload": workload.name, "policy": key,
                "slo_scale": scale, "goodput_rps": best.goodput_rps,
                "ratio_vs_2048": best.goodput_rps / base if base > 0 else math.nan,
                "chosen": chosen, "runs": len(best.tried), "bracket_lo": best.bracket[0],
                "bracket_hi": best.bracket[1],
                "tried": ";".join(f"{r:.4g}:{int(ok)}" for r, ok in best.tried)})
    return pd.DataFrame(rows, columns=list(GOODPUT_COLUMNS))


def pivot(table: pd.DataFrame, value: str = "goodput_rps") -> pd.DataFrame:
    """Policies as rows (input order), SLO scales as columns (descending)."""
    order = list(dict.fromkeys(table["policy"]))
    out = table.pivot_table(index="policy", columns="slo_scale", values=value, aggfunc="first",
                              dropna=False)
    return out.reindex(order)[sorted(out.columns, reverse=True)]
