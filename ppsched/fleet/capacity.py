"""``ppsched plan``: per configuration and router policy, the least number of boxes that sustains
a target rate (or each rate of a day's profile) under the sustained-goodput criterion.

A fleet passes at rate r with N boxes when one run of N boxes behind the router, Poisson
arrivals at r over the goodput window (warm-up, measurement, cool-down; docs/GOODPUT.md), passes
``metrics.steady.verdict`` on the merged records of all boxes: the single-box criterion applied
to the fleet. One box's goodput (the goodput search on a fleet of one, which is the single-box
run) gives the starting point N0 = ceil(r / g1); ``box_search`` searches from there. Every run
goes through the Runner (run cache, local pool or Ray), and every chain of a configuration,
router and rate searches in parallel with the others.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo
from ppsched.experiments.goodput import SearchSettings
from ppsched.experiments.goodput_runs import measurement_window, run_spec
from ppsched.experiments.joint_search import SearchResult, joint_search
from ppsched.experiments.plan import Setup, make_config
from ppsched.experiments.policies import get_policy
from ppsched.experiments.runner import Runner, RunTask
from ppsched.experiments.workload_spec import WorkloadSpec
from ppsched.fleet.box_search import BoxSearch, least_boxes, lower_bound
from ppsched.fleet.config import FleetConfig
from ppsched.fleet.rate_profile import RateProfile
from ppsched.fleet.routers import RouterSettings
from ppsched.metrics.steady import Window, verdict

FLEET_SIMULATE = "ppsched.fleet.simulate:simulate_fleet"
SINGLE_BOX_ROUTER = RouterSettings("round_robin")  # a fleet of one: every policy is the same
DEFAULT_CONFIGS = ("predictive", "static-512", "tp4")


@dataclass(frozen=True, slots=True)
class PlanSettings:
    slo_scale: float = 1.0
    max_boxes: int = 64
    window: Window | None = None  # None: the goodput window sized from the workload
    single_box: SearchSettings = SearchSettings()  # one box's goodput search (its first seed)

    def __post_init__(self) -> None:
        if not (isinstance(self.slo_scale, (int, float)) and math.isfinite(self.slo_scale)
                and self.slo_scale > 0):
            raise UserError(f"--slo-scale {self.slo_scale!r}: expected a number > 0")
        if isinstance(self.max_boxes, bool) or not isinstance(self.max_boxes, int) \
                or self.max_boxes < 1:
            raise UserError(f"--max-boxes {self.max_boxes!r}: expected an integer >= 1")


@dataclass(frozen=True, slots=True)
class FleetPoint:
    """One fleet run: N boxes of a configuration behind a router at one rate."""

    config: str
    router: str
    rate: float
    boxes: int
    passed: bool
    attainment: float  # measured requests meeting both TTFT and TPOT SLOs
    p90_ttft_ms: float
    p90_tpot_ms: float
    reason: str
    busiest_share: float  # the busiest box's requests / the mean per box (1.0: even)
    busiest_share_per_poll: float  # the same per 30 s (the load poll interval), averaged
    prefix_hit_rate: float  # tokens served from the boxes' prefix caches (nan: no prefix ids)


@dataclass(frozen=True, slots=True)
class PlanAnswer:
    """The least boxes per rate for one configuration behind one router."""

    config: str
    router: str
    box_goodput: float
    searches: tuple[tuple[float, BoxSearch], ...]  # (rate, search), highest rate first


@dataclass(frozen=True)
class Plan:
    answers: tuple[PlanAnswer, ...]
    points: tuple[FleetPoint, ...]
    window: Window
    profile: RateProfile
    slo: Slo
    single_box_tried: dict[str, tuple[tuple[float, bool], ...]]


def check_configs(keys: Sequence[str]) -> tuple[str, ...]:
    """Policy keys of experiments.policies that are one run config each."""
    if not keys:
        raise UserError("--configs: expected at least one configuration")
    for key in keys:
        policy = get_policy(key)
        if policy.chunk == "oracle":
            raise UserError(f"--configs {key!r}: oracle-static is a choice among runs, not a "
                            "configuration; name a chunk (e.g. static-512)")
    return tuple(keys)


def measured_attainment(records: Sequence[RequestRecord], window: Window, slo: Slo) -> float:
    """Share of the measurement window's requests that met both SLOs (a 1-token request meets
    TPOT; rejected and unfinished ones miss)."""
    arrival = np.fromiter((r.arrival_s for r in records), float, len(records))
    if arrival.size == 0:
        return math.nan
    rel = arrival - arrival.min()
    inside = [r for r, x in zip(records, rel, strict=True)
              if window.warmup_s <= x < window.end_s]
    met = sum(1 for r in inside if not r.rejected and math.isfinite(r.finish_s)
              and r.ttft_ms <= slo.ttft_ms
              and (r.output_tokens < 2 or r.tpot_ms <= slo.tpot_ms))
    return met / len(inside) if inside else math.nan


class FleetRuns:
    """Fleet runs of one workload, window and SLO through a Runner, judged by the sustained
    criterion; every judged run is kept in ``points``."""

    def __init__(self, runner: Runner, setup: Setup, workload: WorkloadSpec, window: Window,
                 slo: Slo) -> None:
        self.runner, self.setup, self.workload = runner, setup, workload
        self.window, self.slo = window, slo
        self.points: list[FleetPoint] = []
        self._lock = threading.Lock()

    def submit(self, key: str, boxes: int, router: RouterSettings, rate: float) -> Future:
        box = make_config(get_policy(key), self.setup, self.slo)
        fleet = FleetConfig(box, boxes, router)
        return self.runner.submit(RunTask(fleet, run_spec(self.workload, rate, self.setup.seed,
                                                          self.window)))

    def judge(self, key: str, boxes: int, router: RouterSettings, rate: float) -> FleetPoint:
        outcome = self.submit(key, boxes, router, rate).result()
        point = _point(key, router.policy, rate, boxes, outcome.records, outcome.summary,
                       self.window, self.slo)
        with self._lock:
            self.points.append(point)
        return point

    def goodput(self, key: str, boxes: int, router: RouterSettings, search: SearchSettings,
                start: float | None = None) -> SearchResult:
        """The fleet's sustained goodput: the goodput search with fleet runs at each rate."""
        scale = 1.0  # ``self.slo`` is already scaled

        def evaluate(rates: Sequence[float]) -> list[dict[float, bool]]:
            futures = [self.submit(key, boxes, router, r) for r in rates]
            return [{scale: verdict(f.result().records, self.window, self.slo).ok}
                    for f in futures]

        return joint_search(evaluate, [scale], start=start or search.start,
                            growth=search.growth, floor=search.floor, rel_tol=search.rel_tol,
                            max_steps=search.max_steps, backing=search.backing)[scale]


