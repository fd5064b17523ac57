"""Nothing on the engine's step waits for the GPU, except the one read of the sampled tokens.

On CPU (the Triton kernels in the interpreter): no code of pagedkv_lib calls `.item()`, `.tolist()`,
`int()`, `float()`, `bool()` or `__index__` on a tensor during whole engine steps (prefill, decode, the graph
path's staging and padded forward). On a GPU each of those is a host sync. On a GPU:
`torch.cuda.set_sync_debug_mode("error")` around whole engine steps, graphed and eager, fp8 cache included,
raises on any synchronizing call (a device-to-host read, a copy from pageable memory).
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams
from pagedkv_lib.engine.decode_graphs import DecodeGraphs
from pagedkv_lib.engine.kernel_choice import select_kernels, triton_kernels_available

LIBRARY = str(Path(__file__).resolve().parents[2] / "pagedkv_lib")
READS = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")


def _requests(n: int, seed: int):
    rng = random.Random(seed)
    prompts = [[rng.randrange(512) for _ in range(rng.randint(3, 20))] for _ in range(n)]
    return prompts, [SamplingParams(max_tokens=rng.randint(2, 6)) for _ in prompts]


@pytest.fixture
def value_reads(monkeypatch):
    """Every read of a tensor's value made directly by pagedkv_lib's code: (method, file:line)."""
    seen = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def guard(self, *args, _original=original, _name=name, **kwargs):
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(LIBRARY):
                seen.append((_name, f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}"))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, guard)
    return seen


@pytest.mark.skipif(not triton_kernels_available() or torch.cuda.is_available(),
                    reason="the Triton kernels on CPU tensors: the interpreter (a GPU runs the test below)")
@pytest.mark.parametrize("overlap", [False, True])
def test_engine_steps_read_no_tensor_value_on_the_triton_path(value_reads, overlap):
    llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=48, max_num_seqs=4, max_model_len=64,
                           use_triton=True, overlap_scheduling=overlap))
    prompts, params = _requests(3, seed=0)
    for p, sp in zip(prompts, params, strict=True):
        llm.add_request(p, sp)
    llm.step()                                                        # prefill
    if not overlap:                                                   # (with overlap: placeholders, below)
        seqs, _ = llm.scheduler.schedule()
        graphs = DecodeGraphs(llm.model_runner.model, llm.model_runner.kv_cache, 4, 64, 4)
        with torch.inference_mode():
            graphs.forward(graphs.prepare(seqs))                      # the graph path, replayed eagerly
        llm.scheduler.postprocess(seqs, [[t] for t in llm.model_runner.run(seqs, False, [0.0] * len(seqs))])
    while not llm.is_finished():
        llm.step()
    assert value_reads == [], f"tensor values read on the step's path: {value_reads}"


def test_the_guard_sees_a_read(value_reads):
    """The check has teeth: the reference kernels read lengths with int() (fine on CPU, a sync on a GPU)."""
    llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=48, max_model_len=64))
    prompts, params = _requests(2, seed=1)
    llm.generate(prompts, params, use_tqdm=False)
    assert any(name == "__int__" for name, _ in value_reads)


def test_kernel_value_checks_are_off_on_the_engines_path_unless_debugging():
    if not triton_kernels_available():
        pytest.skip("needs triton and pagedkv_lib.kernels")
    for debug in (False, True):
        kernels = select_kernels(True, "cpu", torch.float32, check_values=debug)
        for fn in (kernels.store_kvcache, kernels.decode, kernels.varlen):
            assert fn.keywords == {"check_values": debug}
    engine = LLM(EngineConfig(use_triton=True, debug_checks=True))
    assert engine.model_runner.kernels.decode.keywords == {"check_values": True}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: host syncs exist only there")
@pytest.mark.parametrize("enforce_eager", [False, True])
@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("overlap", [False, True])
def test_engine_steps_make_no_host_sync_on_the_gpu(enforce_eager, kv_cache_dtype, overlap):
    """A first run compiles the kernels and captures the graphs it needs; a second run of the same shapes
    (other tokens) runs under sync debug mode "error": prefill and decode steps, sampling, the readback."""
    config = EngineConfig(block_size=16, num_kvcache_blocks=64, max_num_seqs=8, max_model_len=128,
                          device="cuda", use_triton=True, enforce_eager=enforce_eager,
                          kv_cache_dtype=kv_cache_dtype, model=EngineConfig().model,
                          overlap_scheduling=overlap)
    llm = LLM(config)
    prompts, params = _requests(6, seed=2)
    llm.generate(prompts, params, use_tqdm=False)
    torch.cuda.synchronize()
    rng = random.Random(3)
    others = [[rng.randrange(512) for _ in p] for p in prompts]       # same lengths, other tokens
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = llm.generate(others, params, use_tqdm=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert [len(o) for o in out] == [sp.max_tokens for sp in params]
