# %% [markdown]
# # 17 · The KV cache across GPUs
#
# Until now the whole cache lived on one device. Serving engines spread it out in two ways. Tensor
# parallelism splits every layer's heads over GPUs, so each GPU holds some KV heads of every block.
# Prefill/decode disaggregation runs the prompt on one instance and the generation on another, so a finished
# prompt's blocks have to move from one pool to another. After this notebook you can:
#
# - say which KV heads each tensor-parallel rank holds, why every rank uses the same block tables, and how
#   many more sequences fit per rank;
# - run decode attention on two processes with `torch.distributed` and check it against one process;
# - move one sequence between two pools (gather by table, allocate on the receiver, scatter, new table),
#   with prefix blocks the receiver already holds and a receiver whose pool is full;
# - stream the K/V layer by layer while the prefill runs, and convert between block layouts;
# - decide from link bandwidths and FLOP rates when moving K/V beats recomputing it.

# %% [markdown]
# ## Self-test
#
# 1. A model has 8 query heads and 4 KV heads. At tensor-parallel size 2, which heads does rank 1 compute
#    and hold? At size 8?
# 2. Why do all the ranks of a tensor-parallel group use the same block tables and slot mappings?
# 3. A prefill instance holds a 10-token sequence (block size 4) in its blocks `[5, 1, 6]`. The decode
#    instance already holds the first block (its block 3), and its free queue starts `[6, 2]`. Which blocks
#    move, where do they land, and what is the decode side's table?
# 4. The decode instance has 2 free blocks and the transfer needs 3. What should happen, on each side?
# 5. Per token of context, which cost grows with the context length: moving the K/V, or recomputing them?
#
# <details><summary>Answer</summary>
#
# 1. At size 2, rank 1 computes query heads 4-7, which read KV heads 2 and 3 (head h reads h // 2); its
#    cache holds those two heads of every block. At size 8 each rank computes one query head and holds the
#    one KV head it reads: each KV head is held by two ranks (replicated), so the per-rank cache stops
#    shrinking at size 4.
# 2. One scheduler and one block manager decide for the whole group. A block id names the same token
#    positions on every rank; each rank's cache just holds fewer heads of each block. Only the K/V bytes are
#    split, never the bookkeeping.
# 3. Logical blocks 1 and 2 (the sender's blocks 1 and 6) move into the receiver's blocks 6 and 2, in that
#    order. The receiver's table is `[3, 6, 2]` and its block 3 gains a reference. The receiver's block 6
#    has nothing to do with the sender's block 6: ids never cross instances.
# 4. Nothing moves and nothing changes on the decode side (like `allocate`, it refuses as a whole). The
#    prefill side keeps its blocks until the decode side can take them, or until a timeout; after that it
#    frees them and the request must be prefilled again.
# 5. Recomputing. Each new token of a prefill attends to every token before it, so its cost per token grows
#    with the context, while the bytes per token to move stay the same. Long prompts favour moving them.
#
# </details>

# %% [markdown]
# ## 1. Tensor parallelism splits the KV heads
#
# With tensor parallelism of size tp, rank r computes a contiguous H / tp of the query heads and keeps the
# K/V of the KV heads they read (query head h reads KV head h // G). Its cache is `[2, L, N, S, H_kv / tp, D]`
# with the same blocks and the same block tables as every other rank: a slice of the heads. When H_kv < tp
# there is no KV head to spare: each rank keeps one, and each KV head lives on tp / H_kv ranks. vLLM does the
# same (`max(1, H_kv // tp)` KV heads per GPU).
#
# ```
# H = 8, H_kv = 4, tp = 2                 H = 8, H_kv = 1 (MQA), tp = 2
# rank 0: q 0-3 -> kv 0, 1                rank 0: q 0-3 -> kv 0
# rank 1: q 4-7 -> kv 2, 3                rank 1: q 4-7 -> kv 0   (replicated)
# both ranks: block table [7, 2, 5]       both ranks: block table [7, 2, 5]
# ```

