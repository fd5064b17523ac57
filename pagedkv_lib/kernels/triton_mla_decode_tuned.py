"""Paged MLA decode, tuned: the teaching kernel (triton_mla_decode.py) reshaped for speed on Hopper, the way
FlashMLA (deepseek-ai/FlashMLA@9241ae3, csrc/sm90/decode) and FlashInfer's fa3 MLA kernel lay the work out.

MLA decode is compute-bound: the H = 128 query heads of a sequence all read ONE latent row per token, so one
latent tile [BLOCK_N, W] serves a [BLOCK_H, W] block of queries as a matmul, twice (scores over W = C + R,
then p . c over C). The teaching kernel already uses `tl.dot`; what it spends its time on instead:
    - it gathers every token's block id and row (any block size), so each tile is a per-token gather, masked
      on both axes (C and R need not be powers of 2);
    - its default tiles (16 heads x 32 tokens) give each `tl.dot` an M side of 16: a quarter of a Hopper
      warpgroup MMA (64 rows), and 8 programs per sequence re-read every latent row through L2.
Here: BLOCK_H = 64 heads are the M side of both dots (one warpgroup MMA height), a tile of BLOCK_N tokens lies
inside ONE cache block (block size % BLOCK_N == 0: one block-table load per tile, BLOCK_N contiguous rows,
16-byte loads), C and R are powers of 2 (no feature masks: DeepSeek's 512 + 64), the loads are pipelined
(`num_stages`), and the context is split over programs only as far as the GPU needs (`choose_tuned_splits`).
Same result as the teaching kernel up to rounding; same split-KV partials, merged by `reduce_splits`.

    launcher:   launch_mla_decode_tuned (unchecked, for timing); mla_latent_attention_tuned (checked)
"""
import torch

from .attention_args import LOG2E, dot_args, num_sms
from .backend import MISSING_TRITON
from .triton_decode_merge import reduce_splits
from .triton_mla_decode import check_mla_args

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["TUNED", "choose_tuned_splits", "launch_mla_decode_tuned", "mla_latent_attention_tuned"]

TUNED = dict(block_h=64, block_n=64, num_warps=8, num_stages=2)   # the default tiles (bench_mla.py)


@triton.jit
def _mla_decode_tuned_kernel(
    q_ptr,              # [B, H, W] latent queries
    kv_ptr,             # [N, S, W] latent cache
    block_tables_ptr,   # [B, M] int32
    context_lens_ptr,   # [B] int32
    out_ptr,            # [B, H, C] (one split), or [B, H, P, C] fp32 normalised partial outputs
    lse_ptr,            # [B, H, P] fp32 log2-sum-exp per split (-inf: an empty split)
    stride_qb, stride_qh,
    stride_kvn, stride_kvs,
    stride_btb,
    stride_ob, stride_oh,
    scale_log2,         # LOG2E / sqrt(Dn + R)
    H,
    C: tl.constexpr,            # kv_lora_rank, a power of 2
    R: tl.constexpr,            # rope dims, a power of 2
    BLOCK_SIZE: tl.constexpr,   # S; S % BLOCK_N == 0
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    b = tl.program_id(0)
    split = tl.program_id(2)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)          # [BLOCK_H]
    head_ok = heads < H
    offs_c = tl.arange(0, C)                                            # [C]
    offs_r = tl.arange(0, R)                                            # [R]
    offs_n = tl.arange(0, BLOCK_N)                                      # [BLOCK_N]
    q_rows = q_ptr + b * stride_qb + heads[:, None] * stride_qh                           # [BLOCK_H, 1]
    q_c = tl.load(q_rows + offs_c[None, :], mask=head_ok[:, None], other=0.0).to(DOT_DTYPE)       # [BH, C]
    q_r = tl.load(q_rows + C + offs_r[None, :], mask=head_ok[:, None], other=0.0).to(DOT_DTYPE)   # [BH, R]
    n = tl.load(context_lens_ptr + b)
    tiles = tl.cdiv(n, BLOCK_N)
    per_split = tl.cdiv(tiles, NUM_SPLITS)                              # whole tiles per split
    t_lo = split * per_split
    t_hi = tl.minimum(t_lo + per_split, tiles)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, C], tl.float32)
    for t in range(t_lo, t_hi):
        start = t * BLOCK_N
        pos = start + offs_n                                            # [BLOCK_N]
        ok = pos < n                                                    # only the last tile masks
        # one block id per tile, loaded as a vector: a scalar load here stops Triton pipelining the tile
        blk = tl.load(block_tables_ptr + b * stride_btb + pos // BLOCK_SIZE).to(tl.int64)    # [BLOCK_N]
        rows = kv_ptr + blk * stride_kvn + (pos % BLOCK_SIZE) * stride_kvs                   # [BLOCK_N]
        kv_c = tl.load(rows[:, None] + offs_c[None, :], mask=ok[:, None], other=0.0).to(DOT_DTYPE)  # [BN, C]
        kv_r = tl.load(rows[:, None] + C + offs_r[None, :], mask=ok[:, None], other=0.0).to(DOT_DTYPE)
        s = tl.dot(q_c, tl.trans(kv_c), input_precision=DOT_PRECISION)  # [BLOCK_H, BLOCK_N]
        s = tl.dot(q_r, tl.trans(kv_r), s, input_precision=DOT_PRECISION)
        s = tl.where(ok[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))                        # [BLOCK_H]
        p = tl.exp2(s - m_new[:, None])                                 # [BLOCK_H, BLOCK_N]
        alpha = tl.exp2(m - m_new)
        l = l * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(DOT_DTYPE), kv_c, acc * alpha[:, None], input_precision=DOT_PRECISION)
        m = m_new
    out = tl.where(l[:, None] > 0, acc / tl.maximum(l, 1e-30)[:, None], 0.0)   # [BLOCK_H, C]
    if NUM_SPLITS == 1:
        out_rows = out_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_c[None, :]
    else:
        row = (b * H + heads) * NUM_SPLITS + split                      # [BLOCK_H] rows of [B, H, P]
        out_rows = out_ptr + row[:, None].to(tl.int64) * C + offs_c[None, :]
        lse = tl.where(l > 0, m + tl.log2(tl.maximum(l, 1e-30)), float("-inf"))
        tl.store(lse_ptr + row, lse, mask=head_ok)
    tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None])


