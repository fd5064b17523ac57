# %% [markdown]
# # 03 · Slot mapping and `store_kvcache`
#
# Each step, the model computes keys and values for some new tokens, and they must land in the right rows of
# the paged cache before attention reads them. After this notebook you can compute `slot_mapping` for any
# step, by token or by block range, say which steps need a new block, write K/V by slot with
# `store_kvcache` (skipping the padding slot -1), and check that reading back through the block tables gives
# every sequence its keys in order.

# %% [markdown]
# ## Self-test
#
# 1. Block size 4, block table `[7, 2]`. What is the slot of position 5?
# 2. A decode step runs for a batch of two sequences with contexts of 7 and 4 tokens. How many entries does
#    `slot_mapping` have, and how many tokens does attention read?
# 3. Block size 16. A sequence holds 16 tokens and one more is being decoded. Does it need a new block? At
#    block size 1?
# 4. What does `store_kvcache` do with a slot of -1, and where do such slots come from?
#
# <details><summary>Answer</summary>
#
# 1. `block_table[5 // 4] * 4 + 5 % 4 = 2 * 4 + 1 = 9`.
# 2. Two entries, one per new token; attention reads all 7 + 4 = 11 tokens. `slot_mapping` covers only this
#    step's tokens, attention the whole context.
# 3. Yes: the new token is position 16, offset 0 of logical block 1. With the new token counted, the length
#    is 17 and `(17 - 1) % 16 == 0`. At block size 1 every token needs a block, and `(len - 1) % 1 == 0`
#    always holds; nano-vllm's shorthand `len % block_size == 1` never does, which is why it is wrong there.
# 4. It skips that token: nothing is written. Engines pad batches to fixed sizes (for CUDA graphs) and give
#    the padding tokens slot -1.
#
# </details>

# %% [markdown]
# ## 1. Walk the shapes
#
# One layer's cache, small enough to print: block size 4, 2 KV heads, head_dim 4, 8 physical blocks. Viewed
# as rows, it has `8 x 4 = 32` slots of `2 x 4 = 8` numbers each.
#
# ```
# k_cache [num_blocks=8, block_size=4, H_kv=2, D=4]  ==  rows [32, 8]       slot = block * 4 + offset
#
# block 0: slots  0  1  2  3       sequence A, 6 tokens, block table [7, 2]
# block 2: slots  8  9 10 11         positions 0..3 -> block 7 -> slots 28 29 30 31
# block 5: slots 20 21 22 23         positions 4..5 -> block 2 -> slots  8  9
# block 7: slots 28 29 30 31       sequence B, 3 tokens, block table [5] -> slots 20 21 22
# ```

# %%
import torch

import pagedkv_lib as pk

block_size, H_kv, D, num_blocks = 4, 2, 4, 8
k_cache = torch.full((num_blocks, block_size, H_kv, D), float("nan"))  # [N, S, H_kv, D], NaN: never written
v_cache = torch.full_like(k_cache, float("nan"))  # [N, S, H_kv, D]
tables, lens = {"A": [7, 2], "B": [5]}, {"A": 6, "B": 3}
by_hand = {"A": [28, 29, 30, 31, 8, 9], "B": [20, 21, 22]}  # the slots of the picture above
for name in tables:
    slots = pk.slot_mapping_for(tables[name], list(range(lens[name])), block_size)
    assert slots == by_hand[name]
    print(f"{name}: table {tables[name]}, slots {slots}")
print("k_cache", tuple(k_cache.shape), "viewed as rows", tuple(k_cache.view(-1, H_kv * D).shape))

# %% [markdown]
# ## 2. One prefill, two decode steps
#
# The prefill computes all 9 prompt tokens; each decode step then computes one new token per sequence. Before
# a step the scheduler counts the new token into the sequence's length (nano-vllm appends it in the previous
# step's `postprocess`), so the token being computed sits at position `len - 1`. It opens a new block exactly
# when that position is a multiple of the block size, `(len - 1) % block_size == 0`. The table below is built
# here, then compared with the library's walk (`pagedkv_lib.viz.slots.walk_example`), which draws the
# pictures further down. When B needs a block, the pool hands it block 0.

# %%
from pagedkv_lib.viz import slots as slot_viz