# %%
from pagedkv_lib.distributed.tp_shard import kv_head_ids, kv_replicas, query_head_ids

for H, H_kv, tp in [(8, 4, 2), (8, 1, 2), (32, 8, 4), (32, 4, 8)]:
    q = [query_head_ids(r, H, tp) for r in range(min(tp, 4))]
    ranks = [f"r{r}: q {q[r][0]}-{q[r][-1]} kv {kv_head_ids(r, H_kv, tp)}" for r in range(len(q))]
    more = "; ..." if tp > 4 else ""
    where = f"a KV head on {kv_replicas(H_kv, tp)} rank(s)"
    print(f"H={H:2d} H_kv={H_kv} tp={tp}: {'; '.join(ranks)}{more} ({where})")

# %% [markdown]
# Each rank stores 1 / tp of each token's K/V, so the sequences that fit a rank's KV memory grow with tp,
# until tp reaches H_kv. Below: KV bytes per token per rank, and how many 4,096-token sequences fit in
# 40 GiB of KV memory per GPU at block size 16 (notebook 01's arithmetic; the weights shrink with tp too,
# which frees even more memory, not counted here). A tp that does not divide the query heads is not a
# valid split (vLLM refuses it too): `-`.

# %%
from pagedkv_lib.distributed.tp_shard import kv_heads_per_rank
from pagedkv_lib.studies.memory import MODELS, GiB, kv_bytes_per_token, paged_concurrency
from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES


def per_rank_bytes(kv, tp):  # KV bytes per token on one rank
    heads = kv_heads_per_rank(kv.num_kv_heads, tp)
    return kv_bytes_per_token(kv.num_layers, heads, kv.head_dim, kv.dtype_bytes)


print(f"{'model':11s} {'H':>3s} {'H_kv':>4s}  " + "  ".join(f"{'tp=' + str(tp):>18s}" for tp in (1, 2, 4, 8)))
for shape in PREFILL_SHAPES.values():
    cells = [f"{per_rank_bytes(shape.kv, tp) // 1024:4d} KiB "
             f"{paged_concurrency(40 * GiB, 4096, 16, per_rank_bytes(shape.kv, tp)):5d} seqs"
             if shape.num_heads % tp == 0 else "-" for tp in (1, 2, 4, 8)]
    row = "  ".join(f"{c:>18s}" for c in cells)
    print(f"{shape.name:11s} {shape.num_heads:3d} {shape.kv.num_kv_heads:4d}  {row}")
kv4 = PREFILL_SHAPES["Qwen2.5-7B"].kv
gqa4 = [paged_concurrency(40 * GiB, 4096, 16, per_rank_bytes(kv4, tp)) for tp in (4, 8)]
print(f"Qwen2.5-7B's cache (4 KV heads): {gqa4[0]} sequences per rank at tp 4; a model with this cache and "
      f"32 query heads still fits {gqa4[1]} at tp 8, each KV head on {kv_replicas(4, 8)} ranks")

# %% [markdown]
# ## 2. Decode attention on two processes
#
# `launch_ranks(program, world_size=2, ...)` starts two Python processes that form one `torch.distributed`
# group: `gloo` on a CPU, `nccl` when each rank has a GPU. In each, `tp_decode_rank` builds the same batch
# from the same seed (the scheduler's metadata is replicated, section 1), keeps its shard of the cache,
# runs the course's paged decode attention with its query heads, and all-gathers the outputs along the
# heads. Rank 0 sends the gathered `[B, H, D]` back; this process compares it with the independent
# reference, float64 SDPA on contiguous K/V (caches hold NaN outside every context, as usual).

# %%
import torch

from pagedkv_lib.distributed.rank_launcher import launch_ranks
from pagedkv_lib.distributed.tp_decode import tp_decode_rank
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

