# %% [markdown]
# # 09 · Triton primer
#
# Notebooks 10-12 write the course's kernels in Triton. This notebook teaches the pieces they are made of,
# one small kernel at a time, in Triton's interpreter on the CPU. After it you can launch a grid of
# programs, build offsets with `tl.arange`, load and store 1-D and 2-D tiles with masks and `other=`, pick
# lanes with `tl.where`, reduce with `tl.max` and `tl.sum` (a 1-D tile, or a 2-D tile along one axis), loop
# to a bound that is only known at run time, tell a `tl.constexpr` from a runtime argument, address any
# strided view (a transposed or sliced tensor), multiply tiles with `tl.dot` and `tl.trans` (in fp32 with
# `input_precision="ieee"`, and every dimension at least 16), gather a `[BLOCK_N, D]` tile through a block
# table while keeping a running max (`tl.full`, `tl.zeros`, `tl.maximum`), print from inside a kernel, and
# solve the four puzzles of exercise 135, which lead straight to exercise 130.

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
# 6. A kernel keeps a running max `m` of a `[BLOCK_N, D]` tile's rows over a loop. How does it start `m`, and
#    which of `tl.max` and `tl.maximum` does each step need?
# 7. Both operands of a `tl.dot` are fp32. What does `input_precision="ieee"` change on a GPU, and why does a
#    kernel graded at a tolerance of 1e-4 need it?
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
# 5. `tl.dot` runs on tensor cores, whose instructions work on fixed tiles. The course's rule: every
#    dimension (M, N and K) of every tl.dot is at least 16: what every supported Triton (3.0 to 3.9) compiles
#    on a GPU; pad the tile (BLOCK = max(16, next power of two)) and mask the padding. So the 4 rows become 16
#    and the extra 12 are masked (section 7).
# 6. `m = tl.full([BLOCK_D], float("-inf"), tl.float32)` before the loop (-inf: any real value beats it, and
#    a tile of masked lanes leaves it alone). Each step reduces the tile with `tl.max(tile, axis=0)` and
#    merges that into the running value lane by lane with `tl.maximum(m, ...)` (section 8).
# 7. By default an fp32 dot may run in tf32, which keeps 10 bits of each input's mantissa: products are off
#    by about 1e-3 relative. `input_precision="ieee"` makes it a true fp32 dot (section 7).
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
right = torch.equal(out, x16 * 2)  # PyTorch's bf16 x * 2: exact here, a power of two
print(f"bf16 x * 2, computed in fp32: {out.tolist()} ({'right' if right else 'wrong'})")

# %%
# NBVAL_IGNORE_OUTPUT
# (what bf16 arithmetic gives depends on the installed Triton, and on the device)
times_two[(1,)](x16, out, IN_FP32=False)
right = torch.equal(out, x16 * 2)
print(f"bf16 x * 2, computed in bf16 by triton {triton.__version__} on {dev}: {out.tolist()} "
      f"({'right' if right else 'wrong'})")

# %% [markdown]
# Each line says whether it matches PyTorch's `x * 2`. On a GPU both are right; in an interpreter with the
# bf16 bug the second is wrong, and computing in fp32 is what every course kernel does.
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
# A reduction of a 2-D tile names its axis: `tl.max(t, axis=1)` of a `[BLOCK_M, BLOCK_N]` tile is a
# `[BLOCK_M]` vector, one value per row (`axis=0`: one per column), as `t.amax(dim=1)` in PyTorch. A decode
# kernel takes the max and the sum of each query head's row of scores this way. The masked lanes get the
# value that is neutral for the reduction (`-inf` for the max, 0 for the sum), here on the 37 x 21 view `x`,
# one tile:

# %%
@triton.jit
def row_max_and_sum(x_ptr, stride_0, stride_1, max_ptr, sum_ptr, M, N, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)  # [BLOCK_M]
    cols = tl.arange(0, BLOCK_N)  # [BLOCK_N]
    mask = (rows[:, None] < M) & (cols[None, :] < N)  # [BLOCK_M, BLOCK_N]
    offs = rows[:, None] * stride_0 + cols[None, :] * stride_1  # [BLOCK_M, BLOCK_N]
    t = tl.load(x_ptr + offs, mask=mask, other=float("-inf"))  # [BLOCK_M, BLOCK_N] -inf where masked
    tl.store(max_ptr + rows, tl.max(t, axis=1), mask=rows < M)  # [BLOCK_M] one max per row
    tl.store(sum_ptr + rows, tl.sum(tl.where(mask, t, 0.0), axis=1), mask=rows < M)  # [BLOCK_M]


