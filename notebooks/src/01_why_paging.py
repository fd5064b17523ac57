# %% [markdown]
# # 01 · Why paging
#
# Before vLLM, a serving system gave each request one contiguous stretch of KV memory, sized for the longest
# output it might produce. This notebook measures what that costs. After it you can compute the KV bytes per
# token of any model from its config, name the three wastes of a contiguous reservation (reservation, internal
# and external fragmentation), measure them on a workload (46.2% of the reserved memory used, against 93-100%
# with paging), and turn bytes into how many requests fit on one GPU.

# %%
import sys

if "google.colab" in sys.modules:  # Colab: fetch and install the course first
    import subprocess

    subprocess.run("git clone -q https://github.com/pagedkv-course/pagedkv-course /content/course"
                   " && pip install -q -e /content/course", shell=True, check=True)
    sys.path.insert(0, "/content/course")
from pagedkv_lib.environment import describe_environment

print(describe_environment())

# %% [markdown]
# ## Self-test
#
# 1. LLaMA-2-7B has 32 layers, 32 KV heads of dimension 128, and its cache is FP16. How many bytes per token?
# 2. Name the three ways a contiguous per-request reservation wastes KV memory.
# 3. With paging at block size 16, which waste remains, and how large is it per request on average?
# 4. A contiguous allocator has 3,000 free slots in total, but a 1,000-token request waits. How?
#
# <details><summary>Answer</summary>
#
# 1. `2 x 32 x 32 x 128 x 2 = 524,288` bytes, 512 KiB: a 4096-token reservation is 2 GiB.
# 2. Reservation (slots kept for tokens the request never produces), internal fragmentation (the unused end
#    of the last allocated chunk) and external fragmentation (free holes between allocations, each too small).
# 3. Only internal fragmentation: the unused tail of each request's last block, between 0 and 15 slots, about
#    7.5 on average. Nothing is reserved ahead and any free block fits anywhere, so there are no holes.
# 4. The free slots are split into holes of fewer than 1,000 slots each; a contiguous range needs one hole
#    large enough. Paging would take any 63 free blocks of 16.
#
# </details>

# %% [markdown]
# ## 1. KV bytes per token
#
# Every layer stores, for every token, one key and one value vector per KV head:
#
# ```
# bytes per token = 2 (K and V) x num_layers x num_kv_heads x head_dim x dtype_bytes
# ```
#
# The four numbers are in a model's `config.json`: `num_hidden_layers`, `num_key_value_heads`, `head_dim` (or
# `hidden_size / num_attention_heads`) and the dtype. Models with grouped-query attention (GQA) have fewer KV
# heads than query heads, and a proportionally smaller cache.

# %%
from pagedkv_lib.studies import memory


def kv_bytes(num_layers, num_kv_heads, head_dim, dtype_bytes):
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


for m in memory.MODELS.values():
    b = kv_bytes(m.num_layers, m.num_kv_heads, m.head_dim, m.dtype_bytes)
    assert b == memory.kv_bytes_per_token(m.num_layers, m.num_kv_heads, m.head_dim, m.dtype_bytes)
    print(f"{m.name:10s}  2 x {m.num_layers} x {m.num_kv_heads:2d} x {m.head_dim} x {m.dtype_bytes}"
          f" = {b:>7,} B = {b // memory.KiB:3d} KiB per token")

# %% [markdown]
# Per request, that becomes large fast. A system that reserves room for `max_len = 4096` tokens pays for all
# of them up front, whatever the request ends up using.

# %%
llama = memory.MODELS["LLaMA-2-7B"].bytes_per_token
qwen3 = memory.MODELS["Qwen3-0.6B"].bytes_per_token
print(f"LLaMA-2-7B, 4096 tokens reserved: {4096 * llama / memory.GiB:.0f} GiB per request")
print(f"  a request that uses 600 tokens wastes {1 - 600 / 4096:.0%} of its reservation")
print(f"Qwen3-0.6B, one block of 256 tokens (nano-vllm's default): {256 * qwen3 / memory.MiB:.0f} MiB")

