"""CpuBlockStore: the second tier of the prefix cache, KV blocks kept in CPU memory and found by block hash.

The bookkeeping of vLLM's CPU offloading (vllm-project/vllm@3a04cf8 vllm/v1/kv_offload/lru_manager.py,
`LRUOffloadingManager`): an ordered map from a block hash to the CPU slot that holds the block, least
recently used first; a lookup (`touch`) moves a block to the end; a store takes a free slot, else evicts the
least recently used block whose reference count is 0 (a block that a load in flight reads has one: vLLM's
`prepare_load` / `complete_load`); a block evicted here is dropped for good. Like the GPU tier
(block_manager.py), a hit needs the hash AND the token ids to match, so the store keeps each slot's token ids.
The tensors that hold the K/V live with the copies (engine/kv_offload.py); this is the index alone.
"""
from __future__ import annotations

from collections import OrderedDict, deque

from .validation import check_positive_int


class CpuBlockStore:
    """`num_cpu_blocks` slots 0..num_cpu_blocks-1; block hash -> slot, in LRU order (front: evicted next)."""

    def __init__(self, num_cpu_blocks: int):
        check_positive_int("num_cpu_blocks", num_cpu_blocks)
        self.num_cpu_blocks = num_cpu_blocks
        self.hash_to_slot: OrderedDict[int, int] = OrderedDict()
        self.free_slots: deque[int] = deque(range(num_cpu_blocks))
        self.token_ids: list[list[int]] = [[] for _ in range(num_cpu_blocks)]   # what each slot holds
        self.slot_hash: list[int] = [-1] * num_cpu_blocks                        # -1: none
        self.ref_counts: list[int] = [0] * num_cpu_blocks                       # loads in flight

    def __len__(self) -> int:
        return len(self.hash_to_slot)

    def lookup(self, block_hash: int, token_ids: list[int]) -> int | None:
        """The slot that holds this block (hash and token ids equal), or None; the LRU order is unchanged."""
        slot = self.hash_to_slot.get(block_hash)
        if slot is None or self.token_ids[slot] != list(token_ids):
            return None
        return slot

    def touch(self, slot: int) -> None:
        """The block in `slot` becomes the most recently used (a hit)."""
        self.hash_to_slot.move_to_end(self.slot_hash[slot])

    def store(self, block_hash: int, token_ids: list[int]) -> int | None:
        """A slot for a block written out from the GPU, most recently used: a free slot, else the slot of
        the least recently used block no load reads (that block is dropped for good); None when every slot
        is read by a load in flight (the block is then not kept). The hash must not be stored already."""
        if block_hash in self.hash_to_slot:
            raise ValueError(f"store: block hash {block_hash:#x} is already in slot "
                             f"{self.hash_to_slot[block_hash]} (write a block out once)")
        if self.free_slots:
            slot = self.free_slots.popleft()
        else:
            victim = next((h for h, s in self.hash_to_slot.items() if self.ref_counts[s] == 0), None)
            if victim is None:
                return None
            slot = self.hash_to_slot.pop(victim)
        self.hash_to_slot[block_hash] = slot
        self.slot_hash[slot] = block_hash
        self.token_ids[slot] = list(token_ids)
        return slot

    def pin(self, slot: int) -> None:
        """A load will read `slot` this step: it cannot be evicted until `unpin`."""
        self.ref_counts[slot] += 1

    def unpin(self, slot: int) -> None:
        if self.ref_counts[slot] == 0:
            raise ValueError(f"unpin: slot {slot} has no load in flight")
        self.ref_counts[slot] -= 1
