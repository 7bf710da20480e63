"""Read a vidur-format ``mlp.csv`` and map its per-op timings onto a target model's layer shapes.

The CSV holds per-layer op latencies (ms) for one profiled model at several TP degrees and token
counts. A target model's op is priced by the profiled op of nearest per-GPU shape, scaled by the
FLOP (or element) ratio, so the profile's staircase in tokens is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig

SHAPE_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp",
                 "num_tokens", "num_tensor_parallel_workers")
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
# emb runs once per model on the first stage only: not a per-layer cost, left out.
LAYER_OPS = GEMM_OPS + ELEMENTWISE_OPS


def op_column(op: str) -> str:
    return f"time_stats.{op}.median"


@dataclass(frozen=True, slots=True)
class LayerShape:
    """Per-GPU layer dimensions: what a linear op's cost depends on."""

    heads: int
    kv_heads: int
    hidden: int
    intermediate: int
    head_dim: int
    gated: bool
    tp: int

    def __post_init__(self) -> None:
        if min(self.heads, self.kv_heads, self.hidden, self.intermediate, self.head_dim,
               self.tp) <= 0:
            raise UserError(f"layer shape {self}: every dimension must be > 0")

    def op_size(self, op: str) -> tuple[float, ...]:
        """(K, N) of a GEMM op, or (elements per token,) of an elementwise op, per GPU."""
        q = self.heads * self.head_dim / self.tp
        kv = self.kv_heads * self.head_dim / self.tp
        inter = self.intermediate / self.tp
        sizes = {
            "attn_pre_proj": (self.hidden, q + 2 * kv),
            "attn_post_proj": (q, self.hidden),
            "mlp_up_proj": (self.hidden, (2 if self.gated else 1) * inter),
            "mlp_down_proj": (inter, self.hidden),
            "input_layernorm": (self.hidden,),
            "post_attention_layernorm": (self.hidden,),
            "add": (self.hidden,),
            "attn_rope": (q + kv,),
            "mlp_act": (inter,),
        }
        return tuple(float(s) for s in sizes[op])


def model_layer_shape(model: ModelConfig, tp: int) -> LayerShape:
    return LayerShape(model.heads, model.kv_heads, model.hidden, model.intermediate,
                      model.head_dim, model.gated_mlp, tp)


@dataclass(frozen=True)
class ProfileGroup:
    """One profiled (shape, TP) group: a token grid and per-op median ms on it."""

    shape: LayerShape
    tokens: np.ndarray  # strictly increasing
    op_ms: dict[str, np.ndarray]  # the GEMM ops always; elementwise ops where profiled


def _bool(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "1.0")


def read_mlp_csv(path: str | Path) -> list[ProfileGroup]:
    """Parse and validate; raises UserError naming the file and the problem."""
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise UserError(f"mlp CSV {name!r} does not exist; expected a vidur-format mlp.csv")
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise UserError(f"mlp CSV {name!r} could not be parsed as CSV: {exc}") from exc
    optional = [op_column(op) for op in ELEMENTWISE_OPS if op_column(op) in df.columns]
    needed = SHAPE_COLUMNS + tuple(op_column(op) for op in GEMM_OPS) + tuple(optional)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise UserError(f"mlp CSV {name!r} lacks columns {missing}; expected the vidur mlp.csv "
                        "format (time_stats.<op>.median per op plus shape columns)")
    if df.empty:
        raise UserError(f"mlp CSV {name!r} has no rows; expected one row per token count")
    numeric = [c for c in needed if c != "use_gated_mlp"]
    values = df[numeric].apply(pd.to_numeric, errors="coerce")
    bad = values.isna() | ~np.isfinite(values.to_numpy(dtype=float))
    if bad.to_numpy().any():
        row, col = np.argwhere(bad.to_numpy())[0]
        raise UserError(f"mlp CSV {name!r}: column {numeric[col]!r} row {row + 2} is "
                        f"{df[numeric[col]].iloc[row]!r}; expected a finite number")
    values["use_gated_mlp"] = df["use_gated_mlp"].map(_bool)
    key_cols = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp",
                "num_tensor_parallel_workers"]
    groups = []
    for key, g in values.groupby(key_cols, sort=False):
        groups.append(_group(name, key, g, [c for c in needed if c.startswith("time_stats.")]))
    return groups


def _group(name: str, key: tuple, g: pd.DataFrame, ops: list[str]) -> ProfileGroup:
    heads, kv, hidden, inter, gated, tp = key
    tokens = g["num_tokens"].to_numpy(dtype=float)
    where = f"mlp CSV {name!r} (tp={int(tp)}, n_embd={int(hidden)})"
    bad_tokens = tokens[(tokens <= 0) | (tokens != np.round(tokens))]
    if len(bad_tokens):
        raise UserError(f"{where}: num_tokens={bad_tokens[0]!r}; expected positive integers")
    steps = np.diff(tokens)
    # vidur writes each group's grid descending; a grid that goes both ways is corrupt.
    if (steps > 0).any() and (steps < 0).any():
        first = np.sign(steps[steps != 0][0])
        i = int(np.argmax(np.sign(steps) == -first))
        raise UserError(f"{where}: token grid is not monotone (num_tokens {int(tokens[i])} -> "
                        f"{int(tokens[i + 1])}); expected one ascending or descending grid")
    if (g[ops].to_numpy() < 0).any():
        raise UserError(f"{where}: negative op latency; expected ms >= 0")
    med = g.groupby("num_tokens")[ops].median()  # repeated token counts: median of medians
    if len(med) < 4:
        raise UserError(f"{where}: only {len(med)} distinct token counts; expected >= 4 to fit")
    if heads <= 0 or hidden % heads:
        raise UserError(f"{where}: n_embd={int(hidden)} not divisible by n_head={int(heads)}")
    shape = LayerShape(int(heads), int(kv), int(hidden), int(inter), int(hidden // heads),
                       bool(gated), int(tp))
    return ProfileGroup(shape, med.index.to_numpy(dtype=float),
                        {op: med[op_column(op)].to_numpy(dtype=float) for op in LAYER_OPS
                         if op_column(op) in med.columns})


def _distance(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return math.sqrt(sum(math.log(x / y) ** 2 for x, y in zip(a, b, strict=True)))


def map_layer_ms(groups: list[ProfileGroup], target: LayerShape) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, per-layer ms of the target's linear + elementwise ops) on the shared token grid."""
    grid = groups[0].tokens
    for g in groups[1:]:
        grid = np.intersect1d(grid, g.tokens)
    if len(grid) < 4:
        raise UserError(f"profile groups share only {len(grid)} token counts; expected >= 4")
    total = np.zeros_like(grid)
    for op in LAYER_OPS:
        if any(op not in g.op_ms for g in groups):
            continue  # an elementwise op this architecture lacks (phi-2: no post-attn norm)
        want = target.op_size(op)
        best = min(groups, key=lambda g, op=op, want=want: _distance(g.shape.op_size(op), want))
        scale = math.prod(want) / math.prod(best.shape.op_size(op))
        idx = np.searchsorted(best.tokens, grid)
        total += scale * best.op_ms[op][idx]
    return grid, total


def shape_distance(group: LayerShape, model: ModelConfig, tp: int) -> float:
    """Distance of a profiled group from the target: log-ratios of hidden, intermediate/GPU."""
    return _distance((group.hidden, group.intermediate / group.tp),
                     (model.hidden, model.intermediate / tp))
