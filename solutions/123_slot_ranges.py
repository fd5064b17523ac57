"""Exercise 123 (medium): slot ranges per block. Notebook 03, "Slot mapping and store_kvcache".
Grade: python practice/judge.py 123

nano-vllm's `prepare_prefill` does not compute slots token by token: it walks the blocks that positions
start..end-1 touch and emits one contiguous range of slots per block. The first block may start mid-block
(after a prefix-cache hit, or in the second half of a chunked prefill) and the last block may be partial.
"""
from __future__ import annotations


def compute_slot_mapping(block_table: list[int], start: int, end: int, block_size: int) -> list[int]:
    """The slots of positions start, start + 1, ..., end - 1, computed one block range at a time.

    Args:
        block_table: list of physical block ids (ints >= 0) holding at least ceil(end / block_size) valid
            entries; it may continue with more blocks or -1 padding, which no position uses. Read-only.
        start, end: ints with 0 <= start <= end; start == end gives [].
        block_size: int >= 1.
    Returns: a new list of end - start ints; item i is the slot of position start + i,
        block_table[p // block_size] * block_size + p % block_size.
    Mutates nothing. Errors: a table too short may raise ValueError (the judge never passes one).
    Example: compute_slot_mapping([7, 2, 5], 3, 9, 4) == [31, 8, 9, 10, 11, 20]
    """
    # BEGIN SOLUTION
    slots: list[int] = []
    for i in range(start // block_size, -(-end // block_size)):
        lo = max(start, i * block_size) - i * block_size          # first offset used in block i
        hi = min(end, (i + 1) * block_size) - i * block_size      # one past the last offset used
        base = block_table[i] * block_size
        slots.extend(range(base + lo, base + hi))
    return slots
    # END SOLUTION
