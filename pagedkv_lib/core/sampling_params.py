"""SamplingParams: what a request asks of the sampler and when it ends, carried by its Sequence.

nano-vllm's `nanovllm/sampling_params.py` (temperature, max_tokens, ignore_eos); the engine's Sampler
(engine/sampler.py) draws with the temperature, its Scheduler ends a sequence at max_tokens or EOS.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0     # 0: greedy
    max_tokens: int = 64         # generated tokens, the prompt not counted
    ignore_eos: bool = False

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"temperature: expected >= 0 (0 = greedy), got {self.temperature}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens: expected a positive int, got {self.max_tokens!r}")
