from __future__ import annotations

from dataclasses import replace

import pytest
from test_dcp_support import make_snap, waiting

from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.core.policy_context import PolicyContext
from ppsched.core.rounds import round_bounds
from ppsched.core.slo import Slo
from ppsched.dcp.greedy import GreedyChunk, head_wait_ms
from ppsched.dcp.knobs import GreedyConfig
from ppsched.dcp.registry import build_chunk_controller

SLO = Slo(2000.0, 200.0)


def controller(initial: int = 512, pp: int = 4, signals: str = "completed") -> GreedyChunk:
    """The rule tests script completed-request samples, so they drive the paper variant; the
    leading-signal tests below script the stage latencies and the queue instead."""
    return GreedyChunk(SLO, pp, GreedyConfig(initial_tokens=initial, signals=signals))


def leading(initial: int = 512) -> GreedyChunk:
    return controller(initial, signals="leading")


def with_stages(snap, stage_ms):
    return replace(snap, recent_stage_ms=tuple(stage_ms))


def test_light_load_shrinks_to_minimum():
    g = controller(512)
    chunks = [g.decide(make_snap(iteration=4 * k, ttft=[80.0] * 10, tpot=[60.0] * 10)).chunk_tokens
              for k in range(5)]
    assert chunks == [384, 256, 128, 128, 128]
    assert g.decide(make_snap(iteration=20, ttft=[80.0], tpot=[60.0])).reason == \
        "shrink:ttft-slack"


def test_queue_building_with_tpot_slack_grows():
    g = controller(128)
    d = [g.decide(make_snap(iteration=4 * k, ttft=[900.0] * 10, tpot=[100.0] * 10))
         for k in range(4)]
    assert [x.chunk_tokens for x in d] == [256, 384, 512, 640]
    assert all(x.reason == "grow:ttft-tight" for x in d)
    inputs = dict(d[0].inputs)
    assert inputs["ttft_p_ms"] == pytest.approx(900.0)
    assert inputs["tpot_p_ms"] == pytest.approx(100.0)


def test_tpot_violation_shrinks_even_when_ttft_is_tight():
    g = controller(1024)
    d = g.decide(make_snap(ttft=[1500.0] * 10, tpot=[230.0] * 10))  # 230 > 1.08 * 200
    assert (d.chunk_tokens, d.reason) == (896, "shrink:tpot-violated")


def test_uses_p90_not_mean():
    g = controller(1024)
    # mean TPOT 110 (comfortable) but the P90 tail is at 300: greedy must shrink
    tpot = [80.0] * 9 + [300.0] * 1 + [300.0]
    d = g.decide(make_snap(ttft=[1500.0] * 10, tpot=tpot))
    assert d.reason == "shrink:tpot-violated"


def test_between_thresholds_keeps():
    g = controller(640)
    d = g.decide(make_snap(ttft=[400.0] * 10, tpot=[190.0] * 10))  # TTFT 0.2 SLO, TPOT 0.95
    assert (d.chunk_tokens, d.reason) == (640, "keep")


def test_kv_pressure_goes_to_smallest_candidate_above_running():
    g = controller(1536)
    d = g.decide(make_snap(kv_free=5_000, kv_total=100_000, decodes=(200, 150, 0, 90),
                           ttft=[1500.0], tpot=[50.0]))
    assert (d.chunk_tokens, d.reason) == (256, "kv-watermark")


def test_safety_floor_keeps_chunk_above_microbatch_decodes():
    g = controller(256)
    d = g.decide(make_snap(decodes=(300, 10, 10, 10), ttft=[80.0], tpot=[60.0]))
    assert d.chunk_tokens == 384 and d.reason.endswith("+safety-floor")
    assert d.chunk_tokens > 300


def test_cadence_once_per_pipeline_depth():
    g = controller(128, pp=4)
    first = g.decide(make_snap(iteration=0, ttft=[900.0], tpot=[100.0]))
    held = [g.decide(make_snap(iteration=i, ttft=[900.0], tpot=[100.0])) for i in (1, 2, 3)]
    assert all(h is first for h in held)
    nxt = g.decide(make_snap(iteration=4, ttft=[900.0], tpot=[100.0]))
    assert (first.chunk_tokens, nxt.chunk_tokens) == (256, 384)


def test_safety_floor_rechecked_between_decisions():
    g = controller(128, pp=4)
    g.decide(make_snap(iteration=0, ttft=[80.0], tpot=[60.0]))
    d = g.decide(make_snap(iteration=1, decodes=(0, 200, 0, 0)))
    assert (d.chunk_tokens, d.reason) == (256, "hold+safety-floor")


