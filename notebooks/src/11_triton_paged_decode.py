# %% [markdown]
# # 11 · Triton: paged decode attention
#
# Notebook 04 computed paged decode attention in PyTorch by gathering each sequence's K/V into a contiguous
# copy. A real kernel never makes that copy: it reads the blocks where they lie, a tile at a time, and keeps
# the softmax running as it goes. After this notebook you can explain a flash-decoding kernel piece by piece
# (what each program owns and reads, the online-softmax recurrence, GQA grouping, split-KV and its merge,
# masked block-table loads), say why equal splits fail on a ragged batch and how a length-aware partition
# fixes it without a host sync, check the library's kernel in Triton's interpreter against SDPA on contiguous
# K/V, and read measured H200 figures honestly: where the kernel wins and where it only ties.


# %% [markdown]
# ## Self-test
#
# 1. H = 32 query heads, H_kv = 8 KV heads, and the kernel's grid is `(B, H_kv)`. What does program `(b, j)`
#    read, and what does it write?
# 2. The running max of the scores goes from 2.0 to 5.0 when a new tile arrives. What happens to the running
#    sum `l` and the accumulator `acc`?
# 3. 32 query heads share 8 KV heads. Why not one program per query head?
# 4. One sequence of 4,096 tokens, 8 KV heads, on a GPU with 132 SMs: why does the kernel split the context,
#    and what must happen afterwards?
# 5. A tile covers positions 48..63 of a sequence whose context is 50 tokens, block size 16, table row
#    `[9, 4, 7, 2, -1, -1]`. Which block ids does the tile look up, and which does it use?
# 6. 64 sequences of 27 to 7,975 tokens (3,738 on average) and one program per sequence and KV head: what
#    sets the kernel's time, and what would you change?
# 7. v2 cuts a context of 300 tokens into 4 splits of 256: the last two are empty, each `m = -inf, l = 0`.
#    What goes wrong if the merge computes a part's weight as `exp(m_i - max(m_a, m_b))` and the two empty
#    splits are merged with each other first, and what must the merge do instead?
# 8. vLLM's CUDA decode kernel runs v1 for 64 sequences of 4,096 tokens with 32 query heads, but v2 for one
#    sequence of 4,096 tokens. Why, and why v2 for any sequence past 8,192 tokens?
# 9. In Triton, `s` is a `[BLOCK_G, BLOCK_N]` tile of scores and `m` the `[BLOCK_G]` running max. Which calls
#    give the new max, and how are the scores of positions past the context kept out of it?
#
# <details><summary>Answer</summary>
#
# 1. Sequence b's query rows for the G = 4 query heads of KV head j (`[G, D]`), and every K and V row of KV
#    head j in b's context, through b's block table; it writes `out[b, 4j .. 4j+3]`.
# 2. Both are multiplied by `exp(2 - 5) = exp(-3)` before the new tile's terms are added: everything so far
#    was exponentiated relative to the old max.
# 3. Each of the 4 query heads of a group would load the same K/V tiles: 4 times the loads. One program per KV
#    head loads each tile once and uses it for all 4 (and 4 rows make a matrix product instead of a vector
#    one).
# 4. `B x H_kv = 8` programs would leave 124 SMs idle. Split the 4,096 tokens into P ranges, one program each;
#    each writes its partial output and log-sum-exp, and a second kernel merges them (weights
#    `exp(lse_i - lse)`).
# 5. Positions 48..63 are in logical block 3, so all look up `table[3] = 2`. Positions 48 and 49 are used;
#    50..63 are masked (the tail of block 2). With tiles of 32 positions (48..79), positions 64..79 would look
#    up `table[4] = -1`: masked too, never used as an address.
# 6. The longest sequence: its programs walk 7,975 tokens while the average is 3,738, so the GPU ends with a
#    few busy SMs. Cut the actual contexts into chunks of about equal size (here 1,024 tokens), many
#    programs in all, and merge each sequence's chunks afterwards (section 6).
# 7. Two empty parts have `m = -inf` each, so the weight is `exp(-inf - (-inf)) = exp(nan)`: a NaN that the
#    following merges carry into the whole row. The merge must read an empty part's weight as 0 whatever the
#    other part holds; a row with nothing in it gives output 0 and lse -inf (section 9).
# 8. Its rule (`vllm/attention/ops/paged_attn.py`): v1 if `max_seq_len <= 8192` and either one partition of
#    512 tokens suffices or `num_seqs x num_heads > 512`. 64 x 32 = 2,048 thread blocks already fill the GPU;
#    1 x 32 = 32 would not, so v2 splits into 8 partitions. Past 8,192 tokens v1's logits, one float per
#    token in shared memory, no longer fit (section 10).
# 9. `m_new = tl.maximum(m, tl.max(s, axis=1))`: a max per row (query head) of the tile, merged lane by lane
#    with the running one. Before it, `s = tl.where(in_ctx[None, :], s, float("-inf"))` (section 3).
#
# </details>

# %% [markdown]
# ## 1. What one program owns
#
# The course's decode (`pagedkv_lib.kernels.triton_decode_attention`) comes in three kernels that share their
# inner loop (`attend_range`, a `@triton.jit` helper). v1 (`paged_decode_kernel`) runs one program per
# sequence and KV head, v2 (`split_kv_decode_kernel`) also one per context range (split-KV, section 5), v3
# (`chunked_decode_kernel`) one per chunk of equal work (section 6). A v1 program:
#
# ```
# program (b, j):  q[b, j*G : (j+1)*G]            [G, D]   the G query heads that read KV head j
#                  for each tile of BLOCK_N positions n0 .. n0+BLOCK_N-1 of sequence b:
#                      block ids = block_tables[b, pos // S]   masked where pos >= context_lens[b]
#                      K, V rows = cache[block id, pos % S, j] [BLOCK_N, D] each, same mask
#                      scores    = q . K^T * scale            [G, BLOCK_N]
#                      update the running max m, sum l and acc [G, D] (online softmax, section 3)
#                  out[b, j*G : (j+1)*G] = acc / l         [G, D]
# ```
#
# Every K/V byte of every context is read once, and that is nearly all the traffic: decode does 2G FLOPs per
# K/V element (notebook 04, section 7), a handful per byte, so the kernel is bound by memory bandwidth, not
# arithmetic.

