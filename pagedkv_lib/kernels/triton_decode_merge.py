"""Split decode's shared parts, in Triton: the v3 plan both stages compute, and the merges of partial outputs.

Shapes: docs/conventions.md (P = num_splits). A split program writes its normalised partial output o_i and
its log-sum-exp lse_i (base 2, fp32); a merge computes, per (sequence, query head),

    lse = log2 sum_i 2^lse_i          out = sum_i 2^(lse_i - lse) * o_i

The public interface:
    chunk_plan, chunk_of_item, chunks_of_seq   @triton.jit helpers: the v3 plan (decode_config.py says what
                            it is), computed in registers by every program that needs it: the split
                            kernel, the merge and `plan_chunks` all call these, the one implementation the
                            kernels run (decode_config.plan_chunks_reference is its plain-Python model for
                            figures on any machine; a test keeps the two equal)
    plan_chunks             the plan read back to the host (notebook 11, tests): one small launch
    reduce_splits           v2 (and the cascade's merge): one program per (sequence, query head) merges its
                            P splits
    merge_chunks            v3: one program per (sequence, KV head) merges its G heads' chunks, or, for few
                            sequences, one per (sequence, query head) (more programs, one step each); as
                            many chunks as the plan gave that sequence (one: the split kernel wrote it;
                            none: a context of length 0, a CUDA graph's padding row, gets zeros)
    pick, plan_width        a scalar out of a plan vector; the plan vectors' width BLOCK_B for B sequences
    PLAN_INTS               the plan's runtime ints, never specialized by Triton

Why the plan is computed on the device and not passed in: it depends on the context lengths, which live on
the device. Planning on the host would cost a device-to-host copy per step, and a CUDA graph would have to
re-plan into fixed buffers before each replay (FlashInfer's plan/run split); computed from one vector load
of context_lens it needs neither, and a graph captured once replays for any lengths within the table.

Memory traffic: v2 reads B * H * P * (D + 1) fp32 and writes B * H * D; v3 reads num_items * H * (D + 1)
fp32 for the sequences that were split.
"""
import torch

from .backend import MISSING_TRITON, device
from .decode_config import DecodeConfig

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["PLAN_INTS", "chunk_of_item", "chunk_plan", "chunks_of_seq", "merge_chunks", "pick", "plan_chunks",
           "plan_width", "reduce_splits"]

PLAN_INTS = ["num_seqs", "target_items", "min_chunk", "max_chunk", "balanced_x8"]  # not specialized (== 1,
                              # % 16): one compile serves every batch
MERGE_TILE = 4096             # v3 merge: G x chunks x D elements loaded per step


def plan_width(B: int) -> int:
    """BLOCK_B, the plan's vector width: a power of two >= B, at least 64 (fewer recompiles)."""
    return max(64, triton.next_power_of_2(B))


@triton.jit
def pick(values, offs, index):
    """values[index] of a [BLOCK_B] vector, as a scalar (no memory access)."""
    return tl.sum(tl.where(offs == index, values, 0), axis=0)


@triton.jit
def chunk_plan(
    context_lens_ptr,       # [B] int32
    num_seqs,               # B
    target_items,           # chunk >= cdiv(total, target_items) ...
    min_chunk,              # ... clamped to [min_chunk, max_chunk]
    max_chunk,
    balanced_x8,            # chunk = max len when 8 * max len * B <= balanced_x8 * total
    BLOCK_B: tl.constexpr,  # plan_width(B)
    BLOCK_N: tl.constexpr,  # chunk is a multiple of BLOCK_N
):
    """The v3 plan from one vector load of context_lens: the chunk size and each sequence's full and last
    chunks (decode_config.py's docstring gives the rule)."""
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
def chunks_of_seq(seq, offs_b, full, last):
    """Sequence `seq`'s number of chunks and the partial slot of its first one (slots follow sequences)."""
    counts = full + last                                              # [BLOCK_B] chunks per sequence
    num_chunks = pick(counts, offs_b, seq)
    first = pick(tl.cumsum(counts, axis=0) - counts, offs_b, seq)
    return num_chunks, first


