# %% [markdown]
# # 07 · Prefix caching
#
# Many requests start with the same tokens: a system prompt, a few-shot preamble, the earlier turns of a chat.
# Their K/V are the same too, so an engine can compute them once and let every request that repeats them point
# its block table at the same physical blocks. After this notebook you can find those blocks with chained
# block hashes, run nano-vllm's `BlockManager` interface (`can_allocate`, `allocate`, `deallocate`,
# `can_append`, `may_append`), follow one physical block through its life, and avoid three bugs that real
# engines shipped.

# %% [markdown]
# ## Self-test
#
# 1. Why does the hash of block `i` include the hash of block `i - 1`, instead of block `i`'s tokens alone?
# 2. Why are only full blocks hashed?
# 3. An 8-token prompt is entirely in the cache (block size 4). How many of its tokens does the prefill
#    compute?
# 4. A request finishes and its blocks drop to `ref_count` 0. Is its prefix lost to the cache?
# 5. Why does `deallocate` free a sequence's blocks last block first?
#
# <details><summary>Answer</summary>
#
# 1. A token's K/V depend on every token before it. The same 4 tokens after a different prefix have different
#    K/V, so the hash must name the whole prefix: chaining makes it do so.
# 2. A partial block still receives tokens. A request that shared it would see the next tokens of another
#    request, and could not write its own there (notebook 08 shows what sharing a partial block costs).
# 3. Four. A hit is capped at `num_tokens - 1 = 7` tokens, which rounds down to one block, so the last block
#    is recomputed: the step needs at least one token to compute, whose logits give the next token.
# 4. No. Its blocks go to the free queue with their hash and tokens kept; a later request with the same prefix
#    takes them back. The hash is dropped only when the block is handed out for other tokens.
# 5. Blocks are handed out from the front of the free queue. Freeing the tail first puts the prefix blocks,
#    the ones most likely to be hit again, behind it: they are reused last.
#
# </details>

# %% [markdown]
# ## 1. The manager's state
#
# nano-vllm's `BlockManager` (`nanovllm/engine/block_manager.py`) keeps one `Block` per physical block, with
# three fields, and three structures over them:
#
# ```
# Block: ref_count   how many block tables hold it
#        hash        chained hash of its tokens, -1 if not full (or not yet hashed)
#        token_ids   its tokens, compared on every hit
# hash_to_block_id   hash -> block id: where to find a prefix
# free_block_ids     deque, handed out from the front, freed blocks appended at the end
# used_block_ids     set of blocks with ref_count > 0
# ```

# %%
import pagedkv_lib as pk

bm = pk.BlockManager(num_blocks=8, block_size=4)
print(bm.blocks[:3])
print("free", list(bm.free_block_ids), "| used", bm.used_block_ids, "| hash_to_block_id", bm.hash_to_block_id)

# %% [markdown]
# ## 2. Chained hashes, for full blocks only
#
# `h_i = xxh64(h_{i-1} as 8 little-endian bytes, token_ids of block i as int64)`; block 0 has no parent. A
# partial last block gets no hash (`-1`) and can never be hit. Built here with `xxhash` and checked against
# the library:

# %%
import numpy as np
import xxhash


def compute_hash(token_ids, prefix=-1):
    h = xxhash.xxh64()
    if prefix != -1:
        h.update(prefix.to_bytes(8, "little"))
    h.update(np.array(token_ids, dtype=np.int64).tobytes())
    return h.intdigest()


system = [100, 101, 102, 103, 104, 105, 106, 107]  # a system prompt: two full blocks at block size 4
h0 = compute_hash(system[:4])
h1 = compute_hash(system[4:], h0)
assert (h0, h1) == (pk.BlockManager.compute_hash(system[:4]), pk.BlockManager.compute_hash(system[4:], h0))
print(f"block 0: {h0:#018x}\nblock 1: {h1:#018x}")
print("same 4 tokens, other parent, same hash?", compute_hash(system[4:], compute_hash([1, 2, 3, 4])) == h1)

