"""The live replay's report: bench_serving-style latency figures, SLO lines, failures by reason.

Definitions (stated in the printout, so a user can compare with ``sglang.bench_serving``):
TTFT starts at the request's scheduled arrival (``--ttft-from arrival``: includes any wait for a
free connection) or when it was sent (``send``: as bench_serving does); E2E from the same
instant to the last token; TPOT per request = (last - first token) / (tokens - 1); ITL pooled
over every gap between consecutive streamed tokens of completed requests (as bench_serving
pools it). Success = a finished stream with exactly ``max_new_tokens`` tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ppsched.core.requests import RequestRecord
from ppsched.metrics.summary import percentiles

TTFT_FROM = ("arrival", "send")
CLOCK_WORDS = {"arrival": "scheduled arrival (a wait for a free connection counts)",
               "send": "send (as sglang.bench_serving)"}


def pooled_itl_ms(token_times: Sequence[Sequence[float]]) -> list[float]:
    """Every inter-token gap (ms) of every stream, pooled."""
    gaps: list[float] = []
    for times in token_times:
        gaps.extend(1000.0 * float(d) for d in np.diff(np.asarray(times, dtype=float)))
    return gaps


def failures_by_reason(records: Sequence[RequestRecord]) -> dict[str, int]:
    return dict(Counter(r.reject_reason for r in records if r.rejected).most_common())


def live_figures(records: Sequence[RequestRecord], itl_ms: Sequence[float],
                 wall_s: float) -> dict:
    """What summary.json gains beyond the simulator's summary."""
    done = [r for r in records if not r.rejected]
    return {"itl_ms": percentiles(itl_ms),
            "request_throughput_rps": len(done) / wall_s if wall_s > 0 else 0.0,
            "output_throughput_tok_s": (sum(r.output_tokens for r in done) / wall_s
                                        if wall_s > 0 else 0.0),
            "live_failures_by_reason": failures_by_reason(records)}


def _line(name: str, v: dict) -> str:
    if math.isnan(v["mean"]):
        return f"{name:<11}(no completed request)"
    return (f"{name:<11}mean {v['mean']:8.1f}  p50 {v['p50']:8.1f}  p90 {v['p90']:8.1f}  "
            f"p99 {v['p99']:8.1f} ms")


def report_lines(summary: dict, *, url: str, wall_s: float, ttft_from: str,
                 interrupted: str | None) -> list[str]:
    s = summary
    slo = s["slo"]
    lines = [f"live run   {url}: {s['requests']} requests, {s['completed']} completed with exact "
             f"length, {s['requests'] - s['completed']} failed, {wall_s:.1f} s wall"
             + (f"  [PARTIAL: {interrupted}]" if interrupted else ""),
             f"throughput {s['request_throughput_rps']:.2f} req/s  "
             f"{s['output_throughput_tok_s']:.1f} output tok/s (completed, over the wall time)",
             f"clock      TTFT and E2E from the request's {CLOCK_WORDS[ttft_from]} "
             f"(--ttft-from {ttft_from})",
             _line("TTFT", s["ttft_ms"]), _line("TPOT", s["tpot_ms"]),
             _line("ITL", s["itl_ms"]) + "  (pooled over all tokens)", _line("E2E", s["e2e_ms"]),
             f"SLO        attainment {s['slo_attainment']:.1%} (TTFT <= {slo['ttft_ms']:g} ms and "
             f"TPOT <= {slo['tpot_ms']:g} ms; failures count as misses)",
             f"goodput    {'PASS' if s['goodput_ok'] else 'FAIL'}: p90 TTFT "
             f"{s['goodput_p90_ttft_ms']:.1f} ms, p90 TPOT {s['goodput_p90_tpot_ms']:.1f} ms "
             "(the paper's criterion: both p90 within the SLO)"]
    for reason, n in s["live_failures_by_reason"].items():
        lines.append(f"failed     {n:4d} x {reason}")
    return lines
