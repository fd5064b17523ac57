"""The scheduler: continuous batching over a waiting and a running queue, preemption by recompute.

nano-vllm's `nanovllm/engine/scheduler.py`, in two parts: `schedule`, one scheduling step over library
objects (exercise 132 grades it), and `Scheduler`, which owns the queues and the `BlockManager`, counts the
step's preemptions, and finishes sequences in `postprocess` by their own `SamplingParams`
(`Sequence.sampling_params`, as nano-vllm's `Sequence` carries them).

One step (the engine then runs the model on the scheduled sequences and appends one token to each):

    prefill  admit from the FRONT of `waiting` while (a) the running queue is below max_num_seqs, (b) the
             step's token budget holds this sequence's len(seq) tokens, (c) the BlockManager can allocate it
             (prefix hits included); allocate, mark RUNNING, append to `running`. Stop at the first refusal:
             FIFO, no skipping ahead. If anyone was admitted, the step is a prefill step.
    decode   otherwise every running sequence, in order, gets one more token: while the pool cannot hold it
             (`can_append` false), preempt the NEWEST running sequence not yet scheduled this step (free its
             blocks, status WAITING, push it to the FRONT of `waiting`: it will be recomputed first); if no
             one else is left, preempt the sequence itself. Else `may_append` and schedule it. Afterwards
             `running` holds exactly the scheduled sequences, in order.

Speculating (EngineConfig.num_speculative_tokens > 0), a decode step also makes room for each sequence's
drafts: `can_append(seq, k)` / `may_append(seq, k)` with k = len(seq.draft_token_ids) lookahead slots, as
vLLM V1 schedules `num_lookahead_tokens`; a preempted sequence loses its drafts with its blocks. After the
verification `postprocess` appends what was accepted and cuts the blocks back (`rollback.truncate`).

With a CPU tier (EngineConfig.num_cpu_blocks > 0) the block manager is a `TieredBlockManager`: the
same calls, and the copies each step needs queued for the connector (engine/kv_offload.py).

With overlap scheduling (engine/future_tokens.py) a sequence is scheduled again before its last token is
known, so `Scheduler.schedule` leaves out a running sequence that already holds max_tokens completion tokens
(its last one in flight: it finishes when that one is read, whatever it is; vLLM's async scheduler skips such
a request the same way) but still counts it against max_num_seqs, and `postprocess` may finish a sequence
that the step in between preempted (it leaves `waiting`, not `running`). Without overlap neither case can
arise.

Two choices differ from nano-vllm: max_num_seqs bounds the running queue (vLLM's `max_num_running_reqs`),
where nano-vllm counts only this step's admissions, so a decode step serves every running sequence; and the
token budget counts every token of an admitted sequence, cached or not (nano-vllm checks len(seq) against
the budget but adds only the uncached tokens).
"""
from __future__ import annotations

from collections import deque

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.rollback import truncate
from pagedkv_lib.core.sampling_params import SamplingParams
from pagedkv_lib.core.sequence import Sequence, SequenceStatus
from pagedkv_lib.core.tiered_block_manager import TieredBlockManager

from .config import EngineConfig


def preempt(seq: Sequence, waiting: deque[Sequence], block_manager: BlockManager) -> None:
    """Preemption by recompute: drop the sequence's blocks; it waits at the front, tokens kept."""
    block_manager.deallocate(seq)
    seq.draft_token_ids = []
    seq.status = SequenceStatus.WAITING
    waiting.appendleft(seq)


def schedule(waiting: deque[Sequence], running: deque[Sequence], block_manager: BlockManager,
             max_num_seqs: int, max_num_batched_tokens: int,
             preempted: list[Sequence] | None = None) -> tuple[list[Sequence], bool]:
    """One scheduling step (module docstring): returns (scheduled sequences, is_prefill); ([], False) when
    nothing can run. Mutates `waiting`, `running`, the sequences and `block_manager`; sets each scheduled
    sequence's `num_scheduled_tokens` (its uncached tokens, or 1 + its drafts) and appends each sequence it
    preempts to `preempted` when that list is given (vLLM's scheduler collects its `preempted_reqs` so)."""
    scheduled: list[Sequence] = []
    num_batched_tokens = 0
    while waiting and len(running) < max_num_seqs:
        seq = waiting[0]
        if num_batched_tokens + len(seq) > max_num_batched_tokens or not block_manager.can_allocate(seq):
            break
        block_manager.allocate(seq)
        num_batched_tokens += len(seq)
        seq.num_scheduled_tokens = len(seq) - seq.num_cached_tokens
        seq.status = SequenceStatus.RUNNING
        running.append(waiting.popleft())
        scheduled.append(seq)
    if scheduled:
        return scheduled, True

    while running:
        seq = running.popleft()
        while not block_manager.can_append(seq, len(seq.draft_token_ids)):
            victim = running.pop() if running else seq           # the newest one left, else itself
            preempt(victim, waiting, block_manager)
            if preempted is not None:
                preempted.append(victim)
            if victim is seq:
                break
        else:
            block_manager.may_append(seq, len(seq.draft_token_ids))
            seq.num_scheduled_tokens = 1 + len(seq.draft_token_ids)
            scheduled.append(seq)
    running.extend(scheduled)          # every running sequence was taken: scheduled or preempted
    return scheduled, False


