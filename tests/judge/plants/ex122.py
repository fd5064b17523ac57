# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 122: each a copy of solutions/122_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'offset_plus_one': Plant([
        ('+ p % block_size for p',
         '+ p % block_size + 1 for p'),
    ], WA, 'off by one'),
    'table_indexed_by_offset': Plant([
        ('return [block_table[p // block_size]',
         'return [block_table[p % block_size]'),
    ], WA, 'not p % block_size'),
    'block_and_offset_swapped': Plant([
        ('return [block_table[p // block_size] * block_size + p % block_size',
         'return [block_table[p % block_size] * block_size + p // block_size'),
    ], WA, '(swapped?)'),
    'ignores_the_table': Plant([
        ('return [block_table[p // block_size] * block_size + p % block_size',
         'return [p'),
    ], WA, 'look the physical block up'),
    'forgets_block_size': Plant([
        ('return [block_table[p // block_size] * block_size +',
         'return [block_table[p // block_size] +'),
    ], WA, 'multiply the physical block id'),
    'next_block_on_boundary': Plant([
        ('return [block_table[p // block_size]',
         'return [block_table[(p + 1) // block_size]'),
    ], WA, 'slot = block_table['),
    'returns_a_tensor': Plant([
        ('    return [block_table',
         '    import torch\n    return torch.tensor([block_table'),
        ('for p in positions]',
         'for p in positions])'),
    ], WA, 'plain Python list'),
    'sorts_positions_in_place': Plant([
        ('    return [block_table',
         '    positions.sort()\n    return [block_table'),
    ], WA, 'positions is read-only'),
    'pads_the_table_in_place': Plant([
        ('    return [block_table',
         '    block_table.append(-1)\n    return [block_table'),
    ], WA, 'block_table is read-only'),
    'assumes_sorted_positions': Plant([
        ('for p in positions]',
         'for p in sorted(positions)]'),
    ], WA, 'positions come in any order'),
    'drops_repeated_positions': Plant([
        ('for p in positions]',
         'for p in dict.fromkeys(positions)]'),
    ], WA, 'repeats included'),
    'last_block_from_the_table_end': Plant([
        ('return [block_table[p // block_size]',
         'return [block_table[p // block_size if p // block_size < max(p // block_size for p in positions) else -1]'),
    ], WA, 'may end with -1 padding'),
    'block_size_as_a_power_of_two': Plant([
        ('return [block_table[p // block_size] * block_size + p % block_size',
         'return [block_table[p >> (block_size.bit_length() - 1)] * block_size + (p & (block_size - 1))'),
    ], WA, 'not a power of two'),
    'no_positions_crashes': Plant([
        ('    return [block_table',
         '    last_block = max(positions) // block_size  # noqa: F841\n    return [block_table'),
    ], RE, 'empty'),
}
