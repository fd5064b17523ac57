"""What the paged attention launchers (decode and prefill) share: argument checks (types, shapes, dtypes, GQA,
contiguity, devices), the dequantization scales of FP8 caches, and the device facts a launch needs (the
operand type of `tl.dot`, the number of SMs).

Shapes: docs/conventions.md. FP8 caches are float8 e4m3 with one scale per tensor (k_scale, v_scale): the
dequantized value is `value * scale`. A scale is a Python float or a 0-d / 1-element float32 tensor on the
cache's device, which the kernels read themselves (no host sync; what vLLM passes).

Checks that read device values (lengths, cu_seqlens_q, tensor scales) are the launchers' `check_values`
switch: on by default (a learner calling a launcher gets every check), off on the engine's path, where
reading a GPU tensor's value would stop the host until the GPU catches up (a host sync per layer per step).
The engine turns them back on with `EngineConfig(debug_checks=True)`. Under CUDA-graph capture they are
always skipped (reading there is an error, not just a wait). Everything else (types, shapes, dtypes,
strides, devices) is host metadata and is always checked.
"""
import torch

from pagedkv_lib.core.kv_quant import scale_value

from .backend import MISSING_TRITON, is_interpreted

try:
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

LOG2E = 1.4426950408889634  # exp(x) = exp2(x * LOG2E): the kernels keep their scores in base 2
FP8 = torch.float8_e4m3fn
Q_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def values_readable(t: torch.Tensor, check_values: bool = True) -> bool:
    """Whether a check may read t's values: asked for (`check_values`) and not under CUDA-graph capture."""
    return check_values and not (t.is_cuda and torch.cuda.is_current_stream_capturing())


def scale_arg(name: str, scale, cache: torch.Tensor, check_values: bool = True):
    """Check a dequantization scale; return the kernel argument: a float, or the 1-element tensor."""
    if scale is None:
        if cache.dtype == FP8:
            raise ValueError(f"{name}: a float8_e4m3fn cache needs a scale (a float > 0 or a 1-element "
                             f"float32 tensor), got None")
        return 1.0
    if isinstance(scale, torch.Tensor) and scale.device != cache.device:
        raise ValueError(f"{name}: expected a tensor on {cache.device} like the cache, got {scale.device}")
    if isinstance(scale, torch.Tensor) and not values_readable(scale, check_values):  # types only
        if scale.dtype != torch.float32 or scale.numel() != 1:
            raise TypeError(f"{name}: expected a 1-element float32 tensor, got {tuple(scale.shape)} "
                            f"{dtype_name(scale.dtype)}")
        return scale
    value = scale_value(name, scale)                                  # type, finite, > 0 (core.kv_quant)
    arg = scale if isinstance(scale, torch.Tensor) else value
    return arg


def check_paged_args(fn: str, q, k_cache, v_cache, block_tables, lens, lens_name: str,
                     check_values: bool = True) -> None:
    """Types, shapes, dtypes, GQA, contiguity and devices shared by the paged attention launchers; the
    lengths' values (>= 1) only with `check_values` (module docstring)."""
    for name, t, ndim in (("q", q, 3), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4),
                          ("block_tables", block_tables, 2), (lens_name, lens, 1)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dim() != ndim:
            raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if q.dtype not in Q_DTYPES:
        raise TypeError(f"{fn}: q: expected float32, float16 or bfloat16, got {dtype_name(q.dtype)}")
    if k_cache.dtype not in (q.dtype, FP8):
        raise TypeError(f"k_cache: expected dtype {dtype_name(q.dtype)} like q, or float8_e4m3fn with "
                        f"k_scale and v_scale, got {dtype_name(k_cache.dtype)}")
    if v_cache.dtype != k_cache.dtype or v_cache.shape != k_cache.shape:
        raise TypeError(f"v_cache: expected {dtype_name(k_cache.dtype)} {tuple(k_cache.shape)} like k_cache, "
                        f"got {dtype_name(v_cache.dtype)} {tuple(v_cache.shape)}")
    if k_cache.shape[3] != q.shape[2]:
        raise ValueError(f"k_cache: expected head_dim {q.shape[2]} like q, got shape {tuple(k_cache.shape)}")
    H, H_kv = q.shape[1], k_cache.shape[2]
    if H_kv < 1 or H % H_kv:
        raise ValueError(f"GQA: num_heads ({H}) must be a multiple of num_kv_heads ({H_kv})")
    for name, t in (("block_tables", block_tables), (lens_name, lens)):
        if t.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"{name}: expected dtype int32 (or int64), got {dtype_name(t.dtype)}")
    B = block_tables.shape[0]
    if tuple(lens.shape) != (B,):
        raise ValueError(f"{lens_name}: expected shape ({B},) [B] with B = {B} block table rows, "
                         f"got {tuple(lens.shape)}")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), (lens_name, lens)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor, got strides {tuple(t.stride())}")
    if block_tables.stride(1) != 1:
        raise ValueError(f"block_tables: expected rows with stride 1, "
                         f"got strides {tuple(block_tables.stride())}")
    devices = {t.device for t in (q, k_cache, v_cache, block_tables, lens)}
    if len(devices) != 1:
        raise ValueError(f"{fn}: expected all tensors on one device, got {sorted(map(str, devices))}")
    if B and values_readable(lens, check_values) and int(lens.min()) < 1:
        raise ValueError(f"{lens_name}: expected every length >= 1, got {lens.tolist()[:16]}")


def dot_args(q: torch.Tensor, cache: torch.Tensor) -> tuple:
    """(DOT_PRECISION, DOT_DTYPE): the operand type of the kernels' `tl.dot`s.

    Natively q's dtype, except for an FP8 cache read with a 16-bit q: fp16. On Hopper, e4m3 -> fp16 is one
    packed conversion per two values, e4m3 -> bf16 three (Triton goes through fp16), and conversions are
    slow instructions: with bf16 operands the first H200 run decoded an fp8 cache no faster than a bf16 one
    (benchmarks/NOTES.md). fp16 holds every e4m3 value and every probability exactly and q to more bits than
    bf16 (q must stay below 65504 in magnitude). In the interpreter: fp32, since its bf16 dot multiplies the
    raw bits (benchmarks/NOTES.md).
    """
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    if is_interpreted():
        return precision, tl.float32
    if cache.dtype == FP8 and q.dtype != torch.float32:
        return precision, tl.float16
    return precision, _TL_DTYPES[q.dtype]


def pdl_supported(device: torch.device) -> bool:
    """Programmatic dependent launch: a CUDA device of compute capability >= 9.0 (Hopper) and a Triton that
    has it. The decode launcher turns it on there (benchmarks/NOTES.md: 1-2 us less per call)."""
    return (device.type == "cuda" and not is_interpreted() and hasattr(tl.extra.cuda, "gdc_wait")
            and torch.cuda.get_device_capability(device) >= (9, 0))


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 4 for the interpreter (small grids on the CPU)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
