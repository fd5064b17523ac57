# %% [markdown]
# # 05 · Varlen attention and `cu_seqlens`
#
# One engine step mixes kinds of work: a sequence that decodes one token, a prompt computed in full, and the
# second half of a long prompt that was split in two (chunked prefill). Their query tokens go into one flat
# tensor `q [T, H, D]`, and one kernel call serves them all. After this notebook you can describe such a batch
# with `cu_seqlens_q` (vLLM: `query_start_loc`), place the causal mask of new tokens that sit at the end of a
# longer context, map query heads to KV heads (GQA), and check a paged varlen attention against SDPA on
# contiguous K/V.

# %% [markdown]
# ## Self-test
#
# 1. A step holds a decode with context 37, a 5-token prompt, and the last 8 tokens of a 20-token prompt, in
#    that order. What is `cu_seqlens_q`?
# 2. In that chunked prefill, which key positions may the first of the 8 new queries read?
# 3. With 8 query heads and 2 KV heads, which KV head does query head 5 read?
# 4. Why is `torch.tril(torch.ones(q_len, seq_len))` the wrong mask for a decode token?
# 5. With a paged cache, what must the attention kernel be given besides the queries and the cache itself?
#
# <details><summary>Answer</summary>
#
# 1. `[0, 1, 6, 14]`: the prefix sums of the query counts 1, 5, 8. Sequence `b` owns rows
#    `cu_seqlens_q[b] : cu_seqlens_q[b + 1]`.
# 2. Positions 0 to 12. The 8 new tokens are the last 8 of 20, so the first sits at position 20 - 8 = 12.
# 3. KV head `5 // (8 // 2) = 1`.
# 4. That triangle starts at the top-left corner: the decode token (1 query, 37 keys) would read key 0 only.
#    New tokens are the last ones of their context, so the triangle must be shifted right by
#    `seq_len - q_len` (aligned to the bottom-right corner); the decode token then reads all 37 keys.
# 5. Where each sequence's keys are: the block tables (`[B, M]` int32, rows padded with -1), and how many
#    there are: each context length (`seq_lens`, decode's `context_lens`), which cuts the last block; where
#    each sequence's queries are, `cu_seqlens_q` (a decode batch has one query per sequence and needs none);
#    the block size, read from the cache's shape; and, to size the launch, the longest `q_len` and `seq_len`
#    (`max_seqlen_q`, `max_seqlen_k`). Writing the new K/V first also needs `slot_mapping`.
#
# </details>

# %% [markdown]
# ## 1. One flat batch
#
# The three sequences of this notebook, in batch order. Each brings `q_len` new tokens, and they are always
# the LAST `q_len` tokens of its `seq_len`-token context: query `i` sits at position `seq_len - q_len + i`.
#
# ```
# q rows    0 | 1  2  3  4  5 |  6  7  8  9 10 11 12 13
# sequence  A |       B       |            C
# position 36 | 0  1  2  3  4 | 12 13 14 15 16 17 18 19
#
# cu_seqlens_q = [0, 1, 6, 14]      sequence b owns rows cu_seqlens_q[b] : cu_seqlens_q[b + 1]
# ```
#
# A is a decode (context 37, one new token), B a full prefill (5 of 5), C the second chunk of a 20-token
# prompt (tokens 12 to 19; tokens 0 to 11 were computed by an earlier step and are in the cache).

# %%
import torch

seq_lens = [37, 5, 20]  # context of each sequence, this step's tokens included
q_lens = [1, 5, 8]  # tokens computed this step
cu_seqlens_q = torch.tensor([0] + q_lens).cumsum(0).to(torch.int32)  # [B + 1]
cu_seqlens_k = torch.tensor([0] + seq_lens).cumsum(0).to(torch.int32)  # [B + 1]
positions = torch.cat([torch.arange(n - t, n) for n, t in zip(seq_lens, q_lens)])  # [T]
print("cu_seqlens_q:", cu_seqlens_q.tolist(), "  max_seqlen_q:", max(q_lens))
print("cu_seqlens_k:", cu_seqlens_k.tolist(), " max_seqlen_k:", max(seq_lens))
print("positions   :", positions.tolist())
for b, name in enumerate("ABC"):
    lo, hi = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
    print(f"{name}: q rows {lo}..{hi - 1}, positions {positions[lo:hi].tolist()}")

