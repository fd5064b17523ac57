"""Slot mapping: where in the flat cache each token's K/V lives.

A token at position p sits in logical block p // block_size at offset p % block_size; its slot is
`block_table[p // block_size] * block_size + p % block_size`, the row of `k_cache.view(-1, H_kv * D)`
that holds it. Two ways to compute the slots of positions start..end-1: one token at a time
(`slot_mapping_for`), or one block range at a time as nano-vllm's `prepare_prefill` does
(`compute_slot_mapping`): the first block may start mid-block (a prefix hit, or the second half of a
chunked prefill) and the last block may be partial.
"""
from __future__ import annotations

from .validation import check_block_table, check_positive_int


def slot_mapping_for(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """The slot of each position, one token at a time."""
    check_positive_int("block_size", block_size)
    slots = []
    for p in positions:
        if p < 0:
            raise ValueError(f"positions: expected positions >= 0, got {p}")
        i = p // block_size
        if i >= len(block_table) or block_table[i] < 0:
            raise ValueError(
                f"block_table: position {p} needs logical block {i}, the table is {list(block_table)}"
            )
        slots.append(block_table[i] * block_size + p % block_size)
    return slots


def compute_slot_mapping(block_table: list[int], start: int, end: int, block_size: int) -> list[int]:
    """The slots of positions start..end-1, computed one block range at a time."""
    check_positive_int("block_size", block_size)
    if not 0 <= start <= end:
        raise ValueError(f"start/end: expected 0 <= start <= end, got start={start}, end={end}")
    check_block_table(block_table, end, block_size)
    slots: list[int] = []
    for i in range(start // block_size, -(-end // block_size)):
        lo = max(start, i * block_size) - i * block_size          # first offset used in block i
        hi = min(end, (i + 1) * block_size) - i * block_size      # one past the last offset used
        base = block_table[i] * block_size
        slots.extend(range(base + lo, base + hi))
    return slots
