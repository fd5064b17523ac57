"""Exercise 131 (hard): paged decode attention in Triton. Notebook 11, "Triton: paged decode attention".
Grade: python practice/judge.py 131                          (Triton's interpreter on the CPU, small shapes)
       python practice/judge.py 131 --device cuda --bench     (natively on a GPU: GB/s, the speed bar)

Exercise 125's contract, written as a Triton kernel and its launcher, flash-decoding style: a program owns
one sequence and one KV head, so it reads each K/V tile once for the whole group of G query heads that share
that KV head. It walks the context in tiles of BLOCK_N tokens, looks up each token's block in the block
table (a tile may cross several blocks, or cover part of one), and keeps the softmax online: a running max m,
a running sum l and an unnormalised output acc, all fp32, rescaled by exp(m_old - m_new) whenever the max
grows. Tokens at or past the context length are masked, never loaded: the table row holds -1 padding
there, and block -1 lies before the cache (the judge puts NaN guard memory there, and after it). On the CPU
the judge also records what each launched kernel stores: an element of `out` no kernel stored (computed in
PyTorch) is a wrong answer.
Three details of Triton it meets (section 3 of notebook 11 explains each):
- `tl.store` converts the value to the element type of the pointer it writes through, rounding to nearest
  as `.to()` does: the fp32 tile `acc / l` stored into a bf16 `out` is written as bf16 (an explicit
  `.to(out_ptr.dtype.element_ty)` changes nothing but the reading).
- Padded query rows (BLOCK_G > G) load q as 0 (a masked load's `other=0.0`): their scores are 0 for every
  context token, finite, so their softmax is a plain average of V, never NaN; a row's max, sum and output
  are its own, so they do not touch the real rows, and the store's mask drops them. Dims past D, loaded
  as 0 in q and K, add nothing to a dot product.
- BLOCK_N does not depend on the block size S: a tile may cross several blocks or cover part of one. Any
  power of two works (at least 16 with tl.dot); a bigger tile means fewer loop steps but more registers,
  and the masked tail of the last tile is wasted work. The library's `choose_config`
  (pagedkv_lib/kernels/decode_config.py) takes 32 in the interpreter and, on a GPU, 64 tokens of a 2-byte
  cache (the same bytes per tile for other dtypes).
Shapes: docs/conventions.md.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def paged_attention_decode_kernel(
    q_ptr,              # [B, H, D] contiguous
    k_cache_ptr,        # [N, S, H_kv, D] contiguous: slot s, KV head j starts at element (s * H_kv + j) * D
    v_cache_ptr,        # [N, S, H_kv, D] contiguous
    block_tables_ptr,   # [B, M] int32, rows table_stride apart, padded with -1
    context_lens_ptr,   # [B] int32, each >= 1
    out_ptr,            # [B, H, D] contiguous, q's dtype
    table_stride,       # elements between two block-table rows
    scale,              # softmax scale
    NUM_KV_HEADS: tl.constexpr,  # H_kv
    GROUP: tl.constexpr,         # G = H // H_kv, query heads per KV head
    HEAD_DIM: tl.constexpr,      # D
    BLOCK_SIZE: tl.constexpr,    # S
    BLOCK_G: tl.constexpr,       # heads per tile: a power of two >= G (with tl.dot, >= 16: the dot rule)
    BLOCK_N: tl.constexpr,       # tokens per KV tile (a power of two; with tl.dot, >= 16)
    BLOCK_D: tl.constexpr,       # dims per tile: a power of two >= D (with tl.dot, >= 16)
):
    """Program (b, j) writes out[b, h] for the G query heads h = j*G .. j*G + G-1 of KV head j."""
    # BEGIN SOLUTION
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    offs_g = tl.arange(0, BLOCK_G)                                   # [BLOCK_G]
    offs_n = tl.arange(0, BLOCK_N)                                   # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                   # [BLOCK_D]
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    heads = kv_head * GROUP + offs_g                                 # [BLOCK_G] query heads h // G == kv_head
    q_offs = (seq * NUM_KV_HEADS * GROUP + heads)[:, None] * HEAD_DIM + offs_d[None, :]   # [BLOCK_G, BLOCK_D]
    q_mask = g_mask[:, None] & d_mask[None, :]
    q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0).to(tl.float32)                    # read G*D
    context_len = tl.load(context_lens_ptr + seq)
    table_row = block_tables_ptr + seq.to(tl.int64) * table_stride

    m = tl.full([BLOCK_G], float("-inf"), tl.float32)                # [BLOCK_G] running max of the scores
    l = tl.zeros([BLOCK_G], tl.float32)                              # [BLOCK_G] running sum of exp
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)                   # [BLOCK_G, BLOCK_D] running sum of p * v
    for start in range(0, context_len, BLOCK_N):
        tok = start + offs_n                                         # [BLOCK_N] positions in the sequence
        in_ctx = tok < context_len
        block = tl.load(table_row + tok // BLOCK_SIZE, mask=in_ctx, other=0)            # [BLOCK_N] block ids
        slot = block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE                     # [BLOCK_N]
        kv_offs = (slot * NUM_KV_HEADS + kv_head)[:, None] * HEAD_DIM + offs_d[None, :]  # [BLOCK_N, BLOCK_D]
        kv_mask = in_ctx[:, None] & d_mask[None, :]
        k = tl.load(k_cache_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)    # read BLOCK_N*D
        v = tl.load(v_cache_ptr + kv_offs, mask=kv_mask, other=0.0).to(tl.float32)    # read BLOCK_N*D
        s = tl.sum(q[:, None, :] * k[None, :, :], axis=2) * scale                     # [BLOCK_G, BLOCK_N]
        s = tl.where(in_ctx[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))                     # finite: the tile holds a context token
        alpha = tl.exp(m - m_new)                                    # [BLOCK_G] rescales what came before
        p = tl.exp(s - m_new[:, None])                               # [BLOCK_G, BLOCK_N]
        l = l * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)   # [BLOCK_G, BLOCK_D]
        m = m_new
    out = acc / l[:, None]                                           # [BLOCK_G, BLOCK_D]
    tl.store(out_ptr + q_offs, out.to(out_ptr.dtype.element_ty), mask=q_mask)        # write G*D
    # END SOLUTION


def paged_attention_decode_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                  block_tables: torch.Tensor, context_lens: torch.Tensor,
                                  scale: float) -> torch.Tensor:
    """Attention of one query per sequence over its paged context, computed by a Triton kernel.

    Args:
        q: [B, H, D] float (fp32, fp16 or bf16), contiguous, on the kernel's device (the CPU in Triton's
            interpreter, else the GPU). Read-only.
        k_cache, v_cache: [N, S, H_kv, D] contiguous, q's dtype and device, H a multiple of H_kv. Rows that
            are not part of a context hold garbage, possibly NaN or huge: they must not reach the output.
            Read-only.
        block_tables: [B, M] int32, each row contiguous (stride(1) == 1); row b lists the physical blocks
            of sequence b, then -1 padding. Read-only.
        context_lens: [B] int32, each >= 1: the tokens of sequence b are positions 0..context_lens[b]-1,
            position p at block block_tables[b, p // S], offset p % S. Read-only.
        scale: float multiplying q . k (usually D ** -0.5, but any value may come).
    Returns: a new [B, H, D] tensor of q's dtype and device: out[b, h] = softmax_j(q[b, h] . k_j * scale) .
        v_j over the context of b, with k_j, v_j of KV head h // (H // H_kv). The work must be done by a
        Triton kernel launched here, with the softmax computed online over tiles of the context, in fp32
        (tl.dot on fp32 inputs needs input_precision="ieee" on a GPU to stay within tolerance). The dot
        rule, if you use tl.dot: every dimension (M, N and K) of every tl.dot is at least 16: what every
        supported Triton (3.0 to 3.9) compiles on a GPU; pad the tile (BLOCK = max(16, next power of two))
        and mask the padding. So BLOCK_G = max(16, next power of two >= G), BLOCK_D = max(16, next power of
        two >= D); the judge applies the rule on the CPU too, and its cases, on the CPU and on the GPU, have
        G = 1, 2, 3, 4 and 8. Without
        tl.dot (sums of products, as tl.sum(q[:, None, :] * k[None, :, :], axis=2)) any power of two will
        do. The judge allows atol = rtol = 1e-4 in fp32, 3e-3 in fp16, 2e-2 in bf16.
    Mutates nothing. Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: B = 1, context_lens = [6], block_tables = [[7, 2, -1]], S = 4: the keys are rows 0..3 of
        block 7 then rows 0..1 of block 2; a tile of 8 tokens covers positions 0..7, and positions 6 and 7
        (block 2's tail, then nothing) are masked.
    """
    # BEGIN SOLUTION
    B, H, D = q.shape
    S, H_kv = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q)                                        # [B, H, D]
    if B == 0:
        return out
    group = H // H_kv
    paged_attention_decode_kernel[(B, H_kv)](
        q, k_cache, v_cache, block_tables, context_lens, out, block_tables.stride(0), scale,
        NUM_KV_HEADS=H_kv, GROUP=group, HEAD_DIM=D, BLOCK_SIZE=S, BLOCK_G=triton.next_power_of_2(group),
        BLOCK_N=32, BLOCK_D=triton.next_power_of_2(D),
    )
    return out
    # END SOLUTION
