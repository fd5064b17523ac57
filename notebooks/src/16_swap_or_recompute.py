# %% [markdown]
# # 16 · Swap or recompute
#
# When the block pool runs dry, a running request is preempted (notebook 14): its blocks are taken back so
# the others can grow. Its K/V is either SWAPPED, copied to host memory and back later (twice its K/V bytes
# over PCIe), or RECOMPUTED, dropped and rebuilt by a prefill of its prompt and generated tokens when it
# resumes. After this notebook you can price both with numbers measured on an H200 (its host link and its
# prefill), find the length where one starts to beat the other for a given model, explain why vLLM V0's swap,
# one copy per block, reached a fraction of the link's bandwidth, run the course's serving simulation either
# way and price its preemptions, and say what vLLM V0, vLLM V1 and SGLang do, with the files that do it.


# %% [markdown]
# ## Self-test
#
# 1. How many bytes cross PCIe to swap a 4096-token LLaMA-2-7B request (512 KiB of K/V per token) out and
#    back, and about how long does that take at 55 GB/s each way?
# 2. Swap time grows linearly with the length. Why does recompute time grow faster?
# 3. vLLM V0 swapped with one `cudaMemcpyAsync` per block, per layer, for K and for V. Why did that reach
#    only a fraction of the link's bandwidth at block size 16?
# 4. Why does grouped-query attention (few KV heads) favour swapping?
# 5. vLLM V1 preempts by recompute. Why is a resumed request's prefill sometimes much shorter than its
#    length?
#
# <details><summary>Answer</summary>
#
# 1. 2 x 4096 x 512 KiB = 4 GiB: 2 GiB out and 2 GiB back, each 2^31 bytes / 55e9 bytes per second, so
#    several tens of milliseconds in all (section 2 measures the link).
# 2. A prefill's matrix work is linear in the tokens, but causal attention is quadratic: token i attends to
#    i earlier tokens. Long enough, recompute always loses.
# 3. A copy costs a fixed overhead of a couple of microseconds before any byte moves (measured below). A
#    16-token block of one layer's K is only 16-128 KiB for these models, so the overhead dominates, and a
#    request needs 2 x layers x blocks such copies.
# 4. Recompute cost per token follows the weights (all of them, every token), swap cost the K/V bytes. GQA
#    cuts the K/V bytes per token (Qwen2.5-7B: 56 KiB against LLaMA-2-7B's 512 KiB for a model of the same
#    size) without cutting the weights, so swapping gets relatively cheaper.
# 5. The prefix cache. Its freed blocks keep their hashes (notebook 07), so unless they were reused in the
#    meantime, the resumed request hits its own prefix and recomputes only what was overwritten.
#
# </details>

# %% [markdown]
# ## 1. What a preemption leaves behind
#
# ```
# swap:       GPU blocks --(n x bytes/token over PCIe)--> host memory     ... later ...
#             host memory --(n x bytes/token over PCIe)--> new GPU blocks   resume decoding
# recompute:  GPU blocks -> free                                          ... later ...
#             prefill of the n tokens (prompt + generated) -> new GPU blocks   resume decoding
# ```
#
# Swap moves bytes; recompute spends FLOPs. Both happen on the request's critical path, and in vLLM V0 the
# swap of a step ran before that step's forward pass. What they cost depends on three numbers of the GPU (the
# host link, the matrix rate, the attention rate) and three of the model (K/V bytes per token, weights,
# attention size). The model shapes are the course's (pagedkv_lib/studies/memory.py), with the rest of each
# Hugging Face config (hidden size, MLP size, query heads) in `swap_or_recompute.PREFILL_SHAPES`.

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.studies import swap_or_recompute as sr

for shape in sr.PREFILL_SHAPES.values():
    print(f"{shape.name:11s} K/V {shape.kv.bytes_per_token // 1024:4d} KiB/token, one 16-token block of one "
          f"layer's K: {shape.block_copy_bytes(16) // 1024:4d} KiB, weights a token goes through: "
          f"{shape.non_embedding_params / 1e9:5.2f} B")

