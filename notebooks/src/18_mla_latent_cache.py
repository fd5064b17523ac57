# %% [markdown]
# # 18 · MLA: a cache of latents
#
# Every notebook so far cached, per token and layer, one key and one value vector per KV head. DeepSeek-V2
# and V3 do not: their multi-head latent attention (MLA) caches one compressed vector per token, the latent
# `c_KV`, plus one small rotary key that every head shares, and rebuilds each head's key and value from the
# latent with two weight matrices. The engines that serve these models (vLLM, SGLang, FlashMLA underneath
# both) never rebuild them at decode time: they fold the weights into the query and the output instead, so
# attention reads the latents directly. After this notebook you can:
#
# - say what one token costs in DeepSeek-V3's cache, in bf16 and in FlashMLA's FP8 record, against a GQA model
#   of similar size, and how many more sequences a pool then holds;
# - write one decode step both ways, multi-head (up-project every cached latent) and absorbed (move the query
#   into latent space), show they agree in float64, and say what each costs in FLOPs and bytes;
# - lay the latents out in a paged cache with the course's block tables and slot mapping, and run a paged
#   MLA decode in PyTorch and as a Triton kernel, checked against the multi-head form;
# - explain why decoupled RoPE exists, and why MLA decode is compute-bound where GQA decode is memory-bound.

# %% [markdown]
# ## Self-test
#
# 1. DeepSeek-V3 has 61 layers, `kv_lora_rank` 512 and `qk_rope_head_dim` 64. How many bf16 bytes does one
#    token take in its cache? And in a GQA model with 126 layers, 8 KV heads of 128?
# 2. Why is the RoPE part of the key kept apart from the latent, instead of rotating the up-projected key?
# 3. In the absorbed form, what is the "head dimension" of the attention the kernel computes, and what softmax
#    scale must it still use?
# 4. A context of 130 tokens in blocks of 64: how many blocks does its table list, and how many rows of the
#    last one belong to it?
# 5. Decode attention over a multi-head cache does about 1 FLOP per byte it reads, over a GQA cache about G
#    (its query heads per KV head). Why does absorbed MLA decode do a couple of hundred, and what does that
#    make the kernel's bottleneck?
#
# <details><summary>Answer</summary>
#
# 1. 61 x (512 + 64) x 2 = 70,272 bytes. The GQA model: 2 x 126 x 8 x 128 x 2 = 516,096 bytes, over seven
#    times as many.
# 2. A key rotated by its position would sit between the query and `W_UK`: `q . R(pos) W_UK c` cannot be
#    regrouped into `(W_UK^T q) . c`, so every cached key would have to be rebuilt at every step. Keeping
#    RoPE on a separate 64-number key leaves the latent position-free, so `W_UK` can move into the query.
# 3. 576 = 512 + 64 for the keys (and 512 for the values), but the scale stays 1 / sqrt(128 + 64) = 1 /
#    sqrt(192): absorption regroups the same products, it does not change the scores.
# 4. ceil(130 / 64) = 3 blocks; the last holds 130 - 128 = 2 of its tokens.
# 5. All 128 query heads read the same latent row, as if one GQA group held every head: each latent number
#    loaded feeds a multiply-add into every head's score and another into every head's output. That puts
#    absorbed decode past the ridge of a GPU's roofline (its matmul rate over its memory bandwidth), where GQA
#    decode sits far left of it: the kernel is limited by arithmetic, not by reads, though not by a wide
#    margin. Section 3 prints the three intensities against a measured ridge.
#
# </details>

# %% [markdown]
# ## 1. What one token stores
#
# Per token and layer, MLA computes the latent `c = W_DKV h` (C = `kv_lora_rank` numbers) and a rotary key
# `k_pe = RoPE(W_KR h)` (R = `qk_rope_head_dim` numbers), and caches only those two, side by side. Head h's
# key and value are rebuilt from the latent, `k_h = [W_UK[h] c ; k_pe]` and `v_h = W_UV[h] c` (DeepSeek-V2,
# arXiv:2405.04434, section 2.1):
#
# ```
#   GQA, per token and layer:   K: H_kv x D    V: H_kv x D
#   MLA, per token and layer:   [ c_KV: C numbers                           | k_pe: R ]   one row, W = C + R
#                                  |  W_UK[h] c -> key of head h (Dn numbers) |  shared by every head
#                                  |  W_UV[h] c -> value of head h (Dv numbers)
# ```
#
# DeepSeek-V3's configuration (`inference/configs/config_671B.json` in deepseek-ai/DeepSeek-V3) and Llama 3.1
# 405B's (`models/sku_list.py` in meta-llama/llama-models), a GQA model of similar total size:

# %%
from pagedkv_lib.studies import mla_memory

print(mla_memory.DEEPSEEK_V3)
print(mla_memory.LLAMA_405B)

# %% [markdown]
# FlashMLA stores an FP8 version of the row (its README, "FP8 KV Cache"): the 512 latents as e4m3 bytes, one
# float32 scale per 128 of them, and the 64 RoPE numbers left in bf16 "for accuracy". Its record, computed:

# %%
C, R = mla_memory.DEEPSEEK_V3.kv_lora_rank, mla_memory.DEEPSEEK_V3.rope_dim
print(f"{C} e4m3 latents: {C} bytes; {C // 128} float32 scales: {C // 128 * 4} bytes; {R} bf16 RoPE numbers: "
      f"{R * 2} bytes; total {mla_memory.fp8_record_bytes(C, R)} bytes per token and layer")

# %% [markdown]
# Every cache form side by side, and how many sequences of 32,768 tokens a 64 GiB pool holds in blocks of 64
# tokens (FlashMLA's page size). "multi-head K and V" is what caching DeepSeek-V3's 128 rebuilt keys and
# values would take, the cache MLA replaces:

# %%
from pagedkv_lib.studies.memory import GiB

POOL, CONTEXT = 64 * GiB, 32_768
print(mla_memory.capacity_table(POOL, CONTEXT))
forms = {f.form: fits for f, fits in mla_memory.capacity_rows(POOL, CONTEXT)}
print(f"\nlatent bf16 vs GQA bf16: {forms['latent c + RoPE key, bf16'] / forms['GQA K and V, bf16']:.2f} "
      f"times the sequences; FP8 record vs GQA fp8: "
      f"{forms['FlashMLA FP8 record'] / forms['GQA K and V, fp8']:.2f} times")

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import mla_plots

fig, ax = plt.subplots(figsize=(7.5, 2.6), dpi=80)
mla_plots.bytes_per_token_figure(POOL, CONTEXT, ax=ax)
plt.show()

# %% [markdown]
# Two things the table leaves out. DeepSeek-V3 also stores its weights (its 671B parameters dwarf Llama's
# cache at short contexts), and the latent cannot be split by heads: under tensor parallelism every rank
# holds the whole latent cache, where GQA's 8 KV heads split over 8 GPUs, one per GPU. DeepSeek's own decode
# instances run without tensor parallelism (FlashMLA's deep-dive,
# `deepseek-ai/FlashMLA:docs/20250422-new-kernel-deep-dive.md`: "we don't use Tensor Parallel for decoding
# instances").

# %% [markdown]
# ## 2. One decode step, two ways
#
# The multi-head form rebuilds every head's keys and values from the cached latents, then runs ordinary
# attention with a query of `Dn + R` numbers (`q = [q_nope ; RoPE(q_pe)]`):
#
# ```
#   score(h, j) = ( q_nope[h] . (W_UK[h] c_j)  +  RoPE(q_pe)[h] . k_pe_j ) / sqrt(Dn + R)
#   out[h]      = sum_j softmax_j(score) W_UV[h] c_j
# ```
#
# Regroup both products: `q_nope[h] . (W_UK[h] c_j) = (W_UK[h]^T q_nope[h]) . c_j`, and
# `sum_j p_j W_UV[h] c_j = W_UV[h] (sum_j p_j c_j)`. So absorb `W_UK` into the query once per step, let every
# head attend to the same rows `[c_j ; k_pe_j]` (multi-query attention with keys of W = C + R numbers and
# values of C), and apply `W_UV` to the C-number result. RoPE sits only on the separate `k_pe`, so nothing
# position-dependent lies between `q_nope` and `W_UK`: that is why the RoPE key is decoupled.
#
# The regrouping on one head, in float64:

