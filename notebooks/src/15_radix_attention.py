# %% [markdown]
# # 15 · RadixAttention, the other prefix cache
#
# Notebook 07 found shared prefixes the way vLLM and nano-vllm do: a chained hash per FULL block, looked up
# block by block. SGLang does it differently: a radix tree whose edges hold runs of token ids, walked token by
# token, with the least recently used leaves evicted when memory runs out (RadixAttention, in
# `python/sglang/srt/mem_cache/radix_cache.py`). After this notebook you can insert into and match against a
# radix tree, explain why a match that ends inside an edge splits its node, lock the path a request uses so
# that eviction leaves it alone, map the tree onto the course's block pool (and say what happens to a partly
# filled block), check it against a brute-force longest-common-prefix search, and say from measurements when
# each cache wins: granularity of matching on one side, granularity of eviction on the other.

# %% [markdown]
# ## Self-test
#
# 1. A 100-token system prompt is shared by every request. At block size 16, how many of its tokens can the
#    hash-based cache of notebook 07 reuse, and how many can a radix tree at SGLang's default page size?
# 2. The tree holds one node for the 6 tokens `[7 8 9 1 2 3]`. A request matches `[7 8 9 4]`. What does the
#    tree look like afterwards?
# 3. Why may eviction take only leaves?
# 4. A request is decoding and uses a cached prefix. What stops the tree from evicting that prefix, and why
#    must the lock go up to the root?
# 5. Under memory pressure, the hash cache evicts one block at a time, the radix tree one node at a time.
#    Which one keeps more of a long shared header when only one block is needed?
#
# <details><summary>Answer</summary>
#
# 1. 96 and 100. Hashes name full blocks only: 6 blocks of 16, and the last 4 tokens sit in a partial block
#    that each request computes and holds on its own. At page size 1 every token is its own block, so all 100
#    match (the tree caps a hit at `num_tokens - 1` only to leave the last token to compute).
# 2. Two nodes: `[7 8 9]` (its first three blocks), with one child `[1 2 3]` (the other three). The match
#    returns the blocks of `[7 8 9]` and the new upper node; the next insert of `[7 8 9 4 ...]` adds a second
#    child.
# 3. A node's K/V depend on every token above it: a child is useless without its parent. Evicting an inner
#    node would leave its children unreachable (and their blocks lost), so the tree evicts leaves, and a
#    parent whose last child is gone becomes a leaf in its turn.
# 4. Its lock: `inc_lock_ref` adds one to the last node of its prefix and to every ancestor, and eviction
#    skips nodes with `lock_ref > 0`. Every node on the path holds blocks the request reads, so every one
#    must count as protected (`protected_size`), and when a later match splits a locked node, the new upper
#    node inherits the count; unlocking walks the same path and brings each count back.
# 5. The hash cache: it drops the header's LAST block and keeps the rest findable. The tree drops the whole
#    header node (whole nodes, deepest first), though one block was needed. Section 7 measures it.
#
# </details>

# %% [markdown]
# ## 1. The same prompt, two caches
#
# Two requests share a 100-token system prompt. The hash manager of notebook 07 (block size 16) finds the
# full blocks of the first request; a radix tree (`RadixBlockManager`, the same five calls as `BlockManager`
# over SGLang's tree) at block size 1 finds every token.
#
# ```
# hash chain:  h0 -> h1 -> h2 -> h3 -> h4 -> h5 | 4 tokens in a partial block: no hash, never shared
# radix tree:  root --[100 system tokens]--+--[1 2 3]
#                                          +--[4 5]
# ```

# %%
import pagedkv_lib as pk
from pagedkv_lib.core.radix_block_manager import RadixBlockManager

system = list(range(100, 200))                                   # a 100-token system prompt
for name, bm, S in (("hash, block size 16", pk.BlockManager(32, 16), 16),
                    ("radix, block size 16", RadixBlockManager(32, 16), 16),
                    ("radix, block size 1", RadixBlockManager(512, 1), 1)):
    a = pk.Sequence(system + [1, 2, 3], block_size=S, seq_id=0)
    b = pk.Sequence(system + [4, 5], block_size=S, seq_id=1)
    bm.allocate(a)
    bm.allocate(b)
    print(f"{name:21s}: B finds {b.num_cached_tokens:3d} of its {len(b)} tokens, "
          f"computes {len(b) - b.num_cached_tokens}, holds {len(b.block_table)} table entries")

