# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 127: each a copy of solutions/127_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'starts_with_one_reference': Plant([
        ('        self.ref_counts = [0] * num_blocks',
         '        self.ref_counts = [1] * num_blocks'),
    ], WA, 'the pool starts with every block free'),
    'freed_blocks_to_the_front': Plant([
        ('self.free_block_ids.append(b)',
         'self.free_block_ids.appendleft(b)'),
    ], WA, 'freed blocks joined at its END'),
    'allocates_in_reverse_order': Plant([
        ('        blocks = [self.free_block_ids.popleft() for _ in range(n)]',
         '        blocks = [self.free_block_ids.popleft() for _ in range(n)][::-1]'),
    ], WA, 'in queue order'),
    'partial_allocation_on_failure': Plant([
        ('        if n > len(self.free_block_ids):\n            return None\n        blocks = [self.free_block_ids.popleft() for _ in range(n)]',
         '        blocks = [self.free_block_ids.popleft()\n                  for _ in range(min(n, len(self.free_block_ids)))]\n        if len(blocks) < n:\n            return None'),
    ], WA, 'a failed allocate changes nothing'),
    'returns_the_blocks_it_found': Plant([
        ('        if n > len(self.free_block_ids):\n            return None\n',
         '        n = min(n, len(self.free_block_ids))\n'),
    ], WA, 'returns None when fewer than n blocks are free'),
    'allocate_leaves_zero_references': Plant([
        ('            self.ref_counts[b] = 1\n',
         '            pass\n'),
    ], WA, 'with exactly 1 reference'),
    'copy_on_write_without_copy': Plant([
        ('        kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
         ''),
    ], WA, 'K AND V of EVERY layer'),
    'copies_k_only': Plant([
        ('kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
         'kv_cache[0, :, new[0]] = kv_cache[0, :, block_table[-1]]'),
    ], WA, 'K AND V of EVERY layer'),
    'copies_layer_0_only': Plant([
        ('kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]',
         'kv_cache[:, 0, new[0]] = kv_cache[:, 0, block_table[-1]]'),
    ], WA, 'K AND V of EVERY layer'),
    'old_block_keeps_its_reference': Plant([
        ('        pool.free([block_table[-1]])\n',
         ''),
    ], WA, 'drop one reference to the old block'),
    'double_free_not_detected': Plant([
        ('if blocks.count(b) > self.ref_counts[b]:',
         'if False:'),
    ], WA, 'must raise ValueError'),
    'double_free_raises_runtime_error': Plant([
        ('                raise ValueError(f"free: block',
         '                raise RuntimeError(f"free: block'),
    ], WA, 'raise ValueError, and only for a double free'),
    'repeated_id_called_a_double_free': Plant([
        ('if blocks.count(b) > self.ref_counts[b]:',
         'if blocks.count(b) > 1 or self.ref_counts[b] == 0:'),
    ], WA, 'this free is valid'),
    'failed_free_changes_some': Plant([
        ('        for b in set(blocks):\n            if blocks.count(b) > self.ref_counts[b]:',
         "        for b in blocks:\n            self.ref_counts[b] -= 1\n        for b in blocks:\n            self.ref_counts[b] += 1\n            if self.ref_counts[b] == 0:\n                raise ValueError('double free')\n        for b in set(blocks):\n            if False:"),
    ], WA, 'a failed free changes nothing'),
    'repeated_id_dropped_once': Plant([
        ('        for b in blocks:\n            self.ref_counts[b] -= 1',
         '        for b in dict.fromkeys(blocks):\n            self.ref_counts[b] -= 1'),
    ], WA, 'one reference per block'),
    'joins_the_queue_too_early': Plant([
        ('            if self.ref_counts[b] == 0:\n                self.free_block_ids.append(b)',
         '            if self.ref_counts[b] <= 1 and b not in self.free_block_ids:\n                self.free_block_ids.append(b)'),
    ], WA, 'when its count reaches 0, not before'),
    'free_empties_its_argument': Plant([
        ('        for b in blocks:\n            self.ref_counts[b] -= 1',
         '        while blocks:\n            b = blocks.pop(0)\n            self.ref_counts[b] -= 1'),
    ], WA, 'free must not modify the list'),
    'fork_returns_the_same_list': Plant([
        ('        return list(block_table)',
         '        return block_table'),
    ], WA, 'must return a NEW list'),
    'fork_adds_no_reference': Plant([
        ('            self.ref_counts[b] += 1\n        return list',
         '            pass\n        return list'),
    ], WA, 'fork adds one reference'),
    'slot_off_by_one': Plant([
        ('return block_table[-1] * block_size + num_tokens % block_size',
         'return block_table[-1] * block_size + num_tokens % block_size + 1'),
    ], WA, 'off by one'),
    'copy_on_write_never': Plant([
        ('    elif pool.ref_count(block_table[-1]) > 1:',
         '    elif False:'),
    ], WA, 'is shared (ref'),
    'new_block_one_token_late': Plant([
        ('if num_tokens % block_size == 0:',
         'if num_tokens % block_size == 1:'),
    ], WA, 'falls inside the last block'),
    'shared_block_copied_before_a_new_one': Plant([
        ('    if num_tokens % block_size == 0:                               # the new token opens a block',
         '    if num_tokens % block_size == 0 and pool.ref_count(block_table[-1]) == 1 if block_table else num_tokens % block_size == 0:'),
    ], WA, 'starts a new block'),
    'frees_the_old_block_before_allocating': Plant([
        ('copy before writing\n        new = pool.allocate(1)',
         'copy before writing\n        pool.free([block_table[-1]])\n        new = pool.allocate(1)'),
        ('        pool.free([block_table[-1]])\n        block_table[-1] = new[0]',
         '        block_table[-1] = new[0]'),
    ], WA, 'changes nothing (table, pool, kv_cache)'),
}
