"""Tensor parallelism and the KV cache: which heads each rank holds, and its shard of the cache.

With tensor parallelism (Megatron-LM's split of attention by heads) rank r of tp computes H / tp query heads
and holds the K/V of the KV heads those queries read, for EVERY block: the scheduler runs once, so block
tables and slot mappings are the same on every rank, and a block id names the same tokens on all of them.
Each rank's cache is `[2, L, N, S, H_kv / tp, D]`, 1 / tp of the bytes per token.

When H_kv < tp there is not a KV head per rank: each rank keeps one, and every KV head is replicated on
tp / H_kv ranks (vLLM, `ModelConfig.get_num_kv_heads`: max(1, H_kv // tp)). vLLM's `QKVParallelLinear`
(`vllm/model_executor/layers/linear.py`) divides H by tp, and H_kv by tp or tp by H_kv (its
`num_kv_head_replicas`); `check_tp` asks the same. Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.validation import check_gqa, check_positive_int, check_tensor


def check_tp(num_heads: int, num_kv_heads: int, tp_size: int) -> None:
    """tp must split the query heads evenly, and either divide H_kv or be a multiple of it."""
    check_positive_int("tp_size", tp_size)
    check_gqa(num_heads, num_kv_heads)
    if num_heads % tp_size:
        raise ValueError(f"tp_size: expected a divisor of the {num_heads} query heads, got {tp_size}")
    if num_kv_heads % tp_size and tp_size % num_kv_heads:
        raise ValueError(f"tp_size: expected a divisor or a multiple of the {num_kv_heads} KV heads, "
                         f"got {tp_size}")


def kv_heads_per_rank(num_kv_heads: int, tp_size: int) -> int:
    """KV heads in each rank's cache: H_kv / tp, at least 1 (a replicated head)."""
    check_positive_int("num_kv_heads", num_kv_heads)
    check_positive_int("tp_size", tp_size)
    return max(1, num_kv_heads // tp_size)


def kv_replicas(num_kv_heads: int, tp_size: int) -> int:
    """How many ranks hold each KV head: 1 when H_kv >= tp, else tp / H_kv."""
    return max(1, tp_size // num_kv_heads)


def query_head_ids(rank: int, num_heads: int, tp_size: int) -> list[int]:
    """The query heads rank `rank` computes: a contiguous H / tp of them."""
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank: expected 0 <= rank < {tp_size}, got {rank}")
    per = num_heads // tp_size
    return list(range(rank * per, (rank + 1) * per))


def kv_head_ids(rank: int, num_kv_heads: int, tp_size: int) -> list[int]:
    """The KV heads in rank `rank`'s cache: those its query heads read (h // G), H_kv / tp of them or one."""
    if not 0 <= rank < tp_size:
        raise ValueError(f"rank: expected 0 <= rank < {tp_size}, got {rank}")
    per = kv_heads_per_rank(num_kv_heads, tp_size)
    first = rank * per if num_kv_heads >= tp_size else rank // kv_replicas(num_kv_heads, tp_size)
    return list(range(first, first + per))


def shard_kv_cache(cache: torch.Tensor, rank: int, tp_size: int) -> torch.Tensor:
    """Rank `rank`'s copy of its KV heads (dim -2) of a cache [N, S, H_kv, D] or [2, L, N, S, H_kv, D]."""
    check_tensor("cache", cache)
    if cache.dim() not in (4, 6):
        raise ValueError(f"cache: expected [N, S, H_kv, D] or [2, L, N, S, H_kv, D], "
                         f"got {tuple(cache.shape)}")
    heads = kv_head_ids(rank, cache.shape[-2], tp_size)
    return cache[..., heads[0] : heads[-1] + 1, :].contiguous()     # [..., H_kv / tp, D]
