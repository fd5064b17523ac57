"""The mini engine with a CPU tier under its pool (EngineConfig.num_cpu_blocks): the same greedy tokens as
without it, and fewer prompt tokens recomputed on a multi-turn chat whose history the pool cannot keep.

The chat: four conversations of three turns, each turn's prompt the previous prompt, the engine's answer and
a new user message, turns served in rounds (every conversation's turn k, then every turn k + 1), with a pool
of 8 blocks of 8 tokens: a round's prompts evict the previous round's blocks, so without a CPU tier the
next turn recomputes its history.
"""
from __future__ import annotations

import random

import pytest
import torch
from test_engine_equivalence import one_thread  # noqa: F401  (autouse: one thread for tiny matrices)

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams

BLOCK_SIZE = 8
NUM_BLOCKS = 8


def chat(num_cpu_blocks: int, seed: int = 0, num_conversations: int = 4, num_turns: int = 3,
         device: str = "cpu", enforce_eager: bool = False, overlap_scheduling: bool = False):
    """(every turn's answer, the engine's StepStats, the engine) of the chat in the module docstring."""
    rng = random.Random(seed)
    config = EngineConfig(block_size=BLOCK_SIZE, num_kvcache_blocks=NUM_BLOCKS, max_num_seqs=2,
                          max_num_batched_tokens=64, max_model_len=64, num_cpu_blocks=num_cpu_blocks,
                          device=device, enforce_eager=enforce_eager, overlap_scheduling=overlap_scheduling)
    llm = LLM(config)
    history = [[] for _ in range(num_conversations)]
    answers = []
    for _ in range(num_turns):
        prompts = [h + [rng.randrange(512) for _ in range(rng.randint(3, 9))] for h in history]
        outs = llm.generate(prompts, SamplingParams(max_tokens=6), use_tqdm=False)
        answers.append(outs)
        history = [p + o for p, o in zip(prompts, outs, strict=True)]
    return answers, llm.stats, llm


@pytest.fixture(scope="module")
def gpu_only():
    return chat(0)


@pytest.mark.parametrize("overlap_scheduling", [False, True])
@pytest.mark.parametrize("num_cpu_blocks", [1, 4, 32])
def test_cpu_tier_keeps_the_greedy_tokens(gpu_only, num_cpu_blocks, overlap_scheduling):
    """With overlap scheduling too: the step's copies are queued between its scheduling and its launch."""
    answers, stats, llm = chat(num_cpu_blocks, overlap_scheduling=overlap_scheduling)
    assert answers == gpu_only[0]
    if num_cpu_blocks >= 4:              # one block holds a single turn's last eviction: maybe no hit
        assert sum(s.num_loaded_blocks for s in stats) > 0, "the chat was meant to load blocks back"
    bm = llm.block_manager
    assert bm.num_free_blocks == NUM_BLOCKS and not bm.saves and not bm.loads
    assert all(r == 0 for r in bm.cpu.ref_counts), "a CPU slot is still pinned after the run"


def test_cpu_tier_recomputes_fewer_prompt_tokens(gpu_only):
    """Prefill tokens computed drop with the CPU tier, by the tokens loaded back, and never rise with it."""
    computed = {}
    for num_cpu_blocks in (0, 2, 8, 32):
        stats = gpu_only[1] if num_cpu_blocks == 0 else chat(num_cpu_blocks)[1]
        computed[num_cpu_blocks] = sum(s.num_computed_tokens for s in stats if s.is_prefill)
        loaded = sum(s.num_loaded_blocks for s in stats) * BLOCK_SIZE
        print(f"num_cpu_blocks {num_cpu_blocks}: {computed[num_cpu_blocks]} prompt tokens computed, "
              f"{loaded} loaded back")
    assert computed[32] < computed[0]
    assert computed[0] >= computed[2] >= computed[8] >= computed[32]


def test_a_corrupted_load_changes_the_tokens(gpu_only, monkeypatch):
    """The equivalence has teeth: a load that copies zeros instead of the saved K/V gives other tokens."""
    from pagedkv_lib.engine.kv_offload import OffloadWorker

    def zero_loads(self, transfers):
        for gpu_block, cpu_slot in transfers.saves:
            self.cpu_cache[cpu_slot].copy_(self.kv_cache[:, :, gpu_block])
        for _, gpu_block in transfers.loads:
            self.kv_cache[:, :, gpu_block].zero_()

    monkeypatch.setattr(OffloadWorker, "copy", zero_loads)
    assert chat(32)[0] != gpu_only[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: pinned memory, asynchronous copies")
@pytest.mark.parametrize("enforce_eager", [True, False])
def test_cpu_tier_on_cuda_keeps_the_greedy_tokens(enforce_eager):
    """On a GPU the copies are queued from and into pinned memory on the step's stream, before its forward
    (eager, or decode replayed from CUDA graphs): the same tokens as without the tier."""
    base = chat(0, device="cuda", enforce_eager=enforce_eager)[0]
    for num_cpu_blocks in (2, 32):
        answers, stats, llm = chat(num_cpu_blocks, device="cuda", enforce_eager=enforce_eager)
        assert answers == base, f"num_cpu_blocks {num_cpu_blocks}"
        assert llm.model_runner.kv_offload.cpu_cache.is_pinned()
    assert sum(s.num_loaded_blocks for s in stats) > 0
