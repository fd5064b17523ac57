"""A mini serving engine on the paged KV cache (notebook 14, exercise 132), in nano-vllm's shape.

    config.py        ModelConfig, EngineConfig
    layers.py        RMSNorm, RotaryEmbedding, Qwen3MLP
    attention.py     Attention: store_kvcache, then paged attention (reference or Triton kernels)
    model.py         Qwen3ForCausalLM: a tiny Qwen3-like decoder with random weights
    reference.py     the no-cache reference: recompute the whole sequence at every step
    sampler.py       SamplingParams, Sampler (greedy or temperature, seeded)
    scheduler.py     schedule (one step: admit, append, preempt by recompute), Scheduler
    model_runner.py  ModelRunner: KV cache, prepare_prefill/prepare_decode, forward, sample
    llm_engine.py    LLMEngine / LLM: add_request, step, generate, StepStats
"""
from .attention_layer import Attention, Kernels, select_kernels
from .config import EngineConfig, ModelConfig
from .llm_engine import LLM, LLMEngine, StepStats
from .model import Qwen3ForCausalLM
from .model_runner import ModelRunner
from .no_cache_reference import dense_causal_attention, greedy_reference
from .sampler import Sampler, SamplingParams
from .scheduler import Scheduler, preempt, schedule

__all__ = [
    "LLM", "Attention", "EngineConfig", "Kernels", "LLMEngine", "ModelConfig", "ModelRunner",
    "Qwen3ForCausalLM", "Sampler", "SamplingParams", "Scheduler", "StepStats", "dense_causal_attention",
    "greedy_reference", "preempt", "schedule", "select_kernels",
]
