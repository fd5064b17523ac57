"""What the judge and a graded child tell each other: a `Job` one way (JSON on an exec'd child's command line;
a fork inherits it), JSON lines back on a pipe, one object per message:

    {"type": "ready", "cases": 23}             set up (torch, 23 cases, limits, guard): the submission's clock
    {"type": "loaded", "error": null | O}      the submission imported, or why it cannot be graded
    {"type": "case", "index": 3, "time_s": 0.01, "observation": ..., "error": null | O,
     "fresh_child": false}                     case 3's result; true: the next case needs a fresh child
    {"type": "refused", "action": "..."}       a guard refused something: that is the verdict
    {"type": "mark", "index": 6}               the benchmark's timed call 3 begins (even) or ended (odd): the
                                               parent reads its own clock (speed.py)
    {"type": "done", "figures": null | {...}}  every case ran (and the benchmark, if asked for, gave figures)

The cases go the other way, to a sandboxed child only, pickled (`send_cases`, `receive_cases`): torch's
pickle cannot restore some dtypes (float8 e4m3 and e5m2 among them), so a tensor of a dtype outside
PICKLED_DTYPES travels as an integer view of the same element size and is viewed back on arrival.

O is an `Outcome` as a dict. In plain data a tensor is {"__tensor__": [dtype, shape, base64 bytes]}, a tuple
{"__tuple__": [...]}, a dict with keys other than strings {"__pairs__": [[key, value], ...]}. The parent runs
nothing a child sends: it parses JSON, requires each message's exact field names and each field's type, a
finite number wherever it uses one (a count, a time, a benchmark figure; a NaN inside an observation is
data), clips text, and rebuilds tensors from their bytes. A message longer than MAX_MESSAGE_BYTES, or a
result stream longer than MAX_RESULT_BYTES, is not one the judge's child writes: each is a few times the
largest a reference solution sends (benchmarks/judge_message_sizes.py measures them, per case set).
"""
from __future__ import annotations

import base64
import json
import math
import os
import pickle
import sys
from dataclasses import asdict, dataclass, fields

from .outcome import Outcome, clip

# judge_message_sizes.py, seed 0: the largest case message 1.8 MB on the CPU cases (126), 45 MB on the
# CUDA ones (130); the largest stream 3.2 MB (126) and 73 MB (133)
MAX_MESSAGE_BYTES = {"cpu": 8 * 2**20, "cuda": 256 * 2**20}
MAX_RESULT_BYTES = {"cpu": 32 * 2**20, "cuda": 512 * 2**20}
MAX_CASES = 10_000                     # cases of one exercise (the largest set has a few hundred)
PICKLED_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                  "float64", "complex64", "complex128")     # torch's pickle restores these as they are
_SAME_SIZE = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}    # bytes per element -> the view that travels


@dataclass
class Job:
    """What one child does: plain data, so that it travels as JSON."""
    exercise_id: int
    path: str | None                  # the file to grade (None: a notebook's globals, in a fork)
    seed: int
    device: str
    start: int                        # the first case to run (a restarted child goes on after a crash)
    bench: bool
    scratch: str                      # the child's working directory, the only place it may write
    memory_mb: int | None
    cpu_s: int
    guards: bool = True               # the audit hook (guards.py); off only to test the OS layer alone

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class ProtocolError(Exception):
    """Bytes on the result pipe that are not a message (a bug, or a submission writing to the pipe)."""


@dataclass(frozen=True)
class Ready:
    cases: int                        # how many cases the child built (the parent builds the same ones)


@dataclass(frozen=True)
class Loaded:
    error: Outcome | None = None


@dataclass(frozen=True)
class CaseDone:
    index: int
    time_s: float
    observation: object = None
    error: Outcome | None = None
    fresh_child: bool = False         # the case may have left the process corrupt: end it, go on in a new one


@dataclass(frozen=True)
class Refused:
    action: str


@dataclass(frozen=True)
class Mark:
    index: int                        # 2 i: timed call i begins; 2 i + 1: it ended (the device synchronised)


@dataclass(frozen=True)
class Done:
    figures: dict | None = None       # the benchmark's, when one was asked for


MESSAGES = {"ready": Ready, "loaded": Loaded, "case": CaseDone, "refused": Refused, "mark": Mark,
            "done": Done}
_NAMES = {cls: name for name, cls in MESSAGES.items()}


def encode(message) -> bytes:
    body = {f.name: getattr(message, f.name) for f in fields(message)}
    body = {k: (v.to_dict() if isinstance(v, Outcome) else to_plain(v)) for k, v in body.items()}
    return json.dumps({"type": _NAMES[type(message)], **body}).encode() + b"\n"


def decode(line: bytes):
    """The message of one line; ProtocolError if it is not one."""
    try:
        body = json.loads(line)
        cls = MESSAGES[body.pop("type")]
        names = {f.name for f in fields(cls)}
        if set(body) != names:
            raise ProtocolError(f"{cls.__name__} with fields {sorted(body)}, expected {sorted(names)}")
        return cls(**{name: _FIELDS[name](value) for name, value in body.items()})
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise ProtocolError(f"not a message ({type(err).__name__}): {bytes(line[:80])!r}") from None


def _count(value) -> int:
    if type(value) is not int or not 0 <= value <= MAX_CASES:
        raise ProtocolError(f"expected a count from 0 to {MAX_CASES}, got {clip(repr(value))}")
    return value


