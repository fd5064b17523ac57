"""Future tokens: what overlap scheduling puts in a sequence for the token its last step has not returned yet.

Shapes: docs/conventions.md. With `EngineConfig.overlap_scheduling` the host schedules step t+1 and launches
it while the device still runs step t, so step t+1's input ids are partly unknown on the host: the token
each sequence samples at step t. The engine appends a placeholder instead, `placeholder_id(row)` = -(row + 1)
for the sequence sampled in row `row` of step t, and the device replaces it, just before step t+1's forward,
by row `row` of step t's sampled-token tensor (`resolve_placeholders`): the token never travels to the host
and back between the two steps. Token ids are >= 0, so a negative id can only be a placeholder.

This is SGLang's future map (`python/sglang/srt/managers/overlap_utils.py` at f1dea62: `FutureMap` keeps a
circular device buffer of sampled ids and `_resolve_future_token_ids` writes
`where(input_ids < 0, buf[-input_ids], input_ids)`). Here the map is just the previous step's token tensor:
a placeholder is resolved on the host as soon as its step's tokens are read, so by the time a step is
scheduled only the step before it can still be in flight. vLLM's async scheduling keeps a count instead
(`Request.num_output_placeholders`, `vllm/v1/core/sched/async_scheduler.py` at 7ab8a61) and its model runner
copies the previous step's sampled ids into the input ids on the device.

`fill_placeholder` is the host's half: once step t's tokens are read, the placeholder at `position` becomes
the real token. A block is registered in the prefix cache when the step that writes the K/V of its last
position is scheduled (`BlockManager.may_append`), but never while that position holds a placeholder
(`BlockManager.register_block`): if the sequence is already in the step launched since, which writes
`position`, the block that position completes is registered here, once its token is known; if it is not,
may_append registers the block when that step comes, and if the sequence ends first, nobody does (the K/V of
a sequence's last token is never written). vLLM likewise caches the blocks of a request only up to its known
tokens (`cache_blocks(request, num_computed_tokens - num_output_placeholders)`, same file). A sequence
preempted before its step is read has no table left: the block went back to the pool holding no hash, so it
is neither a hit nor, with a CPU tier, written out under a hash that no prompt can hit.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence


def placeholder_id(row: int) -> int:
    """The input id standing for the token that row `row` of the previous step samples."""
    return -(row + 1)


def resolve_placeholders(input_ids: torch.Tensor, future: torch.Tensor) -> torch.Tensor:
    """In place, on input_ids' device: every placeholder -(row + 1) becomes future[row]. input_ids [T],
    future [B_prev] (the previous step's sampled ids, int64). Returns input_ids."""
    rows = (-input_ids - 1).clamp_(min=0, max=future.shape[0] - 1)       # [T] placeholders' rows, else 0
    return input_ids.copy_(torch.where(input_ids < 0, future[rows], input_ids))  # [T]


@dataclass
class PendingTokens:
    """A step's sampled ids on their way to the host. `tokens` [B] stays on the device (the next step's
    future map); on CUDA an asynchronous copy into the pinned `host` [B] was queued right after sampling and
    `ready` recorded after it, so `read` waits for THIS step only, not for any step launched later."""
    tokens: torch.Tensor
    host: torch.Tensor | None = None
    ready: torch.cuda.Event | None = None

    def read(self) -> list[int]:
        if self.ready is None:
            return self.tokens.numpy().tolist()
        self.ready.synchronize()
        return self.host.numpy().tolist()


@dataclass
class InFlightStep:
    """A launched step whose tokens the host has not read: its sequences, and where each one's placeholder
    sits in its token_ids (the sequence may hold a second one, from the step launched after it)."""
    step: int
    seqs: list[Sequence]
    positions: list[int]
    pending: PendingTokens


def fill_placeholder(block_manager: BlockManager, seq: Sequence, position: int, token_id: int) -> None:
    """seq.token_ids[position] = token_id; if that token completes a block still in seq's table and the
    sequence holds a token after it (the placeholder of the step launched since, which writes `position`'s
    K/V), the block is registered in the prefix cache (module docstring)."""
    if seq.token_ids[position] >= 0:
        raise ValueError(f"seq {seq.seq_id}: expected a placeholder (< 0) at position {position}, "
                         f"got token {seq.token_ids[position]}")
    seq.token_ids[position] = token_id
    i = position // block_manager.block_size
    completes = (position + 1) % block_manager.block_size == 0
    if completes and i < len(seq.block_table) and position + 1 < len(seq):
        block_manager.register_block(seq, i)
