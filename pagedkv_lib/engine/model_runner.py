"""The model runner: owns the model and the KV cache; turns scheduled sequences into sampled tokens.

Shapes: docs/conventions.md. nano-vllm's `nanovllm/engine/model_runner.py` without tensor
parallelism or CUDA graphs: `allocate_kv_cache` once, then per step `prepare_prefill`/`prepare_decode`
(from `pagedkv_lib.core.model_inputs`), the forward, the logits of each sequence's LAST token, the sampler.
With `kv_cache_dtype="fp8"` the cache holds e4m3 bytes and each layer's `Attention` holds its scales.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from pagedkv_lib.core.kv_cache import allocate_kv_cache
from pagedkv_lib.core.model_inputs import ModelInputs, pad_block_tables, prepare_decode, prepare_prefill
from pagedkv_lib.core.sequence import Sequence

from .attention_layer import Attention, select_kernels
from .config import EngineConfig
from .model import Qwen3ForCausalLM
from .sampler import Sampler


class ModelRunner:
    def __init__(self, config: EngineConfig, seed: int = 0):
        self.config = config
        m = config.model
        self.device = torch.device(config.device)
        self.kernels = select_kernels(config.use_triton, self.device, m.dtype)
        self.model = Qwen3ForCausalLM(m, self.kernels).to(self.device)
        # zeros, not torch.empty: an unwritten row that is read by mistake shows as a wrong token, not a NaN
        self.kv_cache = allocate_kv_cache(m.num_hidden_layers, config.num_kvcache_blocks, config.block_size,
                                          m.num_key_value_heads, m.head_dim, config.kv_cache_torch_dtype,
                                          self.device, fill=0.0)          # [2, L, N, S, H_kv, D]
        self.attention_layers = [a for a in self.model.modules() if isinstance(a, Attention)]  # one per layer
        for attn in self.attention_layers:
            attn.calculate_kv_scales = config.calculate_kv_scales
        self.sampler = Sampler(seed, self.device)

    def kv_scales(self) -> list[tuple[float, float]]:
        """(k_scale, v_scale) of every layer, in layer order (1.0 until calibrated; unused for 'auto')."""
        return [(a.k_scale, a.v_scale) for a in self.attention_layers]

    def prepare(self, seqs: list[Sequence], is_prefill: bool) -> ModelInputs:
        """prepare_prefill/prepare_decode; a prefill always gets block tables: attention reads the cache."""
        if not is_prefill:
            return prepare_decode(seqs, self.device)
        inputs = prepare_prefill(seqs, self.device)
        if inputs.block_tables is None:                  # no prefix hit: nano-vllm attends to k, v directly
            tables = pad_block_tables([s.block_table for s in seqs], self.device)  # [B, M]
            inputs = replace(inputs, block_tables=tables)
        return inputs

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], is_prefill: bool, temperatures: list[float]) -> list[int]:
        """One forward over the scheduled sequences -> one sampled token per sequence."""
        inputs = self.prepare(seqs, is_prefill)
        hidden = self.model(inputs.input_ids, inputs.positions, inputs, self.kv_cache)  # [T, E]
        if is_prefill:
            hidden = hidden[inputs.cu_seqlens_q[1:].long() - 1]                        # [B, E] last tokens
        logits = self.model.compute_logits(hidden)                                      # [B, V]
        t = torch.tensor(temperatures, dtype=torch.float32, device=self.device)         # [B]
        return self.sampler(logits, t).tolist()