seq_lens, S, H, D = [37, 5, 64], 4, 8, 16
runs = launch_ranks(tp_decode_rank, world_size=2, timeout_s=120, seq_lens=seq_lens, block_size=S, num_heads=H,
                    kv_head_counts=[4, 1], head_dim=D, batch_seed=0)
for rank0, rank1 in zip(*runs):
    H_kv = rank0["num_kv_heads"]
    reference = sdpa_batch(make_paged_batch(seq_lens, S, H, H_kv, D, seed=0))  # [B, H, D] float64
    err = (torch.tensor(rank0["out"], dtype=torch.float64) - reference).abs().max().item()
    shards = [f"rank {r['rank']} q {r['query_heads']} kv {r['kv_heads']} shard {r['shard_shape']}"
              for r in (rank0, rank1)]
    print(f"H_kv={H_kv} on {rank0['backend']}: " + "; ".join(shards))
    print(f"   gathered output equals one process's fp64 reference (max |error| < 1e-5): {err < 1e-5}")

# %% [markdown]
# In a model the gathered output is never built: the output projection is split by its input rows, each
# rank multiplies its heads' part, and one all-reduce sums the partial results. The cache side is what
# matters here: no K/V crossed between the ranks, only the attention outputs.
#
# ## 3. One sequence from one pool to another
#
# Two instances never share block ids. Moving a sequence from a prefill instance to a decode instance is
# four steps, whatever carries the bytes:
#
# ```
# sender (prefill)                         receiver (decode), already holds logical block 0 in its block 3
# table [5, 1, 6, -1]
# gather logical blocks 1, 2 = blocks 1, 6
#   [2, L, 2, S, H_kv, D] (K and V, all layers)  ->  allocate 2 from ITS pool: [6, 2]
#                                                   scatter: first -> 6, second -> 2; block 3 gets a reference
#                                                   table [3, 6, 2]
# ```
#
# The receiver skips the blocks it already holds (a prefix-cache hit: full blocks only), and it refuses
# before anything moves when its pool is short: `None`, nothing changed, the rule of `BlockPool.allocate`.
# Here both sides live in one process, `kv_transfer.transfer_kv` does the four steps, and the check reads the
# sequence back through each side's table.

# %%
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.kv_cache import allocate_kv_cache, gather_kv
from pagedkv_lib.distributed import kv_transfer

L, S, H_kv, D, num_tokens = 2, 4, 2, 2, 10
src = allocate_kv_cache(L, 8, S, H_kv, D, fill=float("nan"))  # [2, L, 8, S, H_kv, D] the sender's cache
src_table = [5, 1, 6, -1]
src[:, :, [5, 1, 6]] = torch.randn(2, L, 3, S, H_kv, D, generator=torch.Generator().manual_seed(0))
dst = allocate_kv_cache(L, 8, S, H_kv, D, fill=0.0)  # [2, L, 8, S, H_kv, D] the receiver's cache
dst_pool = BlockPool(8)
dst_pool.allocate(8)
dst_pool.free([6, 2, 0, 7])  # other sequences hold 1, 3, 4, 5; the free queue is [6, 2, 0, 7]
dst[:, :, 3] = src[:, :, 5]  # the receiver computed the same first block earlier (a prefix hit)
table = kv_transfer.transfer_kv(src, src_table, num_tokens, dst_pool, dst, [3])
print("receiver's table", table, "| refs", [dst_pool.ref_count(b) for b in range(8)], "| free queue",
      list(dst_pool.free_block_ids))
same = all(torch.equal(gather_kv(src[kv, layer], src_table, num_tokens),
                       gather_kv(dst[kv, layer], table, num_tokens)) for kv in range(2) for layer in range(L))
print(f"both sides read the same {num_tokens} tokens through their own tables, K and V, every layer: {same}")

# %% [markdown]
# A second sequence of 13 tokens needs more blocks than the receiver has free. The transfer is refused as a
# whole:

# %%
before = ([dst_pool.ref_count(b) for b in range(8)], list(dst_pool.free_block_ids), dst.clone())
src[:, :, [0, 2, 3, 4]] = 1.0
print(f"needs {kv_transfer.num_blocks_to_send(13, S)} blocks, {dst_pool.num_free()} free")
refused = kv_transfer.transfer_kv(src, [0, 2, 3, 4], 13, dst_pool, dst, [])
after = ([dst_pool.ref_count(b) for b in range(8)], list(dst_pool.free_block_ids))
print("returned", refused, "| pool unchanged:", after == before[:2], "| cache unchanged:",
      torch.equal(dst, before[2]))

# %% [markdown]
# ## 4. Two block layouts
#
# The course keeps `[N, S, H_kv, D]` per layer (FlashInfer calls it NHD); FlashInfer's HND and the layout
# vLLM's NIXL connector asks for are `[N, H_kv, S, D]`. Same bytes, another order:
#
# ```
# NHD block: t0[h0 h1] t1[h0 h1] t2[h0 h1] t3[h0 h1]     HND block: h0[t0 t1 t2 t3] h1[t0 t1 t2 t3]
# ```
#
# It matters when the two sides shard heads differently. A decode instance at tp 2 fed by a prefill
# instance at tp 1 reads, on each rank, half the heads of every block: one contiguous piece per block in
# HND, one piece per token in NHD. When layouts differ, one side converts the blocks it sends or receives.

# %%
from pagedkv_lib.distributed.block_layout import convert_layout, head_runs

blocks = kv_transfer.gather_blocks(src, src_table, num_tokens)  # [2, L, 3, S, H_kv, D] NHD
hnd = convert_layout(blocks, "NHD", "HND")  # [2, L, 3, H_kv, S, D]
print("NHD", list(blocks.shape), "-> HND", list(hnd.shape), "-> back, unchanged:",
      torch.equal(convert_layout(hnd, "HND", "NHD"), blocks))
for tp in (1, 2, 4):
    heads = kv_head_ids(1 % tp, 8, tp)
    print(f"decode rank at tp {tp} reads KV heads {heads[0]}-{heads[-1]} of 8 from each 16-token block: "
          f"{head_runs('NHD', 16, 8, heads):2d} piece(s) in NHD, {head_runs('HND', 16, 8, heads)} in HND")

# %% [markdown]
# ## 5. Prefill in one process, decode in another
#
# Now the real thing, with two processes and the mini engine of notebook 14 on each (same weights, own
# pools, own caches). The decode instance served the same 20-token system prompt earlier, so it holds its
# two full blocks (block size 8); another request is running on it and holds most of its pool. One request
# of 45 tokens goes like this (`transfer_message.py` declares each message):
#
# ```
# P -> D  header: request 1, its length, the cache shape     D checks the shapes match
# D -> P  refused: D needs n blocks, fewer are free           P keeps its blocks and waits
#         (the running request on D finishes)
# D -> P  accepted, D holds k prefix blocks                   D allocated its n blocks BEFORE replying
# P       prefill; per layer, the K/V of blocks k.. go to D ([2, n, S, H_kv, D] each), D scatters them
# P -> D  done: the first token                               both decode 8 tokens greedily
# ```
#
# It runs twice: sending after the whole prefill (vLLM's NIXL connector reads when the prefill is done),
# and sending layer l as soon as layer l is computed (LMCache's `use_layerwise`; vLLM's connector API calls
# `save_kv_layer` from each attention layer for this), so the transfer overlaps the next layers' compute.

# %%
import random

from pagedkv_lib.distributed.disaggregation import prefill_decode_rank
from pagedkv_lib.engine import ModelConfig, Qwen3ForCausalLM, greedy_reference

rng = random.Random(0)
prompt = [rng.randrange(512) for _ in range(45)]
prefill_side, decode_side = launch_ranks(
    prefill_decode_rank, world_size=2, timeout_s=120, prompt=prompt, system_len=20, max_tokens=8,
    block_size=8, num_blocks=16, prefill_busy_blocks=3, decode_busy_blocks=10)