# %%
import torch

import pagedkv_lib as pk
from pagedkv_lib.kernels import backend  # first: chooses the interpreter on a CPU, before any kernel
from pagedkv_lib.kernels import triton_decode_attention as kd
from pagedkv_lib.kernels.decode_config import choose_config, plan_chunks_reference
from pagedkv_lib.viz.attention_plots import error_order

dev = backend.device()
print("Triton kernels run:", "in the interpreter (CPU)" if backend.is_interpreted() else "natively (GPU)")

# %% [markdown]
# ## 2. One tile, by hand
#
# Here is what a program does for one tile, written in PyTorch. Two sequences, block size 4, tiles of 16
# positions. Sequence 0 has 13 tokens: its tile reads blocks 10, 14, 5 and one row of block 1, and masks
# positions 13..15, the tail of block 1. Sequence 1 has 12 tokens, exactly 3 blocks: positions 12..15 look up
# table entry 3, which is -1 padding. Unmasked, `-1 * 4 + pos % 4` would address rows -4..-1: memory before
# the cache. The mask keeps both the block-table load and the K/V loads inside the context.

# %%
S, BLOCK_N = 4, 16
tables = torch.tensor([[10, 14, 5, 1, -1, -1], [3, 7, 2, -1, -1, -1]], dtype=torch.int32)  # [B, M]
context_lens = torch.tensor([13, 12], dtype=torch.int32)  # [B]
pos = torch.arange(BLOCK_N)  # [BLOCK_N] positions of the tile that starts at 0
for b in range(2):
    in_ctx = pos < context_lens[b]  # [BLOCK_N] the mask
    looked_up = tables[b, pos // S]  # [BLOCK_N] what an unmasked load would read
    block = torch.where(in_ctx, looked_up, 0)  # masked load, other=0 (never used)
    slot = block * S + pos % S  # [BLOCK_N] cache rows
    shown = [str(int(s)) if m else "-" for s, m in zip(slot, in_ctx)]
    print(f"sequence {b} (context {int(context_lens[b])}): rows read {' '.join(shown)}")
    print(f"   unmasked table entries at masked positions: {looked_up[~in_ctx].tolist()}")

# %% [markdown]
# ## 3. The online softmax
#
# A tile's scores arrive one after another, but softmax needs the max and the sum over all of them. The trick
# (Milakov and Gimelshein 2018, then FlashAttention) keeps three running values per query head: the max `m`
# seen so far, `l = sum exp(s - m)`, and `acc = sum exp(s - m) v`. When a tile raises the max to `m'`, the old
# terms are rescaled by `alpha = exp(m - m')`:
#
# ```
# m'   = max(m, max(s_tile))
# l'   = l * alpha + sum exp(s_tile - m')
# acc' = acc * alpha + sum exp(s_tile - m') v_tile        alpha = exp(m - m')
# out  = acc / l          (after the last tile)
# ```
#
# The same recurrence in PyTorch, for one query head and 10 tokens in tiles of 4, against a plain softmax:

# %%
import math

gen = torch.Generator().manual_seed(3)
scores = torch.randn(10, generator=gen, dtype=torch.float64) * 2 + 0.5 * torch.arange(10)  # [n] q . k * scale
values = torch.randn(10, 4, generator=gen, dtype=torch.float64)  # [n, D]
m, l, acc = float("-inf"), 0.0, torch.zeros(4, dtype=torch.float64)
for start in range(0, 10, 4):
    tile = scores[start : start + 4]  # [<= 4]
    m_new = max(m, tile.max().item())
    alpha = math.exp(m - m_new)  # exp(-inf) = 0 on the first tile
    p = torch.exp(tile - m_new)  # [<= 4]
    l, acc, m = l * alpha + p.sum().item(), acc * alpha + p @ values[start : start + 4], m_new
    print(f"tokens {start}..{start + len(tile) - 1}: max {m:6.3f}, alpha {alpha:.4f}, l {l:.4f}")
exact = torch.softmax(scores, dim=0) @ values  # [D]
print("acc / l equals softmax(scores) @ values:", torch.allclose(acc / l, exact, rtol=0, atol=1e-12))

# %% [markdown]
# In a Triton program the same recurrence runs for a whole group of query heads at once: `s` is a
# `[BLOCK_G, BLOCK_N]` tile of scores, one row per query head, and every running value gets one entry per
# row. Each line above has a Triton counterpart that notebook 09 showed (section 5 for masks and `-inf`,
# section 6 for `axis=1`, section 7 for `tl.dot`, section 8 for the running max and the block-table gather):
#
# | PyTorch above (one query head) | Triton, a tile of `BLOCK_G` query heads |
# |---|---|
# | `m = float("-inf")` | `tl.full([BLOCK_G], float("-inf"), tl.float32)` |
# | `l = 0.0` | `tl.zeros([BLOCK_G], tl.float32)` |
# | `acc = torch.zeros(D)` | `tl.zeros([BLOCK_G, BLOCK_D], tl.float32)` |
# | `tile.max()`, then `max(m, ...)` | `tl.max(s, axis=1)`, then `tl.maximum(m, ...)`: `[BLOCK_G]` |
# | `math.exp(m - m_new)` | `tl.exp(m - m_new)`: `[BLOCK_G]` |
# | `torch.exp(tile - m_new)` | `tl.exp(s - m_new[:, None])`: `[BLOCK_G, BLOCK_N]` |
# | `p.sum()` | `tl.sum(p, axis=1)`: `[BLOCK_G]` |
# | `acc * alpha + p @ v` | `acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")` (fp32 `p` and `v`) |
#
# Positions past the context must not count: their scores become `-inf` (`tl.where`) before the max, so
# their `exp` is 0.
#
# The library writes the update once, as `online_softmax_step` in
# `pagedkv_lib/kernels/triton_online_softmax.py`, in base 2: the scale times log2(e) is folded into the scores
# and `tl.exp2` replaces `tl.exp`, as FlashAttention's kernels do. Decode, prefill (notebook 12), the
# shared-prefix kernel (notebook 21) and the teaching MLA kernel (notebook 18) call it, and Triton inlines it:
# each compiles as if the lines were written out. Your exercise 131 writes them out.
#
# Three details that the exercise meets and that the table does not show:
#
# - **The output's dtype.** `tl.store` converts the value to the element type of the pointer it writes
#   through, rounding to nearest as `.to()` does: storing the fp32 tile `acc / l` into a bf16 `out` writes
#   bf16. A `.to(out_ptr.dtype.element_ty)` before the store says so, and changes nothing else.
# - **Padded query rows.** When `BLOCK_G > G` (section 4 pads the group to 16), the rows past G load q as 0
#   (the load's mask and `other=0.0`). Their scores are then 0 for every context token: finite, so their
#   softmax is a plain average of V, never NaN. Every running value is per row (`axis=1`), so they do not
#   touch the real rows, and the store's mask drops them. Dims past D, 0 in q and K, add nothing to a dot.
# - **Choosing BLOCK_N.** It does not depend on the block size S: a tile may cross blocks or cover part of
#   one, since every position looks its block up. Any power of two works (at least 16 with `tl.dot`). A
#   bigger tile means fewer trips round the loop but more registers per program, and the masked tail of the
#   last tile is wasted work. The library's `choose_config` takes 32 in the interpreter and, on a GPU, 64
#   tokens of a 2-byte cache (the same bytes per tile in other dtypes); section 5 prints what it picks.

# %% [markdown]
# ## 4. GQA: read each K/V tile once per KV head
#
# With 32 query heads and 8 KV heads, query heads `4j .. 4j+3` all read KV head `j`. One program per query
# head would load every K/V tile 4 times; one program per KV head loads it once and multiplies it by a `[4,
# D]` block of queries. The course's dot rule (notebook 09, section 7): every dimension (M, N and K) of every
# tl.dot is at least 16: what every supported Triton (3.0 to 3.9) compiles on a GPU; pad the tile (BLOCK =
# max(16, next power of two)) and mask the padding. So the kernel pads the group to `BLOCK_G = max(16, next
# power of two >= G)` and masks the extra rows: wasted arithmetic, but arithmetic is free here, bytes are not.
# **If you use `tl.dot` in exercise 131, pad the same way** (the tile of keys and the head dimension too):
# with G = 4, `BLOCK_G = 4` runs in the interpreter but fails to compile on a GPU, and the judge applies the
# rule on the CPU. For the shape the benchmark uses (bf16, 64 sequences of 4,096 tokens, H = 32, H_kv = 8,
# D = 128):

# %%
B, L, H, H_kv, D = 64, 4096, 32, 8, 128
kv_bytes = 2 * B * L * H_kv * D * 2  # K and V, bf16
print(f"K/V of the batch: {kv_bytes / 1e9:.2f} GB; 2G = {2 * H // H_kv} FLOPs per K/V element, "
      f"{2 * H // H_kv // 2} per byte")
print(f"one program per query head: {H * B} programs load {H // H_kv * kv_bytes / 1e9:.2f} GB of K/V tiles")
print(f"one program per KV head:    {H_kv * B} programs load {kv_bytes / 1e9:.2f} GB, each tile once")

# %% [markdown]
# ## 5. Split-KV, and the reduction
#
# v1's grid `(B, H_kv)` has `B x H_kv` programs. At `B = 64` that is 512: several per SM on a 132-SM H200, and
# the kernel runs at the copy rate. At `B = 1` it is 8, and 124 SMs sit idle. v2 cuts each context into `P`
# ranges, one program each; a program writes its normalised partial output `o_i` and log-sum-exp `lse_i`, and
# a second kernel merges them:
#
# ```
# lse = log sum_i exp(lse_i)          out = sum_i exp(lse_i - lse) * o_i
# ```
#
# The merge in PyTorch, on the scores above cut into 3 ranges:

# %%
parts = [(scores[r], values[r]) for r in (slice(0, 4), slice(4, 7), slice(7, 10))]
o = [torch.softmax(s, 0) @ v for s, v in parts]  # [D] each: the partial outputs
lse = torch.stack([torch.logsumexp(s, 0) for s, _ in parts])  # [P]
merged = sum(torch.exp(lse[i] - torch.logsumexp(lse, 0)) * o[i] for i in range(3))  # [D]
print("merged equals softmax(scores) @ values:", torch.allclose(merged, exact, rtol=0, atol=1e-12))

# %% [markdown]
# How many splits? v2 aims for about 3 waves of programs over the SMs and gives each split at least 128
# tokens (`choose_config`, tuned on an H200). For the benchmark's shapes on a 132-SM GPU:

# %%
for B, L in [(1, 4096), (8, 4096), (64, 4096), (32, 16384)]:
    cfg = choose_config(B, 32, 8, 128, L, num_sms=132, interpreted=False, version=2)
    print(f"B = {B:2d} x {L:5d} tokens: {B * 8:3d} programs in v1 -> {cfg.num_splits:2d} splits of "
          f"{cfg.tokens_per_split:4d} tokens, {B * 8 * cfg.num_splits:4d} programs "
          f"(tiles of {cfg.block_n} tokens x {cfg.block_g} query rows)")

# %% [markdown]
# ## 6. Ragged batches: cut the work, not the table
#
# Real batches are ragged. v2 cuts every context at the same P ranges, sized from the table width (the
# longest context the batch may hold, `M x S`), because that is all the host knows without reading the
# lengths back from the GPU. A short context then leaves most of its ranges empty, and at large batch
# (P = 1) each program walks its whole sequence: the longest one sets the time. Here is the benchmark's
# ragged batch, 64 lengths uniform in 1..8192, cut by each version (a piece runs on H_kv programs):

# %%
import random

from pagedkv_lib.viz import work_partition

rng = random.Random(64)
ragged = [rng.randint(1, 8192) for _ in range(64)]  # the benchmark's "ragged64"
configs = {f"v{v}": choose_config(64, 32, 8, 128, 8192, splits, num_sms=132, interpreted=False, version=v)
           for v, splits in ((1, 1), (2, None), (3, None))}
for name, cfg in configs.items():
    b = work_partition.balance(ragged, cfg)
    print(f"{name}: {b['pieces']:3d} pieces, largest {b['largest']:4d} tokens, mean {b['mean']:6.0f}: "
          f"largest / mean = {b['ratio']:.2f}")

# %% [markdown]
# v3, the length-aware partition, cuts each sequence's ACTUAL context into chunks of `chunk` tokens:
#
# ```
# total = sum of the context lengths                       (239,227 tokens here)
# chunk = clamp(ceil(total / target), 128, 1024), a multiple of BLOCK_N    target = 3 waves of programs
# sequence b: floor(len_b / chunk) full chunks, then one shorter chunk if len_b % chunk > 0
# ```
#
# Full chunks come first in program order, the short remainders after them, so the big pieces start first
# and the small ones fill the tail. A batch that is already balanced (enough programs, longest <= 9/8 of the
# mean) keeps v1's partition: splitting it would only add the merge. At B = 64, v2 does not split at all
# (512 programs already fill the GPU), so it is v1 here.

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7.5, 3.4), dpi=80)
work_partition.plot_pieces(ragged, {"v1 (v2 is the same here)": configs["v1"], "v3": configs["v3"]}, ax=ax)
plt.show()
chunk, items = plan_chunks_reference(ragged, configs["v3"])
print(f"chunk = {chunk} tokens, {len(items)} pieces (the grid holds {configs['v3'].max_items}); first "
      f"{items[:2]}, last {items[-2:]}  as (sequence, start, end, partial slot)")