def test_engine_cap_limits_growth():
    g = controller(768)
    chunks = [g.decide(make_snap(iteration=4 * k, ttft=[900.0], tpot=[100.0], max_chunk=1000))
              .chunk_tokens for k in range(3)]
    assert chunks == [896, 896, 896]


def test_no_samples_keeps_initial():
    d = controller(512).decide(make_snap())
    assert (d.chunk_tokens, d.reason) == (512, "keep")


def test_config_names_the_bad_knob():
    with pytest.raises(UserError, match="greedy signals='mean': expected one of leading"):
        GreedyConfig(signals="mean")
    with pytest.raises(UserError, match=r"greedy q=0.0: expected a percentile in \(0, 100\]"):
        GreedyConfig(q=0.0)
    with pytest.raises(UserError, match="grow_ttft=0.05.*expected shrink_ttft < grow_ttft"):
        GreedyConfig(grow_ttft=0.05)


def test_round_bounds_are_the_pipeline_bound_of_disjoint_rounds():
    assert round_bounds([10.0, 10.0, 10.0], 4) == []  # not one full round yet
    # balanced round: 4 x 20 = sum = 80; one 2048-token chunk dominates: 4 x 120 > 180
    assert round_bounds([20.0] * 4, 4) == pytest.approx([80.0])
    assert round_bounds([120.0, 20.0, 20.0, 20.0], 4) == pytest.approx([480.0])
    # newest round first; a leftover partial round at the old end is dropped
    assert round_bounds([999.0, 20.0, 20.0, 20.0, 20.0, 120.0, 20.0, 20.0, 20.0], 4) \
        == pytest.approx([480.0, 80.0])


def test_leading_tpot_is_the_p90_round_not_the_mean():
    # 8 rounds of 4 x 30 = 120 ms and 2 rounds carrying a large chunk: 4 x 75 = 300 ms.
    # Mean 156 ms would say "grow" (< 0.85 SLO); the P90 round, 300 ms, says shrink.
    stages = [30.0] * 32 + [75.0, 30.0, 30.0, 30.0] * 2
    d = leading(1024).decide(with_stages(make_snap(ttft=[900.0] * 10), stages))
    assert d.reason == "shrink:tpot-violated"
    assert dict(d.inputs)["tpot_p_ms"] == pytest.approx(300.0)


def test_head_wait_counts_the_partly_prefilled_request():
    snap = make_snap(now_s=100.0, queue=[waiting(1, 99.5, 800)],
                     chunked=waiting(0, 98.0, 1000, 200))
    assert head_wait_ms(snap) == pytest.approx(2000.0)
    assert head_wait_ms(make_snap(now_s=100.0)) == 0.0


def test_leading_tpot_shrinks_on_current_rounds_despite_old_good_samples():
    # finished requests (old chunks) report TPOT 60 ms, but the rounds running now take 4 x 60
    g = leading(1024)
    snap = with_stages(make_snap(ttft=[900.0] * 10, tpot=[60.0] * 10), [60.0] * 16)
    d = g.decide(snap)
    assert (d.chunk_tokens, d.reason) == (896, "shrink:tpot-violated")
    assert dict(d.inputs)["tpot_p_ms"] == pytest.approx(240.0)
    # the paper variant reads the same snapshot as comfortable and grows
    assert controller(1024).decide(snap).reason == "grow:ttft-tight"


def test_leading_ttft_grows_while_the_queue_builds_before_any_first_token():
    # recent first tokens were fast (light-load samples), but the queue head has waited 1.5 s
    snap = with_stages(make_snap(now_s=100.0, queue=[waiting(7, 98.5, 1000)],
                                 ttft=[80.0] * 10, tpot=[60.0] * 10), [20.0] * 16)
    d = leading(512).decide(snap)
    assert (d.chunk_tokens, d.reason) == (640, "grow:ttft-tight")
    assert dict(d.inputs)["ttft_p_ms"] == pytest.approx(1500.0)
    assert controller(512).decide(snap).reason == "shrink:ttft-slack"


def test_leading_light_load_shrinks_and_no_stage_samples_means_no_tpot_push():
    g = leading(512)
    d = g.decide(make_snap(ttft=[], tpot=[300.0] * 10))  # nobody waits; no stage samples yet
    assert (d.chunk_tokens, d.reason) == (384, "shrink:ttft-slack")
    assert dict(d.inputs)["tpot_p_ms"] != dict(d.inputs)["tpot_p_ms"]  # NaN: no TPOT signal


def test_registry_builds_both_variants():
    ctx = PolicyContext(pp_size=4, slo=SLO, model=BUILTIN_MODELS["qwen2.5-32b"])
    for spec, signals in (("greedy", "leading"), ("greedy-paper", "completed")):
        c = build_chunk_controller(spec, ctx)
        assert isinstance(c, GreedyChunk) and c.name == spec and c.cfg.signals == signals
