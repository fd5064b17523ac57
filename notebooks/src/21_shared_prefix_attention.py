# %% [markdown]
# # 21 · Shared-prefix (cascade) attention
#
# Serving traffic is full of batches whose sequences start the same way: one system prompt in front of every
# chat, the same few-shot examples in front of every question, n samples forked from one prompt. Prefix
# caching (notebook 07) and fork (notebook 08) already store that prefix once: every block table points at the
# same physical blocks. But the decode kernel of notebook 11 still READS it once per sequence, and decode is
# bound by the bytes it reads. After this notebook you can count the bytes plain paged decode wastes on a
# shared prefix, split attention into a shared part computed once for the batch and a part per sequence, merge
# them exactly with the (m, l, acc) merge of notebook 11, run it as a Triton kernel checked against float64
# SDPA, and say when an engine should use it (vLLM's rule) and why it sometimes should not.

# %% [markdown]
# ## Self-test
#
# 1. B sequences share a prefix of P tokens and each has s tokens of its own. How many tokens' K/V does one
#    layer of plain paged decode read? And cascade attention?
# 2. Why can the prefix part be ONE matrix multiplication per KV head, when decode is usually a matrix-vector
#    product per sequence?
# 3. The prefix part and the suffix part each give a softmax over half of the row. Why can they not simply be
#    added, and what makes the merge exact?
# 4. The sequences share 37 tokens and the block size is 16. How many tokens does the cascade treat as the
#    shared prefix, and what happens to the rest?
# 5. Why would an engine NOT use cascade attention for 4 sequences sharing a prefix of 100 tokens?
#
# <details><summary>Answer</summary>
#
# 1. Plain: B * (P + s) tokens, the prefix B times. Cascade: P + B * s, the prefix once. With B = 64 and a
#    long prefix that is most of the traffic gone.
# 2. In decode each sequence has one query token, so per sequence the scores are (G, D) x (D, n): a thin
#    product. The prefix is the same K/V for all B sequences, so all B * G query rows of a KV head can be
#    stacked: (B*G, D) x (D, P), a real matmul whose K/V tile is loaded once and used by every row (Hydragen).
# 3. Each part's softmax is normalised by its own sum; the row's softmax is normalised by the sum over both.
#    Keeping (m, l, acc) per part (max, sum of exponentials, weighted sum of values) lets the merge rescale
#    both to a common max and add: it is the split-KV merge of notebook 11, exact up to rounding.
# 4. 32: two whole blocks. A cascade reads the prefix through ONE block table row, so the prefix must be the
#    same physical blocks in every row, and only full blocks are shared (prefix caching hashes full blocks).
#    The 5 remaining shared tokens sit in each sequence's own block and are attended as part of its suffix.
# 5. Three launches instead of one and a merge cost more than they save: vLLM requires a common prefix of at
#    least 256 tokens and at least 8 sequences before it even considers the cascade.
#
# </details>

# %% [markdown]
# ## 1. Why: the prefix is read once per sequence
#
# Notebook 11's kernel gives each sequence its own programs, and each walks its whole block table. The first
# blocks of every table are the same ids, so the same K/V rows cross from memory to the chip B times. The
# bytes per layer, for the benchmark's model (8 KV heads, head dim 128, bf16) and an own suffix of 64 tokens:

# %%
from pagedkv_lib.core.cascade_attention import kv_bytes_read

for B, P in ((1, 4096), (64, 1024), (64, 4096), (256, 8192)):
    got = kv_bytes_read(B, P, 64, 8, 128, 2)
    print(f"B {B:>3}, prefix {P:>4}: paged decode reads {got['paged'] / 1e6:7.1f} MB per layer, "
          f"cascade {got['cascade'] / 1e6:5.1f} MB ({got['paged'] / got['cascade']:.1f}x less)")

# %% [markdown]
# With one sequence nothing is shared and the two are equal. Then the gap grows with the batch: the plain
# line rises with B, the cascade's stays near the prefix's bytes until the suffixes dominate.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.cascade_plots import bytes_read_figure

fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=80)
bytes_read_figure([1, 4, 16, 64, 256], [1024, 4096, 8192], 64, 8, 128, 2, ax=ax)
plt.show()

# %% [markdown]
# ## 2. A batch that shares a prefix
#
# `make_shared_prefix_batch` stores a batch the way a prefix cache leaves it: the prefix's whole blocks are
# the same ids at the start of every block table; a shared tail shorter than a block is copied into each
# sequence's own first block; then come its own tokens. `common_prefix_blocks` counts the leading columns
# every row shares (capped at the blocks every context fills). vLLM's scheduler counts the same thing from
# reference counts: a block whose `ref_cnt` equals the number of running requests is common to all of them.

# %%
import torch

from pagedkv_lib.core.cascade_attention import common_prefix_blocks
from pagedkv_lib.testing.shared_prefix_batch import make_shared_prefix_batch

batch = make_shared_prefix_batch(37, [0, 5, 20], block_size=16, num_heads=8, num_kv_heads=2, head_dim=32,
                                 seed=0, dtype=torch.float64)
print("context lens ", batch.context_lens.tolist())
print("block tables\n", batch.block_tables)
n_prefix = common_prefix_blocks(batch.block_tables, batch.context_lens, 16)
print("shared whole blocks:", n_prefix, "=", n_prefix * 16, "tokens; the other",
      37 - n_prefix * 16, "shared tokens stay in the suffixes")

# %% [markdown]
# ## 3. Cascade in PyTorch: one matmul for the prefix, one row each for the suffixes, one merge
#
# For one KV head, the B sequences' G query heads are B * G rows. Against the prefix they form ONE score
# matrix (B*G, P); its per-row (m, l, acc) is `partial_softmax.partial_of`, the summary notebook 11 merged
# split by split. Each suffix gives its own summary (an empty suffix: m = -inf, l = 0, the merge's identity).
# `merge_partials` then combines the two, and `output` divides acc by l.

# %%
from pagedkv_lib.core.kv_cache import gather_kv
from pagedkv_lib.core.partial_softmax import SoftmaxPartial, merge_partials, output, partial_of

B, H, D = batch.q.shape
H_kv, G, S = 2, 4, 16
scale = D**-0.5
k_prefix = gather_kv(batch.k_cache, batch.block_tables[0], n_prefix * S).permute(1, 0, 2)  # [H_kv, P, D]
v_prefix = gather_kv(batch.v_cache, batch.block_tables[0], n_prefix * S).permute(1, 0, 2)  # [H_kv, P, D]
rows = batch.q.view(B, H_kv, G, D).permute(1, 0, 2, 3).reshape(H_kv, B * G, D)            # [H_kv, B*G, D]
scores = rows @ k_prefix.transpose(1, 2) * scale                                           # [H_kv, B*G, P]
print("prefix scores per KV head:", tuple(scores.shape[1:]), "= (B*G, P): one matmul, K/V read once")
prefix = partial_of(scores, v_prefix[:, None])                                             # [H_kv, B*G]

b = 2                                                                                      # one sequence
n_own = int(batch.context_lens[b]) - n_prefix * S
k_own = gather_kv(batch.k_cache, batch.block_tables[b, n_prefix:], n_own).permute(1, 0, 2)  # [H_kv, n, D]
v_own = gather_kv(batch.v_cache, batch.block_tables[b, n_prefix:], n_own).permute(1, 0, 2)  # [H_kv, n, D]
own = partial_of(batch.q[b].view(H_kv, G, D) @ k_own.transpose(1, 2) * scale, v_own[:, None])  # [H_kv, G]
rows_b = slice(b * G, (b + 1) * G)                                                         # b's rows
prefix_b = SoftmaxPartial(prefix.m[:, rows_b], prefix.l[:, rows_b], prefix.acc[:, rows_b])  # [H_kv, G]
merged = merge_partials(prefix_b, own)
out_b = output(merged).reshape(H, D)                                                       # [H, D]

