# %% [markdown]
# # 02 · Block pool and block tables
#
# A paged cache is a pool of fixed-size physical blocks plus, for each request, a block table listing which
# physical block holds each of its logical blocks. After this notebook you can build the pool (a free queue
# and a reference count per block, the shape of vLLM's `BlockPool`), predict which blocks it hands out after
# any mix of allocations and frees, turn a block table into slots, and argue for a block size: what it costs
# in waste, table length and prefix sharing, and what the attention kernels accept.

# %% [markdown]
# ## Self-test
#
# 1. A pool of 8 blocks, all free. A = `allocate(3)`, B = `allocate(2)`, `free(A)`, C = `allocate(4)`.
#    Which blocks does C get?
# 2. Two blocks are free and a request asks for three. What does `allocate(3)` do?
# 3. Why do freed blocks go to the END of the free queue rather than the front?
# 4. Why is nano-vllm's block size 256 while vLLM's default is 16?
# 5. Give one advantage and one drawback each of block sizes 1, 16 and 256.
#
# <details><summary>Answer</summary>
#
# 1. `[5, 6, 7, 0]`. A took 0, 1, 2 and B took 3, 4; the queue was then 5, 6, 7, and freeing A appended
#    0, 1, 2 behind them. C takes four from the front.
# 2. It returns `None` and changes nothing: no block is taken, so there is nothing to undo. A partial
#    allocation would leave a request holding blocks it cannot use.
# 3. A freed block keeps its contents. With prefix caching (notebook 07) a later request may still hit it, so
#    the pool reuses the blocks freed longest ago first (LRU order), as vLLM does.
# 4. Each follows the paged attention kernel it calls. Upstream FlashAttention-2 accepts a paged cache only
#    with a block size that is a multiple of 256; vLLM uses its own FlashAttention fork, which requires a
#    multiple of 16.
# 5. **1**: nothing wasted at the end of a request and prefixes shared to the token, but one table entry per
#    token, reads scattered row by row, and only some kernels accept it (FlashInfer, FlashAttention-3).
#    **16**: at most 15 idle slots per request and short enough tables, vLLM's default; prefixes are shared
#    in steps of 16 tokens. **256**: short tables and long contiguous reads, what upstream FlashAttention-2
#    requires, but up to 255 idle slots per request, prefix sharing in steps of 256 tokens, and every swap or
#    transfer moves 256-token blocks.
#
# </details>

# %% [markdown]
# ## 1. A free queue and reference counts
#
# The pool owns blocks `0 .. num_blocks - 1`. It keeps them in a queue of free blocks and gives each block a
# reference count: how many block tables hold it.
#
# ```
# allocate(n): take n blocks from the FRONT of the free queue, each with ref 1   (None if fewer than n free)
# free(blocks): one reference less each; a block reaching 0 goes to the END of the free queue
#
# free queue  front -> [3] [4] [5] [6] [7] <- end          ref: 0:1 1:1 2:1 3:0 4:0 ...
# ```
#
# The self-test's script, worked by hand on a pool of 8 blocks:
#
# ```
# call              returns          free queue afterwards, front first
# A = allocate(3)   [0, 1, 2]        3 4 5 6 7
# B = allocate(2)   [3, 4]           5 6 7
# free(A)                            5 6 7 0 1 2        0, 1, 2 join at the END, behind 5 6 7
# C = allocate(4)   [5, 6, 7, 0]     1 2                four from the front
# D = allocate(3)   None             1 2                two free, three asked: nothing moves
# free(B)                            1 2 3 4
# ```
#
# The library's `BlockPool`, run on the same script and checked against the table line by line:

# %%
import pagedkv_lib as pk

by_hand = [  # (call, table, n, what it returns, the free queue afterwards): the table above
    ("allocate", "A", 3, [0, 1, 2], [3, 4, 5, 6, 7]), ("allocate", "B", 2, [3, 4], [5, 6, 7]),
    ("free", "A", 0, None, [5, 6, 7, 0, 1, 2]), ("allocate", "C", 4, [5, 6, 7, 0], [1, 2]),
    ("allocate", "D", 3, None, [1, 2]), ("free", "B", 0, None, [1, 2, 3, 4])]