# %%
import torch

gen = torch.Generator().manual_seed(0)
w_uk_h = torch.randn(8, 32, generator=gen, dtype=torch.float64)     # [Dn, C]: one head's W_UK
q_nope_h = torch.randn(8, generator=gen, dtype=torch.float64)       # [Dn]
latents = torch.randn(5, 32, generator=gen, dtype=torch.float64)    # [n, C]: five cached c_j
multihead = (latents @ w_uk_h.T) @ q_nope_h                          # [n]: q_nope . (W_UK c_j)
absorbed = latents @ (w_uk_h.T @ q_nope_h)                           # [n]: (W_UK^T q_nope) . c_j
print("equal to float64 rounding (1e-12):", torch.allclose(multihead, absorbed, rtol=0, atol=1e-12))

# %% [markdown]
# The library has both forms for a whole paged batch (`pagedkv_lib/core/mla_attention.py`):
# `mla_decode_multihead`, the reference, and `mla_decode_absorbed`. A batch with DeepSeek-V3's ratios at a
# small size (C = 4 Dn, R = Dn / 2), ragged contexts, blocks of 16, NaN in every row outside a context, two
# layers that share one block table (`pagedkv_lib/testing/mla_batch.py`):

# %%
from pagedkv_lib.core.mla_attention import mla_decode_absorbed, mla_decode_multihead
from pagedkv_lib.testing.mla_batch import make_mla_batch

batch = make_mla_batch([1, 17, 40, 64], block_size=16, num_heads=8, kv_lora_rank=64, rope_dim=8,
                       nope_dim=16, v_dim=16, num_layers=2, extra_padding=1, seed=1)
print("kv_cache", tuple(batch.kv_cache.shape), "(layers, blocks, block_size, C + R)")
print("block_tables", batch.block_tables.tolist())
for layer in range(2):
    args = (batch.q[layer], batch.kv_cache[layer], batch.block_tables, batch.context_lens, batch.w_uk[layer],
            batch.w_uv[layer], batch.cos, batch.sin)
    out = mla_decode_absorbed(*args)                                                # [B, H, Dv]
    same = torch.allclose(out, mla_decode_multihead(*args), rtol=0, atol=1e-12)
    print(f"layer {layer}: output {tuple(out.shape)}, absorbed = multi-head to 1e-12: {same}, "
          f"NaN in the output: {bool(out.isnan().any())}")

# %% [markdown]
# ## 3. What each form costs
#
# Per decode step, one sequence, one layer, at DeepSeek-V3's shapes in bf16 (`mla_memory.decode_cost_rows`;
# a multiply-add is 2 FLOPs; the weights `W_UK`, `W_UV` are read by both latent forms alike and shared by the
# batch, so they are left out of the bytes):

# %%
print(mla_memory.cost_table(mla_memory.DEEPSEEK_V3, context_lens=(1024, 32768)))

# %% [markdown]
# Read it row by row. Caching every head's keys and values reads every byte once for one multiply-add: about
# 1 FLOP per byte, memory-bound, and a cache no GPU holds at these sizes. The un-absorbed latent form reads
# the small cache but rebuilds 128 keys and values for every cached token at every step, a projection cost
# that grows with the context. The absorbed form reads the same small cache and pays its projections once per
# step; its attention does more arithmetic than the multi-head one (dot products of W = C + R numbers
# instead of Dn + R), but every byte it loads feeds all heads. This is the compute-friendly vs
# data-movement-friendly choice of vLLM's MLA backend (`vllm/v1/attention/backends/mla/common.py`): prefill,
# with many queries per cached token, up-projects (un-absorbed, like ordinary multi-head attention), decode
# absorbs.
#
# Where that puts each form on a roofline: the ridge, where its two ceilings meet, is the GPU's bf16 matmul
# rate over its copy bandwidth (notebook 12); below it a kernel waits for memory, above it for arithmetic.
# The table has no GQA row: there each K/V byte serves the G query heads of its group. The ridge below is
# that of the GPU the stored `benchmarks/results/bench_mla.json` ran on:

# %%
from pagedkv_lib.studies import results

