# %% [markdown]
# # 06 · From scheduler to kernel inputs
#
# The scheduler thinks in sequences: token ids, a block table, how many tokens are already cached. The kernels
# want flat int tensors. This notebook is the translation, in the shape of nano-vllm's `prepare_prefill` and
# `prepare_decode`. After it you can list every field a prefill and a decode step pass to the model, say when
# prefill needs the block tables, compute the decode slot without the classic off-by-one, and recognise what
# that off-by-one does to the cache a step later.

# %% [markdown]
# ## Self-test
#
# 1. A fresh 6-token prompt has block table `[7, 2]` at block size 4. What are its prefill `positions` and
#    `slot_mapping`?
# 2. The same prompt, but its first block was a prefix hit (`num_cached_tokens = 4`). What are `cu_seqlens_q`
#    and `cu_seqlens_k` for it alone, and why must prefill now receive the block tables?
# 3. At decode time `len(seq) == 9`, block size 4, table `[7, 2, 5]`. Which position does this step write, and
#    at which slot?
# 4. What is wrong with `slot = block_table[-1] * block_size + last_block_num_tokens`?
#
# <details><summary>Answer</summary>
#
# 1. Positions `[0, 1, 2, 3, 4, 5]`, slots `[28, 29, 30, 31, 8, 9]`.
# 2. `cu_seqlens_q = [0, 2]` (positions 4 and 5 are computed) and `cu_seqlens_k = [0, 6]` (they attend to 6
#    keys). Keys 0..3 are not among this step's tokens: attention must read them from the cache, through the
#    block table.
# 3. Position 8 (`len - 1`: the token sampled last step is already counted), which starts logical block 2:
#    slot `5 * 4 + 0 = 20`.
# 4. `last_block_num_tokens` already counts the new token, so its offset is `last_block_num_tokens - 1`. The
#    formula writes one slot too far: it leaves a hole at the right slot, and when the length is a multiple of
#    the block size it writes into the first slot of physical block `block_table[-1] + 1`, which belongs to
#    another sequence or to nobody.
#
# </details>

# %% [markdown]
# ## 1. `Sequence`: what the scheduler knows
#
# nano-vllm's `Sequence` (`nanovllm/engine/sequence.py`) holds the token ids (prompt, then generated), the
# block table, and `num_cached_tokens`: how many leading tokens already have K/V in the cache (a prefix hit,
# or the earlier chunks of a chunked prefill). The rest is derived:
#
# ```
# num_blocks            = ceil(num_tokens / block_size)
# last_block_num_tokens = num_tokens - (num_blocks - 1) * block_size      in [1, block_size], never 0
# block(i)              = token_ids[i * block_size : (i + 1) * block_size]
# ```

# %%
import torch

import pagedkv_lib as pk

seq = pk.Sequence([11, 12, 13, 14, 15, 16], block_size=4, seq_id=0)
print(seq)
print("num_tokens", seq.num_tokens, "| num_blocks", seq.num_blocks, "| last_block_num_tokens",
      seq.last_block_num_tokens, "| blocks", [seq.block(i) for i in range(seq.num_blocks)])
for n in range(1, 10):  # last_block_num_tokens against the tempting `n % block_size`
    s = pk.Sequence(list(range(n)), block_size=4)
    print(f"num_tokens {n}: last_block_num_tokens {s.last_block_num_tokens}, n % 4 = {n % 4}")

# %% [markdown]
# At 4 and 8 tokens the last block is full, and `n % 4` says 0. Keep that in mind for section 5.
#
# ## 2. `prepare_prefill`: fresh prompts
#
# For each sequence the step computes positions `start .. end - 1`, with `start = num_cached_tokens` and
# `end = start + num_scheduled_tokens` (all the rest when nothing limits it). The step's tokens are
# concatenated; `cu_seqlens_q` are the prefix sums of `end - start`, `cu_seqlens_k` those of `end` (each token
# attends to every key up to `end`), and `slot_mapping` covers this step's tokens only. The two sequences of
# notebook 03: A has 6 tokens in blocks `[7, 2]`, B 3 tokens in block `[5]` (tables set by hand here; the
# `BlockManager` of notebook 07 fills them in an engine).

# %%
from dataclasses import fields


def show(inputs):
    for f in fields(inputs):
        value = getattr(inputs, f.name)
        print(f"{f.name:13s}", value.tolist() if isinstance(value, torch.Tensor) else value)


