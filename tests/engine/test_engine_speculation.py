"""n-gram speculation in the mini engine: the greedy tokens are the same with and without it.

The workload of test_engine_equivalence (a shared system prompt, an identical pair, a pool small enough to
preempt by recompute) at block sizes 1, 4 and 16. The tiny random model seldom repeats itself, so besides
the n-gram proposer a second proposer guesses from the known answer: right for a random number of tokens,
then wrong, so that every acceptance length (none, some, all k plus the bonus) and every block boundary is
crossed. After every step each hashed block of a running sequence must hold only computed tokens.
"""
from __future__ import annotations

import random

import pytest
import torch
from test_engine_equivalence import MAX_MODEL_LEN, POOL_TOKENS, make_requests, one_thread  # noqa: F401

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams


class KnownAnswerProposer:
    """Drafts the reference continuation for a random number of tokens, then a wrong token."""

    def __init__(self, prompts, answers, k: int, seed: int):
        self.answers = {tuple(p): a for p, a in zip(prompts, answers, strict=True)}
        self.k = k
        self.rng = random.Random(seed)

    def propose(self, token_ids, max_num_tokens):
        prompt = next(p for p in self.answers if tuple(token_ids[: len(p)]) == p)
        done = len(token_ids) - len(prompt)
        right = self.answers[prompt][done: done + self.rng.randint(0, self.k)]
        drafts = list(right) + [(right[-1] + 1) % 512 if right else 0]
        return drafts[: min(self.k, max_num_tokens)]


def config(block_size: int, k: int) -> EngineConfig:
    return EngineConfig(block_size=block_size, num_kvcache_blocks=POOL_TOKENS // block_size, max_num_seqs=8,
                        max_num_batched_tokens=128, max_model_len=MAX_MODEL_LEN, num_speculative_tokens=k)


def run(llm: LLM, prompts, max_tokens) -> list[list[int]]:
    """generate, step by step, checking that no hashed block of a running sequence holds an unverified or
    unwritten token (the last token's K/V is written by the next step)."""
    ids = [llm.add_request(p, SamplingParams(max_tokens=n)) for p, n in zip(prompts, max_tokens, strict=True)]
    bm, outputs = llm.block_manager, {}
    while not llm.is_finished():
        outputs.update((s.seq_id, s.completion_token_ids) for s in llm.step())
        for seq in llm.scheduler.running:
            for i, b in enumerate(seq.block_table):
                if bm.blocks[b].hash != -1:
                    assert (i + 1) * bm.block_size <= len(seq) - 1, f"seq {seq.seq_id} block {i} hashed early"
                    assert bm.blocks[b].token_ids == seq.block(i)
    return [outputs[i] for i in ids]


@pytest.fixture(scope="module")
def plain():
    prompts, max_tokens = make_requests()
    return {bs: LLM(config(bs, 0)).generate(prompts, [SamplingParams(max_tokens=n) for n in max_tokens],
                                            use_tqdm=False) for bs in (1, 4, 16)}


@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("proposer", ["ngram", "known_answer"])
def test_speculation_gives_the_greedy_tokens_of_plain_decoding(plain, block_size, proposer):
    prompts, max_tokens = make_requests()
    llm = LLM(config(block_size, 4))
    if proposer == "known_answer":
        llm.proposer = KnownAnswerProposer(prompts, plain[block_size], 4, seed=block_size)
    got = run(llm, prompts, max_tokens)
    assert got == plain[block_size]
    drafted = sum(s.num_draft_tokens for s in llm.stats)
    accepted = sum(s.num_accepted_tokens for s in llm.stats)
    assert sum(s.num_preempted for s in llm.stats) > 0
    assert sum(s.num_cached_tokens for s in llm.stats) > 0
    assert llm.block_manager.num_free_blocks == POOL_TOKENS // block_size
    assert drafted > 0
    if proposer == "known_answer":
        assert 0 < accepted < drafted
        decode_steps = [s for s in llm.stats if not s.is_prefill]
        assert len(decode_steps) < sum(max_tokens) - len(prompts)   # fewer steps than tokens to decode


def test_speculation_refuses_sampling():
    llm = LLM(config(4, 2))
    with pytest.raises(ValueError, match="temperature"):
        llm.add_request([1, 2, 3], SamplingParams(temperature=0.7, max_tokens=8))


def test_num_speculative_tokens_is_checked():
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        EngineConfig(num_speculative_tokens=-1)
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        EngineConfig(num_speculative_tokens=2, prompt_lookup_min=4, prompt_lookup_max=2)


def test_verification_logits_equal_decoding_one_token_at_a_time():
    """The chunk of q_len = k + 1 sees what k + 1 single decode steps see: the argmax at every position
    of a verification equals greedy decoding's next tokens (drafts = the true continuation)."""
    prompts, max_tokens = make_requests()
    prompt, answer = prompts[0], LLM(config(4, 0)).generate([prompts[0]], SamplingParams(max_tokens=9),
                                                               use_tqdm=False)[0]
    llm = LLM(config(4, 8))
    llm.proposer = KnownAnswerProposer([prompt], [answer + [0]], 8, seed=0)
    llm.proposer.rng.randint = lambda lo, hi: hi                     # always the whole true continuation
    got = llm.generate([prompt], SamplingParams(max_tokens=9), use_tqdm=False)[0]
    assert got == answer
    assert [s.num_accepted_tokens for s in llm.stats] == [0, 7]     # prefill 1 token, then 7 drafts + bonus
    assert torch.get_num_threads() == 1


def test_postprocess_stops_a_verified_run_at_eos_and_max_tokens():
    from pagedkv_lib.core.sequence import Sequence
    from pagedkv_lib.engine import ModelConfig, Scheduler

    cfg = EngineConfig(model=ModelConfig(eos_token_id=5), block_size=2, num_kvcache_blocks=32,
                       max_model_len=64, num_speculative_tokens=3)
    for new_tokens, params, expected in (([2, 5, 3], SamplingParams(max_tokens=8), [1, 2, 5]),
                                         ([2, 6, 3], SamplingParams(max_tokens=3), [1, 2, 6]),
                                         ([2, 6, 3], SamplingParams(max_tokens=8), None)):
        scheduler = Scheduler(cfg)
        seq = Sequence([9, 8, 7], 2, seq_id=0, sampling_params=params)
        scheduler.add(seq)
        prefill, _ = scheduler.schedule()
        scheduler.postprocess(prefill, [[1]])                           # the prefill's token
        seq.draft_token_ids = [2, 6, 4]
        seqs, is_prefill = scheduler.schedule()
        assert not is_prefill and len(seq.block_table) == 4            # 4 tokens + 3 drafts: 4 blocks
        finished = scheduler.postprocess(seqs, [new_tokens])
        if expected is None:                                            # two drafts and a bonus, going on
            assert not finished and seq.token_ids == [9, 8, 7, 1, 2, 6, 3] and len(seq.block_table) == 3
            assert seq.draft_token_ids == []
        else:
            assert finished == [seq] and seq.completion_token_ids == expected
            assert scheduler.block_manager.num_free_blocks == 32
