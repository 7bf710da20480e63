"""Sustained goodput per policy and SLO scale (docs/GOODPUT.md), over seeds, optionally verified.

Each evaluated rate is one run of warm-up + measurement window + cool-down Poisson arrivals,
scored by ``ppsched.metrics.steady.verdict`` (P90 criterion AND stability); on a replay spec
(``--arrivals trace``) a run is the trace's recorded timestamps at the rate's speed factor
instead (``recorded_arrivals``). A policy that does not
read the SLO runs once per rate and serves every scale (``joint_search`` over all scales); a
policy that reads it runs its own search per scale. Seed 0 searches from ``start``; later seeds
start at seed 0's goodput with a finer step. The reported goodput is the lowest over seeds (the
rate every seed sustains); median and max show the spread. ``verify`` re-runs each reported point
at 4x the measurement window with a seed no search used. ``oracle-static`` is the static
candidate with the highest reported goodput at each scale, or none when every candidate scores 0.
With ``stop_early`` every run ends once its verdict has certainly failed (metrics.early_stop):
the verdicts, and so every figure of the table, are those of runs simulated to the end.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pandas as pd

from ppsched.core.errors import UserError
from ppsched.core.slo import Slo
from ppsched.experiments.goodput_runs import measurement_window, run_spec
from ppsched.experiments.goodput_verify import verify_table
from ppsched.experiments.joint_search import (
    BatchEvaluate,
    Measured,
    SearchResult,
    SeedSearch,
    joint_search,
    lowest_rung,
)
from ppsched.experiments.oracle_search import search_candidates
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import BASELINE_KEY, ORACLE_CANDIDATES, get_policy
from ppsched.experiments.recorded_arrivals import (
    arrivals_label,
    replay_window,
    window_at,
)
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.metrics.early_stop import StopRule
from ppsched.metrics.steady import Window, verdicts

GOODPUT_COLUMNS = (
    "model", "workload", "policy", "controller", "slo_scale", "goodput_rps", "goodput_median",
    "goodput_max", "seeds", "per_seed", "ratio_vs_2048", "chosen", "runs", "bracket_lo",
    "bracket_hi", "tried", "warmup_s", "measure_s", "cooldown_s", "over_context",
    "over_context_share", "search_goodput_rps", "verify", "verify_seed", "verify_measure_s",
    "verify_p90_ttft_ms", "verify_p90_tpot_ms", "verify_reason", "verify_tried", "profile",
    "arrivals")
@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How the goodput search steps through rates: first rate, growth factor, floor, resolution
    (``rel_tol``), step limit, seeds, the backing probe, the measurement window (None: sized
    from the workload) and whether each point is verified at 4x the window."""

    start: float = 2.0  # first rate tried (req/s)
    growth: float = 2.0  # step up while passing / down while failing, seed 0
    floor: float = 0.1  # below this rate the goodput is reported as 0
    rel_tol: float = 0.02  # stop when (fail - pass) <= rel_tol * fail
    max_steps: int = 16
    seeds: int = 1
    reseed_growth: float = 1.08  # later seeds: step around seed 0's goodput
    # a pass counts only if the rate this fraction lower passes too (joint_search): twice the
    # resolution, the verification's lowering step
    backing: float = 0.04
    window: Window | None = None  # None: sized from the workload (metrics.steady.window_for)
    verify: bool = False
    stop_early: bool = True  # end each run once its verdict has certainly failed

    def __post_init__(self) -> None:
        if not (0 < self.floor <= self.start) or not math.isfinite(self.start):
            raise UserError(f"goodput search start={self.start}, floor={self.floor}: expected "
                            "0 < floor <= start")
        if not (0 < self.rel_tol <= 0.02):
            raise UserError(f"goodput search rel_tol={self.rel_tol}: expected a resolution in "
                            "(0, 0.02] (2% of the rate at most)")
        if self.max_steps < 2 or self.seeds < 1:
            raise UserError(f"goodput search max_steps={self.max_steps}, seeds={self.seeds}: "
                            "expected max_steps >= 2 and seeds >= 1")
        if not (2 * self.rel_tol <= self.backing < 1):
            raise UserError(f"goodput search backing={self.backing}: expected a fraction in "
                            f"[2 x rel_tol, 1) = [{2 * self.rel_tol}, 1)")
        if not (self.growth > 1 and self.reseed_growth > 1):
            raise UserError(f"goodput search growth={self.growth}, reseed_growth="
                            f"{self.reseed_growth}: expected factors > 1")