@triton.jit
def chunk_of_item(item, offs_b, lens, chunk, full, last):
    """Work item `item` (< the plan's number of items) as (seq, start, end, partial slot, chunks of seq).

    Items are numbered full chunks first, in sequence order, then the shorter last chunks: programs start in
    id order, so the big items go first and the small ones fill the tail."""
    num_full = tl.sum(full, axis=0)
    full_end = tl.cumsum(full, axis=0)                                # [BLOCK_B] inclusive prefix sums
    last_end = tl.cumsum(last, axis=0)                                # [BLOCK_B]
    is_full = item < num_full
    seq_f = tl.sum((full_end <= item).to(tl.int32), axis=0)           # owner of full chunk `item`
    seq_l = tl.sum((last_end <= item - num_full).to(tl.int32), axis=0)  # owner of last chunk `item`
    seq = tl.where(is_full, seq_f, seq_l)
    n_full = pick(full, offs_b, seq)
    j = tl.where(is_full, item - (pick(full_end, offs_b, seq) - n_full), n_full)  # chunk index in seq
    start = j * chunk
    end = tl.minimum(start + chunk, pick(lens, offs_b, seq))
    num_chunks, first = chunks_of_seq(seq, offs_b, full, last)
    return seq, start, end, first + j, num_chunks


