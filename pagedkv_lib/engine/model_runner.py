"""The model runner: owns the model and the KV cache; turns scheduled sequences into sampled tokens.

Shapes: docs/conventions.md. nano-vllm's `nanovllm/engine/model_runner.py` without tensor
parallelism: `allocate_kv_cache` once, then per step `prepare_prefill`/`prepare_decode` (from
`pagedkv_lib.core.model_inputs`), the forward, the logits of each sequence's LAST token, the sampler.
A decode step is either eager (`prepare`: prepare_decode on the host -> `to_device` -> placeholders resolved
-> the forward) or the graphs' own (`DecodeGraphs.run`: the same prepare_decode, padded to a captured batch
size and copied into the graphs' static buffers -> placeholders resolved -> replay).
With `kv_cache_dtype="fp8"` the cache holds e4m3 bytes and each layer's `Attention` holds its scales.

On a GPU a step never waits for the GPU except once, for its sampled tokens:
    inputs   built on the host (the scheduler knows every length), copied to the device asynchronously from
             pinned memory (a copy from pageable memory makes the host wait);
    kernels  launched with `check_values=False` (their value checks would read the device: a host sync
             per layer; `EngineConfig.debug_checks` turns them back on);
    decode   replayed from CUDA graphs (`decode_graphs.DecodeGraphs`) unless `enforce_eager` or
             `debug_checks` (a check that reads the device cannot run inside a graph);
    tokens   copied into pinned memory, then ONE explicit wait on a CUDA event: the scheduler needs them.

With a CPU tier, `transfer_kv` queues the step's saves and loads (engine/kv_offload.py) before the forward,
on the same stream.

With overlap scheduling (`EngineConfig.overlap_scheduling`, engine/future_tokens.py) `launch` returns before
the tokens are read: their copy is queued with its own event (two pinned buffers, used in turn), the engine
launches the next step, whose placeholder input ids `forward` resolves on the device from this step's
token tensor, and only then reads this step's tokens.

Speculating, a decode step whose sequences hold drafts is a verification (`verify`): every sequence's last
token and drafts as one varlen chunk (`prepare_verify`), eagerly, and the argmax at EVERY position.
"""
from __future__ import annotations

from dataclasses import fields, replace

import torch

from pagedkv_lib.core.kv_cache import allocate_kv_cache
from pagedkv_lib.core.model_inputs import ModelInputs, prepare_decode, prepare_prefill, prepare_verify
from pagedkv_lib.core.sequence import Sequence

from .attention_layer import Attention
from .config import EngineConfig
from .decode_graphs import DecodeGraphs
from .future_tokens import PendingTokens, resolve_placeholders
from .kernel_choice import select_kernels
from .kv_offload import KVTransfers, OffloadWorker
from .model import Qwen3ForCausalLM
from .sampler import Sampler


