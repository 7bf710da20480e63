"""A short digest of what a simulated run outputs: requests, the summary's output figures, the
decision log and the per-stage iterations. Two runs with equal digests gave the same results.

Self-contained (no ppsched imports) so that a benchmark can load this file into a process that
runs an older checkout's simulator and compare the two trees' outputs cell by cell.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The summary's output figures (not its timings or config echo).
SUMMARY_KEYS = ("admission_rejected", "bubble_fraction", "completed", "context_length",
                "context_rejected", "ds_holds", "ds_max_consecutive_holds", "e2e_ms", "goodput_ok",
                "goodput_p90_tpot_ms", "goodput_p90_ttft_ms", "iteration_ms", "kv_capacity_tokens",
                "kv_peak_tokens", "microbatches", "output_tokens_per_s", "prefix_cache",
                "rejected", "requests", "retractions", "sim_end_s", "slo", "slo_attainment",
                "span_s", "throughput_rps", "tpot_ms", "ttft_ms", "unfinished")
# The decision log's fields every compared tree writes (fields added later stay out, so a
# digest still compares a run with the reference engine's).
DECISION_KEYS = ("type", "time_s", "slot", "iteration", "chunk", "requested_chunk", "reason",
                 "inputs", "predicted_ms", "mb", "run", "held_ids")


def run_digest(result: Any) -> str:
    """16 hex digits of sha256 over ``result``'s records, summary figures, decisions and
    iterations (a ``SimResult``)."""
    h = hashlib.sha256()
    for r in result.records:
        h.update(repr((r.req_id, r.arrival_s, r.prompt_tokens, r.output_tokens,
                       r.first_token_s, r.finish_s, r.rejected, r.reject_reason, r.slot,
                       r.retractions)).encode())
    summary = {k: v for k, v in result.summary.items() if k in SUMMARY_KEYS}
    h.update(json.dumps(summary, sort_keys=True, default=repr).encode())
    decisions = [{k: v for k, v in d.items() if k in DECISION_KEYS} for d in result.decisions]
    h.update(json.dumps(decisions, sort_keys=True, default=repr).encode())
    it = result.iterations
    h.update(",".join(it.columns).encode())
    for col in it.columns:
        values = it[col].to_numpy()
        h.update("|".join(map(str, values)).encode() if values.dtype == object
                 else values.tobytes())
    return h.hexdigest()[:16]
