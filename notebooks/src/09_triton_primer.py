# %% [markdown]
# # 09 · Triton primer
#
# Notebooks 10-12 write the course's kernels in Triton. This notebook teaches the pieces they are made of,
# one small kernel at a time, in Triton's interpreter on the CPU. After it you can launch a grid of
# programs, build offsets with `tl.arange`, load and store 1-D and 2-D tiles with masks and `other=`, pick
# lanes with `tl.where`, reduce with `tl.max` and `tl.sum`, loop to a bound that is only known at run time,
# tell a `tl.constexpr` from a runtime argument, address any strided view (a transposed or sliced tensor),
# multiply tiles with `tl.dot` and `tl.trans` (and say why a tile has at least 16 rows), print from inside a
# kernel, and solve the four puzzles of exercise 135, which lead straight to exercise 130.

# %% [markdown]
# ## Self-test
#
# 1. A kernel processes `BLOCK = 128` elements per program. How many programs cover `N = 1000` elements, and
#    what does the last one do with its extra lanes?
# 2. A masked `tl.load` without `other=` feeds `tl.max`. What can go wrong?
# 3. `x` is `y.T` for a contiguous `y` of shape `[21, 37]`. What are `x.stride(0)` and `x.stride(1)`, and why
#    must the kernel be told?
# 4. Why is `BLOCK` a `tl.constexpr` but a sequence's length a plain argument?
# 5. A GQA group has 4 query heads. Why does a kernel that multiplies them by a key tile with `tl.dot` use a
#    tile of 16 rows?
#
# <details><summary>Answer</summary>
#
# 1. `cdiv(1000, 128) = 8` programs; the last covers elements 896..1023, and its lanes 1000..1023 are masked
#    off (`offs < N`): they neither load nor store.
# 2. A masked-off lane's value is undefined (the interpreter gives 0). If every real score is negative, the
#    max becomes that 0, and `exp(x - max)` of very negative scores underflows to 0 (section 5). Load with
#    `other=float("-inf")`: a lane that is not there never wins the max and adds `exp(-inf) = 0` to a sum.
# 3. `(1, 37)`: stepping a row of `x` moves one element, stepping a column moves a whole row of `y`. A kernel
#    gets a pointer, not a tensor, so it computes every address from the strides it is given (section 6).
# 4. A constexpr is baked into the compiled kernel (a tile's shape must be known to compile it); a runtime
#    argument is not, so one compiled kernel serves every length (section 4).
# 5. `tl.dot` runs on tensor cores, whose instructions work on fixed tiles (16 rows for 16-bit inputs).
#    Triton up to 3.4 refuses a dot with M, N or K under 16 on NVIDIA GPUs (later versions still need
#    K >= 16), so the kernel pads the 4 rows to 16 and masks the extra 12 (section 7).
#
# </details>

# %% [markdown]
# ## 1. Programs and the grid
#
# A Triton kernel is a function that many **programs** run at once. The launch `kernel[grid](args)` names
# how many: `grid = (P,)` starts programs `0 .. P-1`, and each one asks `tl.program_id(0)` which it is. The
# usual split is one BLOCK of elements per program, so `P = cdiv(N, BLOCK)`:
#
# ```
# N = 10, BLOCK = 4, grid = (cdiv(10, 4),) = (3,)
# program 0: elements 0..3    program 1: elements 4..7    program 2: elements 8, 9 (lanes 10, 11 masked)
# offs = pid * BLOCK + tl.arange(0, BLOCK)      mask = offs < N
# ```
#
# On a GPU the programs run in parallel, one per streaming multiprocessor at a time or several; in the
# interpreter they run one after another as NumPy code. `pagedkv_lib.kernels.backend` picks the interpreter
# when there is no GPU: it must set `TRITON_INTERPRET=1` before `triton` is first imported, so it comes
# first. The kernel below stores its own program id into the elements it owns:

# %%
from pagedkv_lib.kernels import backend  # first: on a CPU it sets TRITON_INTERPRET=1 before triton's import

dev = backend.device()  # cpu in the interpreter, cuda on a GPU
print("Triton kernels run:", "in the interpreter (CPU)" if backend.is_interpreted() else "natively (GPU)")

import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch
import triton
import triton.language as tl