def stop_rule(settings: SearchSettings, window: Window, slo: Slo) -> StopRule | None:
    """The early stop of a run scored on ``window`` at ``slo`` (its loosest SLO when it is
    scored at several), or None when the settings run everything to the end."""
    if not settings.stop_early:
        return None
    return StopRule(slo.ttft_ms, window.warmup_s, window.end_s)


def seed_searcher(runner: Runner, setup: Setup, workload: WorkloadSpec, window: Window,
                  scales: Sequence[float], settings: SearchSettings) -> SeedSearch:
    """``search(policy_key, i, first, reseed)``: seed ``setup.seed + i``'s search of one policy
    over ``scales`` (``first``: seed 0's goodput per scale, None for seed 0 itself; ``reseed``
    False: only the scales where seed 0 found none, ``_seed_search``)."""
    loosest = setup.base_slo.scaled(max(scales))

    def stop_at(rate: float) -> StopRule | None:
        # the window the run's verdict reads (a replay's depends on its speed factor)
        return stop_rule(settings, window_at(workload, rate, window), loosest)

    def search(policy_key: str, i: int, first: dict[float, float] | None, reseed: bool
               ) -> dict[float, SearchResult]:
        seed = setup.seed + i
        # SLO-blind policies: one config for all scales (make_config ignores the SLO given).
        config = make_config(get_policy(policy_key), replace(setup, seed=seed),
                             setup.base_slo.scaled(scales[0]))

        def evaluate(rates: Sequence[float]) -> list[dict[float, bool]]:
            futures = [runner.submit(RunTask(config, run_spec(workload, r, seed, window),
                                             stop=stop_at(r))) for r in rates]
            slos = [setup.base_slo.scaled(s) for s in scales]
            return [{s: v.ok for s, v in zip(scales, verdicts(
                        f.result().records, replay_window(f.result().task.workload, window),
                        slos), strict=True)} for f in futures]

        return _seed_search(evaluate, scales, settings, first, reseed)
    return search


def _search(search: SeedSearch, policy_key: str, scales: Sequence[float], seeds: int
            ) -> dict[float, Measured]:
    """Every seed of one policy: seed 0 from the start, later seeds around its goodput."""
    found = [search(policy_key, 0, None, True)]
    first = {s: found[0][s].goodput_rps for s in scales}
    found += [search(policy_key, i, first, True) for i in range(1, seeds)]
    return {s: Measured(tuple(r[s] for r in found)) for s in scales}


