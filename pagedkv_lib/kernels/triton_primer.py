"""The Triton primer's puzzles (notebook 09, exercise 135): each a PyTorch spec, a kernel, a checked launcher.

Every puzzle rehearses one thing the course's kernels need (notebooks 10-12), in the rhythm of Sasha Rush's
Triton-Puzzles (a formula, a PyTorch spec, a kernel, a check) and of Triton's own tutorials (vector add,
fused softmax, matmul):

    puzzle          spec (PyTorch, returns a tensor)     what it rehearses
    gather_rows     out[t] = src[index[t]], 0 for -1      one program per row, a masked row, a row stride, -1
    scale_columns   out[i, j] = x[i, j] * w[j]            a 2-D grid of 2-D tiles, 2-D masks, any strides
    row_softmax     softmax of x[r, :lengths[r]], 0 after  a loop to a bound loaded from memory, other=-inf,
                                                          reductions, tl.where, the empty row
    scores          q @ k^T in fp32                       tl.dot and tl.trans, a tile padded to 16 rows

Per puzzle: `<name>_spec(inputs) -> Tensor` (the formula; shown in the notebook), `<name>_reference(inputs,
out)` (the spec written into `out`: the oracle exercise 135 is graded against), `_<name>_kernel` and the
launcher `<name>_triton(inputs, out)`, which checks shapes, dtypes and strides, then writes `out` in place.
`gpu_dot_rule()` makes Triton's interpreter refuse the `tl.dot` tiles a GPU refuses (see its docstring); the
course's one rule for every tl.dot, in every exercise, is DOT_RULE.

Sizes: T output rows, W a row's width, R source rows, M x N a 2-D tile's extent, C columns, D head_dim
(docs/conventions.md for the course's letters).
Memory traffic: gather_rows reads and writes T * W elements; scale_columns M * N (+ N); row_softmax reads
each row's first lengths[r] elements twice and writes R * C; scores reads (M + N) * D and writes M * N.
"""
import contextlib

import torch

from pagedkv_lib.core.validation import check_tensor

from . import backend
from .backend import MISSING_TRITON

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
HALF_FLOATS = (torch.float16, torch.bfloat16)      # tl.dot's inputs here: the model's 16-bit dtypes
DOT_MIN = 16                                       # the smallest tl.dot dimension that every GPU accepts
DOT_RULE = ("every dimension (M, N and K) of every tl.dot is at least 16: what every supported Triton (3.0 "
            "to 3.9) compiles on a GPU; pad the tile (BLOCK = max(16, next power of two)) and mask the "
            "padding")


# ----------------------------------------------------------------------------------------------------------
# specs (PyTorch) and the references of exercise 135 (the spec written into `out`)