# %% [markdown]
# ## 2. Three wastes
#
# A contiguous allocator gives request A one range of slots, then B the next, and so on. Each range is sized
# for the maximum length, because nobody knows when a request will stop:
#
# ```
# contiguous, max_len per request
# | A A A A A . . . . . . . | B B B . . . . . . . . . |  free  | C C C C C C . . . . . . |  free  |
#   used    reserved, never used (reservation)          hole: too small for the next request (external)
#
# paged, block size 4: any free block, in any order, only as many as needed
# [A A A A][B B B .][A . . .][C C C C][C C . .]  free  free  free  free ...
#                    ^ tail of the last block: the only waste left (internal fragmentation)
# ```
#
# The PagedAttention paper (Kwon et al., SOSP 2023, section 3) names these three: **reservation** (slots held
# for tokens not produced yet, or ever), **internal fragmentation** (the unused end of an allocation) and
# **external fragmentation** (holes between allocations). Paging removes the first and the third, and bounds
# the second by one block per request.
#
# ## 3. The workload
#
# The course measures all of this on one synthetic workload: 200 requests, `random.seed(0)`, each drawing a
# prompt length `randint(100, 2000)` and then an output length `randint(20, 1500)`. Below it is drawn by hand
# and compared with the library's `make_workload`, which every later notebook uses.

# %%
import random

from pagedkv_lib.studies.workload import make_workload, utilization_paged, utilization_reserved

random.seed(0)
mine = [(random.randint(100, 2000), random.randint(20, 1500)) for _ in range(200)]  # (prompt, output)
requests = make_workload()  # num_requests=200, seed=0
assert mine == [(r.prompt_len, r.output_len) for r in requests]
totals = [p + o for p, o in mine]  # tokens each request finally holds
print("first five (prompt, output):", mine[:5])
print(f"tokens per request: min {min(totals)}, mean {sum(totals) / len(totals):.1f}, max {max(totals)}")

# %% [markdown]
# ## 4. Reserving `max_len`
#
# Every request reserves `max_len = 4096` slots; utilization is the share of them that end up holding a token:
#
# ```
# utilization = sum(prompt + output) / (num_requests x max_len)
# ```

# %%
max_len = 4096
reserved_util = sum(totals) / (len(totals) * max_len)
assert abs(reserved_util - utilization_reserved(requests, max_len)) < 1e-12
print(f"used {sum(totals):,} of {len(totals) * max_len:,} reserved slots: utilization {reserved_util:.1%}")

# %% [markdown]
# More than half the memory holds nothing. Some of it is reserved for tokens that come later, which is the
# price of not knowing the output length; most of it is never used at all.
#
# ## 5. Paging
#
# A paged cache gives a request `ceil(tokens / block_size)` blocks, allocated as it grows. It wastes only
# the tail of its last block:
#
# ```
# utilization = sum(tokens) / sum(ceil(tokens / block_size) x block_size)
# ```

