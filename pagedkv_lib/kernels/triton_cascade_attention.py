"""Shared-prefix (cascade) decode attention in Triton: the prefix the whole batch shares is read once.

Shapes: docs/conventions.md (B sequences, H = H_kv * G query heads, D head dim, S = block_size). Three
launches, all writing or reading one fp32 state buffer [B, H, SLOTS, (D | 1)] of normalised partial outputs
and base-2 log-sum-exps, the layout of split-KV decode (v2):

    suffix   the course's split-KV decode kernel (triton_decode_attention, v2, `launch_decode_partials`):
             each sequence's own tokens after the prefix, through the rest of its block table; slot 0 (an
             empty suffix writes lse = -inf, o = 0, which the merge weighs 0)
    prefix   `_shared_prefix_kernel`, grid (cdiv(B*G, BLOCK_M), H_kv, splits): a program takes BLOCK_M of the
             B*G query rows of one KV head (every sequence's G heads side by side) and walks one range of the
             prefix: scores = (BLOCK_M, D) x (D, BLOCK_N) per tile, online softmax; slots 1..splits
    merge    `triton_decode_merge.reduce_splits`, one program per (sequence, query head): the
             (m, l, acc) merge of notebook 11 over every slot (the prefix is never empty: the max is finite)

The prefix is `num_prefix_blocks` whole blocks: the first entries of every block table, the same ids in every
row (the kernel reads them from row 0). vLLM's cascade asserts the same (`common_prefix_len % block_size ==
0`); `core.cascade_attention.common_prefix_blocks` counts them. The splits over the prefix exist for the GPU:
B*G / BLOCK_M row tiles x H_kv heads alone are too few programs for 132 SMs.

Ideas: Hydragen (arXiv:2402.05099, the prefix as a batched matmul), FlashInfer's cascade
(flashinfer-ai/flashinfer@fb28d72:flashinfer/cascade.py), vLLM's `cascade_attention`
(vllm-project/vllm@0084b78:vllm/v1/attention/backends/flash_attn.py: a prefix pass over all queries, a
suffix pass, `merge_attn_states`).

    reference:  pagedkv_lib.core.cascade_attention.cascade_attention_decode (same signature)
    launcher:   cascade_attention_decode_triton (checked)

Memory traffic: the prefix's 2 * P * H_kv * D cache elements once per row tile (a GPU's L2 serves the repeats
of one (KV head, split) while its row tiles run side by side), each suffix's once, q, and the states:
B * H * SLOTS * (D + 1) fp32 written and read back.
"""
from dataclasses import dataclass

import torch

from pagedkv_lib.core.cascade_attention import common_prefix_blocks

from .attention_args import LOG2E, check_paged_args, dot_args, num_sms
from .backend import MISSING_TRITON, is_interpreted
from .decode_config import cdiv, choose_config, next_power_of_2
from .triton_decode_attention import launch_decode_partials
from .triton_decode_merge import reduce_splits
from .triton_online_softmax import online_softmax_step

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["CascadeConfig", "cascade_attention_decode_triton", "choose_cascade_config",
           "launch_cascade_attention"]

WAVES = 2                    # prefix programs per SM the splits aim at
SMALL_TILE_N = 32            # block_n once the batch alone gives a quarter of the SMs a program: on an H100
                             # (benchmarks/results/flashinfer_run/bench_cascade.txt, prefix 4096, 64 rows x
                             # 32 tokens vs x 64) 75 vs 86 us at B = 128 (64 programs), 124 vs 141 at B = 256,
                             # and 48 vs 42 at B = 64 (32 programs), where 64 stays


@dataclass(frozen=True)
class CascadeConfig:
    block_m: int             # query rows (of B*G) per prefix program, >= 16 for tl.dot
    block_n: int             # prefix tokens per KV tile
    block_d: int             # head_dim padded to a power of two
    num_splits: int          # prefix ranges, each of tokens_per_split tokens (the last shorter)
    tokens_per_split: int    # a multiple of block_n
    num_warps: int
    num_stages: int


