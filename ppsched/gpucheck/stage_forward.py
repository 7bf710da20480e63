"""CUDA-event stage time (the plugin's EventTimer, read by polling) vs a synchronized wall
measurement of the same forward.

The forward is one pipeline stage of a model's decoder layers over ``tokens`` tokens: the four
GEMMs of each layer (QKV, O, gate/up, down), the gated activation and causal attention (SDPA),
launched back to back as SGLang's eager forward would. The wall measurement synchronizes before
and after, so it includes the launch and the sync latency; the events measure the stream only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from ppsched.core.models import ModelConfig
from ppsched.predictor.vidur_csv import model_layer_shape
from ppsched.sglang_patch.device_timing import EventTimer

TOLERANCE = 0.05  # the bound: event and synchronized time ≤ 5 % apart


def build_stage_forward(torch: Any, model: ModelConfig, layers: int, tokens: int,
                        device: str = "cuda") -> Callable[[], Any]:
    shape = model_layer_shape(model, 1)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    f = torch.nn.functional

    def rand(*dims: float) -> Any:
        return torch.randn(*(int(d) for d in dims), device=device, dtype=dtype) * 0.02

    weights = {op: rand(shape.op_size(op)[1], shape.op_size(op)[0])
               for op in ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")}
    x0 = rand(tokens, model.hidden)
    heads, head_dim = model.heads, model.head_dim
    q_width = heads * head_dim

    def forward() -> Any:
        x = x0
        for _ in range(layers):
            qkv = f.linear(x, weights["attn_pre_proj"])
            q = qkv[:, :q_width].view(tokens, heads, head_dim).transpose(0, 1)
            # K/V broadcast to every head: the attention cost of GQA at this length
            k = q.roll(1, dims=1)
            attn = f.scaled_dot_product_attention(q, k, q, is_causal=True)
            x = x + f.linear(attn.transpose(0, 1).reshape(tokens, q_width),
                             weights["attn_post_proj"])
            up = f.linear(x, weights["mlp_up_proj"])
            gate, val = up.chunk(2, dim=-1) if model.gated_mlp else (up, None)
            act = f.silu(gate) * val if val is not None else f.gelu(gate)
            x = x + f.linear(act, weights["mlp_down_proj"])
        return x

    return forward


def event_vs_sync(forward: Callable[[], Any], device_module: Any, *, repeats: int = 10,
                  warmup: int = 3, clock: Callable[[], float] = time.perf_counter
                  ) -> dict[str, Any]:
    """Median ms by the plugin's EventTimer, by synchronized wall time, and launch-to-return."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats}, warmup={warmup}: expected >= 1 and >= 0")
    sync = device_module.synchronize
    for _ in range(warmup):
        forward()
    sync()
    timer = EventTimer(device_module)
    event_ms: list[float] = []
    wall_ms: list[float] = []
    launch_ms: list[float] = []
    ready_at_launch = 0
    for i in range(repeats):
        sync()
        t0 = clock()
        token = timer.begin()
        forward()
        timer.end(token, i)
        t_launch = clock()
        ready_at_launch += len(finished := timer.poll())  # what the scheduler could read now
        event_ms += [s.ms for s in finished]
        sync()
        t1 = clock()
        event_ms += [s.ms for s in timer.poll()]
        wall_ms.append(1000.0 * (t1 - t0))
        launch_ms.append(1000.0 * (t_launch - t0))
    if len(event_ms) != repeats:
        raise RuntimeError(f"{len(event_ms)} event timings for {repeats} forwards")
    event, wall = statistics.median(event_ms), statistics.median(wall_ms)
    return {"event_ms": event, "sync_wall_ms": wall, "launch_ms": statistics.median(launch_ms),
            "rel_diff": abs(event - wall) / wall if wall > 0 else float("inf"),
            "ready_at_launch": ready_at_launch, "repeats": repeats}


def within_tolerance(figures: dict[str, Any], tolerance: float = TOLERANCE) -> bool:
    return figures["rel_diff"] <= tolerance