from pagedkv_lib.kernels import triton_primer as primer
from pagedkv_lib.viz.program_map import plot_program_map


@triton.jit
def who_wrote(out_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # [BLOCK] this program's elements
    tl.store(out_ptr + offs, tl.full([BLOCK], 0, tl.int32) + pid, mask=offs < N)


# %% [markdown]
# Launched over 10 elements with `BLOCK = 4`, then with a grid one program too small (`10 // 4` instead of
# `cdiv(10, 4)`, the classic off-by-one): the last two elements are never written.

# %%
for grid in (triton.cdiv(10, 4), 10 // 4):
    owner = torch.full((10,), -1, dtype=torch.int32, device=dev)  # -1: no program wrote it
    who_wrote[(grid,)](owner, 10, BLOCK=4)
    print(f"grid ({grid},): owner of each element {owner.tolist()}")

# %% [markdown]
# ## 2. Masked loads and stores, `other=`
#
# `tl.arange(0, BLOCK)` needs a power of two, so a row of 13 numbers takes 16 lanes and a **mask**: a masked
# load reads nothing for the lanes where the mask is False and gives them `other` (undefined if you leave it
# out); a masked store writes nothing there. The worked puzzle below adds two vectors of an awkward length.
# To see what a missing mask does, the output lies between two guard elements of NaN, as the judge's do.
# Puzzle 0, the worked one: `z[i] = x[i] + y[i]` for `i < N`.

# %%
def add_spec(x, y):
    """The spec: what the kernel must compute, in PyTorch."""
    return x + y


@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)  # read N elements in all
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(z_ptr + offs, x + y, mask=mask)  # write N


def add_triton(x, y, out, block=128):
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)


# %%
@triton.jit
def add_kernel_unmasked(x_ptr, y_ptr, z_ptr, N, BLOCK: tl.constexpr):  # BUGGY on purpose: no mask
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(z_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))


N = 1000
gen = torch.Generator().manual_seed(0)
x, y = (torch.randn(N + 128, generator=gen).to(dev)[:N] for _ in range(2))  # [N] each, 128 more behind
for kernel in (add_kernel, add_kernel_unmasked):
    buf = torch.full((N + 200,), float("nan"), device=dev)  # 100 guard elements on each side
    z = buf[100:-100]  # [N] the output, a view
    kernel[(triton.cdiv(N, 128),)](x, y, z, N, BLOCK=128)
    guards = int((~buf[:100].isnan()).sum() + (~buf[-100:].isnan()).sum())
    print(f"{kernel.__name__:20s} equal to add_spec: {torch.equal(z, add_spec(x, y))}, "
          f"guard elements written: {guards}")

# %% [markdown]
# Eight programs of 128 lanes cover 1,024 elements; without the mask the last one writes 24 elements past
# `z` (on a GPU, into whatever tensor lies there). Its loads also read 24 elements past `x` and `y`: here
# numbers we put there on purpose; in general garbage, or on a GPU an illegal-address fault.
#
# ## 3. Printing from a kernel, in the interpreter
#
# In the interpreter a kernel is Python, so `print` shows the NumPy values of each program as it runs;
# `tl.device_print("name", value)` prints on a GPU too (there the programs' lines interleave in no fixed
# order), and `tl.static_print` prints once, when the kernel is compiled. Here program 2 of the 10-element
# launch prints its offsets and its mask:

# %%
@triton.jit
def show_lanes(N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if pid == 2:
        tl.device_print("offs", offs)
        tl.device_print("mask", (offs < N).to(tl.int32))


show_lanes[(3,)](10, BLOCK=4)

# %% [markdown]
# Two things differ between the interpreter and a GPU, and every kernel of the course is written so that
# both give the same answer:
#
# - **bf16 arithmetic**: recent interpreters (triton 3.9 among them; 3.0's was right) keep bf16 values as
#   their 16 raw bits, and their arithmetic on them (`+`, `*`, `tl.dot`) is wrong. Convert first,
#   `x.to(tl.float32)`, and compute in fp32. They also round fp32 to bf16 toward zero where a GPU rounds to
#   nearest, so bf16 results agree to one bf16 step.
# - **`tl.dot` sizes**: the interpreter (since triton 3.3) accepts a dot of any shape; a GPU does not
#   (section 7).

# %%
x16 = torch.tensor([1.5, -2.25, 0.3, 7.0], dtype=torch.bfloat16, device=dev)


@triton.jit
def times_two(x_ptr, out_ptr, IN_FP32: tl.constexpr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    if IN_FP32:
        x = x.to(tl.float32)
    tl.store(out_ptr + offs, x * 2.0)


out = torch.zeros(4, dtype=torch.bfloat16, device=dev)
times_two[(1,)](x16, out, IN_FP32=True)
print(f"bf16 x * 2, computed in fp32: {out.tolist()}")

# %%
# NBVAL_IGNORE_OUTPUT
# (what bf16 arithmetic gives depends on the installed Triton, and on the device)
times_two[(1,)](x16, out, IN_FP32=False)
print(f"bf16 x * 2, computed in bf16 by triton {triton.__version__} on {dev}: {out.tolist()}")

# %% [markdown]
# (On a GPU both lines are right. In the interpreter the first is not.)
#
# ## 4. `tl.constexpr`, and a loop to a runtime bound
#
# An argument annotated `tl.constexpr` is part of the compiled kernel: `BLOCK`, tile shapes, flags such as
# `IN_FP32` above. Each new value compiles a new kernel (on a GPU; the interpreter compiles nothing). Every
# other argument is a **runtime value**: pointers, sizes, strides, and values loaded from memory. A loop
# `for start in range(0, n, BLOCK)` may run to a runtime `n`: one compiled kernel then serves every length,
# which is what a decode kernel needs, since each sequence's context length is only known on the GPU
# (`context_lens`). Here each program sums the first `lengths[r]` numbers of its row, a length it loads
# itself:

# %%
@triton.jit
def row_sums(x_ptr, x_stride, lengths_ptr, out_ptr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    n = tl.load(lengths_ptr + r)  # runtime: read from memory
    total = 0.0
    for start in range(0, n, BLOCK):  # as many steps as this row needs
        offs = start + tl.arange(0, BLOCK)  # [BLOCK]
        total += tl.sum(tl.load(x_ptr + r * x_stride + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(out_ptr + r, total)


x = torch.arange(3 * 50, dtype=torch.float32, device=dev).view(3, 50)  # [3, 50]
lengths = torch.tensor([0, 7, 50], dtype=torch.int32, device=dev)
out = torch.empty(3, device=dev)
row_sums[(3,)](x, x.stride(0), lengths, out, BLOCK=16)
print("row sums:", out.tolist(), " PyTorch:", [float(x[r, :n].sum()) for r, n in enumerate(lengths.tolist())])

# %% [markdown]
# ## 5. Reductions, `tl.where` and `other=` for a max
#
# `tl.max(t, axis=0)` and `tl.sum(t, axis=0)` reduce a tile along an axis (a 1-D tile to a scalar).
# `tl.where(cond, a, b)` picks per lane; `cond` may be a scalar too (`tl.where(i >= 0, row, 0.0)`). A masked
# lane must be neutral for the reduction that reads it: 0 for a sum, `-inf` for a max. Without `other=`, a
# row of negative scores gets a max of 0 in the interpreter (garbage on a GPU), and the softmax of scores near
# -250 then divides 0 by 0:

# %%
@triton.jit
def softmax_of_one_row(x_ptr, out_ptr, n, BLOCK: tl.constexpr, OTHER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if OTHER:
        x = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf"))
    else:
        x = tl.load(x_ptr + offs, mask=offs < n)  # BUGGY on purpose: masked lanes are not -inf
    m = tl.max(x, axis=0)
    p = tl.where(offs < n, tl.exp(x - m), 0.0)
    tl.store(out_ptr + offs, p / tl.sum(p, axis=0), mask=offs < n)


scores = -250.0 - torch.arange(5, dtype=torch.float32, device=dev)  # [5] all very negative
for other in (True, False):
    out = torch.empty(5, device=dev)
    with np.errstate(all="ignore"):  # the interpreter's NumPy would warn about the 0 / 0
        softmax_of_one_row[(1,)](scores, out, 5, BLOCK=8, OTHER=other)
    print(f"other={'-inf' if other else 'none':4s}: {[round(v, 4) for v in out.tolist()]}")
print("torch.softmax:", [round(v, 4) for v in torch.softmax(scores, 0).tolist()])

# %% [markdown]
# ## 6. 2-D tiles, and strides: how a view is described
#
# A 2-D tile is built from two 1-D ranges by broadcasting: `rows[:, None]` is a column, `cols[None, :]` a
# row, and `rows[:, None] * stride_0 + cols[None, :] * stride_1` a `[BLOCK_M, BLOCK_N]` block of offsets.
# Element `(i, j)` of any PyTorch tensor lies at `data_ptr + i * stride(0) + j * stride(1)` elements, and the
# strides are all a view is: a transposed tensor swaps them, a column slice keeps the parent's row stride:
#
# ```
# y = torch.empty(21, 37)     y.stride()        = (37, 1)
# y.T                         y.T.stride()      = (1, 37)     (same memory, no copy)
# y[:, 3:10]                  y[:, 3:10].stride() = (37, 1)   (starts 3 elements in)
# ```
#
# So a kernel that takes the strides as arguments reads any view correctly; one that assumes `i * N + j`
# reads the wrong numbers. Below, a 2-D grid of 16 x 16 tiles copies `y.T` both ways:

# %%
@triton.jit
def copy_2d(x_ptr, stride_0, stride_1, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BLOCK_N]
    mask = (rows[:, None] < M) & (cols[None, :] < N)  # [BLOCK_M, BLOCK_N]
    x = tl.load(x_ptr + rows[:, None] * stride_0 + cols[None, :] * stride_1, mask=mask)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], x, mask=mask)


y = torch.arange(21 * 37, dtype=torch.float32, device=dev).view(21, 37)  # [21, 37]
x = y.T  # [37, 21] a view, strides (1, 37)
M, N = x.shape
grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
for strides, label in ((x.stride(), "x.stride()"), ((N, 1), "assumed contiguous (N, 1)")):
    out = torch.full((M, N), float("nan"), device=dev)
    copy_2d[grid](x, *strides, out, M, N, BLOCK_M=16, BLOCK_N=16)
    print(f"strides {label:26s}: out equals x: {torch.equal(out, x)}")
print(f"x.stride() = {x.stride()}, grid = {grid}: {grid[0] * grid[1]} programs of 16 x 16")

# %% [markdown]
# Which program wrote which element of the 37 x 21 output (program ids numbered row by row of the grid;
# the last row and column of tiles are partly masked):

# %%
@triton.jit
def who_wrote_2d(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    pid = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    owner = tl.full([BLOCK_M, BLOCK_N], 0, tl.int32) + pid  # [BLOCK_M, BLOCK_N]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], owner, mask=mask)


owner = torch.full((M, N), -1, dtype=torch.int32, device=dev)
who_wrote_2d[grid](owner, M, N, BLOCK_M=16, BLOCK_N=16)
lanes = torch.full((grid[0] * 16, grid[1] * 16), float("nan"))  # [48, 32] every lane of every tile
lanes[:M, :N] = owner.cpu().float()  # the lanes outside the 37 x 21 output stay NaN: masked
fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=80)
plot_program_map(lanes, ax=ax, tile=(16, 16),
                 title="a 3 x 2 grid of 16 x 16 tiles over a 37 x 21 output; white lanes are masked")
plt.show()

# %% [markdown]
# ## 7. `tl.dot`, `tl.trans`, and why 16
#
# `tl.dot(a, b)` multiplies a `[M, K]` tile by a `[K, N]` tile and accumulates in fp32; `tl.trans(k)` turns a
# `[N, K]` tile of keys into `[K, N]`, so the scores of a few queries against a tile of keys are
# `tl.dot(q, tl.trans(k))`, which is what notebooks 11-12 compute. The dot runs on tensor cores, whose
# instructions multiply fixed tiles (on NVIDIA GPUs `mma` with 16 rows and K = 16 for fp16 and bf16, K = 8
# for tf32). Triton's NVIDIA back end (`min_dot_size` in `third_party/nvidia/backend/compiler.py`) therefore
# refused a dot with M, N or K under 16 up to triton 3.4; from 3.5 it pads small M and N itself and still
# needs K >= 16 (>= 8 for fp32 in 3.9); the interpreter demanded 16 everywhere up to 3.2 and nothing since
# 3.3. The portable rule, and the course's: every dimension of a dot at least 16. A GQA group of 4 query
# heads is padded to 16 rows (`BLOCK_M = max(16, next_power_of_2(M))`) and the 12 extra rows are masked.
# `primer.gpu_dot_rule()` makes the interpreter as strict as the strictest GPU, as the judge does:

# %%
@triton.jit
def group_scores(q_ptr, k_ptr, out_ptr, M, N, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows, keys, dims = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + dims[None, :], mask=rows[:, None] < M, other=0.0)  # [BLOCK_M, D]
    k = tl.load(k_ptr + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N, other=0.0)  # [BLOCK_N, D]
    s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)))  # [BLOCK_M, BLOCK_N]
    tl.store(out_ptr + rows[:, None] * N + keys[None, :], s, mask=(rows[:, None] < M) & (keys[None, :] < N))


q = torch.randn(4, 32, generator=gen).to(dev)  # [G = 4, D] the query heads of one KV head
k = torch.randn(20, 32, generator=gen).to(dev)  # [N, D] keys
for block_m in (16, 4):
    out = torch.zeros(4, 20, device=dev)
    try:
        with primer.gpu_dot_rule():
            group_scores[(1,)](q, k, out, 4, 20, D=32, BLOCK_M=block_m, BLOCK_N=32)
        print(f"BLOCK_M = {block_m:2d}: out matches q @ k.T: {torch.allclose(out, q @ k.T, atol=1e-5)}")
    except Exception as exc:  # each Triton words the rule its own way: say which rule it broke
        broke = "a dimension of the dot under 16" if "16" in str(exc) else str(exc)
        print(f"BLOCK_M = {block_m:2d}: refused by Triton: {broke}")

# %% [markdown]
# ## 8. The puzzles of exercise 135
#
# Four puzzles, each a few sentences, a formula, a PyTorch spec (`pagedkv_lib.kernels.triton_primer`), and
# the judge's cases as the check. Each launcher writes into an `out` it is given; the judge puts `out`
# between NaN guard rows and fills it with NaN, so a write past it and an element never written both show.
# Sizes are awkward on purpose (rows of 13, a 37 x 21 tile, rows of 150 with loops of 32).
#
# **Puzzle 1, `gather_rows_triton(src, index, out)`**: `out[t] = src[index[t]]`, a row of zeros where
# `index[t] = -1`. One program per output row; `src` may be a column slice of a wider tensor, so its rows are
# `src.stride(0)` apart. This is exercise 130's kernel turned around (130 scatters rows by slot, this
# gathers them by index): the row mask, the row stride and the padding value -1.

# %%
print(inspect.getsource(primer.gather_rows_spec))
src = torch.tensor([[1.0, 2, 3], [4, 5, 6]])
print("example:", primer.gather_rows_spec(src, torch.tensor([1, -1, 0], dtype=torch.int32)).tolist())

# %% [markdown]
# **Puzzle 2, `scale_columns_triton(x, w, out)`**: `out[i, j] = x[i, j] * w[j]` over a 2-D grid of tiles, for
# `x` of any strides (the judge passes a transposed view and a column slice). Compute in fp32.

# %%
print(inspect.getsource(primer.scale_columns_spec))

# %% [markdown]
# **Puzzle 3, `row_softmax_triton(x, lengths, out)`**: row r of `out` is the softmax of `x[r, :n]`,
# `n = lengths[r]`, then zeros; a row of length 0 is all zeros. Past `n`, `x` holds NaN and inf: never let
# them in. One program per row, looping over it in chunks to the bound it loads from `lengths`, with the
# running max and sum of notebook 11's online softmax:
#
# ```
# m' = max(m, max(chunk))     total' = total * exp(m - m') + sum(exp(chunk - m'))     out = exp(x - m) / total
# ```

# %%
print(inspect.getsource(primer.row_softmax_spec))
example = torch.tensor([[0.0, torch.log(torch.tensor(3.0)).item(), float("nan")]])
probs = primer.row_softmax_spec(example, torch.tensor([2]))  # [1, 3]
print("example:", [round(v, 4) for v in probs.flatten().tolist()])

# %% [markdown]
# **Puzzle 4, `scores_triton(q, k, out)`**: `out = q @ k^T` in fp32 for 1 to 16 query rows, by `tl.dot` and
# `tl.trans` on tiles of at least 16 in every dimension, `k` of any strides (the keys of one KV head of a
# cache, or a transposed view). Give `tl.dot` fp32 operands: every fp16 and bf16 value is exact in fp32 (and
# in a GPU's tf32), so the products stay exact, and the interpreter's bf16 dot is avoided.

# %%
print(inspect.getsource(primer.scores_spec))

# %% [markdown]
# With these four, exercise 130 (`store_kvcache` in Triton, notebook 10) is one more step: one program per
# token, a row mask, the row strides of `key` and `value`, and a slot of -1 that writes nothing.
#
# ## Exercises
#
# **135 · Triton primer puzzles · medium.** In `practice/135_triton_primer_puzzles.py`, write the four kernels
# and their launchers. The judge runs them in Triton's interpreter on small awkward cases (NaN guards around
# every output, POISON around every input, `-1` indices, empty rows, transposed views, the GPU's `tl.dot`
# rule), and natively on a GPU on larger ones:
#
#     python practice/judge.py 135
#     python practice/judge.py 135 --device cuda      # on a machine with a GPU
#
# Or solve them here: write your kernels and launchers below and run the cell; `judge(135)` grades the four
# launchers of this notebook in Triton's interpreter (until you do, it reports *not implemented*). On a GPU
# machine this notebook's Triton was imported for the GPU: save your code to `practice/135_*.py` and grade
# it there with `--device cuda`.

# %%
from pagedkv_lib.judge import judge


def gather_rows_triton(src, index, out):
    raise NotImplementedError  # your code here: one program per output row


def scale_columns_triton(x, w, out):
    raise NotImplementedError  # your code here: a 2-D grid of tiles


def row_softmax_triton(x, lengths, out):
    raise NotImplementedError  # your code here: one program per row, a loop to lengths[r]


def scores_triton(q, k, out):
    raise NotImplementedError  # your code here: tl.dot(q, tl.trans(k)) on tiles of >= 16


result = judge(135)

# %% [markdown]
# Once your launchers pass, `show_reference(135)` prints the PyTorch references they are graded against, and
# the cell prints the library's kernels too (until then it says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

if show_reference(135):
    for kernel in (primer._gather_rows_kernel, primer._scale_columns_kernel, primer._row_softmax_kernel,
                   primer._scores_kernel):
        print(inspect.getsource(kernel.fn))

# %% [markdown]
# ## In real systems
#
# - **Triton's tutorials** (`triton-lang/triton:python/tutorials/01-vector-add.py`, `02-fused-softmax.py`,
#   `03-matrix-multiplication.py`) teach the same steps: a masked 1-D block, one program per row with
#   `other=-float("inf")`, 2-D tiles from strides and a `tl.dot` loop. Sasha Rush's Triton-Puzzles set the
#   rhythm of section 8: a spec, a kernel, a check.
# - **nano-vllm** (`nanovllm/layers/attention.py`): `store_kvcache_kernel` is puzzle 1 turned around, one
#   program per token, `if slot == -1: return`, and the row stride passed because k and v are views into
#   the fused qkv projection.
# - **vLLM** (`vllm/attention/ops/triton_unified_attention.py`): the query heads of one KV head are packed
#   into the rows of one `tl.dot` tile, with a tile of at least 16 rows; its loops over KV tiles run to a
#   bound computed from the sequence length it loads, as in puzzle 3.
#
# ## Say it in the interview
#
# A Triton kernel is a program that a grid of instances runs; each takes its id from `tl.program_id`,
# builds its offsets with `tl.arange` (a power of two, so it masks the tail) and works on whole tiles: a
# masked load gives `other` where the mask is off, which must be neutral for what follows (0 for a sum,
# -inf for a max), and a masked store writes nothing. Addresses come from strides, so a transposed or sliced
# view works if the kernel is given its strides. Tile shapes are `tl.constexpr`s, compiled in; lengths are
# runtime values, so a loop can run to a length the kernel loads itself and one kernel serves every batch.
# `tl.dot` runs on tensor cores, so I pad every dimension of a dot tile to at least 16 and mask the padding.
# I test kernels in the interpreter on awkward sizes with guard memory around the outputs, knowing where it
# differs from a GPU (bf16 arithmetic, dot sizes).
