"""Paged MLA decode in Triton: the absorbed form's attention, multi-query over the latent cache, as FlashMLA's
decode kernel does it (deepseek-ai/FlashMLA@9241ae3, csrc/api/dense_decode.h: one KV head, head_dim_k 576,
head_dim_v 512, page_block_size 64).

Shapes: core/mla_attention.py (W = C + R; BLOCK_H query heads and BLOCK_N tokens per tile).
Versions (one kernel; `num_splits` selects):
    v1  grid (B, cdiv(H, BLOCK_H)). A program owns BLOCK_H heads of one sequence; it walks the context in
        tiles of BLOCK_N tokens, gathering each token's block id from the block table (a tile may span
        several blocks, or part of one), and keeps an online softmax in fp32. Each latent row is loaded once
        per program and serves all its heads twice: as the key (scores = q_c . c + q_pe . k_pe, two
        `tl.dot`s) and as the value (acc += p . c). Tokens past the context or behind a -1 block id are
        masked: never loaded.
    v2  grid (B, cdiv(H, BLOCK_H), P): split-KV for batches too small to fill the GPU. Each context is cut
        into P equal ranges (whole BLOCK_N tiles); each program writes its normalised partial output and
        log2-sum-exp in fp32, and the decode kernel's `reduce_splits` (triton_decode_merge.py)
        merges them. FlashMLA plans its splits per sequence instead (`get_mla_metadata`).
Why one kernel here and one per version in decode: v2 differs from v1 only in the range a program walks and
in what its last lines write, and NUM_SPLITS is a constexpr, so `if NUM_SPLITS == 1` is settled at compile
time and each version compiles to its own program anyway. Decode's versions differ in how the grid maps to
work (v3 plans its chunks in registers), which a flag would hide inside one body.
(Not here: FlashMLA's FP8 cache.)

    reference:  pagedkv_lib.core.mla_attention.mla_latent_attention (same signature)
    launcher:   mla_latent_attention_triton (checked, chooses P); launch_mla_decode (unchecked, for timing)

Memory traffic: read context_len * W cache elements per program (H / BLOCK_H programs per sequence share
them through L2), q [B, H, W]; write B * H * C; v2 adds B * H * P * (C + 1) fp32 written and read back.
FLOPs: 2 * H * context_len * (W + C) per sequence.
"""
import torch

from pagedkv_lib.core.mla_attention import mla_latent_attention

from .attention_args import LOG2E, dot_args, dtype_name, num_sms
from .backend import MISSING_TRITON
from .triton_decode_merge import reduce_splits
from .triton_online_softmax import online_softmax_step

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["check_mla_args", "choose_num_splits", "launch_mla_decode", "mla_latent_attention",
           "mla_latent_attention_triton"]

