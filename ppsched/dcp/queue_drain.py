"""The one drain model of the SLO rule (``rule_slo.SloRule``): when a prompt reaches its first
token at a candidate size.

FCFS, as both engines admit: a request has its first token only when everything ahead of it has
been prefilled. Q tokens (its own included) take ceil(Q / p) microbatches on stage 0, each a
stage time s plus rank 0's gap g that no stage time shows (p: the prefill tokens the size
carries), and the last one pp - 1 more stages to cross the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import waiting_fcfs


def first_token_ms(tokens: float, p: int, stage_ms: float, gap_ms: float, pp: int) -> float:
    """When a prompt with ``tokens`` prompt tokens up to and including its own reaches its
    first token at a size carrying ``p`` > 0 prefill tokens a microbatch."""
    return -(-tokens // p) * (stage_ms + gap_ms) + (pp - 1) * stage_ms


def tokens_within_ms(limit_ms: float, p: int, stage_ms: float, gap_ms: float, pp: int) -> float:
    """The prompt tokens a size carrying ``p`` prefill tokens a microbatch brings to their first
    token within ``limit_ms``: ``first_token_ms`` inverted, pieces counted as a fraction."""
    return p * (limit_ms - (pp - 1) * stage_ms) / (stage_ms + gap_ms)


def queue_deadlines(snap: ChunkSnapshot, ttft_ms: float) -> list[tuple[float, int]]:
    """(ms left before SLO_TTFT, prompt tokens up to and including it) for every queued request
    still in time, FCFS with the chunked request first. Requests already late count in the
    tokens ahead of the others but set no deadline (no size brings them in time)."""
    late_ms = 1000.0 * snap.now_s - ttft_ms  # a request that arrived before it is late
    out = []
    cum = 0
    for q in waiting_fcfs(snap):
        cum += q.remaining_prompt_tokens
        left = 1000.0 * q.arrival_s - late_ms
        if left > 0:
            out.append((left, cum))
    return out


def most_in_time(sizes: list[int], key: Callable[[int], tuple[float, ...]],
                 deadlines: list[tuple[float, int]], prefill: Sequence[int],
                 stage_ms: Sequence[float], gap_ms: float, pp: int) -> tuple[int, int]:
    """(the size, how many of ``deadlines`` it brings in time) of ``sizes`` that brings the most
    queued requests to their first token in time; ties: the greatest ``key``, so a size
    bringing every one in time ends the search (with no deadline, the first). ``first_token_ms``
    inlined: it runs per size and request at every re-plan."""
    if not deadlines:
        return max(sizes, key=key), 0
    best, most = sizes[0], -1
    for i in sorted(sizes, key=key, reverse=True):
        p, piece, crossing = prefill[i], stage_ms[i] + gap_ms, (pp - 1) * stage_ms[i]
        count = 0
        for left, cum in deadlines:
            if -(-cum // p) * piece + crossing <= left:
                count += 1
        if count > most:
            best, most = i, count
            if most == len(deadlines):
                break
    return best, most