row_max, row_sum = torch.empty(M, device=dev), torch.empty(M, device=dev)  # [M] each
row_max_and_sum[(1,)](x, *x.stride(), row_max, row_sum, M, N, BLOCK_M=64, BLOCK_N=32)
print("tl.max(t, axis=1) equals x.amax(dim=1):", torch.equal(row_max, x.amax(dim=1)),
      "| tl.sum(t, axis=1) equals x.sum(dim=1):", torch.equal(row_sum, x.sum(dim=1)))

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
# instructions multiply fixed tiles (on NVIDIA GPUs `mma` with 16 rows and K = 16 for fp16 and bf16), and
# Triton's NVIDIA back end states the smallest dot it compiles (`min_dot_size` in
# `third_party/nvidia/backend/compiler.py`). The course's one rule:
#
# > every dimension (M, N and K) of every tl.dot is at least 16: what every supported Triton (3.0 to 3.9)
# > compiles on a GPU; pad the tile (BLOCK = max(16, next power of two)) and mask the padding.
#
# A GQA group of 4 query heads is padded to 16 rows and the 12 extra rows are masked. Triton's interpreter
# (since 3.3) accepts a dot of any size, so a tile that passes on a CPU can fail to compile on a GPU;
# `primer.gpu_dot_rule()` makes the interpreter apply the rule, as the judge does for every Triton exercise:

# %%
@triton.jit
def group_scores(q_ptr, k_ptr, out_ptr, M, N, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows, keys, dims = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + dims[None, :], mask=rows[:, None] < M, other=0.0)  # [BLOCK_M, D]
    k = tl.load(k_ptr + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N, other=0.0)  # [BLOCK_N, D]
    s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")  # [BLOCK_M, BLOCK_N]
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
# **fp32 operands, and `input_precision`.** The kernel above converts its tiles to fp32 first and asks for
# `input_precision="ieee"`. Without it, a GPU runs an fp32 `tl.dot` in tf32, which keeps 10 of the 23 bits
# of each input's mantissa: fast, but the products are off by about 1e-3 relative, well past what the judge
# allows in fp32 (1e-4). `input_precision="ieee"` asks for a true fp32 dot (the interpreter computes one
# either way).
# Here is the error tf32 would make, found in PyTorch by cutting the inputs' mantissas to 10 bits, next to
# the ieee dot of the interpreter:

# %%
@triton.jit
def dot_ieee(a_ptr, b_ptr, out_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)  # [BLOCK]
    offs = rows[:, None] * BLOCK + rows[None, :]  # [BLOCK, BLOCK]
    a = tl.load(a_ptr + offs)  # [BLOCK, BLOCK] fp32
    b = tl.load(b_ptr + offs)  # [BLOCK, BLOCK] fp32
    tl.store(out_ptr + offs, tl.dot(a, b, input_precision="ieee"))  # [BLOCK, BLOCK] a true fp32 dot


def to_tf32(t):
    """t with each fp32 mantissa cut to tf32's 10 bits (rounded to nearest), as a GPU's tf32 dot reads it."""
    bits = t.view(torch.int32)  # the same 32 bits as integers
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)  # round, then clear the low 13 bits


a = torch.randn(16, 16, generator=gen).to(dev)  # [16, 16]
b = torch.randn(16, 16, generator=gen).to(dev)  # [16, 16]
exact = (a.double() @ b.double()).float()  # [16, 16] the fp32 answer
out = torch.empty(16, 16, device=dev)
dot_ieee[(1,)](a, b, out, BLOCK=16)
tf32_error = ((to_tf32(a).double() @ to_tf32(b).double()).float() - exact).abs().max().item()
print(f"ieee dot: within 1e-4 of the exact product: {torch.allclose(out, exact, rtol=1e-4, atol=1e-4)}; "
      f"a tf32 dot would be off by up to {tf32_error:.0e}")

# %% [markdown]
# A dot's result is a tile like any other, so it can feed the next dot: `tl.dot(p, v)` multiplies a
# `[BLOCK_M, BLOCK_N]` tile computed in the kernel by a `[BLOCK_N, D]` tile it loaded, and every dimension of
# that second dot (M, N and K = BLOCK_N) is at least 16 too. Give both operands one dtype
# (`p.to(v.dtype)`, or both in fp32).

# %% [markdown]
# ## 8. A tile gathered through a block table, with a running max
#
# The last piece is the one a paged attention kernel is built on: read a sequence's keys from the paged cache
# `[N, S, H_kv, D]` a tile of `BLOCK_N` positions at a time, each position's row found through the block
# table, and keep a value that runs over the tiles. Here the value is the max of each of the D features over
# the sequence's keys (and their sum), one program per sequence and KV head. What is new:
#
# - **Float tiles that live across the loop**: `tl.full([BLOCK_D], float("-inf"), tl.float32)` and
#   `tl.zeros([BLOCK_D], tl.float32)` make them before it. A value carried by a loop keeps its shape and
#   dtype from one step to the next, so give it both at the start (fp32, whatever the cache's dtype).
# - **`tl.max(tile, axis=0)` then `tl.maximum(m, ...)`**: the first reduces a `[BLOCK_N, BLOCK_D]` tile to
#   one max per feature, the second merges two tiles lane by lane (`torch.maximum`). `tl.max` of a single
#   tile would forget the tiles before.
# - **The gather**: the table entry of position `tok` is `block_tables[seq, tok // BLOCK_SIZE]`, its cache
#   row `slot = block * BLOCK_SIZE + tok % BLOCK_SIZE`, and its KV head `j` starts at element
#   `(slot * H_kv + j) * D`. The positions past the context are masked in both loads: the table holds -1
#   there, and block -1 is memory before the cache. The slot is computed in int64 (notebook 10 says why).
# - **An early `return`**: a padded sequence of context 0 has nothing to read; its program returns before it
#   writes anything (its output row keeps what was there).