from pagedkv_lib.testing.sdpa_reference import sdpa_batch

reference = sdpa_batch(batch)                                  # float64 SDPA over each whole context
print(f"sequence {b}: {n_prefix * S} prefix + {n_own} own tokens, max |cascade - SDPA| < 1e-12:",
      (out_b - reference[b]).abs().max().item() < 1e-12)

# %% [markdown]
# `core.cascade_attention.cascade_attention_decode` does this for every sequence, with the argument checks;
# it is the reference the Triton kernel is tested against. Checked here against float64 SDPA over the whole
# (prefix + suffix) context, including the sequence whose suffix is only the 5 shared tail tokens:

# %%
from pagedkv_lib.core.cascade_attention import cascade_attention_decode

out = cascade_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                               batch.context_lens, scale, n_prefix)                        # [B, H, D]
print("max |cascade - SDPA| over the batch < 1e-12:", (out - reference).abs().max().item() < 1e-12)

# %% [markdown]
# ## 4. The Triton kernel
#
# `kernels/triton_cascade_attention.py` launches three kernels over one fp32 state buffer [B, H, SLOTS]:
#
# 1. **suffix**: notebook 11's paged decode kernel, unchanged, on the rest of each block table
#    (`block_tables[:, n:]`, lengths `context_lens - n * S`). Its split version already writes each split's
#    normalised output and log-sum-exp; the `states=` argument of `launch_decode_attention` asks it to write
#    them into slot 0 of the cascade's buffer and skip its own merge. An empty suffix writes lse = -inf.
# 2. **prefix**: `_shared_prefix_kernel`, grid (B*G / BLOCK_M, H_kv, splits). A program loads BLOCK_M query
#    rows of one KV head (several sequences' heads side by side), walks a range of the prefix through row 0 of
#    the block tables, and keeps the online softmax of notebook 11 per row: `tl.dot(q, k^T)` is the
#    (BLOCK_M, D) x (D, BLOCK_N) tile of the big matmul. The prefix is split into ranges only so that a GPU
#    has enough programs: with B = 64 and G = 4, 256 rows make 4 tiles of 64, times 8 KV heads: 32 programs
#    for 132 SMs.
# 3. **merge**: notebook 11's `reduce_splits`, per (sequence, query head), over every slot.
#
# What it requires: the prefix is whole blocks (`num_prefix_blocks`, the same ids in every row; vLLM asserts
# `common_prefix_len % block_size == 0` for the same reason), a bf16 / fp16 / fp32 cache (no FP8 here), one
# query per sequence. Checked against float64 SDPA with several B, G, prefix and suffix lengths, empty
# suffixes and shared lengths that are not a multiple of the block size:

# %%
from pagedkv_lib.kernels import backend  # first: chooses the interpreter on a CPU, before any kernel
from pagedkv_lib.kernels.triton_cascade_attention import cascade_attention_decode_triton

dev = backend.device()
print("Triton kernels run:", "in the interpreter (CPU)" if backend.is_interpreted() else "natively (GPU)")
cases = [  # (shared tokens, own suffixes, block size, H, H_kv, D)
    (32, [0, 5, 17], 16, 8, 2, 32),
    (37, [1, 0, 30, 4], 16, 4, 4, 16),
    (64, [3] * 9, 8, 8, 1, 64),
    (20, [0, 0], 4, 2, 1, 16),
]
for shared, suffixes, S_, H_, H_kv_, D_ in cases:
    tb = make_shared_prefix_batch(shared, suffixes, S_, H_, H_kv_, D_, seed=shared, device=dev)
    n = common_prefix_blocks(tb.block_tables, tb.context_lens, S_)
    got = cascade_attention_decode_triton(tb.q, tb.k_cache, tb.v_cache, tb.block_tables, tb.context_lens,
                                          D_**-0.5, n)                                     # [B, H, D]
    ref = sdpa_batch(tb).to(got.device)
    err = ((got.double() - ref).norm() / ref.norm()).item()
    print(f"B {len(suffixes)}, G {H_ // H_kv_}, shared {shared:>2} ({n} blocks of {S_}), "
          f"suffixes {suffixes}: relative error vs float64 SDPA < 1e-5: {err < 1e-5}")

