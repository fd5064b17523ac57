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
    """BlockManager plus what the CPU tier adds: eviction writes out (`_evict`), a lookup falls back to the
    CPU (`_find`), a CPU hit is pinned (`_take_hit`) and loaded (`_load`). Prefix lookup, allocation and
    registration are BlockManager's."""

    def __init__(self, num_blocks: int, block_size: int, num_cpu_blocks: int):
        super().__init__(num_blocks, block_size)
        self.cpu = CpuBlockStore(num_cpu_blocks)
        self.saves: list[tuple[int, int]] = []        # (gpu_block, cpu_slot), queued this step
        self.loads: list[tuple[int, int]] = []        # (cpu_slot, gpu_block), queued this step
        self.num_saved_blocks = 0                     # totals since the start
        self.num_loaded_blocks = 0
        self.admissions: list[tuple[int, int]] = []   # per allocate: (tokens hit on the GPU, tokens loaded)

    def _evict(self, block_id: int) -> None:
        """The pool hands the block out: if it still holds a cached block, that block is written out to the
        CPU tier first, unless the CPU already holds it; then BlockManager drops the stale entry."""
        block = self.blocks[block_id]
        if self.is_cached(block_id) and self.cpu.lookup(block.hash, block.token_ids) is None:
            slot = self.cpu.store(block.hash, block.token_ids)
            if slot is not None:
                self.saves.append((block_id, slot))
                self.num_saved_blocks += 1
        super()._evict(block_id)

    def _find(self, block_hash: int, token_ids: list[int]) -> tuple[str, int] | None:
        """The GPU's block, else ("cpu", the slot that holds these tokens under this hash), else None."""
        on_gpu = super()._find(block_hash, token_ids)
        if on_gpu is not None:
            return on_gpu
        slot = self.cpu.lookup(block_hash, token_ids)
        return None if slot is None else ("cpu", slot)

    def _take_hit(self, tier: str, where: int) -> None:
        """A CPU hit is pinned (no save may overwrite its slot before the load runs) and becomes the most
        recently used; a GPU hit is BlockManager's."""
        if tier != "cpu":
            super()._take_hit(tier, where)
            return
        self.cpu.pin(where)
        self.cpu.touch(where)

    def _load(self, tier: str, where: int, block_id: int) -> None:
        """Queue the copy of CPU slot `where` into the fresh GPU block `block_id`."""
        if tier != "cpu":
            super()._load(tier, where, block_id)
            return
        self.loads.append((where, block_id))
        self.num_loaded_blocks += 1

    def allocate(self, seq: Sequence) -> None:
        """BlockManager's allocate (GPU hits shared, CPU hits loaded into fresh blocks, the rest fresh), and
        what it admitted recorded: (tokens hit on the GPU, tokens loaded)."""
        num_loaded_before = self.num_loaded_blocks
        super().allocate(seq)
        loaded = (self.num_loaded_blocks - num_loaded_before) * self.block_size
        self.admissions.append((seq.num_cached_tokens - loaded, loaded))

    def take_transfers(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """(saves, loads) queued since the last call, in order; the loads' CPU slots are unpinned: the
        connector runs them in this order on one stream, so a later save into a slot comes after its load."""
        saves, loads = self.saves, self.loads
        self.saves, self.loads = [], []
        for slot, _ in loads:
            self.cpu.unpin(slot)
        return saves, loads
