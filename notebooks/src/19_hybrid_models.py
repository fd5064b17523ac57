# %% [markdown]
# # 19 · Hybrid models: layers that keep different things
#
# Every notebook so far assumed one kind of layer: full attention, each layer keeping the K and V of every
# token. The models people serve now mix kinds. Gemma 3 puts five sliding-window layers (each reads only the
# last 1024 tokens) between its full-attention layers; gpt-oss alternates sliding-window layers of 128 tokens
# with full ones; Mistral 7B slid a window of 4096 in every layer; Jamba and Qwen3-Next interleave state
# layers (Mamba, linear attention) that keep one fixed-size state per request, however long it is. Their KV
# caches differ layer by layer, and a serving engine that gave every layer full attention's cache would throw
# most of the memory away. After this notebook you can say what each kind of layer must keep, free the
# blocks that leave a window while the sequence runs (never one still inside it, never twice), find a prefix
# hit for a window (from the right), combine the groups' hits into the request's hit, explain why vLLM gives
# every group one page size (a state padded to it), and say from measurements how many more sequences fit
# and what the sliding-window rule does to prefix hits under memory pressure.

# %% [markdown]
# ## Self-test
#
# 1. A sliding-window layer has window W = 5 and block size 4. The sequence has 12 computed tokens. Which of
#    its blocks can go back to the pool?
# 2. A request shares its first blocks with another one. Its window moves past them. What happens to those
#    blocks?
# 3. A new request's prompt has 13 tokens, all cached in a full-attention group, but the sliding-window group
#    (W = 5, block size 4) evicted its first two blocks. How long a prefix hit can the request get?
# 4. Why can a hit of a hybrid model never be longer than the full-attention group's hit?
# 5. A Mamba layer's state takes about a MiB; an attention layer's block of 16 tokens takes far less. How
#    does one pool of equal pages hold both?
#
# <details><summary>Answer</summary>
#
# 1. The next query is at position 12 and reads positions 8 .. 12 (W tokens, its own included), so
#    positions 0 .. 7 are read by nobody any more: blocks 0 and 1 go back to the pool, and the null block
#    takes their place in the table. Block 2 holds positions 8 .. 11 and stays.
# 2. The request drops ITS reference to each (the pool's `free`, once per block); the other request's
#    reference keeps them allocated. Only the last reference returns a block to the free queue.
# 3. 12 tokens (the cap is `num_tokens - 1`, and a hit is whole blocks). The query at position 12 reads
#    positions 8 .. 11 from the cache: block 2 alone must be cached. The evicted blocks 0 and 1 are outside
#    the window, so the sliding group does not need them; the full group has everything.
# 4. Full attention's next query reads EVERY earlier token: its hit needs every block of the prefix, so it
#    bounds what any length can be. The request's hit is a length every group can serve: the smallest, found
#    by letting each group cut the candidate until none does.
# 5. vLLM grows the attention block size until one block of attention holds as many bytes as one state, and
#    pads the state to that page; then a state is one block of the same pool (section 6).
#
# </details>

# %% [markdown]
# ## 1. Why: what each kind of layer must keep
#
# A full-attention layer's query at position p reads positions 0 .. p; a sliding-window layer's reads
# p - W + 1 .. p (the mask of gpt-oss's `sdpa` drops positions at or below p - W); a state layer reads
# nothing from a cache, it folds each token into one fixed-size state. Once L tokens are computed, per
# layer and request:
#
# ```
# full attention:   L tokens of K and V            grows with L forever
# sliding window:   min(L, W) tokens (in blocks)   stops growing at the window
# state:            one state                      never grows
# ```
#
# The course keeps one attention shape (48 layers, 8 KV heads, head_dim 128, bf16) and changes only the
# layer pattern: full attention everywhere, Gemma 3's five local layers per global one with a window of 1024,
# and gpt-oss's alternation with a window of 128. The KV bytes of one sequence, by context length:

# %%
from pagedkv_lib.studies import hybrid_memory as hm

for name, model in hm.HYBRID_MODELS.items():
    kinds = {k: model.count(k) for k in hm.LAYER_KINDS if model.count(k)}
    cells = "  ".join(f"{n:>6d}: {hm.kv_bytes_per_sequence(model, n) / 2**20:7.0f} MiB"
                      for n in (1024, 8192, 65536))
    print(f"{name:26s} {kinds}  {cells}")

