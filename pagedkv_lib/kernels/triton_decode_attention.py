"""Paged decode attention in Triton (flash-decoding): one query token per sequence, K/V read through the
block table, softmax computed online in fp32; bf16 / fp16 / fp32 caches, or FP8 (e4m3) with per-tensor scales.

Shapes: docs/conventions.md (P = num_splits; BLOCK_N tokens per KV tile).
Ideas from Flash-Decoding (Dao et al., 2023), vLLM's `triton_unified_attention.py` (GQA heads packed into
one tile for `tl.dot`, split kernels with a segment reduction), FlashInfer's plan/run split and
FlashAttention-3's scheduler metadata (v3), SGLang's `decode_attention.py`.

Versions (one kernel; the `VERSION` constexpr selects it; the partitions in decode_config.py):
    v1  grid (B, H_kv * head_tiles): a program owns one KV head of one sequence and ALL its G query heads, so
        each K/V tile is read once per KV head; it walks the whole context and writes the output. Enough
        when B * H_kv fills the GPU and the contexts are about equally long.
    v2  grid (B, H_kv * head_tiles, P): split-KV. Every context is cut at the same P token ranges; each
        program writes its normalised partial output and log2-sum-exp in fp32, and `_reduce_splits_kernel`
        merges them. Needed when B * H_kv is small (B = 1: 8 programs for 132 SMs).
    v3  grid (max_items * H_kv * head_tiles,): length-aware. Each sequence's actual context is cut into
        chunks of equal work; `_merge_chunks_kernel` merges each sequence's chunks. The default: it does
        what v1 does on balanced batches and what v2 does on small ones, and stays fast on ragged ones.
    (A v2 that merged inside the split kernel, the last program of a group found by an atomic counter, was
    measured on an H200 and dropped: no faster. benchmarks/NOTES.md has the numbers.)
A KV tile of BLOCK_N tokens gathers each token's block id, so a tile may span several blocks (S < BLOCK_N)
or part of one (S > BLOCK_N). Tokens past the range or with a -1 block id are masked: never loaded.
FP8: the kernel converts e4m3 to the dot's operand type (fp16 natively, attention_args.dot_args; exact:
every e4m3 value is an fp16 value) and applies the scales in fp32, k_scale to the scores
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
from .triton_decode_merge import (
    MERGE_TILE,
    RUNTIME_INTS,
    _chunk_plan,
    _merge_chunks_kernel,
    _pick,
    _reduce_splits_kernel,
)

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

__all__ = ["DecodeConfig", "choose_config", "launch_decode_attention", "paged_attention_decode",
           "paged_attention_decode_reference", "paged_attention_decode_triton"]


paged_attention_decode_reference = paged_attention_decode   # core.paged_attention, fp8 caches too


@triton.jit(do_not_specialize=RUNTIME_INTS)
def _decode_attention_kernel(
    q_ptr,                  # [B, H, D] contiguous
    k_cache_ptr,            # [N, S, H_kv, D] contiguous; q's dtype or fp8 e4m3
    v_cache_ptr,            # [N, S, H_kv, D] contiguous
    k_scale,                # float, or pointer to one fp32 (K_SCALE_PTR): dequantized k = k * k_scale
    v_scale,                # float, or pointer to one fp32 (V_SCALE_PTR)
    block_tables_ptr,       # [B, M] int32, rows padded with -1
    context_lens_ptr,       # [B] int32, >= 1 (0: a padding row, output zeros; launch_decode_attention)
    out_ptr,                # [B, H, D] in q's dtype
    part_out_ptr,           # v2: [B, H, P, D], v3: [max_items, H, D] fp32 normalised partial outputs
    part_lse_ptr,           # v2: [B, H, P], v3: [max_items, H] fp32 log2-sum-exp per split / chunk
    num_seqs,               # B
    block_table_stride,     # elements between two block-table rows (M)
    tokens_per_split,       # v1 / v2: tokens per split, a multiple of BLOCK_N (v1: >= every context)
    target_items,           # the v3 plan (triton_decode_merge._chunk_plan)
    min_chunk,
    max_chunk,
    balanced_x8,
    scale_log2,             # softmax scale * LOG2E: scores in the log2 domain
    NUM_HEADS: tl.constexpr,      # H
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    GROUP: tl.constexpr,          # G = H // H_kv
    HEAD_DIM: tl.constexpr,       # D
    BLOCK_SIZE: tl.constexpr,     # S, tokens per cache block
    BLOCK_G: tl.constexpr,        # query heads per program (power of two; >= 16 on GPU for tl.dot)
    BLOCK_N: tl.constexpr,        # tokens per KV tile
    BLOCK_D: tl.constexpr,        # next power of two >= D (>= 16)
    BLOCK_B: tl.constexpr,        # v3: power of two >= B (at least 64: fewer recompiles)
    VERSION: tl.constexpr,        # 1, 2 or 3
    NUM_SPLITS: tl.constexpr,     # v2: P
    K_SCALE_PTR: tl.constexpr,    # True: k_scale is a pointer
    V_SCALE_PTR: tl.constexpr,    # True: v_scale is a pointer
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs, "tf32" (ignored for 16-bit inputs) otherwise
    DOT_DTYPE: tl.constexpr,      # tl.dot operands (attention_args.dot_args)
    USE_PDL: tl.constexpr,        # launched with programmatic dependent launch
):
    HEAD_TILES: tl.constexpr = (GROUP + BLOCK_G - 1) // BLOCK_G
    if USE_PDL:
        tl.extra.cuda.gdc_wait()                                      # the previous kernel has finished
        tl.extra.cuda.gdc_launch_dependents()                         # the merge may launch now
    if VERSION == 3:
        pid = tl.program_id(0)
        tile = pid % (NUM_KV_HEADS * HEAD_TILES)
        item = pid // (NUM_KV_HEADS * HEAD_TILES)
        offs_b, lens, chunk, full, last = _chunk_plan(context_lens_ptr, num_seqs, target_items, min_chunk,
                                                      max_chunk, balanced_x8, BLOCK_B, BLOCK_N)
        num_full = tl.sum(full, axis=0)
        if item >= num_full + tl.sum(last, axis=0):
            return                                                    # surplus program: fewer items
        full_end = tl.cumsum(full, axis=0)                            # [BLOCK_B] inclusive prefix sums
        last_end = tl.cumsum(last, axis=0)                            # [BLOCK_B]
        counts = full + last                                          # [BLOCK_B] chunks per sequence
        is_full = item < num_full
        seq_f = tl.sum((full_end <= item).to(tl.int32), axis=0)       # owner of full chunk `item`
        seq_l = tl.sum((last_end <= item - num_full).to(tl.int32), axis=0)  # owner of last chunk `item`
        seq = tl.where(is_full, seq_f, seq_l)
        n_full = _pick(full, offs_b, seq)
        j = tl.where(is_full, item - (_pick(full_end, offs_b, seq) - n_full), n_full)  # chunk index
        context_len = _pick(lens, offs_b, seq)
        start = j * chunk
        end = tl.minimum(start + chunk, context_len)
        num_chunks = _pick(counts, offs_b, seq)
        part = _pick(tl.cumsum(counts, axis=0) - counts, offs_b, seq) + j   # partial slot of this chunk
    else:
        seq = tl.program_id(0)
        tile = tl.program_id(1)
        split = tl.program_id(2)
        context_len = tl.load(context_lens_ptr + seq)
        start = split * tokens_per_split
        end = tl.minimum(start + tokens_per_split, context_len)
    kv_head = tile // HEAD_TILES
    g0 = (tile % HEAD_TILES) * BLOCK_G
    if K_SCALE_PTR:
        k_scale = tl.load(k_scale)
    if V_SCALE_PTR:
        v_scale = tl.load(v_scale)
    qk_scale = scale_log2 * k_scale                                   # dequantize K through the scores

    offs_g = g0 + tl.arange(0, BLOCK_G)                               # [BLOCK_G]
    offs_n = tl.arange(0, BLOCK_N)                                    # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    heads = kv_head * GROUP + offs_g                                  # [BLOCK_G] query heads of this KV head
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    q_rows = (seq * NUM_HEADS + heads).to(tl.int64) * HEAD_DIM        # [BLOCK_G]
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
        k, v = k.to(DOT_DTYPE), v.to(DOT_DTYPE)                       # [BLOCK_N, BLOCK_D]; fp8: exact
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # [BLOCK_G, BLOCK_N]
        s = tl.where(tok_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))                    # [BLOCK_G]
        alpha = tl.exp2(m_i - m_new)                                  # [BLOCK_G] rescales the old state
        p = tl.exp2(s - m_new[:, None])                               # [BLOCK_G, BLOCK_N]
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out_mask = g_mask[:, None] & d_mask[None, :]                      # [BLOCK_G, BLOCK_D]
    l_safe = tl.where(l_i > 0, l_i, 1.0)                              # an empty v2 split has l = 0, acc = 0
    o = acc * (v_scale / l_safe)[:, None]                             # [BLOCK_G, BLOCK_D]; dequantize V
    lse = tl.where(l_i > 0, m_i + tl.log2(l_safe), float("-inf"))     # [BLOCK_G]; -inf: empty split
    out_ptrs = out_ptr + q_rows[:, None] + offs_d[None, :]
    if VERSION == 1:
        tl.store(out_ptrs, o.to(out_ptr.dtype.element_ty), mask=out_mask)
    elif VERSION == 2:
        rows = (seq * NUM_HEADS + heads).to(tl.int64) * NUM_SPLITS + split   # [BLOCK_G] rows of [B, H, P]
        tl.store(part_lse_ptr + rows, lse, mask=g_mask)
        tl.store(part_out_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], o, mask=out_mask)  # G*D fp32
    else:
        chunks = tl.zeros([BLOCK_G], tl.int32) + num_chunks           # [BLOCK_G] (a vector: the interpreter
        alone = g_mask & (chunks == 1)                                # rejects tensor & scalar masks)
        split = g_mask & (chunks > 1)                                 # 1 chunk: the output; more: a partial
        tl.store(out_ptrs, o.to(out_ptr.dtype.element_ty), mask=alone[:, None] & d_mask[None, :])
        rows = part.to(tl.int64) * NUM_HEADS + heads                  # [BLOCK_G] rows of [max_items, H]
        tl.store(part_lse_ptr + rows, lse, mask=split)
        tl.store(part_out_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], o,
                 mask=split[:, None] & d_mask[None, :])


def launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale: float,
                            config: DecodeConfig, out: torch.Tensor | None = None, *, k_scale=None,
                            v_scale=None, states: tuple | None = None) -> torch.Tensor:
    """Launch with no checks (timing, CUDA graphs): validate once with the checked launcher.

    k_scale, v_scale: None (1.0), a float, or a 1-element float32 tensor on the device. Beyond the checked
    contract, a context length of 0 (a CUDA graph's padding row, engine/decode_graphs.py) reads nothing and
    outputs zeros in v1 and v3 (v2 would merge P empty splits into NaN).
    states (v2 only): (part_out [B, H, P', D], part_lse [B, H, P']) fp32 with P' >= config.num_splits; the
    splits' states go to slots 0..num_splits-1 (an empty split: lse -inf, o 0), nothing is merged and `out`
    is not written: the caller merges them with other parts (triton_cascade_attention).
    """
    B, H, D = q.shape
    H_kv, S = k_cache.shape[2], k_cache.shape[1]
    G = H // H_kv
    out = torch.empty_like(q) if out is None else out                # [B, H, D]
    heads = H_kv * triton.cdiv(G, config.block_g)
    k_scale = 1.0 if k_scale is None else k_scale                    # float or 1-element fp32 tensor
    v_scale = 1.0 if v_scale is None else v_scale
    precision, dot_dtype = dot_args(q, k_cache)
    P = config.num_splits
    block_b = max(64, triton.next_power_of_2(B)) if config.version == 3 else 1  # few recompiles
    if config.version == 1:
        grid, part_out, part_lse = (B, heads, 1), out, out            # no partials
    elif config.version == 2 and states is not None:
        grid = (B, heads, P)
        part_out, part_lse = states                                   # [B, H, P', D], [B, H, P']
    elif config.version == 2:
        grid = (B, heads, P)
        part_out = torch.empty(B, H, P, D, dtype=torch.float32, device=q.device)  # [B, H, P, D]
        part_lse = torch.empty(B, H, P, dtype=torch.float32, device=q.device)     # [B, H, P]
    else:
        grid = (config.max_items * heads,)
        part_out = torch.empty(config.max_items, H, D, dtype=torch.float32, device=q.device)  # [items, H, D]
        part_lse = torch.empty(config.max_items, H, dtype=torch.float32, device=q.device)     # [items, H]
    pdl = {"launch_pdl": True} if config.pdl else {}
    slots = part_out.shape[2] if config.version == 2 else P           # v2: P' (states) or P
    plan = (config.target_items, config.min_chunk, config.max_chunk, config.balanced_x8)
    _decode_attention_kernel[grid](
        q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, out, part_out, part_lse,
        B, block_tables.stride(0), config.tokens_per_split, *plan, scale * LOG2E,
        NUM_HEADS=H, NUM_KV_HEADS=H_kv, GROUP=G, HEAD_DIM=D, BLOCK_SIZE=S, BLOCK_G=config.block_g,
        BLOCK_N=config.block_n, BLOCK_D=config.block_d, BLOCK_B=block_b, VERSION=config.version,
        NUM_SPLITS=slots, K_SCALE_PTR=torch.is_tensor(k_scale), V_SCALE_PTR=torch.is_tensor(v_scale),
        DOT_PRECISION=precision, DOT_DTYPE=dot_dtype, USE_PDL=config.pdl, num_warps=config.num_warps,
        num_stages=config.num_stages, **pdl,
    )
    if config.version == 2 and states is None:
        _reduce_splits_kernel[(B * H,)](
            part_out, part_lse, out, HEAD_DIM=D, NUM_SPLITS=P, BLOCK_P=triton.next_power_of_2(P),
            BLOCK_D=config.block_d, USE_PDL=config.pdl, num_warps=4, **pdl,
        )
    elif config.version == 3:
        per_program = 1 if config.merge_per_head else G               # query heads per merge program
        block_gm = triton.next_power_of_2(per_program)
        _merge_chunks_kernel[(B * H // per_program,)](
            part_out, part_lse, out, context_lens, B, *plan, NUM_HEADS=H, HEADS=per_program,
            HEAD_DIM=D, BLOCK_B=block_b, BLOCK_N=config.block_n, BLOCK_GM=block_gm,
            BLOCK_P=max(1, MERGE_TILE // (block_gm * config.block_d)), BLOCK_D=config.block_d,
            USE_PDL=config.pdl, num_warps=4, **pdl,
        )
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
    if config.version not in (1, 2, 3):
        raise ValueError(f"config.version: expected 1, 2 or 3, got {config.version}")
    if config.version < 3 and config.num_splits * config.tokens_per_split < max_tokens:
        raise ValueError(f"config: v{config.version} needs num_splits * tokens_per_split >= M * S = "
                         f"{max_tokens}, got {config.num_splits} * {config.tokens_per_split}")
    if config.version == 3 and config.max_items < items_bound(config, B, max_tokens):
        raise ValueError(f"config: v3 needs max_items >= {items_bound(config, B, max_tokens)} for B = {B}, "
                         f"M * S = {max_tokens}, got {config.max_items}")
    return launch_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale, config,
                                   k_scale=k_arg, v_scale=v_arg)
