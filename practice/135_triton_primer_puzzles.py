"""Exercise 135 (medium): Triton primer puzzles. Notebook 09, "Triton primer".
Grade: python practice/judge.py 135                          (Triton's interpreter on the CPU, small shapes)
       python practice/judge.py 135 --device cuda             (natively on a GPU, larger shapes)

Four small kernels, each with its launcher; each rehearses something the course's kernels need (notebooks
10-12). Every launcher writes into the `out` it is given, in place; the judge puts `out` between NaN guard
blocks (a write past its end, or before its start, is caught) and fills it with NaN first (an element never
written is caught), and on the CPU it records what each launched kernel stores: an element of `out` no
kernel stored (written in PyTorch) is a wrong answer. Sizes are awkward on purpose: never a multiple of a
block, never a power of two.
The PyTorch specs are in the notebook (`pagedkv_lib.kernels.triton_primer.<name>_spec`).
Shapes: docs/conventions.md for the course's letters; each function names its own sizes.

In Triton's interpreter (the CPU) two things differ from a GPU; compute so that both give the same answer:
- bf16 arithmetic is wrong there, `tl.dot` included (it multiplies the raw bits): convert with
  `.to(tl.float32)` before any arithmetic, and store the fp32 result (the store rounds it to out's dtype;
  the interpreter rounds toward zero, a GPU to nearest: bf16 results are compared at one bf16 step).
- a `tl.dot` accepts any tile there, while a GPU does not. The dot rule, the same in every exercise: every
  dimension (M, N and K) of every tl.dot is at least 16: what every supported Triton (3.0 to 3.9) compiles
  on a GPU; pad the tile (BLOCK = max(16, next power of two)) and mask the padding. The judge's CPU cases
  apply it (pagedkv_lib.kernels.triton_primer.gpu_dot_rule).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gather_rows_kernel(
    src_ptr,              # [R, W]: row r starts at r * src_stride, its W elements contiguous
    src_stride,           # elements between two rows of src (W, or more for a view)
    index_ptr,            # [T] int32 in [-1, R)
    out_ptr,              # [T, W] contiguous
    W,                    # elements in a row
    BLOCK: tl.constexpr,  # next power of two >= W
):
    """Program t writes out[t]: src[index[t]], or zeros when index[t] == -1."""
    raise NotImplementedError("gather_rows_kernel: your code here (exercise 135)")


def gather_rows_triton(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> None:
    """out[t] = src[index[t]] for every t, and out[t] = 0 where index[t] == -1: in place, by a kernel.

    Args:
        src: [R, W] float (fp32, fp16 or bf16), on the kernel's device. Each row's W elements are contiguous
            (stride(1) == 1), but rows are src.stride(0) apart, which may be more than W (a column slice of a
            wider tensor). Read-only.
        index: [T] int32, every value in [-1, R). Read-only.
        out: [T, W] contiguous, src's dtype and device. Written in place: every element, nothing outside it.
    Returns: None. One program per output row (grid (T,)); W need not be a power of two.
    Example: src = [[1, 2, 3], [4, 5, 6]], index = [1, -1, 0] -> out = [[4, 5, 6], [0, 0, 0], [1, 2, 3]].
    """
    raise NotImplementedError("gather_rows_triton: your code here (exercise 135)")


@triton.jit
def scale_columns_kernel(
    x_ptr,                  # [M, N]: x[i, j] at i * stride_xm + j * stride_xn
    stride_xm,
    stride_xn,
    w_ptr,                  # [N] contiguous
    out_ptr,                # [M, N] contiguous
    M,
    N,
    BLOCK_M: tl.constexpr,  # rows of a tile
    BLOCK_N: tl.constexpr,  # columns of a tile
):
    """Program (a, b) writes the tile of out at rows a*BLOCK_M.., columns b*BLOCK_N..: x * w there."""
    raise NotImplementedError("scale_columns_kernel: your code here (exercise 135)")


def scale_columns_triton(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    """out[i, j] = x[i, j] * w[j]: in place, by a kernel over a 2-D grid of tiles.

    Args:
        x: [M, N] float (fp32, fp16 or bf16) with ANY strides: a transposed view (y.T), a slice of a wider
            tensor (y[:, 3:40]), or contiguous. Read-only.
        w: [N] contiguous, x's dtype. Read-only.
        out: [M, N] contiguous, x's dtype. Written in place: every element, nothing outside it. The product is
            computed in fp32 and rounded once to out's dtype (compared at one step of that dtype).
    Returns: None. A 2-D grid: one program per BLOCK_M x BLOCK_N tile, triton.cdiv(M, BLOCK_M) x
        triton.cdiv(N, BLOCK_N) programs.
    Example: x = [[1, 2], [3, 4]].T (so x = [[1, 3], [2, 4]]), w = [10, 100] -> out = [[10, 300], [20, 400]].
    """
    raise NotImplementedError("scale_columns_triton: your code here (exercise 135)")


@triton.jit
def row_softmax_kernel(
    x_ptr,                # [R, C]: row r starts at r * x_stride, contiguous
    x_stride,             # elements between two rows of x
    lengths_ptr,          # [R] int32 in [0, C]
    out_ptr,              # [R, C] contiguous
    C,                    # columns
    BLOCK: tl.constexpr,  # columns per step of the loops
):
    """Program r writes out[r]: the softmax of x[r, :n] (n = lengths[r], read here), then zeros."""
    raise NotImplementedError("row_softmax_kernel: your code here (exercise 135)")


def row_softmax_triton(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor) -> None:
    """Row r of out: softmax of x[r, :lengths[r]], then zeros. In place, one program per row.

    Args:
        x: [R, C] float (fp32, fp16 or bf16); each row contiguous (stride(1) == 1), rows x.stride(0) apart.
            Past a row's length x holds garbage (NaN, inf) that must not change the result. Scores may be
            large or very negative (-300: exp underflows to 0 unless the row's max is subtracted). Read-only.
        lengths: [R] int32, each in [0, C]. Read-only.
        out: [R, C] contiguous, x's dtype. Written in place, every element: out[r, :n] = softmax(x[r, :n])
            computed in fp32 (n = lengths[r]), out[r, n:] = 0; a row of length 0 is all zeros.
            Compared at atol 1e-6, rtol one step of the dtype.
    Returns: None. Each program loops over its row in chunks of BLOCK columns, to a bound it loads from
        `lengths` (a runtime value: no recompilation per length).
    Example: x = [[0, ln 3, nan]], lengths = [2] -> out = [[0.25, 0.75, 0]].
    """
    raise NotImplementedError("row_softmax_triton: your code here (exercise 135)")


@triton.jit
def scores_kernel(
    q_ptr,                  # [M, D]: q[i, d] at i * stride_qm + d * stride_qd
    stride_qm,
    stride_qd,
    k_ptr,                  # [N, D]: k[j, d] at j * stride_kn + d * stride_kd
    stride_kn,
    stride_kd,
    out_ptr,                # [M, N] float32 contiguous
    M,
    N,
    D,
    BLOCK_M: tl.constexpr,  # >= M, >= 16
    BLOCK_N: tl.constexpr,  # keys per program, >= 16
    BLOCK_D: tl.constexpr,  # >= D, >= 16
):
    """Program b writes out[:, b*BLOCK_N : (b+1)*BLOCK_N] = q @ k[b*BLOCK_N ..]^T, by one tl.dot."""
    raise NotImplementedError("scores_kernel: your code here (exercise 135)")


def scores_triton(q: torch.Tensor, k: torch.Tensor, out: torch.Tensor) -> None:
    """out = q @ k^T with fp32 accumulation: in place, by tl.dot.

    Args:
        q: [M, D] fp16 or bf16 with any strides, M from 1 to 16 (the query heads of one GQA group). Read-only.
        k: [N, D] q's dtype with any strides (the keys of one KV head, or a transposed view). Read-only.
        out: [M, N] float32 contiguous. Written in place, every element, nothing outside it. Compared at
            atol 1e-4, rtol 1e-4 (the order of a sum may differ).
    Returns: None. Use tl.dot and tl.trans under the dot rule (every dimension at least 16): pad M and D up
        (BLOCK_M = max(16, triton.next_power_of_2(M))) and mask the padding. On the CPU the judge runs your
        kernel under the GPU's rule, so a smaller tile raises there too. Give tl.dot fp32 operands
        (`.to(tl.float32)`): the interpreter's bf16 dot is wrong, and every fp16 or bf16 value is exact in
        fp32 (and in a GPU's tf32), so the products stay exact.
    Example: q = [[1, 0]], k = [[1, 2], [3, 4], [5, 6]] -> out = [[1, 3, 5]].
    """
    raise NotImplementedError("scores_triton: your code here (exercise 135)")
