"""The deterministic part of a cost model: per-token arrays and grids, built once and cached."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppsched.core.models import ModelConfig
from ppsched.sim.cost.attention import AttentionModel
from ppsched.sim.cost.linear import ScaledOp, scale_op, token_curve
from ppsched.sim.cost.overhead import OverheadModel
from ppsched.sim.cost.profiles import (
    ALL_OPS,
    ELEMENTWISE_OPS,
    LayerShape,
    load_attention_profile,
    load_cpu_profile,
    load_op_profiles,
)
from ppsched.sim.hardware import PROFILE_HARDWARE, HardwareSpec, get_hardware

# Ops run once per decoder layer. Two residual adds per layer (as in the profiled, unfused
# vLLM/vidur layer); norms, rope and the activation as profiled.
LAYER_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
             "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add", "add")


@dataclass(frozen=True)
class CostTables:
    model: ModelConfig
    hardware: HardwareSpec
    tp: int
    layer_ms: list[float]  # per decoder layer, linear + elementwise ops, index = batched tokens
    layer_cv: list[float]  # time-weighted run-to-run CV of those ops
    emb_ms: list[float]  # embedding lookup, index = tokens
    norm_ms: list[float]  # final norm before the LM head, index = tokens
    lm_head_ms: list[float]  # hidden x vocab/tp GEMM, index = sampled rows
    lm_head_cv: list[float]
    attention: AttentionModel
    attention_cv: tuple[float, float]  # (decode, prefill) median CV of the attention profile
    overhead: OverheadModel
    scaled_ops: tuple[ScaledOp, ...]
    data_dir: str

    def describe(self) -> dict[str, object]:
        return {"scaled_ops": [s.describe() for s in self.scaled_ops],
                "attention": self.attention.describe(),
                "attention_cv": {"decode": self.attention_cv[0], "prefill": self.attention_cv[1]},
                "overhead": self.overhead.describe(), "data_dir": self.data_dir,
                "layer_ms_at_tokens": {n: round(self.layer_ms[n], 5)
                                       for n in (1, 64, 128, 136, 256, 512, 1024, 2048, 4096)}}


def layer_shape(model: ModelConfig, tp: int) -> LayerShape:
    return LayerShape(hidden=model.hidden, intermediate=model.intermediate, heads=model.heads,
                      kv_heads=model.kv_heads, head_dim=model.head_dim,
                      gated_mlp=model.gated_mlp, tp=tp)


def _sum_curves(ops: list[ScaledOp], counts: list[int], profile_hw: HardwareSpec,
                hw: HardwareSpec) -> tuple[np.ndarray, np.ndarray]:
    total = np.zeros(4097)
    weighted_cv = np.zeros(4097)
    for scaled, count in zip(ops, counts, strict=True):
        ms, cv = token_curve(scaled, profile_hw, hw)
        total += count * ms
        weighted_cv += count * ms * cv
    return total, weighted_cv / np.maximum(total, 1e-12)


@functools.lru_cache(maxsize=16)
def build_tables(model: ModelConfig, hardware: str, tp: int, data_dir: Path) -> CostTables:
    """All per-token arrays for ``model`` on ``hardware`` at TP degree ``tp`` (per GPU)."""
    hw = get_hardware(hardware)
    profile_hw = get_hardware(PROFILE_HARDWARE)
    pool = load_op_profiles(data_dir)
    shape = layer_shape(model, tp)
    scaled = {op: scale_op(op, shape.dims(op), pool, tp=tp, gated=model.gated_mlp,
                           kernel=shape.kernel(op),
                           lanes=shape.lanes(op) if op in ELEMENTWISE_OPS else None)
              for op in ALL_OPS}
    unique = sorted(set(LAYER_OPS))
    layer, layer_cv = _sum_curves([scaled[o] for o in unique],
                                  [LAYER_OPS.count(o) for o in unique], profile_hw, hw)
    emb, _ = token_curve(scaled["emb"], profile_hw, hw)
    norm, _ = token_curve(scaled["input_layernorm"], profile_hw, hw)
    lm_head = scale_op("lm_head", (model.hidden, model.vocab // tp), pool, tp=tp,
                       gated=model.gated_mlp)
    lm_ms, lm_cv = token_curve(lm_head, profile_hw, hw)

    attn_profile = load_attention_profile(data_dir)
    # Decode attention streams the KV cache (memory-bound): scales with HBM bandwidth. Prefill
    # attention at profiled chunk sizes is compute-bound: no bandwidth correction.
    attention = AttentionModel(attn_profile, q_heads_per_gpu=model.heads // tp,
                               kv_heads_per_gpu=max(1, model.kv_heads // tp),
                               head_dim=model.head_dim,
                               hw_decode_factor=profile_hw.hbm_gbps / hw.hbm_gbps)
    cv = attn_profile["std"] / attn_profile["kernel"].clip(lower=1e-9)
    attention_cv = (float(cv[~attn_profile["is_prefill"]].median()),
                    float(cv[attn_profile["is_prefill"]].median()))
    return CostTables(
        model=model, hardware=hw, tp=tp, layer_ms=layer.tolist(), layer_cv=layer_cv.tolist(),
        emb_ms=emb.tolist(), norm_ms=norm.tolist(), lm_head_ms=lm_ms.tolist(),
        lm_head_cv=lm_cv.tolist(), attention=attention, attention_cv=attention_cv,
        overhead=OverheadModel(load_cpu_profile(data_dir)),
        scaled_ops=tuple(scaled[o] for o in ALL_OPS) + (lm_head,), data_dir=str(data_dir))
