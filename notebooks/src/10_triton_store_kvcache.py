# %% [markdown]
# # 10 · Triton: `store_kvcache`
#
# Notebook 03 wrote this step's keys and values into the paged cache with one PyTorch indexing call. Engines
# do it with a small Triton kernel (nano-vllm's `store_kvcache_kernel`, vLLM's `reshape_and_cache_flash` in
# CUDA). Notebook 09 taught the pieces (programs and the grid, masks, strides, puzzle 1's masked row copy by
# an index); here they make one kernel. After this notebook you can write it: say what each program owns,
# what it reads and writes, compute its addresses from strides, mask a row whose length is not a power of
# two, skip the padding slot -1, check it against the PyTorch version, and say how fast it can possibly be.

# %% [markdown]
# ## Self-test
#
# 1. A step stores T = 9 tokens, with 2 KV heads of head_dim 4. How many programs does the kernel launch,
#    and how many numbers does each one read and write?
# 2. `key` is a view into the fused projection `qkv [T, (H + 2 H_kv) D]` with H = 32, H_kv = 8, D = 128. What
#    is `key.stride(0)`, and why must the kernel be told?
# 3. With 3 KV heads of head_dim 5, a token's row has 15 numbers. Why can the kernel not use
#    `tl.arange(0, 15)`, and what does it do instead?
# 4. What happens if the kernel does not skip a slot of -1?
# 5. Storing 32,768 tokens of a bf16 layer with 8 KV heads of 128: how many bytes move, and what is the best
#    possible time at 4.27 TB/s?
# 6. `slot_mapping` is int32 and every slot fits in it. Why must the kernel still compute `slot * ROW` in
#    int64?
#
# <details><summary>Answer</summary>
#
# 1. One program per token: 9 programs. Each reads 8 numbers of `key` and 8 of `value` (2 heads x 4) and
#    writes them into one row of `k_cache` and one of `v_cache`.
# 2. `(32 + 2 * 8) * 128 = 6144`: consecutive tokens' keys are 6144 elements apart, not 8 x 128 = 1024. A
#    kernel gets raw pointers, so it computes every address itself from the strides it is given.
# 3. `tl.arange` needs a power of two. The kernel uses `BLOCK = 16` lanes and a mask `offs < 15`, so the 16th
#    lane neither loads nor stores (without it, it would write the first number of the next slot's row).
# 4. It writes row -1: the `ROW` elements just before `k_cache`, memory that belongs to something else (in
#    PyTorch, index -1 would instead overwrite the cache's LAST row). Padded batches (CUDA graphs) use -1.
# 5. K and V, each read once and written once: `2 x 2 x 32768 x 8 x 128 x 2 B = 268.4 MB`, plus 4 bytes of
#    slot per token: 268.6 MB in all. The floor is 268.6 MB / 4.27 TB/s = 63 us; the H200 measured 69.6 us
#    (section 6).
# 6. The product is computed in int32 too, and `slot * ROW` passes `2**31 - 1` on a large cache (with 8 KV
#    heads of 128, from slot 2,097,152 on): the row lands at a negative offset, before the cache. Widen first,
#    `slot.to(tl.int64) * ROW` (section 4).
#
# </details>

# %% [markdown]
# ## 1. What the kernel does, and who does what
#
# A Triton kernel is a function that many **programs** run at once, each with its own `tl.program_id(0)`. For
# `store_kvcache` the natural split is one program per token: program `t` copies token t's K row and V row
# (`ROW = H_kv x D` numbers each) into the cache row of its slot. No two programs touch the same row (slots
# are distinct), so they need no coordination.
#
# ```
# key   [T, H_kv, D]       program t reads  key[t]   = ROW numbers  ----+
# value [T, H_kv, D]       program t reads  value[t] = ROW numbers  --+ |
#                                                                     | v
# k_cache viewed as [N * S, ROW]:  row slot_mapping[t]  <-------------|-+   slot -1: write nothing
# v_cache viewed as [N * S, ROW]:  row slot_mapping[t]  <-------------+
# ```
#
# The kernel sees pointers, not tensors. Element `i` of token t's key row is at
# `key_ptr + t * key.stride(0) + i`, and element `i` of the cache row of `slot` at
# `k_cache_ptr + slot * ROW + i` (the cache is contiguous). The interpreter runs the same code on the CPU, one
# program after another.

