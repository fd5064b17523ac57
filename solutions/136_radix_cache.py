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

# BEGIN SOLUTION
import heapq

# END SOLUTION
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
        # BEGIN SOLUTION
        self.pool = pool
        self.block_size = block_size
        self.root_node = TreeNode([], [])
        self.root_node.lock_ref = 1
        self.clock = 0
        self._evictable = 0
        self._protected = 0
        # END SOLUTION

    def match_prefix(self, token_ids: list[int]) -> tuple[list[int], TreeNode]:
        """Cut a copy of token_ids to a multiple of block_size and walk down from the root, matching whole
        blocks.
        Return (the blocks of the longest cached prefix: the values along the matched path, in order; the
        node where the match ends, root_node when nothing matches). A match that ends inside a node first
        splits it there and returns the new upper node. Stamps every node of the matched path, not only the
        last, and the root (module docstring). Takes no lock and never touches the pool."""
        # BEGIN SOLUTION
        key = list(token_ids[: len(token_ids) // self.block_size * self.block_size])
        self.clock += 1
        node, blocks = self.root_node, []
        node.last_access_time = self.clock
        while key:
            child = node.children.get(self._child_key(key))
            if child is None:
                break
            n = self._match_len(child.key, key)
            ends_inside = n < len(child.key)
            if ends_inside:
                child = self._split_node(child, n)
            child.last_access_time = self.clock
            blocks += child.value
            node, key = child, key[n:]
            if ends_inside:
                break
        return blocks, node
        # END SOLUTION

    def insert(self, token_ids: list[int], blocks: list[int]) -> int:
        """Add token_ids, held in `blocks` (len(token_ids) == len(blocks) * block_size, else ValueError and
        nothing changed). Walk like match_prefix, splitting a node where the cached part ends inside it, and
        return the number of tokens that were already cached. If tokens remain, one new leaf (lock_ref 0)
        holds them and blocks[returned // block_size:]: the tree owns those blocks now; the blocks before
        them stay the caller's. Stamps the path, the root and the new leaf."""
        # BEGIN SOLUTION
        if len(token_ids) != len(blocks) * self.block_size:
            raise ValueError(f"insert: expected len(token_ids) == len(blocks) * {self.block_size}, got "
                             f"{len(token_ids)} tokens and {len(blocks)} blocks")
        key, value = list(token_ids), list(blocks)
        self.clock += 1
        node, cached = self.root_node, 0
        node.last_access_time = self.clock
        while key:
            child = node.children.get(self._child_key(key))
            if child is None:
                break
            n = self._match_len(child.key, key)
            if n < len(child.key):
                child = self._split_node(child, n)
            child.last_access_time = self.clock
            node, cached = child, cached + n
            key, value = key[n:], value[n // self.block_size:]
        if key:
            leaf = TreeNode(key, value, node)
            leaf.last_access_time = self.clock
            node.children[self._child_key(key)] = leaf
            self._evictable += len(value)
        return cached
        # END SOLUTION

    def evict(self, num_blocks: int) -> int:
        """Free whole nodes until at least num_blocks blocks are freed or nothing is evictable. Each time,
        take the least recently used evictable leaf (no children, lock_ref 0, not the root), give its
        blocks back with pool.free(node.value) (in key order) and remove it from its parent; a parent left
        without children and unlocked becomes a candidate in the same call. Return the blocks freed (whole
        nodes: it may be more than num_blocks; 0 when nothing is evictable)."""
        # BEGIN SOLUTION
        leaves, stack = [], list(self.root_node.children.values())
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            if not node.children and node.lock_ref == 0:
                leaves.append(node)
        heap = [(n.last_access_time, i, n) for i, n in enumerate(leaves)]
        heapq.heapify(heap)
        tie, freed = len(heap), 0
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
        # END SOLUTION

    def inc_lock_ref(self, node: TreeNode) -> None:
        """lock_ref + 1 on `node` and on every ancestor up to, not including, the root (nothing for the
        root itself). A locked node is never evicted."""
        # BEGIN SOLUTION
        while node is not self.root_node:
            if node.lock_ref == 0:
                self._evictable -= len(node.value)
                self._protected += len(node.value)
            node.lock_ref += 1
            node = node.parent
        # END SOLUTION

    def dec_lock_ref(self, node: TreeNode) -> None:
        """lock_ref - 1 on the same nodes as inc_lock_ref; if any of them has lock_ref 0, raise ValueError
        and change nothing (every node of the path is checked first: the 0 may sit above a locked node, or
        below one)."""
        # BEGIN SOLUTION
        walk = node
        while walk is not self.root_node:
            if walk.lock_ref == 0:
                raise ValueError("dec_lock_ref: a node on the path holds no lock")
            walk = walk.parent
        while node is not self.root_node:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._evictable += len(node.value)
                self._protected -= len(node.value)
            node = node.parent
        # END SOLUTION

    def evictable_size(self) -> int:
        """Blocks in nodes with lock_ref 0 (the root excluded): what evict could free."""
        # BEGIN SOLUTION
        return self._evictable
        # END SOLUTION

    def protected_size(self) -> int:
        """Blocks in nodes with lock_ref above 0 (the root excluded)."""
        # BEGIN SOLUTION
        return self._protected
        # END SOLUTION

    def _child_key(self, key: list[int]) -> tuple[int, ...]:
        """The key of a child whose key starts with `key`: its first block, tuple(key[:block_size])."""
        # BEGIN SOLUTION
        return tuple(key[: self.block_size])
        # END SOLUTION

    def _match_len(self, a: list[int], b: list[int]) -> int:
        """Tokens of the longest common prefix of a and b, in whole blocks (a multiple of block_size)."""
        # BEGIN SOLUTION
        S, n = self.block_size, 0
        while n + S <= min(len(a), len(b)) and a[n : n + S] == b[n : n + S]:
            n += S
        return n
        # END SOLUTION

    def _split_node(self, child: TreeNode, n: int) -> TreeNode:
        """Cut `child` after n tokens (a multiple of block_size, 0 < n < len(child.key)): a new node takes
        key[:n], value[:n // block_size], the child's lock_ref and last_access_time and the child's place
        under its parent; the child keeps the rest and hangs below the new node. Returns the new node."""
        # BEGIN SOLUTION
        head = TreeNode(child.key[:n], child.value[: n // self.block_size], child.parent)
        head.lock_ref, head.last_access_time = child.lock_ref, child.last_access_time
        child.parent.children[self._child_key(head.key)] = head
        child.key, child.value, child.parent = child.key[n:], child.value[n // self.block_size:], head
        head.children[self._child_key(child.key)] = child
        return head
        # END SOLUTION
