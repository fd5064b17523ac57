# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 124: each a copy of solutions/124_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'minus_one_not_skipped': Plant([
        ('keep = slot_mapping >= 0',
         'keep = slot_mapping >= -1'),
    ], WA, 'writes the LAST row'),
    'minus_one_clamped_to_slot_0': Plant([
        ('    keep = slot_mapping >= 0                                          # [T]\n    slots = slot_mapping[keep].long()',
         '    keep = slot_mapping >= -1\n    slots = slot_mapping.clamp(min=0).long()'),
    ], WA, '(slot -1) was written to slot 0'),
    'k_and_v_swapped': Plant([
        ('[slots] = key[keep]',
         '[slots] = value_'),
        ('[slots] = value[keep]',
         '[slots] = key[keep]'),
        ('value_',
         'value[keep]'),
    ], WA, '(swapped?)'),
    'not_in_place': Plant([
        ('    k_cache.view(-1',
         '    k_cache = k_cache.clone()\n    k_cache.view(-1'),
    ], WA, 'in place'),
    'value_never_written': Plant([
        ('    v_cache.view(-1, H_kv, D)[slots] = value[keep]\n',
         ''),
    ], WA, 'value was not written into v_cache'),
    'assumes_contiguous_key': Plant([
        ('= key[keep]',
         '= key.view(-1).view(-1, H_kv, D)[keep]'),
    ], RE, 'not contiguous'),
    'slot_split_wrong': Plant([
        ('    k_cache.view(-1, H_kv, D)[slots] = key[keep]',
         '    k_cache[slots // H_kv, slots % H_kv] = key[keep]'),
    ], RE, 'out of bounds'),
    'block_and_offset_as_a_power_of_two': Plant([
        ('    k_cache.view(-1, H_kv, D)[slots] = key[keep]                     # rows of [N * S, H_kv, D]\n    v_cache.view(-1, H_kv, D)[slots] = value[keep]',
         '    S = k_cache.shape[1]\n    k = S.bit_length() - 1\n    k_cache[slots >> k, slots & (S - 1)] = key[keep]\n    v_cache[slots >> k, slots & (S - 1)] = value[keep]'),
    ], WA, 'not slot'),
    'writes_in_fp32': Plant([
        ('= key[keep]',
         '= key[keep].float()'),
    ], RE, 'dtypes match'),
    'clears_the_cache_first': Plant([
        ('    keep = slot_mapping >= 0 ',
         '    k_cache.zero_()\n    v_cache.zero_()\n    keep = slot_mapping >= 0 '),
    ], WA, 'its row must stay untouched'),
    'keeps_the_rows_of_padded_tokens': Plant([
        ('= key[keep]',
         '= key[: len(slots)]'),
        ('= value[keep]',
         '= value[: len(slots)]'),
    ], WA, 'keep the rows and the slots aligned'),
    'rounds_through_fp16': Plant([
        ('= key[keep]',
         '= key[keep].half().to(key.dtype)'),
    ], WA, 'goes to slot'),
    'marks_padding_in_slot_mapping': Plant([
        ('    keep = slot_mapping >= 0 ',
         '    slot_mapping[slot_mapping < 0] = -2\n    keep = slot_mapping >= 0 '),
    ], WA, 'only the caches may be written'),
}
