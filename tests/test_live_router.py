"""Two CPU SGLang replicas (tiny model, PP 2, the plugin with predictive + DS on both) behind
SGLang's router (``sglang-router``), loopback only.

``python -m sglang.bench_serving`` sends one fixed shared-prefix sequence through the router
under ``cache_aware`` and then ``round_robin`` (the replicas start once; only the router
restarts, and each replica's prefix cache is flushed between policies). Then a probe sends a
request every 0.2 s through the round-robin router while one replica is killed.

Checked: every request completes; what the router says it sent each replica equals what the
replica's own /metrics says it served, and the two replicas sum to the total; each replica's
decision log agrees with its counters and with the tokens it prefilled and decoded; the killed
replica leaves the other serving. The figures (share per replica, prefix hits, what clients saw
during the failover) are printed; with PPSCHED_LIVE_ROUTER_OUT=DIR they are also written there
as CSV (docs/FLEET.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from ppsched.sglang_patch.cpu_server import (
    REPO,
    cpu_args,
    free_port,
    make_tiny_model,
    sglang_python,
    start,
)
from ppsched.sglang_patch.router_bench import (
    FailoverProbe,
    SharedPrefixSpec,
    post,
    prom_sum,
    scrape,
    write_custom_dataset,
)
from ppsched.sglang_patch.router_report import failover_figures, write_live_router_csvs
from ppsched.sglang_patch.router_server import RouterSpec, kill_now, launch_router

PY = sglang_python()


def _router_installed() -> bool:
    return PY is not None and any(PY.parent.parent.glob("lib/python3*/site-packages/sglang_router"))


pytestmark = [pytest.mark.live,
              pytest.mark.skipif(not _router_installed()
                                 or os.environ.get("PPSCHED_LIVE_GPU") == "1",
                                 reason="needs the SGLang CPU venv with sglang-router "
                                        "(scripts/setup_sglang_cpu.sh)")]

SPEC = SharedPrefixSpec()
ROWS = SPEC.rows()
N = len(ROWS)
POLICIES = ("cache_aware", "round_robin")  # round_robin last: its router stays for the kill
KILL_AFTER_S, WATCH_S = 3.0, 8.0
COUNTED = {"decisions": ("decision", lambda r: 1), "chunk_applied": ("chunk_applied", lambda r: 1),
           "hold_turns": ("hold_applied", lambda r: 1),
           "held_requests": ("hold_applied", lambda r: len(r["held"])),
           "stage_measurements": ("stage", lambda r: 1), "fallbacks": ("fallback", lambda r: 1)}
SERVED = ("sglang:num_requests_total", "sglang:prompt_tokens_total",
          "sglang:cached_tokens_total", "sglang:generation_tokens_total")


def _start_replicas(tmp: Path, model: Path, tokenizer: Path) -> list:
    """Both replicas start at once (start-up is most of this file's time); wait for both."""
    servers = []
    try:
        for i in range(2):
            env = {**{k: "" for k in os.environ if k.startswith("PPSCHED_")},
                   "PPSCHED_CHUNK": "predictive", "PPSCHED_DS": "on",
                   "PPSCHED_CANDIDATES": "32,64,128", "PPSCHED_BOUNDARY_UNIT": "4",
                   "PPSCHED_DECISION_LOG": str(tmp / f"decisions{i}.jsonl")}
            port = free_port(35000 + 400 * i, 35399 + 400 * i)
            args = cpu_args(model, port, chunk=128, extra=("--enable-metrics",),
                            tokenizer=tokenizer)
            servers.append(start(PY, args, tmp / f"server{i}.log", env=env))
        deadline = time.monotonic() + 420
        while not all(s.healthy() for s in servers):
            dead = [s for s in servers if s.proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("replica did not start; log:\n"
                                   + (dead or servers)[0].log_text()[-4000:])
            time.sleep(1.0)
        return servers
    except BaseException:
        for s in servers:
            s.stop()
        raise


def _bench(port: int, dataset: Path, tokenizer: Path, tmp: Path, policy: str) -> dict:
    out = tmp / f"bench_{policy}.jsonl"
    done = subprocess.run(
        [str(PY), "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
         "--port", str(port), "--dataset-name", "custom", "--dataset-path", str(dataset),
         "--tokenizer", str(tokenizer), "--num-prompts", str(N),
         "--sharegpt-output-len", str(SPEC.output_tokens), "--request-rate", "2", "--seed", "1",
         "--warmup-requests", "0", "--cache-report", "--output-details", "--disable-tqdm",
         "--output-file", str(out)],
        capture_output=True, text=True, timeout=600, cwd="/",
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "HOME": str(tmp)})  # HOME: bench_serving's dataset cache stays in tmp
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text().splitlines()[-1])