def choose_cascade_config(B: int, H: int, H_kv: int, D: int, prefix_len: int, *, num_sms: int,
                          interpreted: bool, block_m: int | None = None, block_n: int | None = None,
                          num_splits: int | None = None) -> CascadeConfig:
    """Tiles and prefix splits for B sequences sharing prefix_len tokens; deterministic in its arguments.
    num_splits None: enough to give WAVES programs per SM, never an empty split. block_m, block_n: >= 16
    (tl.dot), powers of two; block_n None: 64, or SMALL_TILE_N when the programs fill a quarter of the SMs."""
    block_d = max(16, next_power_of_2(D))
    block_m = block_m or (16 if interpreted else 64)
    programs = cdiv(B * (H // H_kv), block_m) * H_kv
    block_n = block_n or (16 if interpreted else 64 if 4 * programs < num_sms else SMALL_TILE_N)
    want = num_splits or cdiv(WAVES * num_sms, programs)
    splits = max(1, min(want, cdiv(prefix_len, block_n)))
    tokens_per_split = cdiv(cdiv(prefix_len, splits), block_n) * block_n
    return CascadeConfig(block_m, block_n, block_d, cdiv(prefix_len, tokens_per_split), tokens_per_split,
                         num_warps=4, num_stages=2)


@triton.jit(do_not_specialize=["num_rows", "prefix_len", "tokens_per_split"])
def _shared_prefix_kernel(
    q_ptr,                  # [B, H, D] contiguous
    k_cache_ptr,            # [N, S, H_kv, D] contiguous, q's dtype
    v_cache_ptr,            # [N, S, H_kv, D]
    prefix_table_ptr,       # [num_prefix_blocks] int32: the shared blocks (row 0 of the block tables)
    part_out_ptr,           # [B, H, SLOTS, D] fp32 normalised partial outputs
    part_lse_ptr,           # [B, H, SLOTS] fp32 log2-sum-exp
    num_rows,               # B * G
    prefix_len,             # num_prefix_blocks * S
    tokens_per_split,       # a multiple of BLOCK_N
    scale_log2,             # softmax scale * LOG2E
    NUM_HEADS: tl.constexpr,      # H
    GROUP: tl.constexpr,          # G = H // H_kv
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_SIZE: tl.constexpr,     # S
    NUM_SLOTS: tl.constexpr,      # SLOTS
    FIRST_SLOT: tl.constexpr,     # the slot of split 0 (the suffix's come first)
    BLOCK_M: tl.constexpr,        # query rows per program
    BLOCK_N: tl.constexpr,        # tokens per KV tile
    BLOCK_D: tl.constexpr,        # next power of two >= D
    DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    """Rows [tile * BLOCK_M, +BLOCK_M) of one KV head's B*G query rows against one range of the prefix."""
    tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    offs_m = tile * BLOCK_M + tl.arange(0, BLOCK_M)                   # [BLOCK_M] rows of B*G
    offs_n = tl.arange(0, BLOCK_N)                                    # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    m_mask = offs_m < num_rows
    d_mask = offs_d < HEAD_DIM
    seq = offs_m // GROUP                                             # [BLOCK_M] sequence of each row
    head = kv_head * GROUP + offs_m % GROUP                           # [BLOCK_M] its query head
    row = (seq * NUM_HEADS + head).to(tl.int64)                       # [BLOCK_M] rows of [B, H]
    q = tl.load(q_ptr + row[:, None] * HEAD_DIM + offs_d[None, :],
                mask=m_mask[:, None] & d_mask[None, :], other=0.0)    # [BLOCK_M, BLOCK_D]; read M*D
    q = q.to(DOT_DTYPE)

    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, prefix_len)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)               # [BLOCK_M] running max (log2)
    l_i = tl.zeros([BLOCK_M], tl.float32)                             # [BLOCK_M] running sum of exp2
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)                    # [BLOCK_M, BLOCK_D]
    for n0 in range(start, end, BLOCK_N):
        tok = n0 + offs_n                                             # [BLOCK_N] prefix positions
        tok_mask = tok < end
        block = tl.load(prefix_table_ptr + tok // BLOCK_SIZE, mask=tok_mask, other=0)  # [BLOCK_N]
        slot = block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE     # [BLOCK_N]
        kv_row = (slot * NUM_KV_HEADS + kv_head) * HEAD_DIM           # [BLOCK_N] element offsets
        kv_mask = tok_mask[:, None] & d_mask[None, :]                 # [BLOCK_N, BLOCK_D]
        k = tl.load(k_cache_ptr + kv_row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        v = tl.load(v_cache_ptr + kv_row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        s = tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION) * scale_log2  # [M, N]
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        m_i, p, alpha, l_i = online_softmax_step(s, m_i, l_i)         # p [BLOCK_M, BLOCK_N]
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=DOT_PRECISION)

    o = acc / l_i[:, None]                                            # [BLOCK_M, BLOCK_D]; splits non-empty
    lse = m_i + tl.log2(l_i)                                          # [BLOCK_M]
    slots = row * NUM_SLOTS + FIRST_SLOT + split                      # [BLOCK_M] rows of [B, H, SLOTS]
    tl.store(part_lse_ptr + slots, lse, mask=m_mask)
    tl.store(part_out_ptr + slots[:, None] * HEAD_DIM + offs_d[None, :], o,
             mask=m_mask[:, None] & d_mask[None, :])


def launch_cascade_attention(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                             num_prefix_blocks: int, config: CascadeConfig) -> torch.Tensor:
    """Launch with no checks (timing): validate once with the checked launcher."""
    B, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    prefix_len = num_prefix_blocks * S
    suffix_tables = block_tables[:, num_prefix_blocks:]               # [B, M - n] view, rows stride M
    suffix_lens = (context_lens - prefix_len).to(torch.int32)         # [B], 0 allowed
    max_suffix = max(1, suffix_tables.shape[1] * S)
    suffix_config = choose_config(B, H, H_kv, D, max_suffix, 1, num_sms=num_sms(q.device),
                                  interpreted=is_interpreted(), version=2,
                                  cache_bytes=k_cache.element_size())
    slots = 1 + config.num_splits                                     # slot 0: the suffix
    part_out = torch.empty(B, H, slots, D, dtype=torch.float32, device=q.device)  # [B, H, SLOTS, D]
    part_lse = torch.empty(B, H, slots, dtype=torch.float32, device=q.device)     # [B, H, SLOTS]
    launch_decode_partials(q, k_cache, v_cache, suffix_tables, suffix_lens, scale, suffix_config, part_out,
                           part_lse)
    precision, dot_dtype = dot_args(q, k_cache)
    prefix_table = block_tables[0, :num_prefix_blocks].contiguous()  # [n] the shared block ids
    G = H // H_kv
    grid = (triton.cdiv(B * G, config.block_m), H_kv, config.num_splits)
    _shared_prefix_kernel[grid](
        q, k_cache, v_cache, prefix_table, part_out, part_lse, B * G, prefix_len, config.tokens_per_split,
        scale * LOG2E, NUM_HEADS=H, GROUP=G, NUM_KV_HEADS=H_kv, HEAD_DIM=D, BLOCK_SIZE=S, NUM_SLOTS=slots,
        FIRST_SLOT=1, BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_D=config.block_d,
        DOT_PRECISION=precision, DOT_DTYPE=dot_dtype, num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return reduce_splits(part_out, part_lse, torch.empty_like(q))     # [B, H, D]


def cascade_attention_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                                    num_prefix_blocks: int, *, config: CascadeConfig | None = None,
                                    check_values: bool = True) -> torch.Tensor:
    """Decode attention, q [B, H, D] -> out [B, H, D], with the first `num_prefix_blocks` blocks of every
    table (the same ids in every row) read once for the batch. Same contract as
    `core.cascade_attention.cascade_attention_decode`; bf16 / fp16 / fp32 caches (no fp8).

    check_values=False skips the checks that read the device (lengths, the shared ids: a host sync).
    """
    fn = "cascade_attention_decode_triton"
    check_paged_args(fn, q, k_cache, v_cache, block_tables, context_lens, "context_lens", check_values)
    B, M = block_tables.shape
    if q.shape[0] != B:
        raise ValueError(f"q: expected shape ({B}, H, D) [B, H, D] with one row per block table, "
                         f"got {tuple(q.shape)}")
    if k_cache.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"{fn}: k_cache: expected float32, float16 or bfloat16 (no fp8 here), got "
                        f"{k_cache.dtype}")
    bound = common_prefix_blocks(block_tables, context_lens, k_cache.shape[1]) if check_values and B else M
    if isinstance(num_prefix_blocks, bool) or not isinstance(num_prefix_blocks, int) \
            or not 1 <= num_prefix_blocks <= bound:
        raise ValueError(f"num_prefix_blocks: expected an int in [1, {bound}] (whole blocks every table "
                         f"shares and every context fills), got {num_prefix_blocks!r}")
    if config is None:
        config = choose_cascade_config(B, q.shape[1], k_cache.shape[2], q.shape[2],
                                       num_prefix_blocks * k_cache.shape[1], num_sms=num_sms(q.device),
                                       interpreted=is_interpreted())
    if config.num_splits * config.tokens_per_split < num_prefix_blocks * k_cache.shape[1]:
        raise ValueError(f"config: expected num_splits * tokens_per_split >= the prefix's "
                         f"{num_prefix_blocks * k_cache.shape[1]} tokens, got {config.num_splits} * "
                         f"{config.tokens_per_split}")
    return launch_cascade_attention(q, k_cache, v_cache, block_tables, context_lens, scale, num_prefix_blocks,
                                    config)