def _seed_search(evaluate: BatchEvaluate, scales: Sequence[float], settings: SearchSettings,
                 first: dict[float, float] | None, reseed: bool = True
                 ) -> dict[float, SearchResult]:
    """One seed's search. Seed 0 (``first`` None) searches from ``settings.start``; a later seed
    starts each scale at seed 0's goodput with ``reseed_growth`` steps, and searches from the
    start only the scales where seed 0 found none. Per scale, so every policy is searched the
    same way: with a verdict that is not monotone in the rate near the threshold, a scale sent
    back to the start and one reseeded stop at different rates for the same behaviour.

    A scale where seed 0 found none first runs the start and the lowest rung of the start's
    ladder (``lowest_rung``) together: when both fail, the goodput is 0 after two runs, as the
    whole ladder (five runs from 2 req/s) would find under a monotone verdict; when either
    passes, the search from the start runs as it would have (the two runs are reused).

    ``reseed`` False leaves the reseeded scales out (no result for them): the scales where seed 0
    found none are searched apart from them, so their results are the same either way."""
    reseeded = [s for s in scales if first is not None and first[s] > 0]
    fresh = [s for s in scales if s not in reseeded]
    found: dict[float, SearchResult] = {}
    if reseeded and reseed:
        found.update(joint_search(evaluate, reseeded, start={s: first[s] for s in reseeded},
                                  growth=settings.reseed_growth, floor=settings.floor,
                                  rel_tol=settings.rel_tol, max_steps=settings.max_steps,
                                  backing=settings.backing))
    probed: list[tuple[float, dict[float, bool]]] = []
    if fresh and first is not None:
        rates = _probe_rates(settings)
        probed = list(zip(rates, evaluate(rates), strict=True))
        for scale in fresh:
            if not any(oks[scale] for _, oks in probed):
                found[scale] = SearchResult(0.0, tuple((r, False) for r, _ in probed),
                                            (0.0, min(r for r, _ in probed)))
        fresh = [s for s in fresh if s not in found]
    if fresh:
        searched = joint_search(evaluate, fresh, start=settings.start, growth=settings.growth,
                                floor=settings.floor, rel_tol=settings.rel_tol,
                                max_steps=settings.max_steps, backing=settings.backing)
        for scale, result in searched.items():  # a probe the search did not repeat is a run too
            rates = {r for r, _ in result.tried}
            extra = tuple((r, oks[scale]) for r, oks in probed if r not in rates)
            found[scale] = replace(result, tried=result.tried[:1] + extra + result.tried[1:])
    return found


def _probe_rates(settings: SearchSettings) -> list[float]:
    """The start and the lowest rung of its ladder (one rate when they coincide)."""
    start = float(f"{max(settings.floor, settings.start):.6g}")
    return list(dict.fromkeys((start, lowest_rung(settings.start, settings.growth,
                                                  settings.floor))))


def _policy_keys(policies: Sequence[str]) -> list[str]:
    keys: list[str] = []
    for key in list(policies) + [BASELINE_KEY]:
        expanded = [f"static-{c}" for c in ORACLE_CANDIDATES] if key == "oracle-static" else [key]
        keys += [k for k in expanded if k not in keys]
    return keys


def _unreported_candidates(policies: Sequence[str]) -> list[str]:
    """oracle-static's candidates that no row reports on its own (oracle_search may leave out
    their later seeds where they cannot win); static-2048 is always the baseline's row."""
    if "oracle-static" not in policies:
        return []
    keys = [f"static-{c}" for c in ORACLE_CANDIDATES]
    return [k for k in keys if k not in policies and k != BASELINE_KEY]


def _tried(measured: Measured) -> str:
    return " | ".join(f"seed{i}: " + ";".join(f"{r:.4g}:{int(ok)}" for r, ok in res.tried)
                      for i, res in enumerate(measured.per_seed))


def _oracle(results: dict[tuple[str, float], Measured], scale: float
            ) -> tuple[Measured, str, str]:
    """Best static candidate at a scale: highest reported goodput (then median); none if all 0."""
    ranked = max(ORACLE_CANDIDATES, key=lambda c: (results[(f"static-{c}", scale)].goodput,
                                                   statistics.median(results[(f"static-{c}",
                                                                              scale)].goodputs)))
    best = results[(f"static-{ranked}", scale)]
    if best.goodput == 0:  # no chunk sustains any rate on every seed: no oracle chunk to name
        return best, "none", "none"
    return best, f"static:{ranked}", f"static-{ranked}"


