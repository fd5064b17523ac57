"""What this machine offers the course: torch, Triton, a CUDA GPU or Triton's CPU interpreter."""
from __future__ import annotations

import importlib.util
import os

REPO_URL = "https://github.com/pagedkv-course/pagedkv-course"


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def kernel_mode() -> str:
    """'cuda' when Triton kernels run natively, 'interpreter' on CPU, 'unavailable' without Triton."""
    if not has_triton():
        return "unavailable"
    if has_cuda() and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "cuda"
    return "interpreter"


def describe_environment() -> str:
    """One line a learner can read: where tensors live and how the Triton kernels will run."""
    mode = kernel_mode()
    if mode == "cuda":
        import torch

        return f"GPU: {torch.cuda.get_device_name()} - Triton kernels run natively"
    if mode == "interpreter":
        return "CPU only - Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1), small shapes"
    return "CPU only, no Triton - the Triton notebooks show stored GPU figures only"


def versions() -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__}
    if has_triton():
        import triton

        out["triton"] = triton.__version__
    return out