# %%
from pagedkv_lib.kernels import backend  # first: on a CPU it sets TRITON_INTERPRET=1 before triton's import

dev = backend.device()  # cpu in the interpreter, cuda on a GPU
print("Triton kernels run:", "in the interpreter (CPU)" if backend.is_interpreted() else "natively (GPU)")

import inspect

import torch
import triton
import triton.language as tl

import pagedkv_lib as pk

# %% [markdown]
# ## 2. A first kernel
#
# This is nano-vllm's kernel, almost word for word. It assumes what nano-vllm's launcher asserts: each token's
# row is contiguous and rows are `ROW` apart, and `ROW` is a power of two, so it needs no mask (notebook 09's
# masks come back in section 4, where those assumptions fail). `tl.arange(0, ROW)` is a vector of
# offsets `[0, 1, ..., ROW-1]`, so one `tl.load` reads a whole row and one `tl.store` writes it.

# %%
@triton.jit
def store_v0(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr, ROW: tl.constexpr):
    t = tl.program_id(0)  # this program's token
    slot = tl.load(slot_mapping_ptr + t)  # one int32: where token t goes
    offs = tl.arange(0, ROW)  # [ROW] offsets within a row
    key = tl.load(key_ptr + t * ROW + offs)  # [ROW] read token t's keys
    value = tl.load(value_ptr + t * ROW + offs)  # [ROW]
    tl.store(k_cache_ptr + slot * ROW + offs, key)  # write cache row `slot`
    tl.store(v_cache_ptr + slot * ROW + offs, value)


def nan_caches(num_blocks, block_size, H_kv, D, dtype=torch.float32):
    k_cache = torch.full((num_blocks, block_size, H_kv, D), float("nan"), dtype=dtype, device=dev)
    return k_cache, k_cache.clone()  # [N, S, H_kv, D] each, NaN: never written


S, H_kv, D = 4, 2, 4
slot_mapping = torch.tensor([28, 29, 30, 31, 8, 9, 20, 21, 22], dtype=torch.int32, device=dev)  # notebook 03
T = len(slot_mapping)
gen = torch.Generator().manual_seed(0)
key, value = (torch.randn(T, H_kv, D, generator=gen).to(dev) for _ in range(2))  # [T, H_kv, D] contiguous
k_cache, v_cache = nan_caches(8, S, H_kv, D)
store_v0[(T,)](key, value, k_cache, v_cache, slot_mapping, ROW=H_kv * D)  # grid: T programs
k_ref, v_ref = nan_caches(8, S, H_kv, D)
pk.store_kvcache(key, value, k_ref, v_ref, slot_mapping)
print("same caches as pk.store_kvcache:", torch.equal(k_cache.nan_to_num(), k_ref.nan_to_num())
      and torch.equal(v_cache.nan_to_num(), v_ref.nan_to_num()))

# %% [markdown]
# What each program did, in element offsets from the start of each tensor (`ROW = 8`):

# %%
ROW = H_kv * D
for t in (0, 4, 8):
    slot = int(slot_mapping[t])
    print(f"program {t}: token {t} -> slot {slot} (block {slot // S}, offset {slot % S}): reads key "
          f"{t * ROW}..{t * ROW + ROW - 1}, writes k_cache {slot * ROW}..{slot * ROW + ROW - 1}")

# %% [markdown]
# ## 3. Strides: `key` and `value` are views into `qkv`
#
# The model computes q, k and v with one matrix multiply, `qkv [T, (H + 2 H_kv) D]`, and takes `key` and
# `value` as column slices of it. They are views: no copy, but consecutive tokens are `(H + 2 H_kv) D`
# elements apart, not `ROW`. `store_v0` assumes `ROW` and reads the wrong numbers:

# %%
H = 4
qkv = torch.randn(T, (H + 2 * H_kv) * D, generator=gen).to(dev)  # [T, (H + 2 H_kv) D]
key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)  # [T, H_kv, D], a view
value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)  # [T, H_kv, D], a view
print("key.stride():", key.stride(), " contiguous:", key.is_contiguous(), " ROW:", ROW)

k_cache, v_cache = nan_caches(8, S, H_kv, D)
store_v0[(T,)](key, value, k_cache, v_cache, slot_mapping, ROW=ROW)
rows = k_cache.view(-1, ROW)[slot_mapping.long()]  # [T, ROW] what landed in the slots
print("tokens stored correctly by store_v0:", [t for t in range(T) if torch.equal(rows[t], key[t].flatten())])

# %% [markdown]
# Only token 0 is right: program t read `key_ptr + t * 8`, but token t's keys start at `key_ptr + t * 32`
# (program 1 copied token 0's values, program 2 part of token 1's queries). The fix is to pass
# `key.stride(0)` and `value.stride(0)` as arguments and use them in the address.
#
# ## 4. Masks, and skipping -1
#
# Two more things separate a teaching kernel from one an engine can call.
#
# - **Rows that are not a power of two.** `tl.arange` needs a power of two; with 3 KV heads of 5 a row has 15
#   numbers. Use `BLOCK = triton.next_power_of_2(ROW)` lanes and a mask `offs < ROW`: masked-off lanes neither
#   load nor store. Without the mask, lane 15 writes the first number of the NEXT slot's row.
# - **Slot -1.** Padded tokens get slot -1 and must write nothing. Unchecked, `slot * ROW = -ROW`: the kernel
#   writes the `ROW` elements just before the cache.
#
# To see the second one, put the cache in the middle of a bigger buffer, with a guard block of NaN on each
# side (the judge does the same), and give `store_v0` a padding token:

# %%
def guarded_caches(num_blocks, block_size, H_kv, D):
    """Caches that are views into buffers with one NaN block before and after them."""
    bufs = [torch.full((num_blocks + 2, block_size, H_kv, D), float("nan"), device=dev) for _ in range(2)]
    return bufs, [b[1:-1] for b in bufs]  # the caches: [N, S, H_kv, D], contiguous


def guard_damage(buf):
    """How many guard elements (outside the cache) are no longer NaN, before and after it."""
    return int((~buf[0].isnan()).sum()), int((~buf[-1].isnan()).sum())


key_c, value_c = key.contiguous(), value.contiguous()  # [T, H_kv, D]
padded = torch.tensor([28, 29, -1, 31, 8, 9, 20, -1, 22], dtype=torch.int32, device=dev)
bufs, (k_cache, v_cache) = guarded_caches(8, S, H_kv, D)
store_v0[(T,)](key_c, value_c, k_cache, v_cache, padded, ROW=ROW)
print("store_v0 with two -1 slots: guard elements written (before, after) =", guard_damage(bufs[0]))

# %% [markdown]
# Eight elements before the cache were overwritten, one row's worth (both padding tokens wrote row -1). On a
# GPU that memory belongs to another tensor: a silent corruption, or an illegal-address crash.
#
# So a kernel an engine can call needs three fixes to `store_v0`; writing it is exercise 130:
#
# - **Views into `qkv`**: `store_v0` read token t at `t * ROW`. The kernel takes each row stride as an
#   argument and uses it in the load address.
# - **A row of 15 numbers**: `tl.arange(0, 15)` does not compile. The kernel runs
#   `BLOCK = triton.next_power_of_2(ROW)` lanes and masks every load and store with `offs < ROW`.
# - **Slot -1**: `store_v0` wrote the row before the cache. The kernel stores nothing for a negative slot
#   (nano-vllm returns early).
#
# Two more details: compute `slot * ROW` in int64 (below), and let the launcher check that each token's row is
# contiguous (`key.stride(2) == 1`, `key.stride(1) == D`) before it launches one program per token.
#
# **Why int64.** `slot_mapping` is int32, and Triton computes `slot * ROW` in the type of its operands: int32,
# which wraps past `2**31 - 1`. A cache whose offsets pass that (enough slots of a wide row: the cell prints
# how many) then sends the last slots' rows to a negative offset, before the cache. `slot.to(tl.int64) * ROW`
# widens first, so the product is exact. The kernel below also shows an early `return`: a program whose slot
# is -1 (padding) leaves before it writes anything. It stores each token's offset computed both ways:

# %%
@triton.jit
def row_offsets(slot_mapping_ptr, off32_ptr, off64_ptr, ROW: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + t)  # int32, as engines store the slot mapping
    if slot < 0:  # padding: this program returns at once and writes nothing
        return
    tl.store(off32_ptr + t, slot * ROW)  # int32 * int32: wraps past 2**31 - 1
    tl.store(off64_ptr + t, slot.to(tl.int64) * ROW)  # widened first: exact


ROW_WIDE = 8 * 128  # 8 KV heads of 128: one slot's row
first_wrapping = 2**31 // ROW_WIDE  # the first slot whose row starts at 2**31 elements or more
slots = torch.tensor([5, -1, first_wrapping - 1, first_wrapping, 3_000_000], dtype=torch.int32, device=dev)
off32 = torch.full((5,), -7, dtype=torch.int32, device=dev)  # -7: not written
off64 = torch.full((5,), -7, dtype=torch.int64, device=dev)
row_offsets[(5,)](slots, off32, off64, ROW=ROW_WIDE)
want = torch.where(slots >= 0, slots.long() * ROW_WIDE, -7)  # PyTorch, in int64; -7 where skipped
print(f"ROW = {ROW_WIDE}: offsets wrap from slot {first_wrapping:,} on, a cache of "
      f"{first_wrapping * ROW_WIDE * 2 / 2**30:.0f} GiB of bf16 keys")
for slot, a, b in zip(slots.tolist(), off32.tolist(), off64.tolist()):
    print(f"  slot {slot:>9,}: int32 offset {a:>14,}   int64 offset {b:>14,}")
print("int64 offsets equal PyTorch's slot * ROW:", torch.equal(off64, want),
      "| int32 offsets do:", torch.equal(off32.long(), want))

# %% [markdown]
# The library's kernel has these fixes (`pagedkv_lib.kernels.triton_store_kvcache`). Here it is in the three
# situations that broke `store_v0`, checked against `pk.store_kvcache` (the caches compared with NaN equal
# to NaN), with the guards watched:

# %%
from pagedkv_lib.kernels import store_kvcache_triton as library_store_kvcache


def check_store(H_kv, D, slots, strided, block_size=4, num_blocks=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    T, H = len(slots), 2
    qkv = torch.randn(T, (H + 2 * H_kv) * D, generator=g).to(dev)  # [T, (H + 2 H_kv) D]
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)  # [T, H_kv, D] views
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)
    if not strided:
        key, value = key.contiguous(), value.contiguous()
    slot_mapping = torch.tensor(slots, dtype=torch.int32, device=dev)
    bufs, (k_cache, v_cache) = guarded_caches(num_blocks, block_size, H_kv, D)
    library_store_kvcache(key, value, k_cache, v_cache, slot_mapping)
    k_ref, v_ref = nan_caches(num_blocks, block_size, H_kv, D)
    pk.store_kvcache(key, value, k_ref, v_ref, slot_mapping)
    same = all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in ((k_cache, k_ref), (v_cache, v_ref)))
    return same, guard_damage(bufs[0]), guard_damage(bufs[1])


print("qkv views, ROW 8:        same, guards (k), guards (v) =", check_store(2, 4, [28, 29, 30, 31, 8], True))
print("ROW 15, last slot 31:    same, guards (k), guards (v) =", check_store(3, 5, [31, 0, 17], True))
print("slot -1 twice:           same, guards (k), guards (v) =", check_store(2, 4, [28, -1, 3, -1], False))

