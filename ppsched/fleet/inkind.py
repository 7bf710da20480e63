"""The live router test's request sequence replayed through the simulated fleet.

The live sequence (``results/pinned/live_router_sequence.csv``) is 20 prompts of 132-151
tokens, each a group's 120-token system prompt plus its own question. The simulator names
prompt prefixes by block ids of ``BLOCK_TOKENS`` (512) tokens, and its prefix cache and router
match whole blocks. To keep the 120-token prefix a whole number of blocks the replay counts
``SIM_PER_LIVE_TOKEN`` (64) simulated tokens per live token: one block is 8 live tokens, the
shared prefix is exactly 15 blocks (ids of its group), the question the remaining 2-4 blocks
(ids of its own). Every figure here is given back in live tokens. The live radix cache matches
by tokens; at 8-token blocks a match would round down to a block, which loses nothing on this
sequence (the prefix is a multiple of 8 and the questions share no block).
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.fleet.config import FleetConfig
from ppsched.fleet.routers import BLOCK_TOKENS, RouterSettings
from ppsched.fleet.simulate import simulate_fleet

LIVE_TOKENS_PER_BLOCK = 8
SIM_PER_LIVE_TOKEN = BLOCK_TOKENS // LIVE_TOKENS_PER_BLOCK
SHARED_PREFIX_TOKENS = 120  # SharedPrefixSpec().prefix_words: one word is one token
LIVE_RATE = 2.0  # bench_serving --request-rate
LIVE_SEED = 1  # bench_serving --seed
POLICIES = ("round_robin", "cache_aware")


@dataclass(frozen=True, slots=True)
class LiveRequest:
    """One row of the live sequence: send position, group, lengths, and the cached tokens the
    client was told under each policy."""

    position: int
    group: int
    prompt_tokens: int
    output_tokens: int
    cached: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        if self.prompt_tokens <= SHARED_PREFIX_TOKENS:
            raise UserError(f"live request at position {self.position}: prompt_tokens "
                            f"{self.prompt_tokens}, expected more than the "
                            f"{SHARED_PREFIX_TOKENS}-token shared prefix")
        if self.position < 0 or self.group < 0 or self.output_tokens < 1:
            raise UserError(f"live request {self!r}: expected position, group >= 0 and "
                            "output_tokens >= 1")

    def cached_under(self, policy: str) -> int:
        return dict(self.cached)[policy]


def read_live_sequence(path: Path) -> tuple[LiveRequest, ...]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    needed = {"position", "group", "prompt_tokens", "output_tokens",
              *(f"cached_{p}" for p in POLICIES)}
    missing = sorted(needed - set(reader.fieldnames or ()))
    if missing:
        raise UserError(f"{path}: columns {missing} missing; expected {sorted(needed)}")
    seq = tuple(LiveRequest(int(r["position"]), int(r["group"]), int(r["prompt_tokens"]),
                            int(r["output_tokens"]),
                            tuple((p, int(r[f"cached_{p}"])) for p in POLICIES)) for r in rows)
    if [r.position for r in seq] != list(range(len(seq))):
        raise UserError(f"{path}: positions {[r.position for r in seq]}, expected 0..n-1 in order")
    return seq


def bench_serving_arrivals(n: int, rate: float = LIVE_RATE, seed: int = LIVE_SEED
                           ) -> list[float]:
    """Send times as bench_serving draws them (``sglang/benchmark/serving.py``: numpy seeded
    with --seed, one exponential gap of mean 1/rate after each request is sent)."""
    rng = np.random.RandomState(seed)
    gaps = [float(rng.exponential(1.0 / rate)) for _ in range(n - 1)]
    return [0.0, *itertools.accumulate(gaps)]


def to_specs(seq: Sequence[LiveRequest], arrivals: Sequence[float]) -> tuple[RequestSpec, ...]:
    """Request id = send position; 15 group blocks, then blocks of the request's own."""
    shared = SHARED_PREFIX_TOKENS // LIVE_TOKENS_PER_BLOCK
    own_ids = itertools.count(1_000_000)
    specs = []
    for row, arrival in zip(seq, arrivals, strict=True):
        blocks = -(-row.prompt_tokens // LIVE_TOKENS_PER_BLOCK)
        ids = tuple(row.group * 1000 + j for j in range(shared)) + tuple(
            next(own_ids) for _ in range(blocks - shared))
        specs.append(RequestSpec(row.position, arrival, row.prompt_tokens * SIM_PER_LIVE_TOKEN,
                                 row.output_tokens, ids))
    return tuple(specs)


@dataclass(frozen=True, slots=True)
class Replay:
    """Where the simulated router sent each request (by send position) and each box's
    prefix-cache hits, in live tokens."""

    policy: str
    routed: tuple[int, ...]
    arrival_s: tuple[float, ...]
    first_token_s: tuple[float, ...]
    cached_tokens: tuple[int, ...]  # per box
    router_reasons: tuple[tuple[str, int], ...]


def replay(seq: Sequence[LiveRequest], box: object, policy: str, boxes: int = 2) -> Replay:
    specs = to_specs(seq, bench_serving_arrivals(len(seq)))
    result = simulate_fleet(FleetConfig(box, boxes, RouterSettings(policy)),
                            _Workload(specs))
    hits = []
    for brief in result.summary["boxes"]:
        hit = int(brief.get("prefix_cache", {}).get("hit_tokens", 0))
        if hit % SIM_PER_LIVE_TOKEN:
            raise UserError(f"prefix hits of {hit} simulated tokens: expected whole live tokens")
        hits.append(hit // SIM_PER_LIVE_TOKEN)
    reasons = tuple(sorted(result.summary["fleet"]["router_reasons"].items()))
    return Replay(policy, result.routed_to, tuple(r.arrival_s for r in result.records),
                  tuple(r.first_token_s for r in result.records), tuple(hits), reasons)


@dataclass(frozen=True, slots=True)
class _Workload:
    requests: tuple[RequestSpec, ...]


def groups_on(seq: Sequence[LiveRequest], routed: Sequence[int]) -> dict[int, set[int]]:
    """Group -> the boxes its requests went to (one box: the group was not split)."""
    placed: dict[int, set[int]] = {}
    for row, box in zip(seq, routed, strict=True):
        placed.setdefault(row.group, set()).add(box)
    return placed


def expected_hits(seq: Sequence[LiveRequest], routed: Sequence[int]) -> list[int]:
    """Per request: the shared prefix if an earlier request of its group went to its box."""
    seen: set[tuple[int, int]] = set()
    out = []
    for row, box in zip(seq, routed, strict=True):
        out.append(SHARED_PREFIX_TOKENS if (row.group, box) in seen else 0)
        seen.add((row.group, box))
    return out


def prefix_ready(seq: Sequence[LiveRequest], result: Replay) -> list[bool | None]:
    """Per request: None for the first of its group on its box; else whether an earlier one
    there had its first token (its prompt prefilled, so its prefix cached) by this arrival."""
    out: list[bool | None] = []
    for i, (row, box) in enumerate(zip(seq, result.routed, strict=True)):
        before = [result.first_token_s[j] for j in range(i)
                  if seq[j].group == row.group and result.routed[j] == box]
        out.append(min(before) <= result.arrival_s[i] if before else None)
    return out


def live_groups_by_replica(seq: Sequence[LiveRequest], prompt_tokens: Sequence[int]
                           ) -> tuple[tuple[int, ...], ...]:
    """The live cache_aware placement of whole groups, recovered from each replica's prompt
    tokens (its /metrics): the one split of groups whose prompt sums match. Raises when none
    or several do (then the placement cannot be told from the totals)."""
    totals: dict[int, int] = {}
    for row in seq:
        totals[row.group] = totals.get(row.group, 0) + row.prompt_tokens
    groups = sorted(totals)
    fits = []
    for assign in itertools.product(range(len(prompt_tokens)), repeat=len(groups)):
        sums = [0] * len(prompt_tokens)
        for group, replica in zip(groups, assign, strict=True):
            sums[replica] += totals[group]
        if sums == list(prompt_tokens):
            fits.append(assign)
    if len(fits) != 1:
        raise UserError(f"replica prompt tokens {list(prompt_tokens)}: {len(fits)} placements "
                        "of whole groups match, expected exactly one")
    return tuple(tuple(g for g, r in zip(groups, fits[0], strict=True) if r == replica)
                 for replica in range(len(prompt_tokens)))