print("\n".join(prefill_side[0]["events"] + decode_side[0]["events"]))
reference = greedy_reference(Qwen3ForCausalLM(ModelConfig(seed=0)), prompt, 8)
for p, d in zip(prefill_side, decode_side):
    print(f"{p['mode']:9s}: P {p['table']} -> D {d['table']}, {d['num_blocks_received']} blocks, "
          f"{d['bytes_received']:,} bytes; tokens P {p['tokens']}")
    print(f"{'':11s}D decodes the same tokens: {d['tokens'] == p['tokens']}; "
          f"equal to the no-cache reference: {d['tokens'] == reference}")

# %% [markdown]
# How much of the transfer is left when the prefill ends, in each mode: the time from the end of P's prefill
# to the moment D has scattered the last layer (one monotonic clock, both processes on this machine). Sent
# after the prefill, the whole transfer is left; sent layer by layer, at most about the last layer's (the
# prefill still computes the logits after its last layer, so it can even be done before).

# %%
# NBVAL_IGNORE_OUTPUT
# (times depend on the machine and its load)
for p, d in zip(prefill_side, decode_side):
    left = 1e3 * (d["received"] - p["prefill_end"])
    print(f"{p['mode']:9s}: prefill {1e3 * (p['prefill_end'] - p['prefill_start']):6.2f} ms, all K/V on D "
          f"{abs(left):5.2f} ms {'after' if left >= 0 else 'before'} the prefill ended")

# %% [markdown]
# ## 6. Measured on this machine: moving vs recomputing
#
# The same two processes, timing both ways for the decode side to get a context's K/V: receive it from rank
# 0 (gather, the wire, scatter) or prefill it again itself. The mini engine's model stores little K/V per
# token next to what a real model does; the next cell prints how little.

# %%
m = ModelConfig()
tiny = kv_bytes_per_token(m.num_hidden_layers, m.num_key_value_heads, m.head_dim, 4)
print(f"mini engine model: {tiny:,} bytes of K/V per token (fp32); LLaMA-2-7B: "
      f"{MODELS['LLaMA-2-7B'].bytes_per_token:,} (fp16)")

# %%
# NBVAL_IGNORE_OUTPUT
# (times depend on the machine and its load)
import matplotlib.pyplot as plt

from pagedkv_lib.distributed.transfer_timing import transfer_timing_rank
from pagedkv_lib.viz.transfer_plots import draw_measured

_, timing = launch_ranks(transfer_timing_rank, world_size=2, timeout_s=120, context_lens=[32, 128, 512],
                         block_size=16, repeats=3)
print(f"over {timing['backend']}:  context  bytes moved  transfer us/token  recompute us/token")
for r in timing["rows"]:
    print(f"{r['context_len']:25d} {r['bytes']:12,d} {1e6 * r['transfer_s'] / r['context_len']:18.2f} "
          f"{1e6 * r['recompute_s'] / r['context_len']:19.2f}")
fig, ax = plt.subplots(figsize=(6, 3), dpi=80)
draw_measured(ax, timing["rows"])
ax.set_title("two processes on this machine: transfer vs recompute")
plt.show()

# %% [markdown]
# On a CPU the prefill is slow and the loopback fast, so moving should win by a wide margin (the table says
# by how much on this machine). GPUs change both sides: the prefill runs at hundreds of TFLOP/s, and the K/V
# crosses NVLink, PCIe or a network.
#
# ## 7. The crossover on GPUs
#
# For a prompt of n tokens, moving costs `n x bytes_per_token / bandwidth`; recomputing costs a prefill,
# `2 x P x n` FLOPs in the weights plus `2 x L x H x D x n^2` in causal attention (P the non-embedding
# parameters). The rates are the course's own H200 runs (`benchmarks/results/bench_prefill.json`: dense
# bf16 matmul, and the best causal prefill attention), a floor for a real prefill, so the figures favour
# recomputing; link peaks favour moving. The links, per direction at their peaks (the cell prints the rates):
# NVLink 4 (900 GB/s both ways on H100 / H200 SXM: NVIDIA's H200 specification, and MLCommons' description
# of NVIDIA's H200 system), PCIe 5.0 x16 (32 GT/s x 16 lanes, 128b/130b encoding), InfiniBand NDR (400 Gb/s
# per port) and 100 Gb/s Ethernet. `pagedkv_lib/studies/transfer_cost.py` names each source.

