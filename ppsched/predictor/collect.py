"""`profile collect`: time a model's per-layer linear and elementwise ops with torch and write a
vidur-format ``mlp.csv`` (what `profile fit` reads), so a user profiles their own GPU once.

Weights are random with the config's per-GPU shapes (TP splits N of QKV/up and K of O/down).
torch is optional: imported lazily, a clear UserError when missing.
"""

from __future__ import annotations

import csv
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.predictor.vidur_csv import model_layer_shape

# vidur's column order
ALL_OPS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
           "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
STATS = ("min", "max", "mean", "median", "std")
SHAPE_HEADER = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
                "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers")


def vidur_token_grid(max_tokens: int = 4096) -> tuple[int, ...]:
    """vidur's grid: 1, 2, 4, 8, then step 8 to 1024, 16 to 2048, 32 beyond."""
    if max_tokens < 1:
        raise UserError(f"max_tokens={max_tokens}: expected >= 1")
    grid = [1, 2, 4, 8]
    t = 8
    while t < max_tokens:
        t += 8 if t < 1024 else 16 if t < 2048 else 32
        grid.append(t)
    return tuple(g for g in grid if g <= max_tokens)


def parse_tokens(text: str) -> tuple[int, ...]:
    try:
        tokens = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise UserError(f"--tokens {text!r}: expected comma-separated integers") from exc
    if not tokens or any(t < 1 for t in tokens) or list(tokens) != sorted(set(tokens)):
        raise UserError(f"--tokens {text!r}: expected ascending unique integers >= 1")
    return tokens


def import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise UserError("profile collect needs torch, which is not installed: expected "
                        "`pip install 'ppsched[profile]'` (or any torch >= 2.4)") from exc
    return torch


class CpuTimer:
    """Wall time with perf_counter: CPU ops run synchronously."""

    name = "perf_counter"

    def time_ms(self, fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return 1000.0 * (time.perf_counter() - t0)


class CudaTimer:
    """CUDA events around the op, synchronized before reading (kernels launch asynchronously)."""

    name = "cuda-events"

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def time_ms(self, fn: Callable[[], Any]) -> float:
        cuda = self.torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        cuda.synchronize()
        start.record()
        fn()
        end.record()
        cuda.synchronize()
        return float(start.elapsed_time(end))


def select_device(torch: Any, device: str) -> tuple[Any, Any, Any]:
    """(torch device, timer, dtype): CUDA in the model's 16-bit dtype, CPU in float32."""
    if device == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda: torch sees no CUDA device; expected a GPU build of "
                            "torch on a machine with a GPU, or --device cpu")
        return torch.device("cuda"), CudaTimer(torch), torch.bfloat16
    if device == "cpu":
        return torch.device("cpu"), CpuTimer(), torch.float32  # bf16 GEMMs on CPU are slow
    raise UserError(f"--device {device!r}: expected cuda or cpu")


def _op_fns(torch: Any, model: ModelConfig, tp: int, n: int, dev: Any,
            dtype: Any) -> dict[str, Callable[[], Any]]:
    """One closure per op for ``n`` tokens, tensors allocated once outside the timed call."""
    shape = model_layer_shape(model, tp)
    f = torch.nn.functional

    def rand(*dims: float) -> Any:
        return torch.randn(*(int(d) for d in dims), device=dev, dtype=dtype)

    fns: dict[str, Callable[[], Any]] = {}
    for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"):
        k, nout = shape.op_size(op)
        x, w = rand(n, k), rand(nout, k)
        fns[op] = lambda x=x, w=w: f.linear(x, w)
    hidden = rand(n, model.hidden)
    other = rand(n, model.hidden)
    norm_w = torch.ones(model.hidden, device=dev, dtype=dtype)
    norm = (lambda: f.rms_norm(hidden, (model.hidden,), norm_w)) if hasattr(f, "rms_norm") \
        else (lambda: f.layer_norm(hidden, (model.hidden,), norm_w))
    fns["input_layernorm"] = norm
    fns["post_attention_layernorm"] = norm
    fns["add"] = lambda: hidden + other
    (rope_width,) = shape.op_size("attn_rope")
    qk, cos, sin = rand(n, rope_width), rand(n, rope_width), rand(n, rope_width)
    fns["attn_rope"] = lambda: qk * cos + torch.roll(qk, 1, dims=-1) * sin
    (inter,) = shape.op_size("mlp_act")
    gate, up = rand(n, inter), rand(n, inter)
    fns["mlp_act"] = (lambda: f.silu(gate) * up) if model.gated_mlp else (lambda: f.gelu(gate))
    table = rand(model.vocab, model.hidden)
    ids = torch.randint(0, model.vocab, (n,), device=dev)
    fns["emb"] = lambda: f.embedding(ids, table)
    return fns


def _stats(samples: list[float]) -> list[float]:
    std = statistics.pstdev(samples) if len(samples) > 1 else 0.0
    return [min(samples), max(samples), statistics.fmean(samples), statistics.median(samples),
            std]


def collect_mlp_csv(model: ModelConfig, out: str | Path, *, device: str = "cuda", tp: int = 1,
                    tokens: Sequence[int] | None = None, repeats: int = 20, warmup: int = 3,
                    torch: Any = None, log: Callable[[str], None] | None = None) -> Path:
    """Measure every op at every token count and write the vidur mlp.csv; returns the path."""
    if repeats < 1 or warmup < 0:
        raise UserError(f"--repeats {repeats}: expected >= 1 (warm-up {warmup} >= 0)")
    if tp < 1 or model.heads % tp or model.kv_heads % tp or model.intermediate % tp:
        raise UserError(f"--tp {tp}: expected a divisor of heads={model.heads}, kv_heads="
                        f"{model.kv_heads} and intermediate={model.intermediate}")
    torch = torch if torch is not None else import_torch()
    dev, timer, dtype = select_device(torch, device)
    grid = tuple(tokens) if tokens is not None else vidur_token_grid()
    header = [f"time_stats.{op}.{s}" for op in ALL_OPS for s in STATS] + list(SHAPE_HEADER)
    path = Path(out)
    if path.parent and not path.parent.exists():
        raise UserError(f"--out {str(path)!r}: folder {str(path.parent)!r} does not exist")
    threads = torch.get_num_threads() if device == "cpu" else None
    if threads is not None:
        torch.set_num_threads(1)  # one core: no thread-pool spin noise on a shared CPU
    try:
        rows = _measure(torch, model, tp, grid, dev, dtype, timer, repeats, warmup, log)
    finally:
        if threads is not None:
            torch.set_num_threads(threads)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _measure(torch: Any, model: ModelConfig, tp: int, grid: Sequence[int], dev: Any, dtype: Any,
             timer: Any, repeats: int, warmup: int,
             log: Callable[[str], None] | None) -> list[list[Any]]:
    rows = []
    with torch.inference_mode():
        for n in grid:
            fns = _op_fns(torch, model, tp, n, dev, dtype)
            row: list[Any] = []
            for op in ALL_OPS:
                for _ in range(warmup):
                    fns[op]()
                row += _stats([timer.time_ms(fns[op]) for _ in range(repeats)])
            row += [model.heads, model.kv_heads, model.hidden, model.intermediate, model.vocab,
                    model.gated_mlp, n, tp]
            rows.append(row)
            if log:
                log(f"{n} tokens: up_proj median {row[ALL_OPS.index('mlp_up_proj') * 5 + 3]:.4f}"
                    f" ms ({timer.name})")
    return rows
