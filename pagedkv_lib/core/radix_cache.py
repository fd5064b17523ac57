"""RadixCache: SGLang's prefix cache (RadixAttention), a radix tree of token ids over the course's BlockPool.

SGLang, `python/sglang/srt/mem_cache/radix_cache.py` (read at sgl-project/sglang@006b0e3d317f): every edge
of the tree holds a run of token ids (`key`) and the KV slots that hold them (`value`); a node's children are
keyed by the first token (by the first page when the page size is above 1). `match_prefix` walks down and
returns the slots of the longest cached prefix, `insert` adds a sequence's tokens, and a match or an insert
that ends inside an edge SPLITS its node in two, so that every boundary a request needs is a node. Requests
lock the last node of the prefix they use (`inc_lock_ref`, which counts up to the root); `evict` frees the
least recently used UNLOCKED LEAVES, and a parent whose last child goes becomes a leaf in its turn. Unlike the
chained block hashes of `BlockManager` (block_manager.py, vLLM's and nano-vllm's scheme), the tree matches
token by token, keeps no hash, and evicts whole nodes, deepest first.

Over the pool. SGLang's default page size is 1: a slot per token, so a prefix ending anywhere is a hit. Here
the unit of the pool is a block of `block_size` tokens, and `value` lists block ids, one per block of `key`.
With block_size S > 1 (SGLang's `page_size`), every key is cut to a multiple of S and matched block by block:
a partial last block is never in the tree, because the tree shares what it holds and a partly filled block is
still being written by its request (sharing it would need copy-on-write, notebook 08). SGLang does the same
(`page_align_keys`) and frees the unaligned tail when a request finishes. At S = 1 the tree is token-granular.

Ownership (SGLang's): the tree holds the single pool reference of every block in it; a request that uses a
cached prefix locks it instead of taking references. `insert(token_ids, blocks)` returns how many tokens were
in the tree already and takes ownership only of the blocks after them; the caller still owns the others (and
frees those it allocated itself: duplicates of what the tree holds). Access times come from a logical clock,
one tick per `match_prefix` or `insert`, stamped on the nodes whose tokens the call matched or added (the
lower half of a split keeps its own time; SGLang stamps it too, with the time of the call).
"""
from __future__ import annotations

import heapq
from collections.abc import Iterator

from .block_pool import BlockPool
from .validation import check_positive_int


class TreeNode:
    """One edge of the tree and the node below it: `key` tokens held in `value` blocks."""

    def __init__(self, key: list[int], value: list[int], parent: TreeNode | None = None):
        self.key = key                                  # token ids, a multiple of block_size
        self.value = value                              # block ids, len(key) // block_size
        self.parent = parent
        self.children: dict[tuple[int, ...], TreeNode] = {}   # first block of the child's key -> child
        self.lock_ref = 0                               # requests using this node (or a node below it)
        self.last_access_time = 0

    def __repr__(self) -> str:
        shown = self.key if len(self.key) <= 8 else [*self.key[:6], "...", self.key[-1]]
        return (f"TreeNode(key={shown}, blocks={self.value}, lock_ref={self.lock_ref}, "
                f"t={self.last_access_time})")


