"""Exercise 121 (easy): KV memory budget. Notebook 01, "Why paging". Grade: python practice/judge.py 121

Every token of every layer stores one key and one value vector per KV head, so a token costs
    kv_bytes_per_token = 2 x num_layers x num_kv_heads x head_dim x dtype_bytes.
A paged cache holds ceil(context_len / block_size) whole blocks per request; a system that reserves
max_len slots up front pays for all of them. Integer arithmetic only: budgets reach 10**12 and beyond,
where float division rounds.
"""
from __future__ import annotations


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of K and V that one token occupies in the cache of the whole model.

    Args: four positive ints (dtype_bytes: 2 for fp16/bf16, 4 for fp32).
    Returns: an int, 2 * num_layers * num_kv_heads * head_dim * dtype_bytes. Mutates nothing.
    Errors: invalid arguments may raise ValueError (the judge passes only positive ints).
    Example: kv_bytes_per_token(32, 32, 128, 2) == 524288 (LLaMA-2-7B in FP16: 512 KiB).
    """
    # BEGIN SOLUTION
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes
    # END SOLUTION


def paged_concurrency(budget_bytes: int, context_len: int, block_size: int, bytes_per_token: int) -> int:
    """How many requests of `context_len` tokens fit in `budget_bytes` of paged KV cache.

    Each request holds ceil(context_len / block_size) blocks of block_size tokens, all of them paid for
    (the last one may be partly empty); the answer is the floor of budget / bytes per request.
    Args: four positive ints. Returns: an int >= 0 (exact integer arithmetic, no floats). Mutates nothing.
    Errors: invalid arguments may raise ValueError (the judge passes only positive ints).
    Example: paged_concurrency(55 * 2**30, 3000, 16, 57344) == 342 (Qwen2.5-7B, 3000 tokens -> 188 blocks).
    """
    # BEGIN SOLUTION
    num_blocks = -(-context_len // block_size)
    return budget_bytes // (num_blocks * block_size * bytes_per_token)
    # END SOLUTION


def reserved_concurrency(budget_bytes: int, max_len: int, bytes_per_token: int) -> int:
    """How many requests fit when each reserves `max_len` token slots up front (pre-vLLM systems).

    Args: three positive ints. Returns: an int >= 0, floor(budget / (max_len * bytes_per_token)), exact.
    Mutates nothing. Errors: invalid arguments may raise ValueError (the judge passes only positive ints).
    Example: reserved_concurrency(55 * 2**30, 32768, 57344) == 31.
    """
    # BEGIN SOLUTION
    return budget_bytes // (max_len * bytes_per_token)
    # END SOLUTION
