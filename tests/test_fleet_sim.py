"""The simulated fleet: a fleet of one is the single-box run, every fleet conserves requests,
and the engine's stepping API reproduces ``Engine.run`` however the steps are cut."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from record_compare import same_records

from ppsched.core.errors import UserError
from ppsched.experiments.run_config import RunConfig
from ppsched.experiments.workload_spec import WorkloadSpec, load
from ppsched.fleet.config import FleetConfig
from ppsched.fleet.routers import ROUTER_POLICIES, RouterSettings
from ppsched.fleet.simulate import simulate_fleet
from ppsched.sim import simulate
from ppsched.sim.engine.simulate import build_engine, engine_result
from ppsched.sim.invariants import SimInvariantError

AZURE = WorkloadSpec("azure-conv", rate=6.0, num_requests=160, seed=3)
MOONCAKE = WorkloadSpec("mooncake-synthetic", rate=1.5, num_requests=80, seed=5)
PREDICTIVE = RunConfig(chunk="predictive", mixed_chunk=True, seed=2)
GREEDY_DS = RunConfig(chunk="greedy", ds="on", seed=4)


@pytest.mark.parametrize("policy", ROUTER_POLICIES)
@pytest.mark.parametrize(("config", "workload"), [(PREDICTIVE, AZURE), (GREEDY_DS, MOONCAKE)])
def test_a_fleet_of_one_is_the_single_box_run(config, workload, policy):
    single = simulate(config, load(workload))
    fleet = simulate_fleet(FleetConfig(config, 1, RouterSettings(policy)), load(workload))
    assert same_records(fleet.records, single.records)
    assert fleet.summary["slo_attainment"] == single.summary["slo_attainment"]
    assert set(fleet.routed_to) == {0}


@pytest.mark.parametrize("policy", ROUTER_POLICIES)
@pytest.mark.parametrize("boxes", [2, 5, 16])
def test_every_request_is_routed_once_and_completed_or_rejected(boxes, policy):
    workload = load(MOONCAKE if policy == "cache_aware" else AZURE)
    config = RunConfig(chunk="static:512", mixed_chunk=True, admission="on")
    result = simulate_fleet(FleetConfig(config, boxes, RouterSettings(policy)), workload)
    ids = [s.req_id for s in workload.requests]
    assert [r.req_id for r in result.records] == sorted(ids)
    routed = result.summary["fleet"]["routed"]
    assert sum(routed) == len(ids) and len(routed) == boxes
    assert Counter(result.routed_to) == Counter({b: n for b, n in enumerate(routed) if n})
    for rec in result.records:
        assert rec.rejected or rec.finish_s >= rec.first_token_s >= rec.arrival_s
    per_box = result.summary["boxes"]
    assert sum(b["completed"] + b["rejected"] for b in per_box) == len(ids)
    if policy == "round_robin":
        assert max(routed) - min(routed) <= 1


def test_round_robin_fleet_spreads_load_so_more_boxes_attain_more():
    workload = load(WorkloadSpec("azure-conv", rate=14.0, num_requests=400, seed=1))
    config = RunConfig(chunk="static:512", mixed_chunk=True)
    one, four = (simulate_fleet(FleetConfig(config, n, RouterSettings("round_robin")), workload)
                 for n in (1, 4))
    assert four.summary["goodput_p90_ttft_ms"] < one.summary["goodput_p90_ttft_ms"]


def _stepped(config: RunConfig, workload, cuts: int, seed: int):
    """The run driven from outside: offer each arrival after advancing to it, with extra
    advance_until calls at random instants in between."""
    requests = tuple(workload.requests)
    built = build_engine(config, requests)
    engine = built.engine
    rng = random.Random(seed)
    ordered = sorted(requests, key=lambda s: (s.arrival_s, s.req_id))
    end = ordered[-1].arrival_s
    extra = sorted(rng.uniform(0, end) for _ in range(cuts))
    for spec in ordered:
        while extra and extra[0] < spec.arrival_s:
            engine.advance_until(extra.pop(0))
        engine.advance_until(spec.arrival_s)
        assert engine.next_event_time() >= spec.arrival_s
        engine.offer(spec)
    engine.finish()
    return engine_result(built, config, requests, wall_s=1.0, cpu_s=1.0)


@pytest.mark.parametrize(("config", "workload"), [(PREDICTIVE, AZURE), (GREEDY_DS, MOONCAKE)])
def test_stepping_reproduces_run_wherever_the_steps_are_cut(config, workload):
    whole = simulate(config, load(workload))
    stepped = _stepped(config, load(workload), cuts=300, seed=9)
    assert same_records(stepped.records, whole.records)
    assert stepped.iterations.equals(whole.iterations)
    assert same_records(stepped.decisions, whole.decisions)


def test_offers_out_of_time_order_are_refused():
    workload = load(AZURE)
    engine = build_engine(PREDICTIVE, workload.requests).engine
    first, second = sorted(workload.requests, key=lambda s: s.arrival_s)[:2]
    engine.offer(second)
    with pytest.raises(SimInvariantError, match=f"request {first.req_id}"):
        engine.offer(first)


def test_bad_fleet_settings_name_the_value():
    with pytest.raises(UserError, match="boxes=0"):
        FleetConfig(PREDICTIVE, 0)
    with pytest.raises(UserError, match="'2'"):
        FleetConfig(PREDICTIVE, "2")
    with pytest.raises(UserError, match="run configuration"):
        FleetConfig("pp4", 2)


def test_power_of_two_on_stale_load_piles_onto_the_lightest_box_between_polls():
    workload = load(WorkloadSpec("azure-conv", rate=8.0, num_requests=480, seed=2))
    config = RunConfig(chunk="static:512", mixed_chunk=True)
    share = {policy: simulate_fleet(FleetConfig(config, 4, RouterSettings(policy)), workload)
             .summary["fleet"]["busiest_share_per_poll"]
             for policy in ("round_robin", "power_of_two")}
    assert share["round_robin"] < 1.1
    # within a poll interval every sampled pair compares the same stale loads: the box that was
    # lightest at the poll wins every pair it is in, 3 of the 6 pairs of 4 boxes, so it gets
    # half the arrivals (2x its share) until the next poll
    assert share["power_of_two"] > 1.5
