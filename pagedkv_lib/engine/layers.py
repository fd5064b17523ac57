"""The layers of a Qwen3 decoder besides attention: RMSNorm, rotary embeddings, the SwiGLU MLP.

Shapes: docs/conventions.md. Written after nano-vllm's `nanovllm/layers/`
(`layernorm.py`, `rotary_embedding.py`, `activation.py`) and Hugging Face's `modeling_qwen3.py`, without
tensor parallelism: plain `torch.nn` modules a learner can read in one sitting. Their PyTorch code is the
reference; on a GPU the engine hands them fused Triton kernels (`pagedkv_lib.kernels.triton_fused_ops`:
`fused`, one kernel where PyTorch launches eight or ten), which compute the same in float32 and round once.

RMSNorm takes the residual as vLLM's does (`fused_add_rms_norm`): `norm(x, residual)` returns
(norm(x + residual), x + residual), so the decoder layer adds and normalises in one kernel.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., E] -> x / sqrt(mean(x^2) + eps) * weight in float32 (float64 for float64), in x's dtype."""
    dtype = x.dtype
    x32 = x.float() if dtype != torch.float64 else x
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (x32 * weight.to(x32.dtype)).to(dtype)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x [T, 2I] (gate, then up) -> silu(gate) * up [T, I]."""
    gate, up = x.chunk(2, dim=-1)                                     # [T, I] each
    return nn.functional.silu(gate) * up


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (computed in float32).

    `forward(x)` -> norm(x); `forward(x, residual)` -> (norm(x + residual), x + residual). `fused`: None
    (this PyTorch code) or `add_rms_norm_triton`'s signature (x, weight, eps, residual).
    """

    def __init__(self, dim: int, eps: float, fused: Callable | None = None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.fused = fused

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        if self.fused is not None:
            return self.fused(x, self.weight, self.eps, residual)
        if residual is None:
            return rms_norm(x, self.weight, self.eps)
        h = x + residual                                              # [T, E] the new residual stream
        return rms_norm(h, self.weight, self.eps), h


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
    """SwiGLU: down(silu(gate(x)) * up(x)), gate and up fused in one matrix as in nano-vllm. `fused`: None
    (`silu_and_mul` above) or `silu_and_mul_triton`."""

    def __init__(self, hidden_size: int, intermediate_size: int, fused: Callable | None = None):
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act = fused if fused is not None else silu_and_mul

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_up_proj(x)))             # [T, 2I] -> [T, I] -> [T, E]
