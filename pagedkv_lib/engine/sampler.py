"""Sampling: greedy (temperature 0) or from softmax(logits / temperature), with a seeded generator.

Shapes: docs/conventions.md. nano-vllm's `nanovllm/layers/sampler.py` samples with the
exponential race: argmax(p / E) with E ~ Exp(1) i.i.d. picks token i with probability p_i, and needs no
cumulative sum. Here the draws come from a `torch.Generator` seeded once, so a run is reproducible.
"""
from __future__ import annotations

import torch


class Sampler:
    def __init__(self, seed: int = 0, device="cpu"):
        self.device = torch.device(device)
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, logits: torch.Tensor, temperatures: list[float]) -> torch.Tensor:
        """logits [B, V] float, temperatures (B floats, the requests' own: known on the host, so deciding
        whether to sample reads nothing from the GPU) -> token ids [B] int64."""
        greedy = logits.argmax(dim=-1)                                    # [B]
        if not any(t > 0 for t in temperatures):
            return greedy
        temperatures = torch.tensor(temperatures, dtype=torch.float32)   # [B] on the host
        if self.device.type == "cuda":                                    # pinned: an asynchronous copy
            temperatures = temperatures.pin_memory().to(self.device, non_blocking=True)
        t = temperatures.clamp(min=1e-6).unsqueeze(1).to(logits.dtype)   # [B, 1]
        probs = torch.softmax(logits / t, dim=-1)                         # [B, V]
        race = torch.empty_like(probs).exponential_(1.0, generator=self.generator)  # [B, V]
        sampled = (probs / race).argmax(dim=-1)                           # [B]
        return torch.where(temperatures > 0, sampled, greedy)             # [B]
