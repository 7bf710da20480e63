"""The KV-cache token pool: allocations, the chunked request's reservation, the prefix cache."""

from __future__ import annotations

from ppsched.sim.engine.prefix_cache import PrefixCache
from ppsched.sim.engine.state import Req
from ppsched.sim.invariants import SimInvariantError


class KvPool:
    """``used`` is allocated (requests' own KV plus the prefix tree's tokens); ``reserved`` is the
    rest of the chunked request's prompt, set aside at admission so its later chunks never wait
    or fail. With a prefix cache, unlocked tree tokens are evictable and count as free."""

    __slots__ = ("capacity", "used", "reserved", "peak", "cache")

    def __init__(self, capacity: int, *, prefix_cache: bool) -> None:
        self.capacity = capacity
        self.used = 0
        self.reserved = 0
        self.peak = 0
        # SGLang's radix cache; None for traces without prefix identity (or when switched off)
        self.cache: PrefixCache | None = PrefixCache() if prefix_cache else None

    def free(self) -> int:
        """Free KV for admission and growth: unallocated plus the cache's evictable tokens."""
        free = self.capacity - self.used - self.reserved
        return free + self.cache.evictable if self.cache is not None else free

    def allocate(self, tokens: int, *, reserved: bool = False) -> None:
        if reserved:
            self.reserved -= tokens
        if self.cache is not None:
            short = self.used + tokens + self.reserved - self.capacity
            if short > 0:  # evict unreferenced cached prefixes, LRU first
                self.used -= self.cache.evict(short)
        self.used += tokens
        if self.used + self.reserved > self.capacity or self.reserved < 0:
            raise SimInvariantError(f"KV over capacity: used {self.used} + reserved "
                                    f"{self.reserved} > {self.capacity}")
        if self.used > self.peak:
            self.peak = self.used

    def release(self, req: Req, now: float) -> None:
        """Free the request's own KV; unlock its cached prefix (kept in the tree)."""
        self.used -= req.kv - req.cached
        if req.cache_path:
            assert self.cache is not None
            self.cache.unlock(req.cache_path, now)
            req.cache_path = []
        req.kv = req.cached = 0

    # --- prefix cache -------------------------------------------------------------------------
    def match_and_lock(self, req: Req, now: float) -> tuple[int, int]:
        """At admission: re-match ``req``'s prompt against the cache and lock the matched path.
        Returns (uncached tokens to prefill, tokens the lock took out of the evictable pool)."""
        assert self.cache is not None
        spec = req.spec
        path, cached = self.cache.match(spec.prefix_block_ids, spec.prompt_tokens)
        self.cache.record_lookup(req.prefill_len, cached)
        req.cache_path = path
        req.kv = req.cached = sum(n.tokens for n in path)
        return req.prefill_len - cached, self.cache.lock(path, now)

    def unlock_unadmitted(self, req: Req, now: float) -> None:
        """Admission failed after the match: undo the lock and the lookup (it stays queued)."""
        assert self.cache is not None
        self.cache.unlock(req.cache_path, now)
        self.cache.lookup_tokens -= req.prefill_len
        self.cache.hit_tokens -= req.prefill_len - req.remaining
        req.cache_path = []
        req.kv = req.cached = 0

    def cache_prompt(self, req: Req, now: float) -> None:
        """Prompt prefilled: its blocks join the tree (locked by it), shared from now on. New
        blocks move from the request's own KV to the tree (used KV unchanged); blocks someone
        else cached meanwhile are shared and the request's copy is freed. The request's
        context (kv, what attention reads) is the same either way."""
        assert self.cache is not None
        path, duplicate = self.cache.insert(req.spec.prefix_block_ids, req.spec.prompt_tokens,
                                            req.cache_path, now)
        self.used -= duplicate
        req.cache_path = path
        req.cached = sum(n.tokens for n in path)