LLAMA_405B_QUERY_HEADS = 128                        # dim 16384 over head_dim 128 (models/sku_list.py)
gqa_model = mla_memory.LLAMA_405B
group = LLAMA_405B_QUERY_HEADS // gqa_model.num_kv_heads
gqa_flops = 4 * LLAMA_405B_QUERY_HEADS * gqa_model.head_dim     # per cached token: q . k and p . v, all heads
gqa_bytes = 2 * gqa_model.num_kv_heads * gqa_model.head_dim * 2  # its K and V in bf16
gqa = gqa_flops / gqa_bytes
per_form = [{r.form: r.flops_per_cache_byte for r in mla_memory.decode_cost_rows(mla_memory.DEEPSEEK_V3, c)}
            for c in (1024, 32_768)]
absorbed = sorted(forms["latent, absorbed"] for forms in per_form)
print(f"FLOP per cache byte: multi-head cache {per_form[0]['multi-head cache']:.1f}; GQA with G = {group} "
      f"(Llama 3.1 405B) {gqa:.1f}; absorbed MLA {absorbed[0]:.0f} to {absorbed[-1]:.0f}")
run = results.stored("bench_mla.json")
if run is None:
    print("no bench_mla.json stored yet: no measured ridge")
else:
    ridge = run["matmul_tflops"] * 1e12 / (run["copy_gbs"] * 1e9)
    print(f"{run['env']['device']}: bf16 matmul {run['matmul_tflops']:.0f} TFLOP/s over copy "
          f"{run['copy_gbs']:.0f} GB/s, ridge {ridge:.0f} FLOP per byte")
    for name, low, high in (("absorbed MLA decode", absorbed[0], absorbed[-1]), ("GQA decode", gqa, gqa)):
        side = "compute-bound" if low > ridge else "memory-bound" if high < ridge else "at the ridge"
        span = f"{low / ridge:.2f}" if low == high else f"{low / ridge:.2f} to {high / ridge:.2f}"
        print(f"  {name}: {span} times the ridge, {side}")

# %% [markdown]
# Absorbed decode is compute-bound, but close enough to the ridge that its loads matter too. FlashMLA's
# deep-dive finds it compute-bound once query heads x query tokens reach 128 on an H800, the case of
# DeepSeek's decode with all 128 heads on one GPU.

# %% [markdown]
# ## 4. The paged latent cache
#
# Nothing in the paging changes. One layer's cache is `[num_blocks, block_size, C + R]`, a single "KV head" of
# width W (vLLM's MLA backends give the cache shape `(num_blocks, block_size, head_size)`, head size 576); a
# token's slot is `block_table[p // block_size] * block_size + p % block_size` as in notebook 03, and every
# layer uses the same block table, one allocation per token for the whole model. FlashMLA requires pages of
# 64 tokens (`csrc/api/dense_decode.h`: "page_block_size must be 64"), and SGLang's FlashMLA backend pads its
# tables with -1 at that page size. One sequence of the batch, read back through its table:

# %%
from pagedkv_lib.core.mla_attention import gather_latents
from pagedkv_lib.core.slot_mapping import slot_mapping_for

b = 2
n = int(batch.context_lens[b])
table = [t for t in batch.block_tables[b].tolist() if t >= 0]
slots = slot_mapping_for(table, list(range(n)), batch.block_size)
rows = gather_latents(batch.kv_cache[0], batch.block_tables[b], n)                 # [n, C + R]
by_slot = batch.kv_cache[0].reshape(-1, batch.kv_cache.shape[-1])[slots]          # [n, C + R]
print(f"sequence {b}: {n} tokens in blocks {table}, slots {slots[:3]} ... {slots[-2:]}")
print("rows through the table equal rows by slot:", torch.equal(rows, by_slot))

