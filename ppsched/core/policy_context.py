"""What a policy factory needs to build a controller for one engine run."""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.errors import UserError
from ppsched.core.models import ModelConfig
from ppsched.core.slo import Slo


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a controller factory reads: pipeline and TP size, SLO, model, hardware, chunk cap
    and candidates, ALP's profile, DS's boundaries and the engine's decode CUDA graphs."""

    pp_size: int
    slo: Slo
    model: ModelConfig
    hardware: str = "a100-40g-pcie"
    tp_size: int = 1  # TP degree inside one stage (PP4 -> 1)
    max_chunk_tokens: int = 2048
    profile_path: str | None = None  # ALP profile JSON from `ppsched profile fit`; None: built-in
    data_dir: str | None = None
    boundaries: tuple[int, ...] | None = None  # detected efficient batch sizes; None: from profile
    # the engine's decode CUDA graphs (cap, padded sizes): boundary detection reads the same
    # staircase the engine runs; None: unknown (a live engine that did not say)
    decode_graphs: DecodeGraphs | None = None
    # the chunk sizes the user allows (any positive ints); None: the controller's default grid
    chunk_candidates: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.pp_size < 1:
            raise UserError(f"pp_size={self.pp_size}: expected >= 1")
        if self.max_chunk_tokens <= 0:
            raise UserError(f"max_chunk_tokens={self.max_chunk_tokens}: expected > 0")
        cands = self.chunk_candidates
        if cands is not None and (not cands or any(
                not isinstance(c, int) or isinstance(c, bool) or c <= 0 for c in cands)):
            raise UserError(f"chunk candidates {cands!r}: expected a non-empty list of positive "
                            "integers (token counts)")
