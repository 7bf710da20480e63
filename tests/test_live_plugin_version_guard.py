"""Real SGLang on CPU presenting another version: the version guard keeps the plugin off on every
rank, says why, and the server serves stock (the guard's off path on a running server).

The installed SGLang 0.5.23 is made to report 0.5.99 the way another install would, through
``importlib.metadata.version`` (a ``sitecustomize`` on the server's PYTHONPATH, loaded by every
process SGLang starts); the plugin itself is untouched. One server, shared by the assertions.
Ports 34000-34999.
"""

from __future__ import annotations

import json
import os

import pytest
from live_support import cleared_ppsched_env, metric, serve_replay_scrape

from ppsched.core.requests import RequestSpec
from ppsched.sglang_patch.cpu_server import sglang_python

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


@pytest.fixture(scope="module")
def other_version(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("other-version")
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp / "decisions.jsonl"
    path = os.pathsep.join(p for p in (str(tmp / "site"), os.environ.get("PYTHONPATH")) if p)
    env = {**cleared_ppsched_env(), "PPSCHED_CHUNK": "predictive",
           "PPSCHED_CANDIDATES": "32,64", "PPSCHED_DS": "on",
           "PPSCHED_DECISION_LOG": str(log), "PYTHONPATH": path}
    for run in serve_replay_scrape(PY, tmp, env, SPECS, range(31000, 32000), concurrency=6):
        yield {**run, "log": log}


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
