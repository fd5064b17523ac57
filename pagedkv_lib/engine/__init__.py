"""A mini serving engine on the paged KV cache (notebook 14, exercise 132), in nano-vllm's shape.

    config.py              ModelConfig, EngineConfig
    layers.py              RMSNorm (with the residual add), RotaryEmbedding, Qwen3MLP: PyTorch, or the fused
                           Triton kernels of pagedkv_lib.kernels.triton_fused_ops
    kernel_choice.py       Kernels, REFERENCE, select_kernels: which store, attention, norm, RoPE and SwiGLU
                           functions the model calls (the PyTorch references or the Triton kernels)
    attention_layer.py     Attention: store_kvcache, then paged attention, with the kernels it is given
    model.py               Qwen3ForCausalLM: a tiny Qwen3-like decoder with random weights
    no_cache_reference.py  the no-cache reference: recompute the whole sequence at every step
                           (greedy_reference, dense_causal_attention)
    sampler.py             Sampler (greedy or temperature, seeded); SamplingParams is core's (a Sequence
                           carries it), exported here too
    scheduler.py           schedule (one step: admit, append, preempt by recompute), Scheduler
    decode_graphs.py       DecodeGraphs: the decode forward as CUDA graphs for a ladder of batch sizes (GPU)
    model_runner.py        ModelRunner: KV cache, prepare_prefill/prepare_decode, forward, sample (no host
                           sync but the sampled tokens' readback)
    future_tokens.py       overlap scheduling's placeholders: placeholder_id, resolve_placeholders (on the
                           device), PendingTokens, InFlightStep, fill_placeholder
    llm_engine.py          LLMEngine / LLM: add_request, step (its tokens read at once or, overlapped, in the
                           next step), generate, StepStats, HostSpan
    ngram_proposer.py      NgramProposer: draft tokens by prompt lookup (notebook 20)
    rejection_sampler.py   accept_greedy, accept_tree_greedy: which drafts a verification keeps
    tree_verification.py   tree_logits (a draft tree in one forward under its mask), branch_logits
    kv_offload.py          the CPU tier's connector, worker side: KVTransfers (one step's copies, taken
                           from the TieredBlockManager), OffloadWorker (the copies; pinned memory on CUDA;
                           notebook 22)
"""
from pagedkv_lib.core.sampling_params import SamplingParams

from .attention_layer import Attention
from .config import EngineConfig, ModelConfig
from .kernel_choice import Kernels, select_kernels
from .llm_engine import LLM, LLMEngine, StepStats
from .model import Qwen3ForCausalLM
from .model_runner import ModelRunner
from .no_cache_reference import dense_causal_attention, greedy_reference
from .sampler import Sampler
from .scheduler import Scheduler, preempt, schedule

__all__ = [
    "LLM", "Attention", "EngineConfig", "Kernels", "LLMEngine", "ModelConfig", "ModelRunner",
    "Qwen3ForCausalLM", "Sampler", "SamplingParams", "Scheduler", "StepStats", "dense_causal_attention",
    "greedy_reference", "preempt", "schedule", "select_kernels",
]
