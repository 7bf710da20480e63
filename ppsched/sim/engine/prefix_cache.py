"""SGLang's radix prefix cache (RadixAttention) at the trace's block granularity.

A trace with prefix identity gives one id per 512-token prompt block (Mooncake ``hash_ids``);
equal id paths are equal prefixes. The tree has one node per block. As in SGLang 0.5.23
(``srt/mem_cache/radix_cache.py``, ``evict_policy.py``):
- a request matches the longest cached path of its block ids; at least one prompt token is
  always computed (the last token's logits are needed), so a full match still prefills 1 token;
- matched nodes are locked (``inc_lock_ref`` up to the root) while the request runs;
- after its prompt is prefilled the request's blocks are inserted (``cache_unfinished_req``):
  their KV now belongs to the tree, shared with every later match;
- when it finishes or is retracted it unlocks them (output tokens carry no block id: they are
  freed, not cached);
- eviction frees unlocked leaves in LRU order (last access time), a parent becoming an
  unlocked leaf joins the heap (``evict``), until enough tokens are free. SGLang heapifies every
  unlocked leaf per eviction; here the leaves stay in a heap between evictions (entries of nodes
  that stopped being unlocked leaves are skipped), which frees the same nodes in the same order.
KV accounting: the tree's tokens count as used KV; unlocked ones are "evictable", which
admission counts as available (SGLang's ``available_size + evictable_size``).
"""

from __future__ import annotations

import heapq
import itertools

BLOCK_TOKENS = 512  # Mooncake: one hash id per 512-token block


class Node:
    __slots__ = ("block", "tokens", "parent", "children", "lock", "last_access", "order",
                 "leaf_push")

    def __init__(self, block: int, tokens: int, parent: Node | None, created: int = 0) -> None:
        self.block = block
        self.tokens = tokens
        self.parent = parent
        self.children: dict[int, Node] = {}
        self.lock = 0
        self.last_access = 0.0
        # the tree walk's order (``PrefixCache.evict``): depth first, a parent's newest child
        # first, as a key that sorts like it (children join their parent's dict in creation
        # order, so ``created`` ranks siblings as the dict does)
        self.order: tuple[int, ...] = () if parent is None else parent.order + (-created,)
        self.leaf_push = -1  # its latest entry in the cache's leaf heap (``PrefixCache``)


