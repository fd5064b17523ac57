"""Sequence: one request's tokens and its block table, in nano-vllm's shape (`nanovllm/engine/sequence.py`).

`num_tokens` counts prompt and generated tokens; `num_cached_tokens` of them are already in the cache
(a prefix hit, or earlier chunks); `num_scheduled_tokens` of the rest are computed in the step the scheduler
has just put the sequence in (None until a scheduler sets it: `prepare_prefill` then takes every uncached
token); `block_table` lists the physical block of each logical block. `sampling_params` travel with the
sequence, as in nano-vllm (`SamplingParams`, core/sampling_params.py; None for a sequence no engine serves).
`draft_token_ids` holds the tokens a speculative proposer guessed for the next step (vLLM's
`Request.spec_token_ids`): never part of `token_ids` until a verification accepts them.
Unlike nano-vllm, `block_size` is a per-sequence argument, not a class attribute set from the config.
"""
from __future__ import annotations

from enum import Enum, auto
from itertools import count

from .sampling_params import SamplingParams
from .validation import check_positive_int


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    _ids = count()

    def __init__(self, token_ids: list[int], block_size: int = 16, seq_id: int | None = None,
                 sampling_params: SamplingParams | None = None):
        check_positive_int("block_size", block_size)
        if len(token_ids) == 0:
            raise ValueError("token_ids: expected at least one prompt token, got []")
        self.seq_id = next(Sequence._ids) if seq_id is None else seq_id
        self.status = SequenceStatus.WAITING
        self.token_ids = list(token_ids)
        self.num_prompt_tokens = len(token_ids)
        self.block_size = block_size
        self.num_cached_tokens = 0
        self.num_scheduled_tokens: int | None = None   # set by the scheduler; None = all uncached
        self.sampling_params = sampling_params
        self.block_table: list[int] = []
        self.draft_token_ids: list[int] = []            # unverified: not in token_ids, not in any hash

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def last_token(self) -> int:
        return self.token_ids[-1]

    @property
    def num_completion_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def completion_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_cached_blocks(self) -> int:
        return self.num_cached_tokens // self.block_size

    @property
    def num_blocks(self) -> int:
        return -(-self.num_tokens // self.block_size)

    @property
    def last_block_num_tokens(self) -> int:
        """Tokens in the last block, in [1, block_size] (never 0)."""
        return self.num_tokens - (self.num_blocks - 1) * self.block_size

    def block(self, i: int) -> list[int]:
        """The token ids of logical block i (the last one may be partial)."""
        if not 0 <= i < self.num_blocks:
            raise IndexError(f"block {i}: expected 0 <= i < {self.num_blocks}")
        return self.token_ids[i * self.block_size : (i + 1) * self.block_size]

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def __repr__(self) -> str:
        return (f"Sequence(id={self.seq_id}, tokens={self.num_tokens}, cached={self.num_cached_tokens}, "
                f"block_table={self.block_table})")
