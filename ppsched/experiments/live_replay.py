"""``ppsched run --engine http://HOST:PORT``: replay a workload against a live SGLang server.

Sends each request at its arrival time (bounded concurrency: a request waits for a free
connection), streams ``/generate`` with exact prompt token ids, and writes the simulator's files
(summary.json, requests.csv) plus outputs.jsonl (the generated token ids). Times are seconds
from the replay's start. TTFT/E2E start at the scheduled arrival (``ttft_from="arrival"``: the
wait for a free connection counts, as for a real user) or at the send (``"send"``: as
``sglang.bench_serving`` measures). A progress line goes to stderr; Ctrl-C, SIGTERM or
``--time-limit`` stop the run early and still write every file, unfinished requests recorded as
failed with the reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import math
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestRecord, RequestSpec
from ppsched.core.slo import PAPER_TPOT_MS, PAPER_TTFT_MS, Slo
from ppsched.experiments.live_summary import TTFT_FROM, live_figures, pooled_itl_ms, report_lines
from ppsched.experiments.server_limits import server_limits
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
    ttft_from: str = "arrival"
    time_limit_s: float | None = None  # stop the whole run after this long (partial results)
    progress_every_s: float | None = None  # None: no progress line
    top_logprobs: int = 0  # > 0: record that many (token, logprob) pairs per output token

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise UserError(f"concurrency={self.concurrency}: expected an int >= 1")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise UserError(f"request timeout {self.timeout_s!r}: expected seconds > 0")
        if self.ttft_from not in TTFT_FROM:
            raise UserError(f"--ttft-from {self.ttft_from!r}: expected one of "
                            f"{', '.join(TTFT_FROM)}")
        if self.time_limit_s is not None and not (math.isfinite(self.time_limit_s)
                                                  and self.time_limit_s > 0):
            raise UserError(f"--time-limit {self.time_limit_s!r}: expected seconds > 0")
        if self.top_logprobs < 0:
            raise UserError(f"top_logprobs={self.top_logprobs}: expected an int >= 0")


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    records: list[RequestRecord]
    results: list[StreamResult]
    wall_s: float
    interrupted: str | None  # why the run stopped early; None: it ran to the end


class _Cancel:
    """Open sockets of the replay; ``stop`` shuts them down so every stream ends now."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._socks: set = set()
        self._lock = threading.Lock()

    def register(self, sock) -> bool:
        with self._lock:
            if self.reason is not None:
                return False
            self._socks.add(sock)
            return True

    def unregister(self, sock) -> None:
        with self._lock:
            self._socks.discard(sock)

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            socks = list(self._socks)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def prompt_ids(spec: RequestSpec, seed: int) -> list[int]:
    """Deterministic token ids for a request (same seed and id → same prompt)."""
    rng = np.random.default_rng([seed, spec.req_id])
    return rng.integers(TOKEN_LOW, TOKEN_HIGH, size=spec.prompt_tokens).tolist()


async def _replay(ep: Endpoint, specs: Sequence[RequestSpec], opts: ReplayOptions,
                  cancel: _Cancel, t0: float) -> list[StreamResult]:
    sem = asyncio.Semaphore(opts.concurrency)
    counts = {"sent": 0, "done": 0, "failed": 0}

    async def one(spec: RequestSpec) -> StreamResult:
        while cancel.reason is None and (delay := t0 + spec.arrival_s - time.perf_counter()) > 0:
            await asyncio.sleep(min(delay, 0.25))
        async with sem:
            if cancel.reason is not None:
                return StreamResult(spec.req_id, error="not sent")
            counts["sent"] += 1
            abort = opts.abort_after_tokens if spec.req_id in opts.abort_ids else None
            res = await asyncio.to_thread(
                generate_stream, ep, spec.req_id, prompt_ids(spec, opts.seed),
                spec.output_tokens, timeout_s=opts.timeout_s, abort_after=abort, cancel=cancel,
                top_logprobs=opts.top_logprobs)
        counts["done"] += 1
        counts["failed"] += bool(res.error or res.completion_tokens != spec.output_tokens)
        return res

    async def progress() -> None:
        while True:
            await asyncio.sleep(opts.progress_every_s)
            print(f"progress   {counts['done']}/{len(specs)} finished ({counts['failed']} "
                  f"failed), {counts['sent'] - counts['done']} in flight, "
                  f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

    tasks = [asyncio.ensure_future(one(s)) for s in specs]
    ticker = asyncio.ensure_future(progress()) if opts.progress_every_s else None
    try:
        if opts.time_limit_s is not None:
            _, pending = await asyncio.wait(tasks, timeout=opts.time_limit_s)
            if pending:
                cancel.stop(f"--time-limit {opts.time_limit_s:g} s reached")
        return list(await asyncio.gather(*tasks))
    finally:
        if ticker is not None:
            ticker.cancel()


def replay_run(url: str, specs: Sequence[RequestSpec], opts: ReplayOptions | None = None
               ) -> ReplayOutcome:
    """Replay specs against the server at url; Ctrl-C (KeyboardInterrupt) ends it early with
    every result so far."""
    opts = opts or ReplayOptions()
    ep = Endpoint.parse(url)
    check_server(ep)
    cancel = _Cancel()
    loop = asyncio.new_event_loop()
    # Enough threads for the concurrency bound (the default pool is min(32, cpus + 4)).
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(opts.concurrency, len(specs)) or 1)
    loop.set_default_executor(pool)
    t0 = time.perf_counter()
    main = loop.create_task(_replay(ep, specs, opts, cancel, t0))
    try:
        try:
            results = loop.run_until_complete(main)
        except KeyboardInterrupt:
            cancel.stop("interrupted (Ctrl-C or SIGTERM)")
            results = loop.run_until_complete(main)  # the streams end at once now
    finally:
        loop.close()
        pool.shutdown(wait=False)
    wall = time.perf_counter() - t0
    records = [to_record(spec, res, t0, opts.ttft_from, cancel.reason)
               for spec, res in zip(specs, results, strict=True)]
    return ReplayOutcome(records, results, wall, cancel.reason)


