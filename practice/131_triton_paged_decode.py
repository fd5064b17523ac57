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
    raise NotImplementedError("paged_attention_decode_kernel: your code here (exercise 131)")


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
    raise NotImplementedError("paged_attention_decode_triton: your code here (exercise 131)")