# %% [markdown]
# ## 2. The host link, measured
#
# PCIe 5.0 runs 32 GT/s per lane with 128b/130b encoding (PCI-SIG), so x16 carries
# 32 x 16 x 128/130 / 8 = 63 GB/s each way, nominally. `benchmarks/bench_preemption.py` measured the H200
# of this course (results in `benchmarks/results/preemption_h200.json`): whole copies to and from pinned host
# memory, the same bytes split into one copy per block the way vLLM V0 swapped, both directions at once, and
# pageable memory for contrast. The link's generation and width come from `nvidia-smi`.

# %%
preemption_run = results.load(sr.PREEMPTION_RESULT)
env, pcie = preemption_run["env"], preemption_run["pcie"]
print(f"{env['device']}, torch {env['torch']}; PCIe link {env['pcie_before']}")
print(f"nominal {sr.PCIE5_X16_GBS:.1f} GB/s each way; best pinned copy: {pcie['best_gbs']['d2h']:.1f} out, "
      f"{pcie['best_gbs']['h2d']:.1f} in ({pcie['best_gbs']['d2h'] / sr.PCIE5_X16_GBS:.0%} of nominal)")
print(f"both directions at once: {pcie['duplex']['total_gbs']:.1f} GB/s together; pageable memory: "
      f"{pcie['pageable']['d2h']:.1f} out, {pcie['pageable']['h2d']:.1f} in")
link = sr.load_cost_model().link
print(f"a copy of b bytes: {1e6 * link.d2h_overhead_s:.2f} us + b / {link.d2h_gbs:.1f} GB/s out, "
      f"{1e6 * link.h2d_overhead_s:.2f} us + b / {link.h2d_gbs:.1f} GB/s in (fitted to the per-block copies)")

# %% [markdown]
# Each copy pays its overhead before any byte moves, so bandwidth climbs with the copy's size: the curve
# below is that fit, the dots the measurements (timed in a CUDA graph, and from a Python loop).

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz.preemption_plots import plot_host_link

fig, ax = plt.subplots(figsize=(7.5, 3), dpi=80)
plot_host_link(ax, preemption_run, link)
fig.subplots_adjust(bottom=0.17)
plt.show()
for shape in sr.PREFILL_SHAPES.values():
    b = shape.block_copy_bytes(16)
    print(f"{shape.name:11s} a {b // 1024:3d} KiB block copy moves at "
          f"{b / (link.d2h_overhead_s + b / (link.d2h_gbs * 1e9)) / 1e9:5.1f} GB/s out")

# %% [markdown]
# ## 3. The prefill, counted and measured
#
# A prefill of n tokens with nothing cached costs `2 x P x n` FLOPs in the weight matrices (P weights a token
# goes through: Q, K, V, O and the MLP of every layer) and `2 x L x H x D x n^2` in causal attention (QK^T
# and PV, each `2 x D` per pair, over the n(n+1)/2 pairs: the count of `benchmarks/bench_prefill.py`). Check
# the formula against an independent counter: torch's `FlopCounterMode` on a tiny dense forward written out
# with plain matmuls. The counter sees the full n x n score matrix, twice the causal half.

# %%
import torch
from torch.utils.flop_counter import FlopCounterMode

from pagedkv_lib.studies.memory import ModelShape

T, H, H_kv, D, E, I, L = 64, 4, 2, 8, 32, 48, 2
tiny = sr.PrefillShape(ModelShape("tiny", L, H_kv, D, 4), hidden_size=E, intermediate_size=I, num_heads=H)
g = torch.Generator().manual_seed(0)
w = [{n: torch.randn(*s, generator=g) for n, s in (("qkv", ((H + 2 * H_kv) * D, E)), ("o", (E, H * D)),
                                                   ("up", (2 * I, E)), ("down", (E, I)))} for _ in range(L)]