def _seconds(value) -> float:
    if type(value) not in (int, float) or not (math.isfinite(value) and value >= 0):
        raise ProtocolError(f"expected finite seconds >= 0, got {clip(repr(value))}")
    return float(value)


def _text(value) -> str:
    if type(value) is not str:
        raise ProtocolError(f"expected text, got a {type(value).__name__}")
    return clip(value)


def _flag(value) -> bool:
    if type(value) is not bool:
        raise ProtocolError(f"expected true or false, got {clip(repr(value))}")
    return value


def _error(value):
    return None if value is None else Outcome.from_child(value)


def _figures(value):
    """A benchmark's figures: plain data whose numbers are finite (they are printed, and go into --json)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise ProtocolError(f"expected figures as a dict, got a {type(value).__name__}")
    return _finite(from_plain(value))


def _finite(value):
    if type(value) is float and not math.isfinite(value):
        raise ProtocolError(f"a benchmark figure is {value}")
    if type(value) in (list, tuple):
        return type(value)(_finite(v) for v in value)
    if type(value) is dict:
        return {k: _finite(v) for k, v in value.items()}
    if type(value) is str:
        return clip(value)
    return value


def to_plain(value):
    """`value` as JSON-able data (see the module docstring for tensors, tuples and non-string keys)."""
    if type(value) is tuple:
        return {"__tuple__": [to_plain(v) for v in value]}
    if type(value) is list:
        return [to_plain(v) for v in value]
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {k: to_plain(v) for k, v in value.items()}
        return {"__pairs__": [[to_plain(k), to_plain(v)] for k, v in value.items()]}
    if type(value).__name__ == "Tensor":
        import torch

        flat = value.detach().cpu().contiguous().reshape(-1)
        return {"__tensor__": [str(flat.dtype).removeprefix("torch."), list(value.shape),
                               base64.b64encode(flat.view(torch.uint8).numpy().tobytes()).decode()]}
    return value


def from_plain(value):
    """The inverse of `to_plain`, on data that came from a child: only plain values and tensors come out."""
    if type(value) is list:
        return [from_plain(v) for v in value]
    if type(value) is not dict:
        return value
    if len(value) == 1 and "__tuple__" in value:
        return tuple(from_plain(v) for v in value["__tuple__"])
    if len(value) == 1 and "__pairs__" in value:       # a key that is a list, dict or tensor: TypeError
        return {k: v for k, v in (from_plain(p) for p in value["__pairs__"])}
    if len(value) == 1 and "__tensor__" in value:
        return _tensor(value["__tensor__"])
    return {k: from_plain(v) for k, v in value.items()}


def _tensor(fields_):
    import torch  # only when a tensor travels: a parent starts its children first

    try:
        dtype_name, shape, text = fields_
        dtype = getattr(torch, dtype_name)
        if not isinstance(dtype, torch.dtype) or not all(type(n) is int and n >= 0 for n in shape):
            raise ValueError(dtype_name)
        raw = base64.b64decode(text, validate=True)
        if not raw:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
    except (ValueError, TypeError, AttributeError, RuntimeError) as err:
        raise ProtocolError(f"not a tensor: {err}") from None


_FIELDS = {"cases": _count, "index": _count, "time_s": _seconds, "action": _text, "error": _error,
           "observation": from_plain, "figures": _figures, "fresh_child": _flag}


def send_cases(cases, file) -> None:
    """Pickle `cases` into `file`, every tensor of a dtype torch cannot unpickle as its same-size view."""
    _CasePickler(file, pickle.HIGHEST_PROTOCOL).dump(cases)


def receive_cases(file):
    """The cases `send_cases` wrote into `file`, each tensor in its own dtype again."""
    return pickle.load(file)


class _CasePickler(pickle.Pickler):
    def reducer_override(self, obj):
        torch = sys.modules.get("torch")              # no torch imported: no tensor to pickle
        if torch is not None and isinstance(obj, torch.Tensor):
            dtype = str(obj.dtype).removeprefix("torch.")
            if dtype not in PICKLED_DTYPES:
                same_size = getattr(torch, _SAME_SIZE[obj.dtype.itemsize])
                return _viewed_as, (obj.detach().view(same_size), dtype)   # same shape, strides and bytes
        return NotImplemented


def _viewed_as(tensor, dtype: str):
    import torch

    return tensor.view(getattr(torch, dtype))


class LineReader:
    """Splits what is read from the result pipe into messages (`feed` returns the complete ones); a line
    longer than the case set's MAX_MESSAGE_BYTES is a ProtocolError before it is parsed, or before it ends."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data: bytes, device: str = "cpu") -> list:
        limit = MAX_MESSAGE_BYTES[device]
        self.buf += data
        if b"\n" not in data:                        # only new bytes can end a line
            lines = []
        else:
            *lines, rest = self.buf.split(b"\n")
            self.buf = bytearray(rest)
        if len(self.buf) > limit or any(len(line) > limit for line in lines):
            raise ProtocolError(f"a message longer than {limit} bytes")
        return [decode(line) for line in lines]


class Channel:
    """The child's end: whole lines. It keeps its own `os.write` and `encode`, so a submission that patches
    `os` or this module does not change what the judge itself sends."""

    def __init__(self, fd: int):
        self.fd = fd
        self._write = os.write
        self._encode = encode

    def send(self, message) -> None:
        view = memoryview(self._encode(message))
        while view:
            view = view[self._write(self.fd, view):]