def gather_rows_spec(src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """out[t] = src[index[t]], a row of zeros where index[t] == -1: src [R, W], index [T] -> [T, W]."""
    rows = src[index.clamp(min=0).long()]                             # [T, W]
    return torch.where(index[:, None] >= 0, rows, torch.zeros_like(rows))


def scale_columns_spec(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """out[i, j] = x[i, j] * w[j]: x [M, N] (any strides), w [N] -> [M, N]."""
    return x * w[None, :]


def row_softmax_spec(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Row r: softmax of x[r, :lengths[r]] (in fp32), then zeros; a row of length 0 is all zeros.
    x [R, C], lengths [R] -> [R, C] in x's dtype. What lies past a row's length is never read."""
    cols = torch.arange(x.shape[1], device=x.device)                 # [C]
    inside = cols[None, :] < lengths[:, None].long()                  # [R, C]
    scores = x.float().masked_fill(~inside, float("-inf"))            # [R, C]
    probs = torch.softmax(scores, dim=1).nan_to_num(0.0)              # [R, C]; an empty row: 0 / 0 -> 0
    return probs.to(x.dtype)


def scores_spec(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """out = q @ k^T in fp32: q [M, D], k [N, D] (16-bit, any strides) -> [M, N] float32."""
    return q.float() @ k.float().T


def gather_rows_reference(src, index, out) -> None:
    """gather_rows_spec written into `out` [T, W] (the oracle of exercise 135)."""
    out.copy_(gather_rows_spec(src, index))


def scale_columns_reference(x, w, out) -> None:
    """scale_columns_spec written into `out` [M, N] (the oracle of exercise 135)."""
    out.copy_(scale_columns_spec(x, w))


def row_softmax_reference(x, lengths, out) -> None:
    """row_softmax_spec written into `out` [R, C] (the oracle of exercise 135)."""
    out.copy_(row_softmax_spec(x, lengths))


def scores_reference(q, k, out) -> None:
    """scores_spec written into `out` [M, N] (the oracle of exercise 135)."""
    out.copy_(scores_spec(q, k))


# ----------------------------------------------------------------------------------------------------------
# kernels

@triton.jit
def _gather_rows_kernel(
    src_ptr,              # [R, W] rows src_stride apart, each row contiguous
    src_stride,           # elements between two rows of src (W, or more for a view)
    index_ptr,            # [T] int32 in [-1, R)
    out_ptr,              # [T, W] contiguous
    W,                    # a row's width (a runtime value)
    BLOCK: tl.constexpr,  # next power of two >= W
):
    t = tl.program_id(0)
    i = tl.load(index_ptr + t)                                        # read 1 index
    offs = tl.arange(0, BLOCK)                                        # [BLOCK]
    mask = offs < W
    row = tl.load(src_ptr + tl.maximum(i, 0).to(tl.int64) * src_stride + offs, mask=mask)  # read W
    row = tl.where(i >= 0, row, 0.0)                                  # index -1: a row of zeros
    tl.store(out_ptr + t.to(tl.int64) * W + offs, row, mask=mask)     # write W


@triton.jit
def _scale_columns_kernel(
    x_ptr,                  # [M, N] any strides
    stride_xm,              # elements between x[i, j] and x[i + 1, j]
    stride_xn,              # elements between x[i, j] and x[i, j + 1]
    w_ptr,                  # [N] contiguous
    out_ptr,                # [M, N] contiguous
    M,
    N,
    BLOCK_M: tl.constexpr,  # rows per tile
    BLOCK_N: tl.constexpr,  # columns per tile
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)         # [BLOCK_M]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)         # [BLOCK_N]
    mask = (rows[:, None] < M) & (cols[None, :] < N)                  # [BLOCK_M, BLOCK_N]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask)  # [BLOCK_M, N]
    w = tl.load(w_ptr + cols, mask=cols < N)                          # [BLOCK_N]
    y = x.to(tl.float32) * w.to(tl.float32)[None, :]                  # exact in fp32, rounded once on store
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_softmax_kernel(
    x_ptr,                # [R, C] rows x_stride apart, each row contiguous
    x_stride,             # elements between two rows of x
    lengths_ptr,          # [R] int32 in [0, C]
    out_ptr,              # [R, C] contiguous
    C,                    # columns of out (a runtime value)
    BLOCK: tl.constexpr,  # columns per step
):
    r = tl.program_id(0).to(tl.int64)
    n = tl.load(lengths_ptr + r)                                      # this row's length, read from memory
    offs = tl.arange(0, BLOCK)                                        # [BLOCK]
    m = float("-inf")                                                 # running max
    total = 0.0                                                       # running sum of exp(x - m)
    for start in range(0, n, BLOCK):                                  # pass 1: max and sum, online
        x = tl.load(x_ptr + r * x_stride + start + offs, mask=start + offs < n, other=float("-inf"))
        x = x.to(tl.float32)                                          # [BLOCK]; masked lanes -inf
        m_new = tl.maximum(m, tl.max(x, axis=0))                      # finite: the chunk has a lane < n
        total = total * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    m = tl.where(n > 0, m, 0.0)                                       # n = 0: no lane is inside below;
    total = tl.maximum(total, 1.0)                                    # (n > 0: total >= exp(0) already)
    for start in range(0, C, BLOCK):                                  # pass 2: write every column
        inside = start + offs < n
        x = tl.load(x_ptr + r * x_stride + start + offs, mask=inside, other=float("-inf")).to(tl.float32)
        p = tl.where(inside, tl.exp(x - m) / total, 0.0)              # [BLOCK]
        tl.store(out_ptr + r * C + start + offs, p.to(out_ptr.dtype.element_ty), mask=start + offs < C)


@triton.jit
def _scores_kernel(
    q_ptr,                  # [M, D] any strides
    stride_qm,
    stride_qd,
    k_ptr,                  # [N, D] any strides
    stride_kn,
    stride_kd,
    out_ptr,                # [M, N] float32 contiguous
    M,
    N,
    D,
    BLOCK_M: tl.constexpr,  # >= M and >= 16 (tl.dot)
    BLOCK_N: tl.constexpr,  # keys per program (>= 16)
    BLOCK_D: tl.constexpr,  # >= D and >= 16
):
    offs_m = tl.arange(0, BLOCK_M)                                    # [BLOCK_M]
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)       # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)                                    # [BLOCK_D]
    q = tl.load(q_ptr + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                mask=(offs_m[:, None] < M) & (offs_d[None, :] < D), other=0.0)   # [BLOCK_M, BLOCK_D]
    k = tl.load(k_ptr + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=(offs_n[:, None] < N) & (offs_d[None, :] < D), other=0.0)   # [BLOCK_N, BLOCK_D]
    s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))          # [BLOCK_M, BLOCK_N] fp32
    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], s,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# ----------------------------------------------------------------------------------------------------------
# launchers: check, then launch

def _check_out(out: torch.Tensor, shape: tuple, dtype: torch.dtype, device) -> None:
    if tuple(out.shape) != shape or out.dtype != dtype or not out.is_contiguous() or out.device != device:
        raise ValueError(f"out: expected a contiguous {str(dtype)[6:]} tensor of shape {shape} on {device}, "
                         f"got {str(out.dtype)[6:]} {tuple(out.shape)} strides {out.stride()} on "
                         f"{out.device}")


def _check_rows_contiguous(name: str, t: torch.Tensor) -> None:
    if t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(f"{name}: expected each row contiguous (stride(1) == 1), got strides {t.stride()}")


def gather_rows_triton(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> None:
    """out[t] = src[index[t]] (zeros for index -1), in place, one program per output row."""
    check_tensor("src", src, ndim=2, dtypes=FLOATS)
    check_tensor("index", index, ndim=1, dtypes=(torch.int32,))
    _check_rows_contiguous("src", src)
    _check_out(out, (index.shape[0], src.shape[1]), src.dtype, src.device)
    T, W = out.shape
    if T and W:
        _gather_rows_kernel[(T,)](src, src.stride(0), index, out, W, BLOCK=triton.next_power_of_2(W))


def scale_columns_triton(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, block_m: int = 16,
                         block_n: int = 32) -> None:
    """out[i, j] = x[i, j] * w[j], in place; x may be any strided view (transposed, sliced)."""
    check_tensor("x", x, ndim=2, dtypes=FLOATS)
    check_tensor("w", w, ndim=1, dtypes=(x.dtype,))
    if w.shape[0] != x.shape[1] or not w.is_contiguous():
        raise ValueError(f"w: expected a contiguous [{x.shape[1]}] tensor, got {tuple(w.shape)} "
                         f"strides {w.stride()}")
    _check_out(out, tuple(x.shape), x.dtype, x.device)
    M, N = x.shape
    if M and N:
        grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
        _scale_columns_kernel[grid](x, x.stride(0), x.stride(1), w, out, M, N, BLOCK_M=block_m,
                                    BLOCK_N=block_n)


def row_softmax_triton(x: torch.Tensor, lengths: torch.Tensor, out: torch.Tensor, block: int = 32) -> None:
    """Row r of out: softmax of x[r, :lengths[r]], then zeros; in place, one program per row."""
    check_tensor("x", x, ndim=2, dtypes=FLOATS)
    check_tensor("lengths", lengths, ndim=1, dtypes=(torch.int32,))
    _check_rows_contiguous("x", x)
    if lengths.shape[0] != x.shape[0]:
        raise ValueError(f"lengths: expected [{x.shape[0]}] (one per row of x), got {tuple(lengths.shape)}")
    _check_out(out, tuple(x.shape), x.dtype, x.device)
    R, C = x.shape
    if R and C:
        _row_softmax_kernel[(R,)](x, x.stride(0), lengths, out, C, BLOCK=block)


def scores_triton(q: torch.Tensor, k: torch.Tensor, out: torch.Tensor, block_n: int = 32) -> None:
    """out = q @ k^T in fp32, in place, by tl.dot on tiles of at least 16 in every dimension."""
    check_tensor("q", q, ndim=2, dtypes=HALF_FLOATS)
    check_tensor("k", k, ndim=2, dtypes=(q.dtype,))
    if k.shape[1] != q.shape[1]:
        raise ValueError(f"k: expected [N, {q.shape[1]}] like q's head_dim, got {tuple(k.shape)}")
    _check_out(out, (q.shape[0], k.shape[0]), torch.float32, q.device)
    (M, D), N = q.shape, k.shape[0]
    if M and N:
        block_m = max(DOT_MIN, triton.next_power_of_2(M))
        block_d = max(DOT_MIN, triton.next_power_of_2(D))
        _scores_kernel[(triton.cdiv(N, block_n),)](q, q.stride(0), q.stride(1), k, k.stride(0), k.stride(1),
                                                  out, M, N, D, BLOCK_M=block_m, BLOCK_N=block_n,
                                                  BLOCK_D=block_d)


# ----------------------------------------------------------------------------------------------------------
# the GPU's tl.dot rule, in the interpreter

@contextlib.contextmanager
def gpu_dot_rule(minimum: int = DOT_MIN):
    """Inside the block, Triton's interpreter refuses a `tl.dot` with M, N or K under `minimum` (16), the
    portable rule: NVIDIA GPUs required it of every dimension up to triton 3.4 and still require K >= 16 for
    16-bit inputs (triton 3.5 and later pad small M and N themselves), and the interpreter itself did up to
    3.2. Since 3.3 the interpreter accepts any size, so a tile that works on a CPU can fail on a GPU; this
    makes the CPU as strict as the strictest GPU. Yields [the number of tl.dot calls the interpreter made
    inside the block so far]; None, and no check, where the interpreter has no such hook (older triton: the
    rule is built in) and natively."""
    from triton.runtime import interpreter

    fns = getattr(getattr(interpreter, "interpreter_builder", None), "codegen_fns", None)
    if not backend.is_interpreted() or not isinstance(fns, dict) or "min_dot_size" not in fns:
        yield None
        return
    before, dots = fns["min_dot_size"], [0]

    def min_dot_size(lhs_type, rhs_type):
        dots[0] += 1                                  # the interpreter asks once per tl.dot it runs
        return (minimum, minimum, minimum)

    fns["min_dot_size"] = min_dot_size
    try:
        yield dots
    finally:
        fns["min_dot_size"] = before