# %% [markdown]
# ## 3. Two requests sharing a system prompt
#
# A (11 tokens) and B (10 tokens) both start with the 8-token system prompt. A is allocated first: three fresh
# blocks, the two full ones registered in `hash_to_block_id`. B walks its full blocks, finds both (hash AND
# tokens equal), and takes them with `ref_count + 1`; only its partial last block is new. B's prefill computes
# 2 tokens instead of 10 (`num_cached_tokens = 8`, notebook 06).
#
# The manager does not count references itself: it owns the `BlockPool` of notebook 02 (`bm.pool`: free
# queue and reference counts) and adds only what prefix caching needs, each block's hash and tokens and the
# `hash_to_block_id` map. A hit is one more reference on a block (`pool.touch`), a miss a block from the
# front of the free queue (`pool.allocate(1)`), and `deallocate` hands the references back (`pool.free`).

# %%
bm = pk.BlockManager(num_blocks=8, block_size=4)
A = pk.Sequence(system + [201, 202, 203], block_size=4, seq_id=0)
B = pk.Sequence(system + [301, 302], block_size=4, seq_id=1)
for seq in (A, B):
    assert bm.can_allocate(seq)
    bm.allocate(seq)
    print(seq)
print("ref counts:", [b.ref_count for b in bm.blocks], "| free:", list(bm.free_block_ids))
print("B's prefill computes positions", pk.prepare_prefill([B]).positions.tolist())

# %% [markdown]
# The picture: each table's logical blocks on top (bold = a prefix-cache hit), an arrow to the physical block
# it points to; in the pool, shared blocks show their `ref_count` and the first hex digits of their hash, free
# blocks their place in the free queue (`q0` is handed out next).

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.prefix_cache import STORY, draw_tables_figure, manager_frames

frames = manager_frames(num_blocks=8, block_size=4, ops=STORY)  # the story of this notebook, replayed
fig = plt.figure(figsize=(8, 2.8), dpi=80)
draw_tables_figure(fig, frames[2], "A and B share the two blocks of their system prompt")
plt.show()

# %% [markdown]
# Does B read the right K/V? An independent check needs K/V that depend on the whole prefix, as a
# transformer's do. A stand-in: token `p`'s "key" is a number computed from tokens `0..p`. Each prefill
# computes and stores only its uncached positions; then we read B's keys back through its block table and
# compare them with B's keys computed from scratch, position by position.

# %%
import torch


def fake_key(tokens):  # depends on every token up to this one, like a real layer's K
    return float(sum((i + 1) * t for i, t in enumerate(tokens)) % 9973)


def prefill(seq, k_cache):  # compute and store the keys of the positions this step computes
    inputs = pk.prepare_prefill([seq])
    k = torch.tensor([fake_key(seq.token_ids[: p + 1]) for p in inputs.positions.tolist()]).view(-1, 1, 1)
    pk.store_kvcache(k, k, k_cache, torch.empty_like(k_cache), inputs.slot_mapping)


def reads_right(seq, k_cache):  # what attention reads through the table == computed from scratch?
    got = pk.gather_kv(k_cache, seq.block_table, seq.num_tokens).flatten().tolist()
    return got == [fake_key(seq.token_ids[: p + 1]) for p in range(seq.num_tokens)]


k_cache = torch.full((8, 4, 1, 1), float("nan"))  # [N, S, H_kv, D]: one number per slot
for seq in (A, B):
    prefill(seq, k_cache)
print("A reads right:", reads_right(A, k_cache), "| B reads right:", reads_right(B, k_cache))

# %% [markdown]
# ## 4. A hit compares the tokens too
#
# A 64-bit hash can collide, and a dictionary entry can be stale (section 8). So a hit needs
# `hash_to_block_id[h]` AND `blocks[id].token_ids == token_ids`. Forge a collision: point the hash of an
# unseen block at A's first block. The token check refuses the hit.

# %%
other = [7, 7, 7, 7]
bm.hash_to_block_id[pk.BlockManager.compute_hash(other)] = A.block_table[0]  # a forged collision
E = pk.Sequence(other + [1], block_size=4, seq_id=4)
bm.allocate(E)
print(E, "| block", A.block_table[0], "holds", bm.blocks[A.block_table[0]].token_ids)

