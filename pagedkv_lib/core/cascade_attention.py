"""Shared-prefix (cascade) decode attention: the prefix every sequence of the batch shares is attended once
for the whole batch, each sequence's own suffix on its own, and the two parts merged.

Decode through a block table reads each sequence's whole context: B sequences sharing a prefix of P tokens
read that prefix's K/V B times. When the shared blocks are the same physical blocks (prefix caching, fork),
all B * G query rows of a KV head can meet the prefix's K/V as one dense tile: a matmul (B*G, D) x (D, P)
that reads the prefix once. Each query row's softmax over the prefix and over its suffix are two disjoint
parts of one row, so they merge exactly with `partial_softmax.merge_partials` (notebook 11).

The prefix is whole blocks: `num_prefix_blocks` leading entries of every block table, the same block ids in
every row (vLLM's cascade asserts `common_prefix_len % block_size == 0`; a shared tail that is not a full
block stays in each sequence's suffix). `common_prefix_blocks` counts them from the tables, in the way
vLLM's scheduler counts blocks whose reference count is the number of running requests.
`use_cascade_attention` is vLLM's rule for when the cascade pays.

Sources: Hydragen (Juravsky et al., 2024, arXiv:2402.05099: the shared prefix's attention as a batched
matmul); FlashInfer's cascade inference (flashinfer-ai/flashinfer@fb28d72:flashinfer/cascade.py:
`MultiLevelCascadeAttentionWrapper`, `merge_state`); vLLM
(vllm-project/vllm@0084b78:vllm/v1/attention/backends/flash_attn.py: `use_cascade_attention`,
`cascade_attention`; vllm-project/vllm@002f349:vllm/v1/core/single_type_kv_cache_manager.py:
`get_num_common_prefix_blocks`).
Shapes: docs/conventions.md (B sequences, H = H_kv * G query heads, D head dim, S = block_size).
"""
from __future__ import annotations

import torch

from .kv_cache import gather_kv
from .paged_attention import check_attention_args
from .partial_softmax import SoftmaxPartial, merge_partials, output, partial_of
from .validation import check_shape

