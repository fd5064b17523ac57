"""Triton launches per decode step of the engine on the Triton path (the interpreter on CPU): store_kvcache
is fused into the norm + RoPE kernel, so a layer launches no store of its own.

Counted where `kernel[grid](...)` ends, the kernel object's `run` (Triton's JITFunction on a GPU, its
InterpretedFunction here), by kernel name, over one decode step after the prefill. On a GPU,
benchmarks/bench_engine_gpu.py counts every kernel of a step (cuBLAS and PyTorch's too) with torch.profiler.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams
from pagedkv_lib.engine.kernel_choice import triton_kernels_available

pytestmark = pytest.mark.skipif(not triton_kernels_available(), reason="needs triton")


@pytest.fixture
def launches(monkeypatch):
    from pagedkv_lib.kernels import triton_fused_ops

    kernel_class = type(triton_fused_ops._qk_norm_rope_kernel)
    counts: Counter[str] = Counter()
    original = kernel_class.run

    def counting(self, *args, **kwargs):
        counts[self.fn.__name__] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(kernel_class, "run", counting)
    return counts


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_a_decode_step_launches_no_separate_store(launches, kv_cache_dtype):
    device = "cuda" if torch.cuda.is_available() else "cpu"          # eager on a GPU: a replay launches none
    llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=32, max_num_seqs=4, max_model_len=64,
                           use_triton=True, kv_cache_dtype=kv_cache_dtype, device=device, enforce_eager=True))
    rng = random.Random(0)
    for n in (5, 9, 3):
        llm.add_request([rng.randrange(512) for _ in range(n)], SamplingParams(max_tokens=4))
    llm.step()                                                        # the prefill
    launches.clear()
    llm.step()                                                        # one decode step
    assert not llm.stats[-1].is_prefill
    layers = llm.config.model.num_hidden_layers
    print(f"Triton launches in one decode step of {layers} layers: {sum(launches.values())} {dict(launches)}")
    assert launches["_store_kvcache_kernel"] == 0
    assert launches["_qk_norm_rope_kernel"] == layers
    assert launches["_add_rms_norm_kernel"] == 2 * layers + 1
    assert launches["_silu_and_mul_kernel"] == layers