pool, tables = pk.BlockPool(8), {}
for op, name, n, returns, queue in by_hand:
    if op == "allocate":
        got = tables[name] = pool.allocate(n)
    else:
        got = pool.free(tables[name])
    assert got == returns and list(pool.free_block_ids) == queue
    print(f"{op:8s} {name}: returns {str(got):12s} free queue {queue}")
assert pool.ref_counts == [1, 0, 0, 0, 0, 1, 1, 1]  # only C's four blocks are held

# %% [markdown]
# D's `allocate(3)` found two free blocks and returned `None`, and the queue did not move: a partial
# allocation would leave a request holding blocks it cannot use. An engine's pool also refuses a double free:
# freeing a block with no reference left raises `ValueError` before anything changes, and a list that names a
# block twice drops two of its references (section 4 tries it).

# %% [markdown]
# ## 2. From block table to slots
#
# C's block table is `[5, 6, 7, 0]`: logical block 0 is physical block 5, and so on. With blocks of 4 tokens,
# the token at position `p` is in logical block `p // 4` at offset `p % 4`, so its slot (its row in the
# cache viewed as `[num_blocks * block_size, ...]`) is
#
# ```
# slot = block_table[p // block_size] * block_size + p % block_size
#
# position  0  1  2  3 | 4  5  6  7 | 8  9 10 11 |12 13
# block     5          | 6          | 7          | 0
# slot     20 21 22 23 |24 25 26 27 |28 29 30 31 | 0  1
# ```