# %% [markdown]
# Block size 1 matches to the token, at the price of a table entry per token (16 times more metadata, and
# an attention kernel that gathers one row per entry: fine for FlashInfer, notebook 02).
#
# ## 2. The tree: insert and match
#
# `RadixCache(pool, block_size)` (pagedkv_lib/core/radix_cache.py) keeps a tree of `TreeNode`s: each has a
# `key` (token ids, a multiple of the block size), a `value` (the block ids that hold them), its `children`
# (keyed by the first block of their key) and a `lock_ref`. `insert(token_ids, blocks)` adds a sequence and
# returns how many of its tokens were cached already; `match_prefix(token_ids)` returns the blocks of the
# longest cached prefix and the node where it ends. The tree owns the one pool reference of each block in it.

# %%
from pagedkv_lib.core import radix_cache as rc

pool = pk.BlockPool(16)
cache = rc.RadixCache(pool, block_size=1)
blocks = pool.allocate(5)                                          # request A computed 5 tokens
print("insert A ->", cache.insert([7, 8, 9, 1, 2], blocks), "tokens were cached")
print(cache.pretty())
hit, node = cache.match_prefix([7, 8, 9, 1, 2, 6])
print("match [7 8 9 1 2 6] -> blocks", hit, "| ends at", node)
print("match [5 5]         -> blocks", cache.match_prefix([5, 5])[0], "(nothing: the root)")

# %% [markdown]
# ## 3. Splits
#
# Request B shares only `7 8 9`. Its insert walks into the node `[7 8 9 1 2]`, finds that the common part
# ends inside it, and SPLITS it: a new node `[7 8 9]` takes the first 3 tokens and blocks and the old node's
# place; the old node keeps `[1 2]` and hangs below it; B's own tokens become a second child. The tree takes
# B's blocks only for the tokens it did not hold; B gives back its 3 duplicates. A match can split too:
# request C matches `7 8 9 1 6`, which ends inside `[1 2]`.
#
# ```
# before:   root -- [7 8 9 1 2]
# after B:  root -- [7 8 9] -+- [1 2]          after C:  root -- [7 8 9] -+- [1] -- [2]
#                            +- [3 4 5]                                   +- [3 4 5]
# ```

# %%
b_blocks = pool.allocate(6)
cached = cache.insert([7, 8, 9, 3, 4, 5], b_blocks)
pool.free(b_blocks[:cached])                                        # B's duplicates of the tree's 7 8 9
print(f"insert B -> {cached} cached; B frees its {b_blocks[:cached]}, the tree adopts {b_blocks[cached:]}")
hit, c_node = cache.match_prefix([7, 8, 9, 1, 6])
print("match C ->", hit, "| ends at", c_node)
print(cache.pretty())
print("free blocks:", pool.num_free(), "| tree:", cache.total_size(), "blocks")

# %% [markdown]
# The same story as a picture (replayed by `radix_frames` on its own pool): new nodes in green, the upper
# halves of splits in orange, nodes a match walked through in blue.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.radix_plots import STORY, draw_radix_story, radix_frames

frames = radix_frames(STORY, num_blocks=16, block_size=1)
for i, f in enumerate(frames):
    print(f"{i}. {f.label}")
fig = plt.figure(figsize=(8.7, 2.4), dpi=80)
draw_radix_story(fig, frames, [1, 2, 3])
plt.show()

# %% [markdown]
# ## 4. Locks and eviction
#
# While C runs it must keep its prefix, so it LOCKS the node its match ended at: `inc_lock_ref` adds one to
# that node and to every ancestor up to the root. `evict(n)` then frees whole nodes until at least `n` blocks
# are free: each time the least recently used UNLOCKED LEAF (every match and insert stamps the nodes it walks
# with a logical clock), and a parent left without children joins the candidates. Three rules, three bugs the
# judge of exercise 136 looks for: a locked node is never evicted, an inner node is never evicted, and "least
# recently used" means accessed, not inserted.