print("64 x 4096 (balanced): chunk =", plan_chunks_reference([4096] * 64, choose_config(
    64, 32, 8, 128, 4096, num_sms=132, interpreted=False))[0], "tokens: one piece per sequence, as v1")

# %% [markdown]
# **Where the plan is computed.** Not on the host: that would read the lengths back from the GPU (a sync
# every step) and tie the grid to each batch, which a captured CUDA graph cannot follow. Every program
# loads `context_lens` as one vector, recomputes the plan in registers (a sum, a clamp, prefix sums) and finds
# its own piece by counting. The grid is a bound the host knows from `B` and `M x S` alone (`max_items`:
# chunks are at least 128 tokens, or at least `total / target`), surplus programs return at once, and a
# second kernel merges the chunks of each split sequence (per KV head, or per query head when there are few
# sequences). So one captured graph replays correctly for any lengths within the table: the plan follows
# the lengths, the launch does not.

# %%
cfg = choose_config(8, 32, 8, 128, 4096, num_sms=132, interpreted=False)
for lens in ([4096] * 8, [1] * 8, [4096, 1, 1, 1, 1, 1, 1, 1], [rng.randint(1, 4096) for _ in range(8)]):
    chunk, items = plan_chunks_reference(lens, cfg)
    print(f"B = 8, contexts {min(lens):4d}..{max(lens):4d}: chunk {chunk:4d}, {len(items):2d} pieces "
          f"<= grid bound {cfg.max_items}")