# %% [markdown]
# ## 5. When it pays: vLLM's rule
#
# The cascade is three launches and a merge instead of one launch. vLLM's FlashAttention backend decides per
# step (`use_cascade_attention` in `vllm/v1/attention/backends/flash_attn.py`), in this order:
#
# - a common prefix under 256 tokens, or fewer than 8 sequences: never (its comments call both thresholds
#   arbitrary); ALiBi or a sliding window: never (not supported);
# - if the plain kernel would NOT use flash-decoding (its split-KV, chosen for GQA with one query per
#   sequence), cascade: plain attention then reads the prefix per sequence with no compensating parallelism;
# - otherwise a rough model counts waves: the cascade's prefix pass runs H * cdiv(B, 128) programs that
#   each walk every 128-token prefix tile; flash-decoding runs B * H_kv * cdiv(G, 128) programs per tile.
#   Cascade if its waves x tiles is smaller.
#
# `core.cascade_attention.use_cascade_attention` is that rule; the decisions for the benchmark's model on a
# 132-SM GPU:

# %%
from pagedkv_lib.core.cascade_attention import use_cascade_attention

for B, P in ((4, 4096), (64, 200), (16, 512), (17, 512), (64, 4096), (256, 8192)):
    verdict = use_cascade_attention(P, [1] * B, 32, 8, 132)
    print(f"B {B:>3}, common prefix {P:>4}: {'cascade' if verdict else 'plain paged decode'}")

# %% [markdown]
# Which blocks count as common is the scheduler's job: vLLM takes a running request, walks its blocks and
# counts those held by every running request, then the model runner (`vllm/v1/worker/gpu_model_runner.py`,
# `min(common_prefix_len, num_computed_tokens.min())`, commit not pinned here) caps that at the tokens every
# request has already computed and rounds it down to whole blocks. A batch with one sequence that shares
# nothing (a new chat next to many forks) has no common prefix at all: cascade is all or nothing for the
# batch in vLLM; FlashInfer's multi-level cascade lets groups of sequences share prefixes of their own.

# %% [markdown]
# ## 6. On a GPU: what the measurements say
#
# `benchmarks/bench_cascade.py` times, on one GPU, batches of 64 to 256 sequences sharing a prefix of 1k to
# 8k tokens with 64 tokens of their own (32 query heads, 8 KV heads, head dim 128, bf16): the cascade, the
# course's paged decode over the whole context, and SDPA on contiguous K/V; each with the bytes it must read
# and the floor those bytes set at the copy bandwidth measured in the same run. The next cell renders its
# stored results, or says that they are not there yet:

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz.cascade_plots import cascade_findings

print(cascade_findings(results.stored("bench_cascade.json")))

# %% [markdown]
# **Beside FlashInfer.** FlashInfer's `MultiLevelCascadeAttentionWrapper` does the same with two levels
# (level 0: every query against the shared prefix, level 1: each sequence's own blocks, then a merge). An
# H100 run timed it beside the course's cascade and plain paged decode at a 4k-token prefix and 256 tokens
# of each sequence's own, in one process per shape:

# %%
from pagedkv_lib.viz import bench_findings

fi_cascade = results.stored("flashinfer_run4/bench_cascade.json")
print(bench_findings.flashinfer_table(fi_cascade, ("cascade", "paged_v3"), ("flashinfer_cascade",))
      if fi_cascade else "no FlashInfer run stored (benchmarks/results/flashinfer_run4/)")

