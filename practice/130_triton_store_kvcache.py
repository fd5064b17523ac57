"""Exercise 130 (medium): store_kvcache in Triton. Notebook 10, "Triton: store_kvcache".
Grade: python practice/judge.py 130                          (Triton's interpreter on the CPU, small shapes)
       python practice/judge.py 130 --device cuda --bench     (natively on a GPU, larger shapes, GB/s)

Exercise 124's contract, written as a Triton kernel and its launcher: one program per token copies that
token's K row and V row (H_kv * D elements each) into the cache row of its slot, and a program whose slot is
-1 writes nothing. This is nano-vllm's `store_kvcache_kernel` (`nanovllm/layers/attention.py`), made to work
when H_kv * D is not a power of two. The judge surrounds the caches with guard memory: a write through slot
-1, or past the end of a row, lands there and is caught. On the CPU the judge also records what each
launched kernel stores: a cache element the kernel should write that no kernel stored (a copy done in PyTorch)
is a wrong answer.
Shapes: docs/conventions.md; ROW = H_kv * D.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def store_kvcache_kernel(
    key_ptr,            # [T, H_kv, D]: token t's ROW elements start at t * key_stride, contiguous
    key_stride,         # elements between two tokens' key rows (ROW, or more for a view into a fused qkv)
    value_ptr,          # [T, H_kv, D] like key
    value_stride,       # elements between two tokens' value rows
    k_cache_ptr,        # [N, S, H_kv, D] contiguous: slot s's row starts at s * ROW
    v_cache_ptr,        # [N, S, H_kv, D] contiguous
    slot_mapping_ptr,   # [T] int32, -1 = do not write
    ROW: tl.constexpr,    # H_kv * D, elements in one token's row
    BLOCK: tl.constexpr,  # the next power of two >= ROW (tl.arange needs a power of two)
):
    """Program t copies key[t] and value[t] into row slot_mapping[t] of k_cache and v_cache.

    A padding token (slot -1) returns at once: `if slot < 0: return`. Folding the test into the mask,
    `(offs < ROW) & (slot >= 0)`, works on a GPU, but Triton's interpreter rejects it ("mask has unsupported
    dtype").
    """
    raise NotImplementedError("store_kvcache_kernel: your code here (exercise 130)")


def store_kvcache_triton(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                         v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """k_cache/v_cache[slot] = key/value[t] for every token t whose slot is not -1, in place, by a kernel.

    Args:
        key, value: [T, H_kv, D] float (fp32, fp16 or bf16, the caches' dtype), on the kernel's device (the
            CPU in Triton's interpreter, else the GPU). Each token's H_kv * D elements are contiguous
            (stride(1) == D, stride(2) == 1), but rows may be further apart than H_kv * D: key and value
            may be views into a fused qkv projection, rows key.stride(0) apart. Read-only.
        k_cache, v_cache: [N, S, H_kv, D] contiguous, same dtype and device. Slot s is block s // S,
            offset s % S, i.e. row s of the cache viewed as [N * S, H_kv * D]. Written in place: exactly
            the rows of the slots in slot_mapping, nothing else (not even one element past a row).
        slot_mapping: [T] int32, slot_mapping[t] in [-1, N * S); distinct apart from -1. Read-only.
    Returns: None. The work must be done by a Triton kernel launched here, one program per token.
    Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: slot_mapping = tensor([5, -1, 0]) launches 3 programs: program 0 copies key[0] to k_cache[1, 1]
        (S = 4) and value[0] to v_cache[1, 1], program 1 returns at once, program 2 writes row 0.
    """
    raise NotImplementedError("store_kvcache_triton: your code here (exercise 130)")
