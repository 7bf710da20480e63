"""The one drain model of the SLO rule (``rule_slo.SloRule``): when a prompt reaches its first
token, and the deadlines it is judged against.

FCFS, as both engines admit: a request has its first token once the tokens ahead of it and its
own are prefilled, ceil(tokens / p) microbatches of s + g on stage 0 (p prefill tokens each, s
the stage time, g rank 0's gap per microbatch that no stage time shows), and its last piece has
crossed the other pp - 1 stages.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import waiting_fcfs
from ppsched.dcp.signals import percentile

MIN_PROMPTS = 10  # the fewest prompts with one above the P90


def first_token_ms(tokens: Sequence[float], prefill: Sequence[int], stage_ms: Sequence[float],
                   gap_ms: float, pp: int) -> np.ndarray:
    """[j, i]: when ``tokens[j]`` prompt tokens (a request's own and those ahead of it) have
    their first token, from now, at candidate i's ``prefill`` tokens per microbatch of
    ``stage_ms[i]``; inf where it carries no prefill."""
    prefill_ = np.asarray(prefill, dtype=float)
    stage = np.asarray(stage_ms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        pieces = -np.floor_divide(-np.asarray(tokens, dtype=float)[:, None], prefill_)
    first = pieces * (stage + gap_ms) + (pp - 1) * stage
    first[:, prefill_ <= 0] = np.inf
    return first


def queue_deadlines(snap: ChunkSnapshot, ttft_ms: float) -> list[tuple[float, float]]:
    """(ms left before SLO_TTFT, prompt tokens up to and including it) for every queued request
    still in time, FCFS (the chunked request first). A request already late counts in the
    tokens ahead of the others but sets no deadline: nothing can bring it in time."""
    late_ms = 1000.0 * snap.now_s - ttft_ms  # a request that arrived before it is late
    out = []
    cum = 0
    for q in waiting_fcfs(snap):
        cum += q.remaining_prompt_tokens
        left = 1000.0 * q.arrival_s - late_ms
        if left > 0:
            out.append((left, float(cum)))
    return out


class RecentPrompts:
    """The uncached prompt tokens of the last ``window`` requests seen queued, each taken at first
    sight (a chunked request's rest is not a new prompt). The window grows to the most recent TTFT
    samples a snapshot has carried: the requests the engine's recent P90 TTFT is made of."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self._tokens: OrderedDict[int, int] = OrderedDict()  # req_id -> uncached prompt tokens

    def see(self, snap: ChunkSnapshot) -> None:
        self.window = max(self.window, len(snap.recent_ttft_ms))
        for q in waiting_fcfs(snap):
            if q.req_id in self._tokens:
                continue
            self._tokens[q.req_id] = q.prompt_tokens - q.cached_prompt_tokens
            if len(self._tokens) > self.window:
                self._tokens.popitem(last=False)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile of the window's prompts; None before ``MIN_PROMPTS`` are seen."""
        if len(self._tokens) < MIN_PROMPTS:
            return None
        return percentile(tuple(self._tokens.values()), q)

