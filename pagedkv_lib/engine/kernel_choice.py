"""Which kernels the engine's model calls: `Kernels`, the reference set `REFERENCE`, and `select_kernels`.

A layer never decides for itself: the model runner picks one `Kernels` at start-up and hands it to every
layer (nano-vllm imports its kernels at module level; here the choice is an argument, so that one process
can hold a reference engine and a Triton engine side by side, as the equivalence tests do).

    reference   the PyTorch code of `pagedkv_lib.core` (store_kvcache, paged attention for decode and for
                varlen prefill); norm, RoPE and SwiGLU are the PyTorch code of engine/layers.py
    triton      the Triton kernels of `pagedkv_lib.kernels`: the store, decode and varlen attention, and the
                fused layer operations of `triton_fused_ops` (add + RMSNorm, q/k norm + RoPE + the K/V
                store, SiLU-and-mul)

The Triton launchers get `check_values=False` unless the engine is in its debug mode: the checks that read
a GPU tensor's value would each be a host sync, per layer and per step.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode, paged_attention_varlen
from pagedkv_lib.core.store_kvcache import store_kvcache


@dataclass(frozen=True)
class Kernels:
    name: str                 # "reference" or "triton"
    store_kvcache: Callable
    decode: Callable          # paged_attention_decode's signature
    varlen: Callable          # paged_attention_varlen's signature
    add_rms_norm: Callable | None = None   # fused layer operations (triton_fused_ops); None: the PyTorch
    qk_norm_rope: Callable | None = None   # code of engine.layers
    silu_and_mul: Callable | None = None


REFERENCE = Kernels(name="reference", store_kvcache=store_kvcache, decode=paged_attention_decode,
                    varlen=paged_attention_varlen)


def triton_kernels_available() -> bool:
    return (importlib.util.find_spec("triton") is not None
            and importlib.util.find_spec("pagedkv_lib.kernels") is not None)


def select_kernels(use_triton: bool | None, device, dtype: torch.dtype,
                   check_values: bool = False) -> Kernels:
    """The Triton kernels if asked (True) or, for None, when on CUDA with float16/bfloat16/float32.

    check_values: passed to the Triton launchers (attention_args: True reads device values, a host sync)."""
    if use_triton is None:
        use_triton = (torch.device(device).type == "cuda" and dtype != torch.float64
                      and triton_kernels_available())
    if not use_triton:
        return REFERENCE
    if not triton_kernels_available():
        raise ImportError("use_triton=True needs `triton` and `pagedkv_lib.kernels`")
    from pagedkv_lib import kernels  # chooses CUDA or Triton's interpreter on import

    return Kernels(name="triton",
                   store_kvcache=partial(kernels.store_kvcache_triton, check_values=check_values),
                   decode=partial(kernels.paged_attention_decode_triton, check_values=check_values),
                   varlen=partial(kernels.paged_attention_varlen_triton, check_values=check_values),
                   add_rms_norm=kernels.add_rms_norm_triton, qk_norm_rope=kernels.qk_norm_rope_triton,
                   silu_and_mul=kernels.silu_and_mul_triton)
