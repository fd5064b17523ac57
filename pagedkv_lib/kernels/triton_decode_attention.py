"""Paged decode attention in Triton (flash-decoding): one query token per sequence, K/V read through the
block table, softmax computed online in fp32; bf16 / fp16 / fp32 caches, or FP8 (e4m3) with per-tensor scales.

Shapes: docs/conventions.md (P = num_splits; BLOCK_N tokens per KV tile).
Ideas from Flash-Decoding (Dao et al., 2023), vLLM's `triton_unified_attention.py` (GQA heads packed into
one tile for `tl.dot`, split kernels with a segment reduction), FlashInfer's plan/run split and
FlashAttention-3's scheduler metadata (v3), SGLang's `decode_attention.py`. The layout follows Triton's
tutorials (06-fused-attention: one kernel per idea, the inner loop in a `@triton.jit` helper).

Three kernels, one per way of cutting the work (`DecodeConfig.version`; the partitions in decode_config.py),
sharing the helpers that load a head group's queries (`load_queries`), walk a token range of the paged cache
with an online softmax (`attend_range`) and normalise the result (`finish`):
    v1  `paged_decode_kernel`, grid (B, H_kv * head_tiles): the one-pass kernel (exercise 131's answer). A
        program owns one KV head of one sequence and ALL its G query heads, so each K/V tile is read once
        per KV head; it walks the whole context and writes the output. Enough when B * H_kv fills the GPU
        and the contexts are about equally long.
    v2  `split_kv_decode_kernel`, grid (B, H_kv * head_tiles, P): split-KV. Every context is cut at the same
        P token ranges; each program writes its normalised partial output and log2-sum-exp in fp32, and
        `triton_decode_merge.reduce_splits` merges them. Needed when B * H_kv is small (B = 1: 8 programs for
        132 SMs).
    v3  `chunked_decode_kernel`, grid (max_items * H_kv * head_tiles,): length-aware, the tuned default.
        Each sequence's actual context is cut into chunks of equal work (`triton_decode_merge.chunk_plan`,
        computed in registers); `triton_decode_merge.merge_chunks` merges each sequence's chunks. It does
        what v1 does on balanced batches and what v2 does on small ones, and stays fast on ragged ones.
    (A v2 that merged inside the split kernel, the last program of a group found by an atomic counter, was
    measured on an H200 and dropped: no faster. benchmarks/NOTES.md has the numbers.)
A KV tile of BLOCK_N tokens gathers each token's block id, so a tile may span several blocks (S < BLOCK_N)
or part of one (S > BLOCK_N). Tokens past the range or with a -1 block id are masked: never loaded.
FP8: the kernels convert e4m3 to the dot's operand type (fp16 natively, attention_args.dot_args; exact:
every e4m3 value is an fp16 value) and apply the scales in fp32, k_scale to the scores
(q . (k * s) = (q . k) * s) and v_scale to the output: the same math as dequantizing on load with one
rounding less. PDL (`DecodeConfig.pdl`, Hopper and later, on by default there): each kernel waits
(`gdc_wait`) before touching memory, so PDL only overlaps a launch with the previous kernel's tail.

    reference:  pagedkv_lib.core.paged_attention.paged_attention_decode (same signature);
                (paged_attention_decode_reference is the same function: it reads FP8 caches too)
    launcher:   paged_attention_decode_triton (checked); launch_decode_attention (unchecked, for timing)

Memory traffic: read 2 * context_len * H_kv * D cache elements per sequence (+ q, block table), write B*H*D;
v2 adds B * H * P * (D + 1) fp32 written and read back; v3 adds that for the chunks of split sequences.
"""
import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode

from .attention_args import LOG2E, check_paged_args, dot_args, num_sms, pdl_supported, scale_arg
from .backend import MISSING_TRITON, is_interpreted
from .decode_config import DecodeConfig, choose_config, items_bound
from .triton_decode_merge import PLAN_INTS, chunk_of_item, chunk_plan, merge_chunks, plan_width, reduce_splits
from .triton_online_softmax import online_softmax_step

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["KERNELS", "DecodeConfig", "choose_config", "launch_decode_attention", "launch_decode_partials",
           "paged_attention_decode", "paged_attention_decode_reference", "paged_attention_decode_triton"]