def _served(before: str, after: str) -> dict[str, float]:
    return {name: prom_sum(after, name) - prom_sum(before, name) for name in SERVED}


def _log_and_metrics(servers, tmp: Path) -> list[dict]:
    """Each replica's decision log and /metrics read together: scraped before and after the
    log is read, retried until the plugin's counters did not move in between (a health check
    of the router's can land at any time)."""
    out = []
    for i, server in enumerate(servers):
        for _ in range(5):
            time.sleep(1.0)  # the writer thread appends every 50 ms
            first = scrape(server.port)
            records = [json.loads(x) for x in
                       (tmp / f"decisions{i}.jsonl").read_text().splitlines() if x.strip()]
            second = scrape(server.port)
            if all(prom_sum(first, f"ppsched_{c}_total") == prom_sum(second, f"ppsched_{c}_total")
                   for c in COUNTED):
                out.append({"records": records, "metrics": second})
                break
        else:
            raise AssertionError(f"replica {i}: its counters kept moving while idle")
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live-router")
    model = make_tiny_model(PY, tmp / "tiny")
    tokenizer = tmp / "tokenizer"
    subprocess.run([str(PY), "-I", str(REPO / "scripts" / "make_offline_tokenizer.py"),
                    str(tokenizer)], check=True, capture_output=True, timeout=300, cwd="/")
    dataset = write_custom_dataset(ROWS, tmp / "shared_prefix.jsonl")
    servers = _start_replicas(tmp, model, tokenizer)
    urls = tuple(s.url for s in servers)
    router = None
    phases: dict[str, dict] = {}
    try:
        for policy in POLICIES:
            for s in servers:  # each policy starts from empty prefix caches
                status, body = post(s.port, "/flush_cache")
                assert status == 200, body
            spec = RouterSpec(urls, policy, free_port(36000, 36199), free_port(36200, 36399))
            router = launch_router(PY, spec, tmp / f"router_{policy}.log")
            before = [scrape(s.port) for s in servers]
            result = _bench(spec.port, dataset, tokenizer, tmp, policy)
            time.sleep(1.0)
            after = [scrape(s.port) for s in servers]
            routed = scrape(spec.prometheus_port)
            phases[policy] = {
                "result": result,
                "served": [_served(b, a) for b, a in zip(before, after, strict=True)],
                "routed": [prom_sum(routed, "smg_worker_cb_outcomes_total", worker=u,
                                    outcome="success") for u in urls]}
            if policy != POLICIES[-1]:
                router.stop()
        agreement = _log_and_metrics(servers, tmp)

        # A box dies: the second replica's whole process group is killed mid-run.
        survivor_before = scrape(servers[0].port)
        # 24 tokens (~0.4 s a request here): a request is usually in flight at the kill.
        probe = FailoverProbe(router.spec.port, router.spec.prometheus_port, max_new_tokens=24)
        probe.start()
        time.sleep(KILL_AFTER_S)
        kill_t = kill_now(servers[1])
        time.sleep(WATCH_S)
        probe.stop()
        survivor_after = scrape(servers[0].port)
        router_log = router.log_text()
    finally:
        if router is not None:
            router.stop()
        for s in servers:
            s.stop()
    failover = failover_figures(probe.results, probe.polls, kill_t, urls[1], urls[0])
    summary = {"phases": phases, "failover": failover, "rows": ROWS}
    print("\nlive router:", json.dumps({p: {"completed": v["result"]["completed"],
                                           "served": [x["sglang:num_requests_total"]
                                                      for x in v["served"]],
                                           "cached": [x["sglang:cached_tokens_total"]
                                                      for x in v["served"]]}
                                       for p, v in phases.items()}),
          "\nfailover:", json.dumps(failover))
    out_dir = os.environ.get("PPSCHED_LIVE_ROUTER_OUT")
    if out_dir:
        write_live_router_csvs(summary, Path(out_dir))
    return {**summary, "agreement": agreement, "probe": probe, "kill_t": kill_t, "urls": urls,
            "survivor": _served(survivor_before, survivor_after), "router_log": router_log}


