# %% [markdown]
# # 00 · Start here
#
# This course takes the paged KV cache of an LLM inference engine apart and has you build it again: the block
# pool, block tables and slot mapping, paged attention in PyTorch and then in Triton, prefix caching,
# copy-on-write, an 8-bit cache and a small engine on top. After this notebook you know the map of the
# notebooks and exercises, how to run them on a laptop, in JupyterLab or in Colab, what changes with a GPU,
# and how the judge grades your code.

# %% [markdown]
# ## Self-test
#
# Three questions on what the course assumes. If one stumps you, the answer is the whole of what you need.
#
# 1. During decoding, what does the KV cache hold, and why does an engine keep it at all?
# 2. A model has 32 layers, 8 KV heads of dimension 128, and stores K/V in bf16. How many bytes of cache
#    does one token cost?
# 3. Why can one GPU serve more requests at once when its cache is paged?
#
# <details><summary>Answer</summary>
#
# 1. For every layer and every earlier token: that token's key and value vectors (one per KV head). A new
#    token's query attends to all of them; keeping them avoids recomputing the whole prefix at every step.
# 2. `2 x 32 x 8 x 128 x 2 = 131,072` bytes (128 KiB): K and V, times layers, KV heads, head_dim and bytes
#    per element.
# 3. Without paging each request reserves room for its maximum length up front; most of it is never used.
#    With paging a request holds only `ceil(tokens / block_size)` fixed-size blocks, taken from a shared pool
#    as it grows, so the memory that used to sit reserved holds other requests. Notebook 01 measures it.
#
# </details>

# %% [markdown]
# ## 1. The map
#
# The notebooks, in order. Each opens with a self-test and ends with its exercises, pointers into real
# engines ("In real systems") and a few sentences to say in an interview.
#
# | # | notebook | what you do there | exercises |
# |---|---|---|---|
# | 00 | Start here | this page | |
# | 01 | Why paging | the three wastes of a reservation, KV bytes per token, the paper's numbers | 121 |
# | 02 | Block pool and block tables | a free queue, reference counts, block-size trade-offs | |
# | 03 | Slot mapping and `store_kvcache` | where each token's K/V goes; prefill, decode | 122, 123, 124 |
# | 04 | Paged decode attention | gather through the block table, GQA, softmax; check against SDPA | 125 |
# | 05 | Varlen attention and `cu_seqlens` | decode, prefill and chunked prefill in one batch | 126 |
# | 06 | From scheduler to kernel inputs | `prepare_prefill`, `prepare_decode`, a decode-slot bug | 128 |
# | 07 | Prefix caching | chained block hashes, hits, the bugs real engines shipped | 129 |
# | 08 | Fork and copy-on-write | parallel sampling shares blocks; copy before writing (02's pool) | 127 |
# | 09 | Triton primer | programs, offsets, masks, reductions, `tl.dot`, strides, the interpreter | 135 |
# | 10 | Triton: `store_kvcache` | your first kernel of the cache, one program per token | 130 |
# | 11 | Triton: paged decode attention | flash-decoding, split-KV by actual lengths, a GPU roofline | 131 |
# | 12 | Triton: paged prefill attention | tiles over (query block, KV head), the causal offset | 133 |
# | 13 | FP8 KV cache | e4m3 and its scale: half the memory, what it costs in accuracy | 134 |
# | 14 | Capstone: a mini serving engine | scheduler, block manager, prefix cache, preemption, serving | 132 |
# | 15 | RadixAttention, the other prefix cache | a radix tree against the hash chain | 136 |
# | 16 | Swap or recompute | what a preemption costs, by model and length | |
# | 17 | The KV cache across GPUs | tensor-parallel shards, prefill/decode disaggregation | 137 |
# | 18 | MLA: a cache of latents | DeepSeek's latent cache, absorbed decode, a paged MLA kernel | 138 |
# | 19 | Hybrid models: layers that keep different things | sliding windows, states, one pool | 139 |
# | 20 | Speculative decoding and the cache | drafts verified in one chunk, rollback, tree drafts | 140 |
# | 21 | Shared-prefix (cascade) attention | a prefix the batch shares read once, merged with each suffix | |
# | 22 | A second tier: KV blocks in CPU memory | evicted blocks written out, CPU hits loaded back | 141 |
#
# Each exercise's number is the one key for the stub `practice/<id>_*.py`, the reference
# `solutions/<id>_*.py` and the judge's hidden cases.
#
# | id | exercise | difficulty |
# |---|---|---|
# | 121 | KV memory budget | easy |
# | 122 | Slot mapping | easy |
# | 123 | Slot ranges per block | medium |
# | 124 | store_kvcache | easy |
# | 125 | Paged decode attention | medium |
# | 126 | Varlen paged attention | medium |
# | 127 | Block pool, fork and copy-on-write | medium |
# | 128 | Kernel inputs | medium |
# | 129 | Prefix-caching block manager | hard |
# | 130 | Triton store_kvcache | medium |
# | 131 | Triton paged decode | hard |
# | 132 | Scheduler with preemption | hard |
# | 133 | Triton paged prefill | hard |
# | 134 | FP8 KV cache | medium |
# | 135 | Triton primer puzzles | medium |
# | 136 | Radix cache | hard |
# | 137 | KV transfer between instances | medium |
# | 138 | Paged MLA decode, absorbed | hard |
# | 139 | Sliding-window KV cache group | hard |
# | 140 | Rollback after speculative decoding | medium |
# | 141 | Two-tier prefix cache, GPU and CPU | medium |

