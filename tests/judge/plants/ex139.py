# ruff: noqa: E501  (planted bugs quote whole lines of the solutions)
"""Planted bugs of exercise 139 (sliding-window KV cache group), each breaking one clause of the contract."""
from plants import WA, Plant

PLANTS = {
    'frees_one_block_inside_the_window': Plant([
        ('        num_skipped = max(0, num_computed_tokens - self.sliding_window + 1) // self.block_size',
         '        num_skipped = max(0, num_computed_tokens - self.sliding_window + 2) // self.block_size'),
    ], WA, 'no more and no fewer'),
    'keeps_one_block_too_many': Plant([
        ('        num_skipped = max(0, num_computed_tokens - self.sliding_window + 1) // self.block_size',
         '        num_skipped = max(0, num_computed_tokens - self.sliding_window) // self.block_size'),
    ], WA, 'no more and no fewer'),
    'frees_a_block_another_request_shares': Plant([
        ('        self.pool.free(removed)\n        return removed',
         '        self.pool.free([b for b in removed for _ in range(self.pool.ref_count(b))])\n        return removed'),
    ], WA, "drop only this request's reference"),
    'hit_not_touched': Plant([
        ('            self.pool.touch([b for b in computed_blocks if b != self.null_block])\n',
         ''),
    ], WA, 'pool.touch each one'),
    'frees_twice': Plant([
        ('            if table[i] == self.null_block:\n                break\n            removed.append(table[i])',
         '            removed.append(table[i])'),
    ], WA, 'never free a block twice'),
    'hit_searched_from_the_left': Plant([
        ('            if not blocks:\n                run = 0\n                continue',
         '            if not blocks:\n                run = 0\n                hits = hits[:i]\n                continue'),
        ('            if run >= self.num_window_blocks:\n                return hits[: i + run]',
         '            if False:\n                return hits[: i + run]'),
    ], WA, 'only the blocks of its window'),
    'hit_needs_the_whole_window': Plant([
        ('        self.num_window_blocks = -(-(sliding_window - 1) // block_size)',
         '        self.num_window_blocks = -(-sliding_window // block_size) + 1'),
    ], WA, 'only the blocks of its window'),
    'hit_ignores_max_length': Plant([
        ('        num_blocks = min(max_length // self.block_size, len(block_hashes))',
         '        num_blocks = len(block_hashes)'),
    ], WA, 'at most max_length'),
    'stale_hash_kept': Plant([
        ('            old = self.block_to_hash.pop(b, None)      # reused for other tokens: its hash is stale\n            if old is not None:\n                self.hash_to_blocks[old].remove(b)\n',
         '            pass\n'),
    ], WA, 'no longer holds its hash'),
    'first_block_keeps_its_hash': Plant([
        ('            if b != self.null_block:\n                self.hash_to_blocks',
         '            if b != self.null_block and not self.hash_to_blocks.get(h):\n                self.hash_to_blocks'),
    ], WA, 'a duplicate too'),
    'newest_duplicate_serves': Plant([
        ('            hits[i] = blocks[0]', '            hits[i] = blocks[-1]'),
    ], WA, 'registered FIRST'),
    'null_block_registered': Plant([
        ('            if b != self.null_block:\n                self.hash_to_blocks',
         '            if True:\n                self.hash_to_blocks'),
    ], WA, 'no hash ever names it'),
    'hit_touches_its_blocks': Plant([
        ('            hits[i] = blocks[0]', '            hits[i] = blocks[0]\n            self.pool.touch([blocks[0]])'),
    ], WA, 'only looks'),
    'touched_before_refusal': Plant([
        ('        if self.pool.num_free() < num_fresh + reused_free:',
         '        if request_id not in self.block_tables:\n            self.pool.touch([b for b in computed_blocks if b != self.null_block])\n        if self.pool.num_free() < num_fresh:'),
        ('        if request_id not in self.block_tables:\n            self.pool.touch([b for b in computed_blocks if b != self.null_block])\n            self.block_tables[request_id] = table',
         '        if request_id not in self.block_tables:\n            self.block_tables[request_id] = table'),
    ], WA, 'changes nothing: decide first'),
    'skipped_blocks_returned_oldest_first': Plant([
        ('        self.pool.free(removed)\n        return removed',
         '        removed.reverse()\n        self.pool.free(removed)\n        return removed'),
    ], WA, 'newest first'),
    'skipped_blocks_freed_oldest_first': Plant([
        ('        self.pool.free(removed)\n        return removed',
         '        self.pool.free(removed[::-1])\n        return removed'),
    ], WA, 'newest first'),
    'free_hits_not_counted': Plant([
        ('        if self.pool.num_free() < num_fresh + reused_free:',
         '        if self.pool.num_free() < num_fresh:'),
        ('        fresh = self.pool.allocate(num_fresh)\n',
         '        fresh = self.pool.allocate(num_fresh) or []\n'),
    ], WA, 'returns None, changing nothing'),
    'frees_first_block_first': Plant([
        ('        self.pool.free([b for b in reversed(table) if b != self.null_block])',
         '        self.pool.free([b for b in table if b != self.null_block])'),
    ], WA, 'last block first'),
}
