"""From scheduled sequences to kernel inputs: `prepare_prefill` and `prepare_decode`.

The shape of nano-vllm's `ModelRunner.prepare_prefill/prepare_decode` (`nanovllm/engine/model_runner.py`),
returning one small dataclass instead of setting a hidden global context.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .sequence import Sequence
from .slot_mapping import compute_slot_mapping


@dataclass
class ModelInputs:
    is_prefill: bool
    input_ids: torch.Tensor                 # [T] int64
    positions: torch.Tensor                 # [T] int64
    slot_mapping: torch.Tensor              # [T] int32: where each new token's K/V is written
    cu_seqlens_q: torch.Tensor | None       # [B + 1] int32 (prefill)
    cu_seqlens_k: torch.Tensor | None       # [B + 1] int32 (prefill)
    max_seqlen_q: int
    max_seqlen_k: int
    context_lens: torch.Tensor | None       # [B] int32 (decode)
    block_tables: torch.Tensor | None       # [B, M] int32 padded with -1, or None


def _i32(values: list[int], device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


def _i64(values: list[int], device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def pad_block_tables(tables: list[list[int]], device="cpu") -> torch.Tensor:
    """Rows padded with -1 to the longest table: [B, M] int32."""
    width = max((len(t) for t in tables), default=0)
    rows = [list(t) + [-1] * (width - len(t)) for t in tables]
    return torch.tensor(rows, dtype=torch.int32, device=device).reshape(len(tables), width)


def _varlen_inputs(chunks, block_tables, device) -> ModelInputs:
    """chunks: (seq, token_ids, start, end) each: positions start..end-1 of token_ids are this step's."""
    input_ids, positions, slot_mapping = [], [], []
    cu_q, cu_k, max_q, max_k = [0], [0], 0, 0
    for seq, token_ids, start, end in chunks:
        input_ids += token_ids[start:end]
        positions += range(start, end)
        cu_q.append(cu_q[-1] + end - start)
        cu_k.append(cu_k[-1] + end)
        max_q, max_k = max(max_q, end - start), max(max_k, end)
        slot_mapping += compute_slot_mapping(seq.block_table, start, end, seq.block_size)
    if block_tables is None and cu_k[-1] > cu_q[-1]:
        block_tables = pad_block_tables([c[0].block_table for c in chunks], device)   # [B, M]
    return ModelInputs(True, _i64(input_ids, device), _i64(positions, device), _i32(slot_mapping, device),
                       _i32(cu_q, device), _i32(cu_k, device), max_q, max_k, None, block_tables)


def prepare_prefill(seqs: list[Sequence], device="cpu") -> ModelInputs:
    """Positions start..end-1 of each sequence, start = num_cached_tokens, end = start + scheduled tokens.

    Block tables are passed only when some keys are not among this step's tokens (a prefix hit or a
    later chunk): then cu_seqlens_k[-1] > cu_seqlens_q[-1] and attention must read the cache.
    """
    chunks = []
    for seq in seqs:
        start = seq.num_cached_tokens
        end = seq.num_tokens if seq.num_scheduled_tokens is None else start + seq.num_scheduled_tokens
        if not start < end <= seq.num_tokens:
            raise ValueError(f"seq {seq.seq_id}: nothing to prefill (start {start}, end {end}, "
                             f"num_tokens {seq.num_tokens})")
        chunks.append((seq, seq.token_ids, start, end))
    return _varlen_inputs(chunks, None, device)


def prepare_verify(seqs: list[Sequence], draft_token_ids: list[list[int]], device="cpu") -> ModelInputs:
    """Speculative decoding's verification step: each sequence's last token and its k drafts, a chunk of
    q_len = k + 1 at positions len - 1 .. len - 1 + k, the LAST tokens of a len + k context (the causal
    offset of notebook 05), through the varlen path with block tables. The table must already hold the
    drafts' slots (`BlockManager.may_append(seq, k)`)."""
    if len(draft_token_ids) != len(seqs):
        raise ValueError(f"draft_token_ids: expected one list per sequence ({len(seqs)}), "
                         f"got {len(draft_token_ids)}")
    chunks = [(seq, seq.token_ids + list(drafts), seq.num_tokens - 1, seq.num_tokens + len(drafts))
              for seq, drafts in zip(seqs, draft_token_ids, strict=True)]
    block_tables = pad_block_tables([s.block_table for s in seqs], device)                # [B, M]
    return _varlen_inputs(chunks, block_tables, device)


def prepare_decode(seqs: list[Sequence], device="cpu") -> ModelInputs:
    """One token per sequence: its last token at position len - 1, written at that position's slot.

    The slot is `block_table[-1] * block_size + last_block_num_tokens - 1`: the new token is already
    counted in `len(seq)` (the scheduler appended its block in `may_append`).
    """
    input_ids, positions, slot_mapping, context_lens = [], [], [], []
    for seq in seqs:
        if len(seq.block_table) != seq.num_blocks:
            raise ValueError(f"seq {seq.seq_id}: {seq.num_tokens} tokens need {seq.num_blocks} blocks, "
                             f"block_table has {len(seq.block_table)}")
        input_ids.append(seq.last_token)
        positions.append(seq.num_tokens - 1)
        context_lens.append(seq.num_tokens)
        slot_mapping.append(seq.block_table[-1] * seq.block_size + seq.last_block_num_tokens - 1)
    max_k = max(context_lens, default=0)
    return ModelInputs(False, _i64(input_ids, device), _i64(positions, device), _i32(slot_mapping, device),
                       None, None, 1, max_k, _i32(context_lens, device),
                       pad_block_tables([s.block_table for s in seqs], device))