# %% [markdown]
# ## 2. How to run it
#
# - **JupyterLab on your machine.** In the repository, `make lab` creates `.venv`, installs the course and
#   opens this notebook; `make test` runs every test. By hand: `pip install torch`, then
#   `pip install -e ".[dev]"` and `jupyter lab`.
# - **Colab.** Open a notebook from GitHub (File > Open notebook > GitHub). Its first code cell notices Colab,
#   clones the repository and installs it; run it first. Pick a GPU runtime for notebooks 09 to 13.
# - **CPU or GPU.** Every notebook runs on a CPU, and every stored output was produced on one. The Triton
#   kernels (notebooks 09-13, exercises 130, 131, 133 and 135) then run in Triton's interpreter
#   (`TRITON_INTERPRET=1`, set for you) on small shapes: slow, but the same code and the same answers. On a
#   CUDA GPU they are compiled and benchmarked for real.
#
# The first code cell of every notebook prints where you are. The next cell says more; its output depends
# on your machine.

# %%
# NBVAL_IGNORE_OUTPUT
# (versions and hardware differ from machine to machine)
import platform

import torch

from pagedkv_lib.environment import kernel_mode, versions

print("python ", platform.python_version())
for name, version in versions().items():
    print(f"{name:7s}", version)
print("GPU    ", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
print("kernels", kernel_mode(), "(cuda: compiled; interpreter: Triton on the CPU; unavailable: no Triton)")

# %% [markdown]
# ## 3. The conventions, once
#
# Everything in the course, library, notebooks and judge alike, follows these rules. The layout and the names
# are nano-vllm's; other engines keep the same information in other orders (vLLM, for one, puts K and V in
# the last dimension and lets each attention backend choose the physical order), see `docs/engines.md`.
# The full symbol table is `docs/conventions.md`.
#
# ```
# k_cache, v_cache   [num_blocks, block_size, num_kv_heads, head_dim]     one layer
# kv_cache           [2, num_layers, num_blocks, block_size, H_kv, D]     a whole model (nano-vllm)
# position p  ->  logical block p // block_size, offset p % block_size
# slot        =   block_table[p // block_size] * block_size + p % block_size
# -1          =   padding: a slot of -1 is not written, block tables are padded with -1
# slot_mapping, block_tables, context_lens, cu_seqlens_*: int32
# ```
#
# One line of the library, to check that the install works: the slots of a 6-token sequence whose blocks
# (size 4) are 7 and 2.

# %%
import pagedkv_lib as pk

print(pk.slot_mapping_for(block_table=[7, 2], positions=list(range(6)), block_size=4))

# %% [markdown]
# Block 7 holds slots 28..31 (positions 0..3), block 2 holds slots 8..11 (positions 4 and 5 use 8 and 9).
# Notebook 03 walks through this example step by step.
#
# ## 4. The judge
#
# Each exercise is a stub in `practice/` with its signature, a precise docstring and
# `raise NotImplementedError`. Write your code there, then:
#
#     python practice/judge.py 127          # grade practice/127_*.py
#     python practice/judge.py 127 my.py    # grade another file
#     python practice/judge.py --list       # every exercise, its difficulty and your status
#
# The judge runs hidden cases, fixed edge cases plus seeded random ones, and compares your answers with the
# library's. Your code runs in a separate process with a time limit and a memory cap, so an infinite loop, a
# crash or `sys.exit` ends in a verdict instead of a hang. Each case gets one verdict:
#
# | verdict | meaning |
# |---|---|
# | passed | the answer matches (tensors within the stated tolerance) |
# | wrong answer | it differs: the report shows the call, expected vs got, and a hint |
# | runtime error | your code raised; the traceback is shown |
# | time limit | the case ran past its limit |
# | memory limit | it allocated more than its cap |
# | not implemented | the stub still raises `NotImplementedError` |
#
# The exit code is 0 only when every case passes; `--json` prints the report for machines. Here is the list,
# with your own status in the last column:

# %%
# NBVAL_IGNORE_OUTPUT
# (the status column is your own progress, which differs from one learner to the next)
import subprocess
import sys

from pagedkv_lib.judge.registry import ROOT

listing = subprocess.run([sys.executable, str(ROOT / "practice" / "judge.py"), "--list"], capture_output=True,
                         text=True)
print(listing.stdout or listing.stderr)

# %% [markdown]
# From a notebook, `judge(122)` (from `pagedkv_lib.judge`) grades the function of that name defined in the
# notebook, on the same hidden cases; each notebook's "Exercises" section has a cell ready for it. Once your
# version passes, `show_reference(122)` prints the library's own, to compare with yours; until then it says
# how to unlock it, so no notebook gives an exercise away.
#
# Here is what a report looks like, for an attempt at exercise 122 (slot mapping) that forgets the block table
# and returns the positions themselves. (This demo calls the engine directly, so that it does not record a
# verdict in your status file.)

# %%
from pagedkv_lib.judge import grading, report
from pagedkv_lib.judge.grading import Submission


def slot_mapping_for(block_table, positions, block_size):  # BUGGY on purpose: a wrong attempt at 122
    return list(positions)


attempt = Submission("notebook", namespace={"slot_mapping_for": slot_mapping_for})
print(report.text(grading.grade(122, [attempt])[0], timing=False))

# %% [markdown]
# ## Exercises
#
# None here. The first one, 121 (KV memory budget, easy), comes with notebook 01. To see the judge's list:
#
#     python practice/judge.py --list
#
# ## In real systems
#
# The engines the course follows, the kernels they call, and where to find it all:
#
# - **nano-vllm** (GeeeekExplorer/nano-vllm), a whole engine in about 1,400 lines:
#   `nanovllm/engine/block_manager.py` (`BlockManager`, `compute_hash`, `can_allocate`, `may_append`),
#   `nanovllm/engine/sequence.py` (`Sequence`, `block_table`), `nanovllm/engine/model_runner.py`
#   (`allocate_kv_cache`, `prepare_prefill`, `prepare_decode`) and `nanovllm/layers/attention.py`
#   (`store_kvcache`, the calls into FlashAttention). Its default block size is 256.
# - **vLLM v1**: `vllm/v1/core/block_pool.py` (`BlockPool`, `FreeKVCacheBlockQueue`),
#   `vllm/v1/core/kv_cache_manager.py` (`allocate_slots`), `vllm/v1/worker/block_table.py`
#   (`compute_slot_mapping`) and the Triton attention in `vllm/attention/ops/triton_unified_attention.py`.
# - **FlashInfer** and **FlashAttention** provide the paged attention kernels both call; their layouts and
#   page-size rules appear in notebooks 02 and 05.
# - `docs/engines.md` collects what every notebook's "In real systems" section cites, with the repository,
#   commit and file of each claim, for these engines and for SGLang and PyTorch.
#
# ## Say it in the interview
#
# The KV cache holds every earlier token's keys and values for every layer, so each new token costs one
# forward pass instead of a pass over the whole prefix. Its size grows with the context, and reserving room
# for the longest possible context wastes most of the memory. A paged cache splits it into fixed-size blocks
# handed out on demand; a block table per request maps logical blocks to physical ones, as page tables do
# for virtual memory. Kernels then read K/V through the block table, and the freed memory serves more
# requests at once.