# %% [markdown]
# ## 7. Correct, in the interpreter
#
# On this machine the kernel runs in Triton's interpreter, so the shapes stay small. Every version is
# checked against SDPA on the contiguous K/V (float64) that `make_paged_batch` scattered into a NaN-filled
# cache, and against the PyTorch paged reference, at block sizes 1, 4 and 16, in fp32 and bf16. v3 gets small
# chunks (16 to 48 tokens) so that these short contexts split unevenly, as long ones do on a GPU.

# %%
seq_lens = [1, 13, 40, 77]
for bs, version, dtype in [(1, 1, torch.float32), (4, 2, torch.float32), (4, 3, torch.float32),
                           (16, 3, torch.float32), (16, 3, torch.bfloat16)]:
    batch = pk.make_paged_batch(seq_lens, bs, 8, 2, 16, seed=bs, dtype=dtype, device=dev, extra_padding=2)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 16**-0.5)
    cfg = choose_config(4, 8, 2, 16, batch.block_tables.shape[1] * bs, 3 if version == 2 else None,
                        num_sms=4, interpreted=True, version=version, block_n=16, min_chunk=16, max_chunk=48)
    out = kd.paged_attention_decode_triton(*args, config=cfg)  # [B, H, D]
    sdpa = pk.sdpa_batch(batch).to(out.device)  # [B, H, D] float64
    paged = pk.paged_attention_decode(*args)  # [B, H, D]
    print(f"v{version}, block size {bs:2d}, {str(dtype)[6:]:8s}: max |triton - SDPA| "
          f"{error_order((out.double() - sdpa).abs().max().item())}, |triton - PyTorch paged| "
          f"{error_order((out.double() - paged.double()).abs().max().item())}")

# %% [markdown]
# The plans drawn in section 6 come from `plan_chunks_reference`, plain Python. The kernels compute theirs
# with the `@triton.jit` helpers of `triton_decode_merge` (`chunk_plan`, `chunk_of_item`); `plan_chunks` runs
# those helpers in a small kernel of its own and reads back what each v3 program would take:

# %%
from pagedkv_lib.kernels.triton_decode_merge import plan_chunks

kernel_plan = plan_chunks(seq_lens, cfg)  # (chunk, [(seq, start, end, partial slot), ...])
print("the v3 kernel's plan for the last batch above:", kernel_plan)
print("the same as plan_chunks_reference's:", kernel_plan == plan_chunks_reference(seq_lens, cfg))

# %% [markdown]
# ## 8. On a GPU: what the measurements say
#
# Decode reads `2 x B x L x H_kv x D x dtype bytes` of K/V (plus q and the output) and does 2G FLOPs per K/V
# element (4 per byte here, section 4), so it is bound by memory: each method at each shape is one point,
# bytes against time, under the line of the machine's own copy bandwidth, measured in the same run (bytes
# read plus written by a device-to-device copy). The first benchmark (2026-11-29; bf16, H = 32, H_kv = 8,
# D = 128; CUDA-graph replays with a cold L2) measured v1 and v2 against FLASH SDPA on contiguous K/V,
# gather-then-SDPA and PyTorch's paged `flex_attention`:

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz import bench_findings, roofline

