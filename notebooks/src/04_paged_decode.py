# %% [markdown]
# # 04 · Paged decode attention
#
# In a decode step every sequence brings one new query token, and that query attends to the sequence's whole
# context, which lives in blocks scattered over the cache. After this notebook you can write paged decode
# attention in PyTorch (gather K/V through the block table, dropping -1 padding and the unused tail of the
# last block; map query heads to KV heads for GQA; softmax), prove it right against SDPA on contiguous K/V
# with caches full of garbage, recognise the two classic bugs by their symptoms, and say how many bytes a
# decode step must read.

# %% [markdown]
# ## Self-test
#
# 1. Block size 4, context 13, table row `[10, 14, 5, 1, -1, -1]`. Which slots does the decode step read?
# 2. 32 query heads, 8 KV heads. Which KV head does query head 13 read?
# 3. The kernel reads whole blocks. Why must the rows past the context length still be excluded?
# 4. Does a larger block size make a decode step read fewer bytes?
#
# <details><summary>Answer</summary>
#
# 1. `40..43, 56..59, 20..23, 4`: blocks 10, 14 and 5 in full, then one token of block 1. The -1 entries
#    are padding and are never read; the last three rows of block 1 are the tail and are cut.
# 2. `13 // (32 // 8) = 3`. Query heads 12 to 15 share KV head 3.
# 3. Those rows hold whatever was there before: another request's old tokens, or garbage. Any of them that
#    enters the softmax gets a weight and changes the answer (and a NaN there makes the whole output NaN).
# 4. No. Every token of the context is read once: `context x H_kv x D x 2 (K and V) x dtype bytes` per
#    layer. The block size changes how many table entries are looked up, not how much K/V is read.
#
# </details>

# %% [markdown]
# ## 1. One query against a scattered context
#
# For sequence `b` with context length `n` and query `q[b] [H, D]`, decode attention is ordinary attention
# with a single query at the last position (so no causal mask is needed):
#
# ```
# K, V = the first n token rows of the blocks block_tables[b][0], [1], ...      [n, H_kv, D] each
# out[b, h] = softmax(q[b, h] . K[:, h // group]^T * scale) . V[:, h // group]   group = H // H_kv
#
# block table [10, 14, 5, 1, -1, -1], block size 4, n = 13:
#   block 10 -> tokens 0..3  | block 14 -> 4..7 | block 5 -> 8..11 | block 1 -> 12 [. . .]  | -1 -1: padding
#                                                                          tail: not this sequence's tokens
# ```
#
# The first piece is the gather: a padded table row becomes the sequence's contiguous K (or V). Drop the -1
# entries, read the first `ceil(n / S)` blocks in table order, one after the other, and keep the first `n`
# rows: 13 tokens at block size 4 read 4 blocks, 16 rows, of which the last 3 are cut.
#
# The library's `gather_kv` does this. `make_paged_batch` kept each sequence's keys before scattering them
# into a cache whose other rows are NaN, so the gather can be checked against them:

# %%
import torch

import pagedkv_lib as pk

batch = pk.make_paged_batch([13, 7], block_size=4, num_heads=8, num_kv_heads=2, head_dim=16, seed=0,
                            extra_padding=2)  # caches filled with NaN outside these two sequences
for b in range(2):
    row, n = batch.block_tables[b], int(batch.context_lens[b])
    k = pk.gather_kv(batch.k_cache, row, n)  # [n, H_kv, D]
    assert torch.equal(k, batch.keys[b])
    print(f"sequence {b}: table row {row.tolist()}, context {n} -> K {tuple(k.shape)}, equal to its keys")

# %% [markdown]
# ## 2. GQA: which KV head each query head reads
#
# With grouped-query attention `H` query heads share `H_kv` KV heads in consecutive groups of
# `group = H // H_kv`: query head `h` reads KV head `h // group`. Expanding K along the head axis with
# `repeat_interleave(group)` builds exactly that mapping (`repeat` would build `h % H_kv`, a classic bug).

