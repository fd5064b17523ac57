"""The engine with an FP8 KV cache (`kv_cache_dtype="fp8"`): half the bytes, the same greedy tokens as a
no-cache reference whose K/V make the same fp8 round trip, and scales set once per layer when asked."""
from __future__ import annotations

import random

import pytest
import torch

from pagedkv_lib.core.kv_quant import (
    FP8_DTYPE,
    K_SCALE_CONSTANT,
    V_SCALE_CONSTANT,
    dequantize_fp8,
    quantize_fp8,
)
from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams, greedy_reference
from pagedkv_lib.engine import model as model_module
from pagedkv_lib.engine.model import Qwen3ForCausalLM
from pagedkv_lib.engine.no_cache_reference import dense_causal_attention


def prompts(n: int = 4, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(512) for _ in range(rng.randint(5, 30))] for _ in range(n)]


def fp8_dense_attention(q, k, v, scale):
    """The no-cache reference's attention with K and V through the fp8 round trip at scale 1.0."""
    k, v = (dequantize_fp8(quantize_fp8(x, 1.0), 1.0, x.dtype) for x in (k, v))
    return dense_causal_attention(q, k, v, scale)


def fp8_engine() -> LLM:
    return LLM(EngineConfig(block_size=4, num_kvcache_blocks=64, max_model_len=64, kv_cache_dtype="fp8"))


def test_fp8_cache_holds_one_byte_per_element_half_of_bf16():
    model = ModelConfig(dtype=torch.bfloat16)
    bf16 = LLM(EngineConfig(model=model)).model_runner.kv_cache
    fp8 = LLM(EngineConfig(model=model, kv_cache_dtype="fp8")).model_runner.kv_cache
    assert fp8.dtype == FP8_DTYPE and fp8.shape == bf16.shape
    assert fp8.nbytes * 2 == bf16.nbytes


def test_fp8_engine_matches_a_no_cache_reference_whose_kv_make_the_same_fp8_round_trip(monkeypatch):
    """Scales 1.0 (the default): every key and value the engine attends to is dequant(quant(x, 1), 1)."""
    ps, n = prompts(), 12
    llm = fp8_engine()
    got = llm.generate(ps, SamplingParams(max_tokens=n), use_tqdm=False)
    monkeypatch.setattr(model_module, "dense_causal_attention", fp8_dense_attention)
    model = Qwen3ForCausalLM(ModelConfig())
    assert got == [greedy_reference(model, p, n) for p in ps]
    assert llm.model_runner.kv_scales() == [(1.0, 1.0)] * ModelConfig().num_hidden_layers


def test_fp8_engine_without_the_round_trip_in_the_reference_diverges():
    """The check above has teeth: the plain fp32 reference (no fp8 round trip) differs from the fp8 engine."""
    ps, n = prompts(), 12
    got = fp8_engine().generate(ps, SamplingParams(max_tokens=n), use_tqdm=False)
    model = Qwen3ForCausalLM(ModelConfig())
    assert got != [greedy_reference(model, p, n) for p in ps]


def test_calculate_kv_scales_sets_each_layer_once_from_the_first_forward():
    llm = LLM(EngineConfig(num_kvcache_blocks=64, kv_cache_dtype="fp8", calculate_kv_scales=True))
    first: dict[int, tuple] = {}

    def record(layer_idx):
        def hook(module, args):
            first.setdefault(layer_idx, (args[1].abs().max().item(), args[2].abs().max().item()))
        return hook

    for i, attn in enumerate(llm.model_runner.attention_layers):
        attn.register_forward_pre_hook(record(i))
    for p in prompts():
        llm.add_request(p, SamplingParams(max_tokens=6))
    llm.step()                                                                  # the first forward: a prefill
    after_first = llm.model_runner.kv_scales()
    want = [(first[i][0] / K_SCALE_CONSTANT, first[i][1] / V_SCALE_CONSTANT) for i in range(len(first))]
    assert [s for pair in after_first for s in pair] == pytest.approx([s for pair in want for s in pair])
    assert len(set(after_first)) == len(after_first)                            # one pair per layer
    while not llm.is_finished():
        llm.step()
    assert llm.model_runner.kv_scales() == after_first                          # never updated again


@pytest.mark.parametrize("kwargs, match", [
    ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype: expected one of .* got 'fp8_e5m2'"),
    ({"kv_cache_dtype": "int8"}, "kv_cache_dtype: expected one of"),
    ({"calculate_kv_scales": True}, "calculate_kv_scales: expected kv_cache_dtype 'fp8'"),
])
def test_engine_config_refuses_an_unsupported_kv_cache_dtype(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EngineConfig(**kwargs)


def test_fp8_e4m3_is_an_alias_of_fp8():
    assert EngineConfig(kv_cache_dtype="fp8_e4m3").kv_cache_torch_dtype == FP8_DTYPE
    assert EngineConfig(model=ModelConfig(dtype=torch.float16)).kv_cache_torch_dtype == torch.float16


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a GPU: Triton's interpreter stores fp8 wrongly (test_kv_quant_triton.py)")
def test_fp8_engine_on_the_triton_kernels_matches_the_fp8_reference(monkeypatch):
    """store_kvcache and decode attention through the Triton kernels, fp8 cache, natively."""
    ps = prompts(2)
    llm = LLM(EngineConfig(block_size=4, num_kvcache_blocks=64, max_model_len=64, device="cuda",
                           use_triton=True, kv_cache_dtype="fp8"))
    assert llm.model_runner.kernels.name == "triton"
    got = llm.generate(ps, SamplingParams(max_tokens=4), use_tqdm=False)
    monkeypatch.setattr(model_module, "dense_causal_attention", fp8_dense_attention)
    model = Qwen3ForCausalLM(ModelConfig())
    assert got == [greedy_reference(model, p, 4) for p in ps]