# %%
from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, load_cost_model
from pagedkv_lib.studies.transfer_cost import LINKS, transfer_table

h200 = load_cost_model(link="nominal")
print(f"H200 rates: dense bf16 matmul {h200.matmul_tflops:.0f} TFLOP/s, causal prefill attention "
      f"{h200.attention_tflops:.0f} TFLOP/s")
print("links, one direction (both ways): " + ", ".join(f"{link.name} {link.gbs:.1f} GB/s ({2 * link.gbs:.0f})"
                                                       for link in LINKS))
print(transfer_table(h200))

# %% [markdown]
# The same numbers as a picture: for each model, the link bandwidth at which moving a prompt's K/V costs
# what recomputing it does, by context length. A link above a model's curve moves the K/V faster than the
# decode GPU can recompute it; the dots mark where a link crosses a curve.

# %%
from pagedkv_lib.viz.transfer_plots import draw_break_even

fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=80)
crossings = draw_break_even(ax, h200, list(PREFILL_SHAPES.values()), [2**i for i in range(7, 18)])
ax.set_title("move or recompute on an H200: break-even link bandwidth")
plt.show()
small = PREFILL_SHAPES["Qwen3-0.6B"]
print(f"Qwen3-0.6B: {small.kv.bytes_per_token // 1024} KiB of K/V per token for "
      f"{small.non_embedding_params / 1e9:.2f} B parameters; over PCIe 5.0 moving wins above "
      f"{crossings[('Qwen3-0.6B', 'PCIe 5.0 x16')]:,.0f} tokens")

# %% [markdown]
# Two things decide it: the K/V bytes per FLOP of the model, and the link. A 7B model with GQA
# (Qwen2.5-7B, 4 KV heads) is always cheaper to move, even over 100 Gb/s Ethernet; a small model with many
# wide KV heads (Qwen3-0.6B) is cheap to recompute, so short prompts stay on the decode side unless NVLink
# connects the instances. This is why disaggregated deployments put prefill and decode on RDMA or NVLink and
# keep K/V in bf16 or fp8 (half the bytes, notebook 13).
#
# ## 8. NCCL on GPUs
#
# Nothing in sections 2, 5 and 6 is CPU-specific: `launch_ranks` picks `nccl` when there is a GPU per rank,
# each rank moves its tensors to `cuda:<rank>`, and the same `send` / `recv` / `all_gather` run over NVLink
# or PCIe. On a machine with two GPUs, `benchmarks/bench_kv_transfer.py` runs the three experiments there,
# with longer contexts, and checks them against the same references. The next cell says what this machine
# would use.

# %%
# NBVAL_IGNORE_OUTPUT
# (depends on the machine's GPUs)
from pagedkv_lib.distributed.rank_launcher import choose_backend

print(f"{torch.cuda.device_count()} CUDA GPU(s): two ranks run on {choose_backend(2)}")

