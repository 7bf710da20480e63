"""``simulate_fleet``: one event loop over N simulated engines behind a router model.

Arrivals are routed in (arrival time, request id) order. Before routing a request at time t every
engine runs its scheduler turns that start before t (``Engine.advance_until``), so the router
sees each box's load as it is at t; the engine then takes the request exactly where a single-box
run would. For ``power_of_two`` the boxes' token loads are sampled at every poll time (0, 30 s,
60 s, ...), each box advanced to that instant first, and the router compares those stale
samples. Boxes share nothing but the router: each has its own cost-model noise seed, controller,
delay scheduler, admission gate and prefix cache.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord, RequestSpec
from ppsched.fleet.config import FleetConfig
from ppsched.fleet.routers import build_router
from ppsched.metrics import summarize
from ppsched.sim.engine.simulate import BuiltEngine, build_engine, engine_result
from ppsched.sim.invariants import SimInvariantError


@dataclass(frozen=True)
class FleetResult:
    """Every request's record (all boxes, by request id), the fleet's summary (per-box
    summaries under ``boxes``) and the box each request was routed to."""

    records: tuple[RequestRecord, ...]
    summary: dict[str, Any]
    routed_to: tuple[int, ...]  # by position in ``records``
    iterations: None = None  # a fleet keeps no per-microbatch log (the Runner's field)


def simulate_fleet(config: FleetConfig, workload: Any) -> FleetResult:
    if not isinstance(config, FleetConfig):
        raise UserError(f"simulate_fleet: {config!r} is not a FleetConfig")
    requests: tuple[RequestSpec, ...] = tuple(workload.requests)
    n = config.boxes
    built = [build_engine(config.box_config(i), requests) for i in range(n)]
    engines = [b.engine for b in built]
    router = build_router(n, config.router, config.box.seed)
    poll_s = config.router.load_poll_s
    next_poll = 0.0
    polled = [0] * n
    routed: dict[int, int] = {}
    per_box: list[list[RequestSpec]] = [[] for _ in range(n)]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for spec in sorted(requests, key=lambda s: (s.arrival_s, s.req_id)):
        now = spec.arrival_s
        if router.needs_token_load:
            while next_poll <= now:
                for engine in engines:
                    engine.advance_until(next_poll)
                polled = [engine.token_load() for engine in engines]
                next_poll += poll_s
        for engine in engines:
            engine.advance_until(now)
        box = router.choose(spec, [engine.in_flight() for engine in engines], polled)
        if spec.req_id in routed:
            raise UserError(f"workload request id {spec.req_id} appears twice: expected "
                            "unique request ids")
        routed[spec.req_id] = box
        per_box[box].append(spec)
        engines[box].offer(spec)
    for engine in engines:
        engine.finish()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return _result(config, built, per_box, routed, requests, wall, cpu, dict(router.reasons))


def _result(config: FleetConfig, built: Sequence[BuiltEngine],
            per_box: Sequence[Sequence[RequestSpec]], routed: dict[int, int],
            requests: Sequence[RequestSpec], wall: float, cpu: float,
            reasons: dict[str, int]) -> FleetResult:
    box_results = [engine_result(b, config.box_config(i), per_box[i], wall_s=wall, cpu_s=cpu)
                   for i, b in enumerate(built)]
    records = sorted((rec for res in box_results for rec in res.records),
                     key=lambda r: r.req_id)
    if len(records) != len(requests) or len(routed) != len(requests):
        raise SimInvariantError(f"fleet conservation: {len(requests)} requests, "
                                f"{len(routed)} routed, {len(records)} records")
    summary = summarize(records, config.slo)
    end_s = max(res.summary["sim_end_s"] for res in box_results)
    summary.update({
        "sim_end_s": end_s, "sim_wall_s": wall, "sim_cpu_s": cpu,
        "sim_speed_cpu": end_s / cpu if cpu > 0 else float("inf"),
        "fleet": {"boxes": config.boxes, "router": config.router.policy,
                  "routed": [len(b) for b in per_box], "router_reasons": reasons,
                  "busiest_share_per_poll": _busiest_share(per_box, config.router.load_poll_s),
                  "gpus_per_box": config.gpus_per_box()},
        "boxes": [_box_brief(res.summary) for res in box_results],
        "config": config.to_dict()})
    return FleetResult(tuple(records), summary, tuple(routed[r.req_id] for r in records))


def _busiest_share(per_box: Sequence[Sequence[RequestSpec]], span_s: float) -> float:
    """Mean over ``span_s`` windows (the load poll interval) of the busiest box's arrivals over
    the mean per box: 1.0 is even; imbalance that evens out over a run shows here."""
    if len(per_box) < 2:
        return 1.0
    counts: dict[int, list[int]] = {}
    for box, specs in enumerate(per_box):
        for spec in specs:
            counts.setdefault(int(spec.arrival_s // span_s), [0] * len(per_box))[box] += 1
    shares = [max(c) * len(c) / sum(c) for c in counts.values()]
    return sum(shares) / len(shares) if shares else 1.0


def _box_brief(summary: dict[str, Any]) -> dict[str, Any]:
    """What a fleet keeps of each box's summary."""
    keys = ("requests", "completed", "rejected", "slo_attainment", "goodput_p90_ttft_ms",
            "goodput_p90_tpot_ms", "microbatches", "bubble_fraction", "retractions",
            "kv_peak_tokens", "prefix_cache")
    return {k: summary[k] for k in keys if k in summary}
