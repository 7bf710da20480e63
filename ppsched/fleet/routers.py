"""Models of sglang-router 0.3.2's routing policies (its defaults: ``router_args.py``).

The policies' code is Rust inside the wheel's binary (``sglang_router_rs.abi3.so``); what is
modelled here is the behaviour the router's arguments and documentation define:
- ``random``: a uniformly random worker.
- ``round_robin``: workers in turn, starting at the first.
- ``cache_aware`` (the router's default): when the load is imbalanced (max - min in-flight >
  ``balance_abs_threshold`` 64 and max > ``balance_rel_threshold`` 1.5 x min) the least-loaded
  worker; else the worker with the deepest prefix match when the match rate (matched / prompt
  tokens) exceeds ``cache_threshold`` 0.3; else the least-loaded worker. Load is the router's own
  in-flight count per worker. The chosen worker is recorded in the prefix tree either way.
- ``power_of_two``: two distinct random workers, the one with the smaller token load (SGLang's
  /get_load ``num_tokens``) as last polled; the router polls every ``load_poll_s`` (30 s), so the
  load it compares is up to 30 s stale.
Ties go to the lowest worker index (the router's choice among equals is unspecified).
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ppsched.core.errors import UserError
from ppsched.core.requests import RequestSpec
from ppsched.fleet.prefix_tree import PrefixTree

ROUTER_POLICIES = ("random", "round_robin", "cache_aware", "power_of_two")
BLOCK_TOKENS = 512  # tokens per prefix block id (Mooncake's hash_ids)


@dataclass(frozen=True, slots=True)
class RouterSettings:
    """One router policy and sglang-router's thresholds (defaults: the router's own)."""

    policy: str = "cache_aware"
    cache_threshold: float = 0.3
    balance_abs_threshold: int = 64
    balance_rel_threshold: float = 1.5
    load_poll_s: float = 30.0

    def __post_init__(self) -> None:
        if self.policy not in ROUTER_POLICIES:
            raise UserError(f"router policy {self.policy!r}: expected one of "
                            f"{', '.join(ROUTER_POLICIES)}")
        if not (0.0 <= self.cache_threshold <= 1.0):
            raise UserError(f"cache_threshold {self.cache_threshold!r}: expected a fraction "
                            "in [0, 1]")
        if not isinstance(self.balance_abs_threshold, int) or self.balance_abs_threshold < 0:
            raise UserError(f"balance_abs_threshold {self.balance_abs_threshold!r}: expected "
                            "an integer >= 0")
        if not (math.isfinite(self.balance_rel_threshold) and self.balance_rel_threshold >= 1):
            raise UserError(f"balance_rel_threshold {self.balance_rel_threshold!r}: expected "
                            "a number >= 1")
        if not (math.isfinite(self.load_poll_s) and self.load_poll_s > 0):
            raise UserError(f"load_poll_s {self.load_poll_s!r}: expected seconds > 0")


class Router(ABC):
    """Chooses a worker per request. ``reasons`` counts why each choice was made."""

    needs_token_load = False  # True: the fleet polls token loads every ``load_poll_s``

    def __init__(self, workers: int, settings: RouterSettings, seed: int) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise UserError(f"fleet of {workers!r} boxes: expected an integer >= 1")
        self.workers = workers
        self.settings = settings
        self.rng = random.Random(seed)
        self.reasons: Counter[str] = Counter()

    @abstractmethod
    def choose(self, spec: RequestSpec, in_flight: Sequence[int],
               polled_tokens: Sequence[int]) -> int:
        """The box for ``spec``, given each box's in-flight count and last polled token load."""


def _least(loads: Sequence[int]) -> int:
    return min(range(len(loads)), key=loads.__getitem__)


class RandomRouter(Router):
    def choose(self, spec: RequestSpec, in_flight: Sequence[int],
               polled_tokens: Sequence[int]) -> int:
        self.reasons["random"] += 1
        return self.rng.randrange(self.workers)


class RoundRobinRouter(Router):
    def __init__(self, workers: int, settings: RouterSettings, seed: int) -> None:
        super().__init__(workers, settings, seed)
        self.counter = 0

    def choose(self, spec: RequestSpec, in_flight: Sequence[int],
               polled_tokens: Sequence[int]) -> int:
        chosen = self.counter % self.workers
        self.counter += 1
        self.reasons["turn"] += 1
        return chosen


class CacheAwareRouter(Router):
    def __init__(self, workers: int, settings: RouterSettings, seed: int) -> None:
        super().__init__(workers, settings, seed)
        self.tree = PrefixTree()

    def imbalanced(self, loads: Sequence[int]) -> bool:
        high, low = max(loads), min(loads)
        return (high - low > self.settings.balance_abs_threshold
                and high > self.settings.balance_rel_threshold * low)

    def choose(self, spec: RequestSpec, in_flight: Sequence[int],
               polled_tokens: Sequence[int]) -> int:
        blocks = spec.prefix_block_ids
        if self.imbalanced(in_flight):
            chosen, reason = _least(in_flight), "imbalance"
        else:
            depth, holders = self.tree.match(blocks) if blocks else (0, frozenset())
            rate = min(depth * BLOCK_TOKENS, spec.prompt_tokens) / spec.prompt_tokens
            if holders and rate > self.settings.cache_threshold:
                chosen = min(sorted(holders), key=in_flight.__getitem__)
                reason = "prefix"
            else:
                chosen, reason = _least(in_flight), "least_loaded"
        if blocks:
            self.tree.insert(blocks, chosen)
        self.reasons[reason] += 1
        return chosen


class PowerOfTwoRouter(Router):
    needs_token_load = True

    def choose(self, spec: RequestSpec, in_flight: Sequence[int],
               polled_tokens: Sequence[int]) -> int:
        self.reasons["power_of_two"] += 1
        if self.workers == 1:
            return 0
        first, second = self.rng.sample(range(self.workers), 2)
        return first if polled_tokens[first] <= polled_tokens[second] else second


_ROUTERS: dict[str, type[Router]] = {
    "random": RandomRouter, "round_robin": RoundRobinRouter, "cache_aware": CacheAwareRouter,
    "power_of_two": PowerOfTwoRouter}


def build_router(workers: int, settings: RouterSettings, seed: int) -> Router:
    return _ROUTERS[settings.policy](workers, settings, seed)


def parse_router_policies(text: str) -> tuple[str, ...]:
    """Comma-separated router policies ('all' for every one), validated, order kept."""
    if text.strip() == "all":
        return ROUTER_POLICIES
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in ROUTER_POLICIES:
            raise UserError(f"router policy {name!r}: expected one of "
                            f"{', '.join(ROUTER_POLICIES)} (comma-separated) or all")
        if name not in names:
            names.append(name)
    if not names:
        raise UserError(f"router policies {text!r}: expected at least one policy name")
    return tuple(names)
