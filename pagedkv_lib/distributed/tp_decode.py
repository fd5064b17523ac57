"""Decode attention under tensor parallelism: each rank attends with its heads over its shard, then gather.

Rank r takes its H / tp query heads of q [B, H, D], runs the ordinary paged decode attention
(`core.paged_attention`) over its cache shard [N, S, H_kv / tp, D] with the SAME block tables and context
lengths as every other rank, and the ranks all-gather their [B, H / tp, D] outputs along the heads. (In a
model the next step is the output projection, split by rows, whose partial sums are all-reduced; gathering
the attention output itself is what lets the result be compared with one process.)

`tp_decode_rank` is the rank program of notebook 17 (`launch_ranks(tp_decode_rank, ...)`): every rank builds
the same batch from the same seed (the scheduler's metadata is replicated), keeps its shard, and rank 0
returns the gathered output. Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.testing.paged_batch import make_paged_batch

from .rank_launcher import RankContext
from .tp_shard import check_tp, kv_head_ids, query_head_ids, shard_kv_cache


def tp_decode_attention(q: torch.Tensor, k_shard: torch.Tensor, v_shard: torch.Tensor,
                        block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float, rank: int,
                        tp_size: int, group=None) -> torch.Tensor:
    """q [B, H, D] (all heads), k_shard / v_shard [N, S, H_kv / tp, D] -> out [B, H, D] on every rank."""
    heads = query_head_ids(rank, q.shape[1], tp_size)
    q_rank = q[:, heads[0] : heads[-1] + 1].contiguous()                              # [B, H / tp, D]
    out = paged_attention_decode(q_rank, k_shard, v_shard, block_tables, context_lens, scale)  # [B, H/tp, D]
    parts = [torch.empty_like(out) for _ in range(tp_size)]                           # tp x [B, H / tp, D]
    dist.all_gather(parts, out, group=group)
    return torch.cat(parts, dim=1)                                                    # [B, H, D]


def tp_decode_rank(ctx: RankContext, seq_lens: list[int], block_size: int, num_heads: int,
                   kv_head_counts: list[int], head_dim: int, batch_seed: int = 0) -> list[dict]:
    """One rank of a tensor-parallel decode step, once per H_kv in `kv_head_counts`; rank 0's results hold
    the gathered outputs as lists."""
    out = []
    for num_kv_heads in kv_head_counts:
        check_tp(num_heads, num_kv_heads, ctx.world_size)
        batch = make_paged_batch(seq_lens, block_size, num_heads, num_kv_heads, head_dim, seed=batch_seed)
        k_shard = shard_kv_cache(batch.k_cache, ctx.rank, ctx.world_size).to(ctx.device)  # [N, S, H_kv/tp, D]
        v_shard = shard_kv_cache(batch.v_cache, ctx.rank, ctx.world_size).to(ctx.device)  # [N, S, H_kv/tp, D]
        gathered = tp_decode_attention(batch.q.to(ctx.device), k_shard, v_shard,
                                       batch.block_tables.to(ctx.device), batch.context_lens.to(ctx.device),
                                       head_dim**-0.5, ctx.rank, ctx.world_size)           # [B, H, D]
        out.append({"num_kv_heads": num_kv_heads, "rank": ctx.rank, "backend": ctx.backend,
                    "query_heads": query_head_ids(ctx.rank, num_heads, ctx.world_size),
                    "kv_heads": kv_head_ids(ctx.rank, num_kv_heads, ctx.world_size),
                    "shard_shape": list(k_shard.shape), "shard_bytes": 2 * k_shard.nbytes,
                    "out": gathered.cpu().tolist() if ctx.rank == 0 else None})
    return out
