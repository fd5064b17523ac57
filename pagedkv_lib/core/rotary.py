"""Rotary position embedding (RoPE) in the interleaved layout of DeepSeek's MLA: dimensions (2i, 2i + 1)
form a pair rotated by the angle position * base^(-2i / R).

In MLA only the decoupled part of each query and the one shared key carry RoPE (R = qk_rope_head_dim = 64 in
DeepSeek-V3); the latent is never rotated, which is what lets W_UK be absorbed into the query (DeepSeek-V2,
arXiv 2405.04434, section 2.1.3). DeepSeek's reference rotates pairs as complex numbers
(deepseek-ai/DeepSeek-V3@9b4e978 inference/model.py, apply_rotary_emb); the engine's Qwen layers use the
half-split layout instead (engine/layers.py).
"""
from __future__ import annotations

import torch


def rope_angles(positions: torch.Tensor, rope_dim: int,
                base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each [T, R / 2] float64 on the positions' device, for the int positions [T]."""
    if rope_dim < 2 or rope_dim % 2:
        raise ValueError(f"rope_dim: expected an even number >= 2, got {rope_dim}")
    exponents = torch.arange(0, rope_dim, 2, dtype=torch.float64, device=positions.device) / rope_dim
    inv_freq = base ** -exponents                                                        # [R / 2]
    angles = torch.outer(positions.to(torch.float64), inv_freq)                          # [T, R / 2]
    return angles.cos(), angles.sin()


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., R] rotated pair by pair: a new tensor of x's dtype and device. cos, sin broadcast against
    [..., R / 2] (on any device: they are moved to x's)."""
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)               # [..., R / 2, 2]
    even, odd = pairs[..., 0], pairs[..., 1]                            # [..., R / 2] each
    cos, sin = cos.to(device=x.device, dtype=x.dtype), sin.to(device=x.device, dtype=x.dtype)
    turned = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)   # [..., R / 2, 2]
    return turned.flatten(-2)                                           # [..., R]
