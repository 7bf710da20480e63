"""Real SGLang 0.5.23 on CPU at --pp-size 2 with and without the plugin, and a soak.

Skipped only when the SGLang venv (scripts/setup_sglang_cpu.sh) is absent. Two servers, each
shared by the tests that need it (module-scoped); tests run in file order, the fault test last.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections import Counter, defaultdict

import numpy as np
import pytest

from ppsched.core.requests import RequestSpec
from ppsched.experiments.live_replay import ReplayOptions, prompt_ids, replay
from ppsched.sglang_patch.cpu_server import (
    cpu_args,
    free_port,
    launch,
    make_tiny_model,
    sglang_python,
)
from ppsched.sglang_patch.greedy_agreement import compare_greedy
from ppsched.sglang_patch.http_client import Endpoint, generate_stream

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

CANDIDATES = (16, 32, 64, 128)


def _best_chunk_spec() -> str:
    from ppsched.dcp.registry import CHUNK_SPECS
    return "predictive" if "predictive" in CHUNK_SPECS else "static:64"


def _ds_mode() -> str:
    from ppsched.delay_sched.registry import DS_MODES
    return "on" if "on" in DS_MODES else "off"


def workload(n: int, seed: int, burst_s: float = 1.0, max_prompt: int = 300,
             max_out: int = 24) -> list[RequestSpec]:
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, burst_s, n))
    prompts = rng.integers(20, max_prompt, n)
    outs = rng.integers(4, max_out, n)
    return [RequestSpec(i, float(a), int(p), int(o))
            for i, (a, p, o) in enumerate(zip(arrivals, prompts, outs, strict=True))]


MAIN = workload(32, seed=1)
# Top logprobs let the token comparison tell a near-tie (different chunks sum in a different
# order) from a wrong computation; TOL bounds float32 disagreement on the tiny model.
COMPARE = ReplayOptions(concurrency=32, top_logprobs=3)
# SGLang serves a float32 checkpoint in float16 unless told (its model_config): ask for float32
# on the CPU so 1e-3 nats is far above rounding. On a GPU the model's own dtype is kept and its
# rounding (bf16: ~1e-2) needs PPSCHED_LIVE_TOL_NATS.
CPU_DTYPE = () if os.environ.get("PPSCHED_LIVE_GPU") == "1" else ("--dtype", "float32")
TOL_NATS = float(os.environ.get("PPSCHED_LIVE_TOL_NATS", "1e-3"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if os.environ.get("PPSCHED_LIVE_MODEL"):  # a real model on a GPU box (docs/SGLANG_PLUGIN.md)
        return os.environ["PPSCHED_LIVE_MODEL"]
    return make_tiny_model(PY, tmp_path_factory.mktemp("tiny-qwen2"))


def _clean_env() -> dict[str, str]:
    return {k: "" for k in os.environ if k.startswith("PPSCHED_")}


@pytest.fixture(scope="module")
def stock(model, tmp_path_factory):
    """The plugin installed but not configured: SGLang must behave exactly as stock."""
    tmp = tmp_path_factory.mktemp("stock")
    port = free_port()
    server = launch(PY, cpu_args(model, port, extra=CPU_DTYPE), tmp / "server.log",
                    env=_clean_env())
    try:
        records, results = replay(server.url, MAIN, COMPARE)
    finally:
        server.stop()
    return {"records": records, "results": results, "log": server.log_text()}


@pytest.fixture(scope="module")
def plugin(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plugin")
    log = tmp / "decisions.jsonl"
    fault = tmp / "fault-now"
    env = {**_clean_env(), "PPSCHED_CHUNK": "py:ppsched.sglang_patch.testing:fault_switch_chunk",
           "PPSCHED_TEST_INNER_CHUNK": _best_chunk_spec(), "PPSCHED_TEST_FAULT_FILE": str(fault),
           "PPSCHED_DS": _ds_mode(), "PPSCHED_DS_MAX_CONSECUTIVE": "2",
           "PPSCHED_CANDIDATES": ",".join(map(str, CANDIDATES)), "PPSCHED_BOUNDARY_UNIT": "4",
           "PPSCHED_SLO_TTFT_MS": "20000", "PPSCHED_SLO_TPOT_MS": "5000",
           "PPSCHED_DECISION_LOG": str(log)}
    # Launch chunk above every candidate: a split prefill of exactly a candidate size proves the
    # plugin's chunk was applied (stock would cut at 256).
    server = launch(PY, cpu_args(model, free_port(), chunk=2 * max(CANDIDATES),
                                 extra=("--enable-metrics", *CPU_DTYPE)),
                    tmp / "server.log", env=env)
    yield {"server": server, "log": log, "fault": fault}
    server.stop()


@pytest.fixture(scope="module")
def plugin_main(plugin):
    records, results = replay(plugin["server"].url, MAIN, COMPARE)
    return {"records": records, "results": results}


def read_log(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_rank(records, kind):
    out = defaultdict(list)
    for r in records:
        if r["kind"] == kind:
            out[r["rank"]].append(r)
    return out


def test_stock_server_completes_and_plugin_stays_off(stock):
    assert all(not r.rejected for r in stock["records"]), \
        [r.reject_reason for r in stock["records"] if r.rejected]
    # Unconfigured, the plugin registers nothing and says nothing (its "not configured" line is
    # INFO before SGLang sets up logging; test_live_plugin_env checks it).
    assert "ppsched:" not in stock["log"]


def test_plugin_exact_lengths_and_the_same_greedy_tokens(stock, plugin_main):
    for spec, rec, res in zip(MAIN, plugin_main["records"], plugin_main["results"], strict=True):
        assert not rec.rejected, rec.reject_reason
        assert res.completion_tokens == spec.output_tokens == len(res.output_ids)
    agreement = compare_greedy(stock["results"], plugin_main["results"], TOL_NATS)
    assert not agreement.problems, agreement.problems
    # Nearly every token was compared: a divergence is rare, and it ends only its own request.
    total = sum(s.output_tokens for s in MAIN)
    assert agreement.compared_tokens >= 0.8 * total, (agreement, total)


def test_applied_chunks_equal_decisions_on_both_ranks(plugin, plugin_main):
    records = read_log(plugin["log"])
    applied = by_rank(records, "chunk_applied")
    assert set(applied) == {0, 1} and applied[0], "no prefill batch used a decided chunk"
    key = [(r["iteration"], r["slot"], r["chunk"], r["extend_tokens"], r["requests"])
           for r in applied[0]]
    assert key == [(r["iteration"], r["slot"], r["chunk"], r["extend_tokens"], r["requests"])
                   for r in applied[1]]
    decided = {r["iteration"]: r["chunk"] for r in records if r["kind"] == "decision"}
    for r in applied[0]:
        assert decided[r["iteration"]] == r["chunk"] and r["chunk"] in CANDIDATES
        assert r["extend_tokens"] <= r["chunk"]
        if r["split"]:  # a prompt was cut: the batch used exactly the decided budget
            assert r["extend_tokens"] == r["chunk"]
    assert any(r["split"] for r in applied[0]), "no prompt was chunked; workload too small"


def test_ds_holds_happen_identically_and_held_requests_finish(plugin, plugin_main):
    if _ds_mode() == "off":
        pytest.skip("delay scheduling not in the registry yet")
    holds = by_rank(read_log(plugin["log"]), "hold_applied")
    assert holds[0], "no decode request was ever held"
    assert [(r["iteration"], r["slot"], r["held"]) for r in holds[0]] == \
        [(r["iteration"], r["slot"], r["held"]) for r in holds[1]]
    assert all(not r.rejected for r in plugin_main["records"])  # held ones finished too


def test_stage_records_name_cpu_thread_and_every_decided_hold_is_accounted(plugin, plugin_main):
    records = read_log(plugin["log"])
    starts = by_rank(records, "start")
    for rank in (0, 1):
        (start,) = starts[rank]
        # the CPU recipe runs each rank with OMP_NUM_THREADS=1: the forward is the scheduler
        # thread's CPU time
        assert start["device"] == "cpu" and start["timing"] == "cpu-thread"
        assert start["loop_slots"] == 2 and start["cuda_graphs"]["enabled"] is False
    stages = by_rank(records, "stage")
    assert stages[0] and stages[1]
    assert {r["timing"] for rank in (0, 1) for r in stages[rank]} == {"cpu-thread"}
    assert all(r["wall_ms"] >= 0.0 for rank in (0, 1) for r in stages[rank])
    assert all(r["learned"] for r in stages[0] if r["mode"] != "empty")
    print(f"stage records: rank 0 {len(stages[0])}, rank 1 {len(stages[1])}, all cpu-thread")
    if _ds_mode() == "off":
        return
    decided = {r["iteration"] for r in records
               if r["kind"] == "ds_decision" and r["hold"] and r["rank"] == 0}
    applied = {r["iteration"] for r in by_rank(records, "hold_applied")[0]}
    dropped = by_rank(records, "hold_dropped")
    assert decided == applied | {r["iteration"] for r in dropped[0]}
    assert not applied & {r["iteration"] for r in dropped[0]}
    assert [(r["iteration"], r["reason"]) for r in dropped[0]] == \
        [(r["iteration"], r["reason"]) for r in dropped[1]]
    reasons = Counter(r["reason"] for r in dropped[0])
    print(f"holds: decided {len(decided)}, applied {len(applied)}, dropped {len(dropped[0])} "
          f"{dict(reasons)}")


def test_abort_a_held_request(plugin, plugin_main):
    if _ds_mode() == "off":
        pytest.skip("delay scheduling not in the registry yet")
    server, log = plugin["server"], plugin["log"]
    ep = Endpoint("127.0.0.1", server.port)
    start = len(read_log(log))
    # 13 streams: slots of 7 and 6 sit between boundaries 4 and 8, so DS trims them.
    n, out = 13, 30
    rids = [f"held{i:02d}z" for i in range(n)]
    results = {}

    def send(i):
        spec = RequestSpec(i, 0.0, 40, out)
        results[i] = generate_stream(ep, i, prompt_ids(spec, 5), out, timeout_s=300, rid=rids[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline:
        for r in read_log(log)[start:]:
            if r["kind"] == "hold_applied" and r["rank"] == 0:
                held = [h for h in r["held"] if h in rids]
                if held:
                    victim = held[0]
                    break
        time.sleep(0.05)
    assert victim is not None, "no request of the batch was held"
    req = urllib.request.Request(f"{server.url}/abort_request", method="POST",
                                 data=json.dumps({"rid": victim}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()
    for t in threads:
        t.join(300)
    vi = rids.index(victim)
    assert results[vi].completion_tokens < out and results[vi].finish_reason in ("abort", "")
    for i, res in results.items():
        if i != vi:
            assert res.completion_tokens == out and not res.error, (i, res.error)
    assert server.healthy()


def test_soak_burst_with_client_aborts(plugin):
    """The soak at CI size: 200 requests, a burst, 10% closed mid-stream; nothing lost."""
    specs = workload(200, seed=9, burst_s=20.0, max_prompt=200, max_out=16)
    burst = [RequestSpec(s.req_id, 5.0 if 60 <= s.req_id < 100 else s.arrival_s,
                         s.prompt_tokens, s.output_tokens) for s in specs]
    burst.sort(key=lambda s: s.arrival_s)
    aborted = frozenset(range(0, 200, 10))
    records, results = replay(plugin["server"].url, burst,
                              ReplayOptions(concurrency=64, seed=3, abort_ids=aborted,
                                            abort_after_tokens=2))
    lost = [r for r in records if r.rejected and r.req_id not in aborted]
    completed = sum(not r.rejected for r in records)
    print(f"soak: sent {len(records)} completed {completed} aborted {len(aborted)} "
          f"lost {len(lost)}")
    assert not lost, [(r.req_id, r.reject_reason) for r in lost]
    for spec, res in zip(burst, results, strict=True):
        if spec.req_id not in aborted:
            assert res.completion_tokens == spec.output_tokens
    assert plugin["server"].healthy()


def test_cli_live_replay_writes_simulator_outputs(plugin, tmp_path):
    from ppsched.cli.main import main

    out = tmp_path / "live"
    code = main(["run", "--engine", plugin["server"].url, "--workload", "synthetic-decode",
                 "--rate", "20", "--num-requests", "6", "--max-context", "80",
                 "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["live_failed"] == 0 and summary["completed"] == 6
    assert (out / "requests.csv").is_file()


def test_idle_without_kv_leak(plugin):
    time.sleep(3.0)  # idle: SGLang's idle self-check runs and raises on a leak
    server = plugin["server"]
    assert server.healthy()
    text = server.log_text().lower()
    assert "leak" not in text and "traceback" not in text


def test_counters_next_to_sglang_metrics(plugin):
    text = urllib.request.urlopen(plugin["server"].url + "/metrics", timeout=30).read().decode()
    for rank in (0, 1):
        assert f'ppsched_chunk_applied_total{{pp_rank="{rank}"}}' in text
        assert f'ppsched_hold_turns_total{{pp_rank="{rank}"}}' in text or _ds_mode() == "off"
    assert 'ppsched_decisions_total{pp_rank="0"}' in text


def test_injected_fault_falls_back_and_keeps_serving(plugin):
    plugin["fault"].write_text("now")
    specs = workload(12, seed=4)
    records, _ = replay(plugin["server"].url, specs, ReplayOptions(concurrency=12, seed=11))
    assert all(not r.rejected for r in records), [r.reject_reason for r in records]
    falls = by_rank(read_log(plugin["log"]), "fallback")
    assert set(falls) == {0, 1}
    assert "InjectedFault" in falls[0][0]["error"]
    text = plugin["server"].log_text()
    assert text.count("falling back to the launch chunk size") == 1  # logged once
    assert plugin["server"].healthy()
