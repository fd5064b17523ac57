"""The engine's greedy outputs equal a no-cache full-recompute reference, token for token.

One workload for block sizes 1, 4 and 16: eight requests, six sharing a 16-token system prompt (two of them
identical), a pool too small for all of them to finish together, so the run must preempt by recompute and
hit the prefix cache; the test asserts that both happened, and that every block is free at the end.
"""
from __future__ import annotations

import random

import pytest
import torch

from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams, greedy_reference
from pagedkv_lib.engine.kernel_choice import triton_kernels_available
from pagedkv_lib.engine.model import Qwen3ForCausalLM

POOL_TOKENS = 96       # 96 blocks of 1, 24 of 4, 6 of 16
MAX_MODEL_LEN = 64


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny matrices: a second thread costs more than it gives, and far more on a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_requests(seed: int = 0) -> tuple[list[list[int]], list[int]]:
    rng = random.Random(seed)
    system = [rng.randrange(512) for _ in range(16)]
    prompts = [system + [rng.randrange(512) for _ in range(rng.randint(1, 12))] for _ in range(5)]
    prompts.append(list(prompts[2]))                                       # an identical prompt
    prompts += [[rng.randrange(512) for _ in range(rng.randint(10, 30))] for _ in range(2)]
    max_tokens = [rng.randint(8, 24) for _ in prompts]
    return prompts, max_tokens


@pytest.fixture(scope="module")
def reference():
    prompts, max_tokens = make_requests()
    model = Qwen3ForCausalLM(ModelConfig())
    expected = [greedy_reference(model, p, n) for p, n in zip(prompts, max_tokens, strict=True)]
    return prompts, max_tokens, expected


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_engine_greedy_matches_full_recompute_reference(reference, block_size):
    prompts, max_tokens, expected = reference
    config = EngineConfig(block_size=block_size, num_kvcache_blocks=POOL_TOKENS // block_size,
                          max_num_seqs=8, max_num_batched_tokens=128, max_model_len=MAX_MODEL_LEN)
    llm = LLM(config)
    got = llm.generate(prompts, [SamplingParams(max_tokens=n) for n in max_tokens], use_tqdm=False)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g == e, f"request {i}, block_size {block_size}: engine {g} != reference {e}"
    num_preempted = sum(s.num_preempted for s in llm.stats)
    num_cached = sum(s.num_cached_tokens for s in llm.stats)
    print(f"block_size {block_size}: {len(llm.stats)} steps, {num_preempted} preemptions, "
          f"{num_cached} prompt tokens from the prefix cache")
    assert num_preempted > 0, "the workload was meant to run the pool dry"
    assert num_cached > 0, "the workload was meant to hit the prefix cache"
    bm = llm.block_manager
    assert bm.num_free_blocks == config.num_kvcache_blocks and not bm.used_block_ids
    assert all(b.ref_count == 0 for b in bm.blocks)


def test_engine_equivalence_catches_a_planted_bug(reference, monkeypatch):
    """The check has teeth: a decode that leaves the newest token out of attention diverges at once."""
    from dataclasses import replace

    from pagedkv_lib.engine.model_runner import ModelRunner

    prepare = ModelRunner.prepare

    def context_one_short(self, seqs, is_prefill):
        inputs = prepare(self, seqs, is_prefill)
        return inputs if is_prefill else replace(inputs, context_lens=inputs.context_lens - 1)

    monkeypatch.setattr(ModelRunner, "prepare", context_one_short)
    prompts, max_tokens, expected = reference
    llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=64, max_model_len=MAX_MODEL_LEN))
    got = llm.generate(prompts[:3], [SamplingParams(max_tokens=n) for n in max_tokens[:3]], use_tqdm=False)
    assert got != expected[:3]


GPU = torch.cuda.is_available()


@pytest.mark.skipif(not triton_kernels_available(), reason="needs triton and pagedkv_lib.kernels")
@pytest.mark.parametrize("block_size", [1, 4, 16] if GPU else [4])
def test_engine_on_triton_kernels_matches_reference(reference, block_size):
    """store_kvcache, the varlen prefill and decode attention all run as Triton kernels. On a GPU: the whole
    workload (preemption, prefix hits) natively; on a CPU: two requests in the interpreter."""
    from pagedkv_lib.kernels import paged_attention_decode_triton, paged_attention_varlen_triton

    prompts, max_tokens, expected = reference
    if GPU:
        config = EngineConfig(block_size=block_size, num_kvcache_blocks=POOL_TOKENS // block_size,
                              max_num_seqs=8, max_num_batched_tokens=128, max_model_len=MAX_MODEL_LEN,
                              device="cuda", use_triton=True)
        params = [SamplingParams(max_tokens=n) for n in max_tokens]
    else:
        config = EngineConfig(block_size=block_size, num_kvcache_blocks=24, max_model_len=MAX_MODEL_LEN,
                              device="cpu", use_triton=True)
        prompts, params, expected = prompts[:2], SamplingParams(max_tokens=4), [e[:4] for e in expected[:2]]
    llm = LLM(config)
    kernels = llm.model_runner.kernels
    assert kernels.name == "triton"
    assert kernels.varlen.func is paged_attention_varlen_triton
    assert kernels.decode.func is paged_attention_decode_triton
    assert kernels.decode.keywords == {"check_values": False}       # the engine's path reads no device value
    got = llm.generate(prompts, params, use_tqdm=False)
    assert got == expected
    if GPU:
        assert sum(s.num_preempted for s in llm.stats) > 0 and sum(s.num_cached_tokens for s in llm.stats) > 0
