# %% [markdown]
# # 08 · Fork and copy-on-write
#
# Parallel sampling asks for `n > 1` completions of one prompt. The prompt's K/V are the same for all of
# them, so the samples can share its blocks and copy only what they actually write to. After this notebook you
# can fork a block table (one more reference per block, nothing copied), apply copy-on-write when a sequence
# writes into a block it shares (allocate, copy K and V of every layer, swap, drop a reference), check the
# result against a per-token reference, and explain why vLLM V1 shares only full blocks instead.

# %% [markdown]
# ## Self-test
#
# 1. A 10-token prompt, block size 4, is sampled `n = 3` times. After forking, what are the ref counts of its
#    blocks, and how many bytes of K/V were copied?
# 2. The first sample writes its first generated token. Where does it go, and what must happen first?
# 3. Two samples have done that. The third writes its first token into the same logical block: does it copy?
# 4. Why must the copy cover every layer?
# 5. Why does vLLM V1 need no copy-on-write at all?
#
# <details><summary>Answer</summary>
#
# 1. Three blocks, each with ref count 3; nothing copied: forking duplicates a list of block ids.
# 2. Position 10, offset 2 of logical block 2, a partial block shared by 3 tables. Copy-on-write: allocate a
#    block, copy the shared block's K and V into it, put it in the sample's table, drop one reference to the
#    old block; then write at offset 2 of the new block.
# 3. No. The two copies dropped block 2 to ref count 1: the third holds the only reference and writes in
#    place.
# 4. A block id names the same block in every layer's cache (`kv_cache [2, L, N, S, H_kv, D]`). Swapping the
#    id in the table swaps it for all layers, so all layers' K/V of the positions already in the block must be
#    copied.
# 5. It shares only full blocks (through the prefix cache). A full block is never written again, and each
#    sample holds its own partial last block, so no shared block is ever written.
#
# </details>

# %% [markdown]
# ## 1. One prompt, in a whole model's cache
#
# A model's cache is one tensor `kv_cache [2, L, N, S, H_kv, D]` (nano-vllm's layout); `kv_cache[0, l]` and
# `kv_cache[1, l]` are layer `l`'s `k_cache` and `v_cache`. Unwritten slots hold NaN. The prefill of a
# 10-token prompt takes 3 blocks and writes positions 0..9 in every layer.

# %%
import torch

import pagedkv_lib as pk

L, N, S, H_kv, D = 2, 8, 4, 2, 4  # layers, blocks, block size, KV heads, head_dim
pool = pk.BlockPool(N)
kv_cache = pk.allocate_kv_cache(L, N, S, H_kv, D, fill=float("nan"))  # [2, L, N, S, H_kv, D]
parent = pool.allocate(3)  # a 10-token prompt at block size 4
prompt_kv = torch.randn(2, L, 10, H_kv, D, generator=torch.Generator().manual_seed(0))  # [2, L, 10, H_kv, D]
slots = torch.tensor(pk.compute_slot_mapping(parent, 0, 10, S), dtype=torch.int32)  # [10]
for layer in range(L):
    k_cache, v_cache = pk.layer_caches(kv_cache, layer)  # each [N, S, H_kv, D]
    pk.store_kvcache(prompt_kv[0, layer], prompt_kv[1, layer], k_cache, v_cache, slots)
print("parent table", parent, "| slots", slots.tolist(), "| free", pool.num_free())

# %% [markdown]
# ## 2. Fork: share every block
#
# `BlockPool.fork(table)` returns a new list with the same block ids and adds one reference to each. Two
# forks make three tables over the same three blocks; no K/V moves.

# %%
children = [pool.fork(parent) for _ in range(2)]
print("tables:", parent, children)
print("ref counts:", [pool.ref_count(b) for b in range(N)], "| free", pool.num_free())

# %% [markdown]
# The same moment as a picture (tables on top, an arrow per entry into the pool; a shared block shows its
# ref count). The picture replays the same script on its own pool: parent `P`, samples `S1`, `S2`.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.prefix_cache import draw_tables_figure
from pagedkv_lib.viz.sharing import PARALLEL_SAMPLING, cow_frames

frames = cow_frames(num_blocks=8, block_size=4, ops=PARALLEL_SAMPLING)
fig = plt.figure(figsize=(8, 2.8), dpi=80)
draw_tables_figure(fig, frames[3], "after two forks: three tables, three blocks, ref count 3 each")
plt.show()

