"""A tiny Qwen3-like decoder with random weights, whose attention reads and writes the paged KV cache.

Shapes: docs/conventions.md. The structure of nano-vllm's `nanovllm/models/qwen3.py` (fused qkv and
gate/up projections, q/k RMSNorm per head before RoPE, pre-norm residual blocks, tied embeddings) at a size
that runs on a CPU. `forward` takes the step's metadata explicitly:

    model(input_ids, positions, inputs, kv_cache)   paged: a batch of sequences, K/V through the cache
    model(input_ids, positions)                     no cache: ONE whole sequence, dense causal attention
                                                    (what `reference.py` recomputes at every step)
"""
from __future__ import annotations

import torch
from torch import nn

from pagedkv_lib.core.kv_cache import layer_caches
from pagedkv_lib.core.model_inputs import ModelInputs

from .attention_layer import REFERENCE, Attention, Kernels
from .config import ModelConfig
from .layers import Qwen3MLP, RMSNorm, RotaryEmbedding
from .no_cache_reference import dense_causal_attention

# The std of every weight. Hugging Face initialises with 0.02 (`initializer_range`), but a random model that
# small repeats one token forever, and an attention bug would go unnoticed; at 0.1 the greedy output of this
# model depends on its whole context (changing the first prompt token changes the completion).
INIT_STD = 0.1


class Qwen3Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer_idx: int, rotary: RotaryEmbedding, kernels: Kernels):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads, self.num_kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = D = config.head_dim
        qkv_size = (self.num_heads + 2 * self.num_kv_heads) * D
        self.qkv_proj = nn.Linear(config.hidden_size, qkv_size, bias=False)
        self.o_proj = nn.Linear(self.num_heads * D, config.hidden_size, bias=False)
        self.q_norm = RMSNorm(D, config.rms_norm_eps)
        self.k_norm = RMSNorm(D, config.rms_norm_eps)
        self.rotary = rotary
        self.attn = Attention(D**-0.5, kernels)

    def forward(self, positions, x, inputs: ModelInputs | None, kv_cache: torch.Tensor | None):
        T, D = x.shape[0], self.head_dim
        q, k, v = self.qkv_proj(x).split(
            [self.num_heads * D, self.num_kv_heads * D, self.num_kv_heads * D], dim=-1)
        q = self.rotary(positions, self.q_norm(q.reshape(T, self.num_heads, D)))      # [T, H, D]
        k = self.rotary(positions, self.k_norm(k.reshape(T, self.num_kv_heads, D)))   # [T, H_kv, D]
        v = v.reshape(T, self.num_kv_heads, D)                                        # [T, H_kv, D]
        if inputs is None:
            o = dense_causal_attention(q, k, v, self.attn.scale)                      # [T, H, D]
        else:
            k_cache, v_cache = layer_caches(kv_cache, self.layer_idx)                 # [N, S, H_kv, D] each
            o = self.attn(q, k.contiguous(), v.contiguous(), k_cache, v_cache, inputs)  # [T, H, D]
        return self.o_proj(o.reshape(T, self.num_heads * D))                          # [T, E]


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_idx: int, rotary: RotaryEmbedding, kernels: Kernels):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Qwen3Attention(config, layer_idx, rotary, kernels)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = Qwen3MLP(config.hidden_size, config.intermediate_size)

    def forward(self, positions, x, inputs, kv_cache):
        x = x + self.self_attn(positions, self.input_layernorm(x), inputs, kv_cache)  # [T, E]
        return x + self.mlp(self.post_attention_layernorm(x))                        # [T, E]


class Qwen3ForCausalLM(nn.Module):
    """Random weights from `config.seed` (normal, std INIT_STD; norms 1), in `config.dtype`."""

    def __init__(self, config: ModelConfig, kernels: Kernels = REFERENCE):
        super().__init__()
        self.config = config
        rotary = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(config, i, rotary, kernels)
                                    for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        gen = torch.Generator().manual_seed(config.seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if not name.endswith("norm.weight"):
                    p.normal_(0.0, INIT_STD, generator=gen)
        self.to(config.dtype).requires_grad_(False).eval()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, inputs: ModelInputs | None = None,
                kv_cache: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, positions [T] -> hidden states [T, E]; kv_cache [2, L, N, S, H_kv, D] when paged."""
        if (inputs is None) != (kv_cache is None):
            raise ValueError("inputs and kv_cache: expected both (paged) or neither (dense, one sequence)")
        x = self.embed_tokens(input_ids)                                  # [T, E]
        for layer in self.layers:
            x = layer(positions, x, inputs, kv_cache)                     # [T, E]
        return self.norm(x)                                               # [T, E]

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [B, E] -> logits [B, V] in float32 (tied embeddings: lm_head = embed_tokens)."""
        return nn.functional.linear(hidden, self.embed_tokens.weight).float()  # [B, V]
