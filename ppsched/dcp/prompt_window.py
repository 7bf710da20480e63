"""The recent prompts the SLO rule (``rule_slo.SloRule``) takes its P90 prompt from: the SLO
holds on the P90 TTFT over every request, and the queue of the moment does not show the long
prompts to come.

The prompts: each queued request's uncached prompt tokens, taken when the rule first sees it,
over as many recent requests as the snapshot carries recent TTFT samples (the most it has
carried: the window the rule's recent P90 TTFT reads, 64 in both engines). No P90 until ten
are seen: the fewest in which one prompt lies above the P90.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import waiting_fcfs
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