# %% [markdown]
# `cu_seqlens_k` is what FlashAttention's `flash_attn_varlen_func` takes for the keys; the course's library
# takes the per-sequence lengths `seq_lens` instead (the same information: `seq_lens[b] =
# cu_seqlens_k[b + 1] - cu_seqlens_k[b]`).
#
# ## 2. The block tables
#
# At block size 4 the sequences need `ceil(37/4), ceil(5/4), ceil(20/4)` = 10, 2, 5 blocks. Here the blocks
# were handed out one at a time, round-robin over the sequences that still needed one (as if the three had
# grown side by side), so no table is contiguous. Rows are padded with -1 to the longest table.

# %%
import pagedkv_lib as pk

block_size = 4
tables = pk.round_robin_tables(seq_lens, block_size)
print(tables)
assert tables == [[0, 3, 6, 8, 10, 12, 13, 14, 15, 16], [1, 4], [2, 5, 7, 9, 11]]
block_tables = pk.pad_block_tables(tables)  # [B, M] int32, -1 = padding
print(block_tables)
print("slots of C's new tokens (positions 12..19):", pk.slot_mapping_for(tables[2], list(range(12, 20)), 4))

# %% [markdown]
# ## 3. The causal mask, shifted
#
# A query at position `p` reads keys `0..p` of its own sequence. With the queries at positions
# `seq_len - q_len .. seq_len - 1`, the allowed set is a lower triangle shifted right by `seq_len - q_len`:
# `tril(ones(q_len, seq_len), diagonal=seq_len - q_len)`. FlashAttention's docstring says "aligned to the
# bottom right corner". Here is C's mask, 8 queries by 20 keys:

# %%
n, t = seq_lens[2], q_lens[2]
q_pos = torch.arange(n - t, n)  # [8]: positions 12..19
mask_C = torch.arange(n)[None, :] <= q_pos[:, None]  # [8, 20]
assert torch.equal(mask_C, torch.ones(t, n, dtype=torch.bool).tril(diagonal=n - t))
for p, row in zip(q_pos.tolist(), mask_C):
    print(f"pos {p:2d}  " + "".join("#" if a else "." for a in row.tolist()))

# %% [markdown]
# The whole batch in one picture. A row per query token, a column per key; keys are laid out sequence after
# sequence, thin lines separate blocks and the number on top of each block is its physical id. Coloured cells
# are read; grey cells are the sequence's own keys still in the causal future. A's single query reads all 37
# keys, B is a plain triangle, C a triangle shifted 12 columns right. White cells belong to other sequences:
# a query never reads them, which is why one kernel call can serve unrelated requests.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.attention_plots import plot_varlen_mask

fig, ax = plt.subplots(figsize=(8, 3.4), dpi=80)
plot_varlen_mask(seq_lens, q_lens, block_size, ax=ax)
fig.tight_layout()
plt.show()

# %% [markdown]
# PyTorch's `scaled_dot_product_attention(..., is_causal=True)` uses the other alignment: its triangle starts
# at the top-left corner, which is right only when `q_len == seq_len`. On C's shapes it differs from the
# shifted mask (PyTorch offers `torch.nn.attention.bias.causal_lower_right` for the shifted one):

# %%
import torch.nn.functional as F

g = torch.Generator().manual_seed(0)
q_C = torch.randn(1, t, 64, generator=g, dtype=torch.float64)  # [1, 8, D]
k_C = torch.randn(1, n, 64, generator=g, dtype=torch.float64)  # [1, 20, D]
v_C = torch.randn(1, n, 64, generator=g, dtype=torch.float64)  # [1, 20, D]
top_left = F.scaled_dot_product_attention(q_C, k_C, v_C, is_causal=True)
shifted = F.scaled_dot_product_attention(q_C, k_C, v_C, attn_mask=mask_C)
print("is_causal=True == shifted mask:", torch.allclose(top_left, shifted))
print("keys read by C's first query: top-left", int(torch.ones(t, n).tril()[0].sum()),
      "| shifted", int(mask_C[0].sum()))