# %% [markdown]
# ## 2. A picture: the window slides over the block table
#
# One request in two groups, block size 4, window 6: after each step the coordinator frees the sliding
# group's blocks that no later query reads. Grey entries hold the null block (what vLLM's block 0 is for:
# it stands in for a block the group does not need, and the attention kernel of a sliding-window layer never
# reads it).

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.hybrid_plots import draw_group_tables, window_frames

frames = window_frames(block_size=4, window=6, lengths=[5, 9, 14, 20])
fig, ax = plt.subplots(figsize=(7, 3.4), dpi=80)
draw_group_tables(ax, frames, block_size=4, window=6)
plt.show()
for n, (full, sliding), null in frames:
    print(f"{n:2d} tokens: full holds {len(full)} blocks, sliding {sum(b != null for b in sliding)}")

# %% [markdown]
# ## 3. The sliding-window group in code
#
# The library's `SlidingWindowManager` (pagedkv_lib/core/sliding_window_manager.py) holds, like vLLM's, one
# block table per request over a shared `BlockPool` and a shared index of full blocks. Once
# `num_computed_tokens` tokens are computed, the next query is at position `num_computed_tokens`, so the
# blocks wholly below position `num_computed_tokens - W + 1` leave:
#
# ```
# num_skipped_blocks = max(0, num_computed_tokens - W + 1) // block_size
# walk back from entry num_skipped_blocks - 1, free each block (one reference), put the null block there,
# stop at the first null entry: everything before it went earlier, so nothing is freed twice
# ```
#
# Two requests share a prefix; one decodes past the window. The shared block loses one reference, not both:

# %%
from pagedkv_lib.core.block_manager import block_hashes
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.sliding_window_manager import SlidingWindowManager

pool = BlockPool(12)
(null,) = pool.allocate(1)                       # the null block: never freed, stands in for skipped ones
sw = SlidingWindowManager(pool, block_size=4, sliding_window=5, null_block=null)
prompt = list(range(100, 112))                   # 12 tokens, 3 full blocks
hashes = block_hashes(prompt, 4)
print("a gets", sw.allocate_slots("a", 12))
sw.cache_blocks("a", hashes, 12)
hit = sw.find_longest_cache_hit(hashes, 11)      # b: the same 12 tokens (at most 11 from the cache)
print("b's hit", hit, "->", len(hit) * 4, "tokens")
sw.allocate_slots("b", 12, hit)                  # b's 12 prompt tokens: the hit's 2 entries, 1 fresh block
print("a frees", sw.remove_skipped_blocks("a", 12), "-> table", sw.block_tables["a"])
print("again  ", sw.remove_skipped_blocks("a", 12), "(nothing twice)")
print("ref counts of blocks 1..4:", pool.ref_counts[1:5], " free queue:", list(pool.free_block_ids))

# %% [markdown]
# Block 2 left a's window but b still reads it: it kept b's reference. Block 1 had one reference and went
# back to the END of the free queue, still holding its hash, so a later request can hit it until the pool
# hands it out again. b's last block holds the same tokens as a's block 3 (b's hit stopped a block short,
# at most 11 tokens from the cache), and it is registered too, as vLLM registers such a duplicate: block
# tables only grow, so b keeps its own copy, and hits go to the copy registered first while it is cached,
# then to the next.
#
# ## 4. Check: a per-token brute force
#
# The reference knows nothing of blocks: for every request and step it lists the positions some later query
# may read or write (every slot from `num_computed_tokens - W + 1` on) and maps them to table entries. The
# manager must hold exactly those entries, and the pool's reference counts must equal the number of tables
# that hold each block (and no block may sit in both groups' tables), over random requests that share
# prefixes, with hits (`table_mismatches`, in pagedkv_lib/testing/window_reference.py):

# %%
from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator, KVCacheGroupSpec
from pagedkv_lib.testing.window_reference import needed_entries, table_mismatches

print("after 12 computed tokens (window 5, block size 4), the entries a later query needs:",
      sorted(needed_entries(12, 12, window=5, block_size=4)))
