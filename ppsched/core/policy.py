"""The two-method interfaces every engine calls, and the decisions they return."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

from ppsched.core.snapshots import ChunkSnapshot, DecodeSnapshot, StageMeasurement


@dataclass(frozen=True, slots=True)
class ChunkDecision:
    """A chunk size and why. ``inputs`` are the numbers that drove it (for the decision log).

    ``regime``: the path of the rule that chose it (``dcp.regime.Regime`` for the predictive
    rules; None for controllers without regimes); ``reason`` is its human-readable label.
    ``ttft_slack`` / ``tpot_slack``: the predicted P90 TTFT and TPOT slack the rule acted on,
    relative to each SLO (1 - predicted / SLO), None where the rule predicts none."""

    chunk_tokens: int
    reason: str
    inputs: tuple[tuple[str, float], ...] = ()
    predicted_stage_ms: float | None = None
    regime: Enum | None = None
    ttft_slack: float | None = None
    tpot_slack: float | None = None

    def __post_init__(self) -> None:
        if self.chunk_tokens <= 0:
            raise ValueError(f"chunk_tokens={self.chunk_tokens}: expected > 0")

    def regime_fields(self) -> dict[str, str | float | None]:
        """The decision log's typed record of the choice: the regime's name and the slacks."""
        return {"regime": None if self.regime is None else self.regime.name,
                "ttft_slack": self.ttft_slack, "tpot_slack": self.tpot_slack}


@dataclass(frozen=True, slots=True)
class TrimDecision:
    """Partition of a slot's decode set: ``run_ids`` decode now, ``hold_ids`` wait (keeping KV)."""

    run_ids: tuple[int, ...]
    hold_ids: tuple[int, ...] = ()
    reason: str = "no-trim"
    inputs: tuple[tuple[str, float], ...] = field(default=())


@runtime_checkable
class ChunkController(Protocol):
    """Chooses the prefill chunk of each microbatch; observes every measured stage."""

    name: str

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        """Chunk budget for the prefill batch about to be built for ``snap.slot``."""
        ...

    def observe(self, measurement: StageMeasurement) -> None:
        """A measured stage iteration (every iteration, prefill or decode)."""
        ...

    # Optional: ``observe_launch(launch: Launch) -> None``, told every microbatch rank 0 starts
    # (CUDA-graph decodes included); engines call it only on controllers that define it.
    # Optional: ``fixed_decision: ChunkDecision``, on a controller whose every decision is that
    # one whatever the snapshot: an engine may skip building snapshots for it.
    # Optional: ``held_decision(now_s, iteration, arrived_prompt_tokens_total, max_chunk_tokens,
    # max_slot_decode_reqs) -> ChunkDecision | None``, on a controller that holds a decision
    # between re-plans: the held one from those counters alone, else None, and the engine then
    # calls ``decide`` with a snapshot of the same instant (built only then).


@runtime_checkable
class DecodeTrimmer(Protocol):
    """Chooses which decode requests of a slot run now and which wait (delay scheduling)."""

    name: str

    def select(self, snap: DecodeSnapshot) -> TrimDecision:
        """Which of the slot's running+held requests decode now; deterministic in ``snap``."""
        ...
