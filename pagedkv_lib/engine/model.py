"""A tiny Qwen3-like decoder with random weights, whose attention reads and writes the paged KV cache.

Shapes: docs/conventions.md. The structure of nano-vllm's `nanovllm/models/qwen3.py` (fused qkv and
gate/up projections, q/k RMSNorm per head before RoPE, pre-norm residual blocks, tied embeddings) at a size
that runs on a CPU. `forward` takes the step's metadata explicitly:

    model(input_ids, positions, inputs, kv_cache)   paged: a batch of sequences, K/V through the cache
    model(input_ids, positions)                     no cache: ONE whole sequence, dense causal attention
                                                    (what `no_cache_reference.py` recomputes at every step)
"""
from __future__ import annotations

import torch
from torch import nn

from pagedkv_lib.core.kv_cache import layer_caches
from pagedkv_lib.core.model_inputs import ModelInputs

from .attention_layer import Attention
from .config import ModelConfig
from .kernel_choice import REFERENCE, Kernels
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
        self.qk_norm_rope = kernels.qk_norm_rope                 # None: the PyTorch modules above
        self.attn = Attention(D**-0.5, kernels)

    def forward(self, positions, x, inputs: ModelInputs | None, kv_cache: torch.Tensor | None):
        T, D = x.shape[0], self.head_dim
        qkv = self.qkv_proj(x)                                                        # [T, (H + 2 H_kv) D]
        q, k, v = qkv.split([self.num_heads * D, self.num_kv_heads * D, self.num_kv_heads * D], dim=-1)
        v = v.reshape(T, self.num_kv_heads, D)                   # [T, H_kv, D] a view, rows qkv's apart
        kv_stored = False
        if self.qk_norm_rope is not None:                        # one kernel: both norms and both rotations
            store = {}
            if inputs is not None and not self.attn.calculate_kv_scales:  # ... and the store (v2)
                k_cache, v_cache = layer_caches(kv_cache, self.layer_idx)             # [N, S, H_kv, D] each
                store = dict(k_cache=k_cache, v_cache=v_cache, slot_mapping=inputs.slot_mapping,
                             **self.attn.cache_scales(None, None, k_cache)[1])
                kv_stored = True
            q, k = self.qk_norm_rope(qkv, positions, self.q_norm.weight, self.k_norm.weight, self.rotary.cos,
                                     self.rotary.sin, self.num_heads, self.num_kv_heads, self.q_norm.eps,
                                     **store)
        else:
            q = self.rotary(positions, self.q_norm(q.reshape(T, self.num_heads, D)))     # [T, H, D]
            k = self.rotary(positions, self.k_norm(k.reshape(T, self.num_kv_heads, D)))  # [T, H_kv, D]
        if inputs is None:
            o = dense_causal_attention(q, k, v, self.attn.scale)                      # [T, H, D]
        else:
            k_cache, v_cache = layer_caches(kv_cache, self.layer_idx)                 # [N, S, H_kv, D] each
            o = self.attn(q, k, v, k_cache, v_cache, inputs, kv_stored)               # [T, H, D]
        return self.o_proj(o.reshape(T, self.num_heads * D))                          # [T, E]


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_idx: int, rotary: RotaryEmbedding, kernels: Kernels):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, kernels.add_rms_norm)
        self.self_attn = Qwen3Attention(config, layer_idx, rotary, kernels)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, kernels.add_rms_norm)
        self.mlp = Qwen3MLP(config.hidden_size, config.intermediate_size, kernels.silu_and_mul)

    def forward(self, positions, h, residual, inputs, kv_cache):
        """h: the last sublayer's output [T, E], residual: the stream before it (None in the first layer)
        -> (this layer's MLP output, the residual stream before it). The residual add is done by the next
        norm (vLLM's layout): x_{l+1} = x_l + attn(norm(x_l)) + mlp(norm(...)), one fused kernel per add."""
        if residual is None:
            h, residual = self.input_layernorm(h), h                                  # [T, E] each
        else:
            h, residual = self.input_layernorm(h, residual)                           # norm(h + r), h + r
        h = self.self_attn(positions, h, inputs, kv_cache)                            # [T, E]
        h, residual = self.post_attention_layernorm(h, residual)                      # [T, E] each
        return self.mlp(h), residual                                                  # [T, E] each


class Qwen3ForCausalLM(nn.Module):
    """Random weights from `config.seed` (normal, std INIT_STD; norms 1), in `config.dtype`."""

    def __init__(self, config: ModelConfig, kernels: Kernels = REFERENCE):
        super().__init__()
        self.config = config
        rotary = RotaryEmbedding(config.head_dim, config.max_position_embeddings, config.rope_theta)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(config, i, rotary, kernels)
                                    for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, kernels.add_rms_norm)
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
        h, residual = self.embed_tokens(input_ids), None                 # [T, E]
        for layer in self.layers:
            h, residual = layer(positions, h, residual, inputs, kv_cache)  # [T, E] each
        return self.norm(h, residual)[0]                                  # [T, E] norm(h + residual)

    def compute_logits(self, hidden: torch.Tensor, dtype: torch.dtype | None = torch.float32) -> torch.Tensor:
        """hidden [B, E] -> logits [B, V] in `dtype` (None: the model's; tied embeddings: lm_head =
        embed_tokens). Greedy decoding needs no float32 copy: the upcast is exact, the argmax the same."""
        logits = nn.functional.linear(hidden, self.embed_tokens.weight)  # [B, V]
        return logits if dtype is None else logits.to(dtype)