# %% [markdown]
# ## 5. The library's kernel, checked
#
# Besides the kernel (`_store_kvcache_kernel`), the module has a launcher that first validates shapes, dtypes,
# devices and the row layout (`store_kvcache_triton`), and an unchecked `launch_store_kvcache` for timing and
# CUDA graphs. Their source opens once your own kernel passes (after the exercise). Checked against the
# PyTorch version, in whatever mode this machine runs Triton: block sizes 4, 16 and 256, fp32, fp16 and bf16,
# contiguous rows and qkv views, padding slots, a random permutation of slots.

# %%
def compare_library(block_size, dtype, strided, seed):
    g = torch.Generator().manual_seed(seed)
    T, H, H_kv, D = 40, 4, 2, 8
    num_blocks = -(-2 * T // block_size)  # room for twice the tokens
    qkv = torch.randn(T, (H + 2 * H_kv) * D, generator=g).to(dtype).to(dev)  # [T, (H + 2 H_kv) D]
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)
    if not strided:
        key, value = key.contiguous(), value.contiguous()
    slots = torch.randperm(num_blocks * block_size, generator=g)[:T]  # [T] distinct
    slots[torch.rand(T, generator=g) < 0.2] = -1
    slot_mapping = slots.to(torch.int32).to(dev)
    (k1, v1), (k2, v2) = (nan_caches(num_blocks, block_size, H_kv, D, dtype) for _ in range(2))
    library_store_kvcache(key, value, k1, v1, slot_mapping)
    pk.store_kvcache(key, value, k2, v2, slot_mapping)
    return all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in ((k1, k2), (v1, v2)))


for bs in (4, 16, 256):
    equal = [f"{str(dt)[6:]}{' views' if st else ''} {compare_library(bs, dt, st, seed=bs)}"
               for dt in (torch.float32, torch.float16, torch.bfloat16) for st in (False, True)]
    print(f"block size {bs:3d}, equal to pk.store_kvcache: {', '.join(equal)}")

# %% [markdown]
# ## 6. How fast can it be?
#
# `store_kvcache` computes nothing: it moves bytes. Each stored token's K and V rows are read once and written
# once, `2 x 2 x ROW x dtype bytes`, plus 4 bytes of slot. So the only honest yardstick is the machine's own
# copy bandwidth: a device-to-device copy of a large buffer, counting bytes read plus bytes written, measured
# in the same run. On an H200 (bf16, 8 KV heads of 128, key/value as views into qkv, block size 16):

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz import bench_findings, roofline

stored = results.load("store_kvcache_h200.json")
print(roofline.store_table(stored))
print(bench_findings.store_findings(stored))

# %% [markdown]
# Small steps are bound by the launch and the first memory round trip, whatever their size; only from
# thousands of tokens on does the kernel approach the copy rate. The PyTorch version (`index_put`) stays far
# below it: it builds index tensors and launches several kernels. In a decode step the store moves one token's
# K/V per sequence, while attention then reads every token of every context, so the store is the small part.
# The same data as a roofline: a point on the line would be as fast as a copy.

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.6), dpi=80)
roofline.plot_roofline(roofline.store_points(stored), stored["copy_gbs"], roofline.STORE_METHODS, ax=ax,
                       title="store_kvcache on an H200 (stored figures)")
plt.show()

# %% [markdown]
# On a machine with a CUDA GPU the next cell runs the benchmark again (`benchmarks/bench_store_kvcache.py`,
# about a minute) and prints the same table for it; elsewhere it says so.

# %%
# NBVAL_IGNORE_OUTPUT
# (on a GPU this cell prints fresh timings, which change from run to run)
if torch.cuda.is_available():
    live = results.run_live("bench_store_kvcache.py", "store_kvcache_h200.json")
    print(roofline.store_table(live))
else:
    print("no GPU: showing stored H200 figures")

