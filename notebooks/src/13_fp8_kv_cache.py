# %% [markdown]
# # 13 · FP8 KV cache
#
# Notebook 01's first lesson: KV memory decides how many requests fit. Real engines halve it by storing keys
# and values in 8 bits (vLLM's `kv_cache_dtype="fp8"`, SGLang's `--kv-cache-dtype fp8_e4m3`), with one
# float32 scale per tensor. Decode is memory-bound, so half the bytes could make it up to twice as fast
# (section 8 measures how close a real kernel gets).
# After this notebook you can say what the e4m3 format keeps and loses, quantize on store and dequantize on
# read with a scale, explain saturation and how a scale is chosen and when it changes, and measure what the
# 8-bit cache costs: attention error against an fp64 reference, and the tokens a model generates.

# %% [markdown]
# ## Self-test
#
# 1. Qwen2.5-7B's bf16 cache holds 57,344 bytes per token. How many does an fp8 cache hold, and how many
#    more 3,000-token requests fit in 55 GiB?
# 2. What is the largest e4m3 value? How far apart are neighbouring values between 256 and 448, and between 1
#    and 2?
# 3. `k_scale = 0.01` and a key element is 5.0. What is stored, and what does attention read back?
# 4. With a scale of 1.0, what happens to a value of 0.0004? To one of 900?
# 5. At large batch, decode reads K/V and almost nothing else. What is the best speedup an fp8 cache can give,
#    and why is it less in practice?
#
# <details><summary>Answer</summary>
#
# 1. 28,672 bytes: one byte per element instead of two. Twice as many requests: 684 instead of 342.
# 2. 448. Between 256 and 448 the step is 32 (256, 288, ..., 448); between 1 and 2 it is 1/8: every power
#    of two holds 8 values, so the step is 1/8 of the power of two below.
# 3. 5.0 / 0.01 = 500 is past 448: it saturates, the byte holds 448, and attention reads 448 x 0.01 = 4.48.
# 4. 0.0004 is below half of e4m3's smallest step (2^-9 = 0.00195): it becomes 0. 900 saturates to 448. A
#    scale fitted to the data (amax / 448) avoids both.
# 5. 2x, the ratio of bytes read. Less because some bytes do not shrink (q, the output, block tables), fixed
#    costs (launches, the dependent table -> K/V loads) do not shrink, and the kernel does more arithmetic
#    per byte (one multiply by the scale per element).
#
# </details>

# %% [markdown]
# ## 1. What e4m3 keeps and loses
#
# `torch.float8_e4m3fn` is one byte: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits. The "fn" says what
# is missing: there is no infinity, and only `S.1111.111` is NaN, which frees `S.1111.110` for the largest
# value, `1.75 x 2^8 = 448`. Exponent 0 holds subnormals, multiples of `2^-9`.
#
# ```
#   0 0111 000  =  1.0        0 1111 110  =  448 (max)        0 0001 000  =  2^-6 (smallest normal)
#   0 0111 001  =  1.125      0 1111 111  =  NaN              0 0000 001  =  2^-9 (smallest subnormal)
# ```
#
# Every byte, read as a value:

# %%
import torch

every_byte = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)   # [256] e4m3
values = every_byte.float()
positive = values[(values > 0) & ~values.isnan()].unique()                    # sorted
print(f"{int(values.isnan().sum())} NaN bytes, {positive.numel()} positive values, range "
      f"{positive.min().item():g} .. {positive.max().item():g}")
print("near 1:  ", positive[(positive >= 0.75) & (positive <= 2.5)].tolist())
print("near 448:", positive[positive >= 160].tolist())
normal = positive[positive >= 2**-6]                                          # [n] e4m3's normal values
bf16 = torch.tensor([1.0, 1.0 + 2**-7])                                       # bf16's first step above 1
print(f"rounding to nearest is off by at most half a step: {((normal.diff() / normal[:-1]).max() / 2):.2%} "
      f"of the value in e4m3, {(bf16.diff() / bf16[0]).item() / 2:.2%} in bf16")

# %% [markdown]
# Eight values per power of two, so the step is 1/8 of the value's power of two: rounding to the nearest
# value is off by at most 1/16 of it (the last line). bf16 has 7 mantissa bits, 128 values per power of two:
# fp8 is 16 times coarser. And its range is narrow: `2^-9 .. 448`, where bf16's reaches `1e-38 .. 3e38`. The
# picture: the grid is equally dense, in relative terms, from 2^-6 to 448.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import fp8_plots