@triton.jit(do_not_specialize=PLAN_INTS)
def _plan_kernel(
    context_lens_ptr,       # [B] int32
    items_ptr,              # [max_items, 4] int32, filled with -1: (seq, start, end, slot) per item
    chunk_ptr,              # [1] int32
    num_seqs,               # B
    target_items,           # the v3 plan (chunk_plan)
    min_chunk,
    max_chunk,
    balanced_x8,
    BLOCK_B: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One program per possible work item writes what the split kernel's program of that item would do."""
    item = tl.program_id(0)
    offs_b, lens, chunk, full, last = chunk_plan(context_lens_ptr, num_seqs, target_items, min_chunk,
                                                 max_chunk, balanced_x8, BLOCK_B, BLOCK_N)
    if item == 0:
        tl.store(chunk_ptr, chunk)
    if item < tl.sum(full + last, axis=0):
        seq, start, end, slot, _ = chunk_of_item(item, offs_b, lens, chunk, full, last)
        tl.store(items_ptr + item * 4 + 0, seq)
        tl.store(items_ptr + item * 4 + 1, start)
        tl.store(items_ptr + item * 4 + 2, end)
        tl.store(items_ptr + item * 4 + 3, slot)


def plan_chunks(context_lens: list[int], config: DecodeConfig) -> tuple[int, list[tuple]]:
    """The v3 plan the kernels compute for these lengths, read back: (chunk, the work items in program order
    as (seq, start, end, partial_slot)). Runs `chunk_plan` itself (on the GPU, or in the interpreter)."""
    if config.version != 3:
        raise ValueError(f"plan_chunks: expected a v3 config, got version {config.version}")
    lens = torch.tensor(context_lens, dtype=torch.int32, device=device())  # [B]
    items = torch.full((config.max_items, 4), -1, dtype=torch.int32, device=lens.device)  # [max_items, 4]
    chunk = torch.zeros(1, dtype=torch.int32, device=lens.device)     # [1]
    _plan_kernel[(config.max_items,)](
        lens, items, chunk, len(context_lens), config.target_items, config.min_chunk, config.max_chunk,
        config.balanced_x8, BLOCK_B=plan_width(len(context_lens)), BLOCK_N=config.block_n,
    )
    rows = [tuple(row) for row in items.tolist() if row[0] >= 0]
    return int(chunk.item()), rows


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
    w = tl.exp2(lse - tl.max(lse, axis=0))                            # [BLOCK_P]; some split is not empty
    w = w / tl.sum(w, axis=0)
    ptrs = part_out_ptr + (row * NUM_SPLITS + offs_p[:, None]) * HEAD_DIM + offs_d[None, :]
    o = tl.load(ptrs, mask=p_mask[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)  # [BLOCK_P, BLOCK_D]
    out = tl.sum(w[:, None] * o, axis=0)                              # [BLOCK_D]
    tl.store(out_ptr + row * HEAD_DIM + offs_d, out.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


@triton.jit(do_not_specialize=PLAN_INTS)
def _merge_chunks_kernel(
    part_out_ptr,           # [max_items, H, D] fp32 normalised partial outputs
    part_lse_ptr,           # [max_items, H] fp32 log2-sum-exp per chunk
    out_ptr,                # [B, H, D] in q's dtype
    context_lens_ptr,       # [B] int32: the plan is recomputed, as in the split kernel
    num_seqs,               # B
    target_items,           # the v3 plan (chunk_plan)
    min_chunk,
    max_chunk,
    balanced_x8,
    NUM_HEADS: tl.constexpr,      # H
    HEADS: tl.constexpr,          # query heads per program: G (a KV head's group) or 1
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_B: tl.constexpr,        # plan_width(B)
    BLOCK_N: tl.constexpr,        # the split kernel's BLOCK_N (chunk is a multiple of it)
    BLOCK_GM: tl.constexpr,       # next power of two >= HEADS
    BLOCK_P: tl.constexpr,        # chunks merged per step
    BLOCK_D: tl.constexpr,        # next power of two >= D
    USE_PDL: tl.constexpr,        # launched with programmatic dependent launch
):
    """v3: one program per (sequence, group of HEADS query heads) merges their chunks (1 chunk: written)."""
    seq = tl.program_id(0) // (NUM_HEADS // HEADS)
    head0 = tl.program_id(0) % (NUM_HEADS // HEADS) * HEADS
    offs_b, lens, chunk, full, last = chunk_plan(context_lens_ptr, num_seqs, target_items, min_chunk,
                                                 max_chunk, balanced_x8, BLOCK_B, BLOCK_N)
    num_chunks, first = chunks_of_seq(seq, offs_b, full, last)        # first: its first partial slot
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


def reduce_splits(part_out: torch.Tensor, part_lse: torch.Tensor, out: torch.Tensor, *,
                  pdl: bool = False) -> torch.Tensor:
    """Merge P partial states per (sequence, query head) into `out` (written, returned).

    part_out [B, H, P, D] and part_lse [B, H, P] fp32, contiguous (in every row one slot at least is not
    empty; an empty one holds lse -inf, o 0); out [B, H, D] (its dtype is the output's). pdl: launched with
    programmatic dependent launch after the kernel that wrote the states (Hopper and later)."""
    B, H, P, D = part_out.shape
    _reduce_splits_kernel[(B * H,)](
        part_out, part_lse, out, HEAD_DIM=D, NUM_SPLITS=P, BLOCK_P=triton.next_power_of_2(P),
        BLOCK_D=max(16, triton.next_power_of_2(D)), USE_PDL=pdl, num_warps=4,
        **({"launch_pdl": True} if pdl else {}),
    )
    return out


def merge_chunks(part_out: torch.Tensor, part_lse: torch.Tensor, out: torch.Tensor,
                 context_lens: torch.Tensor, config: DecodeConfig, group: int) -> torch.Tensor:
    """v3: merge each sequence's chunks into `out` (written, returned), recomputing the plan of `config`.

    part_out [max_items, H, D] and part_lse [max_items, H] fp32, as the split kernel left them; out [B, H, D];
    context_lens [B] int32 (the lengths the split kernel saw); group: G = H // H_kv."""
    B, H, D = out.shape
    per_program = 1 if config.merge_per_head else group               # query heads per merge program
    block_gm = triton.next_power_of_2(per_program)
    _merge_chunks_kernel[(B * H // per_program,)](
        part_out, part_lse, out, context_lens, B, config.target_items, config.min_chunk, config.max_chunk,
        config.balanced_x8, NUM_HEADS=H, HEADS=per_program, HEAD_DIM=D, BLOCK_B=plan_width(B),
        BLOCK_N=config.block_n, BLOCK_GM=block_gm, BLOCK_P=max(1, MERGE_TILE // (block_gm * config.block_d)),
        BLOCK_D=config.block_d, USE_PDL=config.pdl, num_warps=4,
        **({"launch_pdl": True} if config.pdl else {}),
    )
    return out
