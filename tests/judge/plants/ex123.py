# ruff: noqa: E501  (planted bugs quote whole lines of the solution)
"""Planted bugs of exercise 123: each a copy of solutions/123_*.py with one classic mistake, the verdict it
must get and words the hint (or message) of its first failing case must contain (see plants/__init__.py)."""
from plants import RE, WA, Plant  # noqa: F401

PLANTS = {
    'first_block_from_offset_0': Plant([
        ('lo = max(start, i * block_size) - i * block_size',
         'lo = 0'),
    ], WA, 'starts mid-block'),
    'last_block_always_full': Plant([
        ('hi = min(end, (i + 1) * block_size) - i * block_size',
         'hi = block_size'),
    ], WA, 'the last block is cut at end'),
    'drops_partial_last_block': Plant([
        ('range(start // block_size, -(-end // block_size))',
         'range(start // block_size, end // block_size)'),
    ], WA, 'the last block may be partial'),
    'end_inclusive': Plant([
        ('hi = min(end, (i + 1)',
         'hi = min(end + 1, (i + 1)'),
    ], WA, 'end is exclusive'),
    'last_block_cut_at_end_mod_block_size': Plant([
        ('hi = min(end, (i + 1) * block_size) - i * block_size',
         'hi = end % block_size if (i + 1) * block_size >= end else block_size'),
    ], WA, 'is a multiple of block_size'),
    'one_block_past_the_end': Plant([
        ('range(start // block_size, -(-end // block_size))',
         'range(start // block_size, end // block_size + 1)'),
    ], RE, 'index out of range'),
    'empty_range_gives_a_slot': Plant([
        ('    slots: list[int] = []\n',
         '    slots: list[int] = []\n    if start == end:\n        return [block_table[start // block_size] * block_size + start % block_size]\n'),
    ], WA, 'no positions, return []'),
    'offset_plus_one': Plant([
        ('slots.extend(range(base + lo, base + hi))',
         'slots.extend(range(base + lo + 1, base + hi + 1))'),
    ], WA, 'off by one'),
    'block_size_as_a_power_of_two': Plant([
        ('slots.extend(range(base + lo, base + hi))',
         'slots.extend(block_table[p >> (block_size.bit_length() - 1)] * block_size + (p & (block_size - 1)) for p in range(i * block_size + lo, i * block_size + hi))'),
    ], WA, 'not a power of two'),
    'pops_the_table': Plant([
        ('        base = block_table[i] * block_size',
         '        base = block_table[i] * block_size\n        if i == len(block_table) - 1 and block_table[i] == -1:\n            block_table.pop()'),
        ('    return slots\n',
         '    while block_table and block_table[-1] == -1:\n        block_table.pop()\n    return slots\n'),
    ], WA, 'block_table is read-only'),
}