fig, ax = plt.subplots(figsize=(7.5, 1.6), dpi=80)
fp8_plots.e4m3_grid_figure(positive.tolist(), ax=ax)
plt.show()

# %% [markdown]
# What e4m3 keeps: about two significant digits at any magnitude in its range. What it loses: the third
# digit, everything past 448, and everything below about 0.001. So the values must be **moved into its
# range** before they are stored: that is the scale.
#
# ## 2. Quantize on store, dequantize on read
#
# One float32 scale per tensor (per layer, one for K and one for V), in vLLM's convention:
#
# ```
# store:  byte = e4m3( clamp(x.float() / scale, -448, 448) )     the cast rounds to nearest, ties to even
# read:   x   ~= byte.float() * scale
# ```
#
# `pagedkv_lib.core.kv_quant` holds the pair; `store_kvcache(..., k_scale=, v_scale=)` quantizes the rows it
# writes, and the attention references dequantize what they gather.

# %%
from pagedkv_lib.core.kv_quant import compute_scale, dequantize_fp8, quantize_fp8

x = torch.tensor([0.3, -1.7, 2.049, 5.0, -0.0004, 900.0])
for scale in (1.0, 0.01, compute_scale(x)):
    back = dequantize_fp8(quantize_fp8(x, scale), scale)
    print(f"scale {scale:<8.4g} stored {quantize_fp8(x, scale).float().tolist()}")
    print(f"{'':15}read   {[round(v, 4) for v in back.tolist()]}")

# %% [markdown]
# With scale 1.0, 900 saturates and -0.0004 vanishes; with 0.01 even 5.0 saturates. `compute_scale(x)` is
# `amax(|x|) / 448`: the largest value lands exactly on 448 and the others keep their two digits, except
# -0.0004, two million times smaller than 900: more than e4m3's whole range (448 / 2^-9 = 229,376). No
# single scale can keep both; a tensor's scale serves its large values.
#
# ## 3. Saturation: what happens past 448
#
# e4m3fn has no infinity, so a value past the range must become something. What a plain
# `x.to(torch.float8_e4m3fn)` does depends on the software: since PyTorch 2.12 (PR #178817) it saturates to
# +-448; PyTorch 2.11 and older turn every magnitude above 464 into **NaN**; Triton's GPU conversion
# saturates; Triton 3.9's interpreter neither saturates nor rounds correctly (a round-up across a power of two
# halves the value: a value just under 32 becomes 16). One NaN key makes every score of that query NaN, and
# the softmax with it. So the library clamps before the cast, on every backend, and says so. A NaN input stays
# NaN.

# %%
# NBVAL_IGNORE_OUTPUT
# (the plain cast's result depends on the installed torch)
edge = torch.tensor([440.0, 460.0, 470.0, 1e4, float("inf"), float("nan")])
print("torch", torch.__version__)
print("plain cast:   ", edge.to(torch.float8_e4m3fn).float().tolist())
print("clamp, cast:  ", quantize_fp8(edge, 1.0).float().tolist())

# %% [markdown]
# ## 4. Choosing the scale, and when it changes
#
# A scale maps the tensor's largest magnitude onto e4m3's: **per-tensor calibration**, `scale = amax / 448`,
# computed from calibration data. Where the data come from, as vLLM does it:
#
# - no calibration: every scale is 1.0 (the default; fine when K and V stay within 2^-6 .. 448);
# - offline: a quantization tool runs a calibration set through the model and stores `k_scale`, `v_scale`
#   per layer in the checkpoint;
# - `calculate_kv_scales=True`: each layer computes its scales once, from the K/V of the first forward, as
#   `amax / 200` for keys and `amax / 100` for values (vLLM's `K_SCALE_CONSTANT`, `V_SCALE_CONSTANT`), leaving
#   2.2x and 4.5x headroom for later values larger than the first batch's.
#
# A scale is **never updated** afterwards: the bytes already in the cache were written with it, and changing
# it would silently rescale them. The course's engine does the same (`EngineConfig(kv_cache_dtype="fp8",
# calculate_kv_scales=True)`):

# %%
from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams

torch.set_num_threads(1)  # tiny matrices: one thread is the fastest, and steady on a shared CPU
config = EngineConfig(model=ModelConfig(dtype=torch.float32), kv_cache_dtype="fp8", calculate_kv_scales=True)
llm = LLM(config)
print("cache:", llm.model_runner.kv_cache.dtype, tuple(llm.model_runner.kv_cache.shape))
print("before the first forward:", llm.model_runner.kv_scales()[0])
llm.generate([[1, 2, 3, 4, 5, 6, 7, 8], [40, 41, 42]], SamplingParams(max_tokens=4), use_tqdm=False)
for layer, (k_scale, v_scale) in enumerate(llm.model_runner.kv_scales()):
    print(f"layer {layer}: k_scale {k_scale:.3g}  v_scale {v_scale:.3g}")  # 3 digits: the same on any CPU

