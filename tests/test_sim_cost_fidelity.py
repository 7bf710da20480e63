"""Cost-model fidelity rules: long-token extrapolation, same-TP sources, launch-bound
elementwise ops on the 40 GB part, and SGLang's decode CUDA graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ppsched.core.batch import BatchShape
from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.models import load_model_config
from ppsched.core.paths import data_dir
from ppsched.sim.cost import build_cost_model
from ppsched.sim.cost.linear import extrapolate, scale_op, token_curve
from ppsched.sim.cost.model import EAGER_LAUNCH_MS_PER_LAYER
from ppsched.sim.cost.profiles import load_op_profiles
from ppsched.sim.hardware import get_hardware

POOL = load_op_profiles(Path(data_dir(None)).resolve())
Q32 = load_model_config("qwen2.5-32b")


def _truncation_mape(rule) -> float:
    """Every profile cut at 2048 tokens; its measured rows past 2048 predicted by ``rule``."""
    cut = 2048
    errors = []
    for prof in POOL:
        curve = np.interp(np.arange(cut + 1.0), prof.tokens, prof.median_ms).tolist()
        test = prof.tokens > cut
        pred = np.array([rule(curve, int(m)) for m in prof.tokens[test]])
        errors.append(np.mean(np.abs(pred - prof.median_ms[test]) / prof.median_ms[test]))
    return float(np.mean(errors)) * 100


def _secant(curve, tokens):
    last, band = len(curve) - 1, (len(curve) - 1) // 4
    return curve[last] + (curve[last] - curve[last - band]) / band * (tokens - last)


def test_long_token_rule_beats_the_secant_on_held_out_long_rows():
    ours, secant = _truncation_mape(extrapolate), _truncation_mape(_secant)
    print(f"\nprofiles cut at 2048, rows 2064..4096 predicted: proportional {ours:.2f}% MAPE, "
          f"secant {secant:.2f}%")
    assert ours < secant
    assert ours <= 5.0


def test_ties_go_to_the_targets_tp_degree():
    for tp in (1, 2, 4, 8):
        scaled = scale_op("input_layernorm", (8192,), POOL, tp=tp)
        assert scaled.work_ratio == 1.0 and scaled.source.tp == tp


def test_small_elementwise_ops_are_not_charged_the_bandwidth_ratio():
    norm = scale_op("input_layernorm", (5120,), POOL, tp=1)
    hi, lo = get_hardware("a100-80g"), get_hardware("a100-40g-pcie")
    on80, _ = token_curve(norm, hi, hi)
    on40, _ = token_curve(norm, hi, lo)
    bandwidth = hi.hbm_gbps / lo.hbm_gbps
    assert on40[1] / on80[1] < 1.01  # launch-bound: the floor does not move
    assert on40[4096] / on80[4096] == pytest.approx(bandwidth, rel=0.05)


def test_decode_graph_pads_to_its_bucket_and_eager_above_the_cap():
    cm = build_cost_model(Q32, "a100-40g-pcie", pp_size=4, tp_size=1, noise=False)
    assert cm.graphs.cap == 32
    ctx = 1000

    def dec(n):
        return cm.breakdown(1, BatchShape(decode_count=n, decode_ctx_sum=n * ctx))

    assert dec(25)["rows"] == 32 and dec(25)["cuda_graph"] == 1.0
    assert dec(25)["linear_ms"] == pytest.approx(dec(32)["linear_ms"])
    assert dec(33)["rows"] == 33 and dec(33)["cuda_graph"] == 0.0
    mixed = cm.breakdown(1, BatchShape(prefill=((0, 16),), decode_count=8, decode_ctx_sum=8000))
    assert mixed["cuda_graph"] == 0.0 and mixed["rows"] == 8


def test_eager_stage_is_never_faster_than_its_kernel_launches():
    # qwen2.5-14b TP4 on the 80 GB part: a batch-1 decode step's kernels and all-reduces take
    # less than its eager launches, so only the graph gets the GPU time
    q14 = load_model_config("qwen2.5-14b")
    eager = build_cost_model(q14, "a100-80g", pp_size=1, tp_size=4, noise=False,
                             graphs=DecodeGraphs.disabled())
    graphed = build_cost_model(q14, "a100-80g", pp_size=1, tp_size=4, noise=False)
    shape = BatchShape(decode_count=1, decode_ctx_sum=100)
    launches = q14.layers * EAGER_LAUNCH_MS_PER_LAYER
    assert eager.stage_ms_median(0, shape) == pytest.approx(launches)
    assert graphed.graphs.cap == 512
    assert graphed.stage_ms_median(0, shape) < launches


def test_a_chunks_attention_grows_with_its_prefix_up_to_32k():
    cm = build_cost_model(Q32, "a100-40g-pcie", pp_size=4, tp_size=1, noise=False)
    attn = [cm.breakdown(1, BatchShape(prefill=((prefix, 2048),)))["attention_ms"]
            for prefix in (0, 4096, 8192, 16384, 30720)]
    assert attn == sorted(attn) and attn[-1] > 3 * attn[0]
    # past the profiled prefixes the growth is linear in the prefix (each cached token is read
    # by every query of the chunk): equal prefix steps, equal increments
    assert attn[4] - attn[3] == pytest.approx((attn[3] - attn[2]) * (30720 - 16384) / 8192,
                                              rel=1e-6)
