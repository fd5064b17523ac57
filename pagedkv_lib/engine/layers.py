"""The layers of a Qwen3 decoder besides attention: RMSNorm, rotary embeddings, the SwiGLU MLP.

Shapes: docs/conventions.md. Written after nano-vllm's `nanovllm/layers/`
(`layernorm.py`, `rotary_embedding.py`, `activation.py`) and Hugging Face's `modeling_qwen3.py`, without
tensor parallelism or fused kernels: plain `torch.nn` modules a learner can read in one sitting.
"""
from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (computed in float32)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float() if dtype != torch.float64 else x
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.to(x32.dtype)).to(dtype)


class RotaryEmbedding(nn.Module):
    """RoPE, half-split layout (Qwen, LLaMA): rotate (x[:D/2], x[D/2:]) by position * theta^(-2i/D).

    The cos/sin table covers every position up to `max_position`; a token's rotation depends on its absolute
    position only, so a key rotated when it was written into the cache stays right for every later query.
    """

    def __init__(self, head_dim: int, max_position: int, base: float):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # [D/2]
        t = torch.arange(max_position, dtype=torch.float64)                                    # [P]
        freqs = torch.outer(t, inv_freq)                                                        # [P, D/2]
        self.register_buffer("cos", freqs.cos(), persistent=False)                              # [P, D/2]
        self.register_buffer("sin", freqs.sin(), persistent=False)                              # [P, D/2]

    def forward(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """x [T, heads, D] at `positions` [T] -> rotated x, same shape and dtype."""
        cos = self.cos[positions].unsqueeze(1).to(x.dtype)                # [T, 1, D/2]
        sin = self.sin[positions].unsqueeze(1).to(x.dtype)                # [T, 1, D/2]
        x1, x2 = x.chunk(2, dim=-1)                                       # [T, heads, D/2] each
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # [T, heads, D]


class Qwen3MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), gate and up fused in one matrix as in nano-vllm."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)                  # [T, I] each
        return self.down_proj(nn.functional.silu(gate) * up)              # [T, E]