# %% [markdown]
# ## 5. The decode kernel in Triton
#
# `pagedkv_lib/kernels/triton_mla_decode.py` computes the absorbed form's attention: it takes the latent
# queries `[B, H, C + R]` (the step's `W_UK` product and the rotated RoPE part, what FlashMLA's
# `flash_mla_with_kvcache` takes) and returns `[B, H, C]`, which `W_UV` then maps to each head's output. A
# program owns a tile of BLOCK_H heads of one sequence and walks its context in tiles of BLOCK_N tokens:
#
# ```
#   q tile [BLOCK_H, C] and [BLOCK_H, R]       loaded once
#   for each tile of BLOCK_N positions:        block id = block_tables[b, pos // S] (masked past the context)
#       c  [BLOCK_N, C], k_pe [BLOCK_N, R]      loaded once, used by all BLOCK_H heads
#       s   = q_c c^T + q_pe k_pe^T             [BLOCK_H, BLOCK_N]  two tl.dot
#       online softmax (m, l), acc += p c      [BLOCK_H, C]        the latent row is also the value
#   out = acc / l                              [BLOCK_H, C]
# ```
#
# The same row serves as key and as value: one load, two matrix products. In Triton's interpreter, at small
# sizes, against the multi-head form in float64:

# %%
from pagedkv_lib.kernels import backend  # first: chooses the interpreter on a CPU, before any kernel
from pagedkv_lib.kernels.triton_mla_decode import mla_latent_attention_triton

dev = backend.device()                    # the GPU where there is one, else the CPU (the interpreter)
small = make_mla_batch([1, 63, 64, 65], block_size=64, num_heads=4, kv_lora_rank=32, rope_dim=8, nope_dim=8,
                       v_dim=8, extra_padding=1, seed=2, dtype=torch.float32)
args = (small.q[0], small.kv_cache[0], small.block_tables, small.context_lens, small.w_uk[0], small.w_uv[0],
        small.cos, small.sin)
on_kernel = mla_decode_absorbed(*(a.to(dev) for a in args), attention=mla_latent_attention_triton)
reference = mla_decode_multihead(*(a.double() if a.is_floating_point() else a for a in args))
print("Triton kernels run:", "in the interpreter (CPU)" if backend.is_interpreted() else "natively (GPU)")
print("Triton (float32) = multi-head (float64) to 1e-5:",
      torch.allclose(on_kernel.cpu().double(), reference, rtol=1e-5, atol=1e-5))

# %% [markdown]
# When the batch is too small to give every SM a program (one sequence has only 128 / BLOCK_H of them), the
# launcher cuts every context into the same number of splits and merges their partial softmaxes with the
# decode kernel's reduction (notebook 11's split-KV). What it leaves to the real one: FlashMLA plans its
# splits per sequence on the GPU (`get_mla_metadata`), keeps 64 heads per thread block in two warpgroups,
# and reads the FP8 record. `benchmarks/bench_mla.py` times the course's kernel at DeepSeek-V3's decode
# shapes (128 heads, C = 512, R = 64, pages of 64) on a GPU, against the measured copy bandwidth and matmul
# rate.
#
# The teaching kernel above is written to be read. `pagedkv_lib/kernels/triton_mla_decode_tuned.py` is the
# same computation laid out for a Hopper GPU: 64 heads are the M side of both matrix products (one
# warpgroup's MMA height), a tile of tokens lies inside one cache block (one block id per tile, contiguous
# rows), C and R are powers of two (no masks on the feature axis), and the loads are pipelined. An H100
# run timed both beside FlashInfer's MLA kernels (`BatchMLAPagedAttentionWrapper`, backends fa2 and fa3)
# on the same latent cache, read in place as its c and k_pe views, 4,096 tokens per sequence:

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz import bench_findings

fi_mla = results.stored("flashinfer_run4/bench_mla.json")
print(bench_findings.mla_flashinfer_table(fi_mla) if fi_mla
      else "no run stored (benchmarks/results/flashinfer_run4/)")

# %% [markdown]
# ## Exercises
#
# **138 · Paged MLA decode, absorbed · hard.** In `practice/138_mla_decode.py`, write
# `mla_decode_absorbed(q, kv_cache, block_tables, context_lens, w_uk, w_uv, cos, sin)`: rotate the query's
# RoPE part, absorb `w_uk` into its nope part, attend over each sequence's latent rows through its block table
# with the scale `1 / sqrt(Dn + R)`, and apply `w_uv` to the latent output. The judge calls it once per layer
# of a small model whose layers share one block table, and compares every output with the multi-head form in
# float64, on block sizes 1, 16 and 64, ragged contexts, -1 padding and NaN garbage; its hints name RoPE put
# on the latent, a RoPE key that is not shared by the heads, a transposed `w_uk`, the latent dimension's
# scale, a dropped last page, and state kept from one layer to the next. Grade it with
#
#     python practice/judge.py 138
#
# Or solve it here: fill in the function below and run the cell; `judge(138)` grades it on the
# same hidden cases (until you do, it reports *not implemented*).

