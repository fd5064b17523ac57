"""Exercise 122 (easy): slot mapping. Notebook 03, "Slot mapping and store_kvcache".
Grade: python practice/judge.py 122

A token at position p lives in logical block p // block_size at offset p % block_size. The block table
maps logical blocks to physical ones, so its slot (the row of k_cache.view(num_blocks * block_size, -1)
that holds its keys) is
    slot = block_table[p // block_size] * block_size + p % block_size.
"""
from __future__ import annotations


def slot_mapping_for(block_table: list[int], positions: list[int], block_size: int) -> list[int]:
    """The slot of each position, one token at a time.

    Args:
        block_table: list of physical block ids (ints >= 0), one per logical block of the sequence; it may
            end with -1 padding entries, which no position uses. Read-only.
        positions: list of token positions (ints >= 0), in any order, repeats allowed; each one's logical
            block is a valid entry of block_table. Read-only.
        block_size: int >= 1, tokens per block.
    Returns: a new list of ints, the same length as positions: slots[i] is the slot of positions[i].
    Mutates nothing. Errors: positions outside the table may raise ValueError (the judge never passes them).
    Example: slot_mapping_for([5, 6, 7, 0], [0, 1, 13], 4) == [20, 21, 1]
    """
    # BEGIN SOLUTION
    return [block_table[p // block_size] * block_size + p % block_size for p in positions]
    # END SOLUTION
