"""Every start-up check of the plugin, shared by ``ppsched serve`` (before launch) and the
scheduler processes (at start-up), so both refuse the same settings with the same words.

Engine-free: the caller passes the server facts (model path, pp/tp size, launch chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError
from ppsched.core.policy import ChunkController, DecodeTrimmer
from ppsched.core.policy_context import PolicyContext
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.policies import build_policies, model_for, policy_context


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What the plugin needs to know about the server it runs in."""

    model_path: str | None
    context_length: int | None
    pp_size: int
    tp_size: int
    launch_chunk: int  # --chunked-prefill-size; <= 0: chunked prefill off
    dynamic_chunking: bool = False
    graphs: DecodeGraphs | None = None  # decode CUDA graphs SGLang captured (None: unknown)
    loop_slots: int | None = None  # pp_size + --pp-async-batch-depth (None: pp_size)


def check_server(cfg: PluginConfig, facts: ServerFacts) -> None:
    """The server flags the plugin cannot work with (UserError naming the flag)."""
    if facts.launch_chunk <= 0:
        raise UserError("ppsched plugin needs chunked prefill: launch with "
                        "--chunked-prefill-size N > 0")
    if facts.dynamic_chunking:
        raise UserError("ppsched plugin: --enable-dynamic-chunking is on; turn it off (the "
                        "plugin sets the chunk size itself)")
    if cfg.candidates and max(cfg.candidates) > facts.launch_chunk:
        raise UserError(f"PPSCHED_CANDIDATES up to {max(cfg.candidates)} > "
                        f"--chunked-prefill-size {facts.launch_chunk}: launch with the largest "
                        "candidate")
    if cfg.ds != "off" and facts.pp_size < 2:
        raise UserError(f"PPSCHED_DS={cfg.ds!r} needs --pp-size >= 2 (it trims microbatch "
                        f"slots of the PP loop; this server has --pp-size {facts.pp_size}); "
                        "set --ds off")


def build_checked(cfg: PluginConfig, facts: ServerFacts
                  ) -> tuple[ChunkController | None, DecodeTrimmer | None, PolicyContext]:
    """Check the server flags, then build the policies exactly as the plugin will run them
    (and the context they were built with, for the start record)."""
    check_server(cfg, facts)
    model = model_for(cfg, facts.model_path, facts.context_length)
    ctx = policy_context(cfg, model, facts.pp_size, facts.tp_size, facts.launch_chunk,
                         facts.graphs)
    controller, trimmer = build_policies(cfg, ctx, facts.loop_slots)
    return controller, trimmer, ctx
