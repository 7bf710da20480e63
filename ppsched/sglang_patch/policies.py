"""Build the same controller objects the simulator runs, from the plugin config and server facts."""

from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig, load_model_config
from ppsched.core.policy import ChunkController, DecodeTrimmer
from ppsched.core.policy_context import PolicyContext
from ppsched.sglang_patch.config import PluginConfig


def load_factory(spec: str, what: str):
    """``py:package.module:attr`` → the attribute (a user-supplied policy factory)."""
    parts = spec.split(":")
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise UserError(f"{what}={spec!r}: expected py:package.module:factory")
    try:
        module = importlib.import_module(parts[1])
        return getattr(module, parts[2])
    except (ImportError, AttributeError) as exc:
        raise UserError(f"{what}={spec!r}: cannot load it ({exc})") from None


def model_for(cfg: PluginConfig, model_path: str | None, context_length: int | None
              ) -> ModelConfig:
    """The model the policies reason about: PPSCHED_MODEL, else the server's own config.json."""
    name = cfg.model or model_path
    if name is None:
        raise UserError("ppsched plugin: no model: set PPSCHED_MODEL or --model-path")
    if cfg.model is None and not (Path(name) / "config.json").is_file():
        raise UserError(f"ppsched plugin: --model-path {name!r} has no local config.json; set "
                        "PPSCHED_MODEL (ppsched serve --model) to a built-in name or an HF "
                        "config.json path")
    model = load_model_config(name)
    if context_length:  # the server's --context-length wins over max_position_embeddings
        model = replace(model, max_context=int(context_length))
    return model


def policy_context(cfg: PluginConfig, model: ModelConfig, pp_size: int, tp_size: int,
                   launch_chunk: int, graphs: DecodeGraphs | None = None) -> PolicyContext:
    """``pp_size`` is the true PP degree (layers per stage). With decode CUDA graphs and DS on,
    DS's boundaries are the graph-aware ones (the cap, then the profile's above it) unless the
    user gave PPSCHED_BOUNDARIES/PPSCHED_BOUNDARY_UNIT (the user's choice wins)."""
    max_chunk = max(cfg.candidates) if cfg.candidates else launch_chunk
    ctx = PolicyContext(pp_size=pp_size, slo=cfg.slo, model=model, hardware=cfg.hardware,
                        tp_size=tp_size, max_chunk_tokens=max_chunk, profile_path=cfg.profile,
                        boundaries=cfg.boundaries, chunk_candidates=cfg.candidates,
                        decode_graphs=graphs)
    if graphs is not None and graphs.enabled and cfg.boundaries is None and cfg.ds != "off":
        from ppsched.delay_sched.sources import resolve_boundaries
        from ppsched.predictor.boundaries import graph_aware_boundaries
        try:
            profiled = resolve_boundaries(ctx)
        except UserError:  # a profile without steps: the graph cap alone is still one
            profiled = ()
        ctx = replace(ctx, boundaries=graph_aware_boundaries(profiled, graphs))
    return ctx


def build_policies(cfg: PluginConfig, ctx: PolicyContext, slots: int | None = None
                   ) -> tuple[ChunkController | None, DecodeTrimmer | None]:
    """``slots``: the PP loop's microbatch slots (pp_size + --pp-async-batch-depth). A request
    decodes once per loop, so chunk controllers get it as their period (``pp_size`` of their
    context) while ALP keeps the true PP degree for its per-stage profile."""
    chunk: ChunkController | None = None
    chunk_ctx = ctx if slots in (None, ctx.pp_size) else replace(ctx, pp_size=slots)
    if cfg.chunk is not None:
        if cfg.chunk.startswith("py:"):
            chunk = load_factory(cfg.chunk, "PPSCHED_CHUNK")(chunk_ctx)
        else:
            from ppsched.dcp.registry import build_chunk_controller, default_predictor
            predictor = default_predictor(ctx) if cfg.chunk.startswith("predictive") else None
            chunk = build_chunk_controller(cfg.chunk, chunk_ctx, predictor=predictor,
                                           predictive=cfg.policy.predictive,
                                           greedy=cfg.policy.greedy)
    trimmer: DecodeTrimmer | None = None
    if cfg.ds.startswith("py:"):
        trimmer = load_factory(cfg.ds, "PPSCHED_DS")(ctx, cfg.ds_max_consecutive)
    elif cfg.ds != "off":
        from ppsched.delay_sched.registry import build_decode_trimmer
        trimmer = build_decode_trimmer(cfg.ds, ctx, cfg.ds_max_consecutive, cfg.policy.ds)
    return chunk, trimmer