class RadixCache:
    """A radix tree of token ids whose edges hold blocks of `pool`, `block_size` tokens each."""

    def __init__(self, pool: BlockPool, block_size: int):
        check_positive_int("block_size", block_size)
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool: expected a BlockPool, got {type(pool).__name__}")
        self.pool = pool
        self.block_size = block_size
        self.root_node = TreeNode([], [])
        self.root_node.lock_ref = 1                     # never evicted (SGLang's root holds one lock)
        self.clock = 0
        self._evictable = 0                             # blocks in nodes with lock_ref 0
        self._protected = 0                             # blocks in locked nodes (the root excluded)

    # -- the contract ------------------------------------------------------------------------------------

    def match_prefix(self, token_ids: list[int]) -> tuple[list[int], TreeNode]:
        """(blocks of the longest cached prefix of token_ids, cut to whole blocks; the node where it ends).

        Ticks the clock and stamps every node on the matched path, the root included. A match that ends
        inside a node splits it, so that the returned node ends exactly there. Takes no lock.
        """
        node, _, blocks = self._walk(self._aligned(token_ids))
        return blocks, node

    def insert(self, token_ids: list[int], blocks: list[int]) -> int:
        """Add token_ids, held in `blocks` (one per block_size tokens); return the tokens already cached.

        The tree takes ownership of blocks[returned // block_size:], the blocks of the tokens it did not
        hold; the caller keeps the others. Ticks the clock and stamps the path and the new leaf; splits a
        node where the cached part ends inside it.
        """
        if len(token_ids) != len(blocks) * self.block_size:
            raise ValueError(f"insert: expected len(token_ids) == len(blocks) * {self.block_size}, got "
                             f"{len(token_ids)} tokens and {len(blocks)} blocks")
        node, cached, _ = self._walk(list(token_ids))
        if cached < len(token_ids):
            leaf = TreeNode(list(token_ids[cached:]), list(blocks[cached // self.block_size:]), node)
            leaf.last_access_time = self.clock
            node.children[self._child_key(leaf.key)] = leaf
            self._evictable += len(leaf.value)
        return cached

    def evict(self, num_blocks: int) -> int:
        """Free least recently used unlocked leaves until `num_blocks` blocks are freed or none is left;
        a parent left without children (and unlocked) joins the candidates. Each node's blocks go back to
        the pool in key order. Returns the blocks freed (whole nodes: it may be more than asked)."""
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 0:
            raise ValueError(f"num_blocks: expected an int >= 0, got {num_blocks!r}")
        heap = [(n.last_access_time, i, n) for i, n in enumerate(self._evictable_leaves())]
        heapq.heapify(heap)
        tie = len(heap)
        freed = 0
        while freed < num_blocks and heap:
            _, _, leaf = heapq.heappop(heap)
            self.pool.free(leaf.value)
            freed += len(leaf.value)
            self._evictable -= len(leaf.value)
            parent = leaf.parent
            del parent.children[self._child_key(leaf.key)]
            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access_time, tie, parent))
                tie += 1
        return freed

    def inc_lock_ref(self, node: TreeNode) -> None:
        """One more lock on `node` and on every ancestor up to (not including) the root."""
        while node is not self.root_node:
            if node.lock_ref == 0:
                self._evictable -= len(node.value)
                self._protected += len(node.value)
            node.lock_ref += 1
            node = node.parent

    def dec_lock_ref(self, node: TreeNode) -> None:
        """One lock less on `node` and its ancestors; ValueError, and nothing changed, if one has none."""
        walk = node
        while walk is not self.root_node:
            if walk.lock_ref == 0:
                raise ValueError(f"dec_lock_ref: {walk} holds no lock (an unlock without its lock?)")
            walk = walk.parent
        while node is not self.root_node:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._evictable += len(node.value)
                self._protected -= len(node.value)
            node = node.parent

    def evictable_size(self) -> int:
        """Blocks in unlocked nodes: what `evict` can free."""
        return self._evictable

    def protected_size(self) -> int:
        """Blocks in locked nodes: in use by some request."""
        return self._protected

    def total_size(self) -> int:
        return self._evictable + self._protected

    # -- reading the tree --------------------------------------------------------------------------------

    def nodes(self) -> Iterator[tuple[int, TreeNode]]:
        """(depth, node) for every node but the root, depth first, children in order of their keys."""
        stack = [(0, c) for c in sorted(self.root_node.children.values(), key=_order, reverse=True)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, c) for c in sorted(node.children.values(), key=_order, reverse=True))

    def cached_sequences(self) -> list[list[int]]:
        """The token ids of every root-to-leaf path: what the tree can match."""
        out = []

        def walk(node, prefix):
            if not node.children and node is not self.root_node:
                out.append(prefix)
            for child in sorted(node.children.values(), key=_order):
                walk(child, prefix + child.key)

        walk(self.root_node, [])
        return out

    def pretty(self) -> str:
        """One line per node, indented by depth (SGLang's `pretty_print`)."""
        lines = [f"root  ({self.total_size()} blocks: {self.protected_size()} locked, "
                 f"{self.evictable_size()} evictable)"]
        lines += [f"{'  ' * (d + 1)}{n!r}" for d, n in self.nodes()]
        return "\n".join(lines)

    # -- helpers -----------------------------------------------------------------------------------------

    def _walk(self, key: list[int]) -> tuple[TreeNode, int, list[int]]:
        """Tick the clock and walk down from the root along `key`, stamping each node matched and splitting
        the one where the match ends inside it: (the last node, tokens matched, their blocks). After a split
        the walk stops by itself: the key and the split node's lower half differ in their next block."""
        self.clock += 1
        node, matched, blocks = self.root_node, 0, []
        node.last_access_time = self.clock
        while matched < len(key):
            child = node.children.get(self._child_key(key[matched:]))
            if child is None:
                break
            n = self._match_len(child.key, key[matched:])
            if n < len(child.key):
                child = self._split_node(child, n)
            child.last_access_time = self.clock
            node, matched, blocks = child, matched + n, blocks + child.value
        return node, matched, blocks

    def _aligned(self, token_ids: list[int]) -> list[int]:
        n = len(token_ids) // self.block_size * self.block_size
        return list(token_ids[:n])

    def _child_key(self, key: list[int]) -> tuple[int, ...]:
        return tuple(key[: self.block_size])

    def _match_len(self, a: list[int], b: list[int]) -> int:
        """Tokens of the longest common prefix of a and b, in whole blocks (a binary search over prefix
        lengths: equal prefixes of k blocks imply equal prefixes of fewer)."""
        S = self.block_size
        lo, hi = 0, min(len(a), len(b)) // S                 # blocks: a[:lo * S] == b[:lo * S] holds
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if a[: mid * S] == b[: mid * S]:
                lo = mid
            else:
                hi = mid - 1
        return lo * S

    def _split_node(self, child: TreeNode, n: int) -> TreeNode:
        """Cut `child` after n tokens: a new node, above it, holds the first n and the child's locks."""
        head = TreeNode(child.key[:n], child.value[: n // self.block_size], child.parent)
        head.lock_ref, head.last_access_time = child.lock_ref, child.last_access_time
        child.parent.children[self._child_key(head.key)] = head
        child.key, child.value, child.parent = child.key[n:], child.value[n // self.block_size:], head
        head.children[self._child_key(child.key)] = child
        return head

    def _evictable_leaves(self) -> list[TreeNode]:
        """Unlocked nodes without children (the root excluded), in no particular order."""
        found, stack = [], list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.lock_ref == 0:
                found.append(node)
        return found


def _order(node: TreeNode) -> tuple[int, ...]:
    return tuple(node.key)