for block_size, window in ((1, 4), (4, 6), (16, 33)):
    print(f"block_size {block_size:2d}, window {window:2d}: mismatches over 5 seeds:",
          sum(table_mismatches(seed, block_size, window) for seed in range(5)))

# %% [markdown]
# ## 5. Prefix hits: from the right, and the agreement of the groups
#
# A full-attention hit of L tokens needs every block before L, so the search goes from the left and stops at
# the first miss. A sliding-window hit of L tokens needs only what the query at position L reads: positions
# L - W + 1 .. L - 1, the last ceil((W - 1) / block_size) blocks before L. So the search goes from the RIGHT
# and stops at the first run of that many cached blocks (a run that reaches the first block counts however
# short). The request's hit is the agreement: each group cuts the candidate length to its own longest hit
# within it, until a whole pass changes nothing (vLLM's `HybridKVCacheCoordinator.find_longest_cache_hit`).
#
# A window of one token reads nothing before its query: the course's hit for it is the null block in every
# entry, as long as the other groups allow. vLLM asks for ceil(0 / block_size) = 0 cached blocks in a row,
# so its search stops at the first cached block from the right and keeps that block: the same length
# whenever the candidate's last block is cached in that group, and none when no block is.
#
# Below, the full group has all 9 blocks of a prompt cached, and the sliding group (W = 5) lost its first
# three to eviction; with the rule the request still gets its hit, without it (full attention's rule for the
# sliding group too) it gets nothing:

# %%
specs = [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("sliding_window", 5)]
prompt = list(range(200, 237))                                   # 37 tokens: 9 full blocks of 4
hashes = block_hashes(prompt, 4)
for rule in (True, False):
    coord = KVCacheCoordinator(40, 4, specs, sliding_window_rule=rule)
    for i, h in enumerate(hashes):
        coord.index.insert(0, h, 1 + i)                          # the full group: every block cached
        if i >= 3:
            coord.index.insert(1, h, 20 + i)                     # the sliding group: blocks 3.. only
    hits, length = coord.find_longest_cache_hit(hashes, len(prompt) - 1)
    print(f"sliding-window rule {str(rule):5s}: hit {length} tokens; sliding group's hit table {hits[1]}")

# %% [markdown]
# Admitting the request, `KVCacheCoordinator.allocate_slots` first touches the hit's blocks in EVERY group,
# and only then takes fresh blocks for each group, as vLLM's coordinator does. Touching one group at a time
# is not enough: a sliding group's hit is often a block it freed while the request ran, near the front of
# the free queue, and the full group's fresh block would be taken from there. Below, request a's window
# freed its first two blocks while the pool was full, so they lead the free queue, and b's window hit is
# one of them:

# %%
coord = KVCacheCoordinator(7, 4, [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("sliding_window", 5)])
a_tokens = list(range(300, 312))
coord.allocate_slots("a", 12)
coord.cache_blocks("a", block_hashes(a_tokens, 4), 12)
coord.remove_skipped_blocks("a", 12)
coord.free("a")
print("free queue after a:", list(coord.pool.free_block_ids))
b_tokens = a_tokens[:8] + [7]
hits, length = coord.find_longest_cache_hit(block_hashes(b_tokens, 4), 8)
print(f"b's hit: {length} tokens, full group {hits[0]}, sliding group {hits[1]}")
coord.allocate_slots("b", 9, hits)
full_table, sliding_table = (m.block_tables["b"] for m in coord.managers)
print(f"b's tables: full {full_table}, sliding {sliding_table}; "
      f"blocks in both: {sorted(set(full_table) & set(sliding_table))}")

# %% [markdown]
# ## 6. One page size for every group
#
# vLLM keeps ONE pool of blocks of one size
# (`vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md`): the layers of one kind are split into
# KV cache groups of the same number of layers, and a block of any group holds block_size tokens of each of
# its layers. For the 5:1 pattern, 40 sliding and 8 full layers make 6 groups of 8; the alternating one makes
# 2 groups of 24. A state layer's state is much larger than a block of attention, so vLLM grows the attention
# block size until one page holds a state, and pads the state to the page. The cell below does that for
# Qwen3-Next's shapes (transformers' `Qwen3NextConfig`: 2 KV heads of 256 in its full layers; 32 value heads
# and 16 key heads of 128 and a convolution of width 4 in its linear-attention layers). The state's size is
# the course's assumption, not read from an engine: one key-by-value matrix per value head plus the
# convolution's last 3 inputs, stored in bf16.

