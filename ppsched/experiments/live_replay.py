"""``ppsched run --engine http://HOST:PORT``: replay a workload against a live SGLang server.

Sends each request at its arrival time (bounded concurrency: a request waits for a free
connection, and its TTFT includes that wait, as a real client's would), streams ``/generate``
with exact prompt token ids, and writes the simulator's files (summary.json, requests.csv) plus
outputs.jsonl (the generated token ids). Times are seconds from the replay's start.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord, RequestSpec
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS, Slo
from ppsched.sglang_patch.http_client import (
    Endpoint,
    StreamResult,
    check_server,
    generate_stream,
)

DEFAULT_CONCURRENCY = 256
DEFAULT_TIMEOUT_S = 600.0
TOKEN_LOW, TOKEN_HIGH = 10, 1000  # prompt ids drawn here: valid for any vocab >= 1000


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    concurrency: int = DEFAULT_CONCURRENCY
    timeout_s: float = DEFAULT_TIMEOUT_S
    seed: int = 0
    abort_ids: frozenset[int] = frozenset()  # close these streams after a few tokens
    abort_after_tokens: int = 2

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise UserError(f"concurrency={self.concurrency}: expected an int >= 1")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise UserError(f"request timeout {self.timeout_s!r}: expected seconds > 0")


def prompt_ids(spec: RequestSpec, seed: int) -> list[int]:
    """Deterministic token ids for a request (same seed and id → same prompt)."""
    rng = np.random.default_rng([seed, spec.req_id])
    return rng.integers(TOKEN_LOW, TOKEN_HIGH, size=spec.prompt_tokens).tolist()


async def _replay(ep: Endpoint, specs: Sequence[RequestSpec], opts: ReplayOptions
                  ) -> tuple[float, list[StreamResult]]:
    sem = asyncio.Semaphore(opts.concurrency)
    t0 = time.perf_counter()

    async def one(spec: RequestSpec) -> StreamResult:
        delay = t0 + spec.arrival_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        async with sem:
            abort = opts.abort_after_tokens if spec.req_id in opts.abort_ids else None
            return await asyncio.to_thread(
                generate_stream, ep, spec.req_id, prompt_ids(spec, opts.seed),
                spec.output_tokens, timeout_s=opts.timeout_s, abort_after=abort)

    results = await asyncio.gather(*(one(s) for s in specs))
    return t0, list(results)


def replay(url: str, specs: Sequence[RequestSpec], opts: ReplayOptions | None = None
           ) -> tuple[list[RequestRecord], list[StreamResult]]:
    """Replay specs against the server at url; (records, raw stream results), in spec order."""
    opts = opts or ReplayOptions()
    ep = Endpoint.parse(url)
    check_server(ep)
    import concurrent.futures

    loop = asyncio.new_event_loop()
    # Enough threads for the concurrency bound (the default pool is min(32, cpus + 4)).
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(
        max_workers=min(opts.concurrency, len(specs)) or 1))
    try:
        t0, results = loop.run_until_complete(_replay(ep, specs, opts))
    finally:
        loop.close()
    return [to_record(spec, res, t0) for spec, res in zip(specs, results, strict=True)], results


def to_record(spec: RequestSpec, res: StreamResult, t0: float) -> RequestRecord:
    """A finished stream with exactly the requested tokens is complete; anything else is not."""
    ok = (not res.error and not res.aborted_by_client
          and res.completion_tokens == spec.output_tokens and len(res.token_s) > 0)
    if not ok:
        reason = ("aborted by client" if res.aborted_by_client else res.error
                  or f"got {res.completion_tokens} of {spec.output_tokens} tokens")
        return RequestRecord(spec.req_id, spec.arrival_s, spec.prompt_tokens, spec.output_tokens,
                             rejected=True, reject_reason=reason)
    return RequestRecord(spec.req_id, spec.arrival_s, spec.prompt_tokens, spec.output_tokens,
                         first_token_s=res.token_s[0] - t0, finish_s=res.token_s[-1] - t0)


def run_live(args) -> int:
    """Entry from ``ppsched run --engine http://...`` (cmd_run dispatches here)."""
    from ppsched.experiments.outputs import write_run_outputs
    from ppsched.metrics import summarize
    from ppsched.traces import workload_from_args

    ep = Endpoint.parse(args.engine)
    opts = ReplayOptions(concurrency=int(getattr(args, "concurrency", DEFAULT_CONCURRENCY)),
                         timeout_s=float(getattr(args, "request_timeout", DEFAULT_TIMEOUT_S)),
                         seed=int(getattr(args, "seed", 0) or 0))
    slo = Slo(float(getattr(args, "slo_ttft_ms", PAPER_TTFT_MS)),
              float(getattr(args, "slo_tpot_ms", PAPER_TPOT_MS)))
    check_server(ep)  # fail fast, before reading traces
    workload = workload_from_args(args)
    wall0 = time.perf_counter()
    records, results = replay(ep.url, workload.requests, opts)
    wall = time.perf_counter() - wall0
    summary = dict(summarize(records, slo))
    failed = [r for r in records if r.rejected]
    summary.update(workload=workload.describe(), engine=ep.url, live_wall_s=wall,
                   live_failed=len(failed),
                   live_failures=sorted({r.reject_reason for r in failed})[:20])
    config = {"engine": ep.url, "concurrency": opts.concurrency, "timeout_s": opts.timeout_s,
              "seed": opts.seed, "slo_ttft_ms": slo.ttft_ms, "slo_tpot_ms": slo.tpot_ms}
    written = write_run_outputs(args.out, records, summary, config)
    with (Path(args.out) / "outputs.jsonl").open("w", encoding="utf-8") as fh:
        for res in results:
            fh.write(json.dumps({"req_id": res.req_id, "output_ids": res.output_ids,
                                 "completion_tokens": res.completion_tokens}) + "\n")
    done = len(records) - len(failed)
    print(f"live run   {ep.url}: {len(records)} requests, {done} completed with exact length, "
          f"{len(failed)} failed, {wall:.1f} s wall")
    print(f"outputs    {written['summary'].parent}")
    return 0 if not failed else 1
