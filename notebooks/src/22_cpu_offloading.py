# %% [markdown]
# # 22 · A second tier: KV blocks in CPU memory
#
# The prefix cache of notebook 07 keeps a freed block's K/V findable until the pool needs the block for
# other tokens; then it is gone, and the next request with that prefix recomputes it. A GPU has tens of
# gigabytes for KV; the host it sits in has hundreds, one PCIe link away. Production engines put a second
# tier there: an evicted prefix block is copied out to CPU memory, and a later prefix miss on the GPU that
# hits the CPU is copied back instead of recomputed. After this notebook you can say which tier serves each
# block of a prompt, what is written out on a GPU eviction and what is loaded back, keep both tiers in LRU
# order (and the CPU tier's own evictions), order the copies so that no block is reused before its K/V is
# safe, split the work the way vLLM's offloading connector does (a scheduler side that decides, a worker
# side that copies), turn the tier on in the mini engine, and say from measured rates when a load beats a
# recompute.

# %% [markdown]
# ## Self-test
#
# 1. A prompt's blocks 0 and 1 are on the GPU, block 2 only on the CPU, block 3 on neither, block 4 on the
#    CPU. Which blocks are served, and by which tier?
# 2. A block is evicted from the GPU while the CPU already holds its hash. What is copied?
# 3. A GPU block was chosen for reuse and its old content must be written out first. When may the step's
#    forward write into it?
# 4. A CPU slot is the least recently used, but this step loads from it. May a write-out this step take it?
# 5. Can the CPU tier change the tokens a greedy engine emits?
#
# <details><summary>Answer</summary>
#
# 1. Blocks 0 and 1 by the GPU, block 2 by the CPU (loaded into a fresh GPU block). The prefix ends at block
#    3: block 4's hash names a prefix that includes block 3, which has to be computed, so block 4 is too.
# 2. Nothing: the CPU's copy is the same K/V (a block is immutable once full and hashed). The GPU block is
#    simply reused.
# 3. Only after the copy out has finished. The course's engine orders it on the GPU: the copies are queued
#    on the step's own stream, before its forward. vLLM avoids the wait by copying blocks out as soon as they
#    are computed and by not freeing a block while its copy runs; SGLang's write-back policy waits for the
#    copies inside its eviction.
# 4. No: it is pinned (referenced) until the step's copies are taken; the CPU evicts the least recently used
#    slot that no queued load reads, or keeps nothing.
# 5. No. A loaded block holds the same K/V the recompute would have written; only the work changes. The
#    engine's test checks the tokens are equal.
#
# </details>

# %% [markdown]
# ## 1. Two tiers, one key
#
# ```
#   GPU pool (BlockPool)            free queue: front = evicted next          CPU tier (CpuBlockStore)
#   [b0 h1 ref 1] [b1 h2 ref 0] ... [b1, b4, ...]   --- evict b1: save --->    {h7: s0, h2: s1}  LRU first
#                                                   <--- hit on CPU: load ---
# ```
#
# Both tiers are indexed by the same chained block hash as the prefix cache (block i's hash covers blocks
# 0..i, notebook 07). On the GPU the least recently released block is taken first: that IS the GPU tier's
# LRU eviction. The CPU tier is an ordered map from hash to slot, least recently used first. The rules:
#
# - **lookup**: block by block, the GPU serves what it holds, else the CPU; the prefix ends at the first
#   block neither holds;
# - **write out**: a cached block about to be reused is copied to the CPU first, unless the CPU holds it;
#   the CPU takes a free slot, else evicts its least recently used slot that no queued load reads (dropped
#   for good);
# - **load back**: a CPU hit gets a fresh GPU block and a copy in; the CPU keeps its copy.
#
# `TwoTierCache` holds exactly these rules over hashes alone (exercise 141 asks you to write it). A pool of 3
# GPU blocks and 4 CPU slots: a prompt of two full blocks and a partial one is allocated and freed, a second
# prompt evicts it, a third brings it back.