# %%
for name in ("5:1 local:global, W 1024", "alternating, W 128"):
    model = hm.HYBRID_MODELS[name]
    per_group, groups = hm.layer_groups(model)
    print(f"{name:26s}: {len(groups)} groups of {per_group} layers, "
          f"page {hm.page_bytes(model, 16) // 1024} KiB at block_size 16")

recurrent = 32 * 128 * 128                                   # value heads x key dim x value dim
conv = (2 * 16 * 128 + 32 * 128) * (4 - 1)                   # q, k, v channels x (kernel width - 1)
qwen = hm.HybridModel("Qwen3-Next shape", hm.layer_pattern(48, 4, "state"), num_kv_heads=2, head_dim=256,
                      dtype_bytes=2, state_bytes=2 * (recurrent + conv))
block_size = hm.state_block_size(qwen)
print(f"state {qwen.state_bytes / 2**20:.2f} MiB per layer; one token of one attention layer "
      f"{qwen.token_bytes_per_layer} bytes; block_size grows to {block_size} tokens "
      f"(page {hm.page_bytes(qwen, block_size) / 2**20:.2f} MiB, {hm.layer_groups(qwen)[0]} layers a group)")

# %% [markdown]
# That is why the design doc warns that the attention block can exceed 400 tokens for such models: the page
# is set by the state, and a short request then holds a mostly empty attention block.
#
# ## 7. Measured: memory per sequence and sequences that fit
#
# A 40 GiB KV pool, block size 16, each sequence counted once its context is computed (what a decode step
# holds; without chunked prefill a long prompt briefly holds all its blocks while it is prefilled):

# %%
from pagedkv_lib.studies.memory import GiB
from pagedkv_lib.viz.hybrid_plots import plot_kv_bytes

budget = 40 * GiB
rows = hm.capacity_table(budget_bytes=budget, block_size=16)
print(f"{'model':26s} {'context':>7s} {'MiB/seq':>8s} {'fit':>5s} {'vs full':>7s}")
for r in rows:
    print(f"{r['model']:26s} {r['context_len']:7d} {r['kv_mib']:8.0f} {r['fit']:5d} {r['vs_full']:7.2f}")
fig, ax = plt.subplots(figsize=(6, 3.6), dpi=80)
plot_kv_bytes(ax, rows)
plt.show()

# %%
at = {(r["model"], r["context_len"]): r for r in rows}
full = at[("full attention", 131072)]
local, alt = at[("5:1 local:global, W 1024", 131072)], at[("alternating, W 128", 131072)]
print(f"At 131072 tokens a sequence of the 5:1 pattern takes {full['kv_mib'] / local['kv_mib']:.1f} times "
      f"less KV memory than full attention, the alternating one {full['kv_mib'] / alt['kv_mib']:.1f} times "
      f"less: past its window a sliding layer costs nothing more, so the share of full layers (1 in 6, 1 in "
      f"2) sets the cost. In whole sequences the pool holds {local['fit']} and {alt['fit']} against "
      f"{full['fit']}, ratios of {local['vs_full']:.1f} and {alt['vs_full']:.1f}: larger, because full "
      f"attention would fit {budget / 2**20 / full['kv_mib']:.2f} sequences, rounded down to {full['fit']}.")

# %% [markdown]
# ## 8. Measured: prefix hits with and without the sliding-window rule
#
# The serving replay of notebook 15 (the engine's scheduler, preemption by recompute) runs multi-turn chats
# whose contexts outgrow a 1024-token window, over pools of 1, 2 and 8 GiB. Each turn's prompt repeats the
# previous turn; the sliding groups freed the old turn's early blocks while it decoded, and under pressure
# those are the first the pool hands out again. With the rule the next turn needs only its window's blocks;
# without it, all of them:

# %%
from pagedkv_lib.studies.hybrid_serving import hit_rates, long_chats