# %%
@triton.jit
def key_max_and_sum(k_cache_ptr, block_tables_ptr, context_lens_ptr, max_ptr, sum_ptr, table_stride,
                    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    context_len = tl.load(context_lens_ptr + seq)
    if context_len == 0:  # a padded sequence: nothing to read, nothing to write
        return
    offs_n = tl.arange(0, BLOCK_N)  # [BLOCK_N]
    offs_d = tl.arange(0, BLOCK_D)  # [BLOCK_D]
    d_mask = offs_d < HEAD_DIM
    m = tl.full([BLOCK_D], float("-inf"), tl.float32)  # [BLOCK_D] running max of each feature
    total = tl.zeros([BLOCK_D], tl.float32)  # [BLOCK_D] running sum
    for start in range(0, context_len, BLOCK_N):
        tok = start + offs_n  # [BLOCK_N] positions in the sequence
        in_ctx = tok < context_len
        block = tl.load(block_tables_ptr + seq * table_stride + tok // BLOCK_SIZE, mask=in_ctx, other=0)
        slot = block.to(tl.int64) * BLOCK_SIZE + tok % BLOCK_SIZE  # [BLOCK_N] cache rows, int64
        offs = (slot * NUM_KV_HEADS + kv_head)[:, None] * HEAD_DIM + offs_d[None, :]  # [BLOCK_N, BLOCK_D]
        mask = in_ctx[:, None] & d_mask[None, :]  # [BLOCK_N, BLOCK_D]
        k = tl.load(k_cache_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)  # [BLOCK_N, BLOCK_D]
        m = tl.maximum(m, tl.max(k, axis=0))  # [BLOCK_D] this tile merged into the running max
        total += tl.sum(tl.where(mask, k, 0.0), axis=0)  # [BLOCK_D]
    out = (seq * NUM_KV_HEADS + kv_head) * HEAD_DIM + offs_d  # [BLOCK_D]
    tl.store(max_ptr + out, m, mask=d_mask)
    tl.store(sum_ptr + out, total, mask=d_mask)


# %% [markdown]
# Three sequences of 13, 40 and 5 tokens at block size 4, 2 KV heads of 24 features (`BLOCK_D = 32`), tiles of
# 16 positions, in a cache whose other rows are NaN; a fourth, padded sequence has context 0. The check is
# PyTorch on each sequence's own keys (kept by `make_paged_batch` before it scattered them into the cache):

# %%
import pagedkv_lib as pk

batch = pk.make_paged_batch([13, 40, 5], 4, 2, 2, 24, seed=1, device=dev, extra_padding=1)
tables = torch.cat([batch.block_tables, torch.full_like(batch.block_tables[:1], -1)])  # [4, M] a padded row
context_lens = torch.cat([batch.context_lens, torch.zeros_like(batch.context_lens[:1])])  # [4] last: 0
B, H_kv, D = 4, 2, 24
key_max = torch.full((B, H_kv, D), -7.0, device=dev)  # -7: not written
key_sum = torch.full((B, H_kv, D), -7.0, device=dev)
key_max_and_sum[(B, H_kv)](batch.k_cache, tables, context_lens, key_max, key_sum, tables.stride(0),
                           NUM_KV_HEADS=H_kv, HEAD_DIM=D, BLOCK_SIZE=4, BLOCK_N=16, BLOCK_D=32)
for b, keys in enumerate(batch.keys):  # keys: [n, H_kv, D]
    print(f"sequence {b} ({keys.shape[0]:2d} tokens): max equals keys.amax(0): "
          f"{torch.equal(key_max[b], keys.amax(0))}, sum close to keys.sum(0): "
          f"{torch.allclose(key_sum[b], keys.sum(0), atol=1e-5)}")
print("sequence 3 (context 0): untouched:", bool((key_max[3] == -7).all() and (key_sum[3] == -7).all()))

# %% [markdown]
# Exercise 131 reads its K and V tiles exactly this way; what it adds is notebook 11's: scores from a
# `tl.dot`, the running sum and the accumulator rescaled whenever the running max grows.
#
# ## 9. The puzzles of exercise 135
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
# Once your launchers pass, `show_reference(135)` prints the library's own kernels and launchers
# (`pagedkv_lib.kernels.triton_primer`), to compare with yours (until then it says what to do first); the
# PyTorch specs they are graded against are the ones printed above:

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(135)  # True once it printed them

# %% [markdown]
# ## In real systems
#
# - **Triton's tutorials** (`triton-lang/triton:python/tutorials/01-vector-add.py`, `02-fused-softmax.py`,
#   `03-matrix-multiplication.py`) teach the same steps: a masked 1-D block, one program per row with
#   `other=-float("inf")`, 2-D tiles from strides and a `tl.dot` loop. Sasha Rush's Triton-Puzzles set the
#   rhythm of section 9: a spec, a kernel, a check.
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
