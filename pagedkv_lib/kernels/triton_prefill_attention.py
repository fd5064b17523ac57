"""Paged prefill (varlen) attention in Triton: a batch of query chunks, each the LAST q_len tokens of its
sequence, attending causally to its whole context through the block table; fp32 online softmax with exp2.

Shapes: docs/conventions.md. Tiles: BLOCK_M rows (query tokens x the G heads of one KV head), so
BLOCK_Q = BLOCK_M // G query tokens per tile; BLOCK_N KV tokens per tile; BLOCK_B a power of two >= B + 1
(at least 64: fewer recompiles).
Ideas from FlashAttention-2 (Dao, 2023: query tiles, online softmax, causal tiles skipped), vLLM's
`triton_unified_attention.py` (G heads packed into the M dimension so each K/V tile is read once per KV
head; query tiles indexed over the whole batch, cu_seqlens // BLOCK_Q + b) and Triton's fused-attention
tutorial (split off-diagonal / diagonal loops, K loaded transposed).

One kernel, grid ((T // BLOCK_Q + B) * H_kv,): program p takes KV head p % H_kv of query tile p // H_kv,
numbered over the whole batch (sequence b's tiles start at cu_seqlens_q[b] // BLOCK_Q + b, so
T // BLOCK_Q + B bounds them all: no host sync, the surplus programs return). A program loads
cu_seqlens_q and seq_lens as two vectors and finds its sequence by counting tile starts <= its tile (no
dependent binary search). Tiles run in reverse order, the heads of one tile together: the last query tiles
of a sequence see the most keys and start first (longest-first; the light tiles fill the tail).
Query i of a sequence sits at position seq_len - q_len + i (bottom-right causal alignment). The KV loop is
split in two: tiles entirely at or below the tile's first query position need no mask; the rest (the
diagonal) are masked by position and context length. Tiles above the diagonal are never visited.
K is read transposed ([D, BLOCK_N]) by pointer arithmetic; each KV tile gathers its tokens' block ids, so a
tile may span several blocks (S < BLOCK_N) or part of one (S > BLOCK_N); -1 entries are masked on the
diagonal and clamped to block 0 in the unmasked part, which under the contract never meets one.
FP8 caches as in triton_decode_attention (per-tensor k_scale, v_scale; scores x k_scale, output x v_scale).

    reference:  pagedkv_lib.core.paged_attention.paged_attention_varlen (same signature);
                (paged_attention_varlen_reference is the same function: it reads FP8 caches too)
    launcher:   paged_attention_varlen_triton (checked); launch_prefill_attention (unchecked, for timing)

Work: 4 * D * H * sum_b(q_len_b * (seq_len_b - q_len_b) + q_len_b * (q_len_b + 1) / 2) flop (causal pairs
counted once); memory: K/V of each context read once per query tile, q read and out written once.
"""
from dataclasses import dataclass

import torch

from pagedkv_lib.core.paged_attention import paged_attention_varlen

from .attention_args import LOG2E, check_paged_args, dot_args, scale_arg, values_readable
from .backend import MISSING_TRITON, is_interpreted
from .triton_online_softmax import online_softmax_step

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["PrefillConfig", "causal_flops", "choose_prefill_config", "launch_prefill_attention",
           "paged_attention_varlen", "paged_attention_varlen_reference", "paged_attention_varlen_triton"]


# ----------------------------------------------------------------------------------------------------------
# reference

paged_attention_varlen_reference = paged_attention_varlen   # core.paged_attention, fp8 caches too


