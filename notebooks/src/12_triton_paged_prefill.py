# %% [markdown]
# # 12 · Triton: paged prefill attention
#
# Notebook 05 computed one step of a mixed batch (decodes, full prefills, chunks of prefills) in PyTorch,
# sequence by sequence. Notebook 11 wrote decode as a Triton kernel. Prefill needs its own kernel: each
# sequence brings many queries, and the causal mask is no longer a single row. After this notebook you can
# say how a paged prefill kernel tiles its work over (query block, KV head), why the mask of a chunk is
# aligned to the bottom right, which key tiles a query tile never loads, how a program finds its sequence in
# a flat batch without asking the host, and why prefill is bound by arithmetic where decode is bound by
# memory: both on one roofline.


# %% [markdown]
# ## Self-test
#
# 1. A chunked prefill: seq_len 20, q_len 8 (the last 8 tokens are new). Which keys does query 0 see, and
#    query 7?
# 2. Why not reuse the decode grid, one program per (sequence, KV head), for a 2,048-token prompt?
# 3. H = 32, H_kv = 8, a tile of BLOCK_M = 128 rows: how many query tokens does it hold, and what does packing
#    the heads buy?
# 4. Decode does about 4 FLOPs per byte it reads, a 2,048-token prefill about 800. An H200 does about 680
#    TFLOP/s of dense bf16 matmul and copies about 4.3 TB/s. Which of the two is bound by memory?
# 5. A batch of 3 sequences has T = 70 query rows and tiles of BLOCK_Q = 16 queries that never mix
#    sequences. Without reading the lengths on the host, how many tiles must the grid hold?
#
# <details><summary>Answer</summary>
#
# 1. The queries sit at positions 12..19. Query 0 sees keys 0..12, query 7 all 20 (0..19).
# 2. That program would hold all 2,048 x 4 query rows at once (far too many registers) and walk the
#    context alone: 8 programs for 132 SMs. Prefill tiles its queries: one program per block of queries and
#    KV head.
# 3. 128 / G = 32 query tokens, each with its G = 4 heads. Each K/V tile is loaded once for the 4 heads of
#    its KV head, and the 128-row `tl.dot` keeps the tensor cores busy.
# 4. Decode. The ridge is about 680e12 / 4.3e12 = 160 FLOPs per byte: below it a kernel waits for memory,
#    above it for arithmetic. Decode (4) is far below, prefill (800) far above.
# 5. T // 16 + B = 4 + 3 = 7: each sequence adds at most one partial tile. Surplus programs return at once.
#
# </details>

# %% [markdown]
# ## 1. A mixed batch, flattened
#
# The batch of notebook 05: a decode (context 37, 1 new token), a full prefill (5 of 5) and the second half of
# a chunked prefill (the last 8 of 20). Their query rows lie one after another in `q [T, H, D]`, T = 14, and
# `cu_seqlens_q` says where each sequence's rows start. New tokens are the LAST tokens of each context, so
# query i of a sequence sits at position `seq_len - q_len + i` and sees keys `0 .. seq_len - q_len + i`:

# %%
import torch

import pagedkv_lib as pk
from pagedkv_lib.kernels import backend  # first: chooses the interpreter on a CPU, before any kernel
from pagedkv_lib.kernels import triton_prefill_attention as kp

seq_lens, q_lens = [37, 5, 20], [1, 5, 8]
cu = [0]
for n in q_lens:
    cu.append(cu[-1] + n)
print("cu_seqlens_q =", cu)
for b, (n, t) in enumerate(zip(seq_lens, q_lens)):
    rows = range(cu[b], cu[b + 1])
    print(f"sequence {b}: rows {rows.start}..{rows.stop - 1}, positions {n - t}..{n - 1}, "
          f"row {rows.start} sees keys 0..{n - t}, row {rows.stop - 1} sees keys 0..{n - 1}")

# %% [markdown]
# ## 2. The causal offset, drawn
#
# For a full prefill (q_len = seq_len) the mask is the familiar lower triangle. For a chunk it is the same
# triangle shifted right by the `ctx = seq_len - q_len` cached tokens: aligned to the BOTTOM RIGHT of the
# `[q_len, seq_len]` score matrix (FlashAttention calls it that; PyTorch's `causal_lower_right`). A kernel
# that aligns it to the top left, query i seeing keys 0..i, is right for every full prefill and wrong for
# every chunk and every decode row: the classic bug of a first prefill kernel.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.viz import prefill_tiles

