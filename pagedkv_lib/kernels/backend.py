"""Where the Triton kernels run: natively on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton reads `TRITON_INTERPRET` when `@triton.jit` decorates a kernel (triton 3.x: `triton.knobs.runtime.
interpret`, looked up from os.environ at that moment), and the interpreter also patches parts of
`triton.language` when triton is first imported, so the choice must be made before `import triton`
anywhere in the process (the judge sets it before it forks its graders). `pagedkv_lib.kernels/__init__.py`
calls `configure()` first; every kernel module lives under that package, so Python runs it before them.
The interpreter runs each program as numpy code on CPU tensors: right for learning and testing, far too
slow to time. `fp8_unsupported_reason()` says whether float8 e4m3 caches can be read here (tests skip with
it).
"""
import importlib.util
import os

import torch

MISSING_TRITON = (
    "pagedkv_lib.kernels needs the `triton` package, which is not installed here. On Linux: "
    "`pip install triton` (PyTorch's CUDA wheels bring it). Triton publishes no macOS or Windows wheels: "
    "there, run the Triton notebooks on Linux or Colab; the PyTorch references in pagedkv_lib still work."
)
INTERPRETER = "interpreter"
CUDA = "cuda"

_mode: str | None = None  # written once by configure(): the mode the kernels were decorated in


def triton_available() -> bool:
    """True if `import triton` would succeed (it is optional off Linux)."""
    return importlib.util.find_spec("triton") is not None


def require_triton() -> None:
    """Raise ImportError with install advice unless triton is importable."""
    if not triton_available():
        raise ImportError(MISSING_TRITON)


def _env_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def configure() -> str:
    """Choose the mode once, before the kernels are decorated: CUDA if a GPU is visible and the user did not
    ask for the interpreter (TRITON_INTERPRET=1), else the interpreter. Returns "cuda" or "interpreter"."""
    global _mode
    if _mode is None:
        if _env_interpret() or not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
            _mode = INTERPRETER
        else:
            _mode = CUDA
    return _mode


def is_interpreted() -> bool:
    """True when the kernels run in Triton's interpreter (CPU tensors), False when compiled for the GPU."""
    return configure() == INTERPRETER


def device() -> torch.device:
    """The device kernel inputs should live on: cuda natively, cpu in the interpreter."""
    return torch.device("cpu") if is_interpreted() else torch.device("cuda")


def describe() -> str:
    """One line for notebooks and benchmark logs, e.g. 'triton 3.6.0 on NVIDIA H200'."""
    if not triton_available():
        return "triton not installed (PyTorch references only)"
    import triton

    if is_interpreted():
        return f"triton {triton.__version__} interpreter (CPU)"
    return f"triton {triton.__version__} on {torch.cuda.get_device_name()}"


def fp8_unsupported_reason() -> str | None:
    """None if Triton kernels can load float8_e4m3fn here, else why not.

    Natively: compute capability >= 8.9. In the interpreter: a probe that widens every e4m3 encoding to fp32
    must match PyTorch on the finite ones (the interpreter decodes the NaN encodings 0x7F, 0xFF as +-480, so
    on the CPU a kernel that reads FP8 NaN garbage shows large errors rather than NaN).
    """
    require_triton()
    if not is_interpreted():
        cap = torch.cuda.get_device_capability()
        return None if cap >= (8, 9) else f"fp8 e4m3 needs compute capability >= 8.9, got {cap}"
    import triton
    import triton.language as tl

    @triton.jit
    def _widen(x_ptr, out_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)                                        # [N]
        tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))

    x = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)  # [256] every encoding
    out = torch.empty(256)                                            # [256] fp32
    try:
        _widen[(1,)](x, out, N=256)
    except Exception as exc:  # noqa: BLE001  (any failure means: not here)
        return (f"triton {triton.__version__}'s interpreter cannot load float8_e4m3fn: "
                f"{type(exc).__name__}: {exc}")
    finite = x.float().isfinite()
    if not torch.equal(out[finite], x.float()[finite]):
        return f"triton {triton.__version__}'s interpreter decodes finite float8_e4m3fn values wrongly"
    return None
