"""Eviction from the kept set of unlocked leaves frees exactly what a walk of the tree would.

``Walked`` is the prefix cache with eviction as a walk of the whole tree (a heap of every
unlocked leaf, ties broken in walk order); both caches take the same random stream of matches,
locks, inserts, unlocks and evictions and must agree on every result and on the tree.
"""

from __future__ import annotations

import heapq
import random

import pytest

from ppsched.sim.engine.prefix_cache import PrefixCache

pytestmark = pytest.mark.pure  # subclasses a compiled class (tests/conftest.py)


class Walked(PrefixCache):
    def evict(self, need):
        heap = [(n.last_access, next(self._tie), n) for n in self.walk_unlocked_leaves()]
        heapq.heapify(heap)
        freed = 0
        while freed < need and heap:
            _, _, node = heapq.heappop(heap)
            parent = node.parent
            del parent.children[node.block]
            freed += node.tokens
            self.tokens -= node.tokens
            self.evictable -= node.tokens
            if not parent.children and parent.lock == 0:
                heapq.heappush(heap, (parent.last_access, next(self._tie), parent))
        self.evicted += freed
        return freed

    def walk_unlocked_leaves(self):
        out = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node.lock == 0:
                out.append(node)
        return out


def shape_of(cache: PrefixCache, node=None) -> tuple:
    node = node or cache.root
    return tuple((b, c.tokens, c.lock, c.last_access, shape_of(cache, c))
                 for b, c in node.children.items())


@pytest.mark.parametrize("seed", range(12))
def test_kept_leaves_evict_as_the_tree_walk_does(seed):
    rng = random.Random(seed)
    fast, walked = PrefixCache(), Walked()
    held: list[tuple[list, list]] = []  # (path in fast, path in walked) of running requests
    now = 0.0
    for _ in range(2500):
        now += rng.choice([0.0, 0.0, 1.0])  # equal access times: ties must break alike
        op = rng.random()
        if op < 0.45:  # a request: match, lock, then cache its whole prompt
            blocks = tuple(rng.randrange(4) for _ in range(rng.randrange(1, 6)))
            prompt = 512 * len(blocks) - rng.randrange(0, 300)
            paths = []
            for cache in (fast, walked):
                path, cached = cache.match(blocks, prompt)
                cache.lock(path, now)
                path, duplicate = cache.insert(blocks, prompt, path, now)
                paths.append((path, cached, duplicate))
            assert paths[0][1:] == paths[1][1:]
            held.append((paths[0][0], paths[1][0]))
        elif op < 0.8 and held:  # a request finishes
            fast_path, walked_path = held.pop(rng.randrange(len(held)))
            fast.unlock(fast_path, now)
            walked.unlock(walked_path, now)
        else:
            need = rng.randrange(1, 4000)
            assert fast.evict(need) == walked.evict(need)
        assert fast.evictable == walked.evictable and fast.tokens == walked.tokens
        assert shape_of(fast) == shape_of(walked)
        assert set(map(id, fast._unlocked_leaves)) == \
            {id(n) for n in Walked.walk_unlocked_leaves(fast)}
