"""The second stage of split decode, in Triton: merging partial outputs, and the v3 plan both stages share.

Shapes: docs/conventions.md (P = num_splits). A split program writes its normalised partial output o_i and
its log-sum-exp lse_i (base 2, fp32); a merge computes, per (sequence, query head),

    lse = log2 sum_i 2^lse_i          out = sum_i 2^(lse_i - lse) * o_i

    _reduce_splits_kernel   v2: one program per (sequence, query head) merges its P splits
    _merge_chunks_kernel    v3: one program per (sequence, KV head) merges its G heads' chunks, or, for few
                            sequences, one per (sequence, query head) (more programs, one step each); as
                            many chunks as the plan gave that sequence (one: the split kernel wrote it;
                            none: a context of length 0, a CUDA graph's padding row, gets zeros)
    _chunk_plan             v3: the plan (decode_config.py), recomputed in registers by every program

Memory traffic: v2 reads B * H * P * (D + 1) fp32 and writes B * H * D; v3 reads num_items * H * (D + 1)
fp32 for the sequences that were split.
"""
from .backend import MISSING_TRITON

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

RUNTIME_INTS = ["num_seqs", "block_table_stride", "tokens_per_split", "target_items", "min_chunk",
                "max_chunk", "balanced_x8"]  # not specialized (== 1, % 16): one compile serves all batches
MERGE_TILE = 4096             # v3 merge: G x chunks x D elements loaded per step


@triton.jit
def _pick(values, offs, index):
    """values[index] of a [BLOCK_B] vector, as a scalar (no memory access)."""
    return tl.sum(tl.where(offs == index, values, 0), axis=0)