# %%
cache.inc_lock_ref(c_node)                                         # C is running
print(f"locked: {cache.protected_size()} blocks, evictable: {cache.evictable_size()}")
print("evict(3) freed", cache.evict(3), "blocks (whole nodes: more than asked)")
print(cache.pretty())
cache.dec_lock_ref(c_node)                                         # C finished
print("evict(3) freed", cache.evict(3), "blocks: the leaf [1], then its parent [7 8 9]")
print(cache.pretty(), "| free blocks:", pool.num_free())

# %%
fig = plt.figure(figsize=(8.7, 2.4), dpi=80)
draw_radix_story(fig, frames, [4, 5, 7])
plt.show()

# %% [markdown]
# ## 5. Check: a brute-force longest common prefix
#
# An independent reference needs no tree at all: keep every inserted sequence in a list and answer a query
# with the longest common prefix over all of them. With no eviction, `match_prefix` must return exactly that
# many tokens (cut to whole blocks), for random sequences built to share stems, at block sizes 1, 2 and 4.

# %%
import random


def longest_common_prefix(cached, query, block_size):
    best = 0
    for s in cached:
        n = 0
        while n < min(len(s), len(query)) and s[n] == query[n]:
            n += 1
        best = max(best, n)
    return best // block_size * block_size


rng = random.Random(0)
for S in (1, 2, 4):
    tree, stored, agree = rc.RadixCache(pk.BlockPool(4000), S), [], 0
    stems = [[rng.randrange(4) for _ in range(rng.randint(0, 12))] for _ in range(4)]
    for _ in range(300):
        seq = rng.choice(stems) + [rng.randrange(4) for _ in range(rng.randint(0, 10))]
        if rng.random() < 0.5:
            seq = seq[: len(seq) // S * S]
            cached = tree.insert(seq, tree.pool.allocate(len(seq) // S))
            stored.append(seq)
        else:
            agree += len(tree.match_prefix(seq)[0]) * S == longest_common_prefix(stored, seq, S)
    print(f"block size {S}: {len(stored)} inserted, every match equals the brute force: "
          f"{agree == 300 - len(stored)}")

# %% [markdown]
# (tests/core/test_radix_cache.py runs the same reference with evictions and locks too, under hypothesis, and
# the mini engine of notebook 14 with this cache instead of the hash manager: its greedy outputs are
# unchanged.)
#
# ## 6. Over the block pool: block size above 1
#
# SGLang's pool hands out token slots (page size 1 by default); the course's pool hands out blocks. With
# block size S > 1 the tree matches and splits whole blocks only (SGLang's `page_align_keys`, and its
# `_key_match_paged`): keys are cut to a multiple of S, and a request's PARTIAL last block never enters the
# tree. It is still being written (the request's next tokens land in it), and sharing it would need
# copy-on-write (notebook 08); SGLang frees that unaligned tail when the request finishes. So at S > 1 the
# tree finds exactly what the hash chain finds: whole blocks of a common prefix.

# %%
pool4 = pk.BlockPool(12)
tree4 = rc.RadixCache(pool4, block_size=4)
tree4.insert(list(range(10))[:8], pool4.allocate(2))              # 10 tokens computed: 2 full blocks enter
print(tree4.pretty())
print("match 10 tokens ->", tree4.match_prefix(list(range(10)))[0], "(the partial third block never hits)")
print("match 7 tokens  ->", tree4.match_prefix(list(range(7)))[0], "(cut to 4 tokens: one block)")

# %% [markdown]
# `RadixBlockManager` (pagedkv_lib/core/radix_block_manager.py) wraps the tree in nano-vllm's five calls, the
# way SGLang's scheduler uses it: admission matches at most `num_tokens - 1` tokens (SGLang's
# `Req.adjust_max_prefix_ids` leaves the last token to compute, like vLLM's cap), locks the matched node,
# evicts if the pool is short, and inserts the prompt's full blocks at once. Two more rules come from SGLang's
# scheduler, and the next cell shows each:
#
# - A prompt the tree already holds still gets its OWN copy of its last full block: the cap leaves that block
#   unmatched when the prompt ends on a block boundary (always, at block size 1), and the prefill must write
#   the last token somewhere. Once that prefill has run, the copy goes back to the pool and the block table
#   points at the tree's block (SGLang's `cache_unfinished_req`, right after the prefill forward).
# - `deallocate` of a FINISHED request inserts what it computed (all but its last token, which was sampled and
#   never run), frees what the tree did not take, and unlocks. A PREEMPTED request inserts nothing: its prompt
#   is in the tree since admission, the blocks of its generated tokens go back to the pool, and re-admission
#   recomputes them (SGLang's retract: `release_kv_cache(..., is_insert=False)`, because the memory is
#   needed at once).
#
# The engine's `schedule` (notebook 14) drives it unchanged.

# %%
from pagedkv_lib.core.sequence import SequenceStatus

bm = RadixBlockManager(8, 4)
a, b = (pk.Sequence(list(range(1, 9)), block_size=4, seq_id=i) for i in (0, 1))   # one 8-token prompt, twice
bm.allocate(a)
bm.allocate(b)
print(f"admitted:          A {a.block_table}, B {b.block_table}, {bm.pool.num_free()} blocks free")
for seq in (a, b):
    seq.append_token(9)                                             # the prefill step ran
    bm.may_append(seq)                                              # the next decode step
print(f"after the prefill: A {a.block_table}, B {b.block_table}, {bm.pool.num_free()} blocks free")

for label, status in (("preempted", SequenceStatus.RUNNING), ("finished", SequenceStatus.FINISHED)):
    bm = RadixBlockManager(8, 4)
    seq = pk.Sequence([1, 2, 3, 4, 5, 6], block_size=4, seq_id=2)
    bm.allocate(seq)
    seq.append_token(7)                                             # the prefill's token
    for token in (8, 9, 10):                                        # three decode steps
        bm.may_append(seq)
        seq.append_token(token)
    seq.status = status                                             # the scheduler frees a preempted one
    bm.deallocate(seq)                                              # while it is still RUNNING
    print(f"{label:9s}: the tree holds {bm.cache.cached_sequences()}, {bm.pool.num_free()} blocks free")

# %% [markdown]
# ## 7. Under memory pressure: who wins, and why
#
# `pagedkv_lib.studies.prefix_cache_comparison` replays three workloads through the engine's `schedule` with
# each manager, no model: requests' outputs are fixed in advance so that a chat's next turn repeats them.
# `chat`: 8 conversations of 5 turns, each turn's prompt the whole previous turn plus a new message.
# `few_shot`: 64 requests over 4 task headers of 390-700 tokens, more than the pool holds. `system`: a
# 100-token system prompt (ending 4 tokens into a block) and short questions. `radix/1 trim` is the tree with
# one change, not SGLang's: `evict` trims the least recently used leaf from its end, only the blocks it
# needs. "recomputed" counts prompt tokens computed beyond an unbounded token-level cache; "held" is the mean
# share of the pool held by running requests, "cached" the share holding reusable K/V nobody runs on.

# %%
from pagedkv_lib.studies import prefix_cache_comparison as pcc

print(pcc.comparison_table())

# %% [markdown]
# Where each wins, read off the runs (each sentence printed from them):

# %%
runs = {w: pcc.compare(w) for w in pcc.WORKLOADS}
c, f, s = runs["chat"], runs["few_shot"], runs["system"]
print(f"- chat: the tree at block size 1 computes {c['radix/1'].computed_tokens:,} prompt tokens, the hash "
      f"cache {c['hash/16'].computed_tokens:,}: each turn extends the last, and the hash cache recomputes "
      "the previous turn's partial last block.")
print(f"- system: {s['radix/1'].computed_tokens:,} against {s['hash/16'].computed_tokens:,}; the tree holds "
      f"{s['radix/1'].mean_held:.0%} of the pool for running requests, the hash cache "
      f"{s['hash/16'].mean_held:.0%} (a private partial block each), and preempts {s['hash/16'].preemptions} "
      f"times against {s['radix/1'].preemptions}.")
print(f"- few_shot: the HASH cache wins, hit rate {f['hash/16'].hit_rate:.0%} against "
      f"{f['radix/1'].hit_rate:.0%}: it gives up a header's last block when one block is needed, the tree "
      f"a whole header node. Trim leaves instead and the tree gets {f['radix/1 trim'].hit_rate:.0%}.")

# %% [markdown]
# Hit rate against the pool: with memory to spare both caches keep everything and only granularity
# separates them; as the pool shrinks, the eviction unit decides.

# %%
from pagedkv_lib.viz.radix_plots import plot_hit_rate_sweep

fig, axes = plt.subplots(1, 2, figsize=(9, 2.8), dpi=80)
sweeps = {"chat": [2304, 2816, 3328, 4096], "few_shot": [1024, 1536, 2048, 3072]}
for ax, (workload, pools) in zip(axes, sweeps.items()):
    plot_hit_rate_sweep(ax, pools, pcc.hit_rate_sweep(workload, pools), title=workload)
axes[1].legend(fontsize=7)
fig.subplots_adjust(bottom=0.18, wspace=0.25)
plt.show()

# %% [markdown]
# Bookkeeping costs too: the tree compares tokens and walks nodes on every admission and every decode block
# (at block size 1, a block per token), where the hash cache hashes a block once. Wall-clock microseconds of
# the managers' calls per step, in this course's Python (machine-dependent, not stored):

# %%
# NBVAL_IGNORE_OUTPUT
# (wall-clock times of this machine)
for w, by_manager in runs.items():
    print(f"{w:9s}", "  ".join(f"{m} {1e6 * r.bookkeeping_s / r.steps:6.1f} us per step"
                               for m, r in by_manager.items()))

# %% [markdown]
# ## Exercises
#
# **136 · Radix cache · hard.** In `practice/136_radix_cache.py`, write `RadixCache`: `match_prefix` (whole
# blocks, splitting the node where a match ends), `insert` (returns the tokens already cached, adopts only
# the rest), `evict` (least recently used unlocked leaves, whole nodes, parents joining), `inc_lock_ref` /
# `dec_lock_ref` (up to the root; an unlock without a lock raises), `evictable_size` and `protected_size`.
# The docstrings state the contract line by line. Grade it with
#
#     python practice/judge.py 136
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(136)` grades the `RadixCache`
# defined in this notebook on the same hidden cases (`%judge 136` does the same after
# `%load_ext pagedkv_lib.judge`). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.core.radix_cache import TreeNode  # noqa: F401  (given: key, value, parent, children, ...)
from pagedkv_lib.judge import judge


class RadixCache:  # your code here, in place of each NotImplementedError
    def __init__(self, pool, block_size):
        raise NotImplementedError

    def match_prefix(self, token_ids):
        raise NotImplementedError

    def insert(self, token_ids, blocks):
        raise NotImplementedError

    def evict(self, num_blocks):
        raise NotImplementedError

    def inc_lock_ref(self, node):
        raise NotImplementedError

    def dec_lock_ref(self, node):
        raise NotImplementedError

    def evictable_size(self):
        raise NotImplementedError

    def protected_size(self):
        raise NotImplementedError


result = judge(136)

# %% [markdown]
# Once your version passes, `show_reference(136)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(136)

# %% [markdown]
# Ungraded, to try on the comparison of section 7:
#
# 1. Make the `chat` workload's conversations think longer before their next turn (`think_steps`): which
#    cache loses more, and why?
# 2. `TailEvictingRadixCache` trims leaves from their end. What does it give up (hint: how many nodes and
#    splits does the tree then carry), and why might SGLang prefer whole nodes?
# 3. Run `few_shot` with `headers=(700,) * 4` of four DIFFERENT tasks of the same length: does the ranking
#    change?
#
# ## In real systems
#
# - **SGLang** (`sgl-project/sglang@006b0e3d317f:python/sglang/srt/mem_cache/radix_cache.py`): `TreeNode`
#   holds `children` (a dict keyed by the first token, or by the first page's tuple when `page_size > 1`),
#   `key` (a `RadixKey` of token ids with an optional `extra_key` such as a LoRA id or cache salt), `value`
#   (a tensor of KV slot indices), `lock_ref`, `last_access_time`, `hit_count` and `priority`; the root
#   starts with `lock_ref = 1`. `match_prefix` (line 367) cuts the key to whole pages, walks down with
#   `_key_match_page_size1` or `_key_match_paged`, and splits with `_split_node` where the match ends inside
#   a node (the new node takes the child's `lock_ref`); `insert` (line 439) returns the prefix length
#   already present. `evict(num_tokens)` (line 574) heaps the evictable leaves by the eviction strategy
#   (`evict_policy.py`: LRU by `last_access_time` by default, also LFU, FIFO, MRU, FILO, priority, SLRU),
#   frees whole leaves and pushes a parent left childless. `inc_lock_ref` / `dec_lock_ref` (lines 603, 618)
#   walk to the root, moving sizes between `evictable_size_` and `protected_size_`. SGLang stamps the node it
#   splits before splitting, so the lower half of a split looks used too; the course stamps only what the
#   call matched.
# - **The scheduler's side of the tree** (the same file): `cache_unfinished_req` (line 502) runs after each
#   prefill forward (`process_batch_result_prefill` calls it): it inserts the request's page-aligned tokens,
#   frees the slots that duplicate what the tree already held (line 529), matches again, writes the tree's
#   slots into the request's row of `req_to_token` (line 541) and moves the lock to the new last node.
#   `cache_finished_req` (line 455) inserts a finished request's computed tokens and frees the duplicates and
#   the unaligned tail; called with `is_insert=False` (lines 491-494) it inserts nothing and frees the
#   request's own slots. A request retracted for memory goes that way: `ScheduleBatch.retract_decode`
#   (`python/sglang/srt/managers/schedule_batch.py`, same commit) frees it with `release_req`, which calls
#   `release_kv_cache(req, tree_cache, is_insert=False)`; the comment there says the space is needed at once,
#   and a TODO that preempted requests might be inserted some day. The course inserts a prompt at
#   admission rather than after the forward (nano-vllm's five calls have no call in between), so a request
#   admitted in the same step shares those blocks, as the hash manager's do.
# - **The cap** (`sgl-project/sglang@000eaffacf04:python/sglang/srt/managers/schedule_batch.py`,
#   `Req.adjust_max_prefix_ids`): a match is asked for at most `input_len - 1` tokens, so the last one is
#   computed and gives the logits, as vLLM's `num_tokens - 1` cap (notebook 07).
# - **vLLM V1** keeps the hash chain: `vllm/v1/core/kv_cache_utils.py` (`hash_block_tokens`),
#   `vllm/v1/core/block_pool.py` (a free queue in LRU order, stale hashes dropped on reuse); nano-vllm's
#   `nanovllm/engine/block_manager.py` is notebook 07's model.
#
# ## Say it in the interview
#
# There are two ways to find a cached prefix. vLLM and nano-vllm hash each full block together with the hash
# of the block before it, so a lookup walks the prompt block by block in a hash map; only full blocks are
# shared, and eviction takes one freed block at a time from an LRU free queue, the tail of a sequence first.
# SGLang keeps a radix tree of token ids whose edges hold the KV slots: a lookup walks the tree comparing
# tokens, a match or insert that ends inside an edge splits its node, requests lock the path they use (up to
# the root), and eviction frees the least recently used unlocked leaves, whole nodes, deepest first. At
# SGLang's default page size of 1 the tree shares prefixes to the token, so chat turns and system prompts that
# end mid-block are reused completely and no request holds a half-empty block; at page size S it finds what
# the hash finds. The tree's costs are per-token bookkeeping and coarse eviction: under memory pressure it
# drops a whole long header where the hash cache drops one block, which I measured as a lower hit rate on a
# few-shot workload until leaves are trimmed instead.