# %%
from pagedkv_lib.core.two_tier_cache import TwoTierCache

cache = TwoTierCache(num_gpu_blocks=3, num_cpu_blocks=4)
a = cache.allocate([1, 2, None])
cache.free(a)
print("a:", a, "  free queue after free(a):", list(cache.gpu_free), "(last block first)")
b = cache.allocate([7, 8, None])
saves, loads = cache.take_transfers()
print("b:", b, "  saves (gpu block, cpu slot):", saves, "  cpu_lru:", dict(cache.cpu_lru))
cache.free(b)
print("lookup of a's prompt:", cache.lookup([1, 2, None]))
c = cache.allocate([1, 2, None])
saves, loads = cache.take_transfers()
print("c:", c, "  loads (cpu slot, gpu block):", loads, "  saves on the way:", saves)
print("cpu_lru, least recent first:", list(cache.cpu_lru.items()))

# %% [markdown]
# The second prompt took block 2 first (it held the partial block, no hash), then blocks 1 and 0: each held a
# cached block, so each was written out before being reused, the tail block first. The third prompt's two
# full blocks came back from the CPU; taking its fresh blocks evicted the second prompt's blocks in turn.
# The CPU hits are refreshed from the prompt's LAST block to its first (hash 2, then hash 1), so that of the
# prompt's blocks the first, the one every longer prompt needs, is the most recently used and the last to
# go (vLLM's `touch` walks the hashes reversed). The two blocks written out after that refresh, the second
# prompt's hashes 8 and 7, are newer still: a slot written is a slot used, so `cpu_lru` ends with them.
#
# A chain breaks at its first miss, even when a later block is cached:

# %%
cache = TwoTierCache(num_gpu_blocks=8, num_cpu_blocks=4)
cache.free(cache.allocate([1, 2, 3, None]))
print("blocks 1, 2, 3 cached; lookup([1, 9, 3]) ->", cache.lookup([1, 9, 3]))

# %% [markdown]
# ## 2. The same rules on sequences: `TieredBlockManager`
#
# The engine's block manager is notebook 07's `BlockManager` with a `CpuBlockStore` under it, and it adds
# only what the tier needs: a block the pool hands out is written out first (the pool's eviction hook), and a
# lookup that misses on the GPU asks the CPU. It hashes token ids and checks them on a hit, on both tiers;
# `cached_prefix(seq)` says which tier serves each block of the prompt and where the block lies there:
# `("gpu", block id)` or `("cpu", slot)`. It copies nothing: it queues the saves and loads for the connector
# (section 3). Block size 4, a pool of 4 blocks, 8 CPU slots: a 9-token prompt is served, freed, pushed out by
# another, and asked again.

# %%
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.core.tiered_block_manager import TieredBlockManager

bm = TieredBlockManager(num_blocks=4, block_size=4, num_cpu_blocks=8)
first = Sequence(list(range(9)), block_size=4, seq_id=0)
bm.allocate(first)
bm.deallocate(first)
other = Sequence([50 + t for t in range(13)], block_size=4, seq_id=1)
bm.allocate(other)
print("other evicts first's blocks, saves:", bm.take_transfers()[0])
bm.deallocate(other)
again = Sequence(list(range(9)) + [99, 98], block_size=4, seq_id=2)
print("tiers for the same prefix, (tier, GPU block or CPU slot):", bm.cached_prefix(again))
bm.allocate(again)
print("loads (cpu slot, gpu block):", bm.take_transfers()[1], " tokens not recomputed:",
      again.num_cached_tokens, "of", len(again))

# %% [markdown]
# The first prompt's block 1 was written out first, to CPU slot 0, and its block 0 to slot 1:
# `cached_prefix` finds block 0 in slot 1 and block 1 in slot 0, and the loads copy each slot into a fresh
# GPU block. The third block of `again` holds its last tokens, which are computed whatever the tiers hold
# (a hit covers at most all tokens but the last, and only full blocks).