x = torch.randn(T, E, generator=g)                                                 # [T, E]
with FlopCounterMode(display=False) as counter:
    for p in w:
        q, k, v = (x @ p["qkv"].T).split([H * D, H_kv * D, H_kv * D], dim=-1)  # [T, H D], [T, H_kv D] x2
        q = q.view(T, H, D).transpose(0, 1)                                    # [H, T, D]
        k, v = (t.view(T, H_kv, D).transpose(0, 1).repeat_interleave(H // H_kv, 0)
                for t in (k, v))                                               # [H, T, D] each (GQA)
        future = torch.ones(T, T).triu(1).bool()                               # [T, T] causal mask
        scores = (q @ k.transpose(1, 2)).masked_fill(future, float("-inf"))    # [H, T, T]
        x = x + (scores.softmax(-1) @ v).transpose(0, 1).reshape(T, H * D) @ p["o"].T  # [T, E]
        gate, up = (x @ p["up"].T).chunk(2, dim=-1)                                # [T, I] each
        x = x + (torch.nn.functional.silu(gate) * up) @ p["down"].T                # [T, E]
matrix, attention = tiny.prefill_flops(T)
counted = counter.get_total_flops()
print(f"counted {counted:,}; formula: matrices {matrix:,.0f} + 2 x attention {attention:,.0f} = "
      f"{matrix + 2 * attention:,.0f}: equal {counted == matrix + 2 * attention}")

# %% [markdown]
# The rates come from the course's own H200 run, `benchmarks/results/bench_prefill.json`: its dense bf16
# matrix rate and the best correct causal prefill attention it measured. The same benchmark of this notebook
# timed a whole-model forward of each shape (random weights, bf16, SDPA), which tells how far the FLOP
# count is from a real prefill:

# %%
model = sr.load_cost_model()
print(model.source.split("; host")[0])
ratio = {}
for r in preemption_run["prefill"]:
    shape = sr.PREFILL_SHAPES[r["model"]]
    predicted = 1e3 * model.recompute_seconds(shape, r["tokens"])
    ratio[r["model"], r["tokens"]] = r["ms"] / predicted
    print(f"{r['model']:11s} {r['tokens']:6,d} tokens: measured {r['ms']:8.2f} ms, FLOP model "
          f"{predicted:8.2f} ms ({r['ms'] / predicted:4.2f}x)")
big = [v for (name, _), v in ratio.items() if name != "Qwen3-0.6B"]
print(f"7B and 13B shapes: the measured forward takes {min(big):.2f}x to {max(big):.2f}x the FLOP model")

# %% [markdown]
# For the 7B and 13B shapes the FLOP model is close to the real forward at every length. For the
# 0.6B model on short prompts the forward is far slower than its FLOPs: 28 layers of small kernels launched
# one by one from Python cost a few milliseconds whatever the length. In an engine a recompute is batched
# with the other requests' work (vLLM V1 schedules it as ordinary prefill tokens in a step), so its cost is
# the MARGINAL one, the FLOP model's; alone on an idle GPU it would cost the measured time.
#
# ## 4. The crossover
#
# With a = swap seconds per token, and recompute `b n + c n^2`, recompute wins while `n < (a - b) / c`.
# Milliseconds to bring back a request of n tokens, each way of swapping:

# %%
print("swap gathered into one copy each way:")
print(sr.crossover_table(model))
print("\nswap one copy per 16-token block, per layer, for K and for V (vLLM V0):")
print(sr.crossover_table(model, block_size=16))

# %%
from pagedkv_lib.viz.preemption_plots import draw_swap_or_recompute

fig = plt.figure(figsize=(10, 2.8), dpi=80)
draw_swap_or_recompute(fig, model, preemption_run["prefill"])
plt.show()

# %% [markdown]
# What the table says, printed from it:

# %%
def verdict(n: float) -> str:
    return "swap always wins" if n == 0 else f"recompute wins below {n:,.0f} tokens"


for shape in sr.PREFILL_SHAPES.values():
    whole, per_block = model.crossover_tokens(shape), model.crossover_tokens(shape, block_size=16)
    print(f"{shape.name:11s} one copy each way: {verdict(whole)}; a copy per block: {verdict(per_block)}")

# %% [markdown]
# A small model with a large K/V per weight (Qwen3-0.6B, section 1) recomputes cheaply up to thousands of
# tokens; a GQA model with few KV heads (Qwen2.5-7B) is cheaper to swap at any length, if the swap is one
# large copy. Swapped V0's way, a copy per 16-token block, the overhead per copy makes swap
# and recompute comparable for the 7B and 13B models over the lengths that matter, the PagedAttention
# paper's finding (Kwon et al., SOSP 2023, §7.3 and Fig. 19: swapping suffers at small block sizes,
# recomputation's cost does not depend on the block size).
#
# ## 5. The choice in the serving simulation
#
# `simulate_serving(..., preemption="swap")` (pagedkv_lib/studies/serving/simulation.py) preempts like vLLM
# V0's `PreemptionMode.SWAP`: the preempted request's blocks are freed, it joins a swapped queue that is
# served before anyone waiting (no admission while a request is swapped out) and only in a step that preempted
# nobody. The default stays `"recompute"`. The simulation counts steps, not seconds, so each run records the
# length of every preemption, and `preemption_seconds` prices them with the cost model above. The notebook-1
# workload on a tight 64K-slot budget:

# %%
from pagedkv_lib.studies.serving.simulation import simulate_serving
from pagedkv_lib.studies.workload import make_workload

requests = make_workload(200, seed=0)
runs = {mode: simulate_serving(requests, "paged", budget_tokens=64 * 1024, block_size=16, preemption=mode)
        for mode in ("recompute", "swap")}
for mode, r in runs.items():
    print(f"{mode:9s}: {r.num_steps} steps, {r.num_preemptions} preemptions, mean length "
          f"{r.preempted_lengths.mean():.0f} tokens; recomputed {r.recomputed_tokens:,}, "
          f"swapped {r.swapped_tokens:,}")

# %%
r = runs["recompute"]
print(f"{'seconds':11s} {'recompute':>10s} {'swap, 1 copy':>13s} {'swap, per block':>16s} "
      f"{'cheaper each':>13s}")
for shape in sr.PREFILL_SHAPES.values():
    cost = [sr.preemption_seconds(r.preempted_lengths, shape, model, m, b)
            for m, b in (("recompute", None), ("swap", None), ("swap", 16), ("cheaper", None))]
    picks = sum(model.recompute_seconds(shape, int(n)) <= model.swap_seconds(shape, int(n))
                for n in r.preempted_lengths)
    print(f"{shape.name:11s} {cost[0]:10.2f} {cost[1]:13.2f} {cost[2]:16.2f} {cost[3]:13.2f}   "
          f"(recompute is the cheaper for {picks} of {r.num_preemptions})")

# %% [markdown]
# The swapped queue's priority changes little here (the two runs take about as many steps); what differs is
# where the time goes: GPU FLOPs or PCIe bytes. Choosing per preemption by the crossover ("cheaper each") is
# never worse than either; the last column says which way it goes for these lengths. Swap also needs host
# memory (vLLM V0 aborted when its swap space ran out),
# and it competes for the link with everything else that uses it.
#
# ## Exercises
#
# Ungraded; each is a few lines on this notebook's objects.
#
# 1. Put the nominal link in the model (`sr.load_cost_model(link="nominal")`): which crossovers move, and
#    by how much?
# 2. vLLM's FlashAttention backend uses 16-token blocks, nano-vllm 256-token blocks. Redo the per-block
#    crossover at block size 256. What does that say about nano-vllm if it had swapped?
# 3. Price the recompute of the serving run with the MEASURED whole-model prefill instead of the FLOP model
#    (interpolate `preemption_run["prefill"]` in log-log): does the ranking change for Qwen3-0.6B?
# 4. An fp8 KV cache (notebook 13) halves the bytes per token. Rebuild the shapes with
#    `shape.kv.with_kv_dtype("fp8")` and say which model changes its verdict.
#
# ## In real systems
#
# - **vLLM V0** (`vllm-project/vllm@0054e1fa0f8a:vllm/core/scheduler.py`): `PreemptionMode` has `SWAP` and
#   `RECOMPUTE`. `_preempt` picks RECOMPUTE when the sequence group has one running sequence (its comment:
#   recomputation costs less than swapping) and SWAP for groups of several sequences (beam search, parallel
#   sampling), which recomputation did not support. `_schedule_default` schedules no new prefill while any
#   request is swapped out, and swaps in only in a step that preempted nobody; `_swap_out` raises when the CPU
#   swap space is exhausted. The worker copied the blocks before the forward pass:
#   `vllm-project/vllm@017e7a4cea78:vllm/worker/cache_engine.py` (`CacheEngine.swap_in` / `swap_out`, one
#   call per layer over pinned CPU tensors) into `csrc/cache_kernels.cu`'s `swap_blocks`, a loop of one
#   `cudaMemcpyAsync` per block.
# - **vLLM V1** (`vllm-project/vllm@00024d314514:vllm/v1/core/sched/scheduler.py`): when `allocate_slots`
#   fails, `schedule` preempts `self.running.pop()` (or the lowest priority) and `_preempt_request` frees its
#   blocks, sets `num_computed_tokens = 0` and puts it back at the front of the waiting queue: recompute only.
#   The freed blocks keep their hashes, so a resumed request often hits its own prefix. The docs
#   (`vllm-project/vllm:docs/configuration/optimization.md`) say preempted requests are recomputed. Host
#   memory comes back as a cache tier instead of a swap space:
#   `vllm-project/vllm@00d169bfa559:vllm/v1/kv_offload/abstract.py` (the `OffloadingManager`) stores blocks
#   by their hash and loads the longest offloaded prefix of a request.
# - **SGLang** (`sgl-project/sglang@000eaffacf04:python/sglang/srt/managers/schedule_batch.py`) "retracts" a
#   decoding request when memory runs out: `Req.reset_for_retract` drops its prefix indices and it goes back
#   to the waiting queue, to be matched in the radix tree (notebook 15) and recomputed; the same file has
#   `offload_kv_cache` / `load_kv_cache`, which copy a request's K/V to host memory and back.
# - **The PagedAttention paper** (Kwon et al., SOSP 2023, §4.5) introduced both recovery mechanisms, and its
#   ablation (§7.3, Fig. 19) found swapping expensive at small block sizes (many small PCIe transfers) and the
#   two comparable at block sizes 16 to 64.
#
# ## Say it in the interview
#
# A preempted request either swaps its K/V to host memory and back, twice its K/V bytes over PCIe, or drops
# it and recomputes it with a prefill of its prompt and generated tokens when it resumes. Swap is linear in
# the length at the link's bandwidth, close to PCIe 5 x16's nominal 63 GB/s each way for large pinned copies,
# but each copy also pays a couple of microseconds, so vLLM V0's one copy per 16-token block and layer got a
# fraction of that.
# Recompute is the matrix FLOPs, linear, plus causal attention, quadratic, at the GPU's rates; batched with
# other work it costs about its FLOPs. So recompute wins for short requests and for models with large K/V per
# weight, swap for long requests and GQA models whose K/V is small, and a gathered copy beats a per-block one
# by an order of magnitude at small blocks. vLLM V0 recomputed single sequences and swapped beam groups; V1
# only recomputes, gets part of it back from its prefix cache, and uses host memory as an offloaded cache
# tier instead; SGLang retracts and recomputes through its radix tree.
