"""Exercise 141 (medium): the two-tier prefix cache, a CPU tier under the GPU pool. Notebook 22, "A second
tier: KV blocks in CPU memory".
Grade: python practice/judge.py 141

A prompt is given as the chained hashes of its blocks (block i's hash names blocks 0..i, so a hash is a
whole prefix), None for a block with no hash (its partial last block), e.g. [h0, h1, None].

The GPU tier: blocks 0..num_gpu_blocks-1, a reference count each, and a free queue `gpu_free`. A block is
taken from the FRONT of the free queue and a block whose last reference goes joins its END, keeping its
hash: it can be hit again until it is taken, and taking it EVICTS it from the GPU tier (the GPU's LRU).
`gpu_hash_to_block` maps the hash of every block the GPU holds to its block.
The CPU tier: slots 0..num_cpu_blocks-1; `cpu_lru` maps the hash of every block the CPU holds to its slot,
least recently used first; `cpu_free` holds the slots never used, front first.

    lookup    which tier serves each block of the prompt's cached prefix: "gpu" if the GPU holds it, else
              "cpu" if the CPU does; the prefix ends at the first block that is on neither (or has no hash)
    allocate  GPU hits are shared, CPU hits are LOADED into fresh GPU blocks, the rest get fresh blocks
    evict     a fresh block that held a hash is evicted from the GPU: it is WRITTEN OUT to the CPU unless
              the CPU holds that hash already; the CPU takes a free slot, else evicts its least recently
              used block (dropped for good), never one that a queued load still reads
    transfers the copies are only queued (`saves`, `loads`): the engine runs them, saves first, before the
              step's forward, and `take_transfers` hands them over

Example (3 GPU blocks, 4 CPU slots): a = allocate([1, 2, None]) is [0, 1, 2]; free(a) leaves gpu_free
[2, 1, 0] (last block first). allocate([7, 8, None]) takes 2 (no hash), then 1 and 0, evicting hash 2 and
hash 1: saves [(1, 0), (0, 1)], cpu_lru {2: 0, 1: 1}. Once that table is freed, lookup([1, 2, None]) is
["cpu", "cpu"], and allocate([1, 2, None]) returns [0, 1, 2] with loads [(1, 0), (0, 1)] (evicting 8 and 7
to slots 2 and 3 on the way); 1 and 2 stay on the CPU.

The judge reads, after every call: gpu_free, gpu_ref_counts, gpu_hash_to_block, cpu_lru (in order),
cpu_free, saves and loads (keep these names; the rest of the state is yours).
"""
from __future__ import annotations

from collections import OrderedDict, deque  # noqa: F401 (the stub leaves them to you)


class TwoTierCache:
    def __init__(self, num_gpu_blocks: int, num_cpu_blocks: int):
        """Both tiers empty: gpu_free = deque([0, .., num_gpu_blocks - 1]), every reference count 0,
        gpu_hash_to_block = {}, cpu_lru = OrderedDict(), cpu_free = deque([0, .., num_cpu_blocks - 1]),
        saves = loads = []. Add what else you need (which hash each GPU block holds; the pins)."""
        raise NotImplementedError("TwoTierCache.__init__: your code here (exercise 141)")

    def lookup(self, block_hashes: list[int | None]) -> list[str]:
        """The tier serving each block of the longest cached prefix of `block_hashes`.

        Returns: a list of "gpu" / "cpu", one per block from block 0, as long as the prefix: it ends at the
            first block that has no hash (None) or that neither tier holds. The GPU serves before the CPU.
        Changes nothing (no LRU order either).
        Example: the GPU holds h0, the CPU h1 and h3: lookup([h0, h1, h2, h3]) == ["gpu", "cpu"].
        """
        raise NotImplementedError("TwoTierCache.lookup: your code here (exercise 141)")

    def allocate(self, block_hashes: list[int | None]) -> list[int] | None:
        """A block table for a prompt of len(block_hashes) blocks; None, with NOTHING changed, when fewer GPU
        blocks are free than it needs: one per block the GPU does not serve, plus one per GPU hit that sits
        in the free queue (a hit takes it out).

        Contract, in this order:
          1. tiers = lookup(block_hashes);
          2. take every hit before any fresh block, walking the prefix from its LAST block to its first:
             a GPU hit gains a reference (a free block leaves the free queue, from wherever it sits); a CPU
             hit's slot is pinned (a queued load reads it) and becomes the most recently used
             (cpu_lru.move_to_end), so the prompt's first block ends the newest;
          3. then for each block i in order: a GPU hit's block goes in the table; any other block takes a
             fresh block from the FRONT of gpu_free (reference count 1). If that block held a hash it is
             evicted: its hash leaves gpu_hash_to_block and, if the CPU does not hold that hash, it is
             written out: a slot from the front of cpu_free, else the slot of the least recently used
             block in cpu_lru whose slot no queued load reads (that block leaves the CPU), else (every slot
             pinned) nowhere: nothing is saved. A written-out block enters cpu_lru as the most recently
             used and (gpu block, slot) is appended to saves. Then the fresh block takes block i's hash
             (gpu_hash_to_block, if block i has one), and a CPU hit appends (its slot, the fresh block) to
             loads. A CPU hit stays on the CPU.
        Returns: the block table (list of GPU block ids, one per block), or None.
        """
        raise NotImplementedError("TwoTierCache.allocate: your code here (exercise 141)")

    def free(self, block_table: list[int]) -> None:
        """Drop one reference to each block of a table that allocate returned, its LAST block first; a block
        reaching 0 joins the END of gpu_free and keeps its hash (gpu_hash_to_block unchanged)."""
        raise NotImplementedError("TwoTierCache.free: your code here (exercise 141)")

    def take_transfers(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Returns (saves, loads) queued since the last call, in order, and empties both queues; the slots
        those loads read are no longer pinned (the engine runs every copy of the step in order)."""
        raise NotImplementedError("TwoTierCache.take_transfers: your code here (exercise 141)")

    def _take(self, block: int) -> None:
        """A GPU hit: one more reference; a free block leaves the free queue."""
        raise NotImplementedError("TwoTierCache._take: your code here (exercise 141)")

    def _new_block(self) -> int:
        """The front of gpu_free with one reference, its cached block (if any) evicted and written out."""
        raise NotImplementedError("TwoTierCache._new_block: your code here (exercise 141)")

    def _write_out(self, block: int, h: int) -> None:
        """A slot for the evicted block `h` (a free one, else the LRU unpinned one), and its save queued."""
        raise NotImplementedError("TwoTierCache._write_out: your code here (exercise 141)")