@triton.jit
def _chunk_plan(
    context_lens_ptr,       # [B] int32
    num_seqs,               # B
    target_items,           # chunk >= cdiv(total, target_items) ...
    min_chunk,              # ... clamped to [min_chunk, max_chunk]
    max_chunk,
    balanced_x8,            # chunk = max len when 8 * max len * B <= balanced_x8 * total
    BLOCK_B: tl.constexpr,  # power of two >= B
    BLOCK_N: tl.constexpr,  # chunk is a multiple of BLOCK_N
):
    """The v3 plan, recomputed in registers: the chunk size and each sequence's full and last chunks."""
    offs_b = tl.arange(0, BLOCK_B)                                    # [BLOCK_B]
    lens = tl.load(context_lens_ptr + offs_b, mask=offs_b < num_seqs, other=0)  # [BLOCK_B]; read B
    total = tl.sum(lens.to(tl.int64), axis=0)
    longest = tl.max(lens, axis=0)
    chunk = tl.minimum(tl.maximum((total + target_items - 1) // target_items, min_chunk), max_chunk)
    balanced = 8 * longest.to(tl.int64) * num_seqs <= balanced_x8 * total
    chunk = tl.where(balanced, longest, chunk).to(tl.int32)
    chunk = (chunk + BLOCK_N - 1) // BLOCK_N * BLOCK_N
    full = lens // chunk                                              # [BLOCK_B] full chunks per sequence
    last = (lens % chunk != 0).to(tl.int32)                           # [BLOCK_B] 1: a shorter last chunk
    return offs_b, lens, chunk, full, last


@triton.jit
def _reduce_splits_kernel(
    part_out_ptr,           # [B, H, P, D] fp32 normalised partial outputs
    part_lse_ptr,           # [B, H, P] fp32 log2-sum-exp per split (-inf: empty split)
    out_ptr,                # [B, H, D] in q's dtype
    HEAD_DIM: tl.constexpr,       # D
    NUM_SPLITS: tl.constexpr,     # P
    BLOCK_P: tl.constexpr,        # next power of two >= P
    BLOCK_D: tl.constexpr,        # next power of two >= D
    USE_PDL: tl.constexpr,        # launched with programmatic dependent launch
):
    """v2: one program per (sequence, query head) merges its P splits."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()                                      # the partials are written
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


@triton.jit(do_not_specialize=RUNTIME_INTS[:1] + RUNTIME_INTS[3:])
def _merge_chunks_kernel(
    part_out_ptr,           # [max_items, H, D] fp32 normalised partial outputs
    part_lse_ptr,           # [max_items, H] fp32 log2-sum-exp per chunk
    out_ptr,                # [B, H, D] in q's dtype
    context_lens_ptr,       # [B] int32: the plan is recomputed, as in the split kernel
    num_seqs,               # B
    target_items,           # the v3 plan (see _chunk_plan)
    min_chunk,
    max_chunk,
    balanced_x8,
    NUM_HEADS: tl.constexpr,      # H
    HEADS: tl.constexpr,          # query heads per program: G (a KV head's group) or 1
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_B: tl.constexpr,        # power of two >= B
    BLOCK_N: tl.constexpr,        # the split kernel's BLOCK_N (chunk is a multiple of it)
    BLOCK_GM: tl.constexpr,       # next power of two >= HEADS
    BLOCK_P: tl.constexpr,        # chunks merged per step
    BLOCK_D: tl.constexpr,        # next power of two >= D
    USE_PDL: tl.constexpr,        # launched with programmatic dependent launch
):
    """v3: one program per (sequence, group of HEADS query heads) merges their chunks (1 chunk: written)."""
    seq = tl.program_id(0) // (NUM_HEADS // HEADS)
    head0 = tl.program_id(0) % (NUM_HEADS // HEADS) * HEADS
    offs_b, lens, chunk, full, last = _chunk_plan(context_lens_ptr, num_seqs, target_items, min_chunk,
                                                  max_chunk, balanced_x8, BLOCK_B, BLOCK_N)
    counts = full + last                                              # [BLOCK_B] chunks per sequence
    num_chunks = _pick(counts, offs_b, seq)
    first = _pick(tl.cumsum(counts, axis=0) - counts, offs_b, seq)    # first partial slot of this sequence
    if USE_PDL:
        tl.extra.cuda.gdc_wait()          # every program waits: this grid must not finish before the last
    if num_chunks > 1:
        offs_g = tl.arange(0, BLOCK_GM)                               # [BLOCK_GM]
        offs_p = tl.arange(0, BLOCK_P)                                # [BLOCK_P]
        offs_d = tl.arange(0, BLOCK_D)                                # [BLOCK_D]
        heads = head0 + offs_g                                        # [BLOCK_GM]
        g_mask = offs_g < HEADS
        d_mask = offs_d < HEAD_DIM
        m = tl.full([BLOCK_GM], float("-inf"), tl.float32)            # [BLOCK_GM] running max of the lse
        l_sum = tl.zeros([BLOCK_GM], tl.float32)                      # [BLOCK_GM]
        acc = tl.zeros([BLOCK_GM, BLOCK_D], tl.float32)               # [BLOCK_GM, BLOCK_D]
        for p0 in range(0, num_chunks, BLOCK_P):
            p_mask = p0 + offs_p < num_chunks                         # [BLOCK_P]
            slots = (first + p0 + offs_p).to(tl.int64)                # [BLOCK_P] partial slots
            rows = slots[None, :] * NUM_HEADS + heads[:, None]        # [BLOCK_GM, BLOCK_P] rows of [items, H]
            gp_mask = g_mask[:, None] & p_mask[None, :]               # [BLOCK_GM, BLOCK_P]
            lse = tl.load(part_lse_ptr + rows, mask=gp_mask, other=float("-inf"))  # [BLOCK_GM, BLOCK_P]
            lse = tl.where(g_mask[:, None], lse, 0.0)                 # padded heads: finite, never stored
            o = tl.load(part_out_ptr + rows[:, :, None] * HEAD_DIM + offs_d[None, None, :],
                        mask=gp_mask[:, :, None] & d_mask[None, None, :], other=0.0)
            # o: [BLOCK_GM, BLOCK_P, BLOCK_D]
            m_new = tl.maximum(m, tl.max(lse, axis=1))                # [BLOCK_GM]; chunks are never empty
            alpha = tl.exp2(m - m_new)                                # [BLOCK_GM]
            w = tl.exp2(lse - m_new[:, None])                         # [BLOCK_GM, BLOCK_P]
            l_sum = l_sum * alpha + tl.sum(w, axis=1)
            acc = acc * alpha[:, None] + tl.sum(w[:, :, None] * o, axis=1)
            m = m_new
        out = acc / l_sum[:, None]                                    # [BLOCK_GM, BLOCK_D]
        ptrs = out_ptr + (seq.to(tl.int64) * NUM_HEADS + heads)[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(ptrs, out.to(out_ptr.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])
    elif num_chunks == 0:               # context length 0 (a CUDA graph's padding row): zeros, not garbage
        offs_g = tl.arange(0, BLOCK_GM)                               # [BLOCK_GM]
        offs_d = tl.arange(0, BLOCK_D)                                # [BLOCK_D]
        ptrs = out_ptr + (seq.to(tl.int64) * NUM_HEADS + head0 + offs_g)[:, None] * HEAD_DIM + offs_d[None, :]
        zeros = tl.zeros([BLOCK_GM, BLOCK_D], tl.float32).to(out_ptr.dtype.element_ty)
        tl.store(ptrs, zeros, mask=(offs_g < HEADS)[:, None] & (offs_d < HEAD_DIM)[None, :])