chats = long_chats()
lengths = [len(r.prompt) for r in chats]
print(f"{len(chats)} turns; prompts of {min(lengths)} to {max(lengths)} tokens, "
      f"{sum(n > 1024 for n in lengths)} of them longer than the 5:1 model's window")
runs = hit_rates(pool_gib=(1.0, 2.0, 8.0), block_size=16)
print(f"{'model':26s} {'pool':>6s} {'rule':>5s} {'hit rate':>8s} {'computed':>9s} {'preempt':>7s}")
for r in runs:
    print(f"{r['model']:26s} {r['pool_gib']:4.0f}GiB {str(r['rule']):>5s} {r['hit_rate']:8.1%} "
          f"{r['computed']:9,d} {r['preemptions']:7d}")

# %%
pairs = {(r["model"], r["pool_gib"], r["rule"]): r for r in runs}
for name in ("5:1 local:global, W 1024", "alternating, W 128"):
    pools = sorted({r["pool_gib"] for r in runs if r["model"] == name})
    gains = {g: pairs[(name, g, True)]["hit_rate"] - pairs[(name, g, False)]["hit_rate"] for g in pools}
    best = max(pools, key=gains.get)
    with_rule, without = pairs[(name, best, True)], pairs[(name, best, False)]
    print(f"{name}: the rule matters most at {best:.0f} GiB, {with_rule['hit_rate']:.1%} of prompt tokens "
          f"from the cache against {without['hit_rate']:.1%}; at {pools[-1]:.0f} GiB the gain is "
          f"{gains[pools[-1]]:.1%}.")

# %% [markdown]
# The rule never loses: any hit full attention's rule finds, the window's rule finds too. It wins in
# between: when memory is short enough that the pool hands out the early blocks a sliding group freed, but
# not so short that the window's own blocks go as well (in the smallest pool the 5:1 model keeps almost
# nothing either way). With room for everything the two tie.
#
# ## Exercises
#
# **139 · Sliding-window KV cache group · hard.** In `practice/139_sliding_window_manager.py`, write
# `SlidingWindowManager` over the course's `BlockPool`: `allocate_slots` (a new request's hit first, touched;
# fresh blocks; `None` and no change without room), `cache_blocks` (every full block, a duplicate too, never
# the null block), `remove_skipped_blocks` (the blocks that left the window, newest first, one reference
# each, never twice), `free`, and `find_longest_cache_hit` (from the right, within `max_length`, changing
# nothing). The docstrings state the contract. Grade it with
#
#     python practice/judge.py 139
#
# Or solve it in this notebook: replace the stub below and run the cell (`judge(139)` grades the class defined
# here on the same hidden cases). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


class SlidingWindowManager:  # your code here, in place of each NotImplementedError
    def __init__(self, pool, block_size, sliding_window, null_block):
        raise NotImplementedError

    def allocate_slots(self, request_id, num_tokens, computed_blocks=()):
        raise NotImplementedError

    def cache_blocks(self, request_id, block_hashes, num_tokens):
        raise NotImplementedError

    def remove_skipped_blocks(self, request_id, num_computed_tokens):
        raise NotImplementedError

    def free(self, request_id):
        raise NotImplementedError

    def find_longest_cache_hit(self, block_hashes, max_length):
        raise NotImplementedError


result = judge(139)

# %% [markdown]
# Once your version passes, `show_reference(139)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(139)