def block_tokens(prompt: int, n_blocks: int) -> list[int]:
    """Tokens of each of a prompt's blocks: 512 each, the last one the remainder."""
    n = min(n_blocks, -(-prompt // BLOCK_TOKENS))
    return [min(BLOCK_TOKENS, prompt - i * BLOCK_TOKENS) for i in range(n)]


class PrefixCache:
    """The radix tree plus its KV figures (tokens held, evictable, hits, evictions)."""

    def __init__(self) -> None:
        self.root = Node(-1, 0, None)
        self.root.lock = 1  # never evicted
        self.tokens = 0  # KV tokens held by tree nodes
        self.evictable = 0  # of those, in nodes nobody locks
        self.evicted = 0
        self.hit_tokens = 0
        self.lookup_tokens = 0
        self.peak_tokens = 0
        self._tie = itertools.count()
        self._created = itertools.count()
        # nodes that are leaves and unlocked: what eviction may free, kept as the tree changes,
        # and the same nodes as a heap in eviction order, (last access, walk order, push, node):
        # an entry whose node left the set, or re-entered it with a newer push, is stale
        self._unlocked_leaves: set[Node] = set()
        self._leaf_heap: list[tuple[float, tuple[int, ...], int, Node]] = []
        self._pushes = itertools.count()

    # --- matching and locking ----------------------------------------------------------------
    def match(self, blocks: tuple[int, ...], prompt: int) -> tuple[list[Node], int]:
        """(matched path, cached tokens usable by a prompt of ``prompt`` tokens)."""
        path: list[Node] = []
        node = self.root
        cached = 0
        for block, tokens in zip(blocks, block_tokens(prompt, len(blocks)), strict=False):
            child = node.children.get(block)
            if child is None or child.tokens != tokens:
                break
            path.append(child)
            cached += tokens
            node = child
        return path, min(cached, prompt - 1)

    def lock(self, path: list[Node], now: float) -> int:
        """Lock ``path`` for a running request; returns the tokens that stopped being
        evictable (what the lock costs the free-KV figure)."""
        freed_from_evictable = 0
        leaves = self._unlocked_leaves
        for node in path:
            if node.lock == 0:
                self.evictable -= node.tokens
                freed_from_evictable += node.tokens
                leaves.discard(node)
            node.lock += 1
            node.last_access = now
        return freed_from_evictable

    def unlock(self, path: list[Node], now: float) -> None:
        for node in path:
            node.lock -= 1
            node.last_access = now
            if node.lock == 0:
                self.evictable += node.tokens
                if not node.children:
                    self._add_leaf(node)

    def record_lookup(self, prompt: int, cached: int) -> None:
        self.lookup_tokens += prompt
        self.hit_tokens += cached

    # --- inserting and evicting --------------------------------------------------------------
    def insert(self, blocks: tuple[int, ...], prompt: int, path: list[Node],
               now: float) -> tuple[list[Node], int]:
        """Extend the request's locked ``path`` with the rest of its prompt blocks, locked by
        it; returns (new path, duplicate tokens): blocks another request cached meanwhile are
        shared, and the request's own copy of them is freed (SGLang frees the duplicate)."""
        node = path[-1] if path else self.root
        sizes = block_tokens(prompt, len(blocks))
        duplicate = 0
        path = list(path)
        for block, tokens in list(zip(blocks, sizes, strict=False))[len(path):]:
            child = node.children.get(block)
            if child is not None and child.tokens == tokens:
                # cached by someone else meanwhile: share theirs (our copy is freed)
                if child.lock == 0:
                    self.evictable -= child.tokens
                    self._unlocked_leaves.discard(child)
                duplicate += tokens
            elif child is not None:
                break  # same id, other length: leave the cached one alone
            else:
                child = Node(block, tokens, node, next(self._created))
                node.children[block] = child
                self._unlocked_leaves.discard(node)  # a parent now
                self.tokens += tokens
            child.lock += 1
            child.last_access = now
            path.append(child)
            node = child
        if self.tokens > self.peak_tokens:
            self.peak_tokens = self.tokens
        return path, duplicate

    def _add_leaf(self, node: Node) -> None:
        self._unlocked_leaves.add(node)
        node.leaf_push = next(self._pushes)
        heapq.heappush(self._leaf_heap, (node.last_access, node.order, node.leaf_push, node))

    def _next_leaf(self) -> Node | None:
        """The first unlocked leaf of the kept heap in eviction order (stale entries dropped),
        left in the heap; None if there is none."""
        heap, leaves = self._leaf_heap, self._unlocked_leaves
        while heap:
            _, _, push, node = heap[0]
            if node.leaf_push == push and node in leaves:
                return node
            heapq.heappop(heap)
        return None

    def evict(self, need: int) -> int:
        """Free at least ``need`` tokens of unlocked leaves, least recently used first (or all
        that can be); returns the tokens freed. Ties in access time go in the tree walk's order
        (``Node.order``) among the leaves there at the start, then in the order parents became
        leaves during this eviction."""
        leaves, heap = self._unlocked_leaves, self._leaf_heap
        if len(heap) > 2 * len(leaves) + 64:  # mostly stale: rebuild from the set
            heap[:] = [(n.last_access, n.order, n.leaf_push, n) for n in leaves]
            heapq.heapify(heap)
        exposed: list[tuple[float, int, Node]] = []  # parents that became leaves meanwhile
        freed = 0
        while freed < need:
            node = self._next_leaf()
            if exposed and (node is None or exposed[0][0] < node.last_access):
                node = heapq.heappop(exposed)[2]
            elif node is not None:
                heapq.heappop(heap)
            else:
                break
            parent = node.parent
            assert parent is not None
            del parent.children[node.block]
            leaves.discard(node)
            freed += node.tokens
            self.tokens -= node.tokens
            self.evictable -= node.tokens
            if not parent.children and parent.lock == 0:
                heapq.heappush(exposed, (parent.last_access, next(self._tie), parent))
                leaves.add(parent)
                parent.leaf_push = -1  # its entries from when it was a leaf before are stale
        for _, _, node in exposed:  # left for the next eviction, keyed as every leaf is
            self._add_leaf(node)
        self.evicted += freed
        return freed

    def summary(self) -> dict[str, object]:
        return {"enabled": True, "block_tokens": BLOCK_TOKENS,
                "lookup_prompt_tokens": self.lookup_tokens, "hit_tokens": self.hit_tokens,
                "hit_rate": self.hit_tokens / self.lookup_tokens if self.lookup_tokens else 0.0,
                "evicted_tokens": self.evicted, "peak_tree_tokens": self.peak_tokens,
                "tree_tokens_at_end": self.tokens}
