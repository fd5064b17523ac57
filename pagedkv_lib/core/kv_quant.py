"""An FP8 KV cache: keys and values stored as float8 e4m3 bytes with one float32 scale per tensor.

Shapes: docs/conventions.md.
The convention is vLLM's (`csrc/quantization/fp8/nvidia/quant_utils.cuh`, "Quantize(HP / scale) => FP8,
Dequant(FP8) * scale => HP"):

    store:  byte  = e4m3( clamp(x.float() / scale, -448, 448) )     rounded to nearest, ties to even
    load:   value = byte.float() * scale                            then the math runs in float32

Saturation. e4m3fn has no infinity; its largest finite value is 448 and its NaN is the bit pattern S.1111.111.
What a plain `x.to(torch.float8_e4m3fn)` does past 448 depends on the torch version: since PyTorch PR #178817
(torch 2.12) a finite overflow or an infinity saturates to +-448; before it (torch 2.11 and older, as on the
course's GPU image) every magnitude above 464 became NaN. Triton's GPU conversion saturates; Triton 3.9's
interpreter neither saturates nor rounds correctly (tests/kernels/test_kv_quant_triton.py says how). So the
store clamps to +-448 explicitly: a key past the range becomes the largest byte, never a NaN that would poison
every softmax that reads it, on every torch and every backend. A NaN input stays NaN (clamp keeps it).

The scale. The largest magnitude that fits is `448 * scale`; the smallest normal one `2**-6 * scale` (below
it the step stays 2**-9 * scale, so relative precision fades). Per-tensor calibration maps the largest
observed |x| (amax) onto 448: `scale = amax / 448` (`compute_scale`). vLLM's scales default to 1.0, come from
a checkpoint calibrated offline (llm-compressor), or with `calculate_kv_scales=True` are computed once per
layer from the first forward as amax / K_SCALE_CONSTANT (200) for keys and amax / V_SCALE_CONSTANT (100) for
values (`vllm/envs.py`), leaving 2.2x and 4.5x headroom for later, larger values. Either way a scale never
changes after it is set: bytes already in the cache were written with it.
"""
from __future__ import annotations

import torch

from .kv_cache import gather_kv
from .validation import FLOAT_DTYPES, check_tensor

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0                      # torch.finfo(torch.float8_e4m3fn).max
CACHE_DTYPES = (*FLOAT_DTYPES, FP8_DTYPE)
K_SCALE_CONSTANT = 200.0             # vLLM's first-forward calibration: k_scale = amax(|k|) / 200
V_SCALE_CONSTANT = 100.0             # ... and v_scale = amax(|v|) / 100


def is_fp8(cache: torch.Tensor) -> bool:
    return cache.dtype == FP8_DTYPE


def scale_value(name: str, scale) -> float:
    """A scale as a Python float, checked: a float (or int) or a 1-element float32 tensor, finite and > 0."""
    if isinstance(scale, torch.Tensor):
        if scale.dtype != torch.float32 or scale.numel() != 1:
            raise TypeError(f"{name}: expected a Python float or a 1-element float32 tensor, got a tensor of "
                            f"shape {tuple(scale.shape)}, {str(scale.dtype).replace('torch.', '')}")
        value = float(scale)
    elif isinstance(scale, (int, float)) and not isinstance(scale, bool):
        value = float(scale)
    else:
        raise TypeError(f"{name}: expected a Python float or a 1-element float32 tensor, "
                        f"got {type(scale).__name__}")
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"{name}: expected a finite scale > 0, got {value}")
    return value


def check_kv_scales(k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale, v_scale,
                    check_values: bool = True) -> None:
    """Scales are required exactly when the caches are fp8: a missing one, or one for a 16/32-bit cache, is an
    error (the caller would silently store or read values off by the scale). `check_values=False`: a tensor
    scale's type and size are checked, not its value (reading a GPU tensor would be a host sync)."""
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, cache, dtypes=CACHE_DTYPES)
    if is_fp8(k_cache) != is_fp8(v_cache):
        raise TypeError(f"k_cache, v_cache: expected both float8_e4m3fn or neither, got {k_cache.dtype} and "
                        f"{v_cache.dtype}")
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        if is_fp8(k_cache):
            if scale is None:
                raise ValueError(f"{name}: a float8_e4m3fn cache needs its scale (stored value = x / scale); "
                                 f"got None")
            if check_values or not isinstance(scale, torch.Tensor):
                scale_value(name, scale)
            elif scale.dtype != torch.float32 or scale.numel() != 1:
                raise TypeError(f"{name}: expected a Python float or a 1-element float32 tensor, got a "
                                f"tensor of shape {tuple(scale.shape)}, "
                                f"{str(scale.dtype).replace('torch.', '')}")
        elif scale is not None:
            raise ValueError(f"{name}: scales apply only to a float8_e4m3fn cache; the caches are "
                             f"{str(k_cache.dtype).replace('torch.', '')}, so pass {name}=None")


def quantize_fp8(x: torch.Tensor, scale) -> torch.Tensor:
    """x [...] float -> e4m3 [...]: x.float() / scale, clamped to +-448, rounded to nearest even by the cast.

    `scale` is a float or a float32 tensor that broadcasts against x (per-head scales for the studies).
    """
    s = scale if isinstance(scale, torch.Tensor) else torch.tensor(scale, dtype=torch.float32)
    y = x.float() / s.to(device=x.device, dtype=torch.float32)          # [...] fp32
    return y.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)                     # [...] e4m3


def dequantize_fp8(x8: torch.Tensor, scale, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """e4m3 [...] -> x8.float() * scale in float32 (exact for every byte), then rounded once to `dtype`."""
    s = scale if isinstance(scale, torch.Tensor) else torch.tensor(scale, dtype=torch.float32)
    return (x8.float() * s.to(device=x8.device, dtype=torch.float32)).to(dtype)  # [...]


def gather_kv_dequant(cache: torch.Tensor, block_table, context_len: int, scale,
                      dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The first `context_len` rows of one sequence from an fp8 cache, dequantized: [context_len, H_kv, D]."""
    check_tensor("cache", cache, ndim=4, dtypes=(FP8_DTYPE,))
    s = scale_value("scale", scale)
    return dequantize_fp8(gather_kv(cache, block_table, context_len), s, dtype)  # [context_len, H_kv, D]


def compute_scale(x: torch.Tensor, target: float = FP8_MAX) -> float:
    """The per-tensor scale that maps amax(|x|) onto `target` (448 by default): amax / target.

    An all-zero tensor gets 1.0 (any scale stores zeros exactly; vLLM's default); NaN or inf is an error.
    """
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    amax = float(x.detach().abs().max()) if x.numel() else 0.0
    if amax != amax or amax == float("inf"):
        raise ValueError(f"x: expected finite values to calibrate a scale, got amax {amax}")
    return amax / target if amax > 0 else 1.0


def calibrate_kv_scales(keys: torch.Tensor, values: torch.Tensor, k_target: float = FP8_MAX,
                        v_target: float = FP8_MAX) -> tuple[float, float]:
    """(k_scale, v_scale) from a calibration batch of one layer's keys and values [T, H_kv, D].

    With the default targets the largest calibration value lands exactly on 448; vLLM's first-forward
    calibration uses k_target = K_SCALE_CONSTANT, v_target = V_SCALE_CONSTANT to leave headroom.
    """
    return compute_scale(keys, k_target), compute_scale(values, v_target)
