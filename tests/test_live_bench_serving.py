"""SGLang's own client (``python -m sglang.bench_serving --backend sglang --dataset-name
random-ids``, offline) against the plugin server on CPU: no failures, real TTFT/ITL (the model
gets an offline tokenizer, so the server streams text), the plugin acted, and its Prometheus
counters equal what its decision log records.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from collections import Counter

import pytest

from ppsched.sglang_patch.cpu_server import (
    REPO,
    cpu_args,
    free_port,
    launch,
    make_tiny_model,
    sglang_python,
)

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None or os.environ.get("PPSCHED_LIVE_GPU") == "1",
                                 reason="needs the SGLang CPU venv (scripts/setup_sglang_cpu.sh)")]

PROMPTS = 30
# Counter -> (decision-log kind, how much one record adds)
COUNTED = {"decisions": ("decision", lambda r: 1), "chunk_applied": ("chunk_applied", lambda r: 1),
           "hold_turns": ("hold_applied", lambda r: 1),
           "held_requests": ("hold_applied", lambda r: len(r["held"])),
           "stage_measurements": ("stage", lambda r: 1), "fallbacks": ("fallback", lambda r: 1)}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench-serving")
    model = make_tiny_model(PY, tmp / "tiny")
    tokenizer = tmp / "tokenizer"  # its own folder (see the script)
    subprocess.run([str(PY), "-I", str(REPO / "scripts" / "make_offline_tokenizer.py"),
                    str(tokenizer)], check=True, capture_output=True, timeout=300, cwd="/")
    log = tmp / "decisions.jsonl"
    env = {**{k: "" for k in os.environ if k.startswith("PPSCHED_")},
           "PPSCHED_CHUNK": "predictive", "PPSCHED_DS": "on", "PPSCHED_CANDIDATES": "32,64,128",
           "PPSCHED_BOUNDARY_UNIT": "4", "PPSCHED_DECISION_LOG": str(log)}
    port = free_port(32000, 32999)
    args = cpu_args(model, port, chunk=128, extra=("--enable-metrics",), tokenizer=tokenizer)
    assert "--skip-tokenizer-init" not in args  # the server tokenizes: bench_serving sees text
    server = launch(PY, args, tmp / "server.log", env=env)
    out = tmp / "bench.jsonl"
    try:
        done = subprocess.run(
            [str(PY), "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
             "--port", str(port), "--dataset-name", "random-ids", "--tokenizer", str(tokenizer),
             "--num-prompts", str(PROMPTS), "--random-input-len", "200",
             "--random-output-len", "16", "--random-range-ratio", "0.5", "--request-rate", "4",
             "--seed", "1", "--disable-tqdm", "--output-file", str(out)],
            capture_output=True, text=True, timeout=900, cwd="/",
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        # /health runs a one-token generation (a decision too): check it first, let the PP loop
        # drain, then scrape; the log is read after the server stopped.
        healthy = server.healthy()
        time.sleep(3.0)
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    records = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return {"result": result, "records": records, "metrics": metrics, "healthy": healthy,
            "stdout": done.stdout}


def test_bench_serving_no_failures_and_real_latencies(bench):
    r = bench["result"]
    assert r["completed"] == PROMPTS, bench["stdout"][-2000:]
    assert r["mean_ttft_ms"] > 0 and r["mean_itl_ms"] > 0  # not the 0 of a text-less server
    assert bench["healthy"]


def test_plugin_acted(bench):
    kinds = Counter(r["kind"] for r in bench["records"])
    assert kinds["enabled"] == 2  # both PP ranks agreed
    assert kinds["decision"] > 0 and kinds["chunk_applied"] > 0, kinds


def test_counters_equal_the_decision_log(bench):
    for counter, (kind, weight) in COUNTED.items():
        for rank in (0, 1):
            m = re.search(rf'^ppsched_{counter}_total\{{pp_rank="{rank}"\}} ([0-9.e+]+)$',
                          bench["metrics"], re.M)
            assert m is not None, (counter, rank)  # exported, even at 0
            logged = sum(weight(r) for r in bench["records"]
                         if r["kind"] == kind and r["rank"] == rank)
            assert float(m.group(1)) == logged, (counter, rank)