def replay(url: str, specs: Sequence[RequestSpec], opts: ReplayOptions | None = None
           ) -> tuple[list[RequestRecord], list[StreamResult]]:
    """Replay specs against the server at url; (records, raw stream results), in spec order."""
    out = replay_run(url, specs, opts)
    return out.records, out.results


def to_record(spec: RequestSpec, res: StreamResult, t0: float, ttft_from: str = "arrival",
              stopped: str | None = None) -> RequestRecord:
    """A finished stream with exactly the requested tokens is complete; anything else is not."""
    ok = (not res.error and not res.aborted_by_client
          and res.completion_tokens == spec.output_tokens and len(res.token_s) > 0)
    if not ok:
        if res.aborted_by_client:
            reason = "aborted by client"
        elif stopped is not None:
            reason = f"unfinished: {stopped}"
        else:
            reason = res.error or f"got {res.completion_tokens} of {spec.output_tokens} tokens"
        return RequestRecord(spec.req_id, spec.arrival_s, spec.prompt_tokens, spec.output_tokens,
                             rejected=True, reject_reason=reason)
    # "send": the clock starts when the request went out (bench_serving's definition); the
    # record keeps the scheduled arrival, so its token times shift by the wait for a connection.
    clock_start = t0 + spec.arrival_s if ttft_from == "arrival" else res.sent_s
    first = spec.arrival_s + (res.token_s[0] - clock_start)
    last = spec.arrival_s + (res.token_s[-1] - clock_start)
    return RequestRecord(spec.req_id, spec.arrival_s, spec.prompt_tokens, spec.output_tokens,
                         first_token_s=first, finish_s=last)


def _sigterm_as_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def run_live(args) -> int:
    """Entry from ``ppsched run --engine http://...`` (cmd_run dispatches here)."""
    from ppsched.experiments.outputs import write_run_outputs
    from ppsched.metrics import summarize
    from ppsched.traces import workload_from_args

    ep = Endpoint.parse(args.engine)
    opts = ReplayOptions(concurrency=int(getattr(args, "concurrency", DEFAULT_CONCURRENCY)),
                         timeout_s=float(getattr(args, "request_timeout", DEFAULT_TIMEOUT_S)),
                         seed=int(getattr(args, "seed", 0) or 0),
                         ttft_from=getattr(args, "ttft_from", "arrival"),
                         time_limit_s=getattr(args, "time_limit", None),
                         progress_every_s=float(getattr(args, "progress_every", 5.0)) or None)
    slo = Slo(float(getattr(args, "slo_ttft_ms", PAPER_TTFT_MS)),
              float(getattr(args, "slo_tpot_ms", PAPER_TPOT_MS)))
    check_server(ep)  # fail fast, before reading traces
    context_note = "from --max-context"
    args.max_prompt = None
    if getattr(args, "max_context", None) is None:
        limits = server_limits(ep)
        if limits is None:
            context_note = "none (the server did not say; requests may exceed it)"
        else:
            args.max_context, args.max_prompt = limits.max_total_tokens, limits.max_prompt_tokens
            context_note = (f"prompt + output <= {limits.max_total_tokens}, prompt <= "
                            f"{limits.max_prompt_tokens}, from {limits.source}")
    workload = workload_from_args(args)
    print(f"live replay {ep.url}: {len(workload.requests)} requests, context cap "
          f"{context_note}; Ctrl-C stops early and keeps the results", file=sys.stderr,
          flush=True)
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        outcome = replay_run(ep.url, workload.requests, opts)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    records, results = outcome.records, outcome.results
    summary = dict(summarize(records, slo))
    done_times = [res.token_s for rec, res in zip(records, results, strict=True)
                  if not rec.rejected]
    summary.update(live_figures(records, pooled_itl_ms(done_times), outcome.wall_s))
    failed = [r for r in records if r.rejected]
    summary.update(workload=workload.describe(), engine=ep.url, live_wall_s=outcome.wall_s,
                   live_failed=len(failed), live_interrupted=outcome.interrupted,
                   live_ttft_from=opts.ttft_from, live_max_context=args.max_context,
                   live_max_prompt=args.max_prompt,
                   live_failures=sorted({r.reject_reason for r in failed})[:20])
    config = {"engine": ep.url, "concurrency": opts.concurrency, "timeout_s": opts.timeout_s,
              "seed": opts.seed, "slo_ttft_ms": slo.ttft_ms, "slo_tpot_ms": slo.tpot_ms,
              "ttft_from": opts.ttft_from, "time_limit_s": opts.time_limit_s,
              "max_context": args.max_context, "max_prompt": args.max_prompt}
    written = write_run_outputs(args.out, records, summary, config)
    with (Path(args.out) / "outputs.jsonl").open("w", encoding="utf-8") as fh:
        for res in results:
            fh.write(json.dumps({"req_id": res.req_id, "output_ids": res.output_ids,
                                 "completion_tokens": res.completion_tokens}) + "\n")
    for line in report_lines(summary, url=ep.url, wall_s=outcome.wall_s,
                             ttft_from=opts.ttft_from, interrupted=outcome.interrupted):
        print(line)
    print(f"outputs    {written['summary'].parent}")
    if outcome.interrupted:
        return 130
    return 0 if not failed else 1