# %%
H, H_kv = 8, 2
group = H // H_kv
print("query head       :", list(range(H)))
print("KV head, correct :", [h // group for h in range(H)])
print("repeat_interleave:", torch.arange(H_kv).repeat_interleave(group).tolist())
print("repeat (wrong)   :", torch.arange(H_kv).repeat(group).tolist())

# %% [markdown]
# ## 3. The whole decode
#
# Per sequence `b`, with `n = context_lens[b]` and `G = H // H_kv`:
#
# ```
# K, V       the gather of section 1, from k_cache and v_cache       [n, H_kv, D] each
# scores     q[b, h] . K[j, h // G] * scale, for every key j          [H, n]
# weights    softmax of each head's scores over the n keys           [H, n]
# out[b, h]  sum over j of weights[h, j] * V[j, h // G]              [H, D]
# ```
#
# No causal mask: the query is the last token, so every key is in its past. Compute in float32 at least (the
# library does, and in float64 for float64 inputs); the result goes back in `q`'s dtype.
#
# ## 4. The library, checked against SDPA on contiguous K/V
#
# The independent reference knows nothing about blocks: `make_paged_batch` keeps every sequence's K and V
# contiguous before scattering them into a cache whose other rows are NaN, and `sdpa_batch` runs PyTorch's
# `scaled_dot_product_attention` on the contiguous copies in float64. Awkward context lengths (1, 5, 20, 37,
# 130), two padding columns on every table row, and block sizes 4, 16 and 256.

# %%
from pagedkv_lib.viz.attention_plots import error_order

seq_lens = [37, 5, 20, 1, 130]
for bs in (4, 16, 256):
    batch = pk.make_paged_batch(seq_lens, block_size=bs, num_heads=8, num_kv_heads=2, head_dim=64, seed=bs,
                                extra_padding=2)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 64**-0.5)
    reference = pk.sdpa_batch(batch)  # [B, H, D] float64, contiguous K/V
    err = (pk.paged_attention_decode(*args).double() - reference).abs().max().item()
    assert err < 1e-5
    print(f"block size {bs:3d}: tables {tuple(batch.block_tables.shape)}, cache "
          f"{tuple(batch.k_cache.shape)}, max error against SDPA (float32 inputs): {error_order(err)}")

# %% [markdown]
# It agrees with SDPA at every block size, although most of each cache is NaN: it never reads a row outside a
# sequence's context. Exercise 125 and the Triton kernel of notebook 11 are graded against it.
#
# ## 5. The two classic bugs, by their symptoms
#
# Forget to cut the tail, and the garbage rows of the last block join the softmax: with a NaN-filled cache the
# output turns NaN, in a real engine it is silently wrong. Reading whole blocks is what the library computes
# when each context length is rounded up to a multiple of the block size.
#
# Expand the heads with `repeat` instead of `repeat_interleave`, and query head `h` reads KV head `h % H_kv`
# instead of `h // G`: no NaN, just wrong numbers. The library gives that answer too, if each query head is
# first moved to a place whose group reads KV head `h % H_kv` (place `(h % H_kv) * G + h // H_kv`) and moved
# back afterwards.

# %%
S, H, H_kv = 16, 8, 2
G = H // H_kv
batch = pk.make_paged_batch(seq_lens, block_size=S, num_heads=H, num_kv_heads=H_kv, head_dim=64, seed=0)
reference = pk.sdpa_batch(batch)  # [B, H, D] float64
whole_blocks = ((batch.context_lens + S - 1) // S * S).to(torch.int32)  # [B]: the tail read too
no_cut = pk.paged_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables, whole_blocks,
                                   64**-0.5)  # [B, H, D]
place = torch.tensor([(h % H_kv) * G + h // H_kv for h in range(H)])  # [H]: its group reads KV head h % H_kv
q_moved = torch.empty_like(batch.q)  # [B, H, D]
q_moved[:, place] = batch.q
tiled = pk.paged_attention_decode(q_moved, batch.k_cache, batch.v_cache, batch.block_tables,
                                  batch.context_lens, 64**-0.5)[:, place]  # [B, H, D], back in head order
print("tail not cut: NaN in sequences", [b for b in range(len(seq_lens)) if no_cut[b].isnan().any()])
print(f"repeat instead of repeat_interleave: max error {(tiled.double() - reference).abs().max().item():.2f}")

# %% [markdown]
# A context that fills its last block exactly has no tail and escapes the first bug. None of 37, 5, 20, 1 and
# 130 is a multiple of 16, so every sequence shows it here; a test with lengths 16 and 32 would have missed
# it. That is why the judge's lengths are awkward.
#
# ## 6. Which rows one decode step reads
#
# A cache of 64 rows holding two sequences (contexts 13 and 7), laid out 16 rows per line in slot order. Thick
# lines separate physical blocks. Dark rows are read by this decode step; pale rows belong to a sequence's
# last block but lie past its context and are cut; grey blocks belong to nobody.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import slots as slot_viz

tables, reads = slot_viz.decode_reads(4)  # tables from make_paged_batch, slots from slot_mapping_for
read = [s for r in reads for s in r]
owner, state = slot_viz.slot_states(tables, slot_viz.DECODE_CONTEXT_LENS, 16, 4, marked=read)
fig, ax = plt.subplots(figsize=(8, 1.9), dpi=80)
slot_viz.draw_cache_rows(ax, owner, state, 4, width=16, names=["seq 0 (13 tokens)", "seq 1 (7 tokens)"])
plt.show()
for b, (t, r) in enumerate(zip(tables, reads)):
    print(f"seq {b}: table {t}, reads {slot_viz.format_slots(r)}")

# %% [markdown]
# Move the block size from 1 to 32. At 1 every token is its own block and the reads scatter over the whole
# cache, with nothing to cut; at 32 each sequence sits in one block and cuts most of it. The rows read are
# always 13 + 7 = 20.

# %%
read_explorer = slot_viz.DecodeReadExplorer()
print(read_explorer.summary_text())
read_explorer.widget

# %% [markdown]
# ## 7. What a decode step costs
#
# Count the arithmetic per byte read. A query head uses each K/V element of its context once, in a
# multiply-add (2 FLOPs): `q . k` for a key, `p * v` into the output for a value. A KV head is read by its G
# query heads, so decode does **2G FLOPs per K/V element, 2G / (bytes per element) FLOPs per byte**: with the
# GQA of Llama-3-8B (32 query heads over 8 KV heads, G = 4) in bf16, 4 FLOPs per byte. A GPU's arithmetic
# waits for memory below about a hundred FLOPs per byte (notebook 12 draws the roofline): decode is bound by
# memory bandwidth. So the number to know is the bytes read, and the best possible time is bytes / bandwidth.
# For a Llama-3-8B-like layer (32 query heads, 8 KV heads, head_dim 128, bf16) and a batch of 64 sequences of
# 4,096 tokens:

# %%
H, H_kv, D, dtype_bytes = 32, 8, 128, 2
per_token = 2 * H_kv * D * dtype_bytes  # K and V of one token in one layer
flops_per_token = 2 * 2 * H * D  # q . k and p * v: one multiply-add per element and query head
print(f"{flops_per_token / (2 * H_kv * D):.0f} FLOPs per K/V element, "
      f"{flops_per_token / per_token:.0f} FLOPs per byte")
B, context = 64, 4096
total = B * context * per_token
print(f"{per_token:,} B per token per layer; {B} x {context} tokens: {total / 1e9:.2f} GB per layer per step")
for gpu, bandwidth in [("H100 SXM, 3.35 TB/s", 3.35e12), ("H200, 4.8 TB/s", 4.8e12)]:
    print(f"{gpu}: at least {total / bandwidth * 1e6:.0f} us per layer")
for bs in (1, 16, 256):
    print(f"block size {bs:3d}: {-(-context // bs):4d} table entries per sequence, same {total / 1e9:.2f} GB")

# %% [markdown]
# Paging costs nothing in bytes: a good paged kernel reaches the same bandwidth as one on contiguous memory.
# Notebook 11 writes such a kernel in Triton and measures it against this bound.
#
# ## Exercises
#
# **125 · Paged decode attention · medium.** In `practice/125_paged_decode_attention.py`, write
# `paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale)`: `q [B, H, D]`, caches
# `[N, S, H_kv, D]`, tables `[B, M]` int32 padded with -1, result `[B, H, D]` in `q`'s dtype. The judge's
# caches are full of garbage, its lengths are awkward, and its heads are grouped. Grade it with
#
#     python practice/judge.py 125
#
# Or solve it here: fill in the function below and run the cell. `judge(125)` grades the function defined
# in this notebook on the same hidden cases (until you do, it reports *not implemented*).

# %%
from pagedkv_lib.judge import judge


def paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale):
    raise NotImplementedError  # your code here


result = judge(125)

# %% [markdown]
# Once your version passes, `show_reference(125)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(125)

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/layers/attention.py`) decodes with FlashAttention's
#   `flash_attn_with_kvcache(q.unsqueeze(1), k_cache, v_cache, cache_seqlens=context_lens,
#   block_table=block_tables, softmax_scale=scale, causal=True)`. Its block tables are padded with -1
#   (`prepare_block_tables` in `nanovllm/engine/model_runner.py`), which is safe only because FlashAttention
#   never reads past `cache_seqlens`.
# - **vLLM** pads block tables with 0 instead: block 0 is its null block, and its Triton kernels load block
#   ids without a mask. `vllm/attention/ops/triton_unified_attention.py` has a 2D kernel (one program per
#   query tile and KV head) and a 3D split-KV kernel (PR #19152) that cuts long contexts into 16 segments and
#   merges them in `reduce_segments`, used for small decode batches.
# - **SGLang** (from LightLLM), in vLLM as `triton_decode_attention.py`: two-stage flash-decoding over
#   `(batch, heads, NUM_KV_SPLITS)`, with the page looked up as `Req_to_tokens[b, offs_n // PAGE_SIZE]`.
# - **FlashInfer**'s `BatchDecodeWithPagedKVCacheWrapper` reads the pages of a batch from `kv_indptr`,
#   `kv_page_indices` and `kv_last_page_len` (the cut tail, in CSR form); its blog reports bandwidth
#   utilization "close to 100% for long sequences".
# - **PyTorch**'s experimental paged attention (`torch/nn/attention/experimental/_paged_attention.py`) maps
#   FlexAttention's block mask through the page table; issue #182593 reports outputs that depended on where
#   pages were placed when the mask's block size exceeded the page size.
#
# ## Say it in the interview
#
# Paged decode attention is ordinary attention for one query per sequence, except that the keys and values are
# gathered through the block table: drop the -1 padding, read the blocks in table order, and cut the last
# block at the context length. Query head `h` reads KV head `h // (H / H_kv)`, and an efficient kernel loads
# each KV block once for its whole group of query heads. Decode is memory-bound: each step reads every K/V
# byte of every context once, `context x H_kv x D x 2 x dtype bytes` per layer, so the metric is achieved
# bandwidth against the HBM peak, and paging costs nothing there. I test it against SDPA on contiguous K/V,
# with the unused cache rows filled with NaN and context lengths that are not multiples of the block size.
