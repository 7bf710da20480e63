"""Real SGLang on CPU presenting another version: the version guard keeps the plugin off on every
rank, says why, and the server serves stock (issue 16, the guard's off path on a running server).

The installed SGLang 0.5.23 is made to report 0.5.99 the way another install would, through
``importlib.metadata.version`` (a ``sitecustomize`` on the server's PYTHONPATH, loaded by every
process SGLang starts); the plugin itself is untouched. One server, shared by the assertions.
Ports 34000-34999.
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

PY = sglang_python()
pytestmark = [pytest.mark.live,
              pytest.mark.skipif(PY is None, reason="SGLang CPU venv absent: run "
                                 "scripts/setup_sglang_cpu.sh")]

OTHER = "0.5.99"
SPECS = [RequestSpec(i, 0.05 * i, 40 + 30 * i, 6) for i in range(6)]
SITECUSTOMIZE = f'''
import importlib.metadata as _metadata

_installed = _metadata.version


def version(name):
    return {OTHER!r} if name.lower() == "sglang" else _installed(name)


_metadata.version = version
'''


def metric(text: str, name: str, rank: int) -> float | None:
    m = re.search(rf'^{name}\{{pp_rank="{rank}"\}} ([0-9.e+-]+)$', text, re.M)
    return float(m.group(1)) if m else None


@pytest.fixture(scope="module")
def other_version(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("other-version")
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    model = os.environ.get("PPSCHED_LIVE_MODEL") or make_tiny_model(PY, tmp / "tiny")
    log = tmp / "decisions.jsonl"
    path = os.pathsep.join(p for p in (str(tmp / "site"), os.environ.get("PYTHONPATH")) if p)
    env = {**{k: "" for k in os.environ if k.startswith("PPSCHED_")},
           "PPSCHED_CHUNK": "predictive", "PPSCHED_CANDIDATES": "32,64", "PPSCHED_DS": "on",
           "PPSCHED_DECISION_LOG": str(log), "PYTHONPATH": path}
    server = launch(PY, cpu_args(model, free_port(34000, 34999), chunk=64,
                                 extra=("--enable-metrics",)), tmp / "server.log", env=env)
    try:
        records, _ = replay(server.url, SPECS, ReplayOptions(concurrency=6))
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
        yield {"server": server, "records": records, "metrics": metrics, "log": log,
               "healthy": server.healthy()}
    finally:
        server.stop()


def test_server_serves_stock(other_version):
    assert other_version["healthy"]
    assert all(not r.rejected for r in other_version["records"]), \
        [r.reject_reason for r in other_version["records"] if r.rejected]
    records = [json.loads(x) for x in other_version["log"].read_text().splitlines()]
    kinds = {r["kind"] for r in records}
    assert not kinds & {"decision", "chunk_applied", "hold_applied", "stage"}, kinds
    off = [r for r in records if r["kind"] == "disabled"]
    assert off, kinds
    assert all(f"sglang {OTHER}" in r["reason"] and "0.5.23" in r["reason"] for r in off), off


def test_the_server_log_says_why_and_how_to_force(other_version):
    lines = [line for line in other_version["server"].log_text().splitlines()
             if "ppsched: plugin OFF" in line]
    assert lines
    assert all(f"sglang {OTHER}" in line and "PPSCHED_FORCE=1" in line for line in lines), lines
    assert "Traceback" not in other_version["server"].log_text()


def test_gauge_reads_zero_on_every_rank(other_version):
    for rank in (0, 1):
        assert metric(other_version["metrics"], "ppsched_enabled", rank) == 0.0, rank