# %% [markdown]
# ## 5. Finished requests leave their prefix behind
#
# `deallocate` walks the table in reverse and drops one reference per block; a block reaching 0 goes to the
# END of the free queue, keeping its hash and tokens. Freeing the tail first leaves the prefix blocks at the
# very end of the queue, the last to be reused. A request C with the same system prompt, arriving after A and
# B are gone, takes the two blocks back from the free queue: `can_allocate` counts them as needed free blocks
# (they must leave the queue), `allocate` marks them as hits.

# %%
bm = pk.BlockManager(num_blocks=8, block_size=4)
A = pk.Sequence(system + [201, 202, 203], block_size=4, seq_id=0)
B = pk.Sequence(system + [301, 302], block_size=4, seq_id=1)
for seq in (A, B):
    bm.allocate(seq)
for seq in (A, B):
    bm.deallocate(seq)
    print(f"{'AB'[seq.seq_id]} done: free queue {list(bm.free_block_ids)}")
print("still findable:", {f"{h:#06x}"[:6]: b for h, b in bm.hash_to_block_id.items()})
C = pk.Sequence(system + [401], block_size=4, seq_id=2)
bm.allocate(C)
print(C, "| free queue", list(bm.free_block_ids))

# %% [markdown]
# ## 6. Decode: `can_append` and `may_append`
#
# Before each decode step the scheduler asks `can_append(seq)` (is a free block available if the new token
# starts one?) and calls `may_append(seq)`, which adds that block, and hashes the last block once it is full,
# so generated text can be hit too. (`len(seq)` already counts the new token; notebook 06 has the timing.)

# %%
for token in (402, 403, 404, 405):
    C.append_token(token)  # postprocess of the step before
    assert bm.can_append(C)
    bm.may_append(C)
    last = bm.blocks[C.block_table[-1]]
    print(f"len {len(C):2d}: table {C.block_table}, last block holds {last.token_ids or '(not hashed yet)'}, "
          f"{len(bm.hash_to_block_id)} hashes known")

# %% [markdown]
# ## 7. The life of one physical block
#
# The story of this notebook as a script of arrivals and departures on 8 blocks: A and B share the system
# prompt, both finish, C finds it in the free queue, C finishes, then D, a long unrelated prompt, needs every
# block. Block 0 holds the first block of the system prompt; it goes
#
# ```
# free -> allocated (A) -> shared (A, B) -> allocated (B) -> released -> allocated (C, a hit)
#      -> released -> allocated (D: stale hash dropped, new tokens) -> free
# ```
#
# "Released" means `ref_count` 0, in the free queue, but still found by its hash. D takes block 0 last because
# the reverse freeing left it at the end of the queue; D's last, partial block lands there, so the block holds
# no hash when D is done.

# %%
from pagedkv_lib.viz.prefix_cache import plot_block_lifecycle

for f in frames:
    print(f"{f.event:10s} block 0: {f.states[0]:9s} ref {f.ref_counts[0]} | {f.description}")
fig, ax = plt.subplots(figsize=(8, 2.4), dpi=80)
plot_block_lifecycle(ax, frames, block=0)
fig.tight_layout()
plt.show()

# %% [markdown]
# Step through the same story with the whole pool in view (tables on top, arrows to the blocks they use):

# %%
from pagedkv_lib.viz.prefix_cache import TablesStepper

stepper = TablesStepper(frames)
print(stepper.describe(len(frames) - 2))
stepper.widget

# %% [markdown]
# ## 8. Three bugs real engines shipped
#
# ### A reused block with a stale hash entry (nano-vllm #163)
#
# When a released block is handed out for new tokens, its old `hash -> id` entry still points at it. nano-vllm
# before commit `f64d821` left the entry in place. The token check does not always save it: if the block's new
# tokens equal the old ones but follow a different prefix, the entry hits and the request reads K/V computed
# after the wrong prefix. Below, X = P1 + T and Y = Q + P2 + T leave block 1 holding T (computed after Q, P2)
# while the stale entry for "T after P1" still points at it; then Z = P1 + T + one token arrives. The variant
# `StaleEntries` is the library's manager with the fix removed, and it is BUGGY on purpose.