# %% [markdown]
# The connectors in production use one-sided transfers instead of `send` / `recv` pairs: vLLM's NIXL
# connector has the decode side READ the prefill side's registered blocks, SGLang's prefill side WRITEs into
# the blocks the decode side pre-allocated (both over RDMA through NIXL or Mooncake's transfer engine), so
# one side runs no receiving code at all and the bytes go NIC to NIC (GPUDirect RDMA). The bookkeeping stays
# what section 3 shows.
#
# ## Exercises
#
# **137 · KV transfer between instances · medium.** In `practice/137_kv_transfer.py`, write
# `transfer_kv(src_kv_cache, src_block_table, num_tokens, dst_pool, dst_kv_cache, dst_prefix_table)`, the four
# steps of section 3 in one process: the blocks after the receiver's prefix, gathered through the sender's
# table (its -1 padding names no block, its last block may be partial), the receiver's own blocks from
# `dst_pool.allocate`, the scatter in table order (K and V, every layer), one more reference on each prefix
# block, and the new table; `None` and nothing changed when the receiver's pool is short. The judge compares
# the table, every ref count, the free queue and the receiver's whole cache, on random pools, block sizes 1,
# 4, 5 and 16, ragged lengths and prefixes. Grade it with
#
#     python practice/judge.py 137
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(137)` grades the
# `transfer_kv` defined in this notebook on the same hidden cases. As stored here, the stub is graded "not
# implemented".

# %%
from pagedkv_lib.judge import judge


def transfer_kv(src_kv_cache, src_block_table, num_tokens, dst_pool, dst_kv_cache, dst_prefix_table):
    raise NotImplementedError  # your code here (contract: practice/137_kv_transfer.py)


result = judge(137)

# %% [markdown]
# Once your version passes, `show_reference(137)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(137)

