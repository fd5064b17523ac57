# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 129: each a copy of solutions/129_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'hash_map_under_another_name': Plant([
        ('self.hash_to_block_id', 'self.hash_map', 6),
    ], WA, 'the judge reads them'),
    'compute_hash_ignores_prefix': Plant([
        ('        if prefix != -1:\n            h.update(prefix.to_bytes(8, "little"))\n',
         ''),
    ], WA, 'chain the prefix'),
    'prefix_zero_treated_as_none': Plant([
        ('if prefix != -1:',
         'if prefix > 0:'),
    ], WA, '0 is a real prefix'),
    'tokens_hashed_as_int32': Plant([
        ('h.update(np.array(token_ids, dtype=np.int64)',
         'h.update(np.array(token_ids, dtype=np.int32)'),
    ], WA, 'np.array(token_ids, dtype=np.int64).tobytes()'),
    'hash_not_chained_in_allocate': Plant([
        ('h = self.compute_hash(token_ids, h) if len',
         'h = self.compute_hash(token_ids) if len'),
        ('            h = self.compute_hash(token_ids, h)\n            block_id',
         '            h = self.compute_hash(token_ids)\n            block_id'),
    ], WA, 'hashes are chained'),
    'lookup_not_chained': Plant([
        ('            h = self.compute_hash(token_ids, h)\n            block_id',
         '            h = self.compute_hash(token_ids)\n            block_id'),
    ], WA, 'a missed hit'),
    'hashes_without_self_compute_hash': Plant([
        ('h = self.compute_hash(token_ids, h) if len',
         'h = BlockManager.compute_hash(token_ids, h) if len'),
    ], WA, 'hash only through self.compute_hash'),
    'hashes_partial_blocks': Plant([
        ('h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1',
         'h = self.compute_hash(token_ids, h)'),
    ], WA, 'only FULL blocks get a hash'),
    'hit_without_token_check': Plant([
        ('if block_id == -1 or self.blocks[block_id].token_ids != token_ids:',
         'if block_id == -1:'),
    ], WA, 'a false hit'),
    'stale_entry_kept': Plant([
        ('        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:\n            del self.hash_to_block_id[block.hash]\n',
         ''),
    ], WA, 'a stale entry'),
    'deletes_the_entry_of_another_block': Plant([
        ('        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:\n            del self.hash_to_block_id[block.hash]\n',
         '        if block.hash != -1:\n            self.hash_to_block_id.pop(block.hash, None)\n'),
    ], WA, 'ANOTHER block'),
    'reused_block_keeps_its_hash': Plant([
        ('        block.reset()\n',
         '        block.ref_count = 1\n'),
    ], WA, 'a reused block is reset'),
    'full_prompt_hit_not_capped': Plant([
        ('range((seq.num_tokens - 1) // self.block_size)',
         'range(seq.num_tokens // self.block_size)'),
    ], WA, 'cap the hit'),
    'hits_not_counted_as_cached': Plant([
        ('                seq.num_cached_tokens += self.block_size',
         '                pass'),
    ], WA, 'grows by block_size for every hit'),
    'hit_in_use_gains_no_reference': Plant([
        ('                block.ref_count += 1',
         '                pass'),
    ], WA, 'a hit in use gains a reference'),
    'free_hit_left_in_the_queue': Plant([
        ('            if i < len(hits) and hits[i] in self.used_block_ids:',
         '            if i < len(hits) and hits[i] in self.free_block_ids:\n                block = self.blocks[hits[i]]\n                block.ref_count = 1\n                self.used_block_ids.add(hits[i])\n            elif i < len(hits) and hits[i] in self.used_block_ids:'),
    ], WA, 'a freed hit is taken out of the queue'),
    'miss_from_the_back': Plant([
        ('else self.free_block_ids[0])',
         'else self.free_block_ids[-1])'),
    ], WA, 'fresh blocks from the FRONT'),
    'deallocate_not_reversed': Plant([
        ('for block_id in reversed(seq.block_table):',
         'for block_id in seq.block_table:'),
    ], WA, 'frees the LAST block first'),
    'deallocate_keeps_num_cached_tokens': Plant([
        ('        seq.num_cached_tokens = 0\n',
         ''),
    ], WA, 'sets seq.num_cached_tokens = 0'),
    'deallocate_keeps_used_block_ids': Plant([
        ('                self.used_block_ids.remove(block_id)\n',
         ''),
    ], WA, 'used_block_ids holds exactly'),
    'freed_blocks_forget_their_hash': Plant([
        ('                self.free_block_ids.append(block_id)',
         '                self.free_block_ids.append(block_id)\n                self.hash_to_block_id.pop(block.hash, None)'),
    ], WA, 'freed blocks keep their hash'),
    'can_allocate_ignores_free_hits': Plant([
        ('reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)',
         'reused_free = 0'),
    ], WA, 'sits in the free queue needs a free block'),
    'can_allocate_counts_every_hit': Plant([
        ('reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)',
         'reused_free = len(hits)'),
    ], WA, 'a hit in use needs no free block'),
    'can_allocate_sets_the_cached_tokens': Plant([
        ('        reused_free = sum(',
         '        seq.num_cached_tokens = len(hits) * self.block_size\n        reused_free = sum('),
    ], WA, 'it changes nothing'),
    'may_append_nano_vllm_test': Plant([
        ('        if (len(seq) - 1) % self.block_size == 0:\n            block_table',
         '        if len(seq) % self.block_size == 1:\n            block_table'),
    ], WA, '(len(seq) - 1) % block_size == 0'),
    'can_append_nano_vllm_test': Plant([
        ('return len(self.free_block_ids) >= ((len(seq) - 1) % self.block_size == 0)',
         'return len(self.free_block_ids) >= (len(seq) % self.block_size == 1)'),
    ], WA, '(len(seq) - 1) % block_size == 0'),
    'may_append_does_not_hash': Plant([
        ('            self.hash_to_block_id[h] = last.block_id',
         '            pass'),
    ], WA, 'hash it and map its hash'),
    'may_append_hash_not_chained': Plant([
        ('            h = self.compute_hash(token_ids, prefix)',
         '            h = self.compute_hash(token_ids)'),
    ], WA, "chain the filled block's hash"),
    'may_append_forgets_the_token_ids': Plant([
        ('            last.update(h, token_ids)',
         '            last.hash = h'),
    ], WA, 'keeps its token_ids with its hash'),
}