# %%
class StaleEntries(pk.BlockManager):  # BUGGY on purpose: reuses a block without dropping its old entry
    def _evict(self, block_id):
        self.blocks[block_id].reset()


P1, P2, Q, T = [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [40, 41, 42, 43]
for manager in (pk.BlockManager(4, 4), StaleEntries(4, 4)):
    k_cache = torch.full((4, 4, 1, 1), float("nan"))
    for i, tokens in enumerate((P1 + T, Q + P2 + T)):  # X, then Y; each runs and finishes
        seq = pk.Sequence(tokens, block_size=4, seq_id=10 + i)
        manager.allocate(seq)
        prefill(seq, k_cache)
        manager.deallocate(seq)
    Z = pk.Sequence(P1 + T + [99], block_size=4, seq_id=12)
    manager.allocate(Z)
    prefill(Z, k_cache)
    print(f"{type(manager).__name__:13s} Z: table {Z.block_table}, {Z.num_cached_tokens} tokens cached, "
          f"reads right: {reads_right(Z, k_cache)}")

# %% [markdown] The fix (nano-vllm `f64d821`, and the library's `BlockManager._evict`): when a block
# leaves the free queue, delete `hash_to_block_id[block.hash]` if it still points at this block. vLLM's pool
# does it in `_maybe_evict_cached_block`, on every block it hands out; the library's pool likewise calls the
# manager's `_evict` (its `on_evict` hook) on each block `allocate` takes, so no caller can forget it.
#
# ### A fully cached prompt leaves nothing to compute (nano-vllm #114, #144)
#
# If every block of a block-aligned prompt hits, `num_cached_tokens == num_tokens`: the step has zero query
# tokens for that sequence, and FlashAttention failed with "invalid configuration argument". The library caps
# a hit at `num_tokens - 1` tokens as vLLM does (`max_cache_hit_length = num_tokens - 1`), which with block
# alignment recomputes the whole last block. Without the cap, `prepare_prefill` has nothing to do:

# %%
bm = pk.BlockManager(num_blocks=8, block_size=4)
first, second = pk.Sequence(system, block_size=4, seq_id=20), pk.Sequence(system, block_size=4, seq_id=21)
bm.allocate(first)
bm.allocate(second)
print(second, "computes positions", pk.prepare_prefill([second]).positions.tolist())
uncapped = pk.Sequence(system, block_size=4, seq_id=22)
uncapped.block_table, uncapped.num_cached_tokens = [0, 1], 8  # what an uncapped hit would give
try:
    pk.prepare_prefill([uncapped])
except ValueError as e:
    print("ValueError:", e)

# %% [markdown]
# nano-vllm's HEAD fixes it differently: `can_allocate` scans only the first `num_blocks - 1` blocks, so the
# last block is never matched. Both recompute the last block.
#
# ### Identical prefixes admitted in the same step (nano-vllm #219)
#
# The library, like classic nano-vllm, registers a full block's hash when the block is allocated. Two
# identical prompts admitted in the same step therefore share: the second hits blocks whose K/V the first
# computes in this very step. That is correct only because the forward pass writes every token's K/V
# (`store_kvcache`) before any attention in the same layer reads the cache.

# %%
bm = pk.BlockManager(num_blocks=8, block_size=4)
twins = [pk.Sequence(system + [9, 9], block_size=4, seq_id=30 + i) for i in range(2)]
for seq in twins:
    bm.allocate(seq)
print(twins, "\nref counts:", [b.ref_count for b in bm.blocks[:4]])
step = pk.prepare_prefill(twins)  # one step computes 10 + 2 tokens
print("cu_seqlens_q", step.cu_seqlens_q.tolist(), "cu_seqlens_k", step.cu_seqlens_k.tolist())

# %% [markdown]
# nano-vllm's HEAD registers hashes only after the step ran (`hash_blocks`, called from `postprocess`). Then
# both twins miss, each gets its own blocks, the same K/V are computed twice and the second registration
# overwrites the first in `hash_to_block_id`: wasted memory and compute, but correct answers. vLLM accepts the
# same duplicates by design: identical full blocks are not merged, so that block tables stay append-only.

# %% [markdown]
# ## Exercises
#
# **129 · Prefix-caching block manager · hard.** Write `BlockManager` with nano-vllm's interface
# (`compute_hash`, `can_allocate`, `allocate`, `deallocate`, `can_append`, `may_append`) in
# `practice/129_prefix_caching.py`: hits only on full blocks, checked by hash AND token ids, at most
# `num_tokens - 1` tokens cached, a reused block drops its stale hash entry. Grade it with
#
#     python practice/judge.py 129
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(129)` grades the
# `BlockManager` defined in this notebook on the same hidden cases (`%judge 129` does the same after
# `%load_ext pagedkv_lib.judge`). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


class BlockManager:  # your code here, in place of each NotImplementedError
    def __init__(self, num_blocks, block_size):
        raise NotImplementedError

    @classmethod
    def compute_hash(cls, token_ids, prefix=-1):
        raise NotImplementedError

    def can_allocate(self, seq):
        raise NotImplementedError

    def allocate(self, seq):
        raise NotImplementedError

    def deallocate(self, seq):
        raise NotImplementedError

    def can_append(self, seq):
        raise NotImplementedError

    def may_append(self, seq):
        raise NotImplementedError


result = judge(129)

# %% [markdown]
# Once your version passes, `show_reference(129)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(129)

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/engine/block_manager.py`): `Block(block_id)` starts with `ref_count=0`,
#   `hash=-1`, `token_ids=[]`; `compute_hash` is xxh64 over the parent hash and
#   `np.array(token_ids).tobytes()`; `deallocate` walks `reversed(block_table)` and keeps hashes; `can_append`
#   is `len(free) >= (len(seq) % block_size == 1)`. HEAD (`bb823b3`, after PR #218) moved hashing into
#   `hash_blocks`, called from `Scheduler.postprocess`, made `can_allocate` return the number of cached blocks
#   (never the last one), and drops stale entries in `_allocate_block` (`f64d821`, with `9fa256a` fixing the
#   follow-up regression).
# - **vLLM v1** (`vllm/v1/core/block_pool.py`, `kv_cache_utils.py`, `kv_cache_manager.py`): `KVCacheBlock` has
#   `ref_cnt` and a write-once `_block_hash`; the free queue is an intrusive doubly linked list with O(1)
#   removal from the middle (a hit on a free block is `touch()`), in LRU order. `hash_block_tokens` hashes
#   `(parent_hash or NONE_HASH, tuple(tokens), extra_keys)`, where extra keys cover LoRA, multimodal inputs
#   and `cache_salt`. SHA-256 has been the default since v0.10.2 (PR #23673); when xxhash became an option
#   (PR #29163) a maintainer warned that collisions "could leak private information" (one user's K/V served
#   to another). `get_computed_blocks` caps a hit at `num_tokens - 1`.
# - **Ref-count bugs in vLLM**: #42571 (a block passed twice to `free_blocks` was queued twice) and #1556 /
#   PR #3347 (`fork` counted a block once per table entry). A cheap invariant to test: when nothing runs,
#   every block (but vLLM's null block) is free.
#
# ## Say it in the interview
#
# Prefix caching identifies each FULL block by a hash chained over the whole prefix, because a token's K/V
# depend on everything before it; a hit must also compare the token ids, to survive collisions and stale
# entries. Hits share the physical block (ref count + 1), and a hit is capped at `num_tokens - 1` tokens so
# the step always computes the last token. Freed blocks keep their hash in the free queue, freed tail first,
# so a prefix survives until its blocks are actually reused, and reuse must delete the old hash entry.
# Identical prompts in the same step either share through early registration or duplicate through late
# registration; vLLM accepts the duplicates to keep block tables append-only.
