# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 140: each a copy of solutions/140_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import WA, Plant

PLANTS = {
    'freed_block_still_in_the_table': Plant([
        ('    del table[keep:]\n', ''),
    ], WA, 'still in seq.block_table'),
    'partial_block_hashed': Plant([
        ('for i in range(num_computed_tokens // bs):', 'for i in range(keep):'),
    ], WA, 'only FULL blocks'),
    'bonus_block_hashed': Plant([
        ('for i in range(num_computed_tokens // bs):', 'for i in range(len(seq) // bs):'),
    ], WA, 'bonus'),
    'shared_prefix_block_freed': Plant([
        ('for block_id in reversed(table[keep:]):', 'for block_id in reversed(table[:len(table) - keep]):'),
    ], WA, 'shared prefix'),
    'last_computed_token_slot_dropped': Plant([
        ('keep = -(-num_computed_tokens // bs)', 'keep = num_computed_tokens // bs'),
    ], WA, 'block of the last computed token'),
    'released_first_block_first': Plant([
        ('for block_id in reversed(table[keep:]):', 'for block_id in table[keep:]:'),
    ], WA, 'LAST block'),
    'accepted_drafts_never_hashed': Plant([
        ('        if block.hash == -1:\n', '        if block.hash == -2:\n'),
    ], WA, 'hash every full block'),
    'hash_not_chained': Plant([
        ('block_manager.compute_hash(token_ids, prefix)', 'block_manager.compute_hash(token_ids, -1)'),
    ], WA, 'chain the hash'),
    'prefix_cache_not_told': Plant([
        ('            block_manager.hash_to_block_id[block.hash] = block.block_id\n', ''),
    ], WA, 'hash_to_block_id'),
    'hash_without_token_ids': Plant([
        ('block.update(block_manager.compute_hash(token_ids, prefix), token_ids)',
         'block.hash = block_manager.compute_hash(token_ids, prefix)'),
    ], WA, 'Block.update'),
    'no_argument_check': Plant([
        ('            or not max(1, num_hashed * bs) <= num_computed_tokens <= limit:',
         '            or num_computed_tokens > 10**9:'),
    ], WA, 'raise ValueError, before'),
    'cuts_a_verified_block': Plant([
        ('max(1, num_hashed * bs) <= num_computed_tokens', '1 <= num_computed_tokens'),
    ], WA, 'verified blocks are never cut back'),
    'validates_after_releasing': Plant([
        ('    keep = -(-num_computed_tokens // bs)\n    for block_id in reversed(table[keep:]):\n        block_manager.pool.free([block_id])\n    del table[keep:]\n',
         ''),
        ('    limit = min(len(seq), len(table) * bs)\n',
         '    keep = -(-num_computed_tokens // bs)\n    for block_id in reversed(table[keep:]):\n        block_manager.pool.free([block_id])\n    del table[keep:]\n    limit = min(len(seq), len(table) * bs)\n'),
    ], WA, 'before changing anything: a refused call'),
    'kept_blocks_removed_from_the_front': Plant([
        ('    del table[keep:]\n', '    del table[:len(table) - keep]\n'),
    ], WA, 'stays as it is'),
    'released_blocks_never_freed': Plant([
        ('        block_manager.pool.free([block_id])\n', '        pass\n'),
    ], WA, 'exactly one reference'),
    'raises_on_a_valid_length': Plant([
        ('num_computed_tokens <= limit:', 'num_computed_tokens < limit:'),
    ], WA, 'must not raise'),
    'zero_computed_tokens_taken': Plant([
        ('max(1, num_hashed * bs) <= num_computed_tokens', 'num_hashed * bs <= num_computed_tokens'),
    ], WA, 'at least one token is computed'),
    'past_the_table_taken': Plant([
        ('    limit = min(len(seq), len(table) * bs)\n', '    limit = len(seq)\n'),
    ], WA, 'slots for len(block_table) * block_size tokens only'),
    'a_bool_taken_for_an_int': Plant([
        ('    if isinstance(num_computed_tokens, bool) or not isinstance(num_computed_tokens, int) \\\n',
         '    if not isinstance(num_computed_tokens, int) \\\n'),
    ], WA, 'must be an int'),
    'a_float_taken_for_an_int': Plant([
        ('not isinstance(num_computed_tokens, int)', 'not isinstance(num_computed_tokens, (int, float))'),
    ], WA, 'must be an int'),
    'one_block_too_many_at_a_boundary': Plant([
        ('keep = -(-num_computed_tokens // bs)', 'keep = num_computed_tokens // bs + 1'),
    ], WA, 'and no more: at an exact block boundary'),
    'shared_lookahead_freed_to_zero': Plant([
        ('        block_manager.pool.free([block_id])\n',
         '        block_manager.pool.free([block_id] * block_manager.blocks[block_id].ref_count)\n'),
    ], WA, 'a fork'),
    'hashed_blocks_mapped_again': Plant([
        ('            block_manager.hash_to_block_id[block.hash] = block.block_id\n        prefix = block.hash',
         '        block_manager.hash_to_block_id[block.hash] = block.block_id\n        prefix = block.hash'),
    ], WA, 'is left alone, its hash_to_block_id entry too'),
    'existing_entry_kept': Plant([
        ('            block_manager.hash_to_block_id[block.hash] = block.block_id\n',
         '            block_manager.hash_to_block_id.setdefault(block.hash, block.block_id)\n'),
    ], WA, 'replaces the hash_to_block_id entry'),
}
