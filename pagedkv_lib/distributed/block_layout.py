"""The two block layouts of a paged cache, and what a transfer between them costs.

    NHD   k_cache [N, S, H_kv, D]   the course's layout (nano-vllm's, FlashInfer's default "NHD")
    HND   k_cache [N, H_kv, S, D]   FlashInfer's "HND"; vLLM's NIXL connector asks for it
                                   (`NixlConnector.get_required_kvcache_layout` returns "HND")

The bytes of one block are the same; their order is not. In NHD one KV head's slice of a block is S runs
of D elements (a run per token); in HND it is one run of S x D. That matters when the two sides of a transfer
shard heads differently (a prefill instance at tp 1, a decode instance at tp 2): a decode rank reads only its
heads of every block, one contiguous piece per block in HND, S pieces in NHD (`head_runs`). A sender and a
receiver with different layouts convert each block on one side (`convert_layout`). Shapes:
docs/conventions.md.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.validation import check_positive_int, check_tensor

LAYOUTS = ("NHD", "HND")


def convert_layout(blocks: torch.Tensor, src: str, dst: str) -> torch.Tensor:
    """Blocks whose last three dims are (S, H_kv, D) in NHD or (H_kv, S, D) in HND, in layout `dst` (a new
    contiguous tensor; the same tensor when src == dst)."""
    check_tensor("blocks", blocks)
    for name, layout in (("src", src), ("dst", dst)):
        if layout not in LAYOUTS:
            raise ValueError(f"{name}: expected one of {LAYOUTS}, got {layout!r}")
    if blocks.dim() < 3:
        raise ValueError(f"blocks: expected at least 3 dims (..., S, H_kv, D), got {tuple(blocks.shape)}")
    if src == dst:
        return blocks
    return blocks.transpose(-3, -2).contiguous()          # [..., S, H_kv, D] <-> [..., H_kv, S, D]


def head_runs(layout: str, block_size: int, num_kv_heads: int, heads: list[int]) -> int:
    """Contiguous pieces of one block (one layer, K or V) that hold the KV heads `heads` (consecutive ids)."""
    check_positive_int("block_size", block_size)
    check_positive_int("num_kv_heads", num_kv_heads)
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    if not heads or heads != list(range(heads[0], heads[0] + len(heads))) or not 0 <= heads[0] \
            or heads[-1] >= num_kv_heads:
        raise ValueError(f"heads: expected consecutive ids in [0, {num_kv_heads}), got {heads}")
    if len(heads) == num_kv_heads or layout == "HND":
        return 1                                      # the whole block, or one run of S x D per head
    return block_size                                 # NHD: one run per token