# %%
from pagedkv_lib.judge import judge


def mla_decode_absorbed(q, kv_cache, block_tables, context_lens, w_uk, w_uv, cos, sin):
    raise NotImplementedError  # your code here


result = judge(138)

# %% [markdown]
# ## In real systems
#
# - **DeepSeek-V3's reference** (deepseek-ai/DeepSeek-V3@9b4e978, `inference/model.py`): `attn_impl` is
#   `"naive"` (cache every head's k and v) or `"absorb"` (default): `q_nope` is multiplied by the first
#   `qk_nope_head_dim` rows of `wkv_b` viewed `[n_heads, -1, kv_lora_rank]`, the scores are
#   `einsum(q_nope, kv_cache) + einsum(q_pe, pe_cache)`, the latent output goes through the last `v_head_dim`
#   rows. The caches are `kv_cache [batch, seq, kv_lora_rank]` and `pe_cache [batch, seq, qk_rope_head_dim]`.
#   Its softmax scale is `qk_head_dim ** -0.5` times a YaRN factor for extended contexts.
# - **FlashMLA** (deepseek-ai/FlashMLA@9241ae3): `flash_mla_with_kvcache(q, kvcache, block_table,
#   cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits, ...)` with `head_dim_k` 576 and
#   `head_dim_v` 512 ("MQA mode" in its README), pages of 64, a scheduler (`get_mla_metadata`) that splits
#   long contexts; the FP8 record of 656 bytes is read by its sparse decoding kernel, which dequantizes to
#   bf16 and multiplies in bf16.
# - **vLLM** (vllm-project/vllm@37fa5c0, `vllm/v1/attention/backends/mla/common.py`): the file's docstring
#   writes both paths out; `_forward_decode` is the absorbed one (`W_UK` folded into the query, `W_UV` applied
#   after), `_forward_prefill` up-projects, chunk by chunk of cached context to bound its workspace. The cache
#   shape is `(num_blocks, block_size, head_size)`, head size 576; the backends in the same folder wrap
#   FlashMLA (`flashmla.py`), CUTLASS, FlashInfer and a Triton kernel (`triton_mla.py`).
# - **SGLang** (sgl-project/sglang@004d79c, `python/sglang/srt/layers/attention/flashmla_backend.py`):
#   `PAGE_SIZE = 64` ("FlashMLA only supports pagesize=64"), block tables built from its token-level
#   `req_to_token` map and padded with -1, `flash_mla_with_kvcache(..., head_dim_v=kv_lora_rank,
#   softmax_scale=layer.scaling)` on the cache viewed `[-1, PAGE_SIZE, 1, kv_lora_rank + qk_rope_head_dim]`.
#
# ## Say it in the interview
#
# MLA caches one latent per token and layer, 512 numbers in DeepSeek-V3, plus one 64-number rotary key that
# all heads share, instead of a key and a value per KV head: 70,272 bytes per token in bf16 over 61 layers,
# about seven times less than a 126-layer GQA model with 8 KV heads, and FlashMLA's FP8 record brings a layer
# down to 656 bytes. The keys and values of the 128 heads are linear functions of the latent, so at decode I
# never rebuild them: I multiply the query's nope part by `W_UK` transposed, once per step, attend over the
# latent rows, the same rows for every head, like multi-query attention with a 576-wide key and a 512-wide
# value, and apply `W_UV` to the result. RoPE is decoupled because a rotation between the query and `W_UK`
# would block that regrouping. The softmax scale stays `1/sqrt(192)`, the multi-head form's head dim. The
# paging is unchanged: blocks of `[block_size, 576]`, the usual block tables and slot mapping shared by all
# layers, pages of 64 for FlashMLA. Because all heads share every byte, decode does a couple of hundred FLOPs
# per byte and is compute-bound at 128 heads, unlike GQA decode; prefill, with many queries per cached token,
# up-projects instead. The catch is tensor parallelism: the latent does not split by heads, so every rank
# holds all of it.