fig, axes = plt.subplots(1, 2, figsize=(8, 2.6), dpi=80)
prefill_tiles.plot_causal_offset(20, 8, axes=axes)
plt.show()
right, wrong = prefill_tiles.causal_mask(20, 8), prefill_tiles.causal_mask(20, 8, bottom_right=False)
print("keys seen by each query, bottom right:", right.sum(1).tolist(), " top left:", wrong.sum(1).tolist())

# %% [markdown]
# ## 3. Tiles over (query block, KV head)
#
# A program owns a tile of `BLOCK_M` rows: `BLOCK_Q = BLOCK_M // G` consecutive queries of one sequence, each
# with the G query heads of one KV head (GQA packed into the rows, as vLLM's unified kernel does). It loads
# its `[BLOCK_M, D]` block of q once, then walks the sequence's keys in tiles of `BLOCK_N`: look up each key's
# block in the table, load the `[BLOCK_N, D]` K and V rows of its KV head, one `tl.dot` for the scores, the
# online softmax of notebook 11 per row, one `tl.dot` for the values. Both dots follow the course's dot rule
# (notebook 09, section 7): every dimension (M, N and K) of every tl.dot is at least 16: what every supported
# Triton (3.0 to 3.9) compiles on a GPU; pad the tile (BLOCK = max(16, next power of two)) and mask the
# padding. The rows are token-major:

# %%
G, BLOCK_M = 4, 16  # H = 8 query heads over H_kv = 2 KV heads; a small tile
BLOCK_Q = BLOCK_M // G
q0, kv_head = 4, 1  # the tile of queries 4..7, KV head 1
for r in range(BLOCK_M):
    token, head = q0 + r // G, kv_head * G + r % G
    print(f"row {r:2d}: query {token}, head {head}", end="   |   " if r % G < G - 1 else "\n")
print(f"each K/V tile is loaded once for these {BLOCK_M} rows, not once per query head")

# %% [markdown]
# ## 4. Which key tiles a query tile loads
#
# Query tile `[q0, q0 + BLOCK_Q)` needs keys up to its last query's position. Key tiles entirely at or below
# its FIRST query's position are visible to every row: no mask at all (the fast loop). Tiles that cross the
# diagonal need the causal mask (and the context-length mask). Tiles above it are never loaded: a causal
# prefill does about half the work of a full one. A chunk of 96 new tokens after 64 cached ones, tiles of 32:

# %%
fig, ax = plt.subplots(figsize=(7, 2.8), dpi=80)
prefill_tiles.plot_tile_grid(160, 96, 32, 32, ax=ax)
plt.show()
from pagedkv_lib.kernels.triton_prefill_attention import BF16_PREFILL_TILES

block_m, block_n, warps, stages = BF16_PREFILL_TILES  # the library's default tiles on the H200
print(f"default tiles: {block_m} x {block_n} ({block_m // 4} queries x 4 heads by {block_n} keys), "
      f"{warps} warps, {stages} stages")