class Scheduler:
    def __init__(self, config: EngineConfig):
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.eos_token_id = config.model.eos_token_id
        if config.num_cpu_blocks:      # a CPU tier under the pool: evicted prefix blocks written out
            self.block_manager = TieredBlockManager(config.num_kvcache_blocks, config.block_size,
                                                    config.num_cpu_blocks)
        else:
            self.block_manager = BlockManager(config.num_kvcache_blocks, config.block_size)
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.num_preempted = 0       # preemptions in the last step

    def is_finished(self) -> bool:
        return not self.waiting and not self.running

    def add(self, seq: Sequence) -> None:
        """Queue a sequence; it carries its `SamplingParams` (`seq.sampling_params`)."""
        if not isinstance(seq.sampling_params, SamplingParams):
            raise ValueError(f"seq {seq.seq_id}: expected its sampling_params (a SamplingParams), "
                             f"got {seq.sampling_params!r}")
        self.waiting.append(seq)

    def schedule(self) -> tuple[list[Sequence], bool]:
        """One step of `schedule` over the queues; ([], False) only while every running sequence is held
        (overlap scheduling: its last token in flight and its max_tokens reached)."""
        held = [s for s in self.running if s.num_completion_tokens >= s.sampling_params.max_tokens]
        for seq in held:
            self.running.remove(seq)
        preempted: list[Sequence] = []
        seats = self.max_num_seqs - len(held)           # a held sequence still runs: it keeps its seat
        seqs, is_prefill = schedule(self.waiting, self.running, self.block_manager, seats,
                                    self.max_num_batched_tokens, preempted)
        self.running.extend(held)
        self.num_preempted = len(preempted)
        if not seqs and not held:
            raise RuntimeError(f"nothing to schedule: {len(self.waiting)} waiting, {len(self.running)} "
                               f"running, {self.block_manager.num_free_blocks} free blocks")
        return seqs, is_prefill

    def ends(self, seq: Sequence, token_id: int, num_completion_tokens: int) -> bool:
        """Whether `token_id`, the sequence's `num_completion_tokens`-th completion token, ends it: EOS
        (unless its params ignore EOS) or max_tokens reached."""
        params = seq.sampling_params
        eos = not params.ignore_eos and token_id == self.eos_token_id
        return eos or num_completion_tokens >= params.max_tokens

    def finish(self, seq: Sequence) -> None:
        """Free a finished sequence's blocks and take it out of its queue: `running`, or `waiting` when it
        was preempted while its last token was in flight (overlap scheduling)."""
        self.block_manager.deallocate(seq)
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        seq.status = SequenceStatus.FINISHED

    def postprocess(self, seqs: list[Sequence], token_ids: list[list[int]]) -> list[Sequence]:
        """Append each sequence's new tokens (one, or a verification's accepted drafts and bonus) up to
        max_tokens or EOS, finishing (and freeing) those that reach either; a verified sequence that goes on
        keeps only the blocks of its computed tokens (all but the last, whose K/V the next step writes)."""
        finished = []
        for seq, new_token_ids in zip(seqs, token_ids, strict=True):
            done = False
            for token_id in new_token_ids:
                seq.append_token(token_id)
                done = self.ends(seq, token_id, seq.num_completion_tokens)
                if done:
                    break
            if done:
                self.finish(seq)
                finished.append(seq)
            elif seq.draft_token_ids:
                truncate(self.block_manager, seq, seq.num_tokens - 1)
            seq.draft_token_ids = []
        return finished