Q_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _mla_decode_kernel(
    q_ptr,              # [B, H, W] latent queries: [w_uk^T q_nope ; RoPE(q_pe)]
    kv_ptr,             # [N, S, W] latent cache: [c ; k_pe] per token
    block_tables_ptr,   # [B, M] int32, -1 padded
    context_lens_ptr,   # [B] int32
    out_ptr,            # [B, H, C] (v1), or [B, H, P, C] fp32 normalised partial outputs (v2)
    lse_ptr,            # [B, H, P] fp32 log2-sum-exp per split (v2; -inf: an empty split)
    stride_qb, stride_qh,
    stride_kvn, stride_kvs,
    stride_btb,
    stride_ob, stride_oh,
    scale_log2,         # LOG2E / sqrt(Dn + R): scores in base 2, exp2 below
    H, C, R,
    BLOCK_SIZE: tl.constexpr,   # S, tokens per cache block
    BLOCK_H: tl.constexpr,
    BLOCK_C: tl.constexpr,      # next power of 2 >= C
    BLOCK_R: tl.constexpr,      # next power of 2 >= R
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,   # P; 1 = v1
    DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
):
    b = tl.program_id(0)
    split = tl.program_id(2)
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)          # [BLOCK_H]
    offs_c = tl.arange(0, BLOCK_C)                                      # [BLOCK_C]
    offs_r = tl.arange(0, BLOCK_R)                                      # [BLOCK_R]
    head_ok = heads < H
    c_ok = offs_c < C
    r_ok = offs_r < R
    q_rows = q_ptr + b * stride_qb + heads[:, None] * stride_qh                           # [BLOCK_H, 1]
    q_c = tl.load(q_rows + offs_c[None, :], mask=head_ok[:, None] & c_ok[None, :], other=0.0)     # [BH, BC]
    q_r = tl.load(q_rows + C + offs_r[None, :], mask=head_ok[:, None] & r_ok[None, :], other=0.0)  # [BH, BR]
    q_c = q_c.to(DOT_DTYPE)
    q_r = q_r.to(DOT_DTYPE)
    n = tl.load(context_lens_ptr + b)
    chunk = tl.cdiv(tl.cdiv(n, NUM_SPLITS), BLOCK_N) * BLOCK_N         # tokens per split, whole tiles
    lo = split * chunk
    hi = tl.minimum(lo + chunk, n)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)                    # running max
    l = tl.zeros([BLOCK_H], tl.float32)                                 # running sum of exp
    acc = tl.zeros([BLOCK_H, BLOCK_C], tl.float32)                      # running p . c
    for start in range(lo, hi, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)                             # [BLOCK_N]
        in_ctx = pos < hi
        blk = tl.load(block_tables_ptr + b * stride_btb + pos // BLOCK_SIZE, mask=in_ctx, other=-1)
        ok = in_ctx & (blk >= 0)
        rows = kv_ptr + blk.to(tl.int64) * stride_kvn + (pos % BLOCK_SIZE) * stride_kvs   # [BLOCK_N]
        kv_c = tl.load(rows[:, None] + offs_c[None, :], mask=ok[:, None] & c_ok[None, :], other=0.0)
        kv_r = tl.load(rows[:, None] + C + offs_r[None, :], mask=ok[:, None] & r_ok[None, :], other=0.0)
        kv_c = kv_c.to(DOT_DTYPE)                                       # [BLOCK_N, BLOCK_C]
        s = tl.dot(q_c, tl.trans(kv_c), input_precision=DOT_PRECISION)  # [BLOCK_H, BLOCK_N]
        s += tl.dot(q_r, tl.trans(kv_r.to(DOT_DTYPE)), input_precision=DOT_PRECISION)
        s = tl.where(ok[None, :], s * scale_log2, float("-inf"))
        m, p, alpha, l = online_softmax_step(s, m, l)                   # p [BLOCK_H, BLOCK_N]
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), kv_c, input_precision=DOT_PRECISION)
    out = tl.where(l[:, None] > 0, acc / tl.maximum(l, 1e-30)[:, None], 0.0)   # [BLOCK_H, BLOCK_C]
    if NUM_SPLITS == 1:
        out_rows = out_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_c[None, :]
    else:
        row = (b * H + heads) * NUM_SPLITS + split                      # [BLOCK_H] rows of [B, H, P]
        out_rows = out_ptr + row[:, None].to(tl.int64) * C + offs_c[None, :]
        lse = tl.where(l > 0, m + tl.log2(tl.maximum(l, 1e-30)), float("-inf"))   # 0 / -inf: empty
        tl.store(lse_ptr + row, lse, mask=head_ok)
    tl.store(out_rows, out.to(out_ptr.dtype.element_ty), mask=head_ok[:, None] & c_ok[None, :])


def launch_mla_decode(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                      context_lens: torch.Tensor, kv_lora_rank: int, scale: float, out: torch.Tensor,
                      num_splits: int = 1, block_h: int = 16, block_n: int = 32, num_warps: int = 4,
                      num_stages: int = 2) -> None:
    """Launch without checks (the benchmark times this); `out` [B, H, C] is written. num_splits > 1: v2,
    with fp32 partials allocated here."""
    B, H, W = q_latent.shape
    precision, dot_dtype = dot_args(q_latent, kv_cache)
    grid = (B, triton.cdiv(H, block_h), num_splits)
    part_out, part_lse = out, out                                       # v1 writes `out` directly
    if num_splits > 1:
        part_out = torch.empty(B, H, num_splits, kv_lora_rank, dtype=torch.float32, device=out.device)
        part_lse = torch.empty(B, H, num_splits, dtype=torch.float32, device=out.device)   # [B, H, P]
    _mla_decode_kernel[grid](
        q_latent, kv_cache, block_tables, context_lens, part_out, part_lse,
        q_latent.stride(0), q_latent.stride(1),
        kv_cache.stride(0), kv_cache.stride(1),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        scale * LOG2E, H, kv_lora_rank, W - kv_lora_rank,
        BLOCK_SIZE=kv_cache.shape[1], BLOCK_H=block_h,
        BLOCK_C=max(16, triton.next_power_of_2(kv_lora_rank)),
        BLOCK_R=max(16, triton.next_power_of_2(W - kv_lora_rank)),
        BLOCK_N=block_n, NUM_SPLITS=num_splits, DOT_PRECISION=precision, DOT_DTYPE=dot_dtype,
        num_warps=num_warps, num_stages=num_stages,
    )
    if num_splits > 1:
        reduce_splits(part_out, part_lse, out)


