"""What the live router test sends and reads: a fixed shared-prefix request sequence for
``sglang.bench_serving`` (its ``custom`` dataset), sums over Prometheus text, and a failover
probe that sends requests through the router while a replica dies.

The sequence is the one the simulated fleet replays for its in-kind check (docs/FLEET.md):
``groups`` system prompts of ``prefix_words`` words each, ``per_group`` questions per group, the
question of request i ``question_base + i`` words long, so every prompt has its own length.
bench_serving shuffles the rows (seeded by its ``--seed``); its per-request details, listed in
send order, name each request by its prompt length.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PromptRow:
    index: int
    group: int
    prefix_words: int
    question_words: int
    output_tokens: int
    text: str

    def __post_init__(self) -> None:
        for name in ("index", "group", "prefix_words", "question_words", "output_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"PromptRow.{name} {getattr(self, name)} is negative; "
                                 "expected >= 0")


@dataclass(frozen=True)
class SharedPrefixSpec:
    groups: int = 5
    per_group: int = 4
    prefix_words: int = 120
    question_base: int = 12
    output_tokens: int = 8
    vocab: int = 1024  # the offline tokenizer's words t3..t{vocab-1}
    seed: int = 7

    def __post_init__(self) -> None:
        for name in ("groups", "per_group", "prefix_words", "question_base", "output_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"SharedPrefixSpec.{name} {getattr(self, name)} must be >= 1")
        if self.vocab < 4:
            raise ValueError(f"SharedPrefixSpec.vocab {self.vocab} must be >= 4 (ids 0-2 special)")

    def rows(self) -> list[PromptRow]:
        """Request i belongs to group ``i % groups``; requests of a group share its system
        prompt (one word is one token of the offline tokenizer)."""
        rng = random.Random(self.seed)

        def words(n: int) -> str:
            return " ".join(f"t{rng.randrange(3, self.vocab)}" for _ in range(n))

        prefixes = [words(self.prefix_words) for _ in range(self.groups)]
        rows = []
        for i in range(self.groups * self.per_group):
            group = i % self.groups
            q = self.question_base + i
            rows.append(PromptRow(i, group, self.prefix_words, q, self.output_tokens,
                                  prefixes[group] + " " + words(q)))
        return rows


def write_custom_dataset(rows: list[PromptRow], path: Path) -> Path:
    """bench_serving's ``custom`` JSONL: a user turn (the prompt) and an assistant turn (its
    text is not used: ``--sharegpt-output-len`` fixes the output length)."""
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps({"conversations": [{"content": row.text},
                                                   {"content": "t3 t4 t5 t6"}]}) + "\n")
    return path


def prom_sum(text: str, name: str, **labels: str) -> float:
    """Sum of every sample of metric ``name`` whose labels include ``labels`` (0 if none)."""
    total = 0.0
    for m in re.finditer(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? ([0-9.e+-]+|NaN)$", text, re.M):
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in labels.items()) and m.group(2) != "NaN":
            total += float(m.group(2))
    return total


def scrape(port: int, path: str = "/metrics", timeout_s: float = 30.0) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read().decode()
        if resp.status != 200:
            raise RuntimeError(f"GET 127.0.0.1:{port}{path} answered {resp.status}: {body[:200]}")
        return body
    finally:
        conn.close()


def post(port: int, path: str, body: dict | None = None, timeout_s: float = 60.0
         ) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", path, body=json.dumps(body or {}),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


@dataclass(frozen=True)
class ProbeResult:
    sent_s: float  # time.time() when sent
    done_s: float
    status: int  # HTTP status; 0: no HTTP answer
    error: str


@dataclass
class FailoverProbe:
    """Sends one non-streaming /generate every ``every_s`` through the router (each on its own
    thread, so a slow answer never delays the next send) and polls the router's /metrics every
    ``poll_s``: what clients saw and what the router counted, both timed."""

    router_port: int
    metrics_port: int
    every_s: float = 0.2
    poll_s: float = 0.1
    prompt_ids: tuple[int, ...] = tuple(range(3, 43))
    max_new_tokens: int = 6
    results: list[ProbeResult] = field(default_factory=list)
    polls: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _one(self) -> None:
        sent = time.time()
        body = {"input_ids": list(self.prompt_ids),
                "sampling_params": {"max_new_tokens": self.max_new_tokens, "temperature": 0,
                                    "ignore_eos": True}}
        try:
            status, text = post(self.router_port, "/generate", body, timeout_s=120)
            error = "" if status == 200 else text[:300]
        except (OSError, http.client.HTTPException) as exc:
            status, error = 0, repr(exc)
        with self._lock:
            self.results.append(ProbeResult(sent, time.time(), status, error))

    def _send_loop(self) -> None:
        while not self._stop.is_set():
            t = threading.Thread(target=self._one, daemon=True)
            t.start()
            self._threads.append(t)
            self._stop.wait(self.every_s)

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.polls.append((time.time(), scrape(self.metrics_port, timeout_s=5)))
            except (OSError, http.client.HTTPException, RuntimeError):
                pass
            self._stop.wait(self.poll_s)

    def start(self) -> None:
        """First one scrape of the router's /metrics (the baseline), then the two loops."""
        self.polls.append((time.time(), scrape(self.metrics_port, timeout_s=5)))
        for target in (self._send_loop, self._poll_loop):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, drain_s: float = 120.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + drain_s
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))
        self.polls.append((time.time(), scrape(self.metrics_port, timeout_s=5)))
