"""Exercise 133 (hard): paged prefill attention in Triton. Notebook 12, "Triton: paged prefill attention".
Grade: python practice/judge.py 133                          (Triton's interpreter on the CPU, small shapes)
       python practice/judge.py 133 --device cuda --bench     (natively on a GPU: TFLOP/s, the speed bar)

Exercise 126's contract, written as a Triton kernel and its launcher. One step of a batch that mixes decodes
(q_len 1), full prefills and chunks of prefills: sequence b owns the query rows
cu_seqlens_q[b]:cu_seqlens_q[b+1], the LAST q_len tokens of its seq_lens[b]-token context, whose keys and
values are all in the paged cache already. Query i of b sits at position seq_lens[b] - q_len + i (causal
alignment "bottom right") and attends to positions 0..that position. A program owns a tile of BLOCK_Q
consecutive queries of ONE sequence for one query head: it walks that sequence's context in tiles of
BLOCK_N keys, looks up each key's block in the block table, masks keys after each query's position, and keeps
the softmax online (running max m, sum l, accumulator acc, in fp32). Keys at or past the end of the context
are masked, never loaded: the table row holds -1 padding there, block -1 lies before the cache and the last
block's tail is garbage (the judge puts NaN there). On the CPU the judge also records what each launched
kernel stores: an element of `out` no kernel stored (computed in PyTorch) is a wrong answer.
Shapes: docs/conventions.md.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def paged_prefill_kernel(
    q_ptr,              # [T, H, D] contiguous
    k_cache_ptr,        # [N, S, H_kv, D] contiguous: slot s, KV head j starts at element (s * H_kv + j) * D
    v_cache_ptr,        # [N, S, H_kv, D] contiguous
    block_tables_ptr,   # [B, M] int32, rows table_stride apart, padded with -1
    seq_lens_ptr,       # [B] int32: context length, new tokens included
    cu_seqlens_q_ptr,   # [B + 1] int32
    out_ptr,            # [T, H, D] contiguous, q's dtype
    table_stride,       # elements between two block-table rows
    scale,              # softmax scale
    NUM_HEADS: tl.constexpr,     # H
    NUM_KV_HEADS: tl.constexpr,  # H_kv
    HEAD_DIM: tl.constexpr,      # D
    BLOCK_SIZE: tl.constexpr,    # S
    BLOCK_Q: tl.constexpr,       # queries per program (>= 16: the dot rule)
    BLOCK_N: tl.constexpr,       # keys per tile (>= 16)
    BLOCK_D: tl.constexpr,       # max(16, next power of two >= D)
):
    """Program (b, h, t) writes head h of queries t*BLOCK_Q .. t*BLOCK_Q + BLOCK_Q-1 (those < q_len) of b."""
    raise NotImplementedError("paged_prefill_kernel: your code here (exercise 133)")


def paged_attention_varlen_triton(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                                  block_tables: torch.Tensor, seq_lens: torch.Tensor,
                                  cu_seqlens_q: torch.Tensor, scale: float,
                                  out: torch.Tensor) -> torch.Tensor:
    """Causal attention of a batch of query chunks over their paged contexts, computed by a Triton kernel.

    Args:
        q: [T, H, D] float (fp32, fp16 or bf16), contiguous, on the kernel's device (the CPU in Triton's
            interpreter, else the GPU); T = cu_seqlens_q[-1]. Read-only.
        k_cache, v_cache: [N, S, H_kv, D] contiguous, q's dtype and device, H a multiple of H_kv. Rows that
            are not part of a context hold garbage, possibly NaN or huge: they must not reach the output.
            Read-only.
        block_tables: [B, M] int32, each row contiguous (stride(1) == 1); row b lists the physical blocks
            of sequence b, then -1 padding. Read-only.
        seq_lens: [B] int32, context length of each sequence (its new tokens included), each >= 1. Read-only.
        cu_seqlens_q: [B + 1] int32, 0 = c_0 < c_1 < ... < c_B = T; 1 <= c_{b+1} - c_b <= seq_lens[b]
            (q_len 1: a decode row). Read-only.
        scale: float multiplying q . k.
        out: [T, H, D] contiguous, q's dtype and device: the caller's buffer (engines pass one, so that a
            CUDA graph finds it at the same address), written here and nowhere outside its T rows (the
            judge puts NaN guard memory before and after it).
    Returns: out, where row c_b + i is the attention of query i of sequence b at position
        seq_lens[b] - q_len + i over keys 0..that position, query head h reading KV head h // (H // H_kv).
        The work must be done by a Triton kernel launched here, with the softmax computed online over tiles
        of keys, in fp32 (tl.dot on fp32 inputs needs input_precision="ieee" on a GPU to stay within
        tolerance). The dot rule: every dimension (M, N and K) of every tl.dot is at least 16: what every
        supported Triton (3.0 to 3.9) compiles on a GPU; pad the tile (BLOCK = max(16, next power of two))
        and mask the padding (the judge's CPU cases apply it too). The judge allows atol = rtol = 1e-4 in
        fp32, 3e-3 in fp16, 2e-2 in bf16.
    Mutates only out. Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: seq_lens = [20, 37], cu_seqlens_q = [0, 8, 9], block size 4: rows 0..7 are the last 8 tokens
        of sequence 0 (positions 12..19: row 0 sees keys 0..12); row 8 is a decode row of sequence 1 at
        position 36, which sees all 37 keys; its table row has 10 blocks, the last holding 1 token.
    """
    raise NotImplementedError("paged_attention_varlen_triton: your code here (exercise 133)")