A = pk.Sequence([11, 12, 13, 14, 15, 16], block_size=4, seq_id=0)
B = pk.Sequence([21, 22, 23], block_size=4, seq_id=1)
A.block_table, B.block_table = [7, 2], [5]
inputs = pk.prepare_prefill([A, B])
show(inputs)

# %% [markdown]
# Check it against the per-token rule of notebook 03: each position's slot is
# `block_table[p // block_size] * block_size + p % block_size`. `block_tables` is `None`: every key this step
# attends to is one of this step's own tokens (`cu_seqlens_k[-1] == cu_seqlens_q[-1]`), so the kernel takes
# K/V straight from the step's activations.

# %%
expected = [slot for s in (A, B) for slot in pk.slot_mapping_for(s.block_table, range(s.num_tokens), 4)]
print("slot_mapping == per-token rule:", inputs.slot_mapping.tolist() == expected)
print("dtypes:", inputs.input_ids.dtype, inputs.positions.dtype, inputs.slot_mapping.dtype,
      inputs.cu_seqlens_q.dtype)

# %% [markdown]
# ## 3. `prepare_prefill` after a prefix hit, and for a later chunk
#
# Two sequences that do not start at position 0:
#
# ```
# hit    6 tokens, table [7, 4], num_cached_tokens 4   computes positions 4, 5; keys 0..3 are in block 7
# chunk 10 tokens, table [1, 3, 6], num_cached_tokens 6  (its first chunk computed 0..5)  computes 6..9
#
#          block 1       block 3       block 6
# chunk  [0  1  2  3] [4  5 |6  7] [8  9  .  .]      this step writes slots 14, 15, 24, 25
# ```
#
# Now `cu_seqlens_k[-1] > cu_seqlens_q[-1]`: some keys are not among this step's tokens, so the block tables
# are passed (padded with -1) and attention reads all keys from the cache.

# %%
hit = pk.Sequence([11, 12, 13, 14, 15, 16], block_size=4, seq_id=2)
hit.block_table, hit.num_cached_tokens = [7, 4], 4
chunk = pk.Sequence(list(range(200, 210)), block_size=4, seq_id=3)
chunk.block_table, chunk.num_cached_tokens = [1, 3, 6], 6
inputs = pk.prepare_prefill([hit, chunk])
show(inputs)
expected = [slot for s in (hit, chunk)
            for slot in pk.slot_mapping_for(s.block_table, range(s.num_cached_tokens, s.num_tokens), 4)]
print("slot_mapping == per-token rule:", inputs.slot_mapping.tolist() == expected)

# %% [markdown]
# ## 4. `prepare_decode` and the timing rule
#
# nano-vllm's `step()` runs `schedule()`, then the model, then `postprocess()`, which appends the sampled
# token to the sequence (`nanovllm/engine/llm_engine.py:49-53`). So when a decode step is scheduled,
# `len(seq)` already counts the token whose K/V this step computes, at position `len - 1`:
#
# ```
# step k:    schedule: may_append(seq)   a new block iff position len-1 starts one: (len - 1) % bs == 0
#            model:    writes K/V of position len - 1 at  block_table[-1] * bs + last_block_num_tokens - 1
#            postprocess: seq.append_token(sampled)      len grows by one, its K/V come at step k + 1
# ```
#
# `(len - 1) % bs == 0` is nano-vllm's `len(seq) % block_size == 1` (for block size > 1). A decode step passes
# `context_lens = len` and the block tables, never `cu_seqlens`: every sequence has exactly one query.

# %%
bm = pk.BlockManager(num_blocks=8, block_size=4)
seq = pk.Sequence([11, 12, 13, 14, 15, 16], block_size=4, seq_id=4)
bm.allocate(seq)  # the prefill step writes positions 0..5
for step in range(1, 5):
    seq.append_token(100 + step)  # postprocess of the step before: the sampled token joins
    new_block = (len(seq) - 1) % 4 == 0
    bm.may_append(seq)  # schedule: a block for position len - 1 if it starts one
    d = pk.prepare_decode([seq])
    assert d.slot_mapping.tolist() == pk.slot_mapping_for(seq.block_table, [len(seq) - 1], 4)
    print(f"decode {step}: len {len(seq):2d}, new block {new_block!s:5}, table {seq.block_table}, position "
          f"{d.positions.item()}, slot {d.slot_mapping.item()}, context_lens {d.context_lens.tolist()}")

