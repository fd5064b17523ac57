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
        # BEGIN SOLUTION
        self.gpu_free: deque[int] = deque(range(num_gpu_blocks))     # front: taken (evicted) first
        self.gpu_ref_counts: list[int] = [0] * num_gpu_blocks
        self.gpu_hash_to_block: dict[int, int] = {}
        self.gpu_block_hash: list[int | None] = [None] * num_gpu_blocks  # the hash each block holds
        self.cpu_lru: OrderedDict[int, int] = OrderedDict()           # hash -> slot, least recent first
        self.cpu_free: deque[int] = deque(range(num_cpu_blocks))
        self.cpu_pins: list[int] = [0] * num_cpu_blocks               # queued loads reading each slot
        self.saves: list[tuple[int, int]] = []                        # (gpu_block, cpu_slot), in order
        self.loads: list[tuple[int, int]] = []                        # (cpu_slot, gpu_block), in order
        # END SOLUTION

    def lookup(self, block_hashes: list[int | None]) -> list[str]:
        """The tier serving each block of the longest cached prefix of `block_hashes`.

        Returns: a list of "gpu" / "cpu", one per block from block 0, as long as the prefix: it ends at the
            first block that has no hash (None) or that neither tier holds. The GPU serves before the CPU.
        Changes nothing (no LRU order either).
        Example: the GPU holds h0, the CPU h1 and h3: lookup([h0, h1, h2, h3]) == ["gpu", "cpu"].
        """
        # BEGIN SOLUTION
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
        # END SOLUTION

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
        # BEGIN SOLUTION
        tiers = self.lookup(block_hashes)
        gpu_hits = [self.gpu_hash_to_block[h] for h, t in zip(block_hashes, tiers) if t == "gpu"]
        needed = len(block_hashes) - len(gpu_hits) + sum(1 for b in gpu_hits if self.gpu_ref_counts[b] == 0)
        if needed > len(self.gpu_free):
            return None
        for h, t in reversed(list(zip(block_hashes, tiers))):
            if t == "gpu":
                self._take(self.gpu_hash_to_block[h])
            else:
                self.cpu_pins[self.cpu_lru[h]] += 1
                self.cpu_lru.move_to_end(h)
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
        # END SOLUTION

    def free(self, block_table: list[int]) -> None:
        """Drop one reference to each block of a table that allocate returned, its LAST block first; a block
        reaching 0 joins the END of gpu_free and keeps its hash (gpu_hash_to_block unchanged)."""
        # BEGIN SOLUTION
        for block in reversed(block_table):
            self.gpu_ref_counts[block] -= 1
            if self.gpu_ref_counts[block] == 0:
                self.gpu_free.append(block)
        # END SOLUTION

    def take_transfers(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Returns (saves, loads) queued since the last call, in order, and empties both queues; the slots
        those loads read are no longer pinned (the engine runs every copy of the step in order)."""
        # BEGIN SOLUTION
        saves, loads = self.saves, self.loads
        self.saves, self.loads = [], []
        for slot, _ in loads:
            self.cpu_pins[slot] -= 1
        return saves, loads
        # END SOLUTION

    def _take(self, block: int) -> None:
        """A GPU hit: one more reference; a free block leaves the free queue."""
        # BEGIN SOLUTION
        if self.gpu_ref_counts[block] == 0:
            self.gpu_free.remove(block)
        self.gpu_ref_counts[block] += 1
        # END SOLUTION

    def _new_block(self) -> int:
        """The front of gpu_free with one reference, its cached block (if any) evicted and written out."""
        # BEGIN SOLUTION
        block = self.gpu_free.popleft()
        self.gpu_ref_counts[block] = 1
        h = self.gpu_block_hash[block]
        self.gpu_block_hash[block] = None
        if h is not None and self.gpu_hash_to_block.get(h) == block:
            del self.gpu_hash_to_block[h]
            if h not in self.cpu_lru:
                self._write_out(block, h)
        return block
        # END SOLUTION

    def _write_out(self, block: int, h: int) -> None:
        """A slot for the evicted block `h` (a free one, else the LRU unpinned one), and its save queued."""
        # BEGIN SOLUTION
        if self.cpu_free:
            slot = self.cpu_free.popleft()
        else:
            victim = next((v for v, s in self.cpu_lru.items() if self.cpu_pins[s] == 0), None)
            if victim is None:
                return
            slot = self.cpu_lru.pop(victim)
        self.cpu_lru[h] = slot
        self.saves.append((block, slot))
        # END SOLUTION
