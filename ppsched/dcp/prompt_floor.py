"""The P90 prompt's floor under the TPOT price (``SloRule``): the least chunk at which the
recent P90 prompt, prefilled alone, reaches its first token within SLO_TTFT.

The SLO holds on the P90 TTFT, and the price's choice (the most efficient size within the TPOT
budget) can be a size at which the long prompts of the workload cannot be prefilled within
SLO_TTFT even with nothing ahead of them: measured, 32B sharegpt at SLO 0.4 (800 ms TTFT, 80 ms
TPOT) took 128 in 70% of its decisions (4 s(256) = 95 ms > 80), and its P90 TTFT sat at the SLO
at every rate while a fixed 256 held it (``bench/bench_fresh_seeds.py``; bench/dcp.md). The
deadline check (``SloRule._in_time``) raises the size only for the queue of the moment, when a
long prompt is already waiting; the floor applies its drain model (without the gap on the
crossing stages) to the prompt lengths the SLO's percentile is made of.

The prompts: each queued request's uncached prompt tokens, taken when the rule first sees it,
over as many recent requests as the snapshot carries recent TTFT samples (the most it has
carried: the window the rule's recent P90 TTFT reads, 64 in both engines). No floor until ten
are seen: the fewest in which one prompt lies above the P90.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import CandidateCosts, waiting_fcfs
from ppsched.dcp.signals import sorted_percentile

MIN_PROMPTS = 10  # the fewest prompts with one above the P90


class RecentPrompts:
    """The uncached prompt tokens of the last ``window`` requests the rule has seen queued, each
    taken at first sight (a chunked request's rest is not a new prompt). The window grows to the
    most recent TTFT samples a snapshot has carried."""

    def __init__(self, window: int = 0) -> None:
        self.window = window
        self._tokens: OrderedDict[int, int] = OrderedDict()  # req_id -> uncached prompt tokens
        self._ordered: list[int] = []  # the same tokens in ascending order (read every re-plan)

    def see(self, snap: ChunkSnapshot) -> None:
        self.window = max(self.window, len(snap.recent_ttft_ms))
        for q in waiting_fcfs(snap):
            if q.req_id in self._tokens:
                continue
            tokens = q.prompt_tokens - q.cached_prompt_tokens
            self._tokens[q.req_id] = tokens
            bisect.insort(self._ordered, tokens)
            if len(self._tokens) > self.window:
                _, dropped = self._tokens.popitem(last=False)
                del self._ordered[bisect.bisect_left(self._ordered, dropped)]

    def percentile(self, q: float) -> float | None:
        """The q-th percentile of the window's prompts; None before ``MIN_PROMPTS`` are seen."""
        if len(self._tokens) < MIN_PROMPTS:
            return None
        return sorted_percentile(self._ordered, q)


def prompt_floor(costs: CandidateCosts, prompt_tokens: float, pp: int, gap_ms: float,
                 ttft_ms: float, kv_round_ms: float) -> int | None:
    """The least candidate within the KV budget (pp stages fit ``kv_round_ms``) that brings a
    prompt of ``prompt_tokens`` to its first token within ``ttft_ms`` with nothing ahead of it:
    ceil(L / p) microbatches of a stage and rank 0's gap each, the last one pp - 1 more stages
    to cross the pipeline. ``queue_drain.first_late``'s drain also charges the gap to those pp - 1
    crossing stages; this one does not (as measured: the probe and the re-measure ran this
    form). None when none does."""
    for i, (p, stage) in enumerate(zip(costs.prefill, costs.stage_ms, strict=True)):
        if stage * pp > kv_round_ms:
            return None  # a full cache stalls admission: no size past the KV budget
        if p <= 0:
            continue
        first_token_ms = prompt_first_token_ms(costs, i, prompt_tokens, pp, gap_ms)
        if first_token_ms is not None and first_token_ms <= ttft_ms:
            return i
    return None


def prompt_first_token_ms(costs: CandidateCosts, i: int, prompt_tokens: float, pp: int,
                          gap_ms: float) -> float | None:
    """When candidate i brings a prompt of ``prompt_tokens`` to its first token with nothing
    ahead of it (``prompt_floor``'s drain); None when the candidate carries no prefill."""
    p = costs.prefill[i]
    if p <= 0:
        return None
    stage = costs.stage_ms[i]
    return math.ceil(prompt_tokens / p) * (stage + gap_ms) + (pp - 1) * stage