for name, n, t in (("cold 8 x 2048", 2048, 2048), ("chunked 2048 + 512", 2560, 512)):
    kinds = prefill_tiles.tile_kinds(n, t, block_m // 4, block_n)
    loaded = int((kinds != prefill_tiles.SKIPPED).sum())
    print(f"{name}: {loaded} of {kinds.size} (query, key) tiles loaded per KV head and sequence, "
          f"{int((kinds == prefill_tiles.DIAGONAL).sum())} of them masked")

# %% [markdown]
# ## 5. Finding your sequence, without the host
#
# The grid cannot depend on the lengths (reading them back is a sync, and a captured CUDA graph must replay
# with other lengths), so the kernel numbers query tiles over the whole batch: sequence b's tiles start at
# `cu_seqlens_q[b] // BLOCK_Q + b`, which leaves room for each sequence's last partial tile, and
# `T // BLOCK_Q + B` tiles bound them all. A program loads `cu_seqlens_q` as one vector, finds its sequence by
# counting the tile starts at or below its own number, and returns if its tile lies past that sequence's
# queries. Tiles never mix sequences, so rows of one sequence never read another's K/V. With BLOCK_Q = 4:

# %%
BLOCK_Q = 4
starts = [cu[b] // BLOCK_Q + b for b in range(len(q_lens))]
num_tiles = cu[-1] // BLOCK_Q + len(q_lens)
for tile in range(num_tiles):
    b = sum(s <= tile for s in starts) - 1  # the sequence: count the starts <= tile
    q0 = (tile - starts[b]) * BLOCK_Q
    what = f"queries {q0}..{min(q0 + BLOCK_Q, q_lens[b]) - 1}" if q0 < q_lens[b] else "nothing: returns"
    print(f"tile {tile}: sequence {b}, {what}")

# %% [markdown]
# ## 6. Correct, in the interpreter
#
# The library's kernel (`pagedkv_lib.kernels.triton_prefill_attention`) against SDPA in float64 on the
# contiguous K/V that `make_paged_batch` scattered into a NaN-filled cache, on mixed batches (decode rows
# beside full prefills and chunks), at block sizes 1, 4 and 16, with and without GQA, in fp32 and bf16; and
# its decode rows against the decode kernel of notebook 11.

# %%
from pagedkv_lib.viz.attention_plots import error_order

dev = backend.device()
for bs, H, H_kv, dtype in [(1, 4, 4, torch.float32), (4, 8, 2, torch.float32), (16, 8, 2, torch.float32),
                           (16, 8, 1, torch.bfloat16)]:
    batch = pk.make_paged_batch([37, 5, 20, 50], bs, H, H_kv, 16, [1, 5, 8, 33], seed=bs, dtype=dtype,
                                device=dev, extra_padding=2)
    args = (batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, batch.cu_seqlens_q)
    out = kp.paged_attention_varlen_triton(*args, 16**-0.5)  # [T, H, D]
    err = (out.double() - pk.sdpa_batch(batch).to(out.device)).abs().max().item()
    print(f"block size {bs:2d}, H {H} / H_kv {H_kv}, {str(dtype)[6:]:8s}: max |triton - SDPA| "
          f"{error_order(err)}")

# %%
from pagedkv_lib.kernels.triton_decode_attention import paged_attention_decode_triton

batch = pk.make_paged_batch([37, 5, 20], 4, 8, 2, 16, [1, 5, 1], seed=3, device=dev, extra_padding=2)
out = kp.paged_attention_varlen_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                       batch.seq_lens, batch.cu_seqlens_q, 0.25)  # [T, H, D]
rows = torch.tensor([0, 6])  # the two decode rows: sequences 0 and 2
decode = paged_attention_decode_triton(batch.q[rows], batch.k_cache, batch.v_cache,
                                       batch.block_tables[[0, 2]], batch.seq_lens[[0, 2]], 0.25)  # [2, H, D]
print("decode rows through the prefill kernel equal the decode kernel's:",
      torch.allclose(out[rows], decode, atol=1e-6))

# %% [markdown]
# ## 7. Compute-bound and memory-bound, on one roofline
#
# Count what each one does per byte it must move (bf16, H = 32, H_kv = 8, D = 128):
#
# ```
# decode, per context token:  4 x H x D FLOPs (q.k and p.v, every head)  /  2 x H_kv x D x 2 bytes (K, V)
#                             = 4 x 32 / (4 x 8) = 4 FLOPs per byte
# prefill of L new tokens:    4 x H x D x L (L + 1) / 2 FLOPs (each causal pair once)
#                             / (2 x L x H_kv x D x 2 + 2 x L x H x D x 2) bytes (K, V once; q in, out)
#                             ~ L x H / (2 (H + H_kv)) = 819 FLOPs per byte at L = 2048
# ```
#
# Decode reads each K/V byte once per step and does 2G FLOPs per K/V element with it (notebook 04), 4 per byte
# in bf16 with G = 4; prefill reuses every key for thousands of queries. Against the machine's two ceilings,
# arithmetic (a dense bf16 matmul) and memory (a copy), decode sits far left of the ridge and prefill far
# right. Below, each shape at the best it can do (the roof at its intensity); with a final run stored, the
# measured points.

# %%
from pagedkv_lib.studies import results
from pagedkv_lib.viz import roofline

H, H_kv, D = 32, 8, 128
shapes = {  # name: (FLOPs, bytes)
    "decode 64x4096": (4 * 64 * 4096 * H * D, 2 * 64 * 4096 * H_kv * D * 2 + 2 * 64 * H * D * 2),
    "prefill cold 2048": (4 * H * D * 2048 * 2049 // 2, 2 * 2048 * H_kv * D * 2 + 2 * 2048 * H * D * 2)}
prefill_run, decode_run = results.stored("bench_prefill.json"), results.stored("bench_decode.json")
if prefill_run is None:  # ceilings of two measured runs: matmul of the first prefill run, copy of 2026-11-29
    matmul, copy = results.load("first_run/bench_prefill.json")["matmul_tflops"], 4273.0
else:
    matmul, copy = prefill_run["matmul_tflops"], prefill_run["copy_gbs"]
ridge = matmul * 1e12 / (copy * 1e9)
for name, (flops, nbytes) in shapes.items():
    ai = flops / nbytes
    print(f"{name}: {ai:5.0f} FLOPs per byte; at best {min(matmul, ai * copy / 1e3):5.1f} TFLOP/s "
          f"({'memory' if ai < ridge else 'compute'}-bound; ridge {ridge:.0f})")

# %%
if prefill_run is None or decode_run is None:
    points = [dict(kind=name.split()[0], shape=name, intensity=f / b, tflops=min(matmul, f / b * copy / 1e3))
              for name, (f, b) in shapes.items()]
    title, what = "no final run stored yet: each shape at its roof (not measured)", "at its roof"
else:
    points = roofline.attention_points(decode_run, prefill_run)
    title, what = "measured on an H200: decode (Triton v3) and prefill (Triton)", "Triton"
fig, ax = plt.subplots(figsize=(7.5, 4), dpi=80)
roofline.plot_attention_roofline(points, copy, matmul, ax=ax, title=title, what=what)
plt.show()

# %% [markdown]
# ## 8. On a GPU: the prefill kernel against SDPA
#
# `benchmarks/bench_prefill.py` times the kernel on a cold prefill (8 sequences of 2,048 new tokens) and on
# chunks (16 x 512 new tokens after 2,048 cached), against SDPA on contiguous K/V with the same bottom-right
# causal mask: under its default dispatch (the profiler names the backend that ran) and with FLASH,
# EFFICIENT and CUDNN each forced. TFLOP/s count each causal (query, key) pair once; percentages are of the
# fastest SDPA row of the same run. The next cell shows the final run if it is stored, else the first one
# (`results/first_run/`, 2026-11-30: its TFLOP/s and matmul anchor are sound).

# %%
from pagedkv_lib.viz import bench_findings

COLUMNS = ["triton", "sdpa_default", "sdpa_flash", "sdpa_cudnn"]
stored = prefill_run or results.load("first_run/bench_prefill.json")
if prefill_run is None:
    print("No final run stored yet (benchmarks/results/bench_prefill.json). The first run:")
print(roofline.prefill_table(stored, COLUMNS))
print(bench_findings.prefill_findings(stored))
print("\ntargets (benchmarks/results/bench_prefill.txt):")
print(bench_findings.target_verdicts(results.stored_text("bench_prefill.txt")) or "none stored")

# %% [markdown]
# **Beside FlashInfer.** The H100 run that added FlashInfer timed its `BatchPrefillWithPagedKVCacheWrapper`
# on the same paged caches with both of its Hopper backends: `fa2` (FlashAttention-2's design) and `fa3`
# (FlashAttention-3's: warp-specialised producer and consumer warps, TMA loads, the softmax of one tile
# overlapped with the matrix products of the next). The course's kernel, SDPA's default dispatch and vLLM's
# own Triton kernel (`vllm_unified`) beside them, one process per shape:

# %%
fi_prefill = results.stored("flashinfer_run5/bench_prefill.json")
print(bench_findings.flashinfer_table(fi_prefill, ("triton", "sdpa_default", "vllm_unified"),
                                      ("flashinfer_fa2", "flashinfer_fa3"))
      if fi_prefill else "no FlashInfer run stored (benchmarks/results/flashinfer_run5/)")

# %% [markdown]
# Compute-bound, as the roofline says: the kernel runs well below the dense matmul's rate (the end of each
# bullet), with the online softmax's exponentials and the masked diagonal tiles taking the rest. The tile
# sweep of 2026-12-01 chose the default tiles printed above (the best worst case over the measured shapes);
# `benchmarks/NOTES.md` has every figure.
#
# With a CUDA GPU the next cell runs the benchmark (about a minute) and shows the same table for this GPU;
# elsewhere it says so.

# %%
# NBVAL_IGNORE_OUTPUT
# (on a GPU this cell prints fresh timings, which change from run to run)
if torch.cuda.is_available():
    live = results.run_live("bench_prefill.py", "bench_prefill.json", "--budget-s", "60")
    print(roofline.prefill_table(live, COLUMNS))
else:
    print("no GPU: showing stored H200 figures")

# %% [markdown]
# ## Exercises
#
# **133 · Triton paged prefill · hard.** In `practice/133_triton_paged_prefill.py`, write a kernel and its
# launcher `paged_attention_varlen_triton(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale,
# out)`: exercise 126's contract, written into the caller's `out` buffer, with an online softmax over key
# tiles read through the block table. A program per (sequence, query head, block of queries) is enough;
# packing the heads of a KV head into the rows, as the library does, is optional. The judge runs it in
# Triton's interpreter on small cases and natively on a GPU on prefills of thousands of tokens beside decode
# rows, where `--bench` compares your TFLOP/s with the library kernel's. Its hints name the classic mistakes:
# the mask aligned to the top left, rows past a sequence's `q_len` written into the next sequence's rows
# (or past `out`: it lies between NaN guard rows), the last block's tail or the -1 padding read (NaN), query
# head h reading KV head `h % H_kv` instead of `h // G`, and the running sums not rescaled.
#
#     python practice/judge.py 133
#     python practice/judge.py 133 --device cuda --bench      # on a machine with a GPU
#
# Or solve it here: write your kernel and launcher below and run the cell; `judge(133)` grades
# `paged_attention_varlen_triton` from this notebook on the same hidden cases, in Triton's interpreter. On a
# GPU machine save your code to `practice/133_*.py` and grade it there with `--device cuda`.

# %%
from pagedkv_lib.judge import judge


def paged_attention_varlen_triton(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale, out):
    raise NotImplementedError  # your code here: launch your kernel over (sequence, head, query block)


result = judge(133)

# %% [markdown]
# Once your kernel passes, `show_reference(133)` prints the PyTorch version it is graded against, and the cell
# prints the library's Triton kernel too (until then it says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
import inspect

from pagedkv_lib.judge import show_reference
from pagedkv_lib.judge.notebook import jit_helpers

if show_reference(133):
    for kernel in [*jit_helpers(kp._prefill_attention_kernel), kp._prefill_attention_kernel]:
        print(inspect.getsource(kernel.fn))

# %% [markdown]
# ## In real systems
#
# - **vLLM** `triton_unified_attention.py`, `kernel_unified_attention_2d`: one kernel for prefill, chunks and
#   decode, grid `(query blocks, KV heads)`. `BLOCK_Q = BLOCK_M // (query heads per KV head)` packs the heads
#   into the rows; `q.shape[0] // BLOCK_Q + num_seqs` query blocks bound the grid (surplus programs exit);
#   `find_seq_idx` binary-searches `cu_seqlens_q`. Causal tile skipping came in PR #20308.
# - **FlashAttention-2** `flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ..., causal=True,
#   block_table=...)`: nano-vllm's prefill, with the block table on a prefix hit; for `seqlen_q != seqlen_k`
#   its causal mask is aligned to the bottom right, as here.
# - **FlashInfer** `BatchPrefillWithPagedKVCacheWrapper`: the same CSR page table as its decode, a `plan()`
#   on the host that splits the work, then `run()`.
# - **SGLang** splits a chunk's attention into the cached prefix and the new tokens ("extend") and merges
#   the two partial softmaxes, the merge of notebook 11's split-KV.
#
# ## Say it in the interview
#
# A paged prefill kernel tiles the flat batch of query rows over (query block, KV head): a program holds a
# block of consecutive queries of one sequence, with the query heads of one KV head packed into the rows, and
# walks that sequence's keys through the block table with an online softmax. Tiles never mix sequences; the
# grid is bounded by `T / BLOCK_Q + B` so that nothing is read back to the host, and each program finds its
# sequence from `cu_seqlens_q`. New tokens are the last of their context, so query i sits at position
# `seq_len - q_len + i`: the causal mask is aligned to the bottom right, which matters for every chunk and
# decode row. Key tiles below a tile's first query need no mask, tiles on the diagonal do, tiles above it are
# never loaded. Prefill reuses each key for thousands of queries, about 800 FLOPs per byte at 2k tokens
# against decode's 4, so it is compute-bound where decode is memory-bound: I report TFLOP/s against a dense
# matmul and the fastest SDPA backend, not bandwidth.
