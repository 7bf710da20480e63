"""cache_aware's prefix index: which workers were sent which prompt prefix.

sglang-router keeps one radix tree of request text whose nodes record the workers (tenants) that
were routed that text; a request's match is the deepest node on its path. The simulator's traces
name prompt prefixes by block ids (Mooncake's hash_ids: one id per 512-token block), so the tree
here is a trie over block ids: the same structure at block rather than character resolution.
The router evicts a worker's least recently used text once its tree exceeds ``max_tree_size``
(2^24 characters by default); a planning window never comes near it, so nothing is evicted here.
"""

from __future__ import annotations

from collections.abc import Sequence


class _Node:
    __slots__ = ("children", "tenants")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.tenants: set[int] = set()


class PrefixTree:
    def __init__(self) -> None:
        self._root = _Node()

    def match(self, blocks: Sequence[int]) -> tuple[int, frozenset[int]]:
        """(depth in blocks, the workers holding that whole prefix) of the deepest match."""
        node, depth, tenants = self._root, 0, frozenset()
        for block in blocks:
            child = node.children.get(block)
            if child is None:
                break
            node, depth, tenants = child, depth + 1, child.tenants
        return depth, frozenset(tenants)

    def insert(self, blocks: Sequence[int], worker: int) -> None:
        node = self._root
        for block in blocks:
            child = node.children.get(block)
            if child is None:
                child = node.children[block] = _Node()
            child.tenants.add(worker)
            node = child
