"""Moving one sequence's K/V from one instance's pool to another's (prefill/decode disaggregation).

Two instances never share block ids: each has its own `BlockPool` and cache `kv_cache [2, L, N, S, H_kv, D]`.
A transfer is therefore four steps, whatever carries the bytes (a tensor here, gloo or NCCL in
`disaggregation.py`, RDMA in the real connectors):

    sender     gather_blocks     the sequence's blocks, through ITS block table, every layer, K and V:
                                 [2, L, n, S, H_kv, D], logical blocks in table order (-1 padding dropped)
    receiver   receive_blocks    allocate n blocks from ITS pool (other ids), scatter block i into the
                                 i-th one (scatter_blocks), and build its table: prefix ids + new ids

Two things make it cheaper and safe, as in vLLM's NIXL connector (`vllm/distributed/kv_transfer/
kv_connector/v1/nixl_connector.py`, `_read_blocks`: "Partial prefix cache hit: just read uncomputed blocks"):
- a receiver that already holds the first k blocks (a prefix-cache hit, full blocks only) takes one more
  reference on them and receives only blocks k.. (`first_block=k`);
- a receiver whose pool cannot take n blocks refuses before anything moves: `receive_blocks` and
  `transfer_kv` return None and change nothing (`BlockPool.allocate`'s rule); the sender keeps its blocks.
Whole blocks move, the unused tail of the last one included: a block is the unit of transfer. Exercise 137
grades `transfer_kv`. Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.validation import check_block_table, check_positive_int, check_tensor


def num_blocks_to_send(num_tokens: int, block_size: int, num_cached_blocks: int = 0) -> int:
    """ceil(num_tokens / block_size) - num_cached_blocks: the last, partial block counts."""
    check_positive_int("num_tokens", num_tokens)
    check_positive_int("block_size", block_size)
    if not 0 <= num_cached_blocks * block_size <= num_tokens:
        raise ValueError(f"num_cached_blocks: expected full blocks within the {num_tokens} tokens "
                         f"(0 <= k * {block_size} <= {num_tokens}), got {num_cached_blocks}")
    return -(-num_tokens // block_size) - num_cached_blocks


def _table(block_table) -> list[int]:
    return block_table.tolist() if isinstance(block_table, torch.Tensor) else list(block_table)


def gather_blocks(kv_cache: torch.Tensor, block_table, num_tokens: int, first_block: int = 0) -> torch.Tensor:
    """Logical blocks first_block..ceil(num_tokens / S) - 1 of a sequence: a new [2, L, n, S, H_kv, D].

    `block_table` is a list or a 1-D integer tensor, padded with -1 after its blocks; `kv_cache` is read only.
    """
    check_tensor("kv_cache", kv_cache, ndim=6)
    block_size = kv_cache.shape[3]
    table = _table(block_table)
    check_block_table(table, num_tokens, block_size, kv_cache.shape[2])
    n = num_blocks_to_send(num_tokens, block_size, first_block)
    ids = torch.tensor(table[first_block : first_block + n], dtype=torch.long, device=kv_cache.device)  # [n]
    return kv_cache.index_select(2, ids)                                         # [2, L, n, S, H_kv, D]


def check_payload(kv_cache: torch.Tensor, blocks: torch.Tensor, num_blocks: int) -> None:
    """`blocks` holds `num_blocks` blocks, shaped like the cache (any layout after dim 2), of its dtype."""
    check_tensor("kv_cache", kv_cache)
    check_tensor("blocks", blocks, ndim=kv_cache.dim())
    if blocks.shape[2] != num_blocks or blocks.shape[:2] != kv_cache.shape[:2] \
            or blocks.shape[3:] != kv_cache.shape[3:]:
        want = [*kv_cache.shape[:2], num_blocks, *kv_cache.shape[3:]]
        raise ValueError(f"blocks: expected shape {want} (one block per id, the cache's other dims), "
                         f"got {list(blocks.shape)}")
    if blocks.dtype != kv_cache.dtype:
        raise TypeError(f"blocks: expected dtype {kv_cache.dtype} like the cache, got {blocks.dtype}")


def scatter_blocks(kv_cache: torch.Tensor, blocks: torch.Tensor, block_ids: list[int]) -> None:
    """kv_cache[:, :, block_ids[i]] = blocks[:, :, i], in place; any layout after the block dim. By indexing,
    not index_copy_, which has no fp8 (float8_e4m3fn) kernel on the CPU."""
    check_payload(kv_cache, blocks, len(block_ids))
    ids = torch.tensor(block_ids, dtype=torch.long, device=kv_cache.device)            # [n]
    kv_cache[:, :, ids] = blocks.to(kv_cache.device)


def check_prefix(pool: BlockPool, prefix_table: list[int]) -> None:
    """Prefix blocks are held (ref >= 1) by the receiver, each once."""
    if len(set(prefix_table)) != len(prefix_table):
        raise ValueError(f"prefix_table: expected distinct block ids, got {list(prefix_table)}")
    for b in prefix_table:
        if pool.ref_count(b) < 1:
            raise ValueError(f"prefix_table: block {b} is free; a prefix hit names blocks the receiver holds")


def receive_blocks(pool: BlockPool, kv_cache: torch.Tensor, blocks: torch.Tensor,
                   prefix_table: list[int]) -> list[int] | None:
    """Receiver: n = blocks.shape[2] blocks from `pool`, block i scattered into the i-th, one more reference
    on each prefix block; returns prefix_table + the new ids (a new list), or None, changing nothing, when
    fewer than n blocks are free."""
    check_prefix(pool, prefix_table)
    check_tensor("blocks", blocks, ndim=6)
    check_payload(kv_cache, blocks, blocks.shape[2])             # before anything changes
    new = pool.allocate(blocks.shape[2])
    if new is None:
        return None
    scatter_blocks(kv_cache, blocks, new)
    pool.fork(list(prefix_table))
    return list(prefix_table) + new


def transfer_kv(src_kv_cache: torch.Tensor, src_block_table, num_tokens: int, dst_pool: BlockPool,
                dst_kv_cache: torch.Tensor, dst_prefix_table: list[int]) -> list[int] | None:
    """One sequence from the sender's cache to the receiver's pool and cache, in one process.

    The receiver already holds the first len(dst_prefix_table) blocks; the rest are gathered by the sender's
    table, allocated on the receiver and scattered there. Returns the receiver's table, or None with nothing
    changed when its pool cannot take them (checked before any byte moves).
    """
    check_tensor("src_kv_cache", src_kv_cache, ndim=6)
    check_tensor("dst_kv_cache", dst_kv_cache, ndim=6)
    n = num_blocks_to_send(num_tokens, src_kv_cache.shape[3], len(dst_prefix_table))
    check_prefix(dst_pool, dst_prefix_table)
    if dst_pool.num_free() < n:
        return None
    blocks = gather_blocks(src_kv_cache, src_block_table, num_tokens, len(dst_prefix_table))  # [2, L, n, ...]
    return receive_blocks(dst_pool, dst_kv_cache, blocks, dst_prefix_table)
