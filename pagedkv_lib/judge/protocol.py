"""The child-to-parent protocol of the judge: framing, message kinds, one record type per message.

A child writes frames to a pipe; the parent reads them without running any code the child sent:

    frame   = MAGIC (4 bytes) + payload length (8 bytes, big endian) + payload
    payload = pickle of (kind: int, fields: tuple) holding only plain data (plain_data.py: None, bool, int,
              float, str, bytes, list, tuple, dict; tensors as dtype, shape and raw bytes)

The parent's unpickler refuses every global, and `decode` checks every field's type, so whatever a hostile
child writes, the parent gets one of the message records below or a `ProtocolError`.

    Ready()                             the child is set up (torch and the cases imported, limits and guards
                                        on): the submission's own clock starts now
    Loaded()                            the submission was imported and its graded names checked
    LoadFailed(error)                   ... or not: why (an ErrorRecord)
    CaseStarted(index)                  case `index` begins (the parent starts its clock)
    CaseFinished(index, record)         its CaseRecord: what the submission returned, or what it raised
    BenchStarted() / BenchFinished(figures, error)   the optional benchmark, after the cases
    Refused(action)                     a guard refused something (writing outside the scratch directory,
                                        starting a process, loading native code, a socket): the verdict
    Finished()                          every case ran
    Fatal(trace)                        the child itself failed (the judge's fault, or a broken torch/os)
"""
from __future__ import annotations

import enum
import io
import os
import pickle
import struct
from dataclasses import dataclass, field

from .plain_data import PlainUnpickler, ProtocolError, as_float, as_int, as_str, expect, pack, unpack

MAGIC = b"PKVJ"
HEADER = struct.Struct("!4sQ")
MAX_FRAME = 64 * 2**20                 # bytes of one frame's payload; more is tampering


class Kind(enum.IntEnum):
    READY = 10
    LOADED = 1
    LOAD_FAILED = 2
    CASE_STARTED = 3
    CASE_FINISHED = 4
    BENCH_STARTED = 5
    BENCH_FINISHED = 6
    REFUSED = 7
    FINISHED = 8
    FATAL = 9


# ----------------------------------------------------------------------------------------------------------
# records

@dataclass(frozen=True)
class ErrorRecord:
    """An exception raised by submitted code, described in the child: its verdict, a line, a short trace."""
    verdict: str
    message: str
    hint: str = ""
    trace: tuple = ()

    def fields(self) -> tuple:
        return (self.verdict, self.message, self.hint, list(self.trace))

    @classmethod
    def from_exception(cls, exc: BaseException, files=()) -> ErrorRecord:
        from .outcome import describe_exception

        d = describe_exception(exc, files)
        return cls(d["verdict"], d["message"], d["hint"], tuple(d["trace"]))

    @classmethod
    def from_fields(cls, f) -> ErrorRecord:
        verdict, message, hint, trace = expect(f, tuple, 4)
        trace = tuple(as_str(t) for t in expect(trace, list))
        return cls(as_str(verdict), as_str(message), as_str(hint), trace)


@dataclass(frozen=True)
class CaseRecord:
    """What one case gave: the observation (plain data, see cases.observe) or an error, and its time."""
    observation: object = None
    error: ErrorRecord | None = None
    time_s: float = 0.0

    def fields(self) -> tuple:
        return (pack(self.observation), None if self.error is None else self.error.fields(), self.time_s)

    @classmethod
    def from_fields(cls, f) -> CaseRecord:
        obs, err, time_s = expect(f, tuple, 3)
        return cls(unpack(obs), None if err is None else ErrorRecord.from_fields(err), as_float(time_s))


@dataclass(frozen=True)
class Ready:
    kind = Kind.READY


@dataclass(frozen=True)
class Loaded:
    kind = Kind.LOADED


@dataclass(frozen=True)
class LoadFailed:
    error: ErrorRecord
    kind = Kind.LOAD_FAILED


@dataclass(frozen=True)
class CaseStarted:
    index: int
    kind = Kind.CASE_STARTED