# %% [markdown]
# Two things in these lines are not what the bytes alone predict. Plain paged decode can run faster than
# the floor its bytes set: every sequence's table points at the same physical prefix blocks, so after the
# first reader they come from the GPU's L2 cache, not from HBM, and the bytes it reads overstate its HBM
# traffic. The cascade still wins, because it does less work of another kind too: the prefix becomes one
# matrix product per KV head on the tensor cores instead of B matrix-vector products. And the cascade is
# far from its own byte floor: once each prefix token is read once, what is left is arithmetic (the rate
# in prefix FLOPs above, against the dense matmul rate notebook 12 measures) and the fixed cost of three
# launches, which is why the gain grows with the prefix and the batch.

# %% [markdown]
# ## Exercises
#
# No judged exercise belongs to this notebook: the cascade is built from the two kernels you can already
# write. **131** (notebook 11) is the paged decode kernel whose split states the suffix pass writes, and
# **133** (notebook 12) the paged prefill kernel whose tiles over (query block, KV head) are the prefix pass's
# tiles, with the sequences' query heads in place of a prompt's tokens:
#
#     python practice/judge.py 131
#     python practice/judge.py 133
#
# **Try it (not judged).** (a) Change `WAVES` or `block_m` in `choose_cascade_config` and watch the number of
# prefix splits; the tests in `tests/kernels/test_kernels_cascade_attention.py` tell you whether the result
# is still right. (b) Write a two-level cascade: two groups of sequences, each with its own shared prefix
# after a prefix common to all. Each level is one more `partial_of` / `merge_partials`; check it against
# `sdpa_batch` as section 3 does. (c) With `kv_bytes_read`, find the batch size at which the cascade reads
# half of what paged decode reads for a 4k prefix and 64 own tokens.

# %% [markdown]
# ## In real systems
#
# - **vLLM** (`vllm/v1/attention/backends/flash_attn.py` at `0084b78`): `cascade_attention` runs
#   `flash_attn_varlen_func` twice, once for all the step's queries as ONE sequence against the common prefix
#   (`block_table[:1]`, not causal) and once per request against `block_table[:, num_common_kv_blocks:]`,
#   both returning their LSE, then `merge_attn_states`; it asserts `common_prefix_len % block_size == 0`.
#   `use_cascade_attention` is section 5's rule. The common blocks come from
#   `get_num_common_prefix_blocks` (`vllm/v1/core/single_type_kv_cache_manager.py` at `002f349`): blocks of
#   one running request whose `ref_cnt` equals the number of running requests; a sliding-window layer
#   returns 0.
# - **FlashInfer** (`flashinfer/cascade.py` at `fb28d72`): `MultiLevelCascadeAttentionWrapper` takes one
#   paged table per level (a prefix shared by everyone, then by groups, then unique suffixes), runs attention
#   per level and merges the levels' (output, LSE) with `merge_state` / `merge_state_in_place`, the
#   two-part merge of notebook 11 written for its own layout.
# - **Hydragen** (Juravsky et al., 2024, arXiv:2402.05099): the paper that frames the prefix part as a
#   batched matrix multiplication over all sequences' queries, so that the prefix's attention runs on tensor
#   cores instead of as many matrix-vector products, and merges with the suffix through the softmax
#   denominators, as here.
#
# ## Say it in the interview
#
# When a batch shares a prefix, the cache stores it once but plain paged decode reads it once per sequence,
# and decode is memory-bound, so that is wasted bandwidth. Cascade attention splits each row's attention in
# two: every query of the batch against the shared prefix, stacked into one matmul per KV head so the prefix
# is read once, and each sequence against its own suffix with the normal paged kernel. Both return (output,
# log-sum-exp), and the split-KV merge combines them exactly. The prefix must be whole shared blocks, found
# from reference counts. It costs extra launches and a merge, so engines use it only for long prefixes and
# large batches: vLLM needs at least 256 common tokens and 8 requests and compares a wave model against
# flash-decoding.
#
# More on each engine's choices, with sources: `docs/engines.md`, "Shared-prefix (cascade) attention".
