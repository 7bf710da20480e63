"""``greedy``: the paper's greedy DCP, stepping the chunk from observed TTFT/TPOT slack and free KV.

Two signal sets, same rules and artifact constants (PAPER.md):

- ``completed`` (``greedy-paper``): the P90 (configurable) of the engine's recent TTFT and TPOT
  samples. A TPOT sample exists only when a request finishes, so it describes the chunks of the
  request's whole life (tens of seconds ago); a TTFT sample only when a queued request gets its
  first token. On the simulator the chunk swings 128 <-> 2048 with a period of about 40 s because
  the feedback arrives ~15 s after the cause (bench/dcp.md, "Greedy").
- ``leading`` (``greedy``, the default): the paper's stated delay is one pipeline depth, so it
  decides from what the current pipeline shows: TPOT = the P90 of the recent rounds' bounds from
  stage-0 latencies (``core.rounds.round_bounds``), TTFT = max(P90 of the samples, wait so far of
  the oldest request still waiting for its first token) -- a growing queue shows up before anyone
  in it is served.

No samples yet (fewer than ``pp_size`` stage samples for the leading TPOT): that side gives no
push either way. The leading TTFT always has a value: nobody waiting is itself a light-load sign.
"""

from __future__ import annotations

from ppsched.core.policy import ChunkDecision
from ppsched.core.rounds import round_bounds
from ppsched.core.slo import Slo
from ppsched.core.snapshots import ChunkSnapshot, StageMeasurement
from ppsched.dcp.knobs import GreedyConfig
from ppsched.dcp.signals import (
    check_candidates,
    finite_or,
    kv_pressure,
    percentile,
    safe_floor,
    snap_to_grid,
    usable_candidates,
)

NAN = float("nan")


def head_wait_ms(snap: ChunkSnapshot) -> float:
    """How long the oldest request without a first token has waited so far (0 if none waits)."""
    oldest = snap.chunked.arrival_s if snap.chunked is not None else None
    if snap.queue:
        head = snap.queue[0].arrival_s
        oldest = head if oldest is None else min(oldest, head)
    return 0.0 if oldest is None else max(0.0, 1000.0 * (snap.now_s - oldest))


class GreedyChunk:
    """Decides once per ``pp_size`` scheduling iterations; holds the chunk in between.

    Steps one candidate up or down among ``candidates`` (the user's sizes; None: the paper's
    128-step grid up to the engine's cap)."""

    def __init__(self, slo: Slo, pp_size: int, config: GreedyConfig | None = None,
                 name: str = "greedy", candidates: tuple[int, ...] | None = None) -> None:
        if pp_size < 1:
            raise ValueError(f"pp_size={pp_size}: expected >= 1")
        self.name = name
        self.slo = slo
        self.pp_size = pp_size
        self.cfg = config or GreedyConfig()
        self.candidates = None if candidates is None else check_candidates(candidates)
        self._chunk = self.cfg.initial_tokens
        self._next_iteration = 0  # first call decides
        self._last: ChunkDecision | None = None

    def held_decision(self, now_s: float, iteration: int, arrived_prompt_tokens_total: int,
                      max_chunk_tokens: int, max_slot_decode_reqs: int) -> ChunkDecision | None:
        """The decision while it holds and stays above the safety floor, from the snapshot's
        counters alone (an engine asks this before it builds a snapshot); else None, and
        ``decide`` with the snapshot answers."""
        last = self._last
        if iteration >= self._next_iteration or last is None:
            return None
        candidates = usable_candidates(self.candidates, max_chunk_tokens)
        floor = safe_floor(candidates, max_slot_decode_reqs)
        return last if last.chunk_tokens >= floor or last.chunk_tokens >= candidates[-1] \
            else None

    def decide(self, snap: ChunkSnapshot) -> ChunkDecision:
        cfg = self.cfg
        candidates = usable_candidates(self.candidates, snap.max_chunk_tokens)
        floor = safe_floor(candidates, snap.max_slot_decode_reqs)
        if snap.iteration < self._next_iteration and self._last is not None:
            # Between decisions the chunk holds, but the safety guard is re-checked: a slot's
            # decode count can jump between two decisions.
            if self._last.chunk_tokens >= floor or self._last.chunk_tokens >= candidates[-1]:
                return self._last
            return self._decision(floor, "hold+safety-floor", snap, NAN, NAN)
        self._next_iteration = snap.iteration + self.pp_size

        ttft = percentile(snap.recent_ttft_ms, cfg.q)
        if cfg.signals == "leading":
            wait = head_wait_ms(snap)
            ttft = wait if ttft is None or wait > ttft else ttft
            # the same percentile as the samples': TPOT's SLO is a P90 over requests
            tpot = percentile(round_bounds(snap.recent_stage_ms, self.pp_size), cfg.q)
        else:
            tpot = percentile(snap.recent_tpot_ms, cfg.q)
        ttft_v = finite_or(ttft, NAN)
        tpot_v = finite_or(tpot, NAN)
        idx = candidates.index(snap_to_grid(self._chunk, candidates))
        if kv_pressure(snap, cfg.kv_watermark):
            return self._decision(floor, "kv-watermark", snap, ttft_v, tpot_v)
        slo = self.slo
        tpot_bad = tpot is not None and tpot > cfg.shrink_tpot * slo.tpot_ms
        ttft_idle = ttft is not None and ttft < cfg.shrink_ttft * slo.ttft_ms
        if tpot_bad or ttft_idle:
            idx = max(idx - 1, 0)
            reason = "shrink:tpot-violated" if tpot_bad else "shrink:ttft-slack"
        elif (ttft is not None and ttft > cfg.grow_ttft * slo.ttft_ms
              and (tpot is None or tpot < cfg.grow_tpot * slo.tpot_ms)):
            idx = min(idx + 1, len(candidates) - 1)
            reason = "grow:ttft-tight"
        else:
            reason = "keep"
        chunk = candidates[idx]
        if chunk < floor:
            chunk, reason = floor, reason + "+safety-floor"
        return self._decision(chunk, reason, snap, ttft_v, tpot_v)

    def _decision(self, chunk: int, reason: str, snap: ChunkSnapshot, ttft: float,
                  tpot: float) -> ChunkDecision:
        self._chunk = chunk
        self._last = ChunkDecision(chunk, reason, (
            ("ttft_p_ms", ttft), ("tpot_p_ms", tpot),
            ("kv_free_frac", snap.kv_free_fraction),
            ("max_slot_decodes", float(snap.max_slot_decode_reqs)),
            ("queued_tokens", float(snap.queued_prompt_tokens)),
        ))
        return self._last

    def observe(self, measurement: StageMeasurement) -> None:
        return None  # greedy reacts to TTFT/TPOT samples in the snapshot, not to stage timings