def walk(block_size):
    lens, tables = {"A": block_size + 2, "B": block_size - 1}, {"A": [7, 2], "B": [5]}  # 6 and 3 at size 4
    positions = {k: list(range(n)) for k, n in lens.items()}
    rows = []
    for step in ("prefill", "decode 1", "decode 2"):
        new = {k: None for k in lens}
        if step != "prefill":
            for k in lens:
                lens[k] += 1  # the token computed now is already counted
                if (lens[k] - 1) % block_size == 0:
                    tables[k].append(0)
                    new[k] = 0
            positions = {k: [n - 1] for k, n in lens.items()}
        slots = [s for k in lens for s in pk.slot_mapping_for(tables[k], positions[k], block_size)]
        rows.append((step, sum(map(len, positions.values())), slots, dict(lens), new))
    return rows


rows = walk(4)
assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
    (st.name, st.slot_mapping, st.context_lens, st.new_block) for st in slot_viz.walk_example(4)]
print(f"{'step':9s}{'tokens':>7s}  {'slot_mapping':36s}{'context_lens':20s}new block?")
for step, n, slots, ctx, new in rows:
    news = ", ".join(f"{k} gets {b}" for k, b in new.items() if b is not None) or "no"
    print(f"{step:9s}{n:7d}  {str(slots):36s}{str(ctx):20s}{news}")

# %% [markdown]
# Three rules to take from the table:
#
# - `slot_mapping` covers only the tokens computed in this step: 9, then 2, then 2 entries.
# - Attention reads the whole context, `context_lens` tokens per sequence, through the block table.
# - A sequence needs a new block exactly when the token being computed opens one: `(len - 1) % bs == 0`,
#   which for `bs >= 2` is nano-vllm's `len % bs == 1`. In decode 2, B's length is 5 and position 4 is the
#   first offset of its second logical block, so block 0 joins its table and the token goes to slot 0.
#
# The library's block manager (notebook 07) asks for a free block by the same rule before a decode step.
# With none free, `can_append` refuses exactly the lengths whose new token opens a block:

# %%
bm = pk.BlockManager(num_blocks=2, block_size=4)
bm.allocate(pk.Sequence(list(range(8)), block_size=4))  # another sequence holds both blocks: none is free
for n in range(5, 11):
    opens, ok = (n - 1) % 4 == 0, bm.can_append(pk.Sequence(list(range(n)), block_size=4))
    assert ok == (not opens)
    print(f"len {n:2d}: position {n - 1} opens a block: {opens!s:5s} | can_append: {ok}")

# %% [markdown]
# ## 3. The picture
#
# Rows are physical blocks 0 to 7, columns the offsets in a block, each cell a slot with its number. Dark
# cells are written in this step, light ones hold tokens from earlier steps, pale ones are allocated but
# empty; grey blocks are free. Blue is A, orange B.

# %%
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, 3, figsize=(9, 2.8), dpi=80)
for ax, st in zip(axes, slot_viz.walk_example(4)):
    owner, state = slot_viz.slot_states([st.tables["A"], st.tables["B"]],
                                        [st.context_lens["A"], st.context_lens["B"]], 8, 4, st.slot_mapping)
    slot_viz.draw_cache_rows(ax, owner, state, 4, title=f"{st.name}: writes {st.slot_mapping}")
fig.tight_layout()
plt.show()

# %% [markdown]
# Move it: **block size** picks 4, 16 or 256 (A then holds `block_size + 2` tokens and B `block_size - 1`,
# so the same things happen at every size), **step** picks the step. The line gives the step's
# `slot_mapping`, with runs of consecutive slots shortened to `first..last`.

# %%
walk_explorer = slot_viz.SlotWalkExplorer()
print(walk_explorer.summary_text())
walk_explorer.widget

# %% [markdown]
# ## 4. Writing by slot: `store_kvcache`
#
# The model produces `key` and `value` of shape `[T, H_kv, D]` for the step's T tokens. `store_kvcache` writes
# row `t` of each into cache row `slot_mapping[t]`, and writes nothing for a slot of -1. Decode 1 of the walk
# writes slots 10 and 23; add a padding token in the middle:
#
# ```
# token t        0     1     2            key [3, H_kv, D], value [3, H_kv, D]
# slot_mapping  10    -1    23
# k_cache rows  10 <- key[0]   (token 1 writes nothing)   23 <- key[2]     k_cache viewed as [32, H_kv * D]
# ```
#
# The caches start as NaN, so a row written by mistake, or one left unwritten, shows at once. The library's
# `store_kvcache`, checked against that picture:

# %%
gen = torch.Generator().manual_seed(0)
key, value = torch.randn(3, H_kv, D, generator=gen), torch.randn(3, H_kv, D, generator=gen)  # [T, H_kv, D]
slot_mapping = torch.tensor([10, -1, 23], dtype=torch.int32)  # decode 1, plus one padding token
pk.store_kvcache(key, value, k_cache, v_cache, slot_mapping)
rows = k_cache.view(-1, H_kv * D)  # [N * S, H_kv * D]: one row per slot
written = (~rows.isnan().all(dim=1)).nonzero().flatten().tolist()
assert written == [10, 23] and torch.equal(rows[[10, 23]], key[[0, 2]].flatten(1))
print("rows written:", written, "- row 10 holds token 0's keys, row 23 token 2's; token 1 wrote nothing")

# %% [markdown]
# How to write it is exercise 124; the library's own version opens once yours passes (`show_reference`,
# after the exercises).
#
# **Coming from a class-based cache.** Some tutorials and books wrap the cache in a `PagedKVCache` class with
# per-layer `write(layer, slot_mapping, k, v)` and `gather(layer, block_table, seq_len)`. In the course's
# terms, the class holds `kv_cache [2, L, N, S, H_kv, D]`; `write` is
# `store_kvcache(k, v, kv_cache[0, layer], kv_cache[1, layer], slot_mapping)`, and `gather` is
# `gather_kv(kv_cache[0, layer], block_table, seq_len)` for K and the same on `kv_cache[1, layer]` for V
# (notebook 04 reads through the block table).

# %% [markdown]
# ## 5. The whole walk, checked
#
# Now run the three steps for real at block sizes 4, 16 and 256: random K/V for every token, `store_kvcache`
# with each step's `slot_mapping`, and at the end read every sequence back through its block table (drop the
# tail of the last block) and compare with the K/V it was given, token by token.

# %%
def run_walk(block_size, seed=0):
    gen = torch.Generator().manual_seed(seed)
    steps = slot_viz.walk_example(block_size)
    final = steps[-1].context_lens
    keys = {k: torch.randn(n, H_kv, D, generator=gen) for k, n in final.items()}  # [n, H_kv, D] per sequence
    k_cache = torch.full((8, block_size, H_kv, D), float("nan"))  # [N, S, H_kv, D]
    v_cache = torch.full_like(k_cache, float("nan"))  # values are not checked here
    for st in steps:
        key = torch.cat([keys[k][st.positions[k]] for k in ("A", "B")])  # [T, H_kv, D]
        pk.store_kvcache(key, key, k_cache, v_cache, torch.tensor(st.slot_mapping, dtype=torch.int32))
    for k, n in final.items():
        table = steps[-1].tables[k]
        back = k_cache[table].reshape(-1, H_kv, D)[:n]  # [n, H_kv, D]: blocks in table order, tail cut
        assert torch.equal(back, keys[k])
    return {k: steps[-1].tables[k] for k in final}, final


for bs in (4, 16, 256):
    tables_bs, final = run_walk(bs)
    print(f"block size {bs:3d}: tables {tables_bs}, lengths {final}: every token read back in order")

# %% [markdown]
# ## 6. Slots by block range: `compute_slot_mapping`
#
# `slot_mapping_for` computes one slot per position. Engines build the prefill's slots one block at a time
# instead (nano-vllm's `prepare_prefill`): a range of consecutive slots per logical block. Two cases need
# care: the first block may start mid-block (the first tokens were a prefix-cache hit, or the first half of
# a chunked prefill), and the last may end mid-block.
#
# ```
# block table [7, 2, 5], block size 4, positions 5..10 (the second chunk of an 11-token prefill)
# logical block      0           |      1           |      2
# positions      0  1  2  3      |  4 [5  6  7]     | [8  9 10] 11
# slots                          |     9 10 11      | 20 21 22
#                                   starts mid-block    ends mid-block
# ```

# %%
table = [7, 2, 5]
for start, end in [(0, 11), (5, 11), (4, 8), (2, 3), (6, 6)]:
    per_block = pk.compute_slot_mapping(table, start, end, 4)
    assert per_block == pk.slot_mapping_for(table, list(range(start, end)), 4)
    print(f"positions range({start}, {end}): {per_block}")
