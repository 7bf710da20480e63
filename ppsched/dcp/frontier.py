"""Frontier rule for mixed loops: the cheapest microbatch that keeps up with arrivals and deadlines.

In a mixed loop (SGLang --enable-mixed-chunk) the slot's decodes ride in every prefill batch and
spend budget first, so a decision fixes one microbatch: p = budget - decodes prefill tokens in a
predicted stage time s. A decode advances once per round of pp microbatches, so TPOT follows the
mean s, and prefill supply follows p / s: choosing per microbatch is speed scaling.

- Rate to cover, tokens/ms: the larger of (a) the prompt-token arrival rate (long-run balance)
  and (b) the "optimal available" rate of online speed scaling (Yao, Demers, Shenker 1995;
  Bansal, Kimbrel, Pruhs 2007): the least rate that prefills every queued request by its deadline
  if nothing else arrived, max over the FCFS prefix of (tokens up to and including request i) /
  (time left to its deadline); deadline = arrival + SLO_TTFT - lead, the lead being one pipeline
  traversal of its last chunk. (b) alone is lazy: it lets the queue grow to the deadlines and then
  needs the costliest budgets to drain (measured: P90 TPOT worse than with (a) added).
- Choice: the candidate of least stage time whose supply p / s covers the rate (stage time is a
  staircase in batched tokens, so a bigger budget can be cheaper); if none does, the greatest
  supply (drain).
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.core.snapshots import ChunkSnapshot

INF = float("inf")
VIEW_LIMIT = 48  # queued requests scanned one by one; the rest of the queue enters as one term


def oa_rate(snap: ChunkSnapshot, ttft_ms: float, lead_ms: float, limit: int = VIEW_LIMIT
            ) -> float:
    """Tokens/ms needed to prefill every queued request by arrival + ttft - lead; inf if late.

    ``snap.queue`` is FCFS oldest-first; the chunked request is served first. Beyond ``limit``
    entries, the remaining queued tokens are charged at the latest possible deadline (now + ttft
    - lead): every one of them arrived by now, so this term never overstates their need.
    """
    now_ms = 1000.0 * snap.now_s
    reach = ttft_ms - lead_ms
    if reach <= 0:
        return INF
    rate = 0.0
    cum = 0
    seen = 0
    ch = snap.chunked
    if ch is not None:
        cum = ch.remaining_prompt_tokens
        left = 1000.0 * ch.arrival_s + reach - now_ms
        if left <= 0:
            return INF
        rate = cum / left
    for q in snap.queue[:limit]:
        if ch is not None and q.req_id == ch.req_id:
            continue
        seen += q.remaining_prompt_tokens
        left = 1000.0 * q.arrival_s + reach - now_ms
        if left <= 0:
            return INF
        rate = max(rate, (cum + seen) / left)
    # queued_prompt_tokens is exact and includes the chunked request
    return max(rate, max(snap.queued_prompt_tokens, cum + seen) / reach)


def frontier_choice(prefill: Sequence[int], stage: Sequence[float], rate: float
                    ) -> tuple[int, bool]:
    """(candidate index, covers the rate): the least stage time whose supply p / s covers ``rate``
    tokens/ms; when none does, the greatest supply (drain). Candidates with p = 0 (the budget all
    spent on decodes) are skipped; (-1, False) when every one is.
    """
    idx = [i for i, p in enumerate(prefill) if p > 0]
    if not idx:
        return -1, False
    # a bigger budget can land on a cheaper tile of the staircase, so scan them all
    supply = {i: prefill[i] / max(stage[i], 1e-9) for i in idx}
    cover = [i for i in idx if supply[i] >= rate]
    if cover:
        return min(cover, key=stage.__getitem__), True
    return max(idx, key=supply.__getitem__), False
