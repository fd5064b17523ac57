# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 130: each a copy of solutions/130_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'writes_slot_minus_one': Plant([
        ('    if slot < 0:',
         '    if slot < -1:'),
    ], WA, 'slot of -1 must be skipped'),
    'ignores_the_row_stride': Plant([
        ('token.to(tl.int64) * key_stride',
         'token.to(tl.int64) * ROW'),
    ], WA, 'key.stride(0)'),
    'value_stride_from_key': Plant([
        ('value, value.stride(0), k_cache',
         'value, key.stride(0), k_cache'),
    ], WA, 'value.stride(0)'),
    'writes_a_copy': Plant([
        ('        key, key.stride(0), value, value.stride(0), k_cache, v_cache, slot_mapping,',
         '        key, key.stride(0), value, value.stride(0), k_cache.clone(), v_cache.clone(), slot_mapping,'),
    ], WA, 'in place'),
    'row_not_masked': Plant([
        ('    mask = offs < ROW ',
         '    mask = offs < BLOCK '),
    ], WA, 'mask the row: offsets ROW'),
    'minus_one_in_the_mask': Plant([
        ('    if slot < 0:                                                     # a padding token: nothing to write\n        return\n',
         ''),
        ('    mask = offs < ROW ',
         '    mask = (offs < ROW) & (slot >= 0) '),
    ], RE, 'return early for slot < 0', interpreter_only=True),
    'k_and_v_swapped': Plant([
        ('tl.store(k_cache_ptr + slot * ROW + offs, key,',
         'tl.store(k_cache_ptr + slot * ROW + offs, value,'),
    ], WA, 'swapped'),
    'plain_pytorch': Plant([
        ('    store_kvcache_kernel[(T,)](',
         '    keep = slot_mapping >= 0\n'
         '    k_cache.view(-1, row)[slot_mapping[keep].long()] = key[keep].reshape(-1, row)\n'
         '    v_cache.view(-1, row)[slot_mapping[keep].long()] = value[keep].reshape(-1, row)\n'
         '    return\n'
         '    store_kvcache_kernel[(T,)]('),
    ], WA, 'no Triton kernel was launched'),
    'launches_the_library_kernel': Plant([
        ('    store_kvcache_kernel[(T,)](',
         '    from pagedkv_lib.kernels.triton_store_kvcache import _store_kvcache_kernel as store_kvcache_kernel\n'
         '    store_kvcache_kernel[(T,)]('),
    ], RE, '_store_kvcache_kernel is the library'),
    'grid_one_program_short': Plant([
        ('    store_kvcache_kernel[(T,)](',
         '    store_kvcache_kernel[(T - 1,)]('),
    ], WA, 'program(s) short'),
    'copies_in_pytorch_after_an_empty_kernel': Plant([
        ('    tl.store(k_cache_ptr + slot * ROW + offs, key, mask=mask)       # write ROW\n'
         '    tl.store(v_cache_ptr + slot * ROW + offs, value, mask=mask)     # write ROW\n',
         ''),
        ('        ROW=row, BLOCK=triton.next_power_of_2(row),\n    )\n',
         '        ROW=row, BLOCK=triton.next_power_of_2(row),\n    )\n'
         '    keep = slot_mapping >= 0\n'
         '    k_cache.view(-1, row)[slot_mapping[keep].long()] = key[keep].reshape(-1, row)\n'
         '    v_cache.view(-1, row)[slot_mapping[keep].long()] = value[keep].reshape(-1, row)\n'),
    ], WA, 'written outside the kernel'),
    'v_cache_in_pytorch': Plant([
        ('    tl.store(v_cache_ptr + slot * ROW + offs, value, mask=mask)     # write ROW\n',
         ''),
        ('        ROW=row, BLOCK=triton.next_power_of_2(row),\n    )\n',
         '        ROW=row, BLOCK=triton.next_power_of_2(row),\n    )\n'
         '    keep = slot_mapping >= 0\n'
         '    v_cache.view(-1, row)[slot_mapping[keep].long()] = value[keep].reshape(-1, row)\n'),
    ], WA, 'written outside the kernel'),
}
