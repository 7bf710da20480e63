"""SGLang with the plugin on this machine's GPUs: a short replay, then the decision log's verdict.

The model is made here (``scripts/make_tiny_qwen2.py --shape qwen2.5-0.5b``: Qwen2.5-0.5B's
layer shapes, random weights, no download). PP = the number of GPUs (1 allowed; DS needs PP ≥ 2
and is off at PP 1). Predictive chunking learns from the stage records; the verdict:
every stage record is ``cuda-event``; the controller learned from them; with decode CUDA graphs
captured, DS's boundaries include the graph cap; every request completed.
"""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsched.core.requests import RequestSpec
from ppsched.sglang_patch.cpu_server import REPO, free_port, launch

CANDIDATES = tuple(range(256, 2049, 256))  # the user's chunk choices; 2048 = launch chunk
CONTEXT = 4096


@dataclass(frozen=True, slots=True)
class ServeOptions:
    python: Path  # the GPU SGLang install's python (ppsched installed there, -e is fine)
    gpus: int
    requests: int = 48
    start_timeout_s: float = 600.0
    request_timeout_s: float = 120.0
    profile: Path | None = None  # ALP profile fitted on this GPU (gpu-check's profile step)


def make_model(python: Path, out: Path) -> Path:
    subprocess.run([str(python), str(REPO / "scripts" / "make_tiny_qwen2.py"), str(out),
                    "--shape", "qwen2.5-0.5b", "--dtype", "bfloat16", "--context", str(CONTEXT)],
                   check=True, capture_output=True, timeout=600)
    return out


def short_workload(n: int, seed: int = 7) -> list[RequestSpec]:
    """Prompts of 64..1500 tokens, 16..128 outputs, arriving over 4 s: prefills get chunked
    (launch chunk 2048, several prompts per batch), decodes pile up past small graph sizes."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, 4.0, n))
    prompts = rng.integers(64, 1500, n)
    outs = rng.integers(16, 128, n)
    return [RequestSpec(i, float(a), int(p), int(o))
            for i, (a, p, o) in enumerate(zip(arrivals, prompts, outs, strict=True))]


def server_setup(opts: ServeOptions, model: Path, log: Path, port: int
                 ) -> tuple[list[str], dict[str, str]]:
    """(launch_server args, PPSCHED_* environment) of the check's server."""
    env = {"PPSCHED_CHUNK": "predictive", "PPSCHED_DS": "on" if opts.gpus >= 2 else "off",
           "PPSCHED_CANDIDATES": ",".join(map(str, CANDIDATES)),
           "PPSCHED_DECISION_LOG": str(log)}
    if opts.profile is not None:
        env["PPSCHED_PROFILE"] = str(opts.profile)
    args = ["--model-path", str(model), "--skip-tokenizer-init", "--pp-size", str(opts.gpus),
            "--tp-size", "1", "--chunked-prefill-size", str(max(CANDIDATES)),
            "--context-length", str(CONTEXT), "--mem-fraction-static", "0.8",
            "--max-running-requests", "128", "--host", "127.0.0.1", "--port", str(port)]
    return args, env


def verdict(summary: dict[str, Any], completed: int, requests: int, ds_on: bool
            ) -> tuple[bool, list[str]]:
    """(passed, problems) of a run from its decision-log summary (alp_replay.timing_summary)."""
    problems = []
    if completed != requests:
        problems.append(f"{requests - completed} of {requests} requests did not complete")
    sources = {key.split(":", 1)[1] for key in summary["stages"]}
    if sources != {"cuda-event"}:
        problems.append(f"stage timing sources {sorted(sources)}: expected only cuda-event")
    if summary["learned"] == 0:
        problems.append("the controller learned from no stage")
    for start in summary["starts"]:
        graphs = start.get("cuda_graphs") or {}
        if ds_on and graphs.get("enabled") and graphs.get("cap") not in \
                (start.get("ds_boundaries") or ()):
            problems.append(f"rank {start['rank']}: graph cap {graphs.get('cap')} not among DS "
                            f"boundaries {start.get('ds_boundaries')}")
    return not problems, problems


def run_server_replay(opts: ServeOptions, work: Path) -> dict[str, Any]:
    """Make the model, serve it with the plugin, replay; the raw facts for the verdict."""
    from ppsched.experiments.live_replay import ReplayOptions, replay

    model = make_model(opts.python, work / "model")
    log = work / "decisions.jsonl"
    args, env = server_setup(opts, model, log, free_port())
    os.environ["PPSCHED_LIVE_GPU"] = "1"  # cpu_server.launch: no CPU-engine variables
    server = launch(opts.python, args, work / "server.log", env=env,
                    timeout_s=opts.start_timeout_s)
    try:
        records, _ = replay(server.url, short_workload(opts.requests),
                            ReplayOptions(concurrency=64, timeout_s=opts.request_timeout_s))
    finally:
        server.stop()
    done = [r for r in records if not r.rejected]
    ttft = [r.ttft_ms for r in done if math.isfinite(r.ttft_ms)]
    return {"log": log, "completed": len(done), "requests": len(records),
            "ds_on": env["PPSCHED_DS"] == "on", "pp_size": opts.gpus,
            "median_ttft_ms": float(np.median(ttft)) if ttft else None,
            "failures": sorted({r.reject_reason for r in records if r.rejected})[:5]}
