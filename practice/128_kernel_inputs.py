"""Exercise 128 (medium): kernel inputs. Notebook 06, "From scheduler to kernel inputs".
Grade: python practice/judge.py 128

nano-vllm's `ModelRunner.prepare_prefill` / `prepare_decode` turn the scheduled sequences into the flat
tensors the attention kernels read. Here they return a `ModelInputs` (pagedkv_lib.core.model_inputs) instead
of setting a hidden global context. A `Sequence` (pagedkv_lib.core.sequence) has token_ids, num_tokens (==
len), block_size, block_table (one physical block per logical block), num_cached_tokens (tokens whose K/V are
already in the cache) and num_scheduled_tokens (None: all uncached tokens; else a chunk of that many).
Shapes: docs/conventions.md.
"""
from __future__ import annotations

from pagedkv_lib.core.model_inputs import ModelInputs
from pagedkv_lib.core.sequence import Sequence


def prepare_prefill(seqs: list[Sequence], device="cpu") -> ModelInputs:
    """Inputs of a prefill step: for each sequence, positions start..end-1 are computed, where
    start = seq.num_cached_tokens and end = seq.num_tokens if seq.num_scheduled_tokens is None, else
    start + seq.num_scheduled_tokens (a chunk). Every block those positions touch is in seq.block_table.

    Returns ModelInputs with (T = sum over sequences of end - start):
        is_prefill = True
        input_ids     [T] int64: token_ids[start:end] of each sequence, concatenated in order
        positions     [T] int64: start..end-1 of each sequence, concatenated
        slot_mapping  [T] int32: slot of each of those positions,
                      block_table[p // block_size] * block_size + p % block_size
        cu_seqlens_q  [B + 1] int32: [0, q_0, q_0 + q_1, ...] with q_b = end - start
        cu_seqlens_k  [B + 1] int32: the same running sums of end (keys: the whole context 0..end-1)
        max_seqlen_q, max_seqlen_k: Python ints, the largest q_b and the largest end
        context_lens = None
        block_tables  None if cu_seqlens_k[-1] == cu_seqlens_q[-1] (no key comes from the cache); else
                      [B, M] int32, each row the sequence's block_table padded with -1 to the longest.
    Mutates nothing (seqs are read-only). Tensors on `device`.
    Example: A (6 tokens, table [7, 2]) and B (3 tokens, table [5]), block_size 4, nothing cached:
        slot_mapping [28, 29, 30, 31, 8, 9, 20, 21, 22], cu_seqlens_q = cu_seqlens_k = [0, 6, 9],
        block_tables None.
    """
    raise NotImplementedError("prepare_prefill: your code here (exercise 128)")


def prepare_decode(seqs: list[Sequence], device="cpu") -> ModelInputs:
    """Inputs of a decode step: one token per sequence, its last one, at position len(seq) - 1.

    The scheduler has already appended the token and, if it starts a block, the block
    (len(seq.block_table) == ceil(len(seq) / block_size)); its K/V is written this step.
    Returns ModelInputs with:
        is_prefill = False
        input_ids     [B] int64: seq.last_token of each sequence
        positions     [B] int64: len(seq) - 1
        slot_mapping  [B] int32: block_table[-1] * block_size + last_block_num_tokens - 1 (the new token
                      is already counted in len(seq), so no + 1 and no off-by-one)
        cu_seqlens_q = cu_seqlens_k = None
        max_seqlen_q = 1, max_seqlen_k = the longest len(seq) (Python ints)
        context_lens  [B] int32: len(seq)
        block_tables  [B, M] int32: block tables padded with -1 to the longest.
    Mutates nothing (seqs are read-only). Tensors on `device`.
    Example: A holds 7 tokens in [7, 2], B 5 tokens in [5, 3], block_size 4: slot_mapping [10, 12],
        positions [6, 4], context_lens [7, 5].
    """
    raise NotImplementedError("prepare_decode: your code here (exercise 128)")
