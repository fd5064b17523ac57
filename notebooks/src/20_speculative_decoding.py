# %% [markdown]
# # 20 · Speculative decoding and the cache
#
# A decode step reads every weight and the whole KV cache to produce ONE token per sequence: on a GPU it is
# memory-bound, and a forward over a few more tokens costs about the same. Speculative decoding exploits
# that: guess k tokens cheaply, then let the model check all k in ONE forward, keeping the guesses it agrees
# with. For the cache the guesses are a new kind of token: their K/V is written before anyone knows whether
# they will stay. After this notebook you can draft by prompt lookup (no draft model), verify a draft as a
# chunk of q_len = k + 1 through the varlen path of notebook 05, accept the longest agreeing prefix plus a
# bonus token, roll the block table back (released slots, freed blocks, no hash on an unverified block),
# verify a whole TREE of guesses under a tree mask, and turn speculation on in the mini engine of notebook 14.

# %% [markdown]
# ## Self-test
#
# 1. A verification step checks k drafts. How many tokens can it emit at most, and at least?
# 2. Why are the drafts verified as a chunk with the causal offset of a chunked prefill, not as k decodes?
# 3. After the step, which blocks of the sequence may carry a hash?
# 4. Greedy speculation changes the number of steps. Can it change the tokens?
# 5. Two branches of a draft tree are verified in the same forward. What must the mask stop?
#
# <details><summary>Answer</summary>
#
# 1. At most k + 1 (every draft accepted, then the bonus token), at least 1 (the first draft rejected: the
#    model's own token takes its place). A step never emits fewer tokens than a plain decode.
# 2. The chunk is the last token and the k drafts: the LAST k + 1 tokens of a context of len + k tokens.
#    Query i must see the context and the chunk's tokens up to itself, which is exactly the varlen path's
#    causal offset; one forward computes all k + 1 positions.
# 3. Only blocks FULL of verified tokens whose K/V is in the cache: written already, or by the step being
#    scheduled, whose forward runs before any other request can look the block up (so `may_append` hashes
#    the block that the last verified token fills, as nano-vllm's does and vLLM's `allocate_slots`).
#    Never a block holding a rejected draft, nor one holding the bonus token: its K/V is written by the next
#    step, which hashes its block then. A prefix hit on either would read K/V that no sequence has.
# 4. No. Every emitted token is the target's argmax given the tokens before it, which is what plain greedy
#    decoding emits; only float rounding between a chunk and single steps could differ, and the engine's test
#    checks the tokens are equal.
# 5. A node must not read a sibling branch's drafts: it sees the context and its own ancestors only, as if its
#    branch were the only draft.
#
# </details>

# %% [markdown]
# ## 1. One step, three parts
#
# A sequence of `len` tokens; its last token (position `len - 1`) has no K/V yet: the next step writes it.
#
# ```
#            context (K/V in the cache)        last   d1   d2   d3      <- the verification chunk, q_len = 4
# positions  0 .............. len-2            len-1  len  len+1 len+2
# target     -                                 g0     g1   g2   g3      (argmax at each position)
# accept     d1 == g0 ? d2 == g1 ? d3 == g2 ? ... stop at the first "no"; then emit g_a, the BONUS token
# ```
#
# Drafting (section 2), verification as one chunk (section 3) and acceptance (section 4) produce the tokens;
# the cache then has to forget what was rejected (section 5).

# %% [markdown]
# ## 2. Drafting by prompt lookup
#
# The simplest drafter needs no model: look for the last few tokens earlier in the sequence and propose what
# followed them there (prompt lookup decoding; vLLM's `NgramProposer`). It tries n-grams from
# `prompt_lookup_max` down to `prompt_lookup_min`, takes the earliest earlier occurrence, and proposes up to
# k tokens. Text that repeats itself (code being edited, a document being quoted) is drafted well; fresh text
# gets no draft at all, and that step is a plain decode.

# %%
from pagedkv_lib.engine.ngram_proposer import NgramProposer

