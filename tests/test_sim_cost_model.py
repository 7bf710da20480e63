"""Cost model: the paper's phenomena on the cost side, memory, noise, extrapolation."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppsched.core.batch import BatchShape
from ppsched.core.errors import UserError
from ppsched.core.models import BUILTIN_MODELS
from ppsched.sim.cost import build_cost_model, split_layers
from ppsched.sim.cost.link import SIMPLE, LinkModel
from ppsched.sim.hardware import get_hardware

Q32 = BUILTIN_MODELS["qwen2.5-32b"]
Q14 = BUILTIN_MODELS["qwen2.5-14b"]
HW = "a100-40g-pcie"


def _pp4(model=Q32, **kw):
    return build_cost_model(model, HW, pp_size=4, tp_size=1, **kw)


def _decode(batch: int, ctx: int = 1024) -> BatchShape:
    return BatchShape(decode_count=batch, decode_ctx_sum=batch * ctx)


def test_split_layers_follows_sglang_rule() -> None:
    assert split_layers(64, 4) == (16, 16, 16, 16)
    assert split_layers(48, 4) == (12, 12, 12, 12)
    assert split_layers(62, 4) == (15, 16, 16, 15)  # remainder before the last stage
    with pytest.raises(UserError, match="pp_size=0"):
        split_layers(64, 0)


def test_decode_staircase_128_to_136_jumps_about_30_percent() -> None:
    cm = _pp4(noise=False)
    at128 = cm.stage_ms_median(1, _decode(128))
    at136 = cm.stage_ms_median(1, _decode(136))
    at96 = cm.stage_ms_median(1, _decode(96))
    print(f"\nqwen2.5-32b PP4 stage 1, decode ctx 1024: batch 96 {at96:.2f} ms, "
          f"128 {at128:.2f} ms, 136 {at136:.2f} ms (+{100 * (at136 / at128 - 1):.1f}%)")
    assert 1.2 < at136 / at128 < 1.5
    assert at128 / at96 < 1.2  # inside the band the cost barely grows


def test_2048_prefill_is_hundreds_of_ms_above_128() -> None:
    cm = _pp4(noise=False)
    big = cm.stage_ms_median(1, BatchShape(prefill=((0, 2048),)))
    small = cm.stage_ms_median(1, BatchShape(prefill=((0, 128),)))
    # physical floor: 2 FLOPs per parameter per token at the 312 TFLOP/s peak
    floor = 2 * 2048 * 16 * Q32.params_per_layer / 312e12 * 1e3
    print(f"\nqwen2.5-32b PP4 stage: prefill 2048 {big:.1f} ms, 128 {small:.1f} ms, difference "
          f"{big - small:.1f} ms (peak-FLOP floor for 2048: {floor:.1f} ms)")
    assert big > floor
    assert big - small > 100.0


def test_tp4_vs_pp4_decode_per_token() -> None:
    """Time to give every one of B decoding requests one token: TP4 one step, PP4 one round of
    four microbatches of B/4 through four stages (plus links)."""
    pp = _pp4(noise=False)
    tp = build_cost_model(Q32, HW, pp_size=1, tp_size=4, noise=False)
    rows = []
    for total in (32, 128, 512, 1024):
        micro = _decode(total // 4)
        pp_round = sum(pp.stage_ms_median(s, micro) + pp.link_ms(micro) for s in range(4))
        rows.append((total, tp.tp_step_ms(_decode(total)), pp_round))
    print("\nqwen2.5-32b decode, ctx 1024: B, TP4 step ms, PP4 round ms")
    for row in rows:
        print(f"  {row[0]:5d} {row[1]:8.2f} {row[2]:8.2f}")
    # What the model says: TP4 is faster per token at small batch (4x less weight traffic per
    # GPU outweighs 129 all-reduces); PP4 wins once the batch is large (all-reduce bytes grow
    # with the batch, PP's link traffic is small).
    assert rows[0][1] < rows[0][2]
    assert rows[-1][2] < rows[-1][1]


def test_last_stage_carries_lm_head_and_first_the_embedding() -> None:
    cm = _pp4(noise=False)
    shape = _decode(64)
    first, mid, last = (cm.stage_ms_median(s, shape) for s in (0, 1, 3))
    assert last > mid + 1.0  # hidden x 152064 GEMM on 64 rows plus sampling
    assert first > mid
    assert cm.stage_ms_median(1, BatchShape()) == 0.0


def test_kv_capacity_from_memory() -> None:
    cm = _pp4()
    per_token = 2 * Q32.kv_heads * Q32.head_dim * 2 * 16
    assert cm.kv_capacity_tokens == min(cm.stage_kv_tokens)
    # stage 0 holds the embedding table: less room than a middle stage
    assert cm.stage_kv_tokens[0] < cm.stage_kv_tokens[1]
    free_gb = cm.stage_kv_tokens[1] * per_token / 1e9
    print(f"\nqwen2.5-32b PP4 on 40 GB: KV tokens per stage {cm.stage_kv_tokens} "
          f"({free_gb:.1f} GB on a middle stage)")
    assert 10 < free_gb < 40 * 0.9
    smaller = build_cost_model(Q32, HW, pp_size=4, tp_size=1, mem_fraction_static=0.8)
    assert smaller.kv_capacity_tokens < cm.kv_capacity_tokens
    with pytest.raises(UserError, match="does not fit"):
        build_cost_model(Q32, HW, pp_size=1, tp_size=1)


def test_noise_is_seeded_and_matches_profile_spread() -> None:
    shape = _decode(100)
    a = _pp4(seed=3)
    b = _pp4(seed=3)
    c = _pp4(seed=4)
    draws_a = [a.stage_ms(1, shape) for _ in range(2000)]
    assert draws_a == [b.stage_ms(1, shape) for _ in range(2000)]
    assert draws_a[:50] != [c.stage_ms(1, shape) for _ in range(50)]
    median = a.stage_ms_median(1, shape)
    mean = sum(draws_a) / len(draws_a)
    cv = math.sqrt(sum((x - mean) ** 2 for x in draws_a) / len(draws_a)) / median
    print(f"\nnoise: median {median:.3f} ms, mean {mean:.3f} ms, CV {100 * cv:.2f}%")
    assert abs(mean / median - 1) < 0.005
    assert 0.002 < cv < 0.03  # the profiles' std/median is ~0.5-1.5%
    quiet = _pp4(noise=False)
    assert quiet.stage_ms(1, shape) == quiet.stage_ms_median(1, shape)


def test_extrapolation_past_profiled_ranges_keeps_growing() -> None:
    cm = _pp4(noise=False)
    at4096 = cm.stage_ms_median(1, BatchShape(prefill=((0, 4096),)))
    at6144 = cm.stage_ms_median(1, BatchShape(prefill=((0, 6144),)))
    at8192 = cm.stage_ms_median(1, BatchShape(prefill=((0, 8192),)))
    assert at4096 < at6144 < at8192 < 4 * at4096
    # long prefix beyond the attention profile's 4032 tokens
    near = cm.stage_ms_median(1, BatchShape(prefill=((4000, 512),)))
    far = cm.stage_ms_median(1, BatchShape(prefill=((16000, 512),)))
    assert near < far
    # decode past batch 128 and context 4032
    assert cm.stage_ms_median(1, _decode(128, 4032)) < cm.stage_ms_median(1, _decode(300, 8000))


def test_prefill_pieces_pay_one_launch_floor() -> None:
    cm = _pp4(noise=False)
    one = cm.stage_ms_median(1, BatchShape(prefill=((0, 256),)))
    two = cm.stage_ms_median(1, BatchShape(prefill=((0, 128), (0, 128))))
    assert two < one  # same linear tokens, less causal attention work


def test_link_and_cpu_overhead() -> None:
    cm = _pp4()
    shape = BatchShape(prefill=((0, 2048),))
    nbytes = 2 * 2048 * Q32.hidden * 2  # hidden_states and residual, bf16
    # the default link: nccl #1530's latency plus the bytes at calculon's 25 GB/s x 0.9
    assert cm.link_ms(shape) == pytest.approx(0.042 + nbytes / (25e9 * 0.9) * 1e3)
    # on a named ring variant a 42 MB send is bandwidth-bound: NCCL Simple's one step plus the
    # bytes at bus bandwidth
    ring = build_cost_model(Q32, "a100-40g-pcie-p2p", pp_size=4, tp_size=1)
    send = LinkModel(get_hardware("a100-40g-pcie-p2p").link)
    assert ring.link_ms(shape) == pytest.approx(send.p2p_ms(nbytes))
    simple_ms = (SIMPLE.base_us + SIMPLE.hop_us) / 1000
    assert ring.link_ms(shape) == pytest.approx(
        simple_ms + nbytes / (get_hardware("a100-40g-pcie-p2p").link.bus_gbps * 1e6))
    assert 0 < cm.cpu_overhead_ms(_decode(8)) < cm.cpu_overhead_ms(_decode(128))
    assert build_cost_model(Q32, HW, pp_size=1, tp_size=4).link_ms(shape) == 0.0


def test_build_errors_and_describe() -> None:
    with pytest.raises(UserError, match="unknown hardware 'h100'"):
        build_cost_model(Q32, "h100", pp_size=4, tp_size=1)
    with pytest.raises(UserError, match="tp_size=3"):
        build_cost_model(Q32, HW, pp_size=4, tp_size=3)
    with pytest.raises(UserError, match="tp_step_ms needs pp_size=1"):
        _pp4().tp_step_ms(_decode(4))
    cm = _pp4()
    assert cm.tables is build_cost_model(Q32, HW, pp_size=4, tp_size=1, seed=9).tables
    described = json.loads(json.dumps(cm.describe()))
    assert described["layers_per_stage"] == [16, 16, 16, 16]
    assert {s["op"] for s in described["scaled_ops"]} >= {"mlp_up_proj", "lm_head"}


def test_qwen14b_mlp_is_profiled_exactly() -> None:
    # internlm-20b has Qwen2.5-14B's hidden/intermediate: its MLP needs no scaling
    cm = _pp4(Q14)
    up = next(s for s in cm.tables.scaled_ops if s.op == "mlp_up_proj")
    assert up.source.model == "internlm-20b" and up.work_ratio == 1.0


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(st.tuples(st.integers(0, 20000), st.integers(1, 5000)), max_size=4),
       decodes=st.integers(0, 600), ctx=st.integers(1, 30000), stage=st.integers(0, 3))
def test_any_shape_costs_finite_positive_time(pieces, decodes, ctx, stage) -> None:
    cm = _pp4()
    shape = BatchShape(prefill=tuple(pieces), decode_count=decodes,
                       decode_ctx_sum=decodes * ctx)
    ms = cm.stage_ms(stage, shape)
    med = cm.stage_ms_median(stage, shape)
    assert math.isfinite(ms) and math.isfinite(med)
    if shape.batched_tokens:
        assert med > 0 and abs(ms - med) <= 0.25 * med
    else:
        assert ms == 0.0
