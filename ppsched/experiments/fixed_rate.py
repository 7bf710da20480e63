"""Runs of every policy at one fixed load, with oracle-static resolved to its best candidate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ppsched.core.slo import Slo
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import ORACLE_CANDIDATES, get_policy
from ppsched.experiments.runner import Runner, RunOutcome, RunTask
from ppsched.experiments.tidy import stat
from ppsched.experiments.workload_spec import WorkloadSpec


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: str
    chosen: str  # for oracle-static: the winning static:N; else the policy's own chunk spec
    outcome: RunOutcome


def attainment(outcome: RunOutcome, slo: Slo) -> float:
    """SLO attainment of a run's records under ``slo`` (may differ from the run's own SLO)."""
    from ppsched.metrics import summarize

    return float(summarize(outcome.records, slo)["slo_attainment"])


def _rank(outcome: RunOutcome, slo: Slo) -> tuple[float, float]:
    """Best static candidate at a fixed load: highest SLO attainment, then lowest P90 E2E."""
    return (-attainment(outcome, slo), stat(outcome.summary, "e2e_ms", "p90"))


def run_policies(runner: Runner, setup: Setup, workload: WorkloadSpec, policies: Sequence[str],
                 *, slo: Slo | None = None, keep_iterations: bool = False
                 ) -> dict[str, PolicyRun]:
    """Submit every run first (they go in parallel), then collect."""
    keys = {}
    for key in policies:
        expanded = [f"static-{c}" for c in ORACLE_CANDIDATES] if key == "oracle-static" else [key]
        for k in expanded:
            if k not in keys:
                config = make_config(get_policy(k), setup, slo or setup.base_slo)
                keys[k] = runner.submit(RunTask(config, workload, keep_iterations))
    outcomes = {k: f.result() for k, f in keys.items()}
    out: dict[str, PolicyRun] = {}
    for key in policies:
        if key == "oracle-static":
            ranking_slo = slo or setup.base_slo
            best = min(ORACLE_CANDIDATES,
                       key=lambda c: _rank(outcomes[f"static-{c}"], ranking_slo))
            out[key] = PolicyRun(key, f"static:{best}", outcomes[f"static-{best}"])
        else:
            out[key] = PolicyRun(key, get_policy(key).chunk, outcomes[key])
    return out