earlier = results.load("decode_h200.json")
fig, ax = plt.subplots(figsize=(7.5, 4), dpi=80)
roofline.plot_roofline(roofline.decode_points(earlier), earlier["copy_gbs"], ax=ax,
                       title="paged decode on an H200, v1 and v2 (stored figures, 2026-11-29)")
plt.show()
print(roofline.decode_table(earlier))
print(bench_findings.split_kv_findings(earlier))

# %% [markdown]
# Large uniform batches run at the copy rate: reading scattered 16-token blocks costs nothing. Split-KV
# takes a single 4k-token sequence from v1's time to a few times the time of its bytes; the rest is fixed
# cost (two launches, the chain context length -> block table -> K/V of dependent loads), and on one
# sequence it dominates.
#
# That comparison flattered the kernel: FLASH is not what SDPA picks by itself. The benchmark now runs SDPA
# under its default dispatch (naming the backend the profiler saw), each backend forced as its own row,
# FLASH's varlen kernel on packed K/V, and ragged batches. The final run of it is stored in
# `benchmarks/results/bench_decode.json`; the next cell shows it, or says that it is not there yet and shows
# the times of the first run (`results/first_run/`, 2026-11-30, before v3's merge and PDL were tuned; its
# copy anchor was wrong, so it shows times only).

# %%
COLUMNS = ["triton_v1", "triton_v2", "triton_v3", "sdpa_default", "sdpa_flash", "sdpa_cudnn", "flash_varlen"]
final = results.stored("bench_decode.json")
first_run = results.load("first_run/bench_decode.json")
if final is None:
    print("No final run stored yet (benchmarks/results/bench_decode.json). The first run, times only:\n")
    print(roofline.decode_table(first_run, COLUMNS, fractions=False))
else:
    fig, ax = plt.subplots(figsize=(7.5, 4), dpi=80)
    roofline.plot_roofline(roofline.decode_points(final, COLUMNS), final["copy_gbs"], ax=ax,
                           title="paged decode on an H200: v1, v2, v3 and every SDPA backend")
    plt.show()
    print(roofline.decode_table(final, COLUMNS))

# %% [markdown]
# What the run says, shape by shape, worded from the same figures (a ratio within 3% is called a tie), then
# the targets `benchmarks/bench_decode.py` set, as it judged them in the same run:

# %%
print(bench_findings.decode_findings(final or first_run, first_run if final else None))
print("\ntargets (benchmarks/results/bench_decode.txt):")
print(bench_findings.target_verdicts(results.stored_text("bench_decode.txt")) or "none stored")

# %% [markdown]
# **Beside FlashInfer.** vLLM and SGLang decode through FlashInfer on Hopper. A later run, on an H100,
# added FlashInfer's `BatchDecodeWithPagedKVCacheWrapper` to the same benchmark, on the same paged caches
# (its NHD layout is the course's), with its two paths as rows: CUDA cores (`flashinfer_decode`) and tensor
# cores (`flashinfer_decode_tc`), and vLLM's own Triton kernel (`vllm_unified`: `unified_attention`, which
# vLLM's Triton attention backend runs). Every row of a shape comes from one process, so the times compare:

# %%
fi_decode = results.stored("flashinfer_run5/bench_decode.json")
print(bench_findings.flashinfer_table(fi_decode, ("triton_v3", "sdpa_default", "vllm_unified"),
                                      ("flashinfer_decode", "flashinfer_decode_tc"))
      if fi_decode else "no FlashInfer run stored (benchmarks/results/flashinfer_run5/)")

# %% [markdown]
# - **The kernel wins on ragged and small batches.** v3 cuts the actual contexts into chunks of equal work,
#   where v1 and v2 wait for the longest sequence; SDPA's default dispatch runs cuDNN on a batch padded to
#   the longest context, and FLASH forced has no kernel that takes a padded batch's mask. On one sequence
#   v2 and v3 split the context, and the default dispatch does not.
# - **On large uniform batches it is close to the default dispatch**, which picks cuDNN there and reads at
#   nearly the copy rate too; FLASH forced is far slower on them.
# - **v3 was slower than v2 on one sequence in the first run**, although it cut it the same way, 32 chunks
#   of 128: its merge then ran 8 programs of 4 heads in 4 steps, against v2's 32 programs in one. The merge
#   now runs per query head when there are fewer (sequence, KV head) pairs than SMs, and PDL (programmatic
#   dependent launch: a kernel starts while the previous one drains) is on; the last printed bullet gives
#   both runs' times.
# - **Where a target is missed** on a small batch (one sequence, 8x4096, the small ragged batch), the cause
#   is fixed cost: two launches and the chain of dependent loads before the first K/V byte moves cost the
#   same few microseconds whatever the batch, a large share of a small batch's time. A large batch that
#   misses by a fraction of a point is within the spread between runs. `benchmarks/NOTES.md` has every
#   figure.
#
# With a CUDA GPU the next cell runs the benchmark on a few shapes (about two minutes) and shows the same
# table for this GPU; elsewhere it says so.

# %%
# NBVAL_IGNORE_OUTPUT
# (on a GPU this cell prints fresh timings, which change from run to run)
if torch.cuda.is_available():
    shapes = "1x4096,8x4096,64x4096,ragged8"
    live = results.run_live("bench_decode.py", "bench_decode.json", "--shapes", shapes, "--budget-s", "100")
    print(roofline.decode_table(live, COLUMNS))
else:
    print("no GPU: showing stored H200 figures")

