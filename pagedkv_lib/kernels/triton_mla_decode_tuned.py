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
16-byte loads), C and R are powers of 2 (no feature masks: DeepSeek's 512 + 64), the latent is taken in
two halves of C / 2 (a warpgroup MMA is at most 256 wide), whole tiles come through TMA descriptors
(Hopper's tensor memory accelerator; the last, partial tile by masked pointers, since rows past a context
may hold NaN), the loads are pipelined (`num_stages`), and the context is split over programs only as far
as the GPU needs (`choose_tuned_splits`). Same result as the teaching kernel up to rounding; same split-KV
partials, merged by `reduce_splits`. What still separates it from FlashInfer's fa3 (about 2x at large
batches, benchmarks/NOTES.md): one block of 8 warps per SM (255 registers, 222 KB of shared memory), and
no overlap of one tile's softmax with another's matrix products (fa3 and FlashMLA specialise warpgroups).

    launcher:   launch_mla_decode_tuned (unchecked, for timing); mla_latent_attention_tuned (checked)
"""
import importlib.util

import torch

from .attention_args import LOG2E, dot_args, num_sms
from .backend import MISSING_TRITON, is_interpreted
from .triton_decode_merge import reduce_splits
from .triton_mla_decode import check_mla_args

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["TUNED", "choose_tuned_splits", "launch_mla_decode_tuned", "mla_latent_attention_tuned",
           "tma_supported"]

TUNED = dict(block_h=64, block_n=64, num_warps=8, num_stages=2, tma=True)    # the fastest tuned config of
# benchmarks/results/flashinfer_run2/bench_mla.txt at B = 8, 64, 128 (H100; TMA 8-10% faster than pointers)


@triton.jit
def _attend_tile(q_lo, q_hi, q_r, kv_lo, kv_hi, kv_r, valid, scale_log2, m, l, acc_lo, acc_hi,
                 DOT_PRECISION: tl.constexpr):
    """One tile of BLOCK_N latent rows against BLOCK_H heads: the scores over W = the two halves of c and
    k_pe, the online softmax update (m, l), and p . c into the accumulator's two halves [BLOCK_H, C / 2]
    (a warpgroup MMA is at most 256 wide). Rows not `valid` score -inf; they must hold finite values."""
    s = tl.dot(q_lo, tl.trans(kv_lo), input_precision=DOT_PRECISION)   # [BLOCK_H, BLOCK_N]
    s = tl.dot(q_hi, tl.trans(kv_hi), s, input_precision=DOT_PRECISION)
    s = tl.dot(q_r, tl.trans(kv_r), s, input_precision=DOT_PRECISION)
    s = tl.where(valid[None, :], s * scale_log2, float("-inf"))
    # triton_online_softmax.online_softmax_step's lines, p before alpha: the order the tuned configs were
    # measured in. Through the helper (alpha first) this kernel's SASS differs, and it ran slower at B = 64
    # and 128 on an H100 (benchmarks/NOTES.md, "One online-softmax step"); every other kernel calls it.
    m_new = tl.maximum(m, tl.max(s, axis=1))                            # [BLOCK_H]
    p = tl.exp2(s - m_new[:, None])                                     # [BLOCK_H, BLOCK_N]
    alpha = tl.exp2(m - m_new)
    l = l * alpha + tl.sum(p, axis=1)
    p = p.to(kv_lo.dtype)
    acc_lo = tl.dot(p, kv_lo, acc_lo * alpha[:, None], input_precision=DOT_PRECISION)
    acc_hi = tl.dot(p, kv_hi, acc_hi * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l, acc_lo, acc_hi


@triton.jit
def _mla_decode_tuned_kernel(
    q_ptr,              # [B, H, W] latent queries
    kv_ptr,             # [N, S, W] latent cache
    kv_c_desc,          # TMA descriptor of the cache viewed [N * S, W], blocks [BLOCK_N, C / 2] (USE_TMA)
    kv_r_desc,          # the same, blocks [BLOCK_N, R]
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
    USE_TMA: tl.constexpr,      # whole tiles through the tensor memory accelerator, the last one by pointers
    DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    HALF: tl.constexpr = C // 2
    b = tl.program_id(0)
    split = tl.program_id(2)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)          # [BLOCK_H]
    head_ok = heads < H
    offs_h = tl.arange(0, HALF)                                         # [C / 2]
    offs_r = tl.arange(0, R)                                            # [R]
    offs_n = tl.arange(0, BLOCK_N)                                      # [BLOCK_N]
    q_rows = q_ptr + b * stride_qb + heads[:, None] * stride_qh                           # [BLOCK_H, 1]
    q_lo = tl.load(q_rows + offs_h[None, :], mask=head_ok[:, None], other=0.0).to(DOT_DTYPE)      # [BH, C/2]
    q_hi = tl.load(q_rows + HALF + offs_h[None, :], mask=head_ok[:, None], other=0.0).to(DOT_DTYPE)
    q_r = tl.load(q_rows + C + offs_r[None, :], mask=head_ok[:, None], other=0.0).to(DOT_DTYPE)   # [BH, R]
    n = tl.load(context_lens_ptr + b)
    tiles = tl.cdiv(n, BLOCK_N)
    per_split = tl.cdiv(tiles, NUM_SPLITS)                              # whole tiles per split
    t_lo = split * per_split
    t_hi = tl.minimum(t_lo + per_split, tiles)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_H], tl.float32)
    acc_lo = tl.zeros([BLOCK_H, HALF], tl.float32)
    acc_hi = tl.zeros([BLOCK_H, HALF], tl.float32)
    t_whole = t_lo                                                      # tiles before it: read through TMA
    if USE_TMA:
        t_whole = tl.minimum(t_hi, n // BLOCK_N)
        for t in range(t_lo, t_whole):                                  # whole tiles: no mask at all
            start = t * BLOCK_N
            blk = tl.load(block_tables_ptr + b * stride_btb + start // BLOCK_SIZE)
            row = blk * BLOCK_SIZE + start % BLOCK_SIZE                 # the tile's first row of [N * S, W]
            kv_lo = kv_c_desc.load([row, 0]).to(DOT_DTYPE)              # [BLOCK_N, C / 2]
            kv_hi = kv_c_desc.load([row, HALF]).to(DOT_DTYPE)
            kv_r = kv_r_desc.load([row, C]).to(DOT_DTYPE)               # [BLOCK_N, R]
            m, l, acc_lo, acc_hi = _attend_tile(q_lo, q_hi, q_r, kv_lo, kv_hi, kv_r, offs_n < BLOCK_N,
                                                scale_log2, m, l, acc_lo, acc_hi, DOT_PRECISION)
    for t in range(t_whole, t_hi):                                      # by pointers, masked past the context
        pos = t * BLOCK_N + offs_n                                      # [BLOCK_N]
        ok = pos < n
        blk = tl.load(block_tables_ptr + b * stride_btb + pos // BLOCK_SIZE).to(tl.int64)   # [BLOCK_N], 1 id
        rows = kv_ptr + blk * stride_kvn + (pos % BLOCK_SIZE) * stride_kvs                   # [BLOCK_N]
        kv_lo = tl.load(rows[:, None] + offs_h[None, :], mask=ok[:, None], other=0.0).to(DOT_DTYPE)
        kv_hi = tl.load(rows[:, None] + HALF + offs_h[None, :], mask=ok[:, None], other=0.0).to(DOT_DTYPE)
        kv_r = tl.load(rows[:, None] + C + offs_r[None, :], mask=ok[:, None], other=0.0).to(DOT_DTYPE)
        m, l, acc_lo, acc_hi = _attend_tile(q_lo, q_hi, q_r, kv_lo, kv_hi, kv_r, ok, scale_log2, m, l, acc_lo,
                                            acc_hi, DOT_PRECISION)
    inv_l = tl.where(l > 0, 1.0 / tl.maximum(l, 1e-30), 0.0)[:, None]  # [BLOCK_H, 1]
    if NUM_SPLITS == 1:
        out_rows = out_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_h[None, :]
    else:
        row_id = (b * H + heads) * NUM_SPLITS + split                   # [BLOCK_H] rows of [B, H, P]
        out_rows = out_ptr + row_id[:, None].to(tl.int64) * C + offs_h[None, :]
        lse = tl.where(l > 0, m + tl.log2(tl.maximum(l, 1e-30)), float("-inf"))
        tl.store(lse_ptr + row_id, lse, mask=head_ok)
    tl.store(out_rows, (acc_lo * inv_l).to(out_ptr.dtype.element_ty), mask=head_ok[:, None])
    tl.store(out_rows + HALF, (acc_hi * inv_l).to(out_ptr.dtype.element_ty), mask=head_ok[:, None])


def choose_tuned_splits(B: int, H: int, max_context_len: int, sms: int, block_h: int = 64,
                        block_n: int = 64, min_tiles: int = 2) -> int:
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
                            num_stages: int = TUNED["num_stages"], tma: bool = TUNED["tma"]) -> None:
    """Launch without checks (the benchmark times this); `out` [B, H, C] is written. num_splits > 1: fp32
    partials allocated here, merged by `reduce_splits`. tma: whole tiles through TMA descriptors (Hopper and
    later; the cache's rows 16-byte aligned)."""
    B, H, W = q_latent.shape
    N, S = kv_cache.shape[:2]
    rows = kv_cache.view(N * S, W)                                      # [N * S, W]
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        kv_c_desc = TensorDescriptor.from_tensor(rows, [block_n, kv_lora_rank // 2])
        kv_r_desc = TensorDescriptor.from_tensor(rows, [block_n, W - kv_lora_rank])
    else:
        kv_c_desc = kv_r_desc = rows                                    # unused
    precision, dot_dtype = dot_args(q_latent, kv_cache)
    part_out, part_lse = out, out
    if num_splits > 1:
        part_out = torch.empty(B, H, num_splits, kv_lora_rank, dtype=torch.float32, device=out.device)
        part_lse = torch.empty(B, H, num_splits, dtype=torch.float32, device=out.device)   # [B, H, P]
    _mla_decode_tuned_kernel[(B, triton.cdiv(H, block_h), num_splits)](
        q_latent, kv_cache, kv_c_desc, kv_r_desc, block_tables, context_lens, part_out, part_lse,
        q_latent.stride(0), q_latent.stride(1),
        kv_cache.stride(0), kv_cache.stride(1),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        scale * LOG2E, H, C=kv_lora_rank, R=W - kv_lora_rank,
        BLOCK_SIZE=S, BLOCK_H=block_h, BLOCK_N=block_n, NUM_SPLITS=num_splits, USE_TMA=tma,
        DOT_PRECISION=precision, DOT_DTYPE=dot_dtype, num_warps=num_warps, num_stages=num_stages,
    )
    if num_splits > 1:
        reduce_splits(part_out, part_lse, out)


def descriptors_in_triton() -> bool:
    """Whether this Triton has host-side tensor descriptors (`triton.tools.tensor_descriptor`, from 3.4 on;
    the oldest Triton the course accepts, 3.0, has none)."""
    return importlib.util.find_spec("triton.tools.tensor_descriptor") is not None


def tma_supported(kv_cache: torch.Tensor) -> bool:
    """Whether TMA descriptors can read this cache: a Triton that has them, in its interpreter or on a CUDA
    device of compute capability >= 9.0 (Hopper), and rows whose bytes are a multiple of 16 (the
    descriptor's stride)."""
    aligned = kv_cache.shape[-1] * kv_cache.element_size() % 16 == 0 and descriptors_in_triton()
    if is_interpreted():
        return aligned
    return aligned and kv_cache.is_cuda and torch.cuda.get_device_capability(kv_cache.device) >= (9, 0)


def _power_of_2(x: int) -> bool:
    return x >= 16 and x & (x - 1) == 0


def mla_latent_attention_tuned(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                               context_lens: torch.Tensor, kv_lora_rank: int, scale: float,
                               num_splits: int | None = None, block_n: int | None = None,
                               tma: bool | None = None) -> torch.Tensor:
    """`mla_latent_attention` on the tuned kernel: a new [B, H, C] tensor. Checked by `check_mla_args`,
    plus what the tiles assume: C and R powers of 2 (>= 16), the block size a multiple of block_n
    (default: the smaller of TUNED's and the block size). num_splits None: `choose_tuned_splits` (reads
    the longest context: one device-to-host copy). tma None: TUNED's where `tma_supported`."""
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
    if tma is None:
        tma = TUNED["tma"] and tma_supported(kv_cache)
    launch_mla_decode_tuned(q_latent, kv_cache, block_tables, context_lens, kv_lora_rank, scale, out,
                            num_splits, block_n=block_n, tma=tma)
    return out
