"""Figures of the live router test: what clients saw while a replica died, and the CSVs the
simulated fleet is checked against in kind (share per replica, prefix hits, per request)."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from ppsched.sglang_patch.router_bench import ProbeResult, prom_sum


def failover_figures(results: list[ProbeResult], polls: list[tuple[float, str]], kill_t: float,
                     dead_url: str, survivor_url: str) -> dict:
    """From the probe's requests and the router's /metrics polled over time.

    ``stopped_choosing_s``: from the kill to the first poll after which the router sent the dead
    replica nothing more (its failure count at its final value, its success count unchanged);
    ``breaker_open_s``: to the first poll showing its circuit breaker open (None if never).
    """
    def series(name: str, **labels: str) -> list[tuple[float, float]]:
        return [(t, prom_sum(text, name, **labels)) for t, text in polls]

    failures = series("smg_worker_cb_outcomes_total", worker=dead_url, outcome="failure")
    successes = series("smg_worker_cb_outcomes_total", worker=dead_url, outcome="success")
    final_f, final_s = failures[-1][1], successes[-1][1]
    stopped_at = next((t for (t, f), (_, s) in zip(failures, successes, strict=True)
                       if t >= kill_t and f == final_f and s == final_s), None)
    breaker = series("smg_worker_cb_state", worker=dead_url)
    opened_at = next((t for t, v in breaker if t >= kill_t and v == 1), None)
    retries = series("smg_worker_retries_total")
    survivor = series("smg_worker_cb_outcomes_total", worker=survivor_url, outcome="success")
    before = [r.done_s - r.sent_s for r in results if r.done_s < kill_t and r.status == 200]
    after = [r for r in results if r.sent_s >= kill_t]
    later = [r for r in results if stopped_at is not None and r.sent_s > stopped_at]
    return {
        "requests": len(results),
        "client_errors": sum(r.status != 200 for r in results),
        "client_error_statuses": " ".join(sorted(str(r.status) for r in results
                                                 if r.status != 200)),
        "in_flight_at_kill": sum(r.sent_s <= kill_t <= r.done_s for r in results),
        "router_retries": retries[-1][1] - retries[0][1],
        "dead_failures_seen_by_router": final_f - _last_before(failures, kill_t),
        "stopped_choosing_s": None if stopped_at is None else round(stopped_at - kill_t, 2),
        "breaker_open_s": None if opened_at is None else round(opened_at - kill_t, 2),
        "median_latency_before_s": round(statistics.median(before), 3) if before else None,
        "max_latency_after_kill_s": round(max(r.done_s - r.sent_s for r in after), 3)
        if after else None,
        "sent_after_stop": len(later),
        "ok_after_stop": sum(r.status == 200 for r in later),
        "survivor_successes": survivor[-1][1] - survivor[0][1],
    }


def _last_before(series: list[tuple[float, float]], t0: float) -> float:
    """The value of the last sample before ``t0`` (the first sample if none is)."""
    before = [v for t, v in series if t < t0]
    return before[-1] if before else series[0][1]


def write_live_router_csvs(summary: dict, out_dir: Path) -> list[Path]:
    """``live_router.csv``: per policy and replica, requests, share, prompt and cached tokens;
    ``live_router_sequence.csv``: per request in send order, its group and the cached tokens
    the client was told under each policy; ``live_router_failover.csv``: the failover figures."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summary["rows"]
    by_len = {r.prefix_words + r.question_words: r for r in rows}
    shares = out_dir / "live_router.csv"
    with shares.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "replica", "requests", "share", "prompt_tokens", "cached_tokens",
                    "prefix_hit_rate"])
        for policy, phase in summary["phases"].items():
            total = sum(x["sglang:num_requests_total"] for x in phase["served"])
            for i, x in enumerate(phase["served"]):
                n, p, c = (x["sglang:num_requests_total"], x["sglang:prompt_tokens_total"],
                           x["sglang:cached_tokens_total"])
                w.writerow([policy, i, int(n), round(n / total, 4), int(p), int(c),
                            round(c / p, 4) if p else 0.0])
    sequence = out_dir / "live_router_sequence.csv"
    policies = list(summary["phases"])
    orders = {p: summary["phases"][p]["result"]["input_lens"] for p in policies}
    cached = {p: dict(zip(orders[p], summary["phases"][p]["result"]["cached_tokens"],
                                   strict=True))
              for p in policies}
    with sequence.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["position", "request", "group", "prompt_tokens", "output_tokens",
                    *[f"cached_{p}" for p in policies]])
        for pos, length in enumerate(orders[policies[0]]):
            row = by_len[length]
            w.writerow([pos, row.index, row.group, length, row.output_tokens,
                        *[cached[p][length] for p in policies]])
    failover = out_dir / "live_router_failover.csv"
    with failover.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["figure", "value"])
        for k, v in summary["failover"].items():
            w.writerow([k, v])
    return [shares, sequence, failover]