# %% [markdown]
# ## 9. Merging partial softmaxes in any order
#
# Sections 5 and 6 cut a row of scores into parts, computed each part on its own and merged the results:
# v2 merges its P splits in one step, v3 merges however many chunks a sequence got. Other systems merge in
# other orders: a shared prompt's attention computed once and merged with each request's own part
# (FlashInfer's cascade attention), parts computed on different GPUs and merged as they arrive. All of that
# is correct for one reason: the state of a part, three numbers per query head, merges **associatively and
# commutatively**, with the empty part as the identity. Any cut, merged in any order and along any tree,
# gives the softmax of the whole row (up to rounding):
#
# ```
# a part:        m = max s      l = sum exp(s - m)      acc = sum exp(s - m) v       (empty: -inf, 0, 0)
# merge(a, b):    m = max(m_a, m_b)    w_a = exp(m_a - m)    w_b = exp(m_b - m)    (w = 0 for an empty part)
#                  l = l_a w_a + l_b w_b          acc = acc_a w_a + acc_b w_b
# the row:         out = acc / l                  lse = m + log l
#
#                         row                        a kernel stores (o = acc / l, lse): the same state
#                       /     \                      with m = lse and l = 1, so its merge weights each o
#                   merge     merge                  by exp(lse_i - lse), section 5's formula
#                   /  \      /   \
#               part0 part1 part2 merge ...
# ```
#
# The library's PyTorch version is `pagedkv_lib.core.partial_softmax` (`partial_of`, `merge_partials`,
# `merge_tree`). Here one row of 23 scores for 2 query heads is cut into five parts, one of them empty and
# one made only of masked (-inf) scores, and merged along three trees:

# %%
from pagedkv_lib.core import partial_softmax as ps
from pagedkv_lib.viz.merge_tree import plot_merge_tree

gen = torch.Generator().manual_seed(9)
scores = torch.randn(2, 23, generator=gen, dtype=torch.float64) * 30  # [H, n]; exp(s) overflows fp32
scores[:, 14:17] = float("-inf")  # three masked tokens
values = torch.randn(23, 4, generator=gen, dtype=torch.float64)  # [n, D]
bounds = [0, 6, 6, 14, 17, 23]  # parts 0..5, empty, 6..13, 14..16 (all -inf), 17..22
parts = [ps.partial_of(scores[:, a:b], values[a:b]) for a, b in zip(bounds, bounds[1:])]
row = torch.softmax(scores, dim=-1) @ values  # [H, D] the whole row at once
trees = {"left to right": ((((0, 1), 2), 3), 4), "balanced": ((0, 1), (2, (3, 4))),
         "random": ps.random_tree(list(range(5)), random.Random(7))}
for name, tree in trees.items():
    merged = ps.output(ps.merge_tree(parts, tree))  # [H, D]
    same = torch.allclose(merged, row, rtol=0, atol=1e-12)
    print(f"{name:13s} {str(tree):30s} equals softmax(row) @ v: {same}")

# %% [markdown]
# The random tree, drawn: the parts at the bottom in the order the tree takes them, each merge above its two
# inputs.

# %%
labels = [f"tokens {a}..{b - 1}" if b > a else "empty" for a, b in zip(bounds, bounds[1:])]
labels[3] = "tokens 14..16\n(all -inf: empty)"
fig, ax = plt.subplots(figsize=(7.5, 2.8), dpi=80)
plot_merge_tree(trees["random"], labels, ax=ax, title=f"the random tree {trees['random']}")
plt.show()

# %% [markdown]
# **The edge cases.** An empty part (no token, or only masked ones) has `m = -inf`. Merged with a part that
# has scores, its weight is `exp(-inf - m) = 0`: fine. Merged with another empty part, the formula as written
# computes `exp(-inf - (-inf)) = exp(nan)`, and the NaN would reach the output of a whole row. So the merge
# reads the weight of an empty part as 0 whatever the other part holds, and a row that stays empty gives
# output 0 and lse -inf (FlashAttention's convention). v2 meets this case: a short context leaves its last
# splits empty.

# %%
empty, masked = parts[1], parts[3]
naive = torch.exp(empty.m - torch.maximum(empty.m, masked.m))  # the formula as written
print("the formula's weight for empty merged with empty:", naive.tolist())
both = ps.merge_partials(empty, masked)
print(f"merge_partials: m {both.m.tolist()}, l {both.l.tolist()}, output {ps.output(both)[0].tolist()}, "
      f"lse {ps.lse(both).tolist()}")
whole = ps.merge_tree(parts, trees["balanced"])
with_empty = ps.merge_partials(empty, whole)
print("an empty part is the identity:",
      torch.equal(with_empty.acc, whole.acc) and torch.equal(with_empty.l, whole.l))
stored = [ps.from_lse(ps.output(p), ps.lse(p)) for p in parts]  # what a kernel writes: (o, lse)
print("the kernels' (o, lse) parts merge the same way:",
      torch.allclose(ps.output(ps.merge_tree(stored, trees["random"])), row, rtol=0, atol=1e-12))

# %% [markdown]
# **Rounding.** In real numbers every tree gives the same result; in floating point the additions happen in
# a different order, so two trees may differ in the last bits (PyTorch issue #182593: FlexAttention's output
# changed with the physical placement of pages, because tiles larger than a page regrouped the tokens and
# changed the reduction order; closed as expected behaviour). Commutativity, though, is exact: `max` and a
# two-term sum do not care about their order.

# %%
p32 = [ps.SoftmaxPartial(p.m.float(), p.l.float(), p.acc.float()) for p in parts]
outs = [ps.output(ps.merge_tree(p32, ps.random_tree(list(range(5)), random.Random(s)))) for s in range(20)]
print("20 random trees in fp32, each within 1e-6 of the fp64 row:",
      all(torch.allclose(o.double(), row, rtol=1e-6, atol=1e-6) for o in outs))
ab, ba = ps.merge_partials(p32[0], p32[2]), ps.merge_partials(p32[2], p32[0])
print("merge(a, b) equals merge(b, a) bit for bit:", torch.equal(ab.acc, ba.acc) and torch.equal(ab.l, ba.l))

