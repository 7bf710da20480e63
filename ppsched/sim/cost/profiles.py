"""Reading the vendored vidur A100 profiles into plain numpy tables (build time only)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ppsched.core.errors import UserError

# Ops of one decoder layer in vidur's mlp.csv, plus the embedding lookup.
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMENTWISE_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add",
                   "emb")
ALL_OPS = GEMM_OPS + ELEMENTWISE_OPS
ATTENTION_FILE = "attention_h8192_q64_kv8_tp2.csv"
CPU_FILE = "cpu_overheads_codellama34b_tp2.csv"


@dataclass(frozen=True, slots=True)
class Kernel:
    """How vidur's profiler (``vidur/profiling/mlp/mlp_impl.py``) runs an elementwise op:
    which kernel implementation, how many tensor passes over one token's width it makes (reads +
    writes), and how many launches one timed op is. Ops of one implementation are comparable in
    the bytes they move per launch; ops of another are not (their floor and efficiency differ)."""

    name: str
    passes: int = 1
    launches: int = 1
    # sarathi's one-block-per-token kernels (csrc/{layernorm,activation,pos_encoding}_kernels.cu):
    # grid = tokens, block = min(threads needed, this cap), each thread looping over the width;
    # 0 for kernels that parallelise over every element (torch) or are GEMMs
    block_threads: int = 0
    # runs over the flattened tensor (torch's TensorIterator elementwise kernels): its time
    # depends on the element count tokens x width alone, not on how it splits into the two
    flat: bool = False


@dataclass(frozen=True, slots=True)
class LayerShape:
    """Per-GPU shape of one decoder layer: what decides the cost of each op."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    gated_mlp: bool
    tp: int
    # attention and MLP in parallel off one LayerNorm (phi-2, vidur ``post_attn_norm=False``)
    parallel_block: bool = False

    def __post_init__(self) -> None:
        if self.tp < 1 or self.heads % self.tp:
            raise UserError(f"tp_size={self.tp}: expected a divisor of heads={self.heads}")

    def dims(self, op: str) -> tuple[int, ...]:
        """GEMM ops: (K, N) per GPU; elementwise ops: (width per token,)."""
        q = self.heads // self.tp * self.head_dim
        kv = max(1, self.kv_heads // self.tp) * self.head_dim  # kv heads replicate past tp=kv
        inter = self.intermediate // self.tp
        if op == "attn_pre_proj":
            return (self.hidden, q + 2 * kv)
        if op == "attn_post_proj":
            return (q, self.hidden)
        if op == "mlp_up_proj":
            return (self.hidden, (2 if self.gated_mlp else 1) * inter)
        if op == "mlp_down_proj":
            return (inter, self.hidden)
        if op == "attn_rope":
            return (q + kv,)
        if op == "mlp_act":
            return (inter,)
        if op in ("input_layernorm", "post_attention_layernorm", "add", "emb"):
            return (self.hidden,)
        raise ValueError(f"unknown op {op!r}")

    def kernel(self, op: str) -> Kernel:
        return op_kernel(op, self.gated_mlp, self.parallel_block)

    def lanes(self, op: str) -> int:
        """Elements per token that ``op``'s thread blocks span, idle lanes included: a
        one-block-per-token kernel (Kernel.block_threads) runs min(threads needed, cap) threads
        and loops ceil(work / threads) times, so a width that is not a multiple of the block
        leaves lanes idle in the last pass (Llama-2-7b TP8 SiluAndMul: 1376 -> 2 x 1024). Rope
        runs one thread per rotated pair, over the query heads and then the key heads
        (rotary_dim = head_dim, as vidur's profiler builds it): CodeLlama-34b TP8, 8 query heads
        and 1 key head per GPU, spans 2 x 512 pairs for 1152 elements. Other kernels: the
        width."""
        (width,) = self.dims(op)
        cap = self.kernel(op).block_threads
        if not cap:
            return width
        if op != "attn_rope":
            threads = min(width, cap)
            return threads * -(-width // threads)
        pairs_q = self.heads // self.tp * self.head_dim // 2
        pairs_k = max(1, self.kv_heads // self.tp) * self.head_dim // 2
        threads = min(pairs_q, cap)
        return 2 * threads * (-(-pairs_q // threads) + -(-pairs_k // threads))


def op_kernel(op: str, gated_mlp: bool = True, parallel_block: bool = False) -> Kernel:
    """The profiler's implementation of ``op`` (see Kernel). Sequential-block models use
    sarathi's fused RMSNorm and SiluAndMul (reads gate and up, writes one: 3 passes of the
    intermediate width) and one torch add (a + b -> c: 3 passes); the parallel block (phi-2)
    uses torch LayerNorm, torch GELU (read, write: 2 passes; the same TensorIterator elementwise
    kernel as torch add) and times ``attn + mlp + residual`` as one op: two torch adds."""
    if op in GEMM_OPS or op == "lm_head":
        return Kernel("gemm")
    if op in ("input_layernorm", "post_attention_layernorm"):
        return (Kernel("layer_norm", passes=2) if parallel_block
                else Kernel("rms_norm", passes=2, block_threads=1024))
    if op == "mlp_act":
        return (Kernel("silu_and_mul", passes=3, block_threads=1024) if gated_mlp
                else Kernel("torch_elementwise", passes=2, flat=True))
    if op == "add":
        return Kernel("torch_elementwise", passes=3, launches=2 if parallel_block else 1,
                      flat=True)
    if op == "attn_rope":
        return Kernel("rope", passes=2, block_threads=512)  # one thread per rotated pair
    if op == "emb":
        return Kernel("embedding")
    raise ValueError(f"unknown op {op!r}")


@dataclass(frozen=True, slots=True)
class OpProfile:
    """Measured medians of one op of one profiled model at one TP degree, by token count."""

    model: str
    tp: int
    op: str
    dims: tuple[int, ...]
    tokens: np.ndarray  # sorted, unique
    median_ms: np.ndarray
    cv: np.ndarray  # std / median at each token count (run-to-run spread)
    gated: bool = True  # gated (SwiGLU, full rotary) layer family; phi-2 is not (GELU, partial)
    kernel: Kernel = Kernel("gemm")  # the profiler's implementation of this op (LayerShape.kernel)
    lanes: int | None = None  # elementwise: LayerShape.lanes (None: the width, no idle lanes)


def _layer_shape_from_row(row: pd.Series, parallel_block: bool) -> LayerShape:
    heads, hidden = int(row["n_head"]), int(row["n_embd"])
    return LayerShape(hidden=hidden, intermediate=int(row["n_expanded_embd"]), heads=heads,
                      kv_heads=int(row["n_kv_head"]), head_dim=hidden // heads,
                      gated_mlp=bool(row["use_gated_mlp"]),
                      tp=int(row["num_tensor_parallel_workers"]), parallel_block=parallel_block)


def profile_dir(data_dir: Path) -> Path:
    path = data_dir / "profiles" / "a100"
    if not path.is_dir():
        raise UserError(f"profile folder {str(path)!r} does not exist; expected the vendored "
                        "vidur A100 profiles under <data-dir>/profiles/a100")
    return path


@functools.lru_cache(maxsize=8)
def load_op_profiles(data_dir: Path) -> tuple[OpProfile, ...]:
    """Every (model, tp, op) in <data_dir>/profiles/a100/*/mlp.csv; duplicate rows averaged."""
    files = sorted(profile_dir(data_dir).glob("*/mlp.csv"))
    if not files:
        raise UserError(f"no */mlp.csv under {str(profile_dir(data_dir))!r}; expected vidur "
                        "per-model MLP profiles")
    out: list[OpProfile] = []
    for path in files:
        frame = pd.read_csv(path)
        model = path.parent.name
        # vidur times post_attention_layernorm only in the sequential block; without it the
        # profile is of the parallel block (phi-2)
        parallel = "time_stats.post_attention_layernorm.median" not in frame.columns
        for tp, part in frame.groupby("num_tensor_parallel_workers"):
            shape = _layer_shape_from_row(part.iloc[0], parallel)
            grouped = part.groupby("num_tokens")
            for op in ALL_OPS:
                med_col, std_col = f"time_stats.{op}.median", f"time_stats.{op}.std"
                if med_col not in part.columns:
                    continue  # phi-2 has no post_attention_layernorm (parallel block)
                med = grouped[med_col].mean()
                std = grouped[std_col].mean() if std_col in part.columns else med * 0.0
                ok = med.to_numpy() > 0
                out.append(OpProfile(
                    model=model, tp=int(tp), op=op, dims=shape.dims(op),
                    tokens=med.index.to_numpy(dtype=np.int64)[ok],
                    median_ms=med.to_numpy(dtype=np.float64)[ok],
                    cv=(std.to_numpy(dtype=np.float64) / np.maximum(med.to_numpy(), 1e-9))[ok],
                    gated=shape.gated_mlp, kernel=shape.kernel(op),
                    lanes=shape.lanes(op) if len(shape.dims(op)) == 1 else None))
    return tuple(out)


def read_attention_rows(data_dir: Path) -> pd.DataFrame:
    """Every raw row of the FlashAttention profile (repeats kept), with ``kernel``, ``std`` and
    ``total`` (kernel + input/output reshape) in ms."""
    path = profile_dir(data_dir) / ATTENTION_FILE
    if not path.is_file():
        raise UserError(f"attention profile {str(path)!r} not found; expected vidur's "
                        f"{ATTENTION_FILE}")
    frame = pd.read_csv(path)
    parts = ("attn_input_reshape", "attn_output_reshape")
    frame["kernel"] = np.where(frame["is_prefill"], frame["time_stats.attn_prefill.median"],
                               frame["time_stats.attn_decode.median"])
    frame["std"] = np.where(frame["is_prefill"], frame["time_stats.attn_prefill.std"],
                            frame["time_stats.attn_decode.std"])
    reshape = sum(frame[f"time_stats.{p}.median"].fillna(0.0) for p in parts)
    frame["total"] = frame["kernel"] + reshape
    return frame


@functools.lru_cache(maxsize=4)
def load_attention_profile(data_dir: Path) -> pd.DataFrame:
    """The FlashAttention profile with one row per shape (repeats averaged), times in ms."""
    frame = read_attention_rows(data_dir)
    keys = ["is_prefill", "batch_size", "prefill_chunk_size", "kv_cache_size"]
    return frame.groupby(keys, as_index=False)[["total", "kernel", "std"]].mean()


@functools.lru_cache(maxsize=4)
def load_cpu_profile(data_dir: Path) -> pd.DataFrame:
    """Per-iteration CPU times (ms medians) by batch size, repeats averaged."""
    path = profile_dir(data_dir) / CPU_FILE
    if not path.is_file():
        raise UserError(f"CPU overhead profile {str(path)!r} not found; expected vidur's "
                        f"{CPU_FILE}")
    frame = pd.read_csv(path)
    cols = ["schedule_median", "sampler_e2e_median", "prepare_inputs_e2e_median",
            "process_model_outputs_median"]
    return frame.groupby("batch_size", as_index=False)[cols].mean()