def choose_num_splits(B: int, H: int, max_context_len: int, sms: int, block_h: int = 16,
                      min_tokens: int = 256) -> int:
    """P for v2: enough programs to give every SM one (B * cdiv(H, block_h) * P >= sms), no split shorter
    than min_tokens, at most 32; 1 (v1) when the batch alone fills the GPU."""
    programs = B * -(-H // block_h)
    if programs >= sms:
        return 1
    return max(1, min(32, -(-sms // programs), max_context_len // min_tokens))


def check_mla_args(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                   context_lens: torch.Tensor, kv_lora_rank: int) -> None:
    """Raise unless the kernels can read these: types, shapes, dtypes, contiguity, one device."""
    for name, t, ndim in (("q_latent", q_latent, 3), ("kv_cache", kv_cache, 3),
                          ("block_tables", block_tables, 2), ("context_lens", context_lens, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != ndim:
            raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if q_latent.dtype not in Q_DTYPES or kv_cache.dtype != q_latent.dtype:
        raise TypeError(f"q_latent, kv_cache: expected one dtype of float32, float16, bfloat16, got "
                        f"{dtype_name(q_latent.dtype)} and {dtype_name(kv_cache.dtype)}")
    W = kv_cache.shape[2]
    if q_latent.shape[2] != W or not 0 < kv_lora_rank < W:
        raise ValueError(f"q_latent: expected [B, H, {W}] like the cache rows, 0 < kv_lora_rank < {W}, got "
                         f"shape {tuple(q_latent.shape)} and kv_lora_rank {kv_lora_rank}")
    B = q_latent.shape[0]
    if block_tables.shape[0] != B or tuple(context_lens.shape) != (B,):
        raise ValueError(f"block_tables, context_lens: expected [{B}, M] and [{B}], got "
                         f"{tuple(block_tables.shape)} and {tuple(context_lens.shape)}")
    for name, t in (("block_tables", block_tables), ("context_lens", context_lens)):
        if t.dtype != torch.int32:
            raise TypeError(f"{name}: expected int32, got {dtype_name(t.dtype)}")
    for name, t in (("q_latent", q_latent), ("kv_cache", kv_cache), ("block_tables", block_tables)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor, got strides {tuple(t.stride())}")
    devices = {t.device for t in (q_latent, kv_cache, block_tables, context_lens)}
    if len(devices) != 1:
        raise ValueError(f"expected all tensors on one device, got {sorted(map(str, devices))}")


def mla_latent_attention_triton(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                                context_lens: torch.Tensor, kv_lora_rank: int, scale: float,
                                num_splits: int | None = None) -> torch.Tensor:
    """`mla_latent_attention` on the Triton kernel, after `check_mla_args`: a new [B, H, C] tensor of
    q_latent's dtype. num_splits None: `choose_num_splits` (which reads the longest context: one
    device-to-host copy)."""
    check_mla_args(q_latent, kv_cache, block_tables, context_lens, kv_lora_rank)
    B = q_latent.shape[0]
    out = q_latent.new_empty(B, q_latent.shape[1], kv_lora_rank)        # [B, H, C]
    if num_splits is None:
        longest = int(context_lens.max()) if B else 1
        num_splits = choose_num_splits(B, q_latent.shape[1], longest, num_sms(q_latent.device))
    if num_splits < 1:
        raise ValueError(f"num_splits: expected an int >= 1 or None, got {num_splits}")
    launch_mla_decode(q_latent, kv_cache, block_tables, context_lens, kv_lora_rank, scale, out, num_splits)
    return out