# %%
C, block_size = tables["C"], 4
slots = [C[p // block_size] * block_size + p % block_size for p in range(14)]
assert slots == pk.slot_mapping_for(C, list(range(14)), block_size)
print("block table", C)
print("slots of positions 0..13:", slots)

# %% [markdown]
# Positions 12 and 13 land in slots 0 and 1: block 0 was A's, freed and then reused for C's fourth block.
# Logical order and physical order have nothing to do with each other, and nothing needs them to.
#
# ## 3. The picture
#
# The same script, one row per step. Each square is a physical block coloured by its owner; an allocated block
# shows `owner[logical index]`, a free one `q<k>`, its place in the free queue (`q0` is handed out next).

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import block_map

frames = block_map.pool_frames(8, block_map.WORKED_EXAMPLE)
fig, axes = plt.subplots(len(frames), 1, figsize=(5.5, 7), dpi=80)
for ax, frame in zip(axes, frames):
    block_map.draw_block_map(ax, frame.owners, labels=frame.labels, title=frame.description)
fig.tight_layout()
plt.show()

# %% [markdown]
# Step through it. **step** applies the next call, **back** undoes one; the line above the blocks gives the
# call, the free queue and the tables.

# %%
stepper = block_map.BlockMapStepper(frames)
print(stepper.describe(4))
stepper.widget

# %% [markdown]
# ## 4. Sharing a block
#
# A reference count larger than 1 means several block tables hold the block: two requests with the same system
# prompt (prefix caching, notebook 07) or the samples of one prompt (fork, notebook 08). `fork` copies a table
# and adds one reference per block; a block returns to the queue only when its last holder frees it.

# %%
pool = pk.BlockPool(4)
parent = pool.allocate(2)
child = pool.fork(parent)
print("parent", parent, "child", child, "refs", [pool.ref_count(b) for b in parent], "free", pool.num_free())
pool.free(parent)
print("parent done: refs", [pool.ref_count(b) for b in child], "free", pool.num_free())
pool.free(child)
print("child done:  refs", [pool.ref_count(b) for b in child], "free", pool.num_free())
try:
    pool.free(child)
except ValueError as err:
    print("freeing again:", err)

# %% [markdown]
# ## 5. Choosing the block size
#
# Five things move with it, in opposite directions:
#
# - **Internal fragmentation** grows: about `(block_size - 1) / 2` wasted slots per request (notebook 01).
# - **Table length** shrinks: `ceil(context / block_size)` entries per request, each an int32 the kernel loads
#   before it can read the block.
# - **Kernel efficiency** grows up to a point: a block is a contiguous run of `block_size` rows, and longer
#   runs mean fewer table lookups and larger loads per lookup.
# - **Prefix sharing** gets coarser: only FULL blocks are cached and shared, so a shared prompt is reused in
#   multiples of `block_size` tokens.
# - **Transfers** get coarser too: swapping a preempted request out to CPU memory, offloading blocks to a
#   slower tier, or sending KV from a prefill instance to a decode instance moves whole blocks. Big blocks
#   mean few large copies, the last one partly empty; small blocks mean many small copies, each with its own
#   overhead.

# %%
from pagedkv_lib.studies.workload import make_workload, utilization_paged

requests, prompt = make_workload(), 1000  # a 1000-token system prompt shared by many requests
print("block size | utilization | table entries, 4096 tokens | shareable tokens of the prompt")
for bs in (1, 16, 64, 256):
    util, entries, shared = utilization_paged(requests, bs), -(-4096 // bs), prompt // bs * bs
    print(f"{bs:10d} | {util:11.1%} | {entries:26d} | {shared:6d}")

# %% [markdown]
# In practice the choice is made for you by the attention kernel. What each accepts (sources in the last
# column; file paths are in the repositories named):
#
# | kernel or engine | block size | source |
# |---|---|---|
# | FlashAttention-2, upstream | a multiple of 256 | [1] |
# | nano-vllm | 256 (asserts `% 256 == 0`) | `nanovllm/config.py`; it calls FlashAttention-2 |
# | vLLM | 16 by default, a multiple of 16 | its FlashAttention fork [2] |
# | FlashAttention-3 | any | [3] |
# | FlashMLA (DeepSeek's MLA decode) | 64 | [4] |
# | FlashInfer | any, including 1 | [5] |
# | SGLang | 1 by default | [6] |
#
# 1. `Dao-AILab/flash-attention`, `csrc/flash_attn/flash_api.cpp:613` (varlen) and `:1305` (kvcache):
#    `TORCH_CHECK(page_block_size % 256 == 0)`.
# 2. `vllm-project/flash-attention`, `csrc/flash_attn/flash_api.cpp:637, 1372` check `% 16`; vLLM's ROCm
#    path (Composable Kernel) needs `% 128`.
# 3. `hopper/flash_attn_interface.py`: "page_block_size can be arbitrary (e.g, 1, 2, 3, 64, etc.)"; the
#    faster TMA path is used only when `page_size % kBlockN == 0` (`hopper/flash_api.cpp:423`).
# 4. `deepseek-ai/FlashMLA`, README: "Paged kvcache with block size of 64".
# 5. `flashinfer-ai/flashinfer:docs/tutorials/kv_layout.rst`: a batch's pages are `kv_indptr`,
#    `kv_page_indices` and `kv_last_page_len` with `0 < last_page_len <= page_size`, for any `page_size`.
# 6. `sgl-project/sglang`, `page_size` in `python/sglang/srt/server_args.py`: one token per page unless a
#    backend needs more, so its radix tree shares prefixes token by token.
#
# You will read that "FlashAttention's paged KV cache needs a block size that is a multiple of 16". That is
# true of vLLM's fork only [2]. Upstream FlashAttention-2 checks a multiple of 256 [1] (which is why
# nano-vllm's blocks hold 256 tokens), and FlashAttention-3 takes any size [3].
#
# A block size of 1 is the extreme: no internal fragmentation and prefix sharing to the token, at the cost of
# one table entry per token. It works for FlashInfer because it prefetches page indices into shared memory;
# FlashInfer's own measurements show page size having "little effect" on its decode kernel.
#
# SGLang has no per-request block table at all but two mappings (`python/sglang/srt/mem_cache/memory_pool.py`
# in `sgl-project/sglang`): `ReqToTokenPool` maps each request's positions to token slots, a tensor
# `req_to_token [max_requests, max_context_len]`, and an allocator of the `TokenToKVPoolAllocator` family
# (`mem_cache/allocator/`) hands out and takes back slots of `MHATokenToKVPool`, which holds each layer's K
# and V as one row per slot. At page size 1, a row of `req_to_token` is this notebook's block table.
#
# ## Exercises
#
# **127 · Block pool, fork and copy-on-write · medium, the pool.** In `practice/127_block_pool_cow.py`, write
# `BlockPool` with `num_free`, `ref_count`, `allocate`, `free` and `fork`, to the contract of this notebook:
# blocks leave from the front of the free queue, each with one reference; `allocate` returns `None` and
# changes nothing when too few are free; a block whose last reference is freed joins the end; freeing a
# block with no reference left raises `ValueError`; `fork` returns a new list and adds one reference per
# block. The exercise's second half, `append_slot` (copy-on-write), comes with notebook 08: leave its stub.
# Grade it with
#
#     python practice/judge.py 127
#
# The judge grades both halves: with a correct pool and `append_slot` still a stub, the six cases that use
# only the pool pass and the others report *not implemented*. Or solve it here: fill in the class below and
# run the cell; `judge(127)` grades the names defined in this notebook on the same hidden cases.

# %%
from pagedkv_lib.judge import judge


class BlockPool:
    def __init__(self, num_blocks):
        raise NotImplementedError  # your code here

    def num_free(self):
        raise NotImplementedError

    def ref_count(self, block):
        raise NotImplementedError

    def allocate(self, n):
        raise NotImplementedError

    def free(self, blocks):
        raise NotImplementedError

    def fork(self, block_table):
        raise NotImplementedError


result = judge(127)

# %% [markdown]
# ## In real systems
#
# - **vLLM** (`vllm/v1/core/block_pool.py`): `BlockPool` pops block 0 at start-up as the `null_block`, never
#   freed, which stands in for skipped blocks; the free queue is `FreeKVCacheBlockQueue`
#   (`vllm/v1/core/kv_cache_utils.py`), a doubly linked list through the blocks themselves with O(1)
#   `popleft`, `remove` and `append` (batched `popleft_n` / `append_n` since PR #21222). `get_new_blocks` pops
#   from the front and sets `ref_cnt`; `free_blocks` decrements and appends blocks reaching 0. A request's
#   blocks are freed in reverse order, so its last blocks are reused first and its prefix survives longest.
# - **nano-vllm** (`nanovllm/engine/block_manager.py`): `free_block_ids` is a `deque(range(num_blocks))`,
#   `used_block_ids` a set, and each `Block` has a `ref_count`; `deallocate` walks `reversed(block_table)`.
# - **PyTorch**'s experimental `PagedAttention` (`torch/nn/attention/experimental/_paged_attention.py`) keeps
#   `empty_pages` as a Python list used as a stack and has no reference counts: no sharing.
# - **Bugs that shipped**: in vLLM #1556 (fixed by PR #3347), `fork` added one reference per table entry
#   rather than one per distinct block, and sliding-window tables listing a block twice were freed twice.
#   In #42571 (PRs #42612, #42615) a block passed twice to `free_blocks` was queued twice and corrupted the
#   linked list. The invariant worth a test: when nothing runs, every block except vLLM's null block is free.
# - **Cache layouts differ.** The course's `kv_cache [2, L, N, S, H_kv, D]` is nano-vllm's. vLLM's
#   FlashAttention backend long used `(2, num_blocks, block_size, num_kv_heads, head_size)`; recent versions
#   pack K and V into the last dimension, `(num_blocks, num_kv_heads, block_size, 2 * head_size)`. vLLM
#   describes every backend's cache in one logical order (layers, blocks, heads, tokens, content) and lets
#   `KVCacheLayout` (`vllm/v1/kv_cache_layout.py`) choose the order in memory, per backend. So moving KV from
#   a prefill instance to a decode instance (PD disaggregation) needs a layout conversion when the two differ
#   (vLLM PR #26556). Sources: `docs/engines.md`, section "Cache layouts, and why moving KV between
#   instances needs a conversion".
#
# ## Say it in the interview
#
# A paged KV cache is a pool of fixed-size blocks with a free queue and a reference count per block, plus one
# block table per request mapping its logical blocks to physical ones. Allocation takes blocks from the front
# of the queue and is all or nothing; a block whose count drops to zero goes to the back, so recently freed
# blocks, which may still be prefix-cache hits, are reused last. A token's slot is
# `block_table[p // block_size] * block_size + p % block_size`. The block size trades internal
# fragmentation and the granularity of prefix sharing, swapping and transfers against table length and
# kernel efficiency, and in practice the attention kernel decides: 256 for upstream FlashAttention-2, 16 in
# vLLM, 64 for FlashMLA, anything for FlashInfer and FlashAttention-3.