proposer = NgramProposer(num_speculative_tokens=4, prompt_lookup_min=1, prompt_lookup_max=3)
text = [7, 8, 9, 10, 11, 12, 3, 3, 7, 8, 9]       # "7 8 9" occurred at the start
print("drafts after", text, "->", proposer.propose(text))
print("drafts after [1, 2, 3, 4] ->", proposer.propose([1, 2, 3, 4]), "(nothing repeats)")

# %% [markdown]
# ## 3. Verification: one chunk through the varlen path
#
# `prepare_verify` builds the step's inputs: for each sequence its last token and its drafts, at positions
# `len - 1 .. len - 1 + k`, written to the slots of the lookahead blocks (`BlockManager.may_append(seq, k)`
# allocated them), attended with the varlen path's causal offset. A sequence without drafts is a chunk of one:
# a decode.

# %%
from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.model_inputs import prepare_verify
from pagedkv_lib.core.sequence import Sequence

bm = BlockManager(num_blocks=8, block_size=4)
a, b = Sequence([1, 2, 3, 4, 5, 6], 4), Sequence([9, 9, 9], 4)
for seq in (a, b):
    bm.allocate(seq)
    seq.append_token(0)                                # the prefill's sampled token
a.draft_token_ids, b.draft_token_ids = [11, 12, 13], []
for seq in (a, b):
    bm.may_append(seq, len(seq.draft_token_ids))
inputs = prepare_verify([a, b], [a.draft_token_ids, b.draft_token_ids])
print("block tables    ", a.block_table, b.block_table)
print("input_ids       ", inputs.input_ids.tolist())
print("positions       ", inputs.positions.tolist())
print("slot_mapping    ", inputs.slot_mapping.tolist())
print("cu_seqlens_q    ", inputs.cu_seqlens_q.tolist(), " cu_seqlens_k", inputs.cu_seqlens_k.tolist())

# %% [markdown]
# The check against an independent reference: the argmax at every position of one verification forward equals
# what greedy decoding, one token at a time with the dense no-cache model, produces. Below, the engine gets a
# drafter that knows greedy decoding's next tokens and spoils one of them; the step accepts the drafts up to
# the spoiled one and replaces it by the model's own token.

# %%
import torch

from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams, greedy_reference
from pagedkv_lib.engine.model import Qwen3ForCausalLM

torch.set_num_threads(1)
prompt = [5, 17, 42, 99, 3, 250, 7]
truth = greedy_reference(Qwen3ForCausalLM(ModelConfig()), prompt, 8)


class SpoiledAnswerProposer:
    """Drafts greedy decoding's next k tokens, the third one changed."""

    def propose(self, token_ids, max_num_tokens):
        done = len(token_ids) - len(prompt)
        drafts = list(truth[done: done + 4])
        if len(drafts) >= 3:
            drafts[2] = (drafts[2] + 1) % 512
        return drafts[:max_num_tokens]


llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=32, max_model_len=64, max_num_batched_tokens=64,
                       num_speculative_tokens=4))
llm.proposer = SpoiledAnswerProposer()
out = llm.generate([prompt], SamplingParams(max_tokens=8), use_tqdm=False)[0]
print("greedy reference", truth)
print("speculative     ", out, "same:", out == truth)
print("per step: drafted", [s.num_draft_tokens for s in llm.stats], "accepted",
      [s.num_accepted_tokens for s in llm.stats])

# %% [markdown]
# ## 4. Acceptance: the longest agreeing prefix, then the bonus token
#
# Greedy acceptance compares each draft with the target's argmax at the position before it and stops at the
# first disagreement; the token emitted there is the target's own (`accept_greedy`). With sampling
# (temperature > 0) the rule of Leviathan et al. (arXiv:2211.17192) keeps the output distributed exactly as
# the target's: accept draft x with probability min(1, p(x) / q(x)), on rejection draw from max(0, p - q)
# renormalised, and draw the bonus from p. An n-gram drafter has no q; vLLM treats it as one-hot on the draft
# (`vllm/v1/sample/rejection_sampler.py` at `0097a7b`, `rejection_random_sample_kernel` with `IS_NGRAM`):
# accept with probability p(x), recover from p with x removed. The course's engine runs the greedy rule only
# and refuses temperature > 0 while speculating.