# %% [markdown]
# A scale per KV head would fit each head's own range. Is it worth it? e4m3 is a floating-point format: its
# relative precision is the same from 2^-6 to 448, a range of 2^15. A head 100 or 1,000 times smaller than
# the largest one still lands on that part of the grid. Only past about 10^4 do its values sink into the
# subnormals. Relative error of the small head's keys after a round trip:

# %%
from pagedkv_lib.studies import fp8_attention_error as fe

print(f"{'ratio':>8} {'per-tensor scale':>17} {'per-head scale':>15}")
for r in fe.per_head_scale_gain():
    print(f"{r['ratio']:>8g} {r['per_tensor_rel_err']:>17.2%} {r['per_head_rel_err']:>15.2%}")

# %% [markdown]
# Real models' heads differ by far less than 10^4, so the course keeps one scale per tensor, as vLLM does by
# default (it supports per-head scales only through a calibration tool and one attention backend).
#
# ## 5. Memory: bytes per token halve, requests that fit double
#
# Notebook 01's arithmetic with one byte per element (`studies.memory`): an 80 GB GPU, 15 GiB of weights and
# 10 GiB of overhead leave 55 GiB for the cache; requests of 3,000 tokens, blocks of 16.

# %%
from pagedkv_lib.studies import memory

budget = 55 * memory.GiB
print(f"{'model':<12} {'bf16 B/token':>13} {'fp8 B/token':>12} {'bf16 fits':>10} {'fp8 fits':>9}")
for m in memory.MODELS.values():
    per = {b: memory.kv_bytes_per_token(m.num_layers, m.num_kv_heads, m.head_dim, b) for b in (2, 1)}
    fits = {b: memory.paged_concurrency(budget, 3000, 16, per[b]) for b in per}
    print(f"{m.name:<12} {per[2]:>13,} {per[1]:>12,} {fits[2]:>10} {fits[1]:>9}")

# %% [markdown]
# The scales cost nothing here: two floats per layer. (Per-token or per-block scales, which some engines use
# for 4-bit caches, do cost bytes per token: 4 bytes per 128-element row is 3%.)
#
# ## 6. Accuracy: attention output against an fp64 reference
#
# `studies.fp8_attention_error` builds a decode batch (4 sequences of 256 tokens, 8 query heads, 2 KV heads,
# head_dim 64) in float32, writes it with the library's `store_kvcache` into three paged caches, reads it
# back with `paged_attention_decode`, and compares the output with fp64 SDPA on the float32 K/V. The read
# computes in float64, so that what is measured is the cache's rounding alone: an engine's fp32 arithmetic
# and bf16 output would add their own rounding (and fp32 sums round differently on different CPUs, which
# would change the last digits below). The bf16 cache is a float64 cache holding the bf16-rounded values:
# the numbers a bf16 cache gives back. Two value ranges: plain (K ~ N(0, 1), V ~ N(0, 0.5)), and with
# **outlier channels**: 4 key channels per head 20 times larger, as real LLM keys have.

# %%
rows = fe.error_table()
print(f"outliers: {fe.OUTLIER_CHANNELS} key channels per KV head {fe.OUTLIER_GAIN:g} times larger")
print(fp8_plots.error_table(rows))
bf16 = {r["values"]: r for r in rows if r["cache"] == fe.CACHES[0]}
for key in ("mean_abs_err", "max_abs_err"):
    ratio = [r[key] / bf16[r["values"]][key] for r in rows if r["cache"].startswith("fp8")]
    print(f"fp8's {key[:-8]} |err| / bf16's: {min(ratio):.1f} .. {max(ratio):.1f}")

# %% [markdown]
# The fp8 cache's mean error is close to 16 times the bf16 cache's (the last lines): the 16 of their grids.
# Outlier channels raise both, because larger keys make larger scores, and a score's error grows with it.
# Scale 1.0 does as well as the calibrated scale here: these values already lie inside e4m3's range, and the
# two fp8 rows differ only by which values happened to round which way. The relative figures are large because
# the output is an average of 256 random values and so is small; trained models attend to a few tokens and
# their outputs are not near zero.
#
# Now move K and V over eight orders of magnitude (and q the other way, so that the softmax stays the same):

