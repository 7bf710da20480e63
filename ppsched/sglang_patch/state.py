"""Per-scheduler-process plugin state and the relayed decision message (no sglang imports)."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field

from ppsched.core.cuda_graphs import DecodeGraphs
from ppsched.core.policy import ChunkController, DecodeTrimmer
from ppsched.sglang_patch.config import PluginConfig
from ppsched.sglang_patch.decision_log import DecisionLog
from ppsched.sglang_patch.translate import RECENT, RequestClock

logger = logging.getLogger("ppsched.sglang_patch")


@dataclass(frozen=True, slots=True)
class PpschedDecision:
    """Rank 0's decision for one scheduling iteration, relayed with that iteration's requests.

    Every rank applies it to its identical state: ``chunk`` (None: the launch chunk) for a
    prefill build, ``hold_rids`` for a decode build. ``fallback``: rank 0 failed; every rank
    stops applying decisions from this iteration on.
    """

    iteration: int
    slot: int
    chunk: int | None = None
    hold_rids: tuple[str, ...] = ()
    fallback: bool = False
    reason: str = ""
    predicted_stage_ms: float | None = None


@dataclass
class PluginState:
    cfg: PluginConfig
    rank: int
    pp_size: int
    launch_chunk: int
    controller: ChunkController | None
    trimmer: DecodeTrimmer | None
    log: DecisionLog
    t0: float = field(default_factory=time.perf_counter)
    active: bool = True  # False after a fallback: apply nothing new, still merge held requests
    iteration: int = -1  # ingest calls so far - 1 (one per microbatch turn)
    slot: int = 0
    pending: PpschedDecision | None = None
    hold_outcome: str | None = None  # this turn's decided hold: "applied" or why not (holds.py)
    held: dict = field(default_factory=dict)  # slot -> ScheduleBatch of held requests
    clock: RequestClock = field(default_factory=RequestClock)
    recent_stage_ms: deque = field(default_factory=lambda: deque(maxlen=RECENT))
    # Stage timing (device_timing.py): the timer (None: measuring off or failed), the device
    # type its sources are judged against, and the decode CUDA graphs SGLang captured.
    timer: object = None
    device_type: str = "cpu"
    graphs: DecodeGraphs = field(default_factory=DecodeGraphs.disabled)
    loop_slots: int = 0  # microbatch slots of the PP loop (pp_size + async depth); 0: pp_size
    logged_once: set = field(default_factory=set)
    sched: object = None  # the Scheduler this process runs
    agreement: object = None  # agreement.Agreement: act only once every rank enabled alike
    learner: object = None  # learner.StageLearner: rank 0 learns stages off the turn (None: inline)

    @property
    def slots(self) -> int:
        """Microbatch slots of the PP loop: what snapshots call ``pp_size``."""
        return self.loop_slots or self.pp_size

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def warn_once(self, key: str, message: str, *args) -> None:
        if key not in self.logged_once:
            self.logged_once.add(key)
            logger.warning("ppsched: " + message, *args)

    def fail(self, where: str, exc: BaseException) -> None:
        """An error in our code: log it once with context and stop applying decisions."""
        self.log.count("errors")
        if self.active:
            self.active = False
            self.log.count("fallbacks")
            logger.exception("ppsched: %s failed on PP rank %d at iteration %d (slot %d): %r; "
                             "falling back to the launch chunk size and no delay scheduling "
                             "for the rest of the run", where, self.rank, self.iteration,
                             self.slot, exc, exc_info=exc)
            self.log.write("fallback", iteration=self.iteration, slot=self.slot, where=where,
                           error=repr(exc))
