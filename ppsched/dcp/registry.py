"""Build a chunk controller from its command-line spec (``static:N``, ``greedy``, ...)."""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy import ChunkController
from ppsched.core.policy_context import PolicyContext
from ppsched.dcp.static import StaticChunk

CHUNK_SPECS = ("static:N",)


def build_chunk_controller(spec: str, ctx: PolicyContext) -> ChunkController:
    if spec.startswith("static:"):
        raw = spec.split(":", 1)[1]
        try:
            return StaticChunk(int(raw))
        except ValueError:
            raise UserError(f"chunk spec {spec!r}: expected static:N with N a positive integer") \
                from None
    raise UserError(f"unknown chunk controller {spec!r}: expected one of {', '.join(CHUNK_SPECS)}")
