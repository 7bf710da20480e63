"""The simulator's ground-truth cost: stage and TP-step times, links, CPU overhead, KV capacity.

Hot path: every method below is plain-Python arithmetic over lists built once per
(model, hardware, tp, data_dir) — no numpy scalars, no pandas — so a call costs a few us.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np

from ppsched.core.batch import BatchShape
from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.core.paths import data_dir as resolve_data_dir
from ppsched.sim.cost.linear import extrapolate
from ppsched.sim.cost.link import link_model
from ppsched.sim.cost.tables import CostTables, build_tables

# Not in KV under mem_fraction_static: CUDA context, cuBLAS workspace, NCCL buffers.
# Assumed (not measured here): ~1 GB is what a CUDA 12 context plus NCCL typically holds.
RUNTIME_RESERVE_GB = 1.0
NOISE_BLOCK = 4096
NOISE_CLIP = 4.0  # standard deviations: keeps a noisy time positive and bounded
# CPU time to launch one decoder layer's kernels eagerly (no CUDA graph): Llama-3.1-8B decode on
# an H100 SXM5 takes 8.4 ms per step eager and 5.1 ms as a CUDA graph (cloudai.pt, "CUDA Graphs +
# torch.compile: 1.65x LLM Decode Speedup"); its weights stream in ~4.8 ms (16 GB at 3.35 TB/s),
# so the eager step is launch-bound: 8.4 ms / 32 layers = 0.26 ms of launches per layer. Launches
# run ahead of the GPU asynchronously, so an eager stage costs max(GPU time, launch time).
EAGER_LAUNCH_MS_PER_LAYER = 8.4 / 32
MIB = 1024 * 1024


def split_layers(layers: int, pp_size: int) -> tuple[int, ...]:
    """SGLang's default PP partition (same rule as vLLM's get_pp_indices): an even split, with
    the remainder added one layer each to the stages before the last, from the back."""
    if pp_size < 1 or pp_size > layers:
        raise UserError(f"pp_size={pp_size}: expected 1..{layers} (the model's layer count)")
    parts = [layers // pp_size] * pp_size
    for i in range(2, layers % pp_size + 2):
        parts[-i] += 1
    return tuple(parts)


class CostModel:
    """Times in ms for one microbatch (PP stage) or one batch (TP step); see stage_ms."""

    def __init__(self, tables: CostTables, *, pp_size: int, tp_size: int,
                 mem_fraction_static: float, seed: int, noise: bool,
                 graphs: DecodeGraphs | None = None) -> None:
        if not 0 < mem_fraction_static <= 1:
            raise UserError(f"mem_fraction_static={mem_fraction_static!r}: expected in (0, 1]")
        self.tables = tables
        self.model = tables.model
        self.hardware = tables.hardware
        self.pp_size = pp_size
        self.tp_size = tp_size
        self.mem_fraction_static = mem_fraction_static
        self.seed = seed
        self.noise = noise
        self.layers_per_stage = split_layers(self.model.layers, pp_size)
        # SGLang's default decode graphs for this GPU and the TP degree of one stage
        self.graphs = graphs if graphs is not None else DecodeGraphs.sglang_default(
            self.hardware.gpu_mem_bytes / MIB, tp_size)
        self._launch_ms = tuple(n * EAGER_LAUNCH_MS_PER_LAYER for n in self.layers_per_stage)
        self._last = pp_size - 1
        self._link = link_model(self.hardware.link)
        self._layer = tables.layer_ms
        self._layer_cv = tables.layer_cv
        self._attn = tables.attention
        self._cv_dec, self._cv_pre = tables.attention_cv
        self._hidden_bytes = self.model.hidden * self.model.dtype_bytes
        # seeded standard normals drawn in blocks (a per-call RNG call costs more than a list read)
        self._rng = np.random.default_rng(seed)
        self._z: list[float] = []
        self._zi = 0
        # the last stage's head (norm, LM head, sampler) by (tokens, sampled rows)
        self._head_cache: dict[tuple[int, int], tuple[float, float]] = {}
        self.stage_kv_tokens = self._stage_kv_tokens()
        self.kv_capacity_tokens = min(self.stage_kv_tokens)

    # --- memory -------------------------------------------------------------------------
    def stage_weight_bytes(self, stage: int) -> float:
        m, tp = self.model, self.tp_size
        layers = self.layers_per_stage[stage] * m.params_per_layer / tp
        table = m.vocab * m.hidden / tp  # untied embedding and LM head (Qwen2.5-14B/32B)
        extra = (table if stage == 0 else 0) + (table if stage == self._last else 0)
        return (layers + extra) * m.dtype_bytes

    def _stage_kv_tokens(self) -> tuple[int, ...]:
        m, hw = self.model, self.hardware
        per_token_layer = 2 * max(1, m.kv_heads // self.tp_size) * m.head_dim * m.dtype_bytes
        budget = hw.gpu_mem_bytes * self.mem_fraction_static - RUNTIME_RESERVE_GB * 1e9
        out = []
        for stage, layers in enumerate(self.layers_per_stage):
            free = budget - self.stage_weight_bytes(stage)
            if free <= 0:
                raise UserError(
                    f"model {m.name!r} with pp_size={self.pp_size}, tp_size={self.tp_size} does "
                    f"not fit on {hw.name}: stage {stage} weights "
                    f"{self.stage_weight_bytes(stage) / 1e9:.1f} GB exceed "
                    f"{budget / 1e9:.1f} GB (mem_fraction_static={self.mem_fraction_static}); "
                    "expected a larger parallel degree or GPU")
            out.append(int(free // (per_token_layer * layers)))
        return tuple(out)

    # --- compute ------------------------------------------------------------------------
    def _draw(self) -> float:
        i = self._zi
        if i == len(self._z):
            block = self._rng.standard_normal(NOISE_BLOCK)
            self._z = np.clip(block, -NOISE_CLIP, NOISE_CLIP).tolist()
            i = 0
        self._zi = i + 1
        return self._z[i]

    def _layers_part(self, shape: BatchShape, rows: int) -> tuple[int, float, float]:
        """(batched tokens, per-layer ms, per-layer noise std in ms); ``rows`` is the decode
        rows the linear layers compute (the graph's padded batch for a pure decode batch)."""
        pre = shape.prefill
        dc = shape.decode_count
        tokens = rows
        attn_sd = 0.0
        attn = 0.0
        if pre:
            for _, extend in pre:
                tokens += extend
            attn = self._attn.prefill_ms(pre)
            attn_sd = attn * self._cv_pre
        if dc:
            dec = self._attn.decode_ms(dc, shape.decode_ctx_sum)
            attn += dec
            attn_sd += dec * self._cv_dec
        if tokens <= 4096:
            lin = self._layer[tokens]
            lin_sd = lin * self._layer_cv[tokens]
        else:
            lin = extrapolate(self._layer, tokens)
            lin_sd = lin * self._layer_cv[4096]
        return tokens, lin + attn, lin_sd + attn_sd

    def _tp_comm_ms(self, tokens: int, layers: int) -> float:
        # two all-reduces of the hidden state per layer (after attention-out and MLP-down)
        return 2 * layers * self._link.all_reduce_ms(tokens * self._hidden_bytes, self.tp_size)

    def _head_ms(self, tokens: int, rows: int) -> tuple[float, float]:
        t = self.tables
        ms = extrapolate(t.norm_ms, tokens) + extrapolate(t.lm_head_ms, rows)
        sd = extrapolate(t.lm_head_ms, rows) * t.lm_head_cv[min(rows, 4096)]
        if self.tp_size > 1:  # logits of each vocab shard gathered to every rank
            ms += self._link.all_gather_ms(rows * self.model.vocab * self.model.dtype_bytes,
                                           self.tp_size)
        return ms + t.overhead.sampler_ms(rows), sd

    def _decode_rows(self, shape: BatchShape) -> tuple[int, bool]:
        """(rows computed, replays a CUDA graph): a pure decode batch within the graph cap runs
        its captured graph at the padded batch size (padded rows have length-1 contexts, so
        attention is charged for the real requests only); anything else runs eagerly."""
        dc = shape.decode_count
        if not shape.prefill and self.graphs.is_graph(dc):
            return self.graphs.padded(dc), True
        return dc, False

    def _stage(self, stage: int, shape: BatchShape) -> tuple[float, float]:
        if shape.decode_count == 0 and not shape.prefill:
            return 0.0, 0.0
        layers = self.layers_per_stage[stage]
        rows, graph = self._decode_rows(shape)
        tokens, per_layer, per_layer_sd = self._layers_part(shape, rows)
        ms = per_layer * layers
        sd = per_layer_sd * layers
        if self.tp_size > 1:
            ms += self._tp_comm_ms(tokens, layers)
        if stage == 0:
            ms += extrapolate(self.tables.emb_ms, tokens)
            if self.tp_size > 1:  # vocab-parallel embedding ends in an all-reduce
                ms += self._link.all_reduce_ms(tokens * self._hidden_bytes, self.tp_size)
        if stage == self._last:
            head, head_sd = self._head_ms(tokens, rows + len(shape.prefill))
            ms += head
            sd += head_sd
        if not graph and ms < self._launch_ms[stage]:
            ms = self._launch_ms[stage]  # eager: the CPU cannot launch the kernels faster
        return ms, sd

    def stage_ms_median(self, stage: int, shape: BatchShape) -> float:
        """Noiseless compute time of ``stage`` for one microbatch (see stage_ms)."""
        return self._stage(stage, shape)[0]

    def stage_ms(self, stage: int, shape: BatchShape) -> float:
        """Compute time of ``stage`` for one microbatch, with seeded run-to-run noise.

        Stage 0 adds the embedding; the last stage adds the final norm, LM head and sampling
        on the rows that sample (approximated as decode_count + number of prefill pieces).
        Noise: one normal draw per call scaled by the time-weighted CV of the profiled ops
        (errors of the ops of one forward pass move together: same clocks, same contention).
        """
        ms, sd = self._stage(stage, shape)
        if self.noise and sd > 0.0:
            ms += sd * self._draw()
        return ms

    def stage_times(self, shape: BatchShape) -> list[float]:
        """``stage_ms`` of every stage in stage order, the same values and the same noise draws:
        the per-layer part (attention, linear layers, their noise) is one computation shared by
        the stages, which differ only in layer count, embedding and head."""
        pre = shape.prefill
        dc = shape.decode_count
        if dc == 0 and not pre:
            return [0.0] * self.pp_size
        graphs = self.graphs
        if not pre and graphs.is_graph(dc):  # ``_decode_rows``, inlined
            rows, graph = graphs.padded(dc), True
        else:
            rows, graph = dc, False
        tokens, per_layer, per_layer_sd = self._layers_part(shape, rows)
        noise = self.noise
        tp = self.tp_size > 1
        last = self._last
        launch_ms = self._launch_ms
        z, zi = self._z, self._zi
        nz = len(z)
        out = []
        for stage, layers in enumerate(self.layers_per_stage):
            ms = per_layer * layers
            sd = per_layer_sd * layers
            if tp:
                ms += self._tp_comm_ms(tokens, layers)
            if stage == 0:
                ms += extrapolate(self.tables.emb_ms, tokens)
                if tp:
                    ms += self._link.all_reduce_ms(tokens * self._hidden_bytes, self.tp_size)
            if stage == last:
                key = (tokens, rows + len(pre))
                head_part = self._head_cache.get(key)
                if head_part is None:  # noiseless and a function of the key alone
                    head_part = self._head_cache[key] = self._head_ms(*key)
                ms += head_part[0]
                sd += head_part[1]
            if not graph and ms < launch_ms[stage]:
                ms = launch_ms[stage]
            if noise and sd > 0.0:  # ``_draw`` inlined (one draw per stage)
                if zi < nz:
                    ms += sd * z[zi]
                    zi += 1
                else:
                    self._zi = zi
                    ms += sd * self._draw()
                    z, zi = self._z, self._zi
                    nz = len(z)
            out.append(ms)
        self._zi = zi
        return out

    def tp_step_ms(self, shape: BatchShape) -> float:
        """TP engine: the whole model on tp_size GPUs for one batch, incl. all-reduces; noisy."""
        if self.pp_size != 1:
            raise UserError(f"tp_step_ms needs pp_size=1, got pp_size={self.pp_size}")
        return self.stage_ms(0, shape)

    def link_ms(self, shape: BatchShape) -> float:
        """Activations stage s -> s+1: SGLang sends hidden_states and residual (BF16) per token."""
        if self.pp_size == 1:
            return 0.0
        return self._link.p2p_ms(2 * shape.batched_tokens * self._hidden_bytes)

    def cpu_overhead_ms(self, shape: BatchShape) -> float:
        """Per-iteration scheduler CPU time for a batch of this many requests."""
        return self.tables.overhead.cpu_ms(shape.decode_count + len(shape.prefill))

    def breakdown(self, stage: int, shape: BatchShape) -> dict[str, float]:
        """Noiseless parts of a stage time, for tests and reports."""
        rows, graph = self._decode_rows(shape)
        tokens, per_layer, _ = self._layers_part(shape, rows)
        layers = self.layers_per_stage[stage]
        lin = extrapolate(self._layer, tokens)
        return {"tokens": float(tokens), "layers": float(layers),
                "linear_ms": lin * layers, "attention_ms": (per_layer - lin) * layers,
                "rows": float(rows), "cuda_graph": float(graph),
                "eager_launch_ms": 0.0 if graph else self._launch_ms[stage],
                "total_ms": self.stage_ms_median(stage, shape)}

    def describe(self) -> dict[str, object]:
        return {"model": {f.name: getattr(self.model, f.name) for f in fields(self.model)},
                "hardware": self.hardware.describe(), "link_model": self._link.describe(),
                "pp_size": self.pp_size,
                "tp_size": self.tp_size, "layers_per_stage": list(self.layers_per_stage),
                "mem_fraction_static": self.mem_fraction_static,
                "runtime_reserve_gb": RUNTIME_RESERVE_GB,
                "stage_kv_tokens": list(self.stage_kv_tokens),
                "kv_capacity_tokens": self.kv_capacity_tokens,
                "stage_weight_gb": [round(self.stage_weight_bytes(s) / 1e9, 3)
                                    for s in range(self.pp_size)],
                "seed": self.seed, "noise": self.noise, "noise_clip_sd": NOISE_CLIP,
                "decode_cuda_graphs": self.graphs.describe(),
                "eager_launch_ms_per_layer": EAGER_LAUNCH_MS_PER_LAYER,
                **self.tables.describe()}


def build_cost_model(model: ModelConfig, hardware: str, *, pp_size: int, tp_size: int,
                     data_dir: str | None = None, mem_fraction_static: float = 0.9,
                     seed: int = 0, noise: bool = True,
                     graphs: DecodeGraphs | None = None) -> CostModel:
    """A cost model for ``model`` on ``hardware`` split into pp_size stages of tp_size GPUs.

    The tables are cached per (model, hardware, tp, data_dir) in-process; each call gets a fresh
    noise stream for ``seed``. ``graphs``: SGLang's decode CUDA graphs; None means SGLang's
    default for this GPU and tp_size, ``DecodeGraphs.disabled()`` an all-eager engine.
    """
    if tp_size < 1 or model.heads % tp_size:
        raise UserError(f"tp_size={tp_size}: expected a divisor of the model's heads "
                        f"({model.heads})")
    split_layers(model.layers, pp_size)
    root = Path(resolve_data_dir(data_dir)).resolve()
    tables = build_tables(model, hardware.lower(), tp_size, root)
    return CostModel(tables, pp_size=pp_size, tp_size=tp_size,
                     mem_fraction_static=mem_fraction_static, seed=seed, noise=noise,
                     graphs=graphs)
