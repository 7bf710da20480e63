"""Sources by the profiler's kernel implementation (vidur ``mlp_impl.py``) and blending of
distinct profiled shapes: the leave-one-model-out rules that fixed phi-2's activation and add."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ppsched.core.paths import data_dir
from ppsched.sim.cost.linear import scale_op, token_curve
from ppsched.sim.cost.profiles import Kernel, load_op_profiles, op_kernel
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
    assert _phi2("add").kernel == Kernel("torch_elementwise", passes=3, launches=2)
    assert _phi2("mlp_act").kernel == Kernel("torch_elementwise", passes=2)
    assert _phi2("input_layernorm").kernel.name == "layer_norm"
    llama_act = next(p for p in POOL if p.model == "Llama-2-7b-hf" and p.op == "mlp_act")
    assert llama_act.kernel == Kernel("silu_and_mul", passes=3)
    assert op_kernel("add") == Kernel("torch_elementwise", passes=3)  # sequential block


def test_parallel_block_add_is_two_add_launches():
    """phi-2 times attn + mlp + residual as one op: two torch adds. Predicted as one add it is
    ~50% low (the issue-13 figure, 46.6%); as two launches it is within 15%."""
    two = _lomo_mape("add", op_kernel("add", gated_mlp=False, parallel_block=True))
    one = _lomo_mape("add", op_kernel("add", gated_mlp=False, parallel_block=False))
    print(f"\nphi-2 add, leave-one-model-out: two launches {two:.1f}%, one launch {one:.1f}%")
    assert two < 15.0 < 40.0 < one


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