# %% [markdown]
# ## 3. Copy-on-write, by hand
#
# Sample 1 now makes room for its token at position 10. Position 10 is inside logical block 2 (offset 2),
# and that block is shared: writing there would change what the other two read. So:
#
# ```
# before   S1: [0, 1, 2]        block 2: ref 3, holds positions 8, 9
# 1. new = allocate(1)          a private block
# 2. kv_cache[:, :, new] = kv_cache[:, :, 2]      K and V, every layer
# 3. S1[-1] = new               the table now points at the copy
# 4. free([2])                  block 2: ref 2
# after    S1: [0, 1, new]      write position 10 at slot new * 4 + 2
# ```

# %%
table, n = children[0], 10
old = table[-1]
assert n % S != 0 and pool.ref_count(old) > 1  # position n falls inside a block someone else holds too
new = pool.allocate(1)[0]
kv_cache[:, :, new] = kv_cache[:, :, old]  # [2, L, S, H_kv, D]: K and V, every layer
table[-1] = new
pool.free([old])
slot_s1 = new * S + n % S
print("S1", table, "| slot", slot_s1, "| ref counts", [pool.ref_count(b) for b in range(N)])

# %% [markdown]
# The library's `append_slot(pool, kv_cache, block_table, num_tokens, block_size)` does the same three cases
# in one call: a position that starts a block gets a new block; a position inside a shared block gets a copy;
# otherwise the token is written in place. Sample 2 goes through it, then the parent, who by then holds the
# only reference to block 2.

# %%
slot_s2 = pk.append_slot(pool, kv_cache, children[1], 10, S)
print("S2", children[1], "| slot", slot_s2, "| ref counts", [pool.ref_count(b) for b in range(N)])
slot_p = pk.append_slot(pool, kv_cache, parent, 10, S)
print("P ", parent, "| slot", slot_p, "| ref counts", [pool.ref_count(b) for b in range(N)],
      "| free", pool.num_free())

# %% [markdown]
# ## 4. Check: every sample reads its prompt and its own token
#
# Write each sequence's new token (different K/V per sample) at the slot it was given, then read positions
# 0..10 back through each table, in every layer, and compare with a per-token reference: the prompt's K/V
# followed by that sample's own token.

# %%
g = torch.Generator().manual_seed(1)
new_kv = torch.randn(3, 2, L, 1, H_kv, D, generator=g)  # [3 sequences, K/V, L, 1 token, H_kv, D]
seqs = {"P": (parent, slot_p), "S1": (children[0], slot_s1), "S2": (children[1], slot_s2)}
for (_, slot), kv in zip(seqs.values(), new_kv):
    one_slot = torch.tensor([slot], dtype=torch.int32)
    for layer in range(L):
        pk.store_kvcache(kv[0, layer], kv[1, layer], *pk.layer_caches(kv_cache, layer), one_slot)
for (name, (table, _)), kv in zip(seqs.items(), new_kv):
    expected = torch.cat([prompt_kv, kv], dim=2)  # [2, L, 11, H_kv, D]
    got = torch.stack([torch.stack([pk.gather_kv(kv_cache[i, layer], table, 11) for layer in range(L)])
                       for i in range(2)])  # [2, L, 11, H_kv, D]
    print(f"{name:2s} {table}: reads its prompt and its own token, every layer: {torch.equal(got, expected)}")

# %% [markdown]
# ## 5. The bug the judge looks for: a new block without the copy
#
# Take a private block but skip step 2, and the sample's positions 8 and 9 now read whatever the new block
# held: NaN here, another request's stale K/V in an engine.

# %%
pool2 = pk.BlockPool(N)
kv2 = pk.allocate_kv_cache(L, N, S, H_kv, D, fill=float("nan"))
p2 = pool2.allocate(3)
for layer in range(L):
    pk.store_kvcache(prompt_kv[0, layer], prompt_kv[1, layer], *pk.layer_caches(kv2, layer), slots)
child = pool2.fork(p2)
new = pool2.allocate(1)[0]  # BUGGY on purpose: no kv2[:, :, new] = kv2[:, :, child[-1]]
pool2.free([child[-1]])
child[-1] = new
seen = pk.gather_kv(kv2[0, 0], child, 10)[8:, 0, 0].tolist()
print("the child reads at positions 8, 9 (layer 0, K, head 0, dim 0):", seen)

# %% [markdown]
# ## 6. The whole script, step by step
#
# Parent `P` and samples `S1`, `S2`: fork twice, each writes its first token (two copies, then one write in
# place), `S1` writes two more (in place, then a new block), and `S2` finishes, returning its private block
# and one reference to each shared block.

# %%
from pagedkv_lib.viz.prefix_cache import TablesStepper

stepper = TablesStepper(frames)
for i in range(4, len(frames)):
    print(stepper.describe(i))
stepper.widget

