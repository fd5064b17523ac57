"""Exercise 132 (hard): scheduler with preemption. Notebook 14, "Capstone: a mini engine".
Grade: python practice/judge.py 132

A continuous-batching engine repeats: schedule -> run the model on the scheduled sequences -> append one
sampled token to each (and finish the ones that are done). `schedule` decides who runs this step. It is
nano-vllm's `Scheduler.schedule` (`nanovllm/engine/scheduler.py`) as a function over library objects:
`Sequence`, `SequenceStatus` and the prefix-caching `BlockManager` of `pagedkv_lib`.

Timing rule (nano-vllm): the engine appends the sampled token AFTER the step, so when `schedule` runs a
decode, len(seq) already counts the token whose K/V this step writes, at position len(seq) - 1.
`block_manager.can_append(seq)` says whether the pool can hold it, `may_append(seq)` adds the block it needs.
"""
from __future__ import annotations

from collections import deque

from pagedkv_lib import BlockManager, Sequence, SequenceStatus  # noqa: F401 (the stub leaves it to you)


def schedule(waiting: deque[Sequence], running: deque[Sequence], block_manager: BlockManager,
             max_num_seqs: int, max_num_batched_tokens: int) -> tuple[list[Sequence], bool]:
    """One scheduling step: admit (prefill) if possible, else decode every running sequence, preempting
    by recompute when the pool runs dry. Returns (scheduled, is_prefill).

    Args:
        waiting: deque of Sequences with status WAITING and an empty block_table, oldest first. Mutated.
        running: deque of Sequences with status RUNNING, each holding its blocks, oldest admission first.
            Mutated.
        block_manager: the BlockManager that holds every running sequence's blocks. Change it only through
            can_allocate(seq), allocate(seq), can_append(seq), may_append(seq) and deallocate(seq).
        max_num_seqs: int >= 1, the most sequences `running` may hold after admissions.
        max_num_batched_tokens: int >= 1, the token budget of a prefill step.
    Returns: (scheduled, is_prefill): a new list of the Sequences scheduled this step, in the order they
        were scheduled, and a bool. ([], False) when nothing can run.

    Prefill, tried first. num_batched_tokens = 0. While waiting is not empty and len(running) < max_num_seqs,
        look at seq = waiting[0]. If num_batched_tokens + len(seq) > max_num_batched_tokens, or
        block_manager.can_allocate(seq) is False, stop: FIFO, nobody behind it is admitted either.
        Else block_manager.allocate(seq) (it finds prefix hits and sets seq.num_cached_tokens),
        num_batched_tokens += len(seq) (every token counts, cached or not), seq.status = RUNNING, move seq
        from the front of waiting to the back of running, and schedule it.
        If anyone was admitted, return (admitted, True): a prefill step decodes nobody.
    Decode, otherwise. Take the running sequences from the FRONT, one at a time. For each seq:
        while not block_manager.can_append(seq): if running still holds sequences not yet taken this step,
            preempt the newest of them (the back of running); else preempt seq itself and go on to the next.
        If seq was not preempted: block_manager.may_append(seq) and schedule it.
        To preempt s: block_manager.deallocate(s) (frees its blocks, resets num_cached_tokens),
            s.status = WAITING, waiting.appendleft(s): it keeps its tokens and is recomputed first.
        At the end `running` holds exactly the scheduled sequences, in order. Return (scheduled, False).

    Example (block_size 4, 7 blocks): running = [A, B, C], 9 tokens each (2 blocks each, 1 block free),
        waiting = []. A decode step: A takes the free block; B cannot grow, so C (the newest) is preempted
        and its 2 blocks freed; B takes one. Returns ([A, B], False); running = [A, B], waiting = [C],
        C.status == WAITING, C.block_table == [], 1 block free.
    """
    raise NotImplementedError("schedule: your code here (exercise 132)")
