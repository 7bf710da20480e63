"""Two SGLang "nodes" on loopback (``--nnodes 2``, one PP rank each, CPU): the plugin acts
identically on both with a decision log per node; with the plugin missing on node 1 the
start-up agreement keeps node 0 off too and the server serves stock.

Each case starts node 1 (no HTTP server) then node 0 (waits for /health). Ports 32000-32999.
"""

from __future__ import annotations

import json
import os
import re
import time
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
    start,
)

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None or os.environ.get("PPSCHED_LIVE_GPU") == "1",
                                 reason="needs the SGLang CPU venv (scripts/setup_sglang_cpu.sh)")]

SPECS = [RequestSpec(i, 0.1 * i, 60 + 23 * i, 8 + i % 5) for i in range(14)]
PLUGIN = {"PPSCHED_CHUNK": "static:64", "PPSCHED_DS": "on", "PPSCHED_CANDIDATES": "32,64",
          "PPSCHED_BOUNDARY_UNIT": "2", "PPSCHED_SLO_TPOT_MS": "5000"}


def _clean_env() -> dict[str, str]:
    return {k: "" for k in os.environ if k.startswith("PPSCHED_")}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model(PY, tmp_path_factory.mktemp("tiny-2node"))


def two_nodes(model, tmp, env0: dict, env1: dict):
    """Start node 1 then node 0; returns (node0, node1) Servers (node 0 healthy)."""
    dist = free_port(32000, 32999)
    port0 = free_port(dist + 50, 32999)
    port1 = free_port(port0 + 50, 32999)

    def args(rank, port):
        return cpu_args(model, port, chunk=64, extra=(
            "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{dist}",
            "--enable-metrics"))

    bind = {"SGLANG_CPU_OMP_THREADS_BIND": "1"}
    node1 = start(PY, args(1, port1), tmp / "node1.log", env={**_clean_env(), **bind, **env1})
    try:
        node0 = launch(PY, args(0, port0), tmp / "node0.log",
                       env={**_clean_env(), "SGLANG_CPU_OMP_THREADS_BIND": "0", **env0})
    except Exception:
        node1.stop()
        raise
    return node0, node1


def read_log(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _has_kind(path, kind: str) -> bool:
    return path.is_file() and any(r["kind"] == kind for r in read_log(path))


@pytest.fixture(scope="module")
def both(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("both")
    logs = (tmp / "node0.jsonl", tmp / "node1.jsonl")
    node0, node1 = two_nodes(model, tmp, {**PLUGIN, "PPSCHED_DECISION_LOG": str(logs[0])},
                             {**PLUGIN, "PPSCHED_DECISION_LOG": str(logs[1])})
    try:
        records, _ = replay(node0.url, SPECS, ReplayOptions(concurrency=14))
        metrics = urllib.request.urlopen(node0.url + "/metrics", timeout=30).read().decode()
    finally:
        node0.stop()
        node1.stop()
    return {"records": records, "logs": [read_log(p) for p in logs], "metrics": metrics}


@pytest.fixture(scope="module")
def missing(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("missing")
    log = tmp / "node0.jsonl"
    node0, node1 = two_nodes(model, tmp, {**PLUGIN, "PPSCHED_DECISION_LOG": str(log),
                                          "PPSCHED_AGREE_TIMEOUT_S": "10"}, {})
    try:
        records, _ = replay(node0.url, SPECS, ReplayOptions(concurrency=14))
        # On a quiet box the replay can end before the agreement's 10 s timeout; the verdict
        # lands on a scheduler turn, so keep serving one small request a second until the
        # deciding rank has turned the plugin off (the server must keep serving meanwhile).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _has_kind(log, "disabled"):
            more, _ = replay(node0.url, [RequestSpec(0, 0.0, 20, 2)],
                             ReplayOptions(concurrency=1))
            records += more
            time.sleep(1.0)
        healthy = node0.healthy()
        metrics = urllib.request.urlopen(node0.url + "/metrics", timeout=30).read().decode()
    finally:
        node0.stop()
        node1.stop()
    return {"records": records, "log": read_log(log), "metrics": metrics, "healthy": healthy,
            "text": node0.log_text()}


def test_two_nodes_apply_identical_decisions_with_a_log_each(both):
    assert all(not r.rejected for r in both["records"]), \
        [r.reject_reason for r in both["records"] if r.rejected]
    log0, log1 = both["logs"]
    assert {r["rank"] for r in log0} == {0} and {r["rank"] for r in log1} == {1}
    assert any(r["kind"] == "enabled" for r in log0) and any(r["kind"] == "enabled" for r in log1)
    for kind, key in (("chunk_applied", ("iteration", "slot", "chunk", "extend_tokens")),
                      ("hold_applied", ("iteration", "slot", "held"))):
        seq0 = [tuple(str(r[k]) for k in key) for r in log0 if r["kind"] == kind]
        seq1 = [tuple(str(r[k]) for k in key) for r in log1 if r["kind"] == kind]
        assert seq0 == seq1, kind
    assert any(r["kind"] == "chunk_applied" for r in log0), "the plugin never acted"
    assert re.search(r'^ppsched_enabled\{pp_rank="0"\} 1\.0$', both["metrics"], re.M)


def test_plugin_missing_on_one_node_serves_stock(missing):
    assert missing["healthy"]
    assert all(not r.rejected for r in missing["records"])
    kinds = [r["kind"] for r in missing["log"]]
    assert "disabled" in kinds and not {"decision", "chunk_applied", "hold_applied"} & set(kinds)
    off = next(r for r in missing["log"] if r["kind"] == "disabled")
    assert "rank(s) 1 never reported" in off["reason"]
    assert re.search(r'^ppsched_enabled\{pp_rank="0"\} 0\.0$', missing["metrics"], re.M)
    lines = [x for x in missing["text"].splitlines() if "ppsched: plugin OFF on every rank" in x]
    assert len(lines) == 1
