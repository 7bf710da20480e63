"""Real SGLang on CPU: a plugin that cannot enable on one PP rank turns itself off on every rank
(start-up agreement), says so once, and the server serves stock; the gauge and counters are on
/metrics from start-up.

One server, shared by the assertions. Ports 32000-32999.
"""

from __future__ import annotations

import json

import pytest
from live_support import cleared_ppsched_env, metric, serve_replay_scrape

from ppsched.core.requests import RequestSpec
from ppsched.sglang_patch.cpu_server import sglang_python
from ppsched.sglang_patch.metrics import COUNTERS

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

SPECS = [RequestSpec(i, 0.05 * i, 40 + 30 * i, 6) for i in range(8)]


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fail-rank1")
    log = tmp / "decisions.jsonl"
    env = {**cleared_ppsched_env(),
           "PPSCHED_CHUNK": "py:ppsched.sglang_patch.testing:fail_on_rank_chunk",
           "PPSCHED_TEST_FAIL_RANK": "1", "PPSCHED_DS": "on", "PPSCHED_DECISION_LOG": str(log),
           "PPSCHED_CANDIDATES": "32,64"}
    for run in serve_replay_scrape(PY, tmp, env, SPECS, range(32000, 33000), concurrency=8):
        yield {**run, "log": log}


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