paged_attention_decode_reference = paged_attention_decode   # core.paged_attention, fp8 caches too


# ----------------------------------------------------------------------------------------------------------
# The helpers every version shares (inlined by Triton: the kernels compile as if written out)

@triton.jit
def load_queries(q_ptr, seq, tile, NUM_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """The BLOCK_G query heads of head tile `tile` (a KV head's group, or a slice of it) of sequence `seq`.

    Returns q [BLOCK_G, BLOCK_D] as the dot's operand type, the KV head, the query heads [BLOCK_G], their
    row offsets into q and out [BLOCK_G], and the masks of real heads [BLOCK_G] and real dims [BLOCK_D]."""
    HEAD_TILES: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    kv_head = tile // HEAD_TILES
    offs_g = (tile % HEAD_TILES) * BLOCK_G + tl.arange(0, BLOCK_G)    # [BLOCK_G]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    heads = kv_head * GROUP + offs_g                                  # [BLOCK_G] query heads of this KV head
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    q_rows = (seq * NUM_HEADS + heads).to(tl.int64) * HEAD_DIM        # [BLOCK_G]
    q = tl.load(q_ptr + q_rows[:, None] + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)    # [BLOCK_G, BLOCK_D]; read G*D
    return q.to(DOT_DTYPE), kv_head, heads, q_rows, g_mask, d_mask


@triton.jit
def load_scale(scale, IS_PTR: tl.constexpr):
    """A dequantization scale given as a float, or as a pointer to one fp32."""
    if IS_PTR:
        scale = tl.load(scale)
    return scale


@triton.jit
def attend_range(q, k_cache_ptr, v_cache_ptr, table_row, kv_head, start, end, qk_scale,
                 NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """Tokens [start, end) of one sequence (its block-table row `table_row`), one KV head, against q: the
    online softmax. Returns acc [BLOCK_G, BLOCK_D] (unnormalised), m [BLOCK_G] (running max, log2 domain)
    and l [BLOCK_G] (sum of exp2); an empty range gives acc 0, m -inf, l 0."""
    offs_n = tl.arange(0, BLOCK_N)                                    # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    d_mask = offs_d < HEAD_DIM
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)               # [BLOCK_G] running max (log2)
    l_i = tl.zeros([BLOCK_G], tl.float32)                             # [BLOCK_G] running sum of exp2
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)                    # [BLOCK_G, BLOCK_D]
    for n0 in range(start, end, BLOCK_N):
        tok = n0 + offs_n                                             # [BLOCK_N] logical positions
        block = tl.load(table_row + tok // BLOCK_SIZE, mask=tok < end, other=-1)  # [BLOCK_N]; read ids
        tok_mask = (tok < end) & (block >= 0)                         # -1 padding is never followed
        slot = block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE     # [BLOCK_N]
        row = (slot * NUM_KV_HEADS + kv_head) * HEAD_DIM              # [BLOCK_N] element offsets
        kv_mask = tok_mask[:, None] & d_mask[None, :]                 # [BLOCK_N, BLOCK_D]
        k = tl.load(k_cache_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        v = tl.load(v_cache_ptr + row[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)  # read N*D
        k = k.to(DOT_DTYPE)                                           # [BLOCK_N, BLOCK_D]; fp8: exact
        v = v.to(DOT_DTYPE)                                           # [BLOCK_N, BLOCK_D]
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_G, BLOCK_N]
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        m_i, p, alpha, l_i = online_softmax_step(s, m_i, l_i)         # p [BLOCK_G, BLOCK_N]
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
    return acc, m_i, l_i


@triton.jit
def finish(acc, m_i, l_i, v_scale):
    """The normalised output o [BLOCK_G, BLOCK_D] (V dequantized) and the log2-sum-exp [BLOCK_G] of one
    range; an empty range (l = 0) gives o = 0 and lse = -inf, which a merge weighs 0."""
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    o = acc * (v_scale / l_safe)[:, None]                             # [BLOCK_G, BLOCK_D]
    lse = tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf"))     # [BLOCK_G]
    return o, lse


# ----------------------------------------------------------------------------------------------------------
# v1: one pass over the whole context

@triton.jit(do_not_specialize=["block_table_stride"])
def paged_decode_kernel(
    q_ptr,                  # [B, H, D] contiguous
    k_cache_ptr,            # [N, S, H_kv, D] contiguous; q's dtype or fp8 e4m3
    v_cache_ptr,            # [N, S, H_kv, D] contiguous
    k_scale,                # float, or pointer to one fp32 (K_SCALE_PTR): dequantized k = k * k_scale
    v_scale,                # float, or pointer to one fp32 (V_SCALE_PTR)
    block_tables_ptr,       # [B, M] int32, rows padded with -1
    context_lens_ptr,       # [B] int32, >= 1 (0: a padding row, output zeros; launch_decode_attention)
    out_ptr,                # [B, H, D] in q's dtype
    block_table_stride,     # elements between two block-table rows (M)
    scale_log2,             # softmax scale * LOG2E: scores in the log2 domain
    NUM_HEADS: tl.constexpr,      # H
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    GROUP: tl.constexpr,          # G = H // H_kv
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_SIZE: tl.constexpr,     # S, tokens per cache block
    BLOCK_G: tl.constexpr,        # query heads per program (power of two; >= 16 on GPU for tl.dot)
    BLOCK_N: tl.constexpr,        # tokens per KV tile
    BLOCK_D: tl.constexpr,        # next power of two >= D (>= 16)
    K_SCALE_PTR: tl.constexpr,    # True: k_scale is a pointer
    V_SCALE_PTR: tl.constexpr,    # True: v_scale is a pointer
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs, "tf32" (ignored for 16-bit inputs) otherwise
    DOT_DTYPE: tl.constexpr,      # tl.dot operands (attention_args.dot_args)
    USE_PDL: tl.constexpr,        # launched with programmatic dependent launch
):
    """Program (seq, head tile): the tile's query heads attend to the sequence's whole context."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()                                      # the previous kernel has finished
        tl.extra.cuda.gdc_launch_dependents()
    seq = tl.program_id(0)
    q, kv_head, heads, q_rows, g_mask, d_mask = load_queries(
        q_ptr, seq, tl.program_id(1), NUM_HEADS, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D, DOT_DTYPE)
    qk_scale = scale_log2 * load_scale(k_scale, K_SCALE_PTR)          # dequantize K through the scores
    table_row = block_tables_ptr + seq.to(tl.int64) * block_table_stride
    acc, m_i, l_i = attend_range(q, k_cache_ptr, v_cache_ptr, table_row, kv_head, 0,
                                 tl.load(context_lens_ptr + seq), qk_scale, NUM_KV_HEADS, HEAD_DIM,
                                 BLOCK_SIZE, BLOCK_G, BLOCK_N, BLOCK_D, DOT_PRECISION, DOT_DTYPE)
    o, _ = finish(acc, m_i, l_i, load_scale(v_scale, V_SCALE_PTR))   # [BLOCK_G, BLOCK_D]; length 0: zeros
    tl.store(out_ptr + q_rows[:, None] + tl.arange(0, BLOCK_D)[None, :], o.to(out_ptr.dtype.element_ty),
             mask=g_mask[:, None] & d_mask[None, :])


# ----------------------------------------------------------------------------------------------------------
# v2: split-KV, every context cut at the same P token ranges

@triton.jit(do_not_specialize=["block_table_stride", "tokens_per_split"])
def split_kv_decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, k_scale, v_scale, block_tables_ptr, context_lens_ptr,  # as in v1
    part_out_ptr,           # [B, H, P', D] fp32 normalised partial outputs (P' >= P: NUM_SLOTS)
    part_lse_ptr,           # [B, H, P'] fp32 log2-sum-exp per split (-inf: an empty split)
    block_table_stride,     # M
    tokens_per_split,       # a multiple of BLOCK_N; P * tokens_per_split >= every context
    scale_log2,
    NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    NUM_SLOTS: tl.constexpr,      # P', the states' slots per (sequence, head); split i writes slot i
    K_SCALE_PTR: tl.constexpr, V_SCALE_PTR: tl.constexpr, DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Program (seq, head tile, split): tokens [split * tokens_per_split, +tokens_per_split) of the context,
    written as a partial state for reduce_splits."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()                                      # the previous kernel has finished
        tl.extra.cuda.gdc_launch_dependents()                         # the merge may launch now
    seq = tl.program_id(0)
    split = tl.program_id(2)
    q, kv_head, heads, q_rows, g_mask, d_mask = load_queries(
        q_ptr, seq, tl.program_id(1), NUM_HEADS, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D, DOT_DTYPE)
    qk_scale = scale_log2 * load_scale(k_scale, K_SCALE_PTR)
    start = split * tokens_per_split
    end = tl.minimum(start + tokens_per_split, tl.load(context_lens_ptr + seq))
    table_row = block_tables_ptr + seq.to(tl.int64) * block_table_stride
    acc, m_i, l_i = attend_range(q, k_cache_ptr, v_cache_ptr, table_row, kv_head, start, end, qk_scale,
                                 NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE, BLOCK_G, BLOCK_N, BLOCK_D,
                                 DOT_PRECISION, DOT_DTYPE)
    o, lse = finish(acc, m_i, l_i, load_scale(v_scale, V_SCALE_PTR))  # [BLOCK_G, BLOCK_D], [BLOCK_G]
    rows = (seq * NUM_HEADS + heads).to(tl.int64) * NUM_SLOTS + split  # [BLOCK_G] rows of [B, H, P']
    tl.store(part_lse_ptr + rows, lse, mask=g_mask)
    tl.store(part_out_ptr + rows[:, None] * HEAD_DIM + tl.arange(0, BLOCK_D)[None, :], o,
             mask=g_mask[:, None] & d_mask[None, :])                  # G*D fp32


# ----------------------------------------------------------------------------------------------------------
# v3: length-aware chunks, planned in registers

@triton.jit(do_not_specialize=["block_table_stride", *PLAN_INTS])
def chunked_decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, k_scale, v_scale, block_tables_ptr, context_lens_ptr, out_ptr,  # v1's
    part_out_ptr,           # [max_items, H, D] fp32 normalised partial outputs
    part_lse_ptr,           # [max_items, H] fp32 log2-sum-exp per chunk
    block_table_stride,     # M
    num_seqs,               # B
    target_items,           # the plan (triton_decode_merge.chunk_plan)
    min_chunk,
    max_chunk,
    balanced_x8,
    scale_log2,
    NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_B: tl.constexpr,        # plan_width(B)
    K_SCALE_PTR: tl.constexpr, V_SCALE_PTR: tl.constexpr, DOT_PRECISION: tl.constexpr,
    DOT_DTYPE: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Program (item, head tile): one chunk of one sequence. A sequence of one chunk writes its output; the
    chunks of a longer one write partial states for merge_chunks. Programs past the plan's items return."""
    HEAD_TILES: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    if USE_PDL:
        tl.extra.cuda.gdc_wait()                                      # the previous kernel has finished
        tl.extra.cuda.gdc_launch_dependents()                         # the merge may launch now
    pid = tl.program_id(0)
    tile = pid % (NUM_KV_HEADS * HEAD_TILES)
    item = pid // (NUM_KV_HEADS * HEAD_TILES)
    offs_b, lens, chunk, full, last = chunk_plan(context_lens_ptr, num_seqs, target_items, min_chunk,
                                                 max_chunk, balanced_x8, BLOCK_B, BLOCK_N)
    if item >= tl.sum(full, axis=0) + tl.sum(last, axis=0):
        return                                                        # surplus program: fewer items
    seq, start, end, part, num_chunks = chunk_of_item(item, offs_b, lens, chunk, full, last)
    q, kv_head, heads, q_rows, g_mask, d_mask = load_queries(
        q_ptr, seq, tile, NUM_HEADS, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D, DOT_DTYPE)
    qk_scale = scale_log2 * load_scale(k_scale, K_SCALE_PTR)
    table_row = block_tables_ptr + seq.to(tl.int64) * block_table_stride
    acc, m_i, l_i = attend_range(q, k_cache_ptr, v_cache_ptr, table_row, kv_head, start, end, qk_scale,
                                 NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE, BLOCK_G, BLOCK_N, BLOCK_D,
                                 DOT_PRECISION, DOT_DTYPE)
    o, lse = finish(acc, m_i, l_i, load_scale(v_scale, V_SCALE_PTR))  # [BLOCK_G, BLOCK_D], [BLOCK_G]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    chunks = tl.zeros([BLOCK_G], tl.int32) + num_chunks               # [BLOCK_G] (a vector: the interpreter
    alone = g_mask & (chunks == 1)                                    # rejects tensor & scalar masks)
    split = g_mask & (chunks > 1)                                     # 1 chunk: the output; more: a partial
    tl.store(out_ptr + q_rows[:, None] + offs_d[None, :], o.to(out_ptr.dtype.element_ty),
             mask=alone[:, None] & d_mask[None, :])
    rows = part.to(tl.int64) * NUM_HEADS + heads                      # [BLOCK_G] rows of [max_items, H]
    tl.store(part_lse_ptr + rows, lse, mask=split)
    tl.store(part_out_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], o,
             mask=split[:, None] & d_mask[None, :])


KERNELS = {1: paged_decode_kernel, 2: split_kv_decode_kernel, 3: chunked_decode_kernel}  # by config.version


# ----------------------------------------------------------------------------------------------------------
# Launchers

def _launch_common(q, k_cache, config: DecodeConfig, k_scale, v_scale) -> tuple:
    """What every version's launch passes: (heads per sequence, the kernels' constants and launch options,
    k_scale, v_scale with None read as 1.0)."""
    H, D = q.shape[1:]
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    G = H // H_kv
    k_scale = 1.0 if k_scale is None else k_scale
    v_scale = 1.0 if v_scale is None else v_scale
    precision, dot_dtype = dot_args(q, k_cache)
    common = dict(NUM_HEADS=H, NUM_KV_HEADS=H_kv, GROUP=G, HEAD_DIM=D, BLOCK_SIZE=S, BLOCK_G=config.block_g,
                  BLOCK_N=config.block_n, BLOCK_D=config.block_d, K_SCALE_PTR=torch.is_tensor(k_scale),
                  V_SCALE_PTR=torch.is_tensor(v_scale), DOT_PRECISION=precision, DOT_DTYPE=dot_dtype,
                  USE_PDL=config.pdl, num_warps=config.num_warps, num_stages=config.num_stages)
    if config.pdl:
        common["launch_pdl"] = True
    return H_kv * triton.cdiv(G, config.block_g), common, k_scale, v_scale


def launch_decode_partials(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                           config: DecodeConfig, part_out: torch.Tensor, part_lse: torch.Tensor, *,
                           k_scale=None, v_scale=None) -> tuple:
    """v2's split kernel alone (no checks), into the caller's fp32 states: part_out [B, H, P', D] and
    part_lse [B, H, P'] with P' >= config.num_splits; the splits go to slots 0..num_splits-1 (an empty
    split: lse -inf, o 0) and nothing is merged: the caller merges them with other parts (the cascade,
    triton_cascade_attention). Returns (part_out, part_lse)."""
    B = q.shape[0]
    heads, common, k_scale, v_scale = _launch_common(q, k_cache, config, k_scale, v_scale)
    split_kv_decode_kernel[(B, heads, config.num_splits)](
        q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, part_out, part_lse,
        block_tables.stride(0), config.tokens_per_split, scale * LOG2E, NUM_SLOTS=part_out.shape[2], **common)
    return part_out, part_lse


def launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                            config: DecodeConfig, out: torch.Tensor | None = None, *, k_scale=None,
                            v_scale=None) -> torch.Tensor:
    """Launch `config.version`'s kernel (and its merge) with no checks (timing, CUDA graphs): validate once
    with the checked launcher. Writes and returns `out` [B, H, D] (a new tensor when None).

    k_scale, v_scale: None (1.0), a float, or a 1-element float32 tensor on the device. Beyond the checked
    contract, a context length of 0 (a CUDA graph's padding row, engine/decode_graphs.py) reads nothing and
    outputs zeros in v1 and v3 (v2 would merge P empty splits into NaN). The split states alone, unmerged:
    `launch_decode_partials`.
    """
    B, H, D = q.shape
    if out is None:
        out = torch.empty_like(q)                                     # [B, H, D]
    heads, common, k_scale, v_scale = _launch_common(q, k_cache, config, k_scale, v_scale)
    inputs = (q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens)
    if config.version == 1:
        paged_decode_kernel[(B, heads)](*inputs, out, block_tables.stride(0), scale * LOG2E, **common)
    elif config.version == 2:
        P = config.num_splits
        part_out = torch.empty(B, H, P, D, dtype=torch.float32, device=q.device)  # [B, H, P, D]
        part_lse = torch.empty(B, H, P, dtype=torch.float32, device=q.device)     # [B, H, P]
        launch_decode_partials(q, k_cache, v_cache, block_tables, context_lens, scale, config, part_out,
                               part_lse, k_scale=k_scale, v_scale=v_scale)
        reduce_splits(part_out, part_lse, out, pdl=config.pdl)
    else:
        part_out = torch.empty(config.max_items, H, D, dtype=torch.float32, device=q.device)  # [items, H, D]
        part_lse = torch.empty(config.max_items, H, dtype=torch.float32, device=q.device)     # [items, H]
        chunked_decode_kernel[(config.max_items * heads,)](
            *inputs, out, part_out, part_lse, block_tables.stride(0), B, config.target_items,
            config.min_chunk, config.max_chunk, config.balanced_x8, scale * LOG2E, BLOCK_B=plan_width(B),
            **common)
        merge_chunks(part_out, part_lse, out, context_lens, config, H // k_cache.shape[2])
    return out


def paged_attention_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                                  num_splits: int | None = None, *, k_scale=None, v_scale=None,
                                  config: DecodeConfig | None = None,
                                  check_values: bool = True) -> torch.Tensor:
    """Decode attention: q [B, H, D], one query per sequence at its last position -> out [B, H, D].

    Same contract as `pagedkv_lib.core.paged_attention.paged_attention_decode`, plus FP8 caches (k_scale,
    v_scale: module docstring). `num_splits`: None picks v3 (length-aware chunks); 1 forces v1; P > 1
    forces v2 with P splits. PDL is on where the device has it. `config` (from `choose_config`) overrides all
    of that (tuning, tests). `check_values=False` skips the checks that read device values (lengths, tensor
    scales: a host sync on a GPU; attention_args); they are skipped under CUDA-graph capture anyway. Nothing
    else here reads the device: the grid comes from shapes (M * S bounds every context).
    """
    fn = "paged_attention_decode_triton"
    check_paged_args(fn, q, k_cache, v_cache, block_tables, context_lens, "context_lens", check_values)
    B = block_tables.shape[0]
    if q.shape[0] != B:
        raise ValueError(f"q: expected shape ({B}, H, D) [B, H, D] with one row per block table, "
                         f"got {tuple(q.shape)}")
    k_arg = scale_arg("k_scale", k_scale, k_cache, check_values)
    v_arg = scale_arg("v_scale", v_scale, v_cache, check_values)
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int)
                                   or num_splits < 1):
        raise ValueError(f"num_splits: expected a positive int or None, got {num_splits!r}")
    if B == 0:
        return torch.empty_like(q)
    max_tokens = block_tables.shape[1] * k_cache.shape[1]             # >= every context: no device sync
    if config is None:
        config = choose_config(B, q.shape[1], k_cache.shape[2], q.shape[2], max_tokens, num_splits,
                               num_sms=num_sms(q.device), interpreted=is_interpreted(),
                               cache_bytes=k_cache.element_size(), pdl=pdl_supported(q.device))
    if config.version not in KERNELS:
        raise ValueError(f"config.version: expected one of {sorted(KERNELS)}, got {config.version}")
    if config.version == 2 and config.num_splits * config.tokens_per_split < max_tokens:
        raise ValueError(f"config: v2 needs num_splits * tokens_per_split >= M * S = "
                         f"{max_tokens}, got {config.num_splits} * {config.tokens_per_split}")
    if config.version == 3 and config.max_items < items_bound(config, B, max_tokens):
        raise ValueError(f"config: v3 needs max_items >= {items_bound(config, B, max_tokens)} for B = {B}, "
                         f"M * S = {max_tokens}, got {config.max_items}")
    return launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale, config,
                                   k_scale=k_arg, v_scale=v_arg)