# %% [markdown]
# All fields of a decode step for `hit` and `chunk` of section 3, once their prefill has run and
# `postprocess` has appended one sampled token to each: one query per sequence, `max_seqlen_q = 1`, block
# tables padded with -1, no `cu_seqlens`.

# %%
for s in (hit, chunk):
    s.num_cached_tokens = s.num_tokens  # the prefill step computed everything
    s.append_token(s.last_token + 1)  # postprocess: len 7 and 11, positions 6 and 10 to write
show(pk.prepare_decode([hit, chunk]))

# %% [markdown]
# ## 5. The classic off-by-one
#
# `last_block_num_tokens` counts the new token, so its offset in the last block is one less. Two wrong
# formulas seen in real code, next to the right one (block size 4, last block = physical block `L`):
#
# ```
# len:                                   5     6     7     8      9
# right:  L*4 + last_block_num_tokens-1  L*4   L*4+1 L*4+2 L*4+3  L*4
# "+lbnt" L*4 + last_block_num_tokens    L*4+1 L*4+2 L*4+3 L*4+4  L*4+1     one too far; at 8: block L+1
# n % bs  L*4 + len % 4 - 1              L*4   L*4+1 L*4+2 L*4-1  L*4       at 8: block L-1's last slot
# ```
#
# The third is Wenyueh/MinivLLM issue #76 ("Wrong decode slot_mapping when sequence length is a multiple of
# block_size", fixed by PR #77): its `last_block_num_tokens` returned 0 for a full last block. To see
# the damage, play a prefill and two decode steps for A (6 tokens) and B (3 tokens), writing into each slot a
# marker of who wrote it (`A6` = A's position 6), then read back what attention would gather.

# %%
def right(seqs):
    return pk.prepare_decode(seqs).slot_mapping.tolist()


def one_too_far(seqs):
    return [s.block_table[-1] * s.block_size + s.last_block_num_tokens for s in seqs]


def mod_block_size(seqs):  # MinivLLM #76: a full last block counted as 0 tokens
    return [s.block_table[-1] * s.block_size + len(s) % s.block_size - 1 for s in seqs]