assert all(pk.compute_slot_mapping(table, s, e, 4) == pk.slot_mapping_for(table, list(range(s, e)), 4)
           for s in range(13) for e in range(s, 13))
print("equal to the per-position slots for every start and end in 0..12")

# %% [markdown]
# ## Exercises
#
# **122 · Slot mapping · easy.** `slot_mapping_for(block_table, positions, block_size) -> list[int]` in
# `practice/122_slot_mapping.py`.
#
# **123 · Slot ranges per block · medium.** `compute_slot_mapping(block_table, start, end, block_size) ->
# list[int]` in `practice/123_slot_ranges.py`: positions `start..end-1`, one block range at a time.
#
# **124 · store_kvcache · easy.** `store_kvcache(key, value, k_cache, v_cache, slot_mapping)` in
# `practice/124_store_kvcache.py`: in place, slot -1 skipped.
#
#     python practice/judge.py 122
#     python practice/judge.py 123
#     python practice/judge.py 124
#
# Or solve them here: fill in a function below and run its cell. `judge(122)` grades the names defined in
# this notebook on the same hidden cases (until you do, it reports *not implemented*).

# %%
from pagedkv_lib.judge import judge


def slot_mapping_for(block_table, positions, block_size):
    raise NotImplementedError  # your code here


result = judge(122)

# %%
def compute_slot_mapping(block_table, start, end, block_size):
    raise NotImplementedError  # your code here


result = judge(123)

# %%
def store_kvcache(key, value, k_cache, v_cache, slot_mapping):
    raise NotImplementedError  # your code here


result = judge(124)

# %% [markdown]
# Once your version passes, `show_reference` prints the library's, to compare with yours (until then it says
# what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

for exercise in (122, 123, 124):
    show_reference(exercise)

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/engine/model_runner.py`): `prepare_prefill` covers positions
#   `[num_cached_tokens, num_cached_tokens + num_scheduled_tokens)` only, one block range at a time, like
#   `compute_slot_mapping`; `prepare_decode` writes one slot per sequence,
#   `block_table[-1] * block_size + last_block_num_tokens - 1`, correct because `last_block_num_tokens` is
#   in `[1, block_size]`, never 0. The Triton `store_kvcache_kernel` (`nanovllm/layers/attention.py`) runs one
#   program per token and returns at once when `slot == -1`; CUDA-graph padding rows get slot -1 and
#   context length 0.
# - **vLLM** (`vllm/v1/worker/block_table.py`): `BlockTable.compute_slot_mapping` is a Triton kernel computing
#   `block_table[req, pos // bs] * bs + pos % bs` for every scheduled token; one extra program fills the rest
#   with `PAD_SLOT_ID = -1`. Block tables are int32, `slot_mapping` int64. The cache writers
#   (`reshape_and_cache*` in `csrc/cache_kernels.cu`) skip `slot_idx < 0`.
# - **PyTorch**'s experimental `PagedAttention.assign` computes the same address,
#   `page_table[b, pos // page_size] * page_size + pos % page_size`, and writes `k_cache[:, :, addr, :]`.
# - **A bug that shipped**: Wenyueh/MinivLLM, derived from nano-vllm, computed the wrong decode slot whenever
#   the length was an exact multiple of the block size (issue #76, "Wrong decode slot_mapping when sequence
#   length is a multiple of block_size"), fixed by PR #77 (PR #83, a second fix, was closed unmerged).
#   Notebook 06 reproduces this family of off-by-one bugs.
#
# ## Say it in the interview
#
# A token at position `p` lives in slot `block_table[p // bs] * bs + p % bs`, a row of the cache viewed as
# `[num_blocks * block_size, H_kv * D]`. Each step, `slot_mapping` lists one slot per token computed in that
# step, while attention reads the whole context through the block table. In decode the new token is already
# counted in the length, so it sits at `len - 1` and needs a new block exactly when `(len - 1) % bs == 0`.
# `store_kvcache` scatters K and V rows by slot and skips -1, the slot of padding tokens. Prefill slots are
# computed per block range; the first range may start mid-block after a prefix hit or a chunk, and the last
# may end mid-block.
