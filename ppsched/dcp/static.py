"""``static:N``: the fixed chunk (the paper's PP_2048 and PP_static)."""

from __future__ import annotations

from ppsched.core.errors import UserError
from ppsched.core.policy import ChunkDecision
from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement


class StaticChunk:
    def __init__(self, chunk_tokens: int, candidates: tuple[int, ...] | None = None) -> None:
        if chunk_tokens <= 0:
            raise UserError(f"static chunk {chunk_tokens}: expected a positive token count")
        if candidates is not None and chunk_tokens not in candidates:
            raise UserError(f"static chunk {chunk_tokens}: not one of the allowed chunk "
                            f"candidates {sorted(candidates)}")
        self.name = f"static:{chunk_tokens}"
        self.fixed_decision = ChunkDecision(chunk_tokens, "static")  # never reads a snapshot

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        return self.fixed_decision

    def observe(self, measurement: StageMeasurement) -> None:
        return None