@dataclass(frozen=True)
class CaseFinished:
    index: int
    record: CaseRecord
    kind = Kind.CASE_FINISHED


@dataclass(frozen=True)
class BenchStarted:
    kind = Kind.BENCH_STARTED


@dataclass(frozen=True)
class BenchFinished:
    figures: dict = field(default_factory=dict)     # label -> plain value
    error: str = ""
    kind = Kind.BENCH_FINISHED


@dataclass(frozen=True)
class Refused:
    action: str                                     # "opening /path for writing", "starting a process", ...
    kind = Kind.REFUSED


@dataclass(frozen=True)
class Finished:
    kind = Kind.FINISHED


@dataclass(frozen=True)
class Fatal:
    trace: str
    kind = Kind.FATAL


Message = (Ready | Loaded | LoadFailed | CaseStarted | CaseFinished | BenchStarted | BenchFinished | Refused
           | Finished | Fatal)


# ----------------------------------------------------------------------------------------------------------
# encoding

def encode(message) -> bytes:
    """One whole frame for `message`."""
    kind = message.kind
    if kind == Kind.LOAD_FAILED:
        fields = (message.error.fields(),)
    elif kind == Kind.CASE_STARTED:
        fields = (message.index,)
    elif kind == Kind.CASE_FINISHED:
        fields = (message.index, message.record.fields())
    elif kind == Kind.BENCH_FINISHED:
        fields = (pack(message.figures), message.error)
    elif kind == Kind.REFUSED:
        fields = (message.action,)
    elif kind == Kind.FATAL:
        fields = (message.trace,)
    else:
        fields = ()
    payload = pickle.dumps((int(kind), fields), protocol=4)
    return HEADER.pack(MAGIC, len(payload)) + payload


def decode(payload: bytes):
    """The message record of one frame's payload; ProtocolError if it is not one."""
    try:
        kind, fields = PlainUnpickler(io.BytesIO(payload)).load()
        kind = Kind(kind)
        fields = expect(fields, tuple)
        if kind == Kind.LOAD_FAILED:
            return LoadFailed(ErrorRecord.from_fields(*expect(fields, tuple, 1)))
        if kind == Kind.CASE_STARTED:
            return CaseStarted(as_int(*expect(fields, tuple, 1)))
        if kind == Kind.CASE_FINISHED:
            index, record = expect(fields, tuple, 2)
            return CaseFinished(as_int(index), CaseRecord.from_fields(record))
        if kind == Kind.BENCH_FINISHED:
            figures, error = expect(fields, tuple, 2)
            return BenchFinished(expect(unpack(figures), dict), as_str(error))
        if kind == Kind.REFUSED:
            return Refused(as_str(*expect(fields, tuple, 1)))
        if kind == Kind.FATAL:
            return Fatal(as_str(*expect(fields, tuple, 1)))
        expect(fields, tuple, 0)
        return {Kind.READY: Ready, Kind.LOADED: Loaded, Kind.BENCH_STARTED: BenchStarted,
                Kind.FINISHED: Finished}[kind]()
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"not a message: {type(exc).__name__}: {exc}") from None


class FrameReader:
    """Splits the bytes read from the result pipe into messages (`feed` returns those now complete)."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data: bytes) -> list:
        self.buf += data
        messages = []
        while len(self.buf) >= HEADER.size:
            magic, size = HEADER.unpack_from(self.buf)
            if magic != MAGIC or size > MAX_FRAME:
                raise ProtocolError("a frame that the child's channel did not write")
            if len(self.buf) < HEADER.size + size:
                break
            payload = bytes(self.buf[HEADER.size : HEADER.size + size])
            del self.buf[: HEADER.size + size]
            messages.append(decode(payload))
        return messages


class Channel:
    """The child's end: writes whole frames. It keeps its own references to `os.write` and `encode`, so a
    submission that patches `os` or this module later does not reach the frames already being sent."""

    def __init__(self, fd: int):
        self.fd, self._write, self._encode = fd, os.write, encode

    def send(self, message) -> None:
        view = memoryview(self._encode(message))
        while view:
            view = view[self._write(self.fd, view):]