# %% [markdown]
# ## 3. Who copies, and when a block may be reused
#
# vLLM splits its offloading connector in two (`vllm/distributed/kv_transfer/kv_connector/v1/
# offloading_connector.py` at `7368908`). The **scheduler side** decides, once per step, which blocks to
# load and which to store and hands the worker a metadata object; the **worker side** runs the copies, on a
# CUDA stream of their own between GPU blocks and pinned host memory (`vllm/v1/kv_offload/cpu/
# gpu_worker.py`), and reports which jobs finished. The course's engine has the same split
# (`pagedkv_lib/engine/kv_offload.py`): the scheduler side is the block manager, which queues the copies as
# it allocates; once per step the engine takes them (`take_transfers`) as a `KVTransfers`, the metadata, and
# hands them to the worker side, `OffloadWorker`, which copies.
#
# The one hazard is a GPU block chosen for reuse: its old K/V must reach the CPU before anything writes into
# it, and a CPU slot must not be overwritten while a load reads it. Three orderings that real engines use:
#
# - **course engine (write-back, ordered on the GPU)**: the save is queued when the block is chosen; the
#   worker queues every save of the step, then every load, on the step's own stream, just before its
#   forward. The host never blocks (pinned memory); the GPU's forward starts after the copies. A side stream
#   would buy nothing here: a save is of a block this very step writes into, a load of one its forward
#   reads, so every copy must run after the previous step and before this forward anyway. A CPU slot a
#   queued load reads is pinned until the step's transfers are taken.
# - **vLLM (write-through)**: each block is stored as soon as it is full and computed (`_get_reqs_to_store`),
#   deferred to the start of the next step so that it does not delay sampling (`prepare_store_kv`); a
#   finished request's blocks are not freed while a store runs (`request_finished` returns True), and a
#   preempted one waits for its stores (`handle_preemptions`). An evicted block is then already on the CPU.
# - **SGLang HiCache** (`python/sglang/srt/mem_cache/hiradix_cache.py` at `0050c57`): `write_through`
#   backs a node up on its first hit, `write_through_selective` after a few (`write_through_threshold`),
#   and `write_back` at eviction, where `evict` blocks until the copies finish (`writing_check(write_back=
#   True)`) before freeing the device memory.
#
# The mini engine's StepStats count the blocks each step saved and loaded:

# %%
import random

import torch

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams

torch.set_num_threads(1)


def chat(num_cpu_blocks, num_conversations=4, num_turns=3, seed=0):
    """Turns served in rounds: every conversation's next prompt is its history plus a new message."""
    rng = random.Random(seed)
    llm = LLM(EngineConfig(block_size=8, num_kvcache_blocks=8, max_num_seqs=2, max_num_batched_tokens=64,
                           max_model_len=64, num_cpu_blocks=num_cpu_blocks))
    history, answers = [[] for _ in range(num_conversations)], []
    for _ in range(num_turns):
        prompts = [h + [rng.randrange(512) for _ in range(rng.randint(3, 9))] for h in history]
        answers.append(llm.generate(prompts, SamplingParams(max_tokens=6), use_tqdm=False))
        history = [p + o for p, o in zip(prompts, answers[-1], strict=True)]
    return answers, llm.stats


plain, plain_stats = chat(0)
for num_cpu_blocks in (0, 8, 32):
    answers, stats = chat(num_cpu_blocks)
    computed = sum(s.num_computed_tokens for s in stats if s.is_prefill)
    print(f"CPU tier {num_cpu_blocks:2d} blocks: same tokens as without: {answers == plain};  prompt tokens "
          f"computed {computed}, blocks saved {sum(s.num_saved_blocks for s in stats)}, "
          f"loaded {sum(s.num_loaded_blocks for s in stats)}")

