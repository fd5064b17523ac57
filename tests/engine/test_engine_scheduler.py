"""The scheduler step (admit, append, preempt by recompute), the engine's statistics and its config checks."""
from __future__ import annotations

from collections import deque

import pytest
import torch

from pagedkv_lib import BlockManager, Sequence, SequenceStatus
from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams, schedule

TINY = ModelConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, vocab_size=128)


def seqs_of(lengths, block_size, start_token=0):
    """Sequences with distinct tokens (no accidental prefix hits), ids 0, 1, ..."""
    out, t = [], start_token
    for i, n in enumerate(lengths):
        out.append(Sequence(list(range(t, t + n)), block_size, seq_id=i))
        t += n
    return out


def admit_all(seqs, bm):
    waiting, running = deque(seqs), deque()
    scheduled, is_prefill = schedule(waiting, running, bm, 16, 10_000)
    assert is_prefill and scheduled == seqs and not waiting
    return waiting, running


def ids(queue):
    return [s.seq_id for s in queue]


def test_schedule_prefill_stops_at_token_budget():
    bm = BlockManager(32, 4)
    waiting, running = deque(seqs_of([10, 10, 10], 4)), deque()
    scheduled, is_prefill = schedule(waiting, running, bm, 16, 25)
    assert is_prefill and ids(scheduled) == [0, 1] and ids(waiting) == [2] and ids(running) == [0, 1]
    assert [s.status for s in scheduled] == [SequenceStatus.RUNNING] * 2
    assert waiting[0].status == SequenceStatus.WAITING and waiting[0].block_table == []


def test_schedule_max_num_seqs_counts_the_running_queue():
    bm = BlockManager(32, 4)
    seqs = seqs_of([3, 3, 3, 3], 4)
    waiting, running = deque(seqs[2:]), deque()
    running.extend(seqs[:2])
    for s in seqs[:2]:
        bm.allocate(s)
        s.status = SequenceStatus.RUNNING
    scheduled, is_prefill = schedule(waiting, running, bm, 3, 100)
    assert is_prefill and ids(scheduled) == [2] and ids(running) == [0, 1, 2] and ids(waiting) == [3]
    scheduled, is_prefill = schedule(waiting, running, bm, 3, 100)   # full: decode the three instead
    assert not is_prefill and ids(scheduled) == [0, 1, 2]


def test_schedule_is_fifo_a_head_that_does_not_fit_blocks_the_queue():
    bm = BlockManager(4, 4)
    big, small = seqs_of([20, 2], 4)               # 20 tokens need 5 blocks: more than the pool
    waiting, running = deque([big, small]), deque()
    assert schedule(waiting, running, bm, 16, 100) == ([], False)
    assert ids(waiting) == [0, 1] and bm.num_free_blocks == 4 and big.block_table == []


def test_schedule_preempts_the_newest_first_and_requeues_at_the_front():
    bm = BlockManager(7, 4)
    seqs = seqs_of([8, 8, 8], 4)                   # 2 blocks each, 1 left free
    waiting, running = admit_all(seqs, bm)
    for s in seqs:
        s.append_token(1000 + s.seq_id)            # 9 tokens: the next decode starts a third block each
    scheduled, is_prefill = schedule(waiting, running, bm, 16, 100)
    # 0 takes the free block; 1 cannot grow: preempt 2 (newest), whose 2 blocks let 1 grow
    assert not is_prefill and ids(scheduled) == [0, 1] and ids(running) == [0, 1] and ids(waiting) == [2]
    assert seqs[2].status == SequenceStatus.WAITING and seqs[2].block_table == []
    assert seqs[2].num_tokens == 9 and seqs[2].num_cached_tokens == 0   # tokens kept: recompute later
    assert bm.num_free_blocks == 1


def test_schedule_preempts_itself_when_nobody_else_is_left():
    bm = BlockManager(5, 4)
    seqs = seqs_of([8, 8], 4)
    waiting, running = admit_all(seqs, bm)
    for s in seqs:
        s.append_token(7)
    scheduled, _ = schedule(waiting, running, bm, 16, 100)
    assert ids(scheduled) == [0] and ids(running) == [0] and ids(waiting) == [1]   # 0 was already scheduled


def test_schedule_several_preemptions_keep_the_waiting_order():
    bm = BlockManager(8, 4)
    seqs = seqs_of([8, 8, 8, 8], 4)
    waiting, running = admit_all(seqs, bm)         # the pool is full
    waiting.append(Sequence([500], 4, seq_id=9))
    for s in seqs:
        s.append_token(1)
    preempted = []
    scheduled, _ = schedule(waiting, running, bm, 16, 100, preempted)
    # 0 needs a block: preempt 3 (2 free), 0 takes one; 1 takes the other; 2 needs one: preempt 2 itself
    assert ids(scheduled) == [0, 1] and ids(waiting) == [2, 3, 9]
    assert ids(preempted) == [3, 2], "each preemption is recorded where it happens, in order"
    assert [s.num_scheduled_tokens for s in scheduled] == [1, 1]