# vLLM's thresholds (flash_attn.py @0084b78, `use_cascade_attention`; its comments call them arbitrary)
MIN_PREFIX_TOKENS = 256      # a shorter common prefix never pays
MIN_SEQS = 8                 # nor do fewer sequences
Q_TILE = 128                 # its performance model's tile sizes (FlashAttention's defaults)
KV_TILE = 128


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def common_prefix_blocks(block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int) -> int:
    """The leading block-table columns every row shares (same block id, not -1), capped at the blocks every
    context fills: the whole blocks a cascade may read once for the batch.

    vLLM counts the same blocks by reference count (a block held by all running requests,
    `get_num_common_prefix_blocks`) and then rounds the common prefix down to whole blocks.
    """
    if block_tables.dim() != 2 or block_tables.shape[0] == 0:
        raise ValueError(f"block_tables: expected [B, M] with B >= 1, got shape {tuple(block_tables.shape)}")
    tables = block_tables.cpu()
    same = (tables == tables[:1]).all(dim=0) & (tables[0] >= 0)       # [M]
    shared = int(same.int().cumprod(dim=0).sum())                     # leading run of shared columns
    return min(shared, int(context_lens.min()) // block_size)


def use_cascade_attention(common_prefix_len: int, query_lens: list[int], num_query_heads: int,
                          num_kv_heads: int, num_sms: int, *, use_alibi: bool = False,
                          use_sliding_window: bool = False) -> bool:
    """vLLM's rule (flash_attn.py @0084b78): cascade when the common prefix and the batch are long enough and
    either the plain kernel would not split the KV (no flash-decoding) or a model of waves says so.

    The model counts time in prefix KV tiles per wave of programs: the cascade's prefix pass runs
    H * cdiv(B, Q_TILE) programs that each walk every prefix tile; flash-decoding runs
    B * H_kv * cdiv(G, Q_TILE) programs per prefix tile. Cascade wins when its waves x tiles is smaller.
    """
    if common_prefix_len < MIN_PREFIX_TOKENS:
        return False
    if use_alibi or use_sliding_window:
        return False                                  # the variants vLLM's cascade does not support
    num_seqs = len(query_lens)
    if num_seqs < MIN_SEQS:
        return False
    group = num_query_heads // num_kv_heads
    flash_decoding = group > 1 and all(n == 1 for n in query_lens)
    if not flash_decoding:
        return True                                   # the plain kernel reads the prefix per sequence
    prefix_tiles = cdiv(common_prefix_len, KV_TILE)
    cascade_time = cdiv(num_query_heads * cdiv(num_seqs, Q_TILE), num_sms) * prefix_tiles
    decoding_time = cdiv(num_seqs * num_kv_heads * cdiv(group, Q_TILE) * prefix_tiles, num_sms)
    return cascade_time < decoding_time


def kv_bytes_read(num_seqs: int, prefix_len: int, suffix_len: int, num_kv_heads: int, head_dim: int,
                  element_bytes: int) -> dict:
    """Cache bytes one layer's decode reads: plain paged decode reads the prefix once per sequence,
    the cascade once for the batch; both read every suffix once."""
    per_token = 2 * num_kv_heads * head_dim * element_bytes           # K and V
    suffixes = num_seqs * suffix_len * per_token
    paged = num_seqs * prefix_len * per_token + suffixes
    cascade = prefix_len * per_token + suffixes
    return {"paged": paged, "cascade": cascade}


def _prefix_partial(q, k_cache, v_cache, prefix_table, num_prefix_blocks: int, scale: float, dtype):
    """Every query row against the shared prefix as one tile per KV head -> SoftmaxPartial [B, H_kv, G]."""
    B, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    n = num_prefix_blocks * S
    k = gather_kv(k_cache, prefix_table, n).to(dtype).permute(1, 0, 2)    # [H_kv, P, D]
    v = gather_kv(v_cache, prefix_table, n).to(dtype).permute(1, 0, 2)    # [H_kv, P, D]
    rows = q.to(dtype).view(B, H_kv, H // H_kv, D).permute(1, 0, 2, 3)   # [H_kv, B, G, D]
    rows = rows.reshape(H_kv, -1, D)                                      # [H_kv, B*G, D]
    scores = rows @ k.transpose(1, 2) * scale                             # [H_kv, B*G, P]: one matmul
    part = partial_of(scores, v[:, None])                                # [H_kv, B*G]
    m = part.m.view(H_kv, B, -1).permute(1, 0, 2)                         # [B, H_kv, G]
    l = part.l.view(H_kv, B, -1).permute(1, 0, 2)                         # [B, H_kv, G]
    acc = part.acc.view(H_kv, B, -1, D).permute(1, 0, 2, 3)               # [B, H_kv, G, D]
    return SoftmaxPartial(m, l, acc)


def _suffix_partial(q, k_cache, v_cache, block_tables, context_lens, num_prefix_blocks: int, scale, dtype):
    """Each sequence's own tokens after the prefix (possibly none) -> SoftmaxPartial [B, H_kv, G]."""
    B, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    parts = []
    for b in range(B):
        n = int(context_lens[b]) - num_prefix_blocks * S
        table = block_tables[b, num_prefix_blocks:]
        k = gather_kv(k_cache, table, n).to(dtype).permute(1, 0, 2)       # [H_kv, n, D]
        v = gather_kv(v_cache, table, n).to(dtype).permute(1, 0, 2)       # [H_kv, n, D]
        rows = q[b].to(dtype).view(H_kv, H // H_kv, D)                    # [H_kv, G, D]
        parts.append(partial_of(rows @ k.transpose(1, 2) * scale, v[:, None]))  # [H_kv, G]
    return SoftmaxPartial(torch.stack([p.m for p in parts]), torch.stack([p.l for p in parts]),
                          torch.stack([p.acc for p in parts]))


def cascade_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                             num_prefix_blocks: int) -> torch.Tensor:
    """Decode attention, q [B, H, D] (one query per sequence at its last position) -> out [B, H, D], with
    the first `num_prefix_blocks` blocks of every table (the same ids in every row) attended once for the
    batch, the rest per sequence, merged. Same result as `paged_attention.paged_attention_decode`.

    Math in float32 (float64 for float64 inputs); bf16 / fp16 / fp32 caches (no fp8 here).
    """
    check_attention_args(q, k_cache, v_cache, block_tables, context_lens, "context_lens")
    check_shape("q", q, (block_tables.shape[0], None, None), "[B, H, D], one row per block table")
    S = k_cache.shape[1]
    shared = common_prefix_blocks(block_tables, context_lens, S)
    if isinstance(num_prefix_blocks, bool) or not isinstance(num_prefix_blocks, int) \
            or not 1 <= num_prefix_blocks <= shared:
        raise ValueError(f"num_prefix_blocks: expected an int in [1, {shared}] (whole blocks every table "
                         f"shares and every context fills), got {num_prefix_blocks!r}")
    dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    prefix = _prefix_partial(q, k_cache, v_cache, block_tables[0], num_prefix_blocks, scale, dtype)
    suffix = _suffix_partial(q, k_cache, v_cache, block_tables, context_lens, num_prefix_blocks, scale, dtype)
    out = output(merge_partials(prefix, suffix))                          # [B, H_kv, G, D]
    return out.reshape(q.shape).to(q.dtype)                               # [B, H, D]