def causal_flops(seq_lens: list[int], q_lens: list[int], H: int, D: int) -> int:
    """FLOPs of the causal work, each (query, key) pair counted once: 2 * D for q.k, 2 * D for p.v."""
    pairs = sum(q * (n - q) + q * (q + 1) // 2 for n, q in zip(seq_lens, q_lens))
    return 4 * D * H * pairs


# ----------------------------------------------------------------------------------------------------------
# launch configuration

@dataclass(frozen=True)
class PrefillConfig:
    block_m: int            # rows per tile: BLOCK_Q query tokens x G heads (power of two, >= G)
    block_n: int            # KV tokens per tile
    num_warps: int
    num_stages: int


# (block_m, block_n, num_warps, num_stages); the H200 sweep of 2026-12-01 (benchmarks/NOTES.md): of the grid,
# the tiles whose worst shape came closest to that shape's best, per cache dtype
BF16_PREFILL_TILES = (128, 64, 4, 3)   # worst 0.955 of the per-shape best (128 x 128 / 8 warps: 0.80)
FP8_PREFILL_TILES = (128, 64, 4, 3)    # worst 0.975 (128 x 128 / 8 warps: 0.74 at 32 x 512)


def choose_prefill_config(H: int, H_kv: int, D: int, dtype: torch.dtype, *, interpreted: bool,
                          block_m: int | None = None, block_n: int | None = None,
                          num_warps: int | None = None, num_stages: int | None = None,
                          cache_bytes: int = 2) -> PrefillConfig:
    """Tiles for Hopper: 16-bit q, D <= 128: BF16_PREFILL_TILES, or FP8_PREFILL_TILES for an fp8 cache
    (cache_bytes 1); fp32 and D > 128: smaller, unmeasured. Small tiles in the interpreter. Deterministic in
    its arguments; any argument overrides."""
    G = H // H_kv
    if interpreted:
        m, n, w, s = 16, 16, 4, 1
    elif dtype == torch.float32 or D > 128:
        m, n, w, s = 64, 32, 4, 2
    else:
        m, n, w, s = FP8_PREFILL_TILES if cache_bytes == 1 else BF16_PREFILL_TILES
    m = max(block_m or m, triton.next_power_of_2(G))                 # at least one query token per tile
    return PrefillConfig(m, block_n or n, num_warps or w, num_stages or s)


# ----------------------------------------------------------------------------------------------------------
# kernel

@triton.jit(do_not_specialize=["num_seqs", "num_q_tiles", "block_table_stride"])  # one compile, all batches
def _prefill_attention_kernel(
    q_ptr,                  # [T, H, D] contiguous
    k_cache_ptr,            # [N, S, H_kv, D] contiguous; q's dtype or fp8 e4m3
    v_cache_ptr,            # [N, S, H_kv, D] contiguous
    k_scale,                # float, or pointer to one fp32 (K_SCALE_PTR): dequantized k = k * k_scale
    v_scale,                # float, or pointer to one fp32 (V_SCALE_PTR)
    block_tables_ptr,       # [B, M] int32, rows padded with -1
    seq_lens_ptr,           # [B] int32: context length, new tokens included
    cu_seqlens_q_ptr,       # [B + 1] int32: sequence b owns query rows cu[b]:cu[b+1]
    out_ptr,                # [T, H, D] in q's dtype
    num_seqs,               # B
    num_q_tiles,            # T // BLOCK_Q + B: the grid's bound on query tiles
    block_table_stride,     # elements between two block-table rows (M)
    scale_log2,             # softmax scale * LOG2E: scores in the log2 domain
    NUM_HEADS: tl.constexpr,      # H
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    GROUP: tl.constexpr,          # G = H // H_kv
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_SIZE: tl.constexpr,     # S, tokens per cache block
    BLOCK_M: tl.constexpr,        # rows per tile (power of two >= G; >= 16 on GPU for tl.dot)
    BLOCK_Q: tl.constexpr,        # query tokens per tile: BLOCK_M // G
    BLOCK_N: tl.constexpr,        # KV tokens per tile
    BLOCK_D: tl.constexpr,        # next power of two >= D (>= 16)
    BLOCK_B: tl.constexpr,        # power of two >= B + 1
    K_SCALE_PTR: tl.constexpr,    # True: k_scale is a pointer
    V_SCALE_PTR: tl.constexpr,    # True: v_scale is a pointer
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs, "tf32" (ignored for 16-bit inputs) otherwise
    DOT_DTYPE: tl.constexpr,      # tl.dot operands (attention_args.dot_args)
):
    kv_head = tl.program_id(0) % NUM_KV_HEADS                         # heads fastest: all heads of a tile
    tile = num_q_tiles - 1 - tl.program_id(0) // NUM_KV_HEADS         # start together; heaviest tiles first

    offs_b = tl.arange(0, BLOCK_B)                                    # [BLOCK_B]
    cu = tl.load(cu_seqlens_q_ptr + offs_b, mask=offs_b <= num_seqs, other=0)   # [BLOCK_B]; read B + 1
    lens = tl.load(seq_lens_ptr + offs_b, mask=offs_b < num_seqs, other=0)       # [BLOCK_B]; read B
    first_tile = tl.where(offs_b < num_seqs, cu // BLOCK_Q + offs_b, num_q_tiles)  # [BLOCK_B]
    seq = tl.sum((first_tile <= tile).to(tl.int32), axis=0) - 1
    q_start = tl.sum(tl.where(offs_b == seq, cu, 0), axis=0)
    q_len = tl.sum(tl.where(offs_b == seq + 1, cu, 0), axis=0) - q_start
    seq_len = tl.sum(tl.where(offs_b == seq, lens, 0), axis=0)
    q0 = (tile - tl.sum(tl.where(offs_b == seq, first_tile, 0), axis=0)) * BLOCK_Q  # first query of tile
    if q0 >= q_len:
        return                                                        # surplus tile (or q_len 0)
    if K_SCALE_PTR:
        k_scale = tl.load(k_scale)
    if V_SCALE_PTR:
        v_scale = tl.load(v_scale)
    qk_scale = scale_log2 * k_scale                                   # dequantize K through the scores
    ctx = seq_len - q_len                                             # cached tokens before the queries

    offs_m = tl.arange(0, BLOCK_M)                                    # [BLOCK_M] rows: token-major
    offs_n = tl.arange(0, BLOCK_N)                                    # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    q_idx = q0 + offs_m // GROUP                                      # [BLOCK_M] query index in sequence
    heads = kv_head * GROUP + offs_m % GROUP                          # [BLOCK_M] query head of each row
    row_mask = (offs_m < BLOCK_Q * GROUP) & (q_idx < q_len)           # [BLOCK_M]
    d_mask = offs_d < HEAD_DIM                                        # [BLOCK_D]
    q_rows = ((q_start + q_idx).to(tl.int64) * NUM_HEADS + heads) * HEAD_DIM  # [BLOCK_M] element offsets
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :],
                mask=row_mask[:, None] & d_mask[None, :], other=0.0)  # [BLOCK_M, BLOCK_D]; read M*D
    q = q.to(DOT_DTYPE)
    q_pos = ctx + q_idx                                               # [BLOCK_M] absolute positions

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)               # [BLOCK_M] running max (log2)
    l_i = tl.zeros([BLOCK_M], tl.float32)                             # [BLOCK_M] running sum of exp2
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)                    # [BLOCK_M, BLOCK_D]
    table_row = block_tables_ptr + seq.to(tl.int64) * block_table_stride
    kv_end = ctx + tl.minimum(q0 + BLOCK_Q, q_len)                    # last query's position + 1
    unmasked_end = (ctx + q0 + 1) // BLOCK_N * BLOCK_N                # tiles <= the first query's position

    # off-diagonal: every key visible to every row, no mask
    for n0 in range(0, unmasked_end, BLOCK_N):
        tok = n0 + offs_n                                             # [BLOCK_N] key positions
        block = tl.maximum(tl.load(table_row + tok // BLOCK_SIZE), 0)  # [BLOCK_N]; read ids (never -1 here)
        row = ((block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE) * NUM_KV_HEADS + kv_head) * HEAD_DIM
        if BLOCK_D == HEAD_DIM:                                       # no mask: vector loads, cp.async
            k = tl.load(k_cache_ptr + row[None, :] + offs_d[:, None])   # [BLOCK_D, BLOCK_N] K transposed
        else:
            k = tl.load(k_cache_ptr + row[None, :] + offs_d[:, None], mask=d_mask[:, None], other=0.0)
        k = k.to(DOT_DTYPE)
        s = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale    # [BLOCK_M, BLOCK_N]
        m_i, p, alpha, l_i = online_softmax_step(s, m_i, l_i)         # p [BLOCK_M, BLOCK_N]
        if BLOCK_D == HEAD_DIM:
            v = tl.load(v_cache_ptr + row[:, None] + offs_d[None, :])   # [BLOCK_N, BLOCK_D]
        else:
            v = tl.load(v_cache_ptr + row[:, None] + offs_d[None, :], mask=d_mask[None, :], other=0.0)
        v = v.to(DOT_DTYPE)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)

    # diagonal: mask keys after each row's position, past the context, or behind a -1 entry
    for n0 in range(unmasked_end, kv_end, BLOCK_N):
        tok = n0 + offs_n                                             # [BLOCK_N]
        block = tl.load(table_row + tok // BLOCK_SIZE, mask=tok < kv_end, other=-1)  # [BLOCK_N]
        tok_mask = (tok < kv_end) & (block >= 0)                      # [BLOCK_N]
        row = ((block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE) * NUM_KV_HEADS + kv_head) * HEAD_DIM
        k = tl.load(k_cache_ptr + row[None, :] + offs_d[:, None],
                    mask=tok_mask[None, :] & d_mask[:, None], other=0.0)
        k = k.to(DOT_DTYPE)                                           # [BLOCK_D, BLOCK_N]
        s = tl.dot(q, k, input_precision=DOT_PRECISION) * qk_scale    # [BLOCK_M, BLOCK_N]
        visible = tok_mask[None, :] & (tok[None, :] <= q_pos[:, None])  # [BLOCK_M, BLOCK_N]
        s = tl.where(visible, s, float("-inf"))                       # key 0 is visible to every row
        m_i, p, alpha, l_i = online_softmax_step(s, m_i, l_i)         # p [BLOCK_M, BLOCK_N]
        v = tl.load(v_cache_ptr + row[:, None] + offs_d[None, :],
                    mask=tok_mask[:, None] & d_mask[None, :], other=0.0)
        v = v.to(DOT_DTYPE)                                           # [BLOCK_N, BLOCK_D]
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)

    o = acc * (v_scale / l_i)[:, None]                                # [BLOCK_M, BLOCK_D]; dequantize V
    tl.store(out_ptr + q_rows[:, None] + offs_d[None, :], o.to(out_ptr.dtype.element_ty),
             mask=row_mask[:, None] & d_mask[None, :])                # write M*D


# ----------------------------------------------------------------------------------------------------------
# launchers

def launch_prefill_attention(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale: float,
                             config: PrefillConfig, out: torch.Tensor | None = None, *, k_scale=None,
                             v_scale=None) -> torch.Tensor:
    """Launch with no checks (timing, CUDA graphs): validate once with the checked launcher."""
    T, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    B = block_tables.shape[0]
    G = H // H_kv
    out = torch.empty_like(q) if out is None else out                # [T, H, D]
    block_q = config.block_m // G
    num_q_tiles = T // block_q + B
    k_scale = 1.0 if k_scale is None else k_scale                    # float or 1-element fp32 tensor
    v_scale = 1.0 if v_scale is None else v_scale
    precision, dot_dtype = dot_args(q, k_cache)
    _prefill_attention_kernel[(num_q_tiles * H_kv,)](
        q, k_cache, v_cache, k_scale, v_scale,
        block_tables, seq_lens, cu_seqlens_q, out, B, num_q_tiles, block_tables.stride(0), scale * LOG2E,
        NUM_HEADS=H, NUM_KV_HEADS=H_kv, GROUP=G, HEAD_DIM=D, BLOCK_SIZE=S, BLOCK_M=config.block_m,
        BLOCK_Q=block_q, BLOCK_N=config.block_n, BLOCK_D=max(16, triton.next_power_of_2(D)),
        BLOCK_B=max(64, triton.next_power_of_2(B + 1)), K_SCALE_PTR=torch.is_tensor(k_scale),
        V_SCALE_PTR=torch.is_tensor(v_scale), DOT_PRECISION=precision, DOT_DTYPE=dot_dtype,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return out


def paged_attention_varlen_triton(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale: float, *,
                                  k_scale=None, v_scale=None, config: PrefillConfig | None = None,
                                  check_values: bool = True):
    """Causal attention for a batch of query chunks: q [T, H, D] -> out [T, H, D].

    Same contract as `pagedkv_lib.paged_attention_varlen`: sequence b owns query rows
    cu_seqlens_q[b]:cu_seqlens_q[b+1], the LAST q_len tokens of its seq_lens[b]-token context (already in the
    cache); query i sits at position seq_len - q_len + i. q_len 0 and 1 (decode rows) are allowed. FP8
    caches need k_scale and v_scale. `check_values=False` skips the checks that read device values
    (cu_seqlens_q, lengths, tensor scales: a host sync on a GPU; attention_args); they are skipped under
    CUDA-graph capture anyway. The grid needs no value: T // BLOCK_Q + B query tiles bound every batch.
    """
    fn = "paged_attention_varlen_triton"
    check_paged_args(fn, q, k_cache, v_cache, block_tables, seq_lens, "seq_lens", check_values)
    B, T = block_tables.shape[0], q.shape[0]
    if not isinstance(cu_seqlens_q, torch.Tensor) or cu_seqlens_q.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens_q: expected an int32 tensor, got {getattr(cu_seqlens_q, 'dtype', None)}")
    if tuple(cu_seqlens_q.shape) != (B + 1,) or not cu_seqlens_q.is_contiguous():
        raise ValueError(f"cu_seqlens_q: expected a contiguous tensor of shape ({B + 1},) [B + 1], got "
                         f"shape {tuple(cu_seqlens_q.shape)}, strides {tuple(cu_seqlens_q.stride())}")
    if cu_seqlens_q.device != q.device:
        raise ValueError(f"{fn}: expected cu_seqlens_q on {q.device} like q, got {cu_seqlens_q.device}")
    k_arg = scale_arg("k_scale", k_scale, k_cache, check_values)
    v_arg = scale_arg("v_scale", v_scale, v_cache, check_values)
    if values_readable(cu_seqlens_q, check_values):                  # asked for, not under capture
        cu, lens = cu_seqlens_q.tolist(), seq_lens.tolist()
        q_lens = [cu[b + 1] - cu[b] for b in range(B)]
        if cu[0] != 0 or cu[-1] != T or min(q_lens, default=0) < 0:
            raise ValueError(f"cu_seqlens_q: expected 0 = c_0 <= ... <= c_B = T = {T}, got {cu[:16]}")
        bad = [b for b in range(B) if q_lens[b] > lens[b]]
        if bad:
            b = bad[0]
            raise ValueError(f"seq {b}: expected q_len <= seq_lens[{b}] = {lens[b]}, "
                             f"got {q_lens[b]} query tokens")
    if T == 0 or B == 0:
        return torch.empty_like(q)
    if config is None:
        config = choose_prefill_config(q.shape[1], k_cache.shape[2], q.shape[2], q.dtype,
                                       interpreted=is_interpreted(), cache_bytes=k_cache.element_size())
    G = q.shape[1] // k_cache.shape[2]
    if config.block_m < G or config.block_m & (config.block_m - 1):
        raise ValueError(f"config.block_m: expected a power of two >= G = {G}, got {config.block_m}")
    return launch_prefill_attention(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale, config,
                                    k_scale=k_arg, v_scale=v_arg)