# %% [markdown]
# ## Exercises
#
# **130 · Triton store_kvcache · medium.** In `practice/130_triton_store_kvcache.py`, write the kernel and its
# launcher `store_kvcache_triton(key, value, k_cache, v_cache, slot_mapping)`: exercise 124's contract, one
# program per token. The judge runs your kernel in Triton's interpreter on small cases (rows of 15 numbers,
# qkv views, padding slots, caches between guard blocks), and natively on a GPU on larger ones, where
# `--bench` compares your GB/s with the library kernel's:
#
#     python practice/judge.py 130
#     python practice/judge.py 130 --device cuda --bench      # on a machine with a GPU
#
# Or solve it here: write your kernel and launcher below and run the cell; `judge(130)` grades
# `store_kvcache_triton` from this notebook on the same hidden cases, in Triton's interpreter (until you do,
# it reports *not implemented*). On a GPU machine this notebook's Triton was imported for the GPU: save your
# code to `practice/130_*.py` and grade it there with `--device cuda`.
#
# **A note on masks in the interpreter.** If you fold the -1 test into the mask instead of returning early,
# Triton 3.9's interpreter (on the CPU) rejects `mask=(offs < ROW) & (slot >= 0)` with "mask has
# unsupported dtype": `slot >= 0` is a scalar, and a scalar combined with a block of lanes is not a mask it
# accepts (`tl.broadcast_to` does not help either). Triton 3.0's interpreter and the GPU compiler accept
# it. Compare a block instead, `(offs < ROW) & (slot + 0 * offs >= 0)`, or return before any store when
# `slot < 0`: both work everywhere.

# %%
from pagedkv_lib.judge import judge


def store_kvcache_triton(key, value, k_cache, v_cache, slot_mapping):
    raise NotImplementedError  # your code here: launch your kernel, one program per token


result = judge(130)

# %% [markdown]
# Once your kernel passes, `show_reference(130)` prints the PyTorch version it is graded against, and the cell
# prints the library's Triton kernel and launcher too (until then it says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference
from pagedkv_lib.kernels import triton_store_kvcache as library_store

if show_reference(130):
    print(inspect.getsource(library_store._store_kvcache_kernel.fn))
    print(inspect.getsource(library_store.launch_store_kvcache))

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/layers/attention.py`): `store_kvcache_kernel(key_ptr, key_stride, value_ptr,
#   value_stride, k_cache_ptr, v_cache_ptr, slot_mapping_ptr, D: tl.constexpr)`, grid `(N,)`, `if slot == -1:
#   return`, `cache_offsets = slot * D + tl.arange(0, D)` with `D = num_kv_heads * head_dim`, which must
#   therefore be a power of two. The launcher asserts `key.stride(-1) == 1`, `key.stride(1) == head_dim` and
#   passes `key.stride(0)`, because k and v are views into the fused qkv. The model stores K/V first, then
#   runs attention on the cache.
# - **vLLM** writes the cache in CUDA (`reshape_and_cache_flash` in `csrc/cache_kernels.cu`), one thread block
#   per token, skipping `slot_idx < 0` ("slot_idx can be -1 if the token is padded"); its slot mapping is
#   int64.
# - **CUDA graphs**: a decode batch is padded up to a captured size; the padding tokens get slot -1 (and
#   context length 0), which is why the skip is not optional.
#
# ## Say it in the interview
#
# `store_kvcache` is a scatter: one Triton program per token loads the token's K and V rows, `H_kv x head_dim`
# numbers each, and stores them at `slot x row` in the cache viewed as `[num_blocks x block_size, row]`. The
# kernel gets pointers, so it needs the row stride of key and value (they are views into the fused qkv
# projection), a power-of-two lane count with a mask when the row is not a power of two, and an early return
# for slot -1, the padding slot, which would otherwise write just before the cache. It moves
# `2 x 2 x row x dtype` bytes per token and computes nothing, so I judge it against the copy bandwidth: on an
# H200 it reaches about 90% at 32k tokens and is launch-bound for small decode steps.
