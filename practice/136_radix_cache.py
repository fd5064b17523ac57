"""Exercise 136 (hard): a radix cache, SGLang's prefix cache (RadixAttention). Notebook 15, "RadixAttention".
Grade: python practice/judge.py 136

A radix tree of token ids over the course's BlockPool (notebook 02), as in SGLang's
python/sglang/srt/mem_cache/radix_cache.py. Each node (TreeNode, given below) holds a run of token ids,
`key`, a multiple of block_size long, and the block ids that hold them, `value` (len(key) // block_size of
them, in order); its children are keyed by the first block of their key, tuple(key[:block_size]). The root
has an empty key and lock_ref 1, and is never evicted.

What the judge reads after every call: the tree from `root_node` (each node's key, value, lock_ref and
children), the pool's free queue and reference counts, evictable_size() and protected_size(). It calls only
the public methods; `_child_key`, `_match_len` and `_split_node` are suggested helpers.

Ownership: the tree holds the one pool reference of every block in it. `insert` does not touch the pool (the
tree takes over the caller's reference for the blocks it adopts); `evict` gives blocks back with pool.free.
Access time: a logical clock, self.clock, goes up by one at the start of every match_prefix and insert; the
call sets last_access_time = self.clock on every node whose tokens it matches or adds (the root included)
and on the upper half of a node it splits; the lower half keeps its time. Eviction is least recently used
by last_access_time. Only the order of the stamps is graded (through what evict frees), so whether a refused
insert (ValueError below) ticks the clock changes no verdict.

Arguments are read-only: no method changes a list it is given (token_ids and blocks stay the caller's).
"""
from __future__ import annotations

from pagedkv_lib.core.block_pool import BlockPool


class TreeNode:
    """Given: one edge of the tree and the node below it."""

    def __init__(self, key: list[int], value: list[int], parent: TreeNode | None = None):
        self.key = key                                       # token ids, a multiple of block_size
        self.value = value                                   # block ids, len(key) // block_size
        self.parent = parent
        self.children: dict[tuple[int, ...], TreeNode] = {}  # tuple(child.key[:block_size]) -> child
        self.lock_ref = 0
        self.last_access_time = 0


class RadixCache:
    """A radix tree of token ids whose edges hold blocks of `pool`, block_size tokens each.

    Example (block_size 1, a fresh BlockPool(8)): b = pool.allocate(5) gives [0, 1, 2, 3, 4];
    insert([1, 2, 3, 4, 5], b) returns 0 (nothing was cached) and the tree holds one node [1..5] -> b.
    match_prefix([1, 2, 3, 9]) returns ([0, 1, 2], node) where node.key == [1, 2, 3]: the match ended inside
    [1..5], so that node was split into [1, 2, 3] (blocks [0, 1, 2]) above [4, 5] (blocks [3, 4]).
    """

    def __init__(self, pool: BlockPool, block_size: int):
        raise NotImplementedError("RadixCache.__init__: your code here (exercise 136)")

    def match_prefix(self, token_ids: list[int]) -> tuple[list[int], TreeNode]:
        """Cut a copy of token_ids to a multiple of block_size and walk down from the root, matching whole
        blocks.
        Return (the blocks of the longest cached prefix: the values along the matched path, in order; the
        node where the match ends, root_node when nothing matches). A match that ends inside a node first
        splits it there and returns the new upper node. Stamps every node of the matched path, not only the
        last, and the root (module docstring). Takes no lock and never touches the pool."""
        raise NotImplementedError("RadixCache.match_prefix: your code here (exercise 136)")

    def insert(self, token_ids: list[int], blocks: list[int]) -> int:
        """Add token_ids, held in `blocks` (len(token_ids) == len(blocks) * block_size, else ValueError and
        nothing changed). Walk like match_prefix, splitting a node where the cached part ends inside it, and
        return the number of tokens that were already cached. If tokens remain, one new leaf (lock_ref 0)
        holds them and blocks[returned // block_size:]: the tree owns those blocks now; the blocks before
        them stay the caller's. Stamps the path, the root and the new leaf."""
        raise NotImplementedError("RadixCache.insert: your code here (exercise 136)")

    def evict(self, num_blocks: int) -> int:
        """Free whole nodes until at least num_blocks blocks are freed or nothing is evictable. Each time,
        take the least recently used evictable leaf (no children, lock_ref 0, not the root), give its
        blocks back with pool.free(node.value) (in key order) and remove it from its parent; a parent left
        without children and unlocked becomes a candidate in the same call. Return the blocks freed (whole
        nodes: it may be more than num_blocks; 0 when nothing is evictable)."""
        raise NotImplementedError("RadixCache.evict: your code here (exercise 136)")

    def inc_lock_ref(self, node: TreeNode) -> None:
        """lock_ref + 1 on `node` and on every ancestor up to, not including, the root (nothing for the
        root itself). A locked node is never evicted."""
        raise NotImplementedError("RadixCache.inc_lock_ref: your code here (exercise 136)")

    def dec_lock_ref(self, node: TreeNode) -> None:
        """lock_ref - 1 on the same nodes as inc_lock_ref; if any of them has lock_ref 0, raise ValueError
        and change nothing (every node of the path is checked first: the 0 may sit above a locked node, or
        below one)."""
        raise NotImplementedError("RadixCache.dec_lock_ref: your code here (exercise 136)")

    def evictable_size(self) -> int:
        """Blocks in nodes with lock_ref 0 (the root excluded): what evict could free."""
        raise NotImplementedError("RadixCache.evictable_size: your code here (exercise 136)")

    def protected_size(self) -> int:
        """Blocks in nodes with lock_ref above 0 (the root excluded)."""
        raise NotImplementedError("RadixCache.protected_size: your code here (exercise 136)")

    def _child_key(self, key: list[int]) -> tuple[int, ...]:
        """The key of a child whose key starts with `key`: its first block, tuple(key[:block_size])."""
        raise NotImplementedError("RadixCache._child_key: your code here (exercise 136)")

    def _match_len(self, a: list[int], b: list[int]) -> int:
        """Tokens of the longest common prefix of a and b, in whole blocks (a multiple of block_size)."""
        raise NotImplementedError("RadixCache._match_len: your code here (exercise 136)")

    def _split_node(self, child: TreeNode, n: int) -> TreeNode:
        """Cut `child` after n tokens (a multiple of block_size, 0 < n < len(child.key)): a new node takes
        key[:n], value[:n // block_size], the child's lock_ref and last_access_time and the child's place
        under its parent; the child keeps the rest and hangs below the new node. Returns the new node."""
        raise NotImplementedError("RadixCache._split_node: your code here (exercise 136)")