# %%
sweep = fe.error_vs_magnitude()
fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=80)
fp8_plots.error_vs_magnitude_figure(sweep, ax=ax)
plt.show()

# %% [markdown]
# bf16 and fp8 with a calibrated scale are flat: floating point does not care where the values sit once the
# scale has moved them into range. With scale 1.0 the error is the same until the values leave e4m3's
# range: below about 0.01 they flush to zero (the output collapses), above about 100 the largest saturate.
#
# ## 7. Accuracy: the tokens a model generates
#
# The mini engine (random weights), twelve fixed prompts, 24 greedy tokens each, three times: with a cache
# that keeps exactly what the model computed (the reference), with a bf16 cache, and with an fp8 cache
# (scales 1.0: this model's K and V lie well inside e4m3's range). The model computes in float64, so that
# the only rounding that differs between the three runs is the cache's. (A bf16 model, as engines serve,
# adds its own rounding, and that differs between CPUs' bf16 kernels: the counts below would change from
# machine to machine.) Free running, a completion is compared with the reference up to its first difference
# (after it, the two continue from different texts). Teacher forced, every reference completion is fed back
# as one prefill through each cache, and each step asks: is the argmax still the reference's token? That is
# agreement per step, without compounding.

# %%
from pagedkv_lib.studies import fp8_greedy_agreement as ga

agreement = ga.greedy_agreement(ga.prompt_set(), max_tokens=24)
n, total = agreement.num_prompts, agreement.num_prompts * agreement.max_tokens
for cache in ga.CACHES:
    print(f"{cache} cache, teacher forced: {agreement.teacher_forced[cache]:.1%} of {total} steps pick the "
          "reference's token")
for cache in ga.CACHES[1:]:
    print(f"{cache} cache, free running: {agreement.identical[cache]} of {n} completions identical; first "
          f"difference at steps {agreement.first_divergence[cache]}")

# %% [markdown]
# Which steps change? The reference logits' top-2 margin says how close each choice was:

# %%
median = agreement.median_margin
print(f"median top-2 margin of the reference: {median:.3f}")
for cache in ga.CACHES[1:]:
    margins = sorted(f.margin for f in agreement.flips[cache])
    print(f"{cache} cache: {len(margins)} steps pick another token, at margins {margins[0]:.3f} .. "
          f"{margins[-1]:.3f}; {sum(m < median / 2 for m in margins)} of them below half the median")
fig, ax = plt.subplots(figsize=(7.5, 3.2), dpi=80)
fp8_plots.margin_figure(agreement, ax=ax)
plt.show()

# %% [markdown]
# Where they diverge: at near-ties. Both caches change only steps whose top two logits were close, and fp8,
# with a grid 16 times coarser, changes many more of them than bf16. The reference reproduces its own tokens
# on every step, so every change is a cache's doing. This random model's logits are flat (the median
# margin is under half a logit), so a small change in attention flips its choice often and free-running
# completions drift apart within a few tokens. A trained model's confident steps have margins of several
# logits (vLLM's documentation: fp8 e4m3 "typically only minimally degrades inference accuracy"), but the
# mechanism is the same: a cache's rounding moves the logits a little, and only near-ties notice.
#
# ## 8. Speed, on an H200
#
# Decode reads every K/V byte of every context once per step, so an fp8 cache reads half the bytes. The
# course's decode kernel reads fp8 caches and converts them in registers (to fp16, the operand type of its
# matrix products; the scale is applied in fp32); `benchmarks/bench_decode.py` times it against bf16 at the
# same shapes, in one run, and the figures are stored in `benchmarks/results/` (schema in
# `pagedkv_lib/viz/fp8_plots.py`):

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz.bench_findings import fp8_speed_findings

decode_run = results.stored("bench_decode.json")
speed = None
if decode_run is not None:
    speed = fp8_plots.from_decode_results(decode_run, "triton_v3", "fp8_v3")
print(fp8_plots.speed_table(speed))
print(fp8_speed_findings(speed))

# %% [markdown]
# Why less than 2x: each K and V element is converted from e4m3 before the kernel's matrix products, and the
# conversion costs per element, not per byte, so at half the bytes per element the conversions and the
# arithmetic take a larger share of the time (`benchmarks/NOTES.md` follows the kernel through its
# versions). At a small batch (8x4096) fixed costs set the time, and the conversions only add to it.

