# ruff: noqa: E501  (planted bugs quote whole lines of the solutions)
"""Planted bugs of exercise 137 (KV transfer between instances), each breaking one clause of the contract."""
from plants import RE, WA, Plant

PLANTS = {
    'scattered_in_id_order': Plant([
        ('dst_ids = torch.tensor(new, dtype=torch.long)',
         'dst_ids = torch.tensor(sorted(new), dtype=torch.long)'),
    ], WA, 'in table order (not in order of block ids)'),
    'table_in_id_order': Plant([
        ('    dst_pool.fork(list(dst_prefix_table))                          # the sequence shares the prefix blocks\n',
         '    dst_pool.fork(list(dst_prefix_table))                          # the sequence shares the prefix blocks\n    new = sorted(new)\n'),
    ], WA, 'in the order dst_pool.allocate returned'),
    'last_partial_block_dropped': Plant([
        ('num_blocks = -(-num_tokens // block_size)',
         'num_blocks = num_tokens // block_size'),
    ], WA, 'the last, partial block moves too'),
    'k_and_v_swapped': Plant([
        ('dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)',
         'dst_kv_cache[:, :, dst_ids] = blocks.flip(0).to(dst_kv_cache.device)'),
    ], WA, 'K goes to K and V to V'),
    'sender_ids_reused': Plant([
        ('dst_ids = torch.tensor(new, dtype=torch.long)',
         'dst_ids = torch.tensor(src_ids, dtype=torch.long)'),
        ('    return list(dst_prefix_table) + new\n',
         '    return list(dst_prefix_table) + src_ids\n'),
    ], WA, "the sender's ids mean nothing there"),
    'layer_skipped': Plant([
        ('dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)',
         'dst_kv_cache[:, 0, dst_ids] = blocks[:, 0].to(dst_kv_cache.device)'),
    ], WA, 'K and V of EVERY layer move'),
    'prefix_sent_again': Plant([
        ('    k = len(dst_prefix_table)                                      # blocks the receiver already holds\n',
         '    k = 0\n'),
    ], WA, 'the prefix blocks are not moved again'),
    'prefix_refs_not_taken': Plant([
        ('    dst_pool.fork(list(dst_prefix_table))                          # the sequence shares the prefix blocks\n',
         ''),
    ], WA, 'one more reference on each'),
    'prefix_missing_from_table': Plant([
        ('    return list(dst_prefix_table) + new\n',
         '    return new\n'),
    ], WA, 'the table starts with dst_prefix_table'),
    'padding_taken_for_blocks': Plant([
        ('src_ids = table[k:num_blocks]',
         'src_ids = table[k:]'),
    ], WA, '-1 padding in src_block_table names no block'),
    'prefix_references_taken_before_the_check': Plant([
        ('    new = dst_pool.allocate(len(src_ids))\n    if new is None:\n        return None                                                # too few free blocks: nothing changed\n    dst_pool.fork(list(dst_prefix_table))                          # the sequence shares the prefix blocks\n',
         '    dst_pool.fork(list(dst_prefix_table))\n    new = dst_pool.allocate(len(src_ids))\n    if new is None:\n        return None\n'),
    ], WA, 'a failed transfer changes nothing'),
    'blocks_allocated_one_at_a_time': Plant([
        ('    new = dst_pool.allocate(len(src_ids))\n    if new is None:\n        return None                                                # too few free blocks: nothing changed\n',
         '    new = []\n    for _ in src_ids:\n        one = dst_pool.allocate(1)\n        if one is None:\n            return None\n        new += one\n'),
    ], WA, 'a failed transfer changes nothing'),
    'prefix_table_extended_in_place': Plant([
        ('    return list(dst_prefix_table) + new\n',
         '    dst_prefix_table.extend(new)\n    return dst_prefix_table\n'),
    ], WA, 'read-only: return a new list'),
    'prefix_sent_into_more_blocks': Plant([
        ('    dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)\n',
         '    dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)\n'
         '    if k:\n'
         '        again = dst_pool.allocate(k)\n'
         '        dst_kv_cache[:, :, again] = src_kv_cache[:, :, table[:k]]\n'),
    ], WA, 'the prefix was sent again'),
    'prefix_blocks_written_again': Plant([
        ('    dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)\n',
         '    dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)\n'
         '    dst_kv_cache[:, :, list(dst_prefix_table)] = src_kv_cache[:, :, table[:k]]\n'),
    ], WA, 'is a prefix block'),
    'index_copy_has_no_fp8_kernel': Plant([
        ('    dst_kv_cache[:, :, dst_ids] = blocks.to(dst_kv_cache.device)\n',
         '    dst_kv_cache.index_copy_(2, dst_ids, blocks.to(dst_kv_cache.device))\n'),
    ], RE, 'have no fp8 kernel'),
}