class ModelRunner:
    def __init__(self, config: EngineConfig, seed: int = 0):
        self.config = config
        m = config.model
        self.device = torch.device(config.device)
        self.cuda = self.device.type == "cuda"
        self.kernels = select_kernels(config.use_triton, self.device, m.dtype, config.debug_checks)
        self.model = Qwen3ForCausalLM(m, self.kernels).to(self.device)
        # zeros, not torch.empty: an unwritten row that is read by mistake shows as a wrong token, not a NaN
        self.kv_cache = allocate_kv_cache(m.num_hidden_layers, config.num_kvcache_blocks, config.block_size,
                                          m.num_key_value_heads, m.head_dim, config.kv_cache_torch_dtype,
                                          self.device, fill=0.0)          # [2, L, N, S, H_kv, D]
        self.attention_layers = [a for a in self.model.modules() if isinstance(a, Attention)]  # one per layer
        for attn in self.attention_layers:
            attn.calculate_kv_scales = config.calculate_kv_scales
        self.sampler = Sampler(seed, self.device)
        self.graphs = None
        if self.cuda and not config.enforce_eager and not config.debug_checks:  # checks read: no graphs
            self.graphs = DecodeGraphs(self.model, self.kv_cache, config.max_num_seqs, config.max_model_len,
                                       config.block_size)
        max_tokens_per_step = config.max_num_seqs * (1 + config.num_speculative_tokens)  # a verification's
        # two pinned buffers and events, used in turn: a step's tokens may still be unread when the next is
        # launched (overlap scheduling), never two steps' tokens
        self.host_tokens = [torch.zeros(max_tokens_per_step, dtype=torch.int64, pin_memory=self.cuda)
                            for _ in range(2)]                                                  # [T] each
        self.tokens_ready = [torch.cuda.Event() for _ in range(2)] if self.cuda else None
        self.num_reads = 0
        self.kv_offload = None         # the CPU tier's worker side (notebook 22), its one hook: transfer_kv
        if config.num_cpu_blocks:
            self.kv_offload = OffloadWorker(self.kv_cache, config.num_cpu_blocks)

    def transfer_kv(self, transfers: KVTransfers) -> None:
        """The CPU tier's copies of this step (saves, then loads), queued before the step's forward."""
        self.kv_offload.copy(transfers)

    def kv_scales(self) -> list[tuple[float, float]]:
        """(k_scale, v_scale) of every layer, in layer order (1.0 until calibrated; unused for 'auto')."""
        return [(a.k_scale, a.v_scale) for a in self.attention_layers]

    def to_device(self, inputs: ModelInputs) -> ModelInputs:
        """Host-built inputs on the device: pinned, then copied asynchronously (no host sync)."""
        if not self.cuda:
            return inputs
        moved = {f.name: getattr(inputs, f.name).pin_memory().to(self.device, non_blocking=True)
                 for f in fields(inputs) if isinstance(getattr(inputs, f.name), torch.Tensor)}
        return replace(inputs, **moved)

    def prepare(self, seqs: list[Sequence], is_prefill: bool) -> ModelInputs:
        """prepare_prefill/prepare_decode, on the host, for the eager forward (a graphed decode prepares its
        own: `DecodeGraphs.prepare`). A prefill always gets block tables (this engine's attention reads the
        cache, where nano-vllm attends to k, v directly when nothing is cached)."""
        if is_prefill:
            return prepare_prefill(seqs, "cpu", always_block_tables=True)
        return prepare_decode(seqs, "cpu")

    def forward(self, seqs: list[Sequence], is_prefill: bool,
                future: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states of each sequence's last token [B, E]: a decode by graph replay where one is captured
        for the batch, else eagerly. `future` [B_prev]: the previous step's sampled ids, which replace the
        placeholder input ids on the device (overlap scheduling)."""
        placeholders = any(s.last_token < 0 for s in seqs)
        if placeholders and (future is None or is_prefill):
            raise ValueError(f"input ids: expected placeholders (< 0) only in a decode step given the "
                             f"previous step's tokens, got is_prefill={is_prefill}, "
                             f"future given {future is not None}")
        if not is_prefill and self.graphs is not None:
            return self.graphs.run(seqs, future if placeholders else None)              # [B, E]
        inputs = self.to_device(self.prepare(seqs, is_prefill))
        if placeholders:
            resolve_placeholders(inputs.input_ids, future)                              # [T] on the device
        hidden = self.model(inputs.input_ids, inputs.positions, inputs, self.kv_cache)  # [T, E]
        if is_prefill:
            hidden = hidden[inputs.cu_seqlens_q[1:].long() - 1]                        # [B, E] last tokens
        return hidden

    def start_read(self, tokens: torch.Tensor) -> PendingTokens:
        """Queue the sampled ids' copy to the host (pinned, asynchronous) and an event after it; no wait."""
        if not self.cuda:
            return PendingTokens(tokens)
        i = self.num_reads % 2
        self.num_reads += 1
        host = self.host_tokens[i][: tokens.shape[0]]                                   # [T] pinned
        host.copy_(tokens, non_blocking=True)
        self.tokens_ready[i].record()
        return PendingTokens(tokens, host, self.tokens_ready[i])

    def read_tokens(self, tokens: torch.Tensor) -> list[int]:
        """The sampled ids as Python ints: the step's one wait for the GPU (an event after a pinned copy)."""
        return self.start_read(tokens).read()

    @torch.inference_mode()
    def launch(self, seqs: list[Sequence], is_prefill: bool, temperatures: list[float],
               future: torch.Tensor | None = None) -> PendingTokens:
        """One forward over the scheduled sequences and the sampler, queued; the tokens' copy to the host
        queued after them. `future`: the previous step's token tensor (placeholders, `forward`)."""
        greedy = not any(t > 0 for t in temperatures)                  # argmax needs no float32 logits
        hidden = self.forward(seqs, is_prefill, future)                                 # [B, E]
        logits = self.model.compute_logits(hidden, None if greedy else torch.float32)   # [B, V]
        return self.start_read(self.sampler(logits, temperatures))

    def run(self, seqs: list[Sequence], is_prefill: bool, temperatures: list[float]) -> list[int]:
        """One forward over the scheduled sequences -> one sampled token per sequence."""
        return self.launch(seqs, is_prefill, temperatures).read()

    @torch.inference_mode()
    def verify(self, seqs: list[Sequence]) -> list[list[int]]:
        """One forward over each sequence's last token and drafts -> the greedy argmax at each of its
        1 + len(seq.draft_token_ids) positions (what accept_greedy compares the drafts with)."""
        inputs = self.to_device(prepare_verify(seqs, [s.draft_token_ids for s in seqs], "cpu"))
        hidden = self.model(inputs.input_ids, inputs.positions, inputs, self.kv_cache)  # [T, E]
        logits = self.model.compute_logits(hidden, None)                                # [T, V]
        argmax = self.read_tokens(logits.argmax(dim=-1))                                 # T ints
        out, start = [], 0
        for seq in seqs:
            end = start + 1 + len(seq.draft_token_ids)
            out.append(argmax[start:end])
            start = end
        return out
