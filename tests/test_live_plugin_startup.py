"""Real SGLang on CPU: a plugin that cannot enable on one PP rank turns itself off on every rank
(start-up agreement), says so once, and the server serves stock; the gauge and counters are on
/metrics from start-up (issue 16).

One server, shared by the assertions. Ports 32000-32999.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request

import pytest

from ppsched.core.requests import RequestSpec
from ppsched.experiments.live_replay import ReplayOptions, replay
from ppsched.sglang_patch.cpu_server import (
    cpu_args,
    free_port,
    launch,
    make_tiny_model,
    sglang_python,
)
from ppsched.sglang_patch.metrics import COUNTERS

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

SPECS = [RequestSpec(i, 0.05 * i, 40 + 30 * i, 6) for i in range(8)]


def _clean_env() -> dict[str, str]:
    return {k: "" for k in os.environ if k.startswith("PPSCHED_")}


def metric(text: str, name: str, rank: int) -> float | None:
    m = re.search(rf'^{name}\{{pp_rank="{rank}"\}} ([0-9.e+-]+)$', text, re.M)
    return float(m.group(1)) if m else None


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fail-rank1")
    model = os.environ.get("PPSCHED_LIVE_MODEL") or make_tiny_model(PY, tmp / "tiny")
    log = tmp / "decisions.jsonl"
    env = {**_clean_env(), "PPSCHED_CHUNK": "py:ppsched.sglang_patch.testing:fail_on_rank_chunk",
           "PPSCHED_TEST_FAIL_RANK": "1", "PPSCHED_DS": "on", "PPSCHED_DECISION_LOG": str(log),
           "PPSCHED_CANDIDATES": "32,64"}
    server = launch(PY, cpu_args(model, free_port(32000, 32999), chunk=64,
                                 extra=("--enable-metrics",)), tmp / "server.log", env=env)
    try:
        records, _ = replay(server.url, SPECS, ReplayOptions(concurrency=8))
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
        yield {"server": server, "records": records, "metrics": metrics, "log": log,
               "healthy": server.healthy()}
    finally:
        server.stop()


def test_server_keeps_serving_stock(failing):
    assert failing["healthy"]
    assert all(not r.rejected for r in failing["records"]), \
        [r.reject_reason for r in failing["records"] if r.rejected]
    records = [json.loads(x) for x in failing["log"].read_text().splitlines()]
    kinds = {r["kind"] for r in records}
    assert not kinds & {"decision", "chunk_applied", "hold_applied"}, kinds  # nothing applied
    off = [r for r in records if r["kind"] == "disabled"]
    assert off and "injected start-up failure on PP rank 1" in off[0]["reason"]


def test_one_warning_line_names_the_cause(failing):
    text = failing["server"].log_text()
    warnings = [line for line in text.splitlines() if "ppsched: plugin OFF on every rank" in line]
    assert len(warnings) == 1, [line for line in text.splitlines() if "ppsched" in line]
    assert "injected start-up failure on PP rank 1" in warnings[0]
    assert "Traceback" not in text


def test_gauge_reads_zero_on_every_rank_and_counters_exist_at_zero(failing):
    text = failing["metrics"]
    for rank in (0, 1):
        assert metric(text, "ppsched_enabled", rank) == 0.0, rank
    for name in COUNTERS:  # rank 0 enabled locally: its series exist from start-up at 0
        assert metric(text, f"ppsched_{name}_total", 0) == 0.0, name
