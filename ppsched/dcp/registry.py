"""Build a chunk controller from its command-line spec (``static:N``, ``greedy``, ...).

Engines pass what only they can provide: ``prefill_timer`` (ms of one prefix-free prefill of L
tokens on stage 0; SGLang's dynamic chunking profiles it at start-up) and, optionally, an
existing ``predictor`` (else ALP is built from ``ctx.profile_path`` or the built-in profile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ppsched.core.errors import UserError
from ppsched.core.policy import ChunkController
from ppsched.core.policy_context import PolicyContext
from ppsched.dcp.greedy import GreedyChunk
from ppsched.dcp.knobs import GreedyConfig, PredictiveConfig
from ppsched.dcp.predictive import PredictiveChunk, StagePredictor, Variant
from ppsched.dcp.sglang_dynamic import SglangDynamicChunk, sample_prefill_times
from ppsched.dcp.signals import check_candidates
from ppsched.dcp.static import StaticChunk

CHUNK_SPECS = ("static:N", "greedy", "greedy-paper", "predictive", "predictive-paper",
               "predictive-paper-alp", "sglang-dynamic")


def build_chunk_controller(spec: str, ctx: PolicyContext, *,
                           prefill_timer: Callable[[int], float] | None = None,
                           predictor: StagePredictor | None = None,
                           predictive: PredictiveConfig | None = None,
                           greedy: GreedyConfig | None = None) -> ChunkController:
    """Every controller chooses among ``ctx.chunk_candidates`` when the user gave them.
    ``predictive`` / ``greedy``: those controllers' knobs (None: their defaults); greedy-paper
    reads completed requests' signals whatever ``greedy.signals`` says (that is its name)."""
    cands = None if ctx.chunk_candidates is None else check_candidates(ctx.chunk_candidates)
    if spec.startswith("static:"):
        raw = spec.split(":", 1)[1]
        try:
            size = int(raw)
        except ValueError:
            raise UserError(f"chunk spec {spec!r}: expected static:N with N a positive integer") \
                from None
        return StaticChunk(size, cands)
    if spec in ("greedy", "greedy-paper"):
        config = greedy or GreedyConfig()
        if spec == "greedy-paper":
            config = replace(config, signals="completed")
        return GreedyChunk(ctx.slo, ctx.pp_size, config, name=spec, candidates=cands)
    if spec in ("predictive", "predictive-paper", "predictive-paper-alp"):
        # predictive-paper-alp: the paper's rule on the paper's ALP (no online correction of the
        # linear term, no device scale), so the paper's method can be compared as published
        paper_alp = spec == "predictive-paper-alp"
        variant = Variant.OURS if spec == "predictive" else Variant.PAPER
        return PredictiveChunk(ctx.slo, ctx.pp_size,
                               predictor or default_predictor(ctx, paper_alp=paper_alp),
                               variant, name=spec, candidates=cands, config=predictive)
    if spec == "sglang-dynamic":
        if prefill_timer is None:
            raise UserError("chunk controller 'sglang-dynamic' needs the engine's stage-0 "
                            "prefill timer (its start-up profile); this engine provides none")
        base = ctx.max_chunk_tokens
        samples = sample_prefill_times(prefill_timer, base, ctx.model.max_context)
        return SglangDynamicChunk(base, samples, ctx.model.max_context, candidates=cands)
    raise UserError(f"unknown chunk controller {spec!r}: expected one of {', '.join(CHUNK_SPECS)}")


def default_predictor(ctx: PolicyContext, *, paper_alp: bool = False) -> StagePredictor:
    """ALP on the run's profile: ``ctx.profile_path`` if given, else the built-in one.

    ``paper_alp``: the paper's four attention features only (``correct_linear_online`` off). The
    stabilised forgetting of the prefill weights (our addition) has no switch in ALP and stays.
    """
    try:
        from ppsched.predictor.alp import ALPredictor
        from ppsched.predictor.profile import LinearProfile, default_profile
    except ImportError as exc:  # the predictor package is another module of this project
        raise UserError(f"predictive chunking needs ppsched.predictor (ALP): {exc}") from exc
    if ctx.profile_path:
        profile = LinearProfile.from_json(ctx.profile_path)
    else:
        profile = default_profile(ctx.model, pp_size=ctx.pp_size, tp=ctx.tp_size,
                                  data_dir=ctx.data_dir)
    return ALPredictor(profile, correct_linear_online=not paper_alp)