@pytest.mark.parametrize("policy", POLICIES)
def test_every_request_completes(fleet, policy):
    r = fleet["phases"][policy]["result"]
    assert r["completed"] == N, r.get("errors")
    assert not any(r["errors"]), r["errors"]
    assert sorted(r["input_lens"]) == sorted(SPEC.prefix_words + row.question_words
                                             for row in ROWS)  # every prompt sent once


@pytest.mark.parametrize("policy", POLICIES)
def test_each_replica_served_what_the_router_sent_it(fleet, policy):
    phase = fleet["phases"][policy]
    served = [x["sglang:num_requests_total"] for x in phase["served"]]
    assert served == phase["routed"], (served, phase["routed"])  # replica's view = router's
    assert sum(served) == N
    generated = sum(x["sglang:generation_tokens_total"] for x in phase["served"])
    assert generated == N * SPEC.output_tokens


def test_round_robin_alternates(fleet):
    assert [x["sglang:num_requests_total"] for x in fleet["phases"]["round_robin"]["served"]] \
        == [N / 2, N / 2]


def test_cache_aware_keeps_each_prefix_group_on_one_replica(fleet):
    """Every group's later requests match its first one's text by far more than the 0.3
    threshold and the load never gets 64 requests apart, so a group never splits: each
    replica serves whole groups, and reuses more prefix than round-robin, which alternates
    replicas whatever the group."""
    phases = fleet["phases"]
    for x in phases["cache_aware"]["served"]:
        assert x["sglang:num_requests_total"] % SPEC.per_group == 0, x
    cached = {p: sum(x["sglang:cached_tokens_total"] for x in phases[p]["served"])
              for p in POLICIES}
    assert cached["cache_aware"] > cached["round_robin"], cached


@pytest.mark.parametrize("replica", (0, 1))
def test_decision_log_agrees_with_counters_and_what_was_served(fleet, replica):
    got = fleet["agreement"][replica]
    records, metrics = got["records"], got["metrics"]
    kinds = Counter(r["kind"] for r in records)
    assert kinds["enabled"] == 2 and kinds["decision"] > 0, kinds  # both PP ranks, acting
    for counter, (kind, weight) in COUNTED.items():
        for rank in (0, 1):
            m = re.search(rf'^ppsched_{counter}_total\{{pp_rank="{rank}"\}} ([0-9.e+]+)$',
                          metrics, re.M)
            assert m is not None, (counter, rank)
            logged = sum(weight(r) for r in records if r["kind"] == kind and r["rank"] == rank)
            assert float(m.group(1)) == logged, (counter, rank)
    stages = [r for r in records if r["kind"] == "stage" and r["rank"] == 0]
    pieces = [tuple(p) for r in stages for p in (r.get("prefill") or [])]
    # /health runs a one-token request that SGLang keeps out of its metrics: a (0, 1) piece
    # (no prompt of the sequence is one token long, nor can a one-token prompt hit the cache).
    health = sum(1 for p in pieces if p == (0, 1))
    prefilled = sum(extend for _, extend in pieces) - health
    assert prefilled == (prom_sum(metrics, "sglang:prompt_tokens_total")
                         - prom_sum(metrics, "sglang:cached_tokens_total"))
    decoded = sum(r.get("decode_count") or 0 for r in stages)  # the first token is prefill's
    assert decoded == (prom_sum(metrics, "sglang:generation_tokens_total")
                       - prom_sum(metrics, "sglang:num_requests_total"))


def test_killed_replica_leaves_the_other_serving(fleet):
    f = fleet["failover"]
    assert f["stopped_choosing_s"] is not None, f  # the router stopped sending to it
    assert f["stopped_choosing_s"] < WATCH_S - 2.0, f
    assert f["ok_after_stop"] == f["sent_after_stop"] > 0, f  # the survivor served the rest
    # What the survivor served during the probe is what the router counted as its successes.
    assert fleet["survivor"]["sglang:num_requests_total"] == f["survivor_successes"], f
    assert f["client_errors"] <= f["in_flight_at_kill"], f  # only a request cut mid-answer
