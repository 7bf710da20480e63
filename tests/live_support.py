"""Shared by the live tests that start one plugin server, replay a few requests and read its
/metrics (startup agreement, version guard)."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

from ppsched.experiments.live_replay import ReplayOptions, replay
from ppsched.sglang_patch.cpu_server import cpu_args, free_port, launch, make_tiny_model


def metric(text: str, name: str, rank: int) -> float | None:
    """One ``name{pp_rank="rank"}`` sample of a Prometheus text page (None: absent)."""
    m = re.search(rf'^{name}\{{pp_rank="{rank}"\}} ([0-9.e+-]+)$', text, re.M)
    return float(m.group(1)) if m else None


def cleared_ppsched_env() -> dict[str, str]:
    """Every PPSCHED_* of this process emptied, so only what a test sets configures the plugin."""
    return {k: "" for k in os.environ if k.startswith("PPSCHED_")}


def serve_replay_scrape(python: Path, tmp: Path, env: dict[str, str], specs, ports: range,
                        concurrency: int):
    """Start the CPU plugin server (chunk 64, --enable-metrics), replay ``specs``, scrape
    /metrics; yields {server, records, metrics, healthy} while the server runs (a fixture's
    body: ``yield from``)."""
    model = os.environ.get("PPSCHED_LIVE_MODEL") or make_tiny_model(python, tmp / "tiny")
    server = launch(python, cpu_args(model, free_port(ports.start, ports.stop - 1), chunk=64,
                                     extra=("--enable-metrics",)), tmp / "server.log", env=env)
    try:
        records, _ = replay(server.url, specs, ReplayOptions(concurrency=concurrency))
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
        yield {"server": server, "records": records, "metrics": metrics,
               "healthy": server.healthy()}
    finally:
        server.stop()
