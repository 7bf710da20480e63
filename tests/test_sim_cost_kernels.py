"""Sources by the profiler's kernel implementation (vidur ``mlp_impl.py``), blending of
distinct profiled shapes and idle lanes of one-block-per-token kernels: the leave-one-model-out
rules that fixed phi-2's activation and add, and the TP-8 rope and activation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ppsched.core.paths import data_dir
from ppsched.sim.cost import scaling
from ppsched.sim.cost.linear import scale_op, token_curve
from ppsched.sim.cost.profiles import Kernel, LayerShape, load_op_profiles, op_kernel
from ppsched.sim.cost.scaling import flat_time, lane_share
from ppsched.sim.hardware import PROFILE_HARDWARE, get_hardware

POOL = load_op_profiles(Path(data_dir(None)).resolve())
HW = get_hardware(PROFILE_HARDWARE)


def _phi2(op: str):
    return next(p for p in POOL if p.model == "phi-2" and p.op == op)


def _lomo_mape(op: str, kernel: Kernel) -> float:
    target = _phi2(op)
    scaled = scale_op(op, target.dims, POOL, "phi-2", tp=1, gated=False, kernel=kernel)
    ms, _ = token_curve(scaled, HW, HW)
    pred = ms[target.tokens]
    return float(np.mean(np.abs(pred - target.median_ms) / target.median_ms) * 100)


def test_profiles_carry_the_profilers_kernel():
    assert _phi2("add").kernel == Kernel("torch_elementwise", passes=3, launches=2, flat=True)
    assert _phi2("mlp_act").kernel == Kernel("torch_elementwise", passes=2, flat=True)
    assert _phi2("input_layernorm").kernel.name == "layer_norm"
    llama_act = next(p for p in POOL if p.model == "Llama-2-7b-hf" and p.op == "mlp_act")
    assert llama_act.kernel == Kernel("silu_and_mul", passes=3, block_threads=1024)
    assert op_kernel("add") == Kernel("torch_elementwise", passes=3, flat=True)  # sequential


def test_parallel_block_add_is_two_add_launches():
    """phi-2 times attn + mlp + residual as one op: two torch adds. Predicted as one add it is
    ~50% low (the issue-13 figure, 46.6%); as two launches within ~15% (12.6% with the width
    elasticity, 15.1% with the flat-kernel rule since cost13: phi-2's adds run 10-15% slower
    than the gated models' torch add at the same element count)."""
    two = _lomo_mape("add", op_kernel("add", gated_mlp=False, parallel_block=True))
    one = _lomo_mape("add", op_kernel("add", gated_mlp=False, parallel_block=False))
    print(f"\nphi-2 add, leave-one-model-out: two launches {two:.1f}%, one launch {one:.1f}%")
    assert two < 20.0 < 40.0 < one


def test_gelu_borrows_torch_elementwise_not_silu_and_mul():
    """torch GELU parallelises over every element (a ~2 us floor at one token, like torch add);
    sarathi's SiluAndMul runs one block per token, so its one-token time grows with the width.
    Both scaled in bytes moved (GELU: 2 passes of the intermediate width); scaled by width from
    SiluAndMul (before this rule) phi-2's activation was 109% off."""
    gelu = _phi2("mlp_act")
    scaled = scale_op("mlp_act", gelu.dims, POOL, "phi-2", tp=1, gated=False,
                      kernel=gelu.kernel)
    assert scaled.source.op == "add"
    ours = _lomo_mape("mlp_act", gelu.kernel)
    silu = _lomo_mape("mlp_act", Kernel("silu_and_mul", passes=2))
    print(f"\nphi-2 GELU, leave-one-model-out: from torch add {ours:.1f}%, "
          f"from SiluAndMul {silu:.1f}%")
    assert ours < 30.0 < silu


def test_elementwise_ops_blend_distinct_shapes_and_keep_an_exact_one_alone():
    rope = scale_op("attn_rope", (6144,), POOL, tp=1)  # qwen2.5-32b PP4: no profiled 6144
    dims = [p.source.dims for p in rope.parts]
    assert len(dims) == 3 and len(set(dims)) == 3
    assert abs(sum(p.weight for p in rope.parts) - 1.0) < 1e-9
    exact = scale_op("input_layernorm", (5120,), POOL, tp=2)
    assert len(exact.parts) == 1 and exact.work_ratio == 1.0 and exact.source.tp == 2


def test_one_block_per_token_kernels_span_idle_lanes():
    """sarathi's RMSNorm / SiluAndMul (<= 1024 threads) and rope (<= 512 threads, one per
    rotated pair, query heads then key heads) loop a block over the width; the last pass of a
    width that is not a multiple of the block leaves lanes idle."""
    llama_tp8 = LayerShape(hidden=4096, intermediate=11008, heads=32, kv_heads=32, head_dim=128,
                           gated_mlp=True, tp=8)
    assert llama_tp8.dims("mlp_act") == (1376,) and llama_tp8.lanes("mlp_act") == 2048
    assert llama_tp8.lanes("input_layernorm") == 4096  # a multiple of the block: none idle
    assert llama_tp8.lanes("attn_rope") == 1024  # 4 + 4 heads of 64 pairs: one 256-thread pass each
    codellama_tp8 = LayerShape(hidden=8192, intermediate=22016, heads=64, kv_heads=8,
                               head_dim=128, gated_mlp=True, tp=8)
    # 8 query heads: 512 threads; the key pass (1 head, 64 pairs) keeps the 512-thread block
    assert codellama_tp8.dims("attn_rope") == (1152,)
    assert codellama_tp8.lanes("attn_rope") == 2048
    phi2 = _phi2("input_layernorm")
    assert phi2.lanes == phi2.dims[0]  # torch LayerNorm: not a one-block-per-token kernel


def test_idle_lane_share_is_measured_per_kernel():
    silu = lane_share(op_kernel("mlp_act"), POOL)
    rope = lane_share(op_kernel("attn_rope"), POOL)
    print(f"\nmeasured idle-lane share: SiluAndMul {silu:.2f}, rope {rope:.2f}")
    assert 0.4 <= silu <= 0.9 and 0.1 <= rope <= 0.5
    assert lane_share(op_kernel("input_layernorm"), POOL) == 0.0  # no profile has idle lanes


@pytest.mark.pure
def test_idle_lanes_improve_the_padded_profiles(monkeypatch):
    """Leave-one-model-out over every profile whose kernel leaves lanes idle (SiluAndMul and
    rope at widths off the block): counting idle lanes at the measured share beats the width
    alone (share forced to 0)."""
    padded = [p for p in POOL if p.lanes is not None and p.lanes != p.dims[0]]

    def mape() -> float:
        errs = []
        for prof in padded:
            scaled = scale_op(prof.op, prof.dims, POOL, prof.model, tp=prof.tp,
                              gated=prof.gated, kernel=prof.kernel, lanes=prof.lanes)
            ms, _ = token_curve(scaled, HW, HW)
            errs += (np.abs(ms[prof.tokens] - prof.median_ms) / prof.median_ms * 100).tolist()
        return float(np.mean(errs))

    ours = mape()
    monkeypatch.setattr(scaling, "LANE_SHARES", np.array([0.0]))
    width_only = mape()
    print(f"\n{len(padded)} padded profiles, leave-one-model-out: idle lanes {ours:.2f}%, "
          f"width only {width_only:.2f}%")
    assert ours < 0.9 * width_only  # 5.1% vs 6.1% when written


def test_flat_kernel_time_depends_on_the_element_count_alone():
    """torch's add runs over the flattened tensor, so a width-w add at M tokens takes what a
    width-w0 add takes at M w / w0 tokens, cache effects included (a 4096-wide add at 1024 tokens
    moves 25 MB in 12 us, 2.1 TB/s, partly from the 40 MB L2; at 4096 tokens 1.8 TB/s).
    Leave-one-model-out over the four gated models' adds: the flat rule beats the width
    elasticity."""
    adds = [p for p in POOL if p.op == "add" and p.gated]
    assert all(p.kernel.flat for p in adds)

    def mape(kernel: Kernel) -> float:
        errs = []
        for prof in adds:
            scaled = scale_op("add", prof.dims, POOL, prof.model, tp=prof.tp, kernel=kernel)
            ms, _ = token_curve(scaled, HW, HW)
            errs += (np.abs(ms[prof.tokens] - prof.median_ms) / prof.median_ms * 100).tolist()
        return float(np.mean(errs))

    flat = mape(adds[0].kernel)
    width = mape(dataclasses.replace(adds[0].kernel, flat=False))
    print(f"\ngated adds, leave-one-model-out: flat {flat:.2f}%, width elasticity {width:.2f}%")
    assert flat < 0.85 * width


def test_flat_time_floors_at_one_token_and_extrapolates_proportionally():
    add = next(p for p in POOL if p.op == "add" and p.model == "Qwen-72B" and p.tp == 1)
    t = flat_time(add, np.array([0.25, 1.0, 4096.0, 8192.0]))
    assert t[0] == t[1] == add.median_ms[0]
    assert t[3] == pytest.approx(2 * t[2])


def test_block_kernels_add_their_launch_floor_to_the_work():
    """One-block-per-token kernels (RMSNorm, SiluAndMul, rope) move between widths as a fixed
    cost plus a cost per unit of work (scaling.block_cost), not as a power of the work ratio:
    leave-one-model-out over their profiles, on the same sources, the block cost beats the
    elasticity, most of all for the widest rope (Qwen-72B TP1, 16 passes per block)."""
    block = [p for p in POOL if p.kernel.block_threads and p.gated]
    errs: dict[str, list[float]] = {"block": [], "elasticity": []}
    widest: dict[str, float] = {}
    for prof in block:
        scaled = scale_op(prof.op, prof.dims, POOL, prof.model, tp=prof.tp, kernel=prof.kernel,
                          lanes=prof.lanes)
        parts = tuple(dataclasses.replace(part, scale=part.work_ratio ** scaling.work_elasticity(
            part.source, POOL, prof.model, scaled.lane_share)) if part.rule == "block" else part
            for part in scaled.parts)
        for rule, ops in (("block", scaled), ("elasticity", dataclasses.replace(scaled,
                                                                                parts=parts))):
            ms, _ = token_curve(ops, HW, HW)
            err = np.abs(ms[prof.tokens] - prof.median_ms) / prof.median_ms * 100
            errs[rule] += err.tolist()
            if (prof.model, prof.tp, prof.op) == ("Qwen-72B", 1, "attn_rope"):
                widest[rule] = float(err[prof.tokens <= 64].mean())
    block_mape, elastic_mape = (float(np.mean(errs[r])) for r in ("block", "elasticity"))
    print(f"\nblock kernels, leave-one-model-out: block cost {block_mape:.2f}%, elasticity "
          f"{elastic_mape:.2f}%; Qwen-72B TP1 rope at <= 64 tokens {widest['block']:.1f}% vs "
          f"{widest['elasticity']:.1f}%")
    assert block_mape < elastic_mape
    assert widest["block"] < 0.75 * widest["elasticity"]