# %% [markdown]
# ## 4. GQA: several query heads per KV head
#
# The cache stores `H_kv` KV heads; the model has `H = group * H_kv` query heads, and query head `h` reads
# KV head `h // group`. With `H = 8`, `H_kv = 2` the cache is 4 times smaller than with one KV head per query
# head. Expanding K and V for the math must keep neighbouring query heads together: `repeat_interleave`, not
# `repeat`.

# %%
H, H_kv, D = 8, 2, 64
group = H // H_kv
print("query head -> KV head:", [h // group for h in range(H)])
kv = torch.arange(H_kv).view(1, H_kv, 1)  # [1, H_kv, 1]: KV head i holds the number i
print("repeat_interleave    :", kv.repeat_interleave(group, dim=1).flatten().tolist())
print("repeat (wrong)       :", kv.repeat(1, group, 1).flatten().tolist())

# %% [markdown]
# ## 5. Build it, then check it
#
# `make_paged_batch` draws random K/V for each sequence, stores them through the block tables, and fills every
# other cache row with NaN: a kernel that reads a row that belongs to nobody returns NaN. It keeps the
# contiguous K/V of each sequence for the reference.

# %%
batch = pk.make_paged_batch(seq_lens, block_size, H, H_kv, D, q_lens=q_lens, seed=0, block_tables=tables)
print(f"q        {str(tuple(batch.q.shape)):16s} # [T, H, D]")
print(f"k_cache  {str(tuple(batch.k_cache.shape)):16s} # [num_blocks, block_size, H_kv, D]")
num_slots = batch.k_cache.shape[0] * block_size
print("NaN slots:", int(batch.k_cache.isnan().any(dim=(2, 3)).sum()), "of", num_slots,
      "(3 spare blocks, and the unused tails of A's and B's last blocks)")
print("seq_lens ", batch.seq_lens.tolist(), " cu_seqlens_q", batch.cu_seqlens_q.tolist())

# %% [markdown]
# What a varlen paged attention does for each sequence `b`, rows `lo = cu_seqlens_q[b]` to
# `hi = cu_seqlens_q[b + 1]`, `t = hi - lo` queries and `n = seq_lens[b]` keys:
#
# ```
# K, V        gathered through block_tables[b]: -1 dropped, blocks in order, cut at n rows   [n, H_kv, D]
# positions   of the queries: n - t .. n - 1, the LAST t of the context                       [t]
# scores      q[lo + i, h] . K[j, h // G] * scale, -inf where key j > position of query i     [H, t, n]
# out[lo + i] the softmax of each row of scores, times V[:, h // G]                           [t, H, D]
# ```
#
# The library's `paged_attention_varlen` against the independent reference: float64 SDPA on each
# sequence's contiguous K/V with an explicit shifted mask (`pagedkv_lib.testing.sdpa_reference`), no block
# table involved.

# %%
from pagedkv_lib.viz.attention_plots import error_order

scale = D**-0.5
args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, batch.cu_seqlens_q, scale)
out = pk.paged_attention_varlen(*args)  # [T, H, D]
ref = pk.sdpa_batch(batch)  # [T, H, D] float64
err = (out.double() - ref).abs().max().item()
print("no NaN read:", not out.isnan().any().item())
print("max |library - SDPA| < 1e-5:", err < 1e-5, f"({error_order(err)})")

# %% [markdown]
# ## 6. What the shift is worth
#
# Drop it, and each sequence gets SDPA's `is_causal=True`: the top-left triangle. Here it is on each
# sequence's contiguous K/V (heads expanded for GQA), compared with the reference. Only the full prefill
# survives, because for it `q_len == seq_len` and both triangles coincide.

# %%
for b, kind in enumerate(["A decode", "B full prefill", "C chunked prefill"]):
    lo, hi = int(batch.cu_seqlens_q[b]), int(batch.cu_seqlens_q[b + 1])
    q_b = batch.q[lo:hi].double().transpose(0, 1)  # [H, t, D]
    k_b, v_b = (x.double().transpose(0, 1).repeat_interleave(group, 0)  # [H, n, D]
                for x in (batch.keys[b], batch.values[b]))
    top_left = F.scaled_dot_product_attention(q_b, k_b, v_b, is_causal=True, scale=scale).transpose(0, 1)
    ok = torch.allclose(top_left, ref[lo:hi], atol=1e-5)  # [t, H, D] each
    print(f"{kind:18s} top-left mask: {'same answer' if ok else 'WRONG'}")

# %% [markdown]
# ## 7. Move the block size
#
# Paging must not change the answer. The slider re-pages the same batch (same K/V, same queries) round-robin
# at another block size: the tables, the block boundaries and the physical ids change; the check against SDPA
# stays `True`. At block size 1 every token is its own block; at 32, B and C fit in one block each.

# %%
from pagedkv_lib.viz.attention_plots import VarlenExplorer

explorer = VarlenExplorer()
print(explorer.summary_text(16))
explorer.widget

# %% [markdown]
# ## Exercises
#
# **126 · Varlen paged attention · medium.** Write `paged_attention_varlen(q, k_cache, v_cache, block_tables,
# seq_lens, cu_seqlens_q, scale)` in `practice/126_varlen_paged_attention.py`: `q [T, H, D]`, tables padded
# with -1, causal, new tokens at the end of each context. Grade it with
#
#     python practice/judge.py 126
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(126)` grades the
# `paged_attention_varlen` defined in this notebook on the same hidden cases (`%judge 126` does the same after
# `%load_ext pagedkv_lib.judge`). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


def paged_attention_varlen(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale):
    raise NotImplementedError  # your code here, then run the cell again


result = judge(126)

# %% [markdown]
# Once your version passes, `show_reference(126)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(126)

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/layers/attention.py`): the prefill path calls
#   `flash_attn_varlen_func(q, k, v, max_seqlen_q, cu_seqlens_q, max_seqlen_k, cu_seqlens_k, softmax_scale,
#   causal=True, block_table=...)`; on a prefix hit `k` and `v` are the caches themselves and the block table
#   says where each sequence's keys are. `prepare_prefill` in `nanovllm/engine/model_runner.py` builds
#   `cu_seqlens_q` and `cu_seqlens_k` as prefix sums (notebook 06).
# - **vLLM** calls the same prefix sum `query_start_loc`. Its Triton backend
#   (`vllm/attention/ops/triton_unified_attention.py`, PR #16828) launches one program per (query tile, KV
#   head); a program finds its sequence by binary search over the prefix sums (`find_seq_idx`), and packs the
#   query heads of one KV head into one tile (`BLOCK_Q = BLOCK_M // q_per_kv`) so that even decode runs on
#   tensor cores. Causal tiles entirely in the future are skipped (PR #20308).
# - **FlashAttention** (`flash_attn/flash_attn_interface.py`): with `causal=True` and `seqlen_q != seqlen_k`
#   "the causal mask is aligned to the bottom right corner of the attention matrix", the shift of section 3;
#   PyTorch's `is_causal=True` aligns it to the top-left corner instead.
# - **FlashInfer** (`flashinfer-ai/flashinfer:docs/tutorials/kv_layout.rst`) describes a batch's pages in
#   CSR form: `kv_indptr [B + 1]` (a `cu_seqlens` over pages), `kv_page_indices` (the block tables
#   concatenated) and `kv_last_page_len`, all int32.
# - **FlashAttention-2** accepts a paged cache only with a page size that is a multiple of 256
#   (`csrc/flash_attn/flash_api.cpp:613`); vLLM's fork relaxes this to 16, FA3 to any size.
#
# ## Say it in the interview
#
# A varlen batch concatenates every sequence's new tokens into one `[T, H, D]` tensor, and `cu_seqlens_q`
# (vLLM's `query_start_loc`) says which rows belong to whom. New tokens are the last `q_len` of a
# `seq_len`-token context, so query `i` sits at position `seq_len - q_len + i` and the causal triangle is
# aligned to the bottom-right corner; the top-left triangle is right only for a prompt computed in full.
# Decode, full prefill and chunked prefill are one case of this rule with `q_len` = 1, `seq_len`, or anything
# in between. With GQA, query head `h` reads KV head `h // (H / H_kv)`, and a good kernel loads each KV block
# once for its whole group of query heads.
