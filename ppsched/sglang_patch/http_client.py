"""Minimal streaming client for SGLang's ``/generate`` (stdlib ``http.client``, one thread each).

Requests carry exact prompt token ids, ``max_new_tokens`` and ``ignore_eos`` so every one ends
at exactly its length; the stream times every token. A client-side abort closes the connection
after ``abort_after`` tokens (SGLang then aborts the request: the client disconnected).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ppsched.core.errors import UserError


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url.strip())
        if parts.scheme != "http" or not parts.hostname:
            raise UserError(f"--engine {url!r}: expected http://HOST:PORT")
        try:
            port = parts.port or 80
        except ValueError:
            raise UserError(f"--engine {url!r}: bad port; expected http://HOST:PORT") from None
        return cls(parts.hostname, port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(slots=True)
class StreamResult:
    req_id: int
    sent_s: float = float("nan")  # perf_counter seconds
    token_s: list[float] = field(default_factory=list)  # when each token was seen
    output_ids: list[int] = field(default_factory=list)
    # Per output token, when asked for: the top (token id, logprob) pairs, best first.
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    completion_tokens: int = 0
    finish_reason: str = ""
    error: str = ""
    aborted_by_client: bool = False


def get_json(ep: Endpoint, path: str, timeout_s: float = 5.0) -> dict:
    conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise OSError(f"GET {path}: HTTP {resp.status}")
        return json.loads(body) if body.strip() else {}
    finally:
        conn.close()


def check_server(ep: Endpoint, timeout_s: float = 5.0) -> None:
    """UserError unless an SGLang server answers /health at ep."""
    try:
        conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout_s)
        conn.request("GET", "/health")
        status = conn.getresponse().status
        conn.close()
    except (OSError, http.client.HTTPException) as exc:
        raise UserError(f"--engine {ep.url}: no SGLang server answers there ({exc}); start one "
                        "(e.g. `ppsched serve ... -- --model-path ...`) or fix HOST:PORT") from None
    if status != 200:
        raise UserError(f"--engine {ep.url}: /health answered HTTP {status}; expected 200")


def generate_stream(ep: Endpoint, req_id: int, input_ids: list[int], max_new_tokens: int, *,
                    timeout_s: float, abort_after: int | None = None, rid: str | None = None,
                    cancel=None, top_logprobs: int = 0) -> StreamResult:
    """``cancel`` (optional): has ``register(sock) -> bool`` (False: do not send) and
    ``unregister(sock)``; it may shut the socket down to end a stream early. ``top_logprobs``
    > 0 asks SGLang for that many (token, logprob) pairs per output token."""
    res = StreamResult(req_id)
    payload = {"input_ids": input_ids, "stream": True,
               "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True,
                                   "temperature": 0.0}}
    if rid is not None:
        payload["rid"] = rid
    if top_logprobs > 0:
        payload.update(return_logprob=True, top_logprobs_num=top_logprobs)
    conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout_s)
    sock = None
    deadline = time.perf_counter() + timeout_s
    try:
        if cancel is not None:
            # Register the socket itself: http.client drops conn.sock once a response that
            # ends with the connection takes it over, and a stream is such a response.
            conn.connect()
            sock = conn.sock
            if not cancel.register(sock):
                res.error = "not sent"
                return res
        res.sent_s = time.perf_counter()
        conn.request("POST", "/generate", body=json.dumps(payload),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            res.error = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return res
        while True:
            if time.perf_counter() > deadline:
                res.error = f"timeout after {timeout_s:g} s"
                return res
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                res.error = str(chunk["error"])[:300]
                return res
            _take_chunk(res, chunk, time.perf_counter())
            if abort_after is not None and res.completion_tokens >= abort_after:
                res.aborted_by_client = True
                return res
    except (TimeoutError, OSError, http.client.HTTPException, json.JSONDecodeError) as exc:
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        if sock is not None:
            cancel.unregister(sock)
        conn.close()
    return res


def _merge(seen: list, new: list, completion_tokens: int) -> list:
    """SGLang streams per-token lists cumulatively unless incremental streaming is on: a list as
    long as the tokens so far replaces what was seen, a shorter one extends it."""
    return new if len(new) >= len(seen) and completion_tokens == len(new) else seen + new


def _take_chunk(res: StreamResult, chunk: dict, now: float) -> None:
    meta = chunk.get("meta_info", {})
    n = int(meta.get("completion_tokens", 0))
    ids = chunk.get("output_ids")
    if ids is not None:
        res.output_ids = _merge(res.output_ids, list(ids), n)
    tops = meta.get("output_top_logprobs")
    if tops:  # SGLang's entries are [logprob, token id, text]
        res.top_logprobs = _merge(res.top_logprobs,
                                  [[(int(t[1]), float(t[0])) for t in top] for top in tops], n)
    while len(res.token_s) < n:
        res.token_s.append(now)
    res.completion_tokens = max(res.completion_tokens, n)
    reason = meta.get("finish_reason")
    if reason:
        res.finish_reason = reason.get("type", str(reason)) if isinstance(reason, dict) \
            else str(reason)
