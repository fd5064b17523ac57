"""KVCacheCoordinator: the KV cache of a hybrid model, one group per kind of layer over ONE block pool.

vLLM's hybrid KV cache manager (vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md;
vllm/v1/core/kv_cache_coordinator.py@00b08dc, `HybridKVCacheCoordinator`): the layers are split into KV cache
groups of one attention type each; every group has the same page size (bytes of one block), so one pool of
blocks serves them all; each group has its own manager (single_type_manager.py, sliding_window_manager.py,
state_manager.py) and block table per request. A request's prefix hit is the AGREEMENT of the groups: a length
every group can serve. vLLM finds it as a fixed point: each group either accepts the candidate length or cuts
it to its own longest hit within it, until a whole pass changes nothing (full attention, searched first, gives
the first bound). Here a group with several layers stands for them all: the bytes of its layers are its page
(studies/hybrid_memory.py does that arithmetic).

`sliding_window_rule=False` gives the sliding-window groups full attention's hit rule (every block of the
prefix must still be cached), the baseline that notebook 19 measures the rule against: the rule is chosen by
kind, a full-attention manager searching the group's entries of the index.
"""
from __future__ import annotations

from dataclasses import dataclass

from .block_hash_index import BlockHashIndex
from .block_pool import BlockPool
from .single_type_manager import FullAttentionManager, SingleTypeManager
from .sliding_window_manager import SlidingWindowManager
from .state_manager import StateManager
from .validation import check_positive_int

GROUP_KINDS = ("full_attention", "sliding_window", "state")
# a group's kind chooses its manager class, as vLLM's `spec_manager_map` maps a spec type to one
MANAGER_OF_KIND: dict[str, type[SingleTypeManager]] = {
    "full_attention": FullAttentionManager,
    "sliding_window": SlidingWindowManager,
    "state": StateManager,
}


@dataclass(frozen=True)
class KVCacheGroupSpec:
    """One KV cache group: its kind (GROUP_KINDS) and, for a sliding window, its width in tokens."""

    kind: str
    sliding_window: int | None = None

    def __post_init__(self):
        if self.kind not in GROUP_KINDS:
            raise ValueError(f"kind: expected one of {GROUP_KINDS}, got {self.kind!r}")
        if (self.kind == "sliding_window") != (self.sliding_window is not None):
            raise ValueError(f"sliding_window: expected a width for a sliding_window group only, got "
                             f"{self.sliding_window!r} for {self.kind!r}")


class KVCacheCoordinator:
    """`num_blocks` blocks of `block_size` tokens shared by one manager per group spec."""

    def __init__(self, num_blocks: int, block_size: int, groups: list[KVCacheGroupSpec],
                 sliding_window_rule: bool = True):
        check_positive_int("num_blocks", num_blocks)
        if not groups:
            raise ValueError("groups: expected at least one KVCacheGroupSpec, got none")
        self.block_size = block_size
        self.index = BlockHashIndex()
        self.pool = BlockPool(num_blocks, on_evict=self.index.drop)
        (self.null_block,) = self.pool.allocate(1)      # vLLM's block 0: never freed, stands in for skips
        self.specs = list(groups)
        self.sliding_window_rule = sliding_window_rule
        self.managers: list[SingleTypeManager] = [self._manager(spec, i) for i, spec in enumerate(groups)]
        self.hit_searchers = [self._hit_searcher(spec, i) for i, spec in enumerate(groups)]

    def _manager(self, spec: KVCacheGroupSpec, group_id: int) -> SingleTypeManager:
        """A manager of the class MANAGER_OF_KIND names for the spec's kind."""
        window = () if spec.sliding_window is None else (spec.sliding_window,)
        return MANAGER_OF_KIND[spec.kind](self.pool, self.block_size, *window, self.null_block, self.index,
                                          group_id)

    def _hit_searcher(self, spec: KVCacheGroupSpec, group_id: int) -> SingleTypeManager:
        """Who finds the group's prefix hits: its own manager, or, for a sliding-window group without the
        sliding-window rule, a full-attention manager over the group's entries of the index (it holds no
        table; only its find_longest_cache_hit is called)."""
        if spec.kind == "sliding_window" and not self.sliding_window_rule:
            return self._manager(KVCacheGroupSpec("full_attention"), group_id)
        return self.managers[group_id]

    def find_longest_cache_hit(self, hashes: list[int], max_length: int) -> tuple[list[list[int]], int]:
        """(each group's hit blocks, the hit length in tokens) of the longest prefix of at most
        `max_length` tokens that EVERY group can serve."""
        length = max_length // self.block_size * self.block_size
        while True:
            hits, agreed = [], length
            for searcher in self.hit_searchers:
                hit = searcher.find_longest_cache_hit(hashes, agreed)
                agreed = min(agreed, len(hit) * self.block_size)
                hits.append(hit)
            if agreed == length:
                return [hit[: length // self.block_size] for hit in hits], length
            length = agreed

    def num_blocks_to_allocate(self, request_id: str, num_tokens: int, computed_blocks=None) -> int:
        """Blocks the pool must give all groups for `allocate_slots` with the same arguments."""
        computed = computed_blocks or [[] for _ in self.managers]
        return sum(manager.num_blocks_to_allocate(request_id, num_tokens, blocks)
                   for manager, blocks in zip(self.managers, computed))

    def allocate_slots(self, request_id: str, num_tokens: int, computed_blocks=None) -> bool:
        """Table entries for `num_tokens` tokens in every group; False, and nothing changed, when the pool
        cannot give every group what it needs.

        A new request's hit is touched in EVERY group before any group takes a fresh block, as vLLM's
        `allocate_new_computed_blocks` does (its issue #33775): a group's hit may sit at the front of the free
        queue, where another group's fresh allocation would take it and put it in two groups' tables.
        """
        if self.num_blocks_to_allocate(request_id, num_tokens, computed_blocks) > self.pool.num_free():
            return False
        computed = computed_blocks or [[] for _ in self.managers]
        for manager, blocks in zip(self.managers, computed):
            manager.add_computed_blocks(request_id, blocks)
        for manager in self.managers:
            manager.allocate_new_blocks(request_id, num_tokens)
        return True

    def cache_blocks(self, request_id: str, hashes: list[int], num_tokens: int) -> None:
        for manager in self.managers:
            manager.cache_blocks(request_id, hashes, num_tokens)

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> int:
        """Free what no later token reads, in every group; returns how many references were dropped."""
        return sum(len(m.remove_skipped_blocks(request_id, num_computed_tokens)) for m in self.managers)

    def free(self, request_id: str) -> None:
        for manager in self.managers:
            manager.free(request_id)

    def num_blocks_held(self, request_id: str) -> list[int]:
        """Per group, the request's table entries that are real blocks (not the null block)."""
        return [sum(1 for b in m.block_tables[request_id] if b != self.null_block) for m in self.managers]
