"""A workload: the requests to replay, where they came from, and what was changed on the way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppsched.core.requests import RequestSpec


def _stats(values: np.ndarray) -> dict[str, float]:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


@dataclass(frozen=True)
class Workload:
    """Requests sorted by arrival with ids 0..n-1.

    `truncated` counts requests whose prompt+output was capped at the context length; `notes` say
    in words what stands in for what (e.g. summarization for CNN/DailyMail) and how arrivals and
    lengths were made, so outputs never hide a substitution.
    """

    name: str
    requests: tuple[RequestSpec, ...]
    source: str
    truncated: int = 0
    notes: tuple[str, ...] = ()
    arrival: str = ""  # the arrival process in words, e.g. "poisson rate=2 seed=0"

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError(f"workload {self.name!r} has no requests")
        for i, req in enumerate(self.requests):
            if req.req_id != i:
                raise ValueError(f"workload {self.name!r}: request {i} has id {req.req_id}")
            if i and req.arrival_s < self.requests[i - 1].arrival_s:
                raise ValueError(f"workload {self.name!r}: request {i} arrives before {i - 1}")
        if not 0 <= self.truncated <= len(self.requests):
            raise ValueError(f"workload {self.name!r}: truncated={self.truncated} "
                             f"outside 0..{len(self.requests)}")

    def __len__(self) -> int:
        return len(self.requests)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(arrival_s, prompt_tokens, output_tokens) as numpy arrays."""
        arrival = np.fromiter((r.arrival_s for r in self.requests), float, len(self.requests))
        prompt = np.fromiter((r.prompt_tokens for r in self.requests), np.int64, len(self))
        output = np.fromiter((r.output_tokens for r in self.requests), np.int64, len(self))
        return arrival, prompt, output

    def over_context(self, context_limit: int) -> int:
        """Requests whose prompt+output exceeds context_limit: an engine with that context length
        rejects them (the goodput criterion counts them as infinitely late)."""
        _, prompt, output = self.arrays()
        return int(((prompt + output) > context_limit).sum())

    def stats(self, context_limit: int | None = None) -> dict:
        """Counts, span (first to last arrival), rate (requests / span), token-length statistics;
        with a context limit, how many requests exceed it (``over_context``)."""
        arrival, prompt, output = self.arrays()
        span = float(arrival[-1] - arrival[0])
        extra = {} if context_limit is None else {
            "context_limit": context_limit, "over_context": self.over_context(context_limit)}
        return {
            "requests": len(self),
            "span_s": span,
            "rate_rps": len(self) / span if span > 0 else None,
            "truncated": self.truncated,
            **extra,
            "prompt_tokens": _stats(prompt),
            "output_tokens": _stats(output),
        }

    def describe(self, context_limit: int | None = None) -> dict:
        """Everything needed to know what was replayed, for summary.json and reports."""
        return {"name": self.name, "source": self.source, "arrival": self.arrival,
                "notes": list(self.notes), **self.stats(context_limit)}