# %% [markdown]
# Ungraded:
#
# 1. Add a state group to the coordinator of section 5 (`KVCacheGroupSpec("state")`). What hit does the
#    request get now, and what would vLLM need to cache for a state layer to give one?
# 2. In `hit_rates`, give the 5:1 model a window of 4096: at which pool size does the rule stop mattering?
# 3. With chunked prefill, a long prompt would not hold all its sliding-window blocks at once. Which call of
#    `KVCacheCoordinator` would free them between chunks, and with which `num_computed_tokens`?
#
# ## In real systems
#
# - **vLLM's hybrid KV cache manager**, design:
#   `vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md` (written for commit 458e74e): one
#   pool, blocks of one page size; layers split into KV cache groups of equal layer counts (Gemma-3-27B's 52
#   sliding and 10 full layers: 7 groups of 10, the last padded); a mamba state padded to the attention page
#   after the attention block size is raised to hold it; a hit per group keyed by (hash, group), the
#   request's hit their intersection, full attention first.
# - **The managers**: `vllm-project/vllm@002f349:vllm/v1/core/single_type_kv_cache_manager.py`,
#   `SingleTypeKVCacheManager` (`req_to_blocks`, `allocate_new_blocks`, `cache_blocks`, `free` in reverse),
#   `FullAttentionManager.find_longest_cache_hit` (left to right), `SlidingWindowManager`
#   (`sliding_window_contiguous_blocks = cdiv(sliding_window - 1, block_size)`, the search from the right, and
#   `remove_skipped_blocks`: `last_useful_token = num_computed_tokens - sliding_window + 1`, freed blocks
#   replaced by the null block, the walk stopping at the first null one).
# - **The coordinator**: `vllm-project/vllm@00b08dc:vllm/v1/core/kv_cache_coordinator.py`,
#   `HybridKVCacheCoordinator.find_longest_cache_hit`: an iterative fixed point, each attention type
#   accepting or reducing the candidate length, full attention scanned first; `allocate_new_computed_blocks`,
#   which touches every group's hit before any group takes a fresh block (vLLM's issue #33775);
#   `UnitaryKVCacheCoordinator` for one group, `KVCacheCoordinatorNoPrefixCache` without caching. In that
#   tree a retention interval also keeps sliding-window and Mamba checkpoints sparse; the course leaves it
#   out.
# - **The block pool**: `vllm-project/vllm@002f349:vllm/v1/core/block_pool.py`, `cache_full_blocks` (no
#   de-duplication: a full block is cached even when another one already holds its hash, so that block
#   tables only grow) and `get_cached_block` (the first of the duplicates).
# - **The models**: `huggingface/transformers@008f5c8:src/transformers/models/gemma3/configuration_gemma3.py`
#   (`sliding_window_pattern` 6, "5:1"; the Gemma 3 Technical Report, arXiv:2503.19786, gives the local span
#   as 1024), `openai/gpt-oss@0568dfc:gpt_oss/torch/model.py` (`sliding_window` 128 on even layers),
#   `huggingface/transformers@008e574:src/transformers/models/qwen3_next/configuration_qwen3_next.py`
#   (every 4th layer full attention, the others linear attention); Mistral 7B's window of 4096 in all its
#   layers is in its paper (Jiang et al., arXiv:2310.06825, Table 1); Jamba's interleaving of attention and
#   Mamba layers in its (Lieber et al., arXiv:2403.19887).
#
# ## Say it in the interview
#
# Hybrid models mix layers that keep different things: full attention keeps every token, a sliding-window
# layer only the last W, a Mamba or linear-attention layer one fixed state. vLLM groups the layers by kind
# into KV cache groups with the same number of layers, so that one block has the same page size in every
# group, and serves them all from one block pool; a state is padded to the page, after the attention block
# size is raised to hold it. Each group has its own manager: the sliding-window one frees, while the
# sequence runs, every block wholly below position num_computed_tokens - W + 1, puts the null block in its
# place, and stops at the first null so nothing is freed twice; shared blocks only lose this request's
# reference. Prefix hits are per group: full attention needs every block and searches from the left, a
# sliding window needs only the ceil((W - 1) / block_size) blocks its next query reads and searches from the
# right; the request's hit is the length every group agrees on, found by letting each group cut the
# candidate until none does. I measured what that buys: past the window a sliding layer costs nothing more,
# so memory per sequence is set by the share of full layers, and under memory pressure the window's rule
# keeps prefix hits that full attention's rule loses.
#
# ## Closing note: the hybrid capacity table
#
# Sequences that fit a 40 GiB pool, by context length (the table of section 7, one column per pattern):

# %%
names = list(hm.HYBRID_MODELS)
print(f"{'context':>7s} " + " ".join(f"{n:>26s}" for n in names))
for n in (1024, 4096, 16384, 32768, 131072):
    print(f"{n:7d} " + " ".join(f"{at[(name, n)]['fit']:26d}" for name in names))
