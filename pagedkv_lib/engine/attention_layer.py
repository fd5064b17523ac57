"""The paged attention layer: write this step's K/V into the cache, then attend through the block tables.

Shapes: docs/conventions.md. nano-vllm's `Attention.forward` (`nanovllm/layers/attention.py`) reads its
metadata from a hidden module-level context; here it is an explicit `ModelInputs` argument, so that
no hidden global state decides what a layer reads.

    prefill: store_kvcache(k, v, ...) for the new tokens, then varlen attention over the CACHE: a prefix hit
             (or a same-step duplicate prefix) leaves keys in the cache that are not among this step's tokens
    decode:  store_kvcache for the one new token per sequence, then decode attention

With the Triton kernels the store is fused into the norm + RoPE kernel (`triton_fused_ops`, qk_norm_rope's
v2) and `forward(..., kv_stored=True)` skips it; an fp8 cache whose scales are still to be calibrated
stores separately on that first forward (the scales come from its K/V).

Which store, decode and varlen functions a layer calls is its `Kernels` (engine/kernel_choice.py).

An fp8 cache (float8_e4m3fn) needs a scale for K and one for V: each layer holds its own (`k_scale`,
`v_scale`, 1.0 by default as in vLLM) and passes them to all three kernels; with `calculate_kv_scales` it
sets them once from the first K/V it stores (`kv_quant`, vLLM's `calc_kv_scales`) and never again.
"""
from __future__ import annotations

import torch
from torch import nn

from pagedkv_lib.core.kv_quant import K_SCALE_CONSTANT, V_SCALE_CONSTANT, calibrate_kv_scales, is_fp8
from pagedkv_lib.core.model_inputs import ModelInputs

from .kernel_choice import REFERENCE, Kernels


class Attention(nn.Module):
    """No weights: the paged part of one layer's attention (projections live in `Qwen3Attention`)."""

    def __init__(self, scale: float, kernels: Kernels = REFERENCE):
        super().__init__()
        self.scale = scale
        self.kernels = kernels
        self.k_scale, self.v_scale = 1.0, 1.0     # fp8 caches only: stored = value / scale
        self.calculate_kv_scales = False          # True: set both from the first forward, then never again
        self.scale_tensors: tuple | None = None   # ((k_scale, v_scale, device), the two as [1] tensors)

    def cache_scales(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor) -> tuple[dict, dict]:
        """The scale arguments for this cache, (attention's, the store's): none unless it is fp8. Attention
        takes Python floats (kernel arguments); the store kernel loads its scales, so it gets 1-element
        tensors on the device, made once (a float would be copied to the GPU at every call)."""
        if not is_fp8(k_cache):
            return {}, {}
        if self.calculate_kv_scales:
            self.k_scale, self.v_scale = calibrate_kv_scales(k, v, K_SCALE_CONSTANT, V_SCALE_CONSTANT)
            self.calculate_kv_scales = False
        key = (self.k_scale, self.v_scale, k_cache.device)
        if self.scale_tensors is None or self.scale_tensors[0] != key:
            self.scale_tensors = (key, *(torch.tensor([s], dtype=torch.float32, device=k_cache.device)
                                         for s in key[:2]))              # [1] each
        return ({"k_scale": self.k_scale, "v_scale": self.v_scale},
                {"k_scale": self.scale_tensors[1], "v_scale": self.scale_tensors[2]})

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, inputs: ModelInputs, kv_stored: bool = False) -> torch.Tensor:
        """q [T, H, D], k and v [T, H_kv, D], caches [N, S, H_kv, D] -> out [T, H, D]. kv_stored: the
        fused qk_norm_rope kernel has already written k and v into the cache (its v2). `inputs` hold block
        tables for a prefill too (`prepare_prefill(..., always_block_tables=True)`, ModelRunner.prepare)."""
        scales, store_scales = self.cache_scales(k, v, k_cache)
        if not kv_stored:
            self.kernels.store_kvcache(k, v, k_cache, v_cache, inputs.slot_mapping, **store_scales)
        if inputs.is_prefill:
            seq_lens = inputs.cu_seqlens_k.diff()                          # [B]
            return self.kernels.varlen(q, k_cache, v_cache, inputs.block_tables, seq_lens,
                                       inputs.cu_seqlens_q, self.scale, **scales)  # [T, H, D]
        return self.kernels.decode(q, k_cache, v_cache, inputs.block_tables, inputs.context_lens,
                                   self.scale, **scales)                  # [B, H, D], T = B
