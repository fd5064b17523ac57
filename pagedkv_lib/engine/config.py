"""The engine's two configurations, in nano-vllm's shape (`nanovllm/config.py`): the model and the engine.

`ModelConfig` uses Hugging Face's Qwen3 field names (`hidden_size`, `num_key_value_heads`, ...) with a tiny
default (4 layers, hidden 256, 8 query heads, 2 KV heads, vocab 512) that runs on a laptop CPU.
`EngineConfig` holds the scheduler's limits and the KV pool. Unlike nano-vllm, the pool is given in blocks
(`num_kvcache_blocks`) rather than measured from free GPU memory, and any block size is allowed (the course's
reference attention has no FlashAttention constraint). Every check says what was expected and what was given.

The KV cache's dtype follows vLLM's `kv_cache_dtype`: "auto" stores K/V in the model's dtype; "fp8" (or its
alias "fp8_e4m3") stores float8 e4m3 bytes with one scale per tensor and layer (notebook 13). The scales are
1.0 (vLLM's default) unless `calculate_kv_scales`, which sets each layer's once, from the K/V of the first
forward (amax / 200 for keys, amax / 100 for values, vLLM's constants), and never changes them afterwards.
vLLM's "fp8_e5m2" is refused: the course's kernels read e4m3 only.

Speculative decoding (notebook 20) is on when `num_speculative_tokens` k > 0 (vLLM's speculative_config
names): before each decode step an n-gram proposer drafts up to k tokens per sequence from its own history
(`prompt_lookup_min` .. `prompt_lookup_max` tokens matched), the step verifies them in one forward and keeps
the agreeing prefix plus a bonus token. Greedy only: a request with temperature > 0 is refused.

A CPU tier (notebook 22) is on when `num_cpu_blocks` > 0: cached prefix blocks evicted from the pool are
written out to that many blocks of CPU memory and loaded back on a later hit instead of recomputed
(core/tiered_block_manager.py, engine/kv_offload.py).

`overlap_scheduling` (SGLang's overlap scheduler, vLLM's async scheduling; engine/future_tokens.py) lets the
host schedule and launch step t+1 before it reads step t's tokens. Off by default: on a CPU the forward runs
while it is launched, so there is nothing to overlap, and the lagging postprocess (a sequence's finish is
seen one step later, an EOS costs one wasted token) makes the step statistics the notebooks teach harder to
read; the GPU benchmark measures both. It excludes speculation: drafting needs the last token on the host.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pagedkv_lib.core.kv_quant import FP8_DTYPE
from pagedkv_lib.core.validation import check_gqa, check_positive_int

KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 512
    hidden_size: int = 256
    intermediate_size: int = 768
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    head_dim: int = 32
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 4096
    eos_token_id: int | None = None        # None: no end-of-sequence token, requests stop at max_tokens
    seed: int = 0                          # the random weights are a function of this seed
    dtype: torch.dtype = torch.float32

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"):
            check_positive_int(name, getattr(self, name))
        check_gqa(self.num_attention_heads, self.num_key_value_heads)
        if self.head_dim % 2:
            raise ValueError(f"head_dim: expected an even number (rotary pairs), got {self.head_dim}")
        if self.eos_token_id is not None and not 0 <= self.eos_token_id < self.vocab_size:
            raise ValueError(f"eos_token_id: expected None or 0 <= id < {self.vocab_size}, "
                             f"got {self.eos_token_id}")
        if self.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise ValueError(f"dtype: expected a float dtype, got {self.dtype}")


@dataclass(frozen=True)
class EngineConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    block_size: int = 16                   # tokens per KV block (nano-vllm: kvcache_block_size)
    num_kvcache_blocks: int = 64           # blocks in the pool, shared by all layers
    max_num_seqs: int = 16                 # most sequences in one step
    max_num_batched_tokens: int = 1024     # most prompt tokens in one prefill step
    max_model_len: int = 512               # longest sequence, prompt + generated
    device: str = "cpu"
    use_triton: bool | None = None         # None: the Triton kernels when CUDA and pagedkv_lib.kernels exist
    kv_cache_dtype: str = "auto"           # "auto": the model's dtype; "fp8" / "fp8_e4m3": e4m3 with scales
    calculate_kv_scales: bool = False      # fp8: set each layer's scales from the first forward (else 1.0)
    enforce_eager: bool = False            # True: no CUDA graphs for decode (nano-vllm's name)
    debug_checks: bool = False             # True: kernels also check device values (host syncs), no graphs
    num_speculative_tokens: int = 0        # k > 0: n-gram speculation, up to k drafts verified per step
    prompt_lookup_min: int = 1             # the shortest n-gram the proposer matches
    prompt_lookup_max: int = 3             # the longest (tried first)
    num_cpu_blocks: int = 0                # > 0: a CPU tier of that many blocks under the pool (notebook 22)
    overlap_scheduling: bool = False       # True: schedule and launch step t+1 before reading step t

    @property
    def kv_cache_torch_dtype(self) -> torch.dtype:
        return self.model.dtype if self.kv_cache_dtype == "auto" else FP8_DTYPE

    def __post_init__(self):
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype: expected one of {KV_CACHE_DTYPES} (e4m3 only: the course's "
                             f"kernels do not read e5m2), got {self.kv_cache_dtype!r}")
        if self.calculate_kv_scales and self.kv_cache_dtype == "auto":
            raise ValueError("calculate_kv_scales: expected kv_cache_dtype 'fp8' (scales belong to an fp8 "
                             "cache), got kv_cache_dtype 'auto'")
        for name in ("block_size", "num_kvcache_blocks", "max_num_seqs", "max_num_batched_tokens",
                     "max_model_len", "prompt_lookup_min", "prompt_lookup_max"):
            check_positive_int(name, getattr(self, name))
        k = self.num_speculative_tokens
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"num_speculative_tokens: expected an int >= 0 (0 = off), got {k!r}")
        c = self.num_cpu_blocks
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ValueError(f"num_cpu_blocks: expected an int >= 0 (0 = no CPU tier), got {c!r}")
        if self.overlap_scheduling and k:
            raise ValueError(f"overlap_scheduling: expected num_speculative_tokens 0 (drafting reads the "
                             f"last token on the host, which overlap leaves on the device), got {k}")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(f"prompt_lookup_min: expected <= prompt_lookup_max ({self.prompt_lookup_max}), "
                             f"got {self.prompt_lookup_min}")
        if self.max_model_len > self.model.max_position_embeddings:
            raise ValueError(f"max_model_len: expected <= max_position_embeddings "
                             f"({self.model.max_position_embeddings}), got {self.max_model_len}")
        # A preempted sequence comes back as one prefill of up to max_model_len tokens: it must fit one step
        if self.max_num_batched_tokens < self.max_model_len:
            raise ValueError(f"max_num_batched_tokens: expected >= max_model_len ({self.max_model_len}), "
                             f"got {self.max_num_batched_tokens}")
        # ... and the pool must hold one sequence of max_model_len tokens alone, or it could never finish
        if self.num_kvcache_blocks * self.block_size < self.max_model_len:
            raise ValueError(f"num_kvcache_blocks: expected >= {-(-self.max_model_len // self.block_size)} "
                             f"blocks of {self.block_size} (max_model_len {self.max_model_len}), "
                             f"got {self.num_kvcache_blocks}")