# %%
from pagedkv_lib.engine.rejection_sampler import accept_greedy

for drafts, targets in (([4, 5, 6], [4, 5, 6, 7]), ([4, 5, 6], [4, 9, 6, 7]), ([4, 5, 6], [8, 5, 6, 7])):
    print(f"drafts {drafts}, target argmax {targets} -> emit {accept_greedy(drafts, targets)}")

# %% [markdown]
# ## 5. Rolling back the cache
#
# The drafts' K/V went into lookahead slots. After acceptance the sequence holds `num_computed_tokens` =
# (its length before the step) + (accepted drafts) tokens with verified K/V, plus the bonus token. Rollback
# (`rollback.truncate`) leaves the manager exactly as plain decoding would have:
#
# ```
# before   [ b0: 1 2 3 4 ][ b1: 5 6 0 d1 ][ b2: d2 d3 . . ]     lookahead for d1 d2 d3 (k = 3)
# accept d1, bonus g1:       num_computed_tokens = 8
# after    [ b0: hashed  ][ b1: 5 6 0 d1 -> full: hashed now ]  b2 freed (held only rejected drafts)
#                          the bonus g1 sits at position 8: its K/V and its block come with the next step
# ```
#
# Three rules, each one a way to serve wrong K/V later: a released block must leave the table, the block of
# the last computed token stays even when partial, and only blocks FULL of verified tokens get a hash (a
# prefix hit on a block with a rejected draft would read K/V that belongs to no sequence).

# %%
from pagedkv_lib.core.rollback import truncate


def state(seq):
    hashed = ["#" if bm.blocks[x].hash != -1 else "-" for x in seq.block_table]
    return f"table {seq.block_table} hashed {hashed} free {list(bm.free_block_ids)}"


print("a before      ", state(a), "tokens", a.token_ids, "+ drafts", a.draft_token_ids)
for t in (11, 99):                                     # draft 11 accepted, 12 rejected: the bonus is 99
    a.append_token(t)
truncate(bm, a, len(a) - 1)
print("a after       ", state(a), "tokens", a.token_ids)

# %% [markdown]
# The brute-force check: the same tokens decoded one at a time, without lookahead, on a fresh manager. Free
# blocks, table length, reference counts and hashes agree (tests/core/test_rollback.py does this for random
# drafts, acceptances, block sizes and shared prefixes).

# %%
plain = BlockManager(num_blocks=8, block_size=4)
p = Sequence([1, 2, 3, 4, 5, 6], 4)
plain.allocate(p)
p.append_token(0)
for t in (11, 99):                                     # a plain decode step: room for the last token, append
    plain.may_append(p)
    p.append_token(t)


def observable(manager, seq, others=0):
    """What the contract makes observable; `others`: blocks held by other sequences, counted as free."""
    return {"table length": len(seq.block_table), "free blocks": manager.num_free_blocks + others,
            "hashes": [manager.blocks[x].hash for x in seq.block_table]}


print("plain decoding and speculation + rollback agree:",
      observable(plain, p) == observable(bm, a, others=len(b.block_table)))

# %% [markdown]
# In vLLM V1 the same rule is one line of `KVCacheManager.allocate_slots` (`vllm/v1/core/kv_cache_manager.py`
# at `003df29`): slots are allocated for `num_new_tokens + num_lookahead_tokens`, but blocks are cached only
# up to `min(total_computed_tokens + num_new_tokens, request.num_tokens)`, and `request.num_tokens` counts no
# draft ("only finalized tokens are cached"). Rejected slots are not freed one by one: the next step's tokens
# overwrite them.

