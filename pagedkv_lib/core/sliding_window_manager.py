"""SlidingWindowManager: the KV cache group of sliding-window layers (Mistral, Gemma 3's local layers,
gpt-oss's alternating ones).

A sliding-window layer's query at position p reads the keys of positions p - W + 1 .. p only (W =
`sliding_window`, the query's own token included: gpt-oss's mask drops positions <= p - W,
gpt_oss/torch/model.py@0568dfc `sdpa`). Once `num_computed_tokens` tokens are computed, the next query is at
position num_computed_tokens, so no later query reads a position below num_computed_tokens - W + 1: the
blocks wholly below it go back to the pool and a null block takes their place in the table, while the
sequence runs (vLLM's `SlidingWindowManager.remove_skipped_blocks`, single_type_kv_cache_manager.py@002f349).

A prefix hit of L tokens needs only the blocks that the next query, at position L, reads: tokens L - W + 1 ..
L - 1, the last ceil((W - 1) / block_size) blocks before L (vLLM's `sliding_window_contiguous_blocks`). So the
search goes from the RIGHT and stops at the first run of that many cached blocks; a run that reaches the first
block is a hit too, however short. The blocks left of the run are null in the hit.

A window of one token (W = 1) reads nothing before the query, so here its hit is the null block in every
entry, as long as the candidate allows. vLLM's search (the same file) asks for cdiv(0, block_size) = 0 blocks
in a row and so stops at the first cached block from the right: its hit holds that block and ends there (and
is empty when no block of the candidate is cached). The two give the same length whenever the candidate's
last block is cached in the group; otherwise the course's is longer, and no query reads what it lacks.
"""
from __future__ import annotations

from .block_hash_index import BlockHashIndex
from .block_pool import BlockPool
from .single_type_manager import SingleTypeManager
from .validation import check_positive_int


class SlidingWindowManager(SingleTypeManager):
    """A group of layers that attend to the last `sliding_window` tokens."""

    def __init__(self, pool: BlockPool, block_size: int, sliding_window: int, null_block: int,
                 index: BlockHashIndex | None = None, group_id: int = 0):
        super().__init__(pool, block_size, null_block, index, group_id)
        check_positive_int("sliding_window", sliding_window)
        self.sliding_window = sliding_window
        self.num_window_blocks = -(-(sliding_window - 1) // block_size)   # blocks a hit needs

    def num_skipped_blocks(self, num_computed_tokens: int) -> int:
        """Leading blocks that no query after the first `num_computed_tokens` tokens reads."""
        return max(0, num_computed_tokens - self.sliding_window + 1) // self.block_size

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> list[int]:
        """Free the blocks that left the window, newest first, and put the null block in their place.

        Stops at the first null entry: everything left of it was removed before (or never held), so no
        block is freed twice. Returns the blocks whose reference was dropped.
        """
        table = self.block_tables[request_id]
        removed = []
        for i in range(min(self.num_skipped_blocks(num_computed_tokens), len(table)) - 1, -1, -1):
            if table[i] == self.null_block:
                break
            removed.append(table[i])
            table[i] = self.null_block
        self.pool.free(removed)
        return removed

    def find_longest_cache_hit(self, block_hashes: list[int], max_length: int) -> list[int]:
        """Search from the right for `num_window_blocks` cached blocks in a row, within `max_length`."""
        num_blocks = min(max_length // self.block_size, len(block_hashes))
        hits = [self.null_block] * num_blocks
        if self.num_window_blocks == 0:      # W = 1 reads nothing before the query (module docstring)
            return hits
        run = 0
        for i in range(num_blocks - 1, -1, -1):
            block = self.index.get(self.group_id, block_hashes[i])
            if block is None:
                run = 0
                continue
            hits[i] = block
            run += 1
            if run >= self.num_window_blocks:
                return hits[: i + run]
        return hits[:run]               # a run from the first block: a hit however short
