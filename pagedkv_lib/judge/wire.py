"""The child-to-parent wire format: a pickle of plain data, tensors sent as (tag, dtype, shape, bytes).

The parent's unpickler refuses every global, so whatever a hostile child writes, loading it can only build
lists, tuples, dicts, numbers, strings and bytes; tensors are rebuilt from raw bytes by `decode`.
"""
from __future__ import annotations

import io
import pickle

import torch

TAG = "__tensor__"
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool)}


def encode(obj) -> bytes:
    return pickle.dumps(_pack(obj), protocol=4)


def decode(data: bytes):
    return _unpack(_PlainUnpickler(io.BytesIO(data)).load())


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused to load the global {module}.{name}")


def _pack(obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return (TAG, str(t.dtype).removeprefix("torch."), list(t.shape), raw)
    if type(obj) in (list, tuple):
        return type(obj)(_pack(v) for v in obj)
    if type(obj) is dict:
        return {k: _pack(v) for k, v in obj.items()}
    return obj


def _unpack(obj):
    if type(obj) is tuple and len(obj) == 4 and obj[0] == TAG:
        _, dtype, shape, raw = obj
        dtype = DTYPES[dtype]
        if not raw:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
    if type(obj) in (list, tuple):
        return type(obj)(_unpack(v) for v in obj)
    if type(obj) is dict:
        return {k: _unpack(v) for k, v in obj.items()}
    return obj