# %% [markdown]
# ## 6. Tree drafts: several guesses in one forward
#
# A drafter can propose several continuations (Medusa's heads, SpecInfer's token tree). Flattened in node
# order they form one chunk, with the causal mask replaced by a TREE mask: each node reads the context and its
# own branch. The positions follow depth, so every branch is verified exactly as if it were alone.

# %%
import matplotlib.pyplot as plt

from pagedkv_lib.core.tree_attention import tree_depths
from pagedkv_lib.viz.tree_mask import plot_tree_mask

parents = [-1, 0, 0, 1, 2, 2]
labels = ["last", "a", "b", "a.a", "b.a", "b.b"]
print("depths", tree_depths(parents))
plot_tree_mask(parents, labels, accepted=[0, 2, 4], fig=plt.figure(figsize=(8.5, 3.2), dpi=80))
plt.show()

# %% [markdown]
# The check: the tree's logits, one forward through the paged path with the tree mask, against the dense
# no-cache model run on each branch alone, in float64.

# %%
import random

from pagedkv_lib.engine.rejection_sampler import accept_tree_greedy
from pagedkv_lib.engine.tree_verification import branch_logits, tree_logits

config64 = ModelConfig(dtype=torch.float64)
rng = random.Random(0)
tree_prompt = [rng.randrange(512) for _ in range(9)]
truth = greedy_reference(Qwen3ForCausalLM(config64), tree_prompt, 2)
tokens = [tree_prompt[-1]] + [rng.randrange(512) for _ in parents[1:]]
tokens[2], tokens[4] = truth                            # branch b, b.a is what greedy decoding says
tree = tree_logits(config64, tree_prompt, tokens, parents, block_size=4)
alone = branch_logits(config64, tree_prompt, tokens, parents)
print(f"{len(parents)} nodes, every one within 1e-10 of its branch verified alone:",
      bool((tree - alone).abs().max() < 1e-10))
emitted = accept_tree_greedy(parents, tokens, tree.argmax(dim=-1).tolist())
print("greedy decoding", greedy_reference(Qwen3ForCausalLM(config64), tree_prompt, 3))
print("emitted by greedy acceptance over the tree", emitted, "(b, b.a, then the bonus)")

# %% [markdown]
# ## 7. In the engine
#
# `EngineConfig(num_speculative_tokens=k)` turns n-gram speculation on: before each decode step every running
# sequence gets up to k drafts (never past its `max_tokens`), the scheduler allocates their lookahead slots
# (and preempts, as for any decode, when the pool runs dry), the model runner verifies every sequence's chunk
# in one forward, and `postprocess` appends what was accepted and rolls back. The table serves the course's
# workloads (the prefix-cache study's shared system prompt, few-shot headers and chat, scaled to the tiny
# engine) without and with speculation (k = 4); sequence-steps count decode forwards summed over sequences.
# The last row replays known answers to "edit" requests, whose answer restates the prompt with a few changes.

# %%
from pagedkv_lib.studies.speculation import format_table, speculation_table

rows = speculation_table(k=4)
print(format_table(rows))

# %%
engine_rows, replay = rows[:-1], rows[-1]
best = max(engine_rows, key=lambda r: r.acceptance)
print(f"On the engine's workloads prompt lookup accepts at most {best.acceptance:.1%} of its drafts "
      f"({best.workload}): the tiny model has random weights, and its continuations rarely repeat its "
      f"context, so the drafter rarely guesses them. The greedy tokens are identical in every row: "
      f"{all(r.same_outputs for r in engine_rows)}.")
print(f"On text that repeats (the edit replay) {replay.acceptance:.1%} of the drafts are accepted and a "
      f"sequence gains {replay.tokens_per_step:.2f} tokens per step: {replay.seq_steps_plain} forwards "
      f"become {replay.seq_steps_speculative}.")

# %% [markdown]
# Whether that is faster depends on the hardware: each verification forward computes k + 1 positions per
# sequence. On a memory-bound GPU decode that costs little more than one; on this CPU it costs more, which is
# why the table counts forwards and not seconds. Tokens per second on a GPU were not measured for this
# notebook.

