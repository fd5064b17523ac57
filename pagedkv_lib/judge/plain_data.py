"""Plain data for the judge's protocol: what a hostile child may send and the parent can read without running
any of the child's code. Tensors travel as (TENSOR_TAG, dtype name, shape, raw bytes); everything else must be
None, bool, int, float, str, bytes, list, tuple or dict, and each field read is checked for its type."""
from __future__ import annotations

import pickle

import torch

TENSOR_TAG = "__tensor__"
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2)}


class ProtocolError(ValueError):
    """The child sent something that is not a well-formed message (a bug, or tampering)."""


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused to load the global {module}.{name}")


def pack(obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return (TENSOR_TAG, str(t.dtype).removeprefix("torch."), list(t.shape), raw)
    if type(obj) in (list, tuple):
        return type(obj)(pack(v) for v in obj)
    if type(obj) is dict:
        return {k: pack(v) for k, v in obj.items()}
    return obj


def unpack(obj):
    if type(obj) is tuple and len(obj) == 4 and obj[0] == TENSOR_TAG:
        _, dtype, shape, raw = obj
        dtype = DTYPES[dtype]
        shape = [as_int(n) for n in expect(shape, list)]
        if not raw:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(expect(raw, bytes)), dtype=dtype).reshape(shape)
    if type(obj) in (list, tuple):
        return type(obj)(unpack(v) for v in obj)
    if type(obj) is dict:
        return {k: unpack(v) for k, v in obj.items()}
    return obj


def expect(value, typ, length: int | None = None):
    if type(value) is not typ or (length is not None and len(value) != length):
        raise ProtocolError(f"expected a {typ.__name__}" + (f" of {length}" if length is not None else "")
                            + f", got {type(value).__name__}")
    return value


def as_int(value) -> int:
    return expect(value, int)


def as_str(value) -> str:
    return expect(value, str)


def as_float(value) -> float:
    if type(value) is int:
        return float(value)
    return expect(value, float)
