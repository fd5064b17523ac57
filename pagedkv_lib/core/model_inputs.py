"""From scheduled sequences to kernel inputs: `prepare_prefill`, `prepare_decode` and `prepare_verify`.

The shape of nano-vllm's `ModelRunner.prepare_prefill/prepare_decode` (`nanovllm/engine/model_runner.py`),
returning one small dataclass instead of setting a hidden global context.
Shapes: docs/conventions.md.

Two choices of the caller, each decided here and nowhere else:
    block tables   a prefill gets them only when some keys are not among its tokens (nano-vllm's rule: a
                   prefix hit or a later chunk), unless the caller's attention always reads the cache
                   (`always_block_tables=True`: the engine's model runner) or it is a verification
    padding        `prepare_decode(..., padded_batch_size, max_num_blocks)` adds the rows a CUDA graph of
                   that batch size replays (slot -1: nothing written; context length 0: nothing read) and
                   pads every table to the width the graph was captured with (engine/decode_graphs.py)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
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


def pad_block_tables(tables: list[list[int]], device="cpu", num_rows: int | None = None,
                     width: int | None = None) -> torch.Tensor:
    """Rows padded with -1 to the longest table (or to `width`), and rows of -1 added up to `num_rows`:
    [num_rows or B, width or M] int32."""
    longest = max((len(t) for t in tables), default=0)
    num_rows = len(tables) if num_rows is None else num_rows
    width = longest if width is None else width
    if num_rows < len(tables) or width < longest:
        raise ValueError(f"pad_block_tables: expected at most {num_rows} tables of at most {width} blocks, "
                         f"got {len(tables)} tables, the longest of {longest}")
    padded = np.full((num_rows, width), -1, dtype=np.int32)                  # [num_rows, width]
    for i, table in enumerate(tables):
        padded[i, : len(table)] = table
    return torch.from_numpy(padded).to(device)                               # [num_rows, width]


def _varlen_inputs(chunks, always_block_tables: bool, device) -> ModelInputs:
    """chunks: (seq, token_ids, start, end) each: positions start..end-1 of token_ids are this step's.
    Block tables when asked, or when some keys are not among this step's tokens (cu_seqlens_k[-1] >
    cu_seqlens_q[-1]: attention must read the cache); else None."""
    input_ids, positions, slot_mapping = [], [], []
    cu_q, cu_k, max_q, max_k = [0], [0], 0, 0
    for seq, token_ids, start, end in chunks:
        input_ids += token_ids[start:end]
        positions += range(start, end)
        cu_q.append(cu_q[-1] + end - start)
        cu_k.append(cu_k[-1] + end)
        max_q, max_k = max(max_q, end - start), max(max_k, end)
        slot_mapping += compute_slot_mapping(seq.block_table, start, end, seq.block_size)
    block_tables = None
    if always_block_tables or cu_k[-1] > cu_q[-1]:
        block_tables = pad_block_tables([c[0].block_table for c in chunks], device)   # [B, M]
    return ModelInputs(is_prefill=True, input_ids=_i64(input_ids, device), positions=_i64(positions, device),
                       slot_mapping=_i32(slot_mapping, device), cu_seqlens_q=_i32(cu_q, device),
                       cu_seqlens_k=_i32(cu_k, device), max_seqlen_q=max_q, max_seqlen_k=max_k,
                       context_lens=None, block_tables=block_tables)


def prepare_prefill(seqs: list[Sequence], device="cpu", always_block_tables: bool = False) -> ModelInputs:
    """Positions start..end-1 of each sequence, start = num_cached_tokens, end = start + scheduled tokens.

    Block tables are passed only when some keys are not among this step's tokens (a prefix hit or a
    later chunk): then cu_seqlens_k[-1] > cu_seqlens_q[-1] and attention must read the cache. An attention
    that always reads the cache (the engine's) asks for them with `always_block_tables=True`.
    """
    chunks = []
    for seq in seqs:
        start = seq.num_cached_tokens
        end = seq.num_tokens if seq.num_scheduled_tokens is None else start + seq.num_scheduled_tokens
        if not start < end <= seq.num_tokens:
            raise ValueError(f"seq {seq.seq_id}: nothing to prefill (start {start}, end {end}, "
                             f"num_tokens {seq.num_tokens})")
        chunks.append((seq, seq.token_ids, start, end))
    return _varlen_inputs(chunks, always_block_tables, device)


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
    return _varlen_inputs(chunks, True, device)


def prepare_decode(seqs: list[Sequence], device="cpu", padded_batch_size: int | None = None,
                   max_num_blocks: int | None = None) -> ModelInputs:
    """One token per sequence: its last token at position len - 1, written at that position's slot.

    The slot is `block_table[-1] * block_size + last_block_num_tokens - 1`: the new token is already
    counted in `len(seq)` (the scheduler appended its block in `may_append`).

    For a CUDA graph (engine/decode_graphs.py, as nano-vllm's `run_model` pads its graph variables): rows
    up to `padded_batch_size` that read and write nothing (token 0 at position 0, slot -1, context length
    0, a table of -1), every table `max_num_blocks` wide.
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
    num_rows = len(seqs) if padded_batch_size is None else padded_batch_size
    padding = [0] * (num_rows - len(seqs))         # pad_block_tables refuses num_rows < len(seqs)
    block_tables = pad_block_tables([s.block_table for s in seqs], device, num_rows, max_num_blocks)
    return ModelInputs(is_prefill=False, input_ids=_i64(input_ids + padding, device),
                       positions=_i64(positions + padding, device),
                       slot_mapping=_i32(slot_mapping + [-1] * len(padding), device),
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=1, max_seqlen_k=max_k,
                       context_lens=_i32(context_lens + padding, device), block_tables=block_tables)