# %% [markdown]
# The tokens are the same with and without the tier (tests/engine/test_engine_offload.py checks this, and
# that a load that copies the wrong K/V changes them). A pool of 8 blocks cannot keep a round of four
# conversations, so without the tier a later turn recomputes much of its history; with it, the history
# comes back as copies.
#
# ## 4. What a CPU tier buys on the course's workloads
#
# The replay of notebook 15 (the engine's own scheduler, outputs fixed in advance, no model) on its
# multi-turn chat and few-shot workloads and GPU pools, with CPU tiers of 0 to 4 times the GPU pool. "GPU
# hits" and "CPU hits" are the shares of all admitted prompt tokens each tier served; "recomputed" is what
# was computed beyond an unbounded cache.

# %%
from pagedkv_lib.studies import cpu_offload as co

print(co.tier_table())

# %% [markdown]
# The same runs as a picture: every admitted prompt token was a GPU hit, a load from the CPU, or computed.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.offload_plots import draw_tier_sweep

fig = plt.figure(figsize=(9, 2.8), dpi=80)
draw_tier_sweep(fig, {w: co.tier_sweep(w) for w in ("chat", "few_shot")})
plt.show()

# %% [markdown]
# The GPU column does not move: a CPU hit takes a fresh GPU block just as a miss does, so the GPU tier
# behaves the same, and every token the CPU serves is one fewer computed. Past a size the CPU holds every
# block the workload ever evicts and stops helping; the chat reaches that size first.
#
# Even then "recomputed" does not reach 0, because its reference, an unbounded cache of single tokens, finds
# tokens that no tier of 16-token blocks can: those of a cached prefix past its last full block (a chat's
# history ends inside a block, and so does each few-shot header). A request preempted and readmitted
# computes its own partial last block again too. The largest tier's runs, by cause
# (`co.recomputed_by_cause`: the tails are what an unbounded cache of 16-token blocks computes beyond the
# token-level one, the last term what both tiers lost):

# %%
for workload in ("chat", "few_shot"):
    largest = co.tier_sweep(workload)[-1]
    causes = co.recomputed_by_cause(workload, largest.num_cpu_blocks)
    print(f"{workload}, CPU {largest.num_cpu_blocks} blocks: {causes['recomputed']:,d} recomputed = "
          f"{causes['block tails']:,d} past a prefix's last full block + {causes['readmitted']:,d} "
          f"computed again by requests readmitted after preemptions ({causes['preemptions']}) + "
          f"{causes['evicted']:,d} lost from both tiers")
#
# ## 5. Load or recompute
#
# Notebook 16 priced a preempted request's swap against its recompute with rates measured on the H200; the
# same rates price a load: one host-to-device copy per 16-token block, per layer, for K and for V (the copy
# overhead of a few microseconds each dominates small blocks), or one copy per block when the layout keeps a
# block's layers together; against the prefill of the same tokens after the ones the GPU held.

# %%
model = co.load_cost_model()
print(model.source, end="\n\n")
for workload in ("chat", "few_shot"):
    run = co.tier_sweep(workload, factors=(2,))[0]
    print(co.load_or_recompute_table(run, model), end="\n\n")

# %% [markdown]
# The last column names the cheapest way back for each shape. A small model's prefill is cheap per token
# while its K/V still moves in many small copies, so the copies' fixed overhead decides; the bigger models
# spend more FLOPs per token of K/V, and a layout that moves a block in one copy is what makes the load
# cheap. Pinned against pageable host memory, and a load on a side stream beside a decode step, are measured
# by `benchmarks/bench_offload.py` on a GPU (bf16, 28 layers, 8 KV heads, head dim 128, as Qwen3-0.6B).
# The next cell renders its stored run, or says that it is not there yet:

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz.offload_plots import copy_findings

print(copy_findings(results.stored("bench_offload.json")))

# %% [markdown]
# Pageable memory costs a staging copy through a pinned bounce buffer inside the driver, and the host waits
# for it: that is why real connectors allocate the CPU tier pinned once, up front. Even pinned, a block
# moves as one small copy per layer and per K or V, and the host time spent queueing them grows with their
# number: a layout that keeps a block's layers together (one copy per block), or a copy kernel that gathers
# many blocks at once, is what the engines use for many small blocks. A side stream lets copies run under a
# step's work only when that step does not need them (vLLM's write-through stores, deferred a step); a load
# the forward reads, or a write-back save of a block the step reuses, finishes before the forward on any
# stream, which is why the course's engine queues its copies on the step's own.

