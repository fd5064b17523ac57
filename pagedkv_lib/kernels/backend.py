"""Where the Triton kernels run: natively on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton reads `TRITON_INTERPRET` when `@triton.jit` decorates a kernel (triton 3.x: `triton.knobs.runtime.
interpret`, looked up from os.environ at that moment), and the interpreter also patches parts of
`triton.language` when triton is first imported, so the choice must be made before `import triton`
anywhere in the process (the judge sets it before it forks its graders). `pagedkv_lib.kernels/__init__.py`
calls `configure()` first; every kernel module lives under that package, so Python runs it before them.
The interpreter runs each program as numpy code on CPU tensors: right for learning and testing, far too
slow to time.
"""
from __future__ import annotations

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
