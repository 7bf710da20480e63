"""One shared helper for the predictive rules: what each candidate chunk's microbatch would cost.

For every candidate budget c: how many prefill tokens the microbatch carries and ALP's predicted
one-stage latency, for the batch the engine will build (``BatchModel``), plus, when asked, the
predicted stage time of a decode-only microbatch. One scan of the predictor per decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Final, Protocol

from ppsched.core.batch import BatchShape, piece_shape, piece_sums
from ppsched.core.snapshots import ChunkSnapshot, QueuedRequest, SlotLoad


class StagePredictor(Protocol):
    """What the controller needs from ALP (``ppsched.predictor.ALPredictor``)."""

    def predict_many(self, shapes: Sequence[BatchShape]) -> Sequence[float]: ...

    def update(self, shape: BatchShape, measured_ms: float) -> None: ...


class BatchModel(Enum):
    """Which microbatch a budget of c tokens becomes."""

    PAPER = "paper"  # the paper's reading: c prefill tokens plus the slot's decodes
    PLAIN = "plain"  # SGLang's default loop: a prefill-only microbatch of c tokens
    MIXED = "mixed"  # --enable-mixed-chunk: decodes spend one budget token each, c - d prefill


class CandidateCosts:
    """Read-only (``Final``), a plain class for the reason ``rule_slo.Measured`` gives."""

    def __init__(self, candidates: tuple[int, ...], prefill: tuple[int, ...],
                 stage_ms: tuple[float, ...], decode_ms: float) -> None:
        self.candidates: Final = candidates
        self.prefill: Final = prefill  # prefill tokens each candidate's microbatch carries
        self.stage_ms: Final = stage_ms  # predicted one-stage latency of that microbatch
        # predicted stage time of the decode-only microbatch asked for (0: none)
        self.decode_ms: Final = decode_ms

    def supply(self, i: int) -> float:
        """Prefill tokens per ms of stage time: the per-token efficiency of candidate i."""
        return self.prefill[i] / self.stage_ms[i] if self.stage_ms[i] > 0 else 0.0

    def best_supply(self, pp: int, round_budget_ms: float) -> int | None:
        """The candidate with the greatest supply among those that carry prefill and whose
        pp * stage fits ``round_budget_ms`` (ties: the shorter stage, then the first); None
        when none fits. One loop: this runs twice in most decisions."""
        best, best_supply, best_stage = None, 0.0, 0.0
        for i, (p, s) in enumerate(zip(self.prefill, self.stage_ms, strict=True)):
            if p > 0 and s * pp <= round_budget_ms:
                supply = p / s if s > 0 else 0.0
                if best is None or supply > best_supply or (
                        supply == best_supply and s < best_stage):
                    best, best_supply, best_stage = i, supply, s
        return best


def chunk_prefix(snap: ChunkSnapshot) -> int:
    """Tokens the chunked request has already prefilled (its next piece attends to them)."""
    ch = snap.chunked
    return ch.prompt_tokens - ch.remaining_prompt_tokens if ch is not None else 0


def waiting_fcfs(snap: ChunkSnapshot) -> tuple[QueuedRequest, ...]:
    """The queue view in FCFS order with the chunked request first: SGLang's view already puts
    it there, the simulator's leaves it out."""
    ch = snap.chunked
    reqs = snap.queue
    if ch is not None and (not reqs or reqs[0].req_id != ch.req_id):
        return (ch, *reqs)
    return reqs


def asking_slot(snap: ChunkSnapshot) -> SlotLoad | None:
    return next((s for s in snap.slots if s.slot == snap.slot), None)


def asking_slot_decodes(snap: ChunkSnapshot) -> tuple[int, int]:
    """(decode requests, their context sum) of the slot the chunk is for; (0, 0) if unknown."""
    load = asking_slot(snap)
    return (load.decode_reqs, load.decode_ctx_sum) if load is not None else (0, 0)


def predict_costs(predictor: StagePredictor, candidates: tuple[int, ...], batch: BatchModel,
                  prefix: int, decodes: int, decode_ctx: int, *,
                  decode_load: tuple[int, int] | None = None,
                  correct: Callable[[Sequence[int], list[float], Sequence[bool]], list[float]]
                  | None = None
                  ) -> CandidateCosts:
    """Costs of every candidate; ``decode_load`` = (requests, context sum) of a decode-only
    microbatch to predict too; ``correct`` shifts the predictions, given each batch's batched
    tokens and whether it carries a prefill piece (measured residuals of the profile-anchored
    formula: not applied when ALP's device fit answered the scan). ALP reads the batches' sums
    (``predict_sums``), built here without a BatchShape each; another predictor gets the
    shapes."""
    by_sums = getattr(predictor, "predict_sums", None)
    if batch is BatchModel.MIXED:  # a candidate at or below d carries no prefill
        prefill = tuple(c - decodes if c > decodes else 0 for c in candidates)
    else:
        prefill = candidates
    if batch is BatchModel.PLAIN:
        decodes, decode_ctx = 0, 0
    # sums for ALP, shapes for any other predictor (each called by name: compiled, a direct call)
    batches: list[Any] = [piece_sums(prefix, p, decodes, decode_ctx) for p in prefill] \
        if by_sums is not None else [piece_shape(prefix, p, decodes, decode_ctx) for p in prefill]
    if decode_load is not None and decode_load[0] > 0:
        batches.append(piece_sums(0, 0, decode_load[0], decode_load[1]) if by_sums is not None
                       else piece_shape(0, 0, decode_load[0], decode_load[1]))
    if by_sums is not None:  # ALP: one model answers the scan; the fit needs no residual shift
        predicted, from_fit = by_sums(batches)
    else:
        predicted, from_fit = list(predictor.predict_many(batches)), False
    if correct is not None and not from_fit:
        tokens = [p + decodes for p in prefill]
        pieces = [p > 0 for p in prefill]
        if len(batches) > len(prefill):
            tokens.append(decode_load[0])  # type: ignore[index]
            pieces.append(False)
        predicted = correct(tokens, predicted, pieces)
    decode_ms = predicted.pop() if len(predicted) > len(candidates) else 0.0
    return CandidateCosts(candidates, prefill, tuple(predicted), decode_ms)