# %% [markdown]
# ## Exercises
#
# **140 · Rollback after speculative decoding · medium.** Write `truncate(block_manager, seq,
# num_computed_tokens)` in `practice/140_speculative_rollback.py`: keep the blocks of the computed tokens
# (the last one even when partial), release the others last first, and hash every kept block that is full
# of computed tokens, and no other. Grade it with
#
#     python practice/judge.py 140
#
# Or solve it in this notebook: replace the stub below and run the cell. `judge(140)` grades the `truncate`
# defined in this notebook on the same hidden cases. As stored here, the stub is graded "not implemented".

# %%
from pagedkv_lib.judge import judge


def truncate(block_manager, seq, num_computed_tokens):  # your code here
    raise NotImplementedError


result = judge(140)

# %% [markdown]
# Once your version passes, `show_reference(140)` prints the library's, to compare with yours (until then it
# says what to do first):

# %%
# NBVAL_IGNORE_OUTPUT
# (what it prints depends on your own progress)
from pagedkv_lib.judge import show_reference

shown = show_reference(140)

# %% [markdown]
# ## In real systems
#
# - **vLLM V1, drafting** (`vllm/v1/spec_decode/ngram_proposer.py` at `adce4e9`): `NgramProposer` finds the
#   longest n-gram in `[prompt_lookup_min, prompt_lookup_max]` that ends the context, with a KMP pass over the
#   reversed tokens compiled by numba, takes its earliest occurrence and proposes up to
#   `num_speculative_tokens` tokens, never past `max_model_len`. A draft model or EAGLE drafts with a model
#   that keeps a KV cache of its own, which the course leaves out.
# - **vLLM V1, slots and caching** (`vllm/v1/core/kv_cache_manager.py` at `003df29`): `allocate_slots(...,
#   num_lookahead_tokens)` allocates slots for the drafts and caches blocks only up to `request.num_tokens`,
#   which holds no draft; drafts live in `request.spec_token_ids`.
# - **vLLM V1, acceptance** (`vllm/v1/sample/rejection_sampler.py` at `0097a7b`): `RejectionSampler` cites
#   arXiv:2211.17192; `rejection_greedy_sample_kernel` is section 4's greedy rule (the target's argmax written
#   at each position until the first mismatch, the bonus when none), `rejection_random_sample_kernel` and
#   `sample_recovered_tokens_kernel` the stochastic one, with `IS_NGRAM` for a drafter without probabilities.
# - **vLLM V1, trees** (`vllm/v1/attention/backends/tree_attn.py` at `00c457b`): the tree is given as
#   `speculative_config.speculative_token_tree`; `_prepare_tree_attn_bias` makes the bias (0 on the root, the
#   diagonal and each node's ancestors, -inf elsewhere) that section 6's mask is the boolean form of.
# - **Papers**: Leviathan et al., "Fast Inference from Transformers via Speculative Decoding"
#   (arXiv:2211.17192); Chen et al. (arXiv:2302.01318); SpecInfer (Miao et al., arXiv:2305.09781) for token
#   trees; Medusa (Cai et al., arXiv:2401.10774).
#
# ## Say it in the interview
#
# Speculative decoding guesses k tokens cheaply and verifies them in one forward, as a chunk of k + 1 query
# tokens at the end of the context: the varlen path with its causal offset. Greedy acceptance keeps the
# drafts that match the target's argmax and adds the target's own next token, so the output is unchanged
# and a step emits between 1 and k + 1 tokens. The cache writes the drafts' K/V into lookahead slots before
# they are verified, so the block manager must roll back: free the blocks that held only rejected drafts,
# keep the block of the last verified token, and register in the prefix cache only blocks full of verified
# tokens, which vLLM does by caching up to `request.num_tokens`. A draft tree verifies several guesses at once
# under a mask where each node sees only its ancestors.
#
# More on each engine's choices, with sources: `docs/engines.md`, "Speculative decoding and the cache".
