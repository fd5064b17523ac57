"""Paged decode attention in Triton (flash-decoding): one query token per sequence, K/V read through the
block table, softmax computed online in fp32.

Shapes: docs/conventions.md.
Ideas from Flash-Decoding (Dao et al., 2023), vLLM's `triton_unified_attention.py` (GQA heads packed into
one tile for `tl.dot`, 2D/3D split kernels with a segment reduction) and SGLang's `decode_attention.py`.

Versions (one kernel; the `SPLIT` constexpr selects the version):
    v1  grid (B, H_kv * head_tiles): a program owns one KV head of one sequence and ALL its G query heads, so
        each K/V tile is read once per KV head; it walks the whole context and writes the output. Enough
        when B * H_kv fills the GPU (several programs per SM).
    v2  grid (B, H_kv * head_tiles, P): split-KV. The context is cut into P token ranges; each program writes
        its normalised partial output and log2-sum-exp in fp32; `_reduce_splits_kernel` merges them.
        Needed when B * H_kv is small (B = 1: 8 programs for 132 SMs).
    (A v3 that merged the splits inside this kernel, the last program of each group found by an atomic
    counter, was measured on an H200 and dropped: no faster. benchmarks/NOTES.md has the numbers.)
A KV tile of BLOCK_N tokens gathers each token's block id, so a tile may span several blocks (S < BLOCK_N)
or part of one (S > BLOCK_N). Tokens past the context or with a -1 block id are masked: never loaded.

    reference:  pagedkv_lib.core.paged_attention.paged_attention_decode (PyTorch, same signature)
    launcher:   paged_attention_decode_triton (checked); launch_decode_attention (unchecked, for timing)

Memory traffic: read 2 * context_len * H_kv * D elements of K/V per sequence (+ q, block table), write B*H*D;
v2 adds B * H * P * (D + 1) fp32 written and read back.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedkv_lib.core.paged_attention import check_attention_args, paged_attention_decode  # noqa: F401  (the reference)
from pagedkv_lib.core.validation import check_positive_int

from .backend import MISSING_TRITON, is_interpreted

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

LOG2E = 1.4426950408889634  # exp(x) = exp2(x * LOG2E)
_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}

__all__ = ["DecodeConfig", "choose_config", "launch_decode_attention", "paged_attention_decode",
           "paged_attention_decode_triton"]


# ----------------------------------------------------------------------------------------------------------
# launch configuration (defaults tuned on one H200: benchmarks/NOTES.md)

WAVES = 3                   # aim for B * H_kv * P >= WAVES * num_SMs programs (3 fit on an SM) ...
MIN_TOKENS_PER_SPLIT = 128  # ... but give each split at least this many tokens
MAX_SPLITS = 64


@dataclass(frozen=True)
class DecodeConfig:
    block_n: int            # tokens per KV tile
    block_g: int            # query heads per program
    block_d: int            # head_dim padded to a power of two
    num_warps: int
    num_stages: int
    num_splits: int         # P; 1 = v1
    tokens_per_split: int   # a multiple of block_n


def choose_config(B: int, H: int, H_kv: int, D: int, max_tokens: int, num_splits: int | None = None, *,
                  num_sms: int, interpreted: bool, block_n: int | None = None, num_warps: int | None = None,
                  num_stages: int | None = None) -> DecodeConfig:
    """Tile sizes and split count for a batch whose contexts are at most `max_tokens` long."""
    G = H // H_kv
    block_d = max(16, triton.next_power_of_2(D))
    block_g = min(max(16, triton.next_power_of_2(G)), max(16, 8192 // block_d))  # tl.dot needs M >= 16
    block_n = block_n or (32 if interpreted else 64)
    programs = B * H_kv * triton.cdiv(G, block_g)
    auto = num_splits is None
    if auto:
        want = triton.cdiv(WAVES * num_sms, programs)
        num_splits = max(1, min(want, MAX_SPLITS, max_tokens // MIN_TOKENS_PER_SPLIT))
    tokens_per_split = triton.cdiv(triton.cdiv(max_tokens, num_splits), block_n) * block_n
    if auto:
        num_splits = triton.cdiv(max_tokens, tokens_per_split)        # drop splits that would be empty
    return DecodeConfig(block_n, block_g, block_d, num_warps or 4, num_stages or 2, num_splits,
                        tokens_per_split)


# ----------------------------------------------------------------------------------------------------------
# kernels

@triton.jit
def _decode_attention_kernel(
    q_ptr,                  # [B, H, D] contiguous
    k_cache_ptr,            # [N, S, H_kv, D] contiguous
    v_cache_ptr,            # [N, S, H_kv, D] contiguous
    block_tables_ptr,       # [B, M] int32, rows padded with -1
    context_lens_ptr,       # [B] int32, >= 1
    out_ptr,                # v1: [B, H, D] in q's dtype; v2: [B, H, P, D] fp32 partial outputs
    lse_ptr,                # v2: [B, H, P] fp32 log2-sum-exp per split (unused in v1)
    block_table_stride,     # elements between two block-table rows (M)
    tokens_per_split,       # tokens per split, a multiple of BLOCK_N (v1: >= every context)
    scale_log2,             # softmax scale * LOG2E: scores in the log2 domain
    NUM_HEADS: tl.constexpr,      # H
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    GROUP: tl.constexpr,          # G = H // H_kv
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_SIZE: tl.constexpr,     # S, tokens per cache block
    BLOCK_G: tl.constexpr,        # query heads per program (power of two; >= 16 on GPU for tl.dot)
    BLOCK_N: tl.constexpr,        # tokens per KV tile
    BLOCK_D: tl.constexpr,        # next power of two >= D (>= 16)
    SPLIT: tl.constexpr,          # False: v1, True: v2
    NUM_SPLITS: tl.constexpr,     # P (1 in v1)
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs, "tf32" (ignored for 16-bit inputs) otherwise
    DOT_DTYPE: tl.constexpr,      # tl.dot operands: q's dtype; fp32 in the interpreter (bf16 dot bug)
):
    HEAD_TILES: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    seq = tl.program_id(0)
    kv_head = tl.program_id(1) // HEAD_TILES
    g0 = (tl.program_id(1) % HEAD_TILES) * BLOCK_G
    split = tl.program_id(2)

    context_len = tl.load(context_lens_ptr + seq)
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, context_len)

    offs_g = g0 + tl.arange(0, BLOCK_G)                               # [BLOCK_G]
    offs_n = tl.arange(0, BLOCK_N)                                    # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    heads = kv_head * GROUP + offs_g                                  # [BLOCK_G] query heads of this KV head
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    q_rows = (seq * NUM_HEADS + heads).to(tl.int64) * HEAD_DIM
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)    # [BLOCK_G, BLOCK_D]; read G*D
    q = q.to(DOT_DTYPE)

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)               # [BLOCK_G] running max (log2)
    l_i = tl.zeros([BLOCK_G], tl.float32)                             # [BLOCK_G] running sum of exp2
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)                    # [BLOCK_G, BLOCK_D]
    table_row = block_tables_ptr + seq.to(tl.int64) * block_table_stride
    for n0 in range(start, end, BLOCK_N):
        tok = n0 + offs_n                                             # [BLOCK_N] logical positions
        block = tl.load(table_row + tok // BLOCK_SIZE, mask=tok < end, other=-1)  # [BLOCK_N]; read ids
        tok_mask = (tok < end) & (block >= 0)                         # -1 padding is never followed
        slot = block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE     # [BLOCK_N]
        row = (slot * NUM_KV_HEADS + kv_head) * HEAD_DIM              # [BLOCK_N] element offsets
        kv_mask = tok_mask[:, None] & d_mask[None, :]                 # [BLOCK_N, BLOCK_D]
        k = tl.load(k_cache_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        v = tl.load(v_cache_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        k, v = k.to(DOT_DTYPE), v.to(DOT_DTYPE)                       # [BLOCK_N, BLOCK_D] (no-op on GPU)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale_log2  # [BLOCK_G, BLOCK_N]
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))                    # [BLOCK_G]
        alpha = tl.exp2(m_i - m_new)                                  # [BLOCK_G] rescales the old state
        p = tl.exp2(s - m_new[:, None])                               # [BLOCK_G, BLOCK_N]
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out_mask = g_mask[:, None] & d_mask[None, :]
    l_safe = tl.where(l_i > 0, l_i, 1.0)                              # an empty split has l = 0, acc = 0
    o = acc / l_safe[:, None]                                         # [BLOCK_G, BLOCK_D]
    if SPLIT:
        part = (seq * NUM_HEADS + heads).to(tl.int64) * NUM_SPLITS + split   # [BLOCK_G] rows of [B, H, P]
        lse = tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf"))   # [BLOCK_G]; -inf: empty split
        tl.store(lse_ptr + part, lse, mask=g_mask)
        tl.store(out_ptr + part[:, None] * HEAD_DIM + offs_d[None, :], o, mask=out_mask)  # write G*D fp32
    else:
        tl.store(out_ptr + q_rows[:, None] + offs_d[None, :], o.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def _reduce_splits_kernel(
    part_out_ptr,           # [B, H, P, D] fp32 normalised partial outputs
    part_lse_ptr,           # [B, H, P] fp32 log2-sum-exp per split (-inf: empty split)
    out_ptr,                # [B, H, D] in q's dtype
    HEAD_DIM: tl.constexpr,       # D
    NUM_SPLITS: tl.constexpr,     # P
    BLOCK_P: tl.constexpr,        # next power of two >= P
    BLOCK_D: tl.constexpr,        # next power of two >= D
):
    row = tl.program_id(0).to(tl.int64)                               # seq * H + head
    offs_p = tl.arange(0, BLOCK_P)                                    # [BLOCK_P]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    p_mask = offs_p < NUM_SPLITS
    lse = tl.load(part_lse_ptr + row * NUM_SPLITS + offs_p, mask=p_mask, other=float("-inf"))  # [BLOCK_P]
    w = tl.exp2(lse - tl.max(lse, axis=0))                            # [BLOCK_P]; split 0 is never empty
    w = w / tl.sum(w, axis=0)
    ptrs = part_out_ptr + (row * NUM_SPLITS + offs_p[:, None]) * HEAD_DIM + offs_d[None, :]
    o = tl.load(ptrs, mask=p_mask[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)  # [BLOCK_P, BLOCK_D]
    out = tl.sum(w[:, None] * o, axis=0)                              # [BLOCK_D]
    tl.store(out_ptr + row * HEAD_DIM + offs_d, out.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


# ----------------------------------------------------------------------------------------------------------
# launchers

def launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                            config: DecodeConfig, out: torch.Tensor | None = None) -> torch.Tensor:
    """Launch with no checks (for timing and CUDA graphs): validate once with the checked launcher."""
    B, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    G = H // H_kv
    out = torch.empty_like(q) if out is None else out                # [B, H, D]
    P, head_tiles = config.num_splits, triton.cdiv(G, config.block_g)
    split = P > 1
    part_out, part_lse = out, out                                     # placeholders in v1
    if split:
        part_out = torch.empty(B, H, P, D, dtype=torch.float32, device=q.device)  # [B, H, P, D]
        part_lse = torch.empty(B, H, P, dtype=torch.float32, device=q.device)     # [B, H, P]
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    dot_dtype = tl.float32 if is_interpreted() else _TL_DTYPES[q.dtype]
    _decode_attention_kernel[(B, H_kv * head_tiles, P)](
        q, k_cache, v_cache, block_tables, context_lens, part_out, part_lse, block_tables.stride(0),
        config.tokens_per_split, scale * LOG2E,
        NUM_HEADS=H, NUM_KV_HEADS=H_kv, GROUP=G, HEAD_DIM=D, BLOCK_SIZE=S, BLOCK_G=config.block_g,
        BLOCK_N=config.block_n, BLOCK_D=config.block_d, SPLIT=split, NUM_SPLITS=P,
        DOT_PRECISION=precision, DOT_DTYPE=dot_dtype, num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    if split:
        _reduce_splits_kernel[(B * H,)](
            part_out, part_lse, out, HEAD_DIM=D, NUM_SPLITS=P, BLOCK_P=triton.next_power_of_2(P),
            BLOCK_D=config.block_d, num_warps=4,
        )
    return out


def paged_attention_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                                  num_splits: int | None = None) -> torch.Tensor:
    """Decode attention: q [B, H, D], one query per sequence at its last position -> out [B, H, D].

    Same contract as `pagedkv_lib.core.paged_attention.paged_attention_decode`. `num_splits`: None picks it
    from the shape (split-KV when B * H_kv is too small to fill the GPU); 1 forces v1; P > 1 forces v2 with
    P splits.
    """
    check_attention_args(q, k_cache, v_cache, block_tables, context_lens, "context_lens")
    if q.dtype == torch.float64:
        raise TypeError("paged_attention_decode_triton: expected float32, float16 or bfloat16, got float64")
    B = block_tables.shape[0]
    if q.shape[0] != B:
        raise ValueError(f"q: expected shape ({B}, H, D) [B, H, D] with one row per block table, "
                         f"got {tuple(q.shape)}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("context_lens", context_lens)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor, got strides {tuple(t.stride())}")
    if block_tables.stride(1) != 1:
        strides = tuple(block_tables.stride())
        raise ValueError(f"block_tables: expected rows with stride 1, got strides {strides}")
    devices = {t.device for t in (q, k_cache, v_cache, block_tables, context_lens)}
    if len(devices) != 1:
        raise ValueError(f"paged_attention_decode_triton: expected all tensors on one device, got {devices}")
    if num_splits is not None:
        check_positive_int("num_splits", num_splits)
    if B == 0:
        return torch.empty_like(q)
    max_tokens = block_tables.shape[1] * k_cache.shape[1]             # >= every context: no device sync
    num_sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    config = choose_config(B, q.shape[1], k_cache.shape[2], q.shape[2], max_tokens, num_splits,
                           num_sms=num_sms, interpreted=is_interpreted())
    return launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale, config)