# %% [markdown]
# ## Exercises
#
# **134 · FP8 KV cache · medium.** In `practice/134_fp8_kv_cache.py`, write the pair:
# `store_kvcache_fp8(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)`, exercise 124's store
# that writes `(x.float() / scale).clamp(-448, 448)` as e4m3 bytes, and
# `gather_kv_dequant(cache, block_table, context_len, scale, dtype)`, one sequence's rows read back through
# its block table as `byte.float() * scale`. The judge compares the stored bytes exactly and the gathered
# values at one unit of the output dtype; its cases saturate, skip -1 slots, use scales far from 1, cut the
# last block, and fill every other byte with garbage, NaN encodings included. Grade it with
#
#     python practice/judge.py 134
#
# Or solve it here: fill in the functions below and run the cell. `judge(134)` grades the names of
# this notebook on the same hidden cases (until you do, it reports *not implemented*).

# %%
from pagedkv_lib.judge import judge


def store_kvcache_fp8(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale):
    raise NotImplementedError  # your code here


def gather_kv_dequant(cache, block_table, context_len, scale, dtype):
    raise NotImplementedError  # your code here


result = judge(134)

# %% [markdown]
# ## In real systems
#
# - **vLLM**: `kv_cache_dtype` is `"auto"`, `"fp8"` (= `"fp8_e4m3"`: "CUDA 11.8+ supports fp8 (=fp8_e4m3)
#   and fp8_e5m2", `vllm/config/cache.py`), `"fp8_e5m2"` and a few more. Scales are per
#   tensor (`k_scale`, `v_scale`, one pair per attention layer), 1.0 by default, loaded from a checkpoint
#   calibrated with llm-compressor, or computed once at the first forward with `calculate_kv_scales=True`
#   (`calc_kv_scales`: `amax / K_SCALE_CONSTANT`, `amax / V_SCALE_CONSTANT`, 200 and 100 in `vllm/envs.py`;
#   then "we only calculate the scales once"). Per-head scales exist only with the FlashAttention backend and
#   llm-compressor's calibration (docs, "Quantized KV Cache"). Its CUDA conversion
#   (`csrc/quantization/fp8/nvidia/quant_utils.cuh`) stores `__nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE,
#   ...)`: divide, saturate, round, and reads `fp8 * scale`. With the FlashAttention 3 backend the queries
#   are quantized to fp8 too and the matrix products run in fp8. (Older vLLM docs give e4m3's range as
#   +-240: that is e4m3fnuz, the variant of AMD's MI300, with a different bias and no negative zero.)
# - **FlashInfer**: `BatchDecodeWithPagedKVCacheWrapper.plan(..., kv_data_type=torch.float8_e4m3fn)` and
#   `run(q, paged_kv_cache, ..., k_scale=, v_scale=)`, "the calibration scale of key for fp8 input", 1.0 if
#   not given (`flashinfer/decode.py`); q and the output stay in fp16/bf16.
# - **SGLang**: `--kv-cache-dtype fp8_e4m3` or `fp8_e5m2`; its docs ("Quantized KV Cache") warn that when
#   the dequantization is not fused into the attention kernel, performance "can be extremely slow",
#   potentially negating the memory benefit.
# - **PyTorch**: eager casts to `float8_e4m3fn` saturate since PR #178817 (2.12); torchao gates its saturation
#   test on that version, because older eager casts returned NaN where Triton saturated.
#
# ## Say it in the interview
#
# An fp8 KV cache stores each key and value element in one byte, e4m3: 3 mantissa bits, so about two
# significant digits, 16 times coarser than bf16, and a range of 2^-9 to 448. One float32 scale per tensor and
# layer moves the values into that range: store `clamp(x / scale, -448, 448)` rounded to nearest even, read
# `byte * scale` in fp32 inside the attention kernel. I clamp explicitly because the plain cast's overflow
# behaviour differs between versions and backends, and a NaN key poisons every softmax that reads it. The
# scale is `amax / 448` from calibration data, or vLLM's once-at-first-forward `amax / 200` for headroom, and
# it never changes afterwards, because the bytes already stored depend on it. Per-head scales only pay when
# heads differ by 10^4, since e4m3 is floating point. It halves bytes per token, so twice the requests fit,
# and decode, being memory-bound, can get up to 2x faster; how close a kernel gets depends on how cheaply it
# converts the bytes back, which costs per element. I measured the accuracy cost: the mean attention error is
# about 16 times bf16's, the ratio of their grids, and flat over magnitudes with a calibrated scale; the
# engine's greedy tokens change only at near-tied steps.