# %% [markdown]
# ## Exercise 141: the two-tier cache
#
# Write `TwoTierCache`: `lookup` (which tier serves each block), `allocate` (GPU hits shared, CPU hits
# loaded, evictions written out, LRU on both tiers, the CPU's own eviction never of a pinned slot), `free`
# and `take_transfers`. The contract, clause by clause, is in `practice/141_two_tier_cache.py`; grade it:
#
#     python practice/judge.py 141
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(141)` grades the
# `TwoTierCache` defined in this notebook on the same hidden cases. As stored here, the stub is graded "not
# implemented".

# %%
from pagedkv_lib.judge import judge


class TwoTierCache:  # your code here, in place of each NotImplementedError
    def __init__(self, num_gpu_blocks, num_cpu_blocks):
        raise NotImplementedError

    def lookup(self, block_hashes):
        raise NotImplementedError

    def allocate(self, block_hashes):
        raise NotImplementedError

    def free(self, block_table):
        raise NotImplementedError

    def take_transfers(self):
        raise NotImplementedError


result = judge(141)

# %% [markdown]
# Once your version passes, `show_reference(141)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(141)

# %% [markdown]
# ## In real systems
#
# - **vLLM, the CPU tier's bookkeeping** (`vllm/v1/kv_offload/lru_manager.py` at `3a04cf8`):
#   `LRUOffloadingManager` keeps an `OrderedDict` from block hash to block status; `lookup` counts hits up
#   to the first block that is missing or not yet stored; `prepare_load` raises a block's `ref_cnt` until
#   `complete_load`; `prepare_store` skips blocks already stored and evicts the oldest blocks whose
#   `ref_cnt` is 0, or gives up (None) when it cannot; `touch` moves the hashes to the end, last first.
#   The same folder holds an ARC policy (`arc_manager.py`) besides LRU.
# - **vLLM, the connector** (`vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py` at
#   `7368908`): `OffloadingConnectorScheduler` (lookups, what to load and store each step,
#   `build_connector_meta`, `request_finished` delaying the free of blocks being stored) and
#   `OffloadingConnectorWorker` (`start_kv_transfers`, `prepare_store_kv`, `get_finished`); a cross-layer
#   layout can be registered (`register_cross_layers_kv_cache`) so that a block is one copy.
# - **SGLang HiCache** (`python/sglang/srt/mem_cache/hiradix_cache.py` at `0050c57`): the radix tree of
#   notebook 15 with a host copy per node (`host_value`, `backuped`); a backed-up node evicted from the GPU
#   keeps its host copy (`_evict_backuped`), `load_back` brings an evicted path back in one piece (skipped
#   below `load_back_threshold` tokens), and the host pool is evicted separately (`evict_host`, only nodes
#   no longer on the device).
#
# ## Say it in the interview
#
# A CPU tier turns the prefix cache's eviction into a copy: a cached block that the GPU pool must reuse is
# written to host memory, keyed by the same chained hash, and a later prompt whose GPU lookup stops early
# continues the lookup on the CPU and loads those blocks back instead of recomputing them; the chain still
# stops at its first miss. Both tiers evict LRU, the CPU dropping blocks for good. The hazards are ordering:
# a GPU block may only be overwritten after its copy out, and a CPU slot only after the loads reading it,
# which engines handle with a side stream and events, by writing through as blocks are computed (vLLM), or
# by waiting inside eviction (SGLang's write-back). Whether it pays is load time against recompute time:
# per-layer copies of small blocks are overhead-bound, so small models may recompute faster, while 7B-class
# models load whole blocks in a fraction of their prefill.
#
# More on each engine's choices, with sources: `docs/engines.md`, "A CPU tier under the GPU pool".