def choose_tuned_splits(B: int, H: int, max_context_len: int, sms: int, block_h: int = 64,
                        block_n: int = 64, min_tiles: int = 4) -> int:
    """P: enough programs for one per SM (B * cdiv(H, block_h) * P >= sms), each split at least min_tiles
    tiles (a split's fixed cost is its q load and its fp32 partial [block_h, C], written and read back);
    1 when the batch alone fills the GPU."""
    programs = B * -(-H // block_h)
    if programs >= sms:
        return 1
    tiles = -(-max_context_len // block_n)
    return max(1, min(-(-sms // programs), tiles // min_tiles))


def launch_mla_decode_tuned(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                            context_lens: torch.Tensor, kv_lora_rank: int, scale: float, out: torch.Tensor,
                            num_splits: int = 1, block_h: int = TUNED["block_h"],
                            block_n: int = TUNED["block_n"], num_warps: int = TUNED["num_warps"],
                            num_stages: int = TUNED["num_stages"]) -> None:
    """Launch without checks (the benchmark times this); `out` [B, H, C] is written. num_splits > 1: fp32
    partials allocated here, merged by `reduce_splits`."""
    B, H, W = q_latent.shape
    precision, dot_dtype = dot_args(q_latent, kv_cache)
    part_out, part_lse = out, out
    if num_splits > 1:
        part_out = torch.empty(B, H, num_splits, kv_lora_rank, dtype=torch.float32, device=out.device)
        part_lse = torch.empty(B, H, num_splits, dtype=torch.float32, device=out.device)   # [B, H, P]
    _mla_decode_tuned_kernel[(B, triton.cdiv(H, block_h), num_splits)](
        q_latent, kv_cache, block_tables, context_lens, part_out, part_lse,
        q_latent.stride(0), q_latent.stride(1),
        kv_cache.stride(0), kv_cache.stride(1),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        scale * LOG2E, H, C=kv_lora_rank, R=W - kv_lora_rank,
        BLOCK_SIZE=kv_cache.shape[1], BLOCK_H=block_h, BLOCK_N=block_n, NUM_SPLITS=num_splits,
        DOT_PRECISION=precision, DOT_DTYPE=dot_dtype, num_warps=num_warps, num_stages=num_stages,
    )
    if num_splits > 1:
        reduce_splits(part_out, part_lse, out)


def _power_of_2(x: int) -> bool:
    return x >= 16 and x & (x - 1) == 0


def mla_latent_attention_tuned(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                               context_lens: torch.Tensor, kv_lora_rank: int, scale: float,
                               num_splits: int | None = None, block_n: int | None = None) -> torch.Tensor:
    """`mla_latent_attention` on the tuned kernel: a new [B, H, C] tensor. Checked by `check_mla_args`,
    plus what the tiles assume: C and R powers of 2 (>= 16), the block size a multiple of block_n
    (default: the smaller of TUNED's and the block size). num_splits None: `choose_tuned_splits` (reads
    the longest context: one device-to-host copy)."""
    check_mla_args(q_latent, kv_cache, block_tables, context_lens, kv_lora_rank)
    S, W = kv_cache.shape[1:]
    block_n = block_n or min(TUNED["block_n"], S)
    if not (_power_of_2(kv_lora_rank) and _power_of_2(W - kv_lora_rank)) or block_n < 16 or S % block_n:
        raise ValueError(f"the tuned kernel: expected C and R powers of 2 >= 16 and a block size that is a "
                         f"multiple of block_n >= 16, got C {kv_lora_rank}, R {W - kv_lora_rank}, block size "
                         f"{S}, block_n {block_n}")
    B, H = q_latent.shape[:2]
    out = q_latent.new_empty(B, H, kv_lora_rank)                        # [B, H, C]
    if num_splits is None:
        longest = int(context_lens.max()) if B else 1
        num_splits = choose_tuned_splits(B, H, longest, num_sms(q_latent.device), block_n=block_n)
    if num_splits < 1:
        raise ValueError(f"num_splits: expected an int >= 1 or None, got {num_splits}")
    launch_mla_decode_tuned(q_latent, kv_cache, block_tables, context_lens, kv_lora_rank, scale, out,
                            num_splits, block_n=block_n)
    return out
