"""Do two greedy runs of the same requests compute the same thing?

A different chunk size or batch changes the order of floating-point sums, so two correct
servers may pick different greedy tokens where the top two logits are nearly tied. Exact id
equality is therefore the wrong test; this one allows a divergence only at such a tie and
checks, up to it, that each chosen token's logprob agrees within the same tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppsched.sglang_patch.http_client import StreamResult


@dataclass(frozen=True, slots=True)
class Agreement:
    compared_tokens: int
    diverged_at_ties: tuple[tuple[int, int, float], ...]  # (req_id, position, gap in nats)
    problems: tuple[str, ...]
    max_logprob_diff: float


def _logprob(top: list[tuple[int, float]], token: int) -> float | None:
    return next((lp for tok, lp in top if tok == token), None)


def _tie_gap(top: list[tuple[int, float]], a: int, b: int) -> float | None:
    la, lb = _logprob(top, a), _logprob(top, b)
    return None if la is None or lb is None else abs(la - lb)


def compare_greedy(reference: list[StreamResult], other: list[StreamResult],
                   tol_nats: float) -> Agreement:
    """``tol_nats`` bounds both the logprob disagreement before any divergence and the gap of the
    tie a divergence must sit on; results need ``top_logprobs`` (at least 2 per token)."""
    problems: list[str] = []
    ties: list[tuple[int, int, float]] = []
    compared, worst = 0, 0.0
    if [r.req_id for r in reference] != [r.req_id for r in other]:
        return Agreement(0, (), ("the two runs hold different requests",), float("nan"))
    for ref, oth in zip(reference, other, strict=True):
        rid = ref.req_id
        if len(ref.output_ids) != len(oth.output_ids):
            problems.append(f"request {rid}: {len(ref.output_ids)} vs {len(oth.output_ids)} tokens")
            continue
        if len(ref.top_logprobs) != len(ref.output_ids) or \
                len(oth.top_logprobs) != len(oth.output_ids):
            problems.append(f"request {rid}: top logprobs missing for some tokens")
            continue
        diverge = next((k for k, (a, b) in enumerate(zip(ref.output_ids, oth.output_ids,
                                                                 strict=True))
                        if a != b), len(ref.output_ids))
        for k in range(diverge):
            tok = ref.output_ids[k]
            la, lb = _logprob(ref.top_logprobs[k], tok), _logprob(oth.top_logprobs[k], tok)
            if la is None or lb is None:
                problems.append(f"request {rid} token {k}: chosen token {tok} not in its top list")
                continue
            compared += 1
            worst = max(worst, abs(la - lb))
            if abs(la - lb) > tol_nats:
                problems.append(f"request {rid} token {k}: logprob {la:.6f} vs {lb:.6f} "
                                f"(differ by more than {tol_nats:g} nats)")
        if diverge == len(ref.output_ids):
            continue
        a, b = ref.output_ids[diverge], oth.output_ids[diverge]
        gaps = (_tie_gap(ref.top_logprobs[diverge], a, b),
                _tie_gap(oth.top_logprobs[diverge], a, b))
        if None in gaps or max(gaps) > tol_nats:
            problems.append(f"request {rid} token {diverge}: {a} vs {b} is not a tie within "
                            f"{tol_nats:g} nats (gaps {gaps})")
        else:
            ties.append((rid, diverge, max(gaps)))
    return Agreement(compared, tuple(ties), tuple(problems), worst)
