"""Paged K/V storage: allocation, write by slot, gather by block table.

Shapes: docs/conventions.md.
One layer's cache is `k_cache`, `v_cache` of shape [N, S, H_kv, D]; a whole model's (nano-vllm's
`ModelRunner.allocate_kv_cache`) is `kv_cache` of shape [2, L, N, S, H_kv, D], whose `[0, l]` and
`[1, l]` are layer l's K and V views.
"""
from __future__ import annotations

import torch

from .validation import check_block_table, check_positive_int, check_tensor


def allocate_kv_cache(num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int,
                      head_dim: int, dtype=torch.float32, device="cpu", fill: float | None = None):
    """A whole model's cache [2, L, N, S, H_kv, D], uninitialised (torch.empty) unless `fill` is given."""
    for name, v in (("num_layers", num_layers), ("num_blocks", num_blocks), ("block_size", block_size),
                    ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
        check_positive_int(name, v)
    shape = (2, num_layers, num_blocks, block_size, num_kv_heads, head_dim)
    kv_cache = torch.empty(shape, dtype=dtype, device=device)       # [2, L, N, S, H_kv, D]
    if fill is not None:
        kv_cache.fill_(fill)
    return kv_cache


def layer_caches(kv_cache: torch.Tensor, layer: int):
    """(k_cache, v_cache) views of one layer, each [N, S, H_kv, D]."""
    check_tensor("kv_cache", kv_cache, ndim=6)
    return kv_cache[0, layer], kv_cache[1, layer]


def gather_kv(cache: torch.Tensor, block_table, context_len: int) -> torch.Tensor:
    """The first `context_len` tokens of one sequence, contiguous: [context_len, H_kv, D].

    `block_table` may be a list or a 1-D tensor padded with -1; the padding is dropped first and the
    unused tail of the last block is cut.
    """
    check_tensor("cache", cache, ndim=4)
    num_blocks, block_size = cache.shape[0], cache.shape[1]
    table = block_table.tolist() if isinstance(block_table, torch.Tensor) else list(block_table)
    check_block_table(table, context_len, block_size, num_blocks)
    n = -(-context_len // block_size)
    ids = torch.tensor(table[:n], dtype=torch.long, device=cache.device)
    blocks = cache.index_select(0, ids)                               # [n, S, H_kv, D]
    return blocks.reshape(n * block_size, *cache.shape[2:])[:context_len]  # [context_len, H_kv, D]
