"""TwoTierCache: the two-tier prefix lookup and eviction alone, over block hashes (exercise 141's oracle;
its contract, clause by clause, is in solutions/141_two_tier_cache.py).

The rules of `TieredBlockManager` (tiered_block_manager.py) without tokens, sequences or K/V: a prompt is
the list of its blocks' chained hashes (None for a block with no hash: a partial last block). The GPU tier is
`num_gpu_blocks` blocks with reference counts and a free queue whose front is reused (and so evicted) first;
a freed block keeps its hash until then. The CPU tier is `num_cpu_blocks` slots in LRU order. Notebook 22
walks through it; `tests/core/test_tiered_block_manager.py` checks that it makes the same decisions as the
TieredBlockManager on the same prompts.

Why a second copy of the rules, when TieredBlockManager registers, evicts and looks up through
BlockManager's one version of each: this module is what the learner writes in exercise 141, state and all
(`gpu_hash_to_block`, the free queue, the stale hash dropped in `_new_block`), and the judge compares the
learner's state with this one's after every call. Built on BlockManager, it would need sequences and token ids
the exercise leaves out, and its state would not be the learner's.
"""
from __future__ import annotations

from collections import OrderedDict, deque

from .validation import check_positive_int


class TwoTierCache:
    def __init__(self, num_gpu_blocks: int, num_cpu_blocks: int):
        check_positive_int("num_gpu_blocks", num_gpu_blocks)
        check_positive_int("num_cpu_blocks", num_cpu_blocks)
        self.gpu_free: deque[int] = deque(range(num_gpu_blocks))     # front: reused (evicted) first
        self.gpu_ref_counts: list[int] = [0] * num_gpu_blocks
        self.gpu_hash_to_block: dict[int, int] = {}
        self.gpu_block_hash: list[int | None] = [None] * num_gpu_blocks
        self.cpu_lru: OrderedDict[int, int] = OrderedDict()           # hash -> slot, least recent first
        self.cpu_free: deque[int] = deque(range(num_cpu_blocks))
        self.cpu_pins: list[int] = [0] * num_cpu_blocks               # queued loads reading each slot
        self.saves: list[tuple[int, int]] = []                        # (gpu_block, cpu_slot)
        self.loads: list[tuple[int, int]] = []                        # (cpu_slot, gpu_block)

    def lookup(self, block_hashes: list[int | None]) -> list[str]:
        """The tier that serves each block of the longest cached prefix, "gpu" before "cpu"; it ends at the
        first block that has no hash or is on neither tier. Changes nothing."""
        tiers = []
        for h in block_hashes:
            if h is None:
                break
            if h in self.gpu_hash_to_block:
                tiers.append("gpu")
            elif h in self.cpu_lru:
                tiers.append("cpu")
            else:
                break
        return tiers

    def allocate(self, block_hashes: list[int | None]) -> list[int] | None:
        """A block table for a prompt; None, with nothing changed, when too few GPU blocks are free."""
        tiers = self.lookup(block_hashes)
        gpu_hits = [self.gpu_hash_to_block[h] for h, t in zip(block_hashes, tiers) if t == "gpu"]
        needed = len(block_hashes) - len(gpu_hits) + sum(1 for b in gpu_hits if self.gpu_ref_counts[b] == 0)
        if needed > len(self.gpu_free):
            return None
        for h, t in reversed(list(zip(block_hashes, tiers))):   # every hit taken before any eviction;
            if t == "gpu":
                self._take(self.gpu_hash_to_block[h])
            else:
                self.cpu_pins[self.cpu_lru[h]] += 1
                self.cpu_lru.move_to_end(h)                     # last block first: the first ends newest
        table = []
        for i, h in enumerate(block_hashes):
            if i < len(tiers) and tiers[i] == "gpu":
                table.append(self.gpu_hash_to_block[h])
                continue
            block = self._new_block()
            if h is not None:
                self.gpu_block_hash[block] = h
                self.gpu_hash_to_block[h] = block
            if i < len(tiers):
                self.loads.append((self.cpu_lru[h], block))
            table.append(block)
        return table

    def free(self, block_table: list[int]) -> None:
        """One reference less on each block of a table allocate returned, the last block first; at 0 a block
        joins the END of the free queue, keeping its hash (it can still be hit until it is reused)."""
        for block in reversed(block_table):
            self.gpu_ref_counts[block] -= 1
            if self.gpu_ref_counts[block] == 0:
                self.gpu_free.append(block)

    def take_transfers(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(saves, loads) queued since the last call, in order, and the loads' slots unpinned."""
        saves, loads = self.saves, self.loads
        self.saves, self.loads = [], []
        for slot, _ in loads:
            self.cpu_pins[slot] -= 1
        return saves, loads

    def _take(self, block: int) -> None:
        """A GPU hit: one more reference; a free block leaves the free queue (it is in use again)."""
        if self.gpu_ref_counts[block] == 0:
            self.gpu_free.remove(block)
        self.gpu_ref_counts[block] += 1

    def _new_block(self) -> int:
        """The front of the free queue, one reference; the cached block it held is evicted from the GPU and
        written out, unless the CPU holds it already."""
        block = self.gpu_free.popleft()
        self.gpu_ref_counts[block] = 1
        h = self.gpu_block_hash[block]
        self.gpu_block_hash[block] = None
        if h is not None and self.gpu_hash_to_block.get(h) == block:    # (else a newer block holds h)
            del self.gpu_hash_to_block[h]
            if h not in self.cpu_lru:
                self._write_out(block, h)
        return block

    def _write_out(self, block: int, h: int) -> None:
        """A CPU slot for `h`, most recently used: a free one, else the least recently used slot no queued
        load reads (its block is dropped for good); none: the block is not kept."""
        if self.cpu_free:
            slot = self.cpu_free.popleft()
        else:
            victim = next((v for v, s in self.cpu_lru.items() if self.cpu_pins[s] == 0), None)
            if victim is None:
                return
            slot = self.cpu_lru.pop(victim)
        self.cpu_lru[h] = slot
        self.saves.append((block, slot))
