"""Per-request latency statistics, SLO attainment and the paper's goodput criterion."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ppsched.core.requests import RequestRecord
from ppsched.core.slo import Slo

PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
GOODPUT_PERCENTILE = 90.0  # the paper: P90 TTFT and P90 TPOT within the (scaled) SLO


def percentiles(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """{mean, p50, p90, p99, p999} (linear interpolation); NaN for every key if values is empty."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return {"mean": math.nan, **{k: math.nan for k in PERCENTILES}}
    qs = np.percentile(arr, list(PERCENTILES.values()))
    named = {k: float(q) for k, q in zip(PERCENTILES, qs, strict=True)}
    return {"mean": float(arr.mean()), **named}


def percentile_with_misses(values: np.ndarray, q: float) -> float:
    """Linear-interpolated percentile where +inf entries (misses) sort last and poison any
    interpolation that touches them; +inf for an empty input."""
    arr = np.sort(np.asarray(values, dtype=float))
    if arr.size == 0:
        return math.inf
    pos = q / 100.0 * (arr.size - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(arr[lo])
    if math.isinf(arr[hi]):
        return math.inf
    return float(arr[lo] + (arr[hi] - arr[lo]) * (pos - lo))


def _completed(rec: RequestRecord) -> bool:
    return not rec.rejected and math.isfinite(rec.first_token_s) and math.isfinite(rec.finish_s)


def summarize(records: Sequence[RequestRecord], slo: Slo, *, slo_scale: float = 1.0) -> dict:
    """Summary of one run.

    Latency percentiles are over completed requests (TPOT over those with >= 2 output tokens).
    SLO attainment is over ALL requests: rejected or unfinished ones count as misses; a 1-token
    request meets TPOT. goodput_ok is the paper's criterion with rejected/unfinished requests
    counted as infinitely late, so rejecting load can never buy a pass.
    """
    limit = slo.scaled(slo_scale)
    n = len(records)
    done = [r for r in records if _completed(r)]
    rejected = sum(1 for r in records if r.rejected)
    # one pass over the completed requests (a run has thousands): each latency read once
    ttft_list: list[float] = []
    e2e_list: list[float] = []
    tpot_list: list[float] = []
    met = 0
    out_tokens = 0
    last_finish = -math.inf
    for r in done:
        ttft_ms, e2e_ms = r.ttft_ms, r.e2e_ms
        out_tokens += r.output_tokens
        if r.finish_s > last_finish:
            last_finish = r.finish_s
        ttft_list.append(ttft_ms)
        e2e_list.append(e2e_ms)
        meets = ttft_ms <= limit.ttft_ms
        if r.output_tokens >= 2:
            tpot_ms = r.tpot_ms
            tpot_list.append(tpot_ms)
            meets = meets and tpot_ms <= limit.tpot_ms
        met += meets
    ttft = np.array(ttft_list, dtype=float)
    e2e = np.array(e2e_list, dtype=float)
    tpot = np.array(tpot_list, dtype=float)
    misses = n - len(done)
    ttft_all = np.concatenate([ttft, np.full(misses, math.inf)])
    tpot_all = np.concatenate([tpot, np.full(misses, math.inf)])
    ttft_p90 = percentile_with_misses(ttft_all, GOODPUT_PERCENTILE)
    # With no multi-token requests TPOT is vacuous; with none completed TTFT already fails.
    tpot_p90 = percentile_with_misses(tpot_all, GOODPUT_PERCENTILE) if tpot_all.size else 0.0

    if done:
        start = min(r.arrival_s for r in records)
        span = last_finish - start
    else:
        span = 0.0
    return {
        "requests": n,
        "completed": len(done),
        "rejected": rejected,
        "unfinished": misses - rejected,
        "ttft_ms": percentiles(ttft),
        "tpot_ms": percentiles(tpot),
        "e2e_ms": percentiles(e2e),
        "slo": {"ttft_ms": slo.ttft_ms, "tpot_ms": slo.tpot_ms, "scale": slo_scale},
        "slo_attainment": met / n if n else math.nan,
        "goodput_ok": bool(n > 0 and ttft_p90 <= limit.ttft_ms and tpot_p90 <= limit.tpot_ms),
        "goodput_p90_ttft_ms": ttft_p90,
        "goodput_p90_tpot_ms": tpot_p90,
        "span_s": span,
        "throughput_rps": len(done) / span if span > 0 else 0.0,
        "output_tokens_per_s": out_tokens / span if span > 0 else 0.0,
    }