def plan_capacity(runner: Runner, setup: Setup, workload: WorkloadSpec, profile: RateProfile,
                  configs: Sequence[str], routers: Sequence[str],
                  settings: PlanSettings = PlanSettings()) -> Plan:
    configs = check_configs(configs)
    router_settings = [RouterSettings(name) for name in routers]
    window = settings.window or measurement_window(workload, setup.base_slo)
    runs = FleetRuns(runner, setup, workload, window, setup.base_slo.scaled(settings.slo_scale))

    def chain(key: str, router: RouterSettings, rate: float, g1: Future) -> BoxSearch:
        start = lower_bound(rate, g1.result().goodput_rps)
        if start == 0:  # one box sustains no rate: no fleet size is an answer
            return BoxSearch(0, 0, ())
        if start > settings.max_boxes:
            return BoxSearch(0, start, ())
        return least_boxes(lambda n: runs.judge(key, n, router, rate).passed, start,
                           settings.max_boxes)

    rates = profile.rates
    workers = len(configs) * (1 + len(router_settings) * len(rates))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        g1 = {key: pool.submit(runs.goodput, key, 1, SINGLE_BOX_ROUTER, settings.single_box)
              for key in configs}
        chains = {(key, r.policy, rate): pool.submit(chain, key, r, rate, g1[key])
                  for key in configs for r in router_settings for rate in rates}
        answers = tuple(
            PlanAnswer(key, r.policy, g1[key].result().goodput_rps,
                       tuple((rate, chains[(key, r.policy, rate)].result()) for rate in rates))
            for key in configs for r in router_settings)
    return Plan(answers, tuple(runs.points), window, profile, runs.slo,
                {key: g1[key].result().tried for key in configs})


def _point(key: str, router: str, rate: float, boxes: int, records: Sequence[RequestRecord],
           summary: dict, window: Window, slo: Slo) -> FleetPoint:
    judged = verdict(records, window, slo)
    routed = summary.get("fleet", {}).get("routed") or [len(records)]
    mean = sum(routed) / len(routed)
    hits = [b.get("prefix_cache", {}).get("hit_rate") for b in summary.get("boxes", [])]
    hits = [h for h in hits if h is not None]
    return FleetPoint(key, router, rate, boxes, judged.ok,
                      measured_attainment(records, window, slo), judged.p90_ttft_ms,
                      judged.p90_tpot_ms, judged.reason, max(routed) / mean if mean else 1.0,
                      summary.get("fleet", {}).get("busiest_share_per_poll", 1.0),
                      float(np.mean(hits)) if hits else math.nan)