# %% [markdown]
# ## 7. vLLM V1: share only full blocks
#
# vLLM V1 has no copy-on-write. It turns the `n` samples into `n` requests for the same prompt, and prefix
# caching (notebook 07) gives them the prompt's FULL blocks; each request computes its own partial last block.
# Shared blocks are full, full blocks are never written, so nothing is ever copied and block tables only grow
# at the end. With the library's `BlockManager`:

# %%
prompt = list(range(100, 110))
bm = pk.BlockManager(num_blocks=8, block_size=4)
samples = [pk.Sequence(prompt, block_size=4, seq_id=i) for i in range(3)]
for seq in samples:
    bm.allocate(seq)
print([s.block_table for s in samples], "| ref counts", [b.ref_count for b in bm.blocks])
print("tokens each computes:", [s.num_tokens - s.num_cached_tokens for s in samples])

# %% [markdown]
# The trade, for these 3 samples of a 10-token prompt:
#
# ```
#                         blocks after prompt   blocks after 1st token   K/V copied   prompt tokens recomputed
# fork + copy-on-write    3                     5                        2 blocks     0
# full blocks only (V1)   5                     5                        0            2 + 2 (samples 2 and 3)
# ```
#
# The price of V1's choice is recomputing up to `block_size - 1` tokens per extra sample (at 16-token blocks,
# at most 15), in exchange for append-only tables and one mechanism (the prefix cache) instead of two.

# %%
from pagedkv_lib.viz.prefix_cache import manager_frames

v1 = manager_frames(8, 4, [("allocate", name, prompt) for name in ("P", "S1", "S2")])
fig = plt.figure(figsize=(8, 2.8), dpi=80)
draw_tables_figure(fig, v1[-1], "vLLM V1 style: full blocks shared, each sample owns its partial block")
plt.show()

# %% [markdown]
# ## Exercises
#
# **127 · Block pool, fork and copy-on-write · medium.** In `practice/127_block_pool_cow.py`, next to the
# `BlockPool` of notebook 02 (`num_free`, `ref_count`, `allocate`, `free`, `fork`), write
# `append_slot(pool, kv_cache, block_table, num_tokens, block_size)`, the step of section 3: a position that
# starts a block gets a new block; a position inside a shared block gets a copy-on-write (K and V of every
# layer, the copy put in the table's last place, one reference to the old block dropped); otherwise nothing
# moves. It returns the slot of position `num_tokens`, or `None` with nothing changed when no block is free.
# Grade it with
#
#     python practice/judge.py 127
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(127)` grades the `BlockPool`
# and `append_slot` defined in this notebook on the same hidden cases (`%judge 127` does the same after
# `%load_ext pagedkv_lib.judge`). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


class BlockPool:
    def __init__(self, num_blocks):
        raise NotImplementedError  # your BlockPool of notebook 02 here


def append_slot(pool, kv_cache, block_table, num_tokens, block_size):
    raise NotImplementedError  # your code here


result = judge(127)

# %% [markdown]
# Once your version passes, `show_reference(127)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(127)

# %% [markdown]
# ## In real systems
#
# - **The PagedAttention paper** (section 4.4) introduced copy-on-write at block granularity for parallel
#   sampling and beam search. vLLM V0's `BlockSpaceManager` (`vllm/core/block_manager.py`) implemented it:
#   `append_slot` returned the (source, destination) pair of a copy-on-write, and the worker copied those
#   blocks before the forward pass.
# - **vLLM V1** dropped it: parallel sampling fans a request out into child requests
#   (`vllm/v1/engine/parallel_sampling.py`, `ParentRequest`), and the prefix cache shares their full blocks.
#   `vllm/v1/core/block_pool.py` does not even merge identical full blocks, "so that ... block tables are
#   append-only".
# - **Ref counts are where fork goes wrong**: vLLM #1556 / PR #3347, `fork` added one reference per table
#   entry rather than per distinct block, and with sliding windows (where a table can hold the same block
#   twice) that ended in a double free; #42571, a block passed twice to `free_blocks` was queued twice. The
#   library's `BlockPool.free` counts repeats and refuses to drop more references than a block has.
# - **nano-vllm** has no fork: `n > 1` is `n` sequences, and its prefix cache shares their full blocks, like
#   vLLM V1.
#
# ## Say it in the interview
#
# Parallel sampling forks the prompt's block table: the samples point at the same physical blocks and each
# block's ref count goes up by one, so the prompt costs memory once. When a sample writes into a block it
# shares, which happens only in the partial last block, it copies that block first (K and V, every layer),
# swaps the copy into its table and drops one reference; the last holder writes in place. vLLM V1 avoids
# copy-on-write altogether by sharing only full blocks through the prefix cache and letting each sample
# recompute its partial block, which keeps block tables append-only at the cost of up to `block_size - 1`
# recomputed tokens per sample.