# %%
def paged_util(totals, block_size):
    allocated = sum(-(-t // block_size) * block_size for t in totals)  # whole blocks
    return sum(totals) / allocated, (allocated - sum(totals)) / len(totals)


for bs in (1, 16, 64, 256):
    util, tail = paged_util(totals, bs)
    assert abs(util - utilization_paged(requests, bs)) < 1e-12
    print(f"block size {bs:3d}: utilization {util:6.1%}, mean tail {tail:5.1f} slots per request")

# %% [markdown]
# The mean tail is close to `(block_size - 1) / 2`: the last block is filled to a roughly uniform level. So
# the waste grows linearly with the block size, and is small as long as blocks are much shorter than
# requests. The curve over all power-of-two block sizes, against the reservation's 46.2%:

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import memory_plots

fig, ax = plt.subplots(figsize=(8, 3), dpi=80)
memory_plots.draw_utilization_curve(ax, requests)
plt.show()

# %% [markdown]
# ## 6. Where the waste is
#
# One bar per request. Green is what it uses; red, the tail of its last block under paging; grey, the rest of
# a `max_len` reservation. Reserving allocates the whole bar, paging only green plus red. The right panel adds
# all requests up. At block size 16 the red is too thin to see; the explorer below makes it grow.

# %%
fig, (ax_requests, ax_totals) = plt.subplots(1, 2, figsize=(9, 3), dpi=80, width_ratios=[3, 1])
layers = memory_plots.draw_waste(ax_requests, ax_totals, requests, block_size=16)
ax_requests.legend(fontsize=7, loc="upper right", framealpha=0.9)
plt.show()
for name, slots in layers.items():
    print(f"{name:4s}: {slots.sum():>7,} token slots")

# %% [markdown]
# Now move it. **block size** takes any integer from 1 to 256: the arithmetic needs no power of two (the
# kernels do, notebook 02). **requests** draws the first N requests of the same seeded workload. The line
# above the picture gives both utilizations; the red tails grow with the block size, the grey never changes.

# %%
explorer = memory_plots.UtilizationExplorer()
print(explorer.summary_text())
explorer.widget

# %% [markdown]
# ## 7. How many requests fit
#
# Bytes turn into concurrency. Take an 80 GB GPU (80 GiB of HBM), 15 GiB of weights (a 7B model in bf16) and
# 10 GiB for activations and the rest: 55 GiB are left for the cache. Serve Qwen2.5-7B (57,344 B per token)
# with an average context of 3,000 tokens: paged at block size 16, against a system that reserves 32K tokens
# (the model's context length) per request.

# %%
budget = (80 - 15 - 10) * memory.GiB
per_token = memory.MODELS["Qwen2.5-7B"].bytes_per_token
blocks = -(-3000 // 16)  # 188 blocks of 16 for 3000 tokens
paged = budget // (blocks * 16 * per_token)
reserved = budget // (32768 * per_token)
assert paged == memory.paged_concurrency(budget, context_len=3000, block_size=16, bytes_per_token=per_token)
assert reserved == memory.reserved_concurrency(budget, max_len=32768, bytes_per_token=per_token)
print(f"budget {budget / memory.GiB:.0f} GiB, {per_token:,} B per token")
print(f"paged, {blocks} blocks of 16 per request: {paged} requests")
print(f"reserving 32768 tokens per request:    {reserved} requests")

# %% [markdown]
# Eleven times more requests in flight, and decode throughput grows with the batch: a decode step reads the
# weights once for the whole batch, so more requests per step is nearly free until memory bandwidth for the
# cache takes over.
#
# ## 8. External fragmentation, over time
#
# Reservation and internal waste can be read off a table. External fragmentation needs time: requests arrive,
# hold memory while they generate, and leave, and the holes they leave behind depend on who left when. The
# library simulates a memory of 16,384 token slots serving the first 100 requests of the workload, which
# arrive at 0.2 per step, each generating 10 tokens per step, admitted first in, first out. To be generous to
# the contiguous allocator, it is told each request's exact final size (no reservation waste at all). Its
# placement rule, first fit:

# %%
import inspect

from pagedkv_lib.studies.fragmentation import FirstFitAllocator, simulate_fragmentation

print(inspect.getsource(FirstFitAllocator.place))

# %%
results = {name: simulate_fragmentation(name) for name in ("first_fit", "paged")}
for name, r in results.items():
    print(f"{name:9s}: all served by step {r.steps[-1]}, mean wait {r.mean_wait:5.1f} steps, "
          f"head of queue blocked although enough was free: {int(r.head_blocked.sum())} steps, "
          f"mean external fragmentation {r.external_fragmentation.mean():.0%}")

# %% [markdown]
# The memory map over time: each column is one step, each row a piece of memory (16 slots), each colour a
# request, white is free. First fit shows bands, one per request, with white holes between them that the
# next request does not fit into; the queue grows while free memory sits idle. Paging puts a request in
# whatever blocks are free (it needs no neighbours), so after the first departures the colours interleave in
# thin stripes, memory stays full, and the queue drains sooner.

# %%
fig, axes = plt.subplots(3, 1, figsize=(9, 7), dpi=80, sharex=True, height_ratios=[2, 2, 1.2])
memory_plots.draw_memory_map(axes[0], results["first_fit"], "first fit, contiguous, exact sizes")
memory_plots.draw_memory_map(axes[1], results["paged"], "paged, block size 16")
memory_plots.draw_queue(axes[2], results)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 9. What the paper measured
#
# The PagedAttention paper profiled the systems before it and found that only 20-38% of their KV memory held
# actual tokens: 60-80% was reservation and fragmentation. With paging the waste fell under 4%, which is the
# internal fragmentation of section 5 (here 0.4% at block size 16). The freed memory went into larger
# batches, which is where vLLM's throughput gains came from.
#
# ## Exercises
#
# **121 · KV memory budget · easy.** In `practice/121_kv_memory_budget.py`, write
# `kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype_bytes)`,
# `paged_concurrency(budget_bytes, context_len, block_size, bytes_per_token)` and
# `reserved_concurrency(budget_bytes, max_len, bytes_per_token)`. Grade it with
#
#     python practice/judge.py 121
#
# Or solve it here: fill in the three functions below and run the cell. `judge(121, globals())` grades the
# names of this notebook on the same hidden cases (until you do, it reports *not implemented*).

# %%
from pagedkv_lib.judge import judge


def kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype_bytes):
    raise NotImplementedError  # your code here


def paged_concurrency(budget_bytes, context_len, block_size, bytes_per_token):
    raise NotImplementedError  # your code here


def reserved_concurrency(budget_bytes, max_len, bytes_per_token):
    raise NotImplementedError  # your code here


result = judge(121, globals())

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** sizes its pool in `ModelRunner.allocate_kv_cache` (`nanovllm/engine/model_runner.py`):
#   `num_blocks = int(total * gpu_memory_utilization - used - peak + current) // block_bytes`, where `peak`
#   and `current` come from a warm-up run, `gpu_memory_utilization` is 0.9 by default (`nanovllm/config.py`)
#   and `block_bytes = 2 x num_layers x block_size x num_kv_heads x head_dim x itemsize`. One tensor
#   `[2, num_layers, num_blocks, block_size, num_kv_heads, head_dim]` then holds the whole cache.
# - **vLLM** (`vllm/v1/core/kv_cache_manager.py`): `allocate_slots` hands a request the blocks for its new
#   tokens only, and returns `None` when the free blocks (minus a watermark) do not suffice; the scheduler
#   then preempts a request instead of failing. There is no reservation for future tokens.
# - **PyTorch**'s experimental `torch/nn/attention/experimental/_paged_attention.py` shows the same idea in
#   one class: `reserve(batch_idx, seq_len)` allocates pages lazily as a sequence grows.
# - The three wastes and the 60-80% / under 4% figures are from the PagedAttention paper (Kwon et al.,
#   "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP 2023).
#
# ## Say it in the interview
#
# The KV cache costs `2 x layers x KV heads x head_dim x dtype bytes` per token: 512 KiB for LLaMA-2-7B in
# FP16, so reserving 4096 tokens is 2 GiB per request. Reserving the maximum length up front wastes memory
# three ways: slots never used, the unused end of each allocation, and holes between allocations; earlier
# systems stored tokens in only 20-38% of their KV memory. Paging hands out fixed-size blocks on demand, so
# only the tail of each request's last block is wasted, under 4% in vLLM. The freed memory buys concurrency,
# and a larger batch is what raises decode throughput.