def test_preempted_sequence_is_recomputed_with_its_own_blocks_as_prefix_hits():
    bm = BlockManager(7, 4)
    seqs = seqs_of([8, 8, 8], 4)
    waiting, running = admit_all(seqs, bm)
    for s in seqs:
        s.append_token(1)
    schedule(waiting, running, bm, 16, 100)        # preempts seq 2, whose blocks keep their hashes
    for s in running:                              # two sequences finish: their blocks return to the pool
        bm.deallocate(s)
    running.clear()
    scheduled, is_prefill = schedule(waiting, running, bm, 16, 100)
    assert is_prefill and ids(scheduled) == [2]
    # deallocate frees in reverse, so seq 2's LAST block went first to the free queue and seq 1's growth took
    # it in the same step; its first block survived with its hash and is found again
    assert seqs[2].num_cached_tokens == 4


@pytest.fixture()
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_engine_statistics_count_prefix_hits_and_preemptions(one_thread):
    config = EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=12, max_num_seqs=8,
                          max_num_batched_tokens=64, max_model_len=48)
    llm = LLM(config)
    system = list(range(12))
    prompts = [system + [20 + i, 40 + i] for i in range(4)]                  # 14 tokens, 3 shared blocks
    llm.generate(prompts, SamplingParams(max_tokens=12), use_tqdm=False)
    first = llm.stats[0]
    assert first.is_prefill and first.num_seqs == 4
    assert first.num_cached_tokens == 3 * 12                                 # 3 followers hit 12 tokens each
    assert first.num_computed_tokens == 4 * 14 - 36
    assert sum(s.num_preempted for s in llm.stats) > 0
    assert llm.block_manager.num_free_blocks == 12
    decode = [s for s in llm.stats if not s.is_prefill]
    assert all(s.num_computed_tokens == s.num_seqs for s in decode)


def test_engine_temperature_sampling_is_seeded(one_thread):
    config = EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=32, max_model_len=64)
    prompts = [[1, 2, 3], [4, 5, 6, 7]]
    params = SamplingParams(temperature=1.0, max_tokens=8)
    a = LLM(config, seed=1).generate(prompts, params, use_tqdm=False)
    b = LLM(config, seed=1).generate(prompts, params, use_tqdm=False)
    c = LLM(config, seed=2).generate(prompts, params, use_tqdm=False)
    greedy = LLM(config, seed=1).generate(prompts, SamplingParams(max_tokens=8), use_tqdm=False)
    assert a == b and a != c and a != greedy


@pytest.mark.parametrize("kwargs, match", [
    ({"max_num_batched_tokens": 100, "max_model_len": 200}, "max_num_batched_tokens"),
    ({"num_kvcache_blocks": 3, "block_size": 16, "max_model_len": 64}, "num_kvcache_blocks"),
    ({"block_size": 0}, "block_size"),
    ({"max_model_len": 10_000}, "max_position_embeddings"),
])
def test_engine_config_rejects_configs_that_could_never_finish(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EngineConfig(**kwargs)


def test_model_config_and_requests_are_checked(one_thread):
    with pytest.raises(ValueError, match="GQA"):
        ModelConfig(num_attention_heads=6, num_key_value_heads=4)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)
    llm = LLM(EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=16, max_model_len=32))
    with pytest.raises(ValueError, match="max_model_len"):
        llm.add_request(list(range(30)), SamplingParams(max_tokens=8))
    with pytest.raises(ValueError, match="token ids"):
        llm.add_request([1, 128], SamplingParams(max_tokens=2))


def test_schedule_sets_num_scheduled_tokens_to_the_uncached_tokens_of_an_admitted_sequence():
    bm = BlockManager(16, 4)
    first = Sequence(list(range(10)), 4, seq_id=0)
    waiting, running = deque([first]), deque()
    schedule(waiting, running, bm, 16, 100)
    assert first.num_scheduled_tokens == 10
    second = Sequence(list(range(9)) + [99, 98], 4, seq_id=1)   # its first 2 blocks are first's
    waiting.append(second)
    scheduled, is_prefill = schedule(waiting, running, bm, 16, 100)
    assert is_prefill and scheduled == [second]
    assert second.num_cached_tokens == 8 and second.num_scheduled_tokens == 3


def test_stats_count_each_preempted_sequence_once_and_requests_carry_their_sampling_params():
    """The pool runs dry: the preemptions StepStats counts are the sequences that went back to waiting."""
    config = EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=10, max_model_len=32,
                          max_num_batched_tokens=64)
    llm = LLM(config)
    params = [SamplingParams(max_tokens=n) for n in (12, 9, 14, 7)]
    for i, sp in enumerate(params):
        llm.add_request(list(range(10 * i, 10 * i + 6)), sp)
    assert [s.sampling_params for s in llm.scheduler.waiting] == params
    requeued = 0
    while not llm.is_finished():
        running = {s.seq_id for s in llm.scheduler.running}
        llm.step()
        requeued += sum(1 for s in llm.scheduler.waiting if s.seq_id in running)
    assert sum(s.num_preempted for s in llm.stats) == requeued > 0


def test_the_scheduler_refuses_a_sequence_without_its_sampling_params():
    scheduler = LLM(EngineConfig(model=TINY, block_size=4, num_kvcache_blocks=16, max_model_len=32)).scheduler
    with pytest.raises(ValueError, match="expected its sampling_params"):
        scheduler.add(Sequence([1, 2, 3], 4, seq_id=0))