def label(x):  # the marker 100 * (seq + 1) + position, back as "A6"; NaN = never written
    return "--" if x != x else "AB"[int(x) // 100 - 1] + str(int(x) % 100)


# %% [markdown]
# The play: the engine's loop with a one-number-per-slot cache (`H_kv = D = 1`), the library's
# `store_kvcache` doing the writes, and the decode slots coming from the formula under test.

# %%
def play(decode_slots, decode_steps=2):
    bm = pk.BlockManager(num_blocks=8, block_size=4)
    seqs = [pk.Sequence([11, 12, 13, 14, 15, 16], 4, seq_id=0), pk.Sequence([21, 22, 23], 4, seq_id=1)]
    for s in seqs:
        bm.allocate(s)  # A gets blocks [0, 1], B block [2]
    k_cache = torch.full((8, 4, 1, 1), float("nan"))  # [N, S, H_kv, D]: one marker per slot
    p = pk.prepare_prefill(seqs)
    slots, who, positions = p.slot_mapping, torch.tensor([0] * 6 + [1] * 3), p.positions
    for step in range(decode_steps + 1):
        if step:  # a decode step: postprocess appended a token, the scheduler made room for it
            for s in seqs:
                s.append_token(0)
                bm.may_append(s)
            slots = torch.tensor(decode_slots(seqs), dtype=torch.int32)
            who, positions = torch.tensor([0, 1]), torch.tensor([len(s) - 1 for s in seqs])
        marker = (100 * (who + 1) + positions).float().view(-1, 1, 1)  # [T, 1, 1]
        pk.store_kvcache(marker, marker, k_cache, torch.empty_like(k_cache), slots)
    return seqs, k_cache


# %%
for formula in (right, one_too_far, mod_block_size):
    seqs, k_cache = play(formula)
    print(formula.__name__)
    for b in range(4):
        print(f"  block {b}: " + " ".join(label(x) for x in k_cache[b].flatten().tolist()))
    for name, s in zip("AB", seqs):
        seen = pk.gather_kv(k_cache, s.block_table, len(s)).flatten().tolist()  # what attention reads
        print(f"  {name} (table {s.block_table}) reads: " + " ".join(label(x) for x in seen))

# %% [markdown]
# Read the rows of `one_too_far`:
#
# - decode 1: A (len 7) writes position 6 at offset 3 instead of 2. Offset 2 stays a **hole**, and A6 sits
#   where position 7 belongs.
# - decode 1: B (len 4, last block full) writes B3 at `2 * 4 + 4 = 12`: block 3, which nobody owns yet. One
#   step later B is given block 3 and reads B3 as its position 4.
# - decode 2: A (len 8, last block full) writes A7 at `1 * 4 + 4 = 8`: the first slot of **B's block**,
#   overwriting B0. From now on B attends to A's token.
#
# `mod_block_size` goes the other way at full blocks: A7 lands on A3 (A's own block 0), and B3 on slot 7,
# where A's position 7 belongs. Here a hole reads NaN and the output turns NaN; in an engine the hole holds
# the stale K/V of the block's previous owner, and the output is silently wrong.

# %% [markdown]
# ## Exercises
#
# **128 · Kernel inputs · medium.** Write `prepare_prefill(seqs)` and `prepare_decode(seqs)` over
# `pagedkv_lib` `Sequence`s in `practice/128_kernel_inputs.py`, returning the same `ModelInputs` fields
# (dtypes included). Grade it with
#
#     python practice/judge.py 128
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(128)` grades the
# `prepare_prefill` and `prepare_decode` defined in this notebook on the same hidden cases (`%judge 128` does
# the same after `%load_ext pagedkv_lib.judge`). As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


def prepare_prefill(seqs):
    raise NotImplementedError  # your code here: return a pagedkv_lib.ModelInputs


def prepare_decode(seqs):
    raise NotImplementedError  # your code here


result = judge(128)

# %% [markdown]
# Once your version passes, `show_reference(128)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(128)

# %% [markdown]
# ## In real systems
#
# - **nano-vllm** (`nanovllm/engine/model_runner.py`): `prepare_prefill` computes `start = num_cached_tokens`,
#   `end = start + num_scheduled_tokens`, builds `cu_seqlens_q`/`cu_seqlens_k` as prefix sums and
#   `slot_mapping` over `[start, end)` only, and passes block tables only when `cu_seqlens_k[-1] >
#   cu_seqlens_q[-1]`. `prepare_decode` uses `positions = len - 1`, `context_lens = len` and
#   `slot = block_table[-1] * block_size + last_block_num_tokens - 1`. `prepare_block_tables` pads rows with
#   -1. Instead of returning the tensors it stores them in a module-level context that the attention layer
#   reads (the course returns a `ModelInputs` dataclass instead).
# - **nano-vllm, CUDA graphs**: decode batches are padded to a captured size (1, 2, 4, 8, 16, 32, ...); padded
#   rows get `slot_mapping = -1` (not written) and `context_lens = 0` (nothing read).
# - **The timing rule settles the off-by-one arguments**: nano-vllm issues #30, #150, #240 and PRs #66, #71,
#   #151/#152 claimed `len % block_size == 1` was off by one; all are answered by the append happening in
#   `postprocess` (#240). Wenyueh/MinivLLM #76 is the real bug of section 5, fixed by PR #77 (PR #83, which
#   also fixed the `token_ids[-0:]` slice that returned the whole sequence as the "last block", was closed
#   unmerged).
# - **vLLM** (`vllm/v1/worker/block_table.py`): `BlockTable.compute_slot_mapping` runs a Triton kernel with
#   one program per request (plus one that pads the tail with `PAD_SLOT_ID = -1` for CUDA graphs), computing
#   `block_table[req, pos // bs] * bs + pos % bs` from `query_start_loc` and the positions. Its
#   `slot_mapping` is int64, its block table int32.
#
# ## Say it in the interview
#
# Prefill computes positions `num_cached_tokens .. end - 1` of each sequence: `cu_seqlens_q` sums the
# computed tokens, `cu_seqlens_k` the context lengths, and `slot_mapping` covers only the computed tokens.
# Block tables go to prefill only when some keys come from the cache (a prefix hit or a later chunk), which
# shows up as `cu_seqlens_k[-1] > cu_seqlens_q[-1]`. Decode is scheduled after the previous step appended the
# sampled token, so the token to write is at position `len - 1`, at slot
# `block_table[-1] * bs + last_block_num_tokens - 1`. Dropping the `- 1` writes one slot too far, leaving a
# hole and, at full blocks, writing into a block that belongs to another sequence.
