"""The queue drain model the SLO rule (``rule_slo.SloRule``) reads: how many queued prompt tokens
a candidate brings to their first token within a time, and which queued request it brings late.

FCFS, as both engines admit: a request has its first token only when everything ahead of it has
been prefilled. Q tokens take ceil(Q / p) microbatches of the candidate's stage time on stage 0
(p: the prefill tokens it carries), and the last one pp - 1 more stage times to cross the
pipeline.
"""

from __future__ import annotations

import math

from ppsched.core.snapshots import ChunkSnapshot
from ppsched.dcp.candidate_costs import CandidateCosts, waiting_fcfs


def tokens_within_ms(costs: CandidateCosts, i: int, limit_ms: float, pp: int,
                     arrival_tok_ms: float = 0.0) -> int:
    """The most queued prompt tokens candidate i brings to their first token within
    ``limit_ms`` while prompt tokens keep arriving at ``arrival_tok_ms`` per ms: Q tokens take
    ceil(Q / p) microbatches of s on stage 0, stretched by 1 / (1 - rho) (rho = arrival / supply,
    the share of stage 0 the arrivals take at this chunk), and the last one pp - 1 more stages
    to cross the pipeline. 0 when the candidate carries no prefill or cannot keep up."""
    p = costs.prefill[i]
    supply = costs.supply(i)
    if p <= 0 or supply <= arrival_tok_ms:
        return 0
    s = costs.stage_ms[i]
    pieces = math.floor((limit_ms - (pp - 1) * s) * (1.0 - arrival_tok_ms / supply) / s)
    return max(0, pieces) * p


def queue_deadlines(snap: ChunkSnapshot, ttft_ms: float) -> list[tuple[float, int, int]]:
    """(ms left before SLO_TTFT, prompt tokens up to and including it, its req_id) for every
    queued request still in time, FCFS (the chunked request first; the view's oldest requests):
    it has its first token only when everything ahead of it has been prefilled. Requests already
    late count in the tokens ahead of the others but set no deadline (nothing can bring them in
    time)."""
    late_ms = 1000.0 * snap.now_s - ttft_ms  # a request that arrived before it is late
    out = []
    cum = 0
    for q in waiting_fcfs(snap):
        cum += q.remaining_prompt_tokens
        left = 1000.0 * q.arrival_s - late_ms
        if left > 0:
            out.append((left, cum, q.req_id))
    return out


def first_late(costs: CandidateCosts, i: int, deadlines: list[tuple[float, int, int]],
               pp: int, gap_ms: float, hint: int | None = None) -> int | None:
    """The first request of ``deadlines`` (``queue_deadlines``) that candidate i brings to its
    first token late, None if it brings every one in time: ``tokens_within_ms`` without the
    arrivals' share (in FCFS a request that arrives later is prefilled after it), each
    microbatch taking ``gap_ms`` more than its stage. ``hint``: a request tried first, returned
    if late (the one a smaller size brought late is most often late here too: a queue no size
    brings in time then costs one test per size, not a scan)."""
    p = costs.prefill[i]
    if p <= 0:
        return 0 if deadlines else None
    # tokens_within_ms(left) >= cum  <=>  floor((left - (pp - 1) s) / s) >= ceil(cum / p)
    s = costs.stage_ms[i] + gap_ms
    if hint is not None:
        left, cum, _ = deadlines[hint]
        if left < s * (-(-cum // p) + pp - 1):
            return hint
    for j, (left, cum, _) in enumerate(deadlines):
        if left < s * (-(-cum // p) + pp - 1):
            return j
    return None