# %% [markdown]
# `tests/core/test_partial_softmax.py` checks the property itself with hypothesis: random rows (some scores
# -inf, large enough to overflow a plain `exp`), random cut points (repeated points make empty parts), random
# merge orders and tree shapes, each against a float64 softmax over the whole row; and the empty cases.
#
# In the engines: FlashInfer merges `(output, lse)` pairs with `merge_state(v_a, s_a, v_b, s_b)` and
# `merge_states` (`flashinfer-ai/flashinfer@01c897d:flashinfer/cascade.py`), which its cascade attention uses
# to join a shared prefix's part with each request's own; vLLM's first split-KV kernel merged its partitions
# in one level (section 10); the course's v3 merge (`pagedkv_lib/kernels/triton_decode_merge.py`) folds a
# sequence's chunks in steps with a running (max, sum, acc): a left-to-right tree.
#
# ## 10. Reading vLLM's original CUDA kernel
#
# Before FlashAttention and its Triton backends, vLLM decoded with a CUDA kernel of its own, adapted from
# NVIDIA's FasterTransformer: `paged_attention_kernel` in `csrc/attention/attention_kernels.cuh`
# (vllm-project/vllm@04d1abd3918b), launched by `csrc/attention/paged_attention_v1.cu` (@03f861174cf6) and
# `csrc/attention/paged_attention_v2.cu` (@0e60ae8f4d33); older trees held all three in
# `csrc/attention/attention_kernels.cu`. It computes what section 1 computes, one query per sequence
# against its K/V through the block table, and chooses differently almost everywhere. Reading it:
#
# - **Who does what.** Grid `(num_heads, num_seqs)` for v1: one thread block of `NUM_THREADS = 128` threads
#   (4 warps) per **query head** and sequence. Warp w takes the sequence's KV blocks w, w + 4, w + 8, ...
#   Inside a warp the threads form **thread groups** of `THREAD_GROUP_SIZE = max(32 / BLOCK_SIZE, 1)`
#   threads: each group takes one token of the block, its threads split the head dimension and load it in
#   16-byte vectors, and a shuffle sums their partial dot products. So in one step a warp reads one whole KV
#   block of K for its head, `BLOCK_SIZE x head_size` elements.
# - **Layouts made for those loads.** K is stored `[num_blocks, num_kv_heads, head_size / x, block_size, x]`
#   with `x` = 16 bytes of elements: the 16-byte pieces of neighbouring tokens sit side by side, so a warp's
#   groups load contiguous memory. V is `[num_blocks, num_kv_heads, head_size, block_size]`: one row of a
#   dimension holds the block's tokens, so a thread loads several tokens of one dimension at once and
#   multiplies them by their probabilities.
# - **A two-pass softmax in shared memory.** Pass 1 writes every token's logit into shared memory, a
#   block-wide reduction finds the max, a loop exponentiates, sums and normalises (`1 / (exp_sum + 1e-6)`);
#   pass 2 walks the blocks again for V and accumulates in fp32 registers, and the warps' sums are added
#   through shared memory. No online softmax: the exact max comes first, at the price of one float of shared
#   memory per token of the context (`padded_max_seq_len * sizeof(float)` in the v1 launcher).
# - **v2: partitions of 512 tokens.** `PARTITION_SIZE = 512`: grid `(num_heads, num_seqs,
#   max_num_partitions)`, each block does the same on its 512 tokens (returning at once when its partition
#   starts past the sequence's end) and writes its max logit, its exp sum and its normalised output
#   (`tmp_out`, in the model's dtype). `paged_attention_v2_reduce_kernel`, grid `(num_heads, num_seqs)`,
#   copies the output of a one-partition sequence, and otherwise takes the global max, rescales each
#   partition's exp sum by `exp(max_i - max)`, sums them, and adds up `tmp_out_i x rescaled_i / sum`:
#   section 9's merge, flattened into one level.
# - **The rule that picks v1 or v2** is in Python, `PagedAttention.forward_decode` in
#   `vllm/attention/ops/paged_attn.py` (vllm-project/vllm@5da3a322a03e): `max_num_partitions = ceil(
#   max_seq_len / 512)`, `use_v1 = max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads
#   > 512)`. v1 when one partition would do or there are already more than 512 thread blocks; v2 otherwise,
#   and always past 8,192 tokens, where v1's logits no longer fit in shared memory.
#
# The numbers of those choices for head size 128 in fp16, and the rule applied to this notebook's shapes
# (32 query heads) beside the course's v2 split counts:

# %%
WARP, NUM_THREADS, PARTITION_SIZE = 32, 128, 512  # vLLM's constants (fp16: 2 bytes)
for block_size in (8, 16, 32):
    group = max(WARP // block_size, 1)  # THREAD_GROUP_SIZE
    vec = max(16 // (group * 2), 1)  # VEC_SIZE: elements each thread loads at once
    print(f"block size {block_size:2d}: thread groups of {group}, {WARP // group} tokens per warp step, "
          f"{vec} fp16 per load; a warp reads {block_size * 128 * 2} B of K per step")
print(f"v1's shared memory for the logits of 8,192 tokens: {8192 * 4 // 1024} KiB")


def vllm_uses_v1(max_seq_len, num_seqs, num_heads):  # vllm/attention/ops/paged_attn.py, forward_decode
    partitions = -(-max_seq_len // PARTITION_SIZE)
    return max_seq_len <= 8192 and (partitions == 1 or num_seqs * num_heads > 512)


for B, L in [(1, 512), (1, 4096), (8, 4096), (64, 4096), (32, 16384)]:
    v1 = vllm_uses_v1(L, B, 32)
    blocks = B * 32 * (1 if v1 else -(-L // PARTITION_SIZE))
    cfg = choose_config(B, 32, 8, 128, L, num_sms=132, interpreted=False, version=2)
    print(f"B = {B:2d} x {L:5d}: vLLM {'v1' if v1 else 'v2'}, {blocks:5d} thread blocks | course v2: "
          f"P = {cfg.num_splits:2d}, {B * 8 * cfg.num_splits:4d} programs")

# %% [markdown]
# **The same algorithm, different choices**, side by side with the course's kernel
# (`pagedkv_lib/kernels/triton_decode_attention.py`):
#
# - **A program owns**: in vLLM one query head of one sequence, so under GQA each KV head's K/V is read G
#   times; in the course one KV head of one sequence and its G query heads, so each tile is read once.
# - **Softmax**: vLLM two passes, every logit kept in shared memory (v1: at most 8,192 tokens); the course
#   online, a running max, sum and accumulator, nothing kept per token, no length limit.
# - **Unit of work and dot products**: vLLM one KV block per warp per step (block sizes 8, 16, 32), a dot
#   product per token across the threads of a group; the course a tile of BLOCK_N tokens that may span
#   blocks, scored by one `tl.dot` of a `[BLOCK_G, D]` tile by a `[D, BLOCK_N]` one, on tensor cores.
# - **Cache layout**: vLLM K `[N, H_kv, D/x, S, x]` and V `[N, H_kv, D, S]`, shaped for its loads; the
#   course `[N, S, H_kv, D]` for both (nano-vllm's and FlashAttention's).
# - **When to split**: vLLM picks v1 or v2 on the host from `max_seq_len` and `num_seqs x num_heads`; the
#   course's v2 from the table width, v3 from the actual lengths, on the GPU.
# - **A split's result**: vLLM max, exp sum and output in the model's dtype; the course lse (base 2) and
#   output in fp32.
# - **Padded table entries**: vLLM never reads them (its loop stops at the sequence's last block); the
#   course masks its loads, since the table is padded with -1.
#
# In my own words: vLLM's kernel gives every query head its own thread block and lets a warp chew through a
# whole KV block per step, with a cache layout shaped so those loads are contiguous; it pays with shared
# memory that grows with the context (hence v2 and its 8,192 limit) and with K/V read once per query head,
# which GQA made expensive. The course's kernel gives a program a KV head and all its query heads, so each
# tile is read once and the scores are a matrix product on tensor cores; the online softmax keeps nothing
# per token, so one program can walk any length; and the split is decided from the lengths on the GPU
# rather than from the longest sequence on the host. Both end with the same merge of section 9.

# %% [markdown]
# ## Exercises
#
# **131 · Triton paged decode · hard.** In `practice/131_triton_paged_decode.py`, write a kernel and its
# launcher `paged_attention_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale)`: exercise
# 125's contract, with an online softmax over KV tiles read through the block table. Split-KV is optional.
# The judge runs it in Triton's interpreter on small cases (garbage and NaN around every context, tables
# padded with -1, caches between NaN guard blocks, odd group sizes and head dims, scores that overflow
# `exp` without the running max), and natively on a GPU on contexts up to 5,000 tokens, where `--bench`
# compares your bandwidth with the library kernel's:
#
#     python practice/judge.py 131
#     python practice/judge.py 131 --device cuda --bench      # on a machine with a GPU
#
# Or solve it here: write your kernel and launcher below and run the cell; `judge(131)` grades
# `paged_attention_decode_triton` from this notebook on the same hidden cases, in Triton's interpreter (until
# you do, it reports *not implemented*). On a GPU machine this notebook's Triton was imported for the GPU:
# save your code to `practice/131_*.py` and grade it there with `--device cuda`.

# %%
from pagedkv_lib.judge import judge


def paged_attention_decode_triton(q, k_cache, v_cache, block_tables, context_lens, scale):
    raise NotImplementedError  # your code here: launch your kernel over a (B, H_kv) grid


result = judge(131)

# %% [markdown]
# Once your kernel passes, `show_reference(131)` prints the library's answer, the one-pass kernel v1 with the
# helpers it calls, beside the tuned default v3 and its launcher (until then it says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(131)   # the one-pass kernel (v1), then the tuned one (v3), each after its helpers

# %% [markdown]
# ## In real systems
#
# - **vLLM** `triton_unified_attention.py`: `kernel_unified_attention_2d`, grid `(query blocks, KV heads)`,
#   packs the query heads of a KV head into one `tl.dot` tile (at least 16 rows), and looks up each token's
#   page with `block_tables + seq * stride + offset // BLOCK_SIZE`. Its block-table load is unmasked: vLLM
#   pads tables with 0, its null block, so every entry is a valid address. `kernel_unified_attention_3d` (PR
#   #19152) is split-KV with 16 segments and a `reduce_segments` kernel, used only for small decode batches.
# - **SGLang** (from LightLLM), also in vLLM as `triton_decode_attention.py`: two-stage flash-decoding over
#   `(batch, heads, NUM_KV_SPLITS)`, `page = load(Req_to_tokens[b, offs_n // PAGE_SIZE], mask)`; stage 1
#   stores `acc / e_sum` and the log-sum-exp, stage 2 merges.
# - **Length-aware partitions**: FlashInfer plans on the host (`plan()` reads the lengths, then `run()` many
#   times; with CUDA graphs it re-plans into fixed buffers before each replay). FlashAttention-3 can compute
#   its split decisions on the device in a small kernel of its own (`get_scheduler_metadata`, which vLLM
#   calls). The course's v3 recomputes the plan inside every program: no host sync and no extra launch.
# - **FlashAttention** `flash_attn_with_kvcache(..., block_table=..., num_splits=0)` picks the split count
#   itself; nano-vllm pads its tables with -1, safe because the kernel never reads past `cache_seqlens`.
# - **FlashInfer** reads pages from CSR arrays (`kv_indptr`, `kv_page_indices`, `kv_last_page_len`) and
#   reports bandwidth utilisation "close to 100% for long sequences".
#
# ## Say it in the interview
#
# A paged decode kernel runs one program per sequence and KV head, plus a split of the context when the batch
# is too small to fill the GPU. The program loads the query rows of all the query heads that share its KV
# head, walks the context in tiles, looks up each position's block in the table, loads K and V rows from
# wherever the blocks lie, and keeps an online softmax: a running max, a running sum and an accumulator,
# rescaled by `exp(m_old - m_new)` when the max grows. Positions past the context length are masked in every
# load, because the table is padded with -1 and the last block has a tail of garbage. With splits, each
# program writes a partial output and its log-sum-exp, and a small kernel merges them. Equal splits fail on
# ragged batches, so I cut the actual contexts into chunks of equal work, with the plan computed on the GPU
# from the lengths so that a CUDA graph stays valid. Decode is memory-bound, so I report bytes over time
# against the measured copy bandwidth and against SDPA's default dispatch with its backend named: on an H200
# the kernel is within a few percent of cuDNN on large uniform batches and about twice as fast as the best
# baseline on ragged ones. The merge of partial results is associative and commutative, so the parts can be
# merged in any order or tree, provided an empty part weighs 0; vLLM's original CUDA kernel made the other
# choices, a thread block per query head and a two-pass softmax in shared memory, and switched to 512-token
# partitions and a reduce kernel (v2) when there were few sequences or contexts past 8,192 tokens.