def goodput_table(runner: Runner, setup: Setup, workload: WorkloadSpec,
                  policies: Sequence[str], scales: Sequence[float],
                  settings: SearchSettings = SearchSettings()) -> pd.DataFrame:
    """One row per (policy, scale); ``ratio_vs_2048`` against static-2048 at the same scale."""
    window = settings.window or measurement_window(workload, setup.base_slo)
    candidates = _unreported_candidates(policies)
    groups: list[tuple[str, tuple[float, ...]]] = []
    for key in _policy_keys(policies):
        if key in candidates:
            continue
        if get_policy(key).reads_slo:
            groups += [(key, (s,)) for s in scales]
        else:
            groups.append((key, tuple(scales)))

    def searcher(group: Sequence[float]) -> SeedSearch:
        return seed_searcher(runner, setup, workload, window, group, settings)

    with ThreadPoolExecutor(max_workers=len(groups) + 1) as pool:
        futures = [pool.submit(_search, searcher(group), key, group, settings.seeds)
                   for key, group in groups]
        oracle = pool.submit(search_candidates, searcher(tuple(scales)), candidates,
                             tuple(scales), settings.seeds) if candidates else None
        results: dict[tuple[str, float], Measured] = {}
        for (key, _), future in zip(groups, futures, strict=True):
            for scale, measured in future.result().items():
                results[(key, scale)] = measured
        if oracle is not None:
            results.update(oracle.result())

    over, share = _over_context(workload, setup)
    rows = []
    for key in policies:
        for scale in scales:
            if key == "oracle-static":
                best, chosen, run_key = _oracle(results, scale)
            else:
                best, chosen, run_key = results[(key, scale)], "", key
            base = results[(BASELINE_KEY, scale)].goodput
            shown = window_at(workload, best.goodput, window)  # a replay's: at its goodput
            rows.append({
                "model": setup.model, "workload": workload.name, "policy": key,
                "controller": _controller(key, chosen), "slo_scale": scale,
                "goodput_rps": best.goodput,
                "goodput_median": statistics.median(best.goodputs),
                "goodput_max": max(best.goodputs), "seeds": len(best.per_seed),
                "per_seed": ";".join(f"{g:.4g}" for g in best.goodputs),
                "ratio_vs_2048": best.goodput / base if base > 0 else math.nan,
                "chosen": chosen, "runs": best.runs,
                "bracket_lo": best.per_seed[0].bracket[0],
                "bracket_hi": best.per_seed[0].bracket[1], "tried": _tried(best),
                "warmup_s": shown.warmup_s, "measure_s": shown.measure_s,
                "cooldown_s": shown.cooldown_s, "over_context": over,
                "over_context_share": share, "run_policy": run_key,
                "profile": _profile_used(setup, run_key), "arrivals": arrivals_label(workload)})
    table = pd.DataFrame(rows)
    if settings.verify:
        table = verify_table(runner, setup, workload, window, table, settings.stop_early)
    else:
        table["verify"] = "not run"
    return table.reindex(columns=list(GOODPUT_COLUMNS))


def _controller(key: str, chosen: str) -> str:
    """Which chunk controller (and DS) a row is: 'predictive' is ours, 'predictive-paper' the
    paper's rule; oracle-static names its winning chunk."""
    if key == "oracle-static":
        return chosen
    policy = get_policy(key)
    ds = " + DS" if policy.ds == "on" else ""
    return f"{policy.chunk}{ds} ({policy.parallel})"


def _profile_used(setup: Setup, run_key: str) -> str:
    """ALP's offline profile the row's runs read: the --profile path, 'built-in', or '' for a
    policy that reads none."""
    if run_key == "none" or not get_policy(run_key).uses_profile:
        return ""
    return setup.profile_path or "built-in"


def _over_context(workload: WorkloadSpec, setup: Setup) -> tuple[int, float]:
    """Requests of the workload's rows over the model's context (rejected by every run)."""
    from ppsched.core.models import load_model_config

    full = load(replace(workload, rate=1.0, replay=False, duration_s=None, num_requests=None,
                        window_min=None, speedup=1.0))
    count = full.over_context(load_model_config(setup.model).max_context)
    return count, count / len(full)


def pivot(table: pd.DataFrame, value: str = "goodput_rps") -> pd.DataFrame:
    """Policies as rows (input order), SLO scales as columns (descending)."""
    order = list(dict.fromkeys(table["policy"]))
    out = table.pivot_table(index="policy", columns="slo_scale", values=value, aggfunc="first",
                            dropna=False)
    return out.reindex(order)[sorted(out.columns, reverse=True)]
