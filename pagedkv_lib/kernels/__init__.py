"""Triton kernels of the course, each beside its PyTorch reference in `pagedkv_lib`.

    store_kvcache_triton           (pagedkv_lib.kernels.triton_store_kvcache; reference
                                    pagedkv_lib.core.store_kvcache)
    paged_attention_decode_triton  (pagedkv_lib.kernels.triton_decode_attention; reference
                                    pagedkv_lib.core.paged_attention.paged_attention_decode)
    paged_attention_varlen_triton  (pagedkv_lib.kernels.triton_prefill_attention; reference
                                    pagedkv_lib.core.paged_attention.paged_attention_varlen)
    add_rms_norm_triton, qk_norm_rope_triton, silu_and_mul_triton
                                   (pagedkv_lib.kernels.triton_fused_ops: the decoder layer's small
                                    operations, fused; references in pagedkv_lib.engine.layers)

Beside them: attention_args (the checks the attention launchers share), decode_config (the decode kernels'
tiles and work partition, plain Python), triton_decode_merge (split decode's v3 plan helpers and its merges,
reduce_splits and merge_chunks, which the cascade and MLA kernels use too), triton_online_softmax (the
online softmax's update for one tile, which the attention kernels call).

Importing this package picks the backend first (`backend.configure()`: CUDA if present, else Triton's
interpreter, which must be chosen before any kernel is decorated); `backend.describe()` says which. The
kernels are imported on first use, so `backend` works even where triton is not installed.
"""
import importlib

from . import backend

backend.configure()

_KERNELS = {
    "store_kvcache_triton": "triton_store_kvcache",
    "paged_attention_decode_triton": "triton_decode_attention",
    "paged_attention_varlen_triton": "triton_prefill_attention",
    "add_rms_norm_triton": "triton_fused_ops",
    "qk_norm_rope_triton": "triton_fused_ops",
    "silu_and_mul_triton": "triton_fused_ops",
}
__all__ = ["backend", *_KERNELS]


def __getattr__(name: str):
    if name in _KERNELS:
        backend.require_triton()
        module = importlib.import_module(f".{_KERNELS[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