# %% [markdown]
# ## In real systems
#
# - **vLLM's KV connector API**
#   (`vllm-project/vllm@003df29:vllm/distributed/kv_transfer/kv_connector/v1/base.py`): one
#   `KVConnectorBase_V1` subclass, instantiated once per role (`KVConnectorRole.SCHEDULER`, `.WORKER`). The
#   scheduler side decides which blocks: `get_num_new_matched_tokens(request, num_computed_tokens)` (how
#   many tokens past the local prefix hit can be loaded, and whether asynchronously),
#   `update_state_after_alloc(request, blocks, num_external_tokens)` (the blocks just allocated for them),
#   `build_connector_meta(scheduler_output)` (this step's work for the workers), and
#   `request_finished(request, block_ids)` (may keep the blocks alive while they are sent, and returns the
#   `kv_transfer_params` the other instance needs). The worker side moves bytes: `register_kv_caches`,
#   `start_load_kv`, `wait_for_layer_load(layer_name)`, `save_kv_layer(layer_name, kv_layer, attn_metadata)`,
#   `wait_for_save`, `get_finished`. Section 3's split exactly: ids on the scheduler, gather and scatter on
#   the workers.
# - **vLLM's NIXL connector**
#   (`vllm-project/vllm@002a105:vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`): the decode
#   side pulls. The prefill side's `request_finished` delays freeing the blocks and returns
#   `remote_block_ids` with its host and port; the decode side allocates its own blocks and `_read_blocks`
#   reads only `remote_block_ids[-num_local_blocks:]` ("Partial prefix cache hit: just read uncomputed
#   blocks"); with a full hit it only notifies the prefill side, which frees its blocks then, or after
#   `VLLM_NIXL_ABORT_REQUEST_TIMEOUT`. It asks for the HND layout (`get_required_kvcache_layout`), does not
#   save per layer (`save_kv_layer` is empty), and a failed read marks the local blocks invalid
#   (`_handle_failed_transfer`) so they are recomputed.
# - **NIXL** (`ai-dynamo/nixl@8770b65:docs/nixl.md`, `ai-dynamo/nixl@8770b65:src/api/python/_api.py`):
#   NVIDIA's point-to-point transfer library under Dynamo and the connector above. An agent registers memory
#   (`register_memory`: HBM, DRAM, files, object stores), exchanges metadata with its peers
#   (`get_agent_metadata`, `add_remote_agent`), and posts one-sided READ or WRITE transfers of descriptor
#   lists (`get_xfer_descs`, `initialize_xfer`, `transfer`, `check_xfer_state`) over UCX (RDMA, NVLink), GDS
#   and other backends.
# - **Mooncake** (`kvcache-ai/Mooncake@3b5a594:docs/source/design/transfer-engine/index.md`,
#   `kvcache-ai/Mooncake@3b5a594:mooncake-transfer-engine/include/transfer_engine.h`): its transfer engine
#   moves batches between registered segments (`openSegment`, `registerLocalMemory`, `submitTransfer`) over
#   TCP, RDMA (several NICs, topology-aware paths), NVLink or NVMe-oF. What it adds is Mooncake Store
#   (`kvcache-ai/Mooncake@3b5a594:docs/source/design/store/mooncake-store.md`): a distributed KV cache of
#   objects (`Put`, `Get`, `Remove`), a master service allocating space across the clients' memory,
#   replicas, and offloading to SSD. The prefill side puts, the decode side gets, and the K/V outlives both.
# - **LMCache** (`LMCache/LMCache@000620e:lmcache/v1/cache_engine.py`): `LMCacheEngine.store` copies K/V out
#   of the engine's paged GPU buffer into CPU memory objects keyed by hashes of token chunks, and `retrieve`
#   copies them back; the objects live in tiers: local CPU memory
#   (`LMCache/LMCache@538a999:lmcache/v1/storage_backend/local_cpu_backend.py`), local disk
#   (`local_disk_backend.py`), and remote stores (`storage_backend/connector/`: Redis, Mooncake Store, S3,
#   ...), optionally layer by layer (`use_layerwise`). A prefix hit can then come from any instance's past
#   work, not only from the paired prefill instance.
# - **SGLang** (`sgl-project/sglang@0035ca4:python/sglang/srt/disaggregation/decode.py`): the decode side's
#   request goes through a `PreallocQueue` (handshake, then KV pre-allocated once there is room), a
#   `TransferQueue` (polled until the transfer finishes), a waiting queue that skips the prefill, and the
#   running batch. Its transfer API
#   (`sgl-project/sglang@0094505:python/sglang/srt/disaggregation/base/conn.py`) is
#   `BaseKVSender.send(kv_indices)`, `BaseKVReceiver.send_metadata(kv_indices, ..., decode_prefix_len)` and
#   `KVPoll` states: the decode side pre-allocates and tells the prefill side where to write (the Mooncake
#   backend's `send_kvcache(..., prefill_kv_indices, dst_kv_ptrs, dst_kv_indices, ...)` writes there), so a
#   full decode pool holds the request in `PreallocQueue`, section 5's refusal.
# - **Tensor parallelism in vLLM** (`vllm-project/vllm@18ec662:vllm/config/model.py`, `get_num_kv_heads`):
#   `max(1, total_num_kv_heads // tensor_parallel_size)` KV heads per GPU, "replicate the KV heads in the
#   case where the number of KV heads is smaller than the tensor parallel size".
#
# ## Say it in the interview
#
# Tensor parallelism splits attention by heads: each rank computes H / tp query heads and stores the K/V of
# the KV heads those read, for every block, so its cache is 1 / tp of the bytes while the block tables and
# slot mappings are the same on every rank, because one scheduler runs for the group. Below H_kv = tp the
# heads are replicated and the per-rank cache stops shrinking. With prefill/decode disaggregation a prompt's
# K/V moves between instances that each own a pool, so ids never cross: the decode side's scheduler
# allocates its own blocks, minus those its prefix cache already has, or refuses when its pool is short, in
# which case the prefill side keeps its blocks until a timeout; the workers then gather by the sender's
# table and scatter into the receiver's blocks in table order, K and V of every layer, and the receiver
# builds its own table. Real connectors do this with one-sided RDMA reads or writes (NIXL, Mooncake), in
# HND layout when tensor-parallel sizes differ, and can stream per layer behind the prefill. Whether to move
# or recompute depends on bytes per token against FLOPs per token: for 7B GQA models moving wins over any
# datacenter link; for small models with wide KV, short prompts are cheaper to recompute.
