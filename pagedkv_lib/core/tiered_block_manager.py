"""TieredBlockManager: the prefix-caching BlockManager with a CPU tier under its GPU pool.

The GPU tier is BlockManager's (block_manager.py): a freed block keeps its hash and stays findable in the
pool's free queue until it is taken for other tokens, least recently released first: that is the GPU tier's
LRU eviction. Here an evicted block is written out to a `CpuBlockStore` (cpu_block_store.py) instead of
forgotten, and a prompt's prefix is looked up block by block, with the same chained hash as the key on both
tiers: a block the GPU holds is shared as before; a block only the CPU holds gets a fresh GPU block and is
LOADED back (counted as cached: it is not recomputed); the prefix ends at the first block neither holds.

This is the write-back policy of SGLang's HiCache (sgl-project/sglang@0050c57
python/sglang/srt/mem_cache/hiradix_cache.py: `evict` writes a node not yet backed up to host memory when
`write_policy == "write_back"`); vLLM's offloading connector writes THROUGH instead, storing every full block
once it is computed (vllm-project/vllm@7368908
vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py, `_get_reqs_to_store`), so that an
evicted block is already on the CPU. Both keep the CPU copy after a load back (a block on both tiers is not
written out again), and both refresh the CPU tier's LRU order on a hit.

The manager decides; it copies nothing. It queues, in the order they must run:
    saves  (gpu_block, cpu_slot): a block about to be reused, its K/V still the evicted tokens';
    loads  (cpu_slot, gpu_block): a CPU hit, into the block just allocated for it;
and the engine's connector (engine/kv_offload.py) takes them once per step (`take_transfers`) and runs every
save of the step before its loads, and all of them before the step's forward writes into the cache. A CPU
slot that a queued load reads is pinned until the transfers are taken, so no save of the same step can
overwrite it.
"""
from __future__ import annotations

from .block_manager import BlockManager
from .cpu_block_store import CpuBlockStore
from .sequence import Sequence


class TieredBlockManager(BlockManager):
    def __init__(self, num_blocks: int, block_size: int, num_cpu_blocks: int):
        super().__init__(num_blocks, block_size)
        self.cpu = CpuBlockStore(num_cpu_blocks)
        self.saves: list[tuple[int, int]] = []        # (gpu_block, cpu_slot), queued this step
        self.loads: list[tuple[int, int]] = []        # (cpu_slot, gpu_block), queued this step
        self.num_saved_blocks = 0                     # totals since the start
        self.num_loaded_blocks = 0
        self.admissions: list[tuple[int, int]] = []   # per allocate: (tokens hit on the GPU, tokens loaded)

    def _new_block(self):
        """The front block of the free queue; if it still holds a cached block, that block is evicted from
        the GPU tier: written out to the CPU tier first, unless the CPU already holds it."""
        block = self.blocks[self.pool.free_block_ids[0]]
        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block.block_id \
                and self.cpu.lookup(block.hash, block.token_ids) is None:
            slot = self.cpu.store(block.hash, block.token_ids)
            if slot is not None:
                self.saves.append((block.block_id, slot))
                self.num_saved_blocks += 1
        return super()._new_block()

    def tiers(self, seq: Sequence) -> list[tuple[str, int]]:
        """Which tier serves each block of seq's cached prefix: ("gpu", block id) or ("cpu", slot), up to the
        first full block that neither holds (at most num_tokens - 1 tokens, as on one tier)."""
        out, h = [], -1
        for i in range((seq.num_tokens - 1) // self.block_size):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h)
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id != -1 and self.blocks[block_id].token_ids == token_ids:
                out.append(("gpu", block_id))
                continue
            slot = self.cpu.lookup(h, token_ids)
            if slot is None:
                break
            out.append(("cpu", slot))
        return out

    def can_allocate(self, seq: Sequence) -> bool:
        """Free blocks for every block not served by the GPU, and for GPU hits sitting in the free queue."""
        gpu = [b for tier, b in self.tiers(seq) if tier == "gpu"]
        reused_free = sum(1 for b in gpu if self.blocks[b].ref_count == 0)
        return self.pool.num_free() >= seq.num_blocks - len(gpu) + reused_free

    def allocate(self, seq: Sequence) -> None:
        """A block table for `seq`: GPU hits shared, CPU hits loaded into fresh blocks, the rest fresh.

        GPU hits are taken (touched) and CPU hits pinned and made the most recently used, the last block
        first so that the prompt's first block ends the newest (vLLM's `touch` walks the hashes reversed:
        a prefix outlives its continuations), BEFORE any fresh block is allocated: a fresh block
        evicts from the GPU's free queue and may write out to the CPU, and neither may take a block this
        prompt is about to use."""
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        served = self.tiers(seq)
        for tier, where in reversed(served):          # the last block first: the first ends the newest
            if tier == "gpu":
                self.pool.touch([where])
            else:
                self.cpu.pin(where)
                self.cpu.touch(where)
        h, num_gpu, num_loaded = -1, 0, 0
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            tier, where = served[i] if i < len(served) else ("", -1)
            if tier == "gpu":
                block = self.blocks[where]
                num_gpu += 1
            else:
                block = self._new_block()
                if h != -1:
                    block.update(h, token_ids)
                    self.hash_to_block_id[h] = block.block_id
                if tier == "cpu":
                    self.loads.append((where, block.block_id))
                    num_loaded += 1
            seq.block_table.append(block.block_id)
        seq.num_cached_tokens += (num_gpu + num_loaded) * self.block_size
        self.num_loaded_blocks += num_loaded
        self.admissions.append((num_gpu * self.block_size, num_loaded * self.block_size))

    def take_transfers(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(saves, loads) queued since the last call, in order; the loads' CPU slots are unpinned: the
        connector runs them in this order on one stream, so a later save into a slot comes after its load."""
        saves, loads = self.saves, self.loads
        self.saves, self.loads = [], []
        for slot, _ in loads:
            self.cpu.unpin(slot)
        return saves, loads
