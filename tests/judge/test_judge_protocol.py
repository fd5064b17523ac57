"""The child-to-parent protocol: observations arrive as they were sent, and nothing a child writes is run or
can claim more than it is (a pass, a skip, tampering)."""
from __future__ import annotations

import io
import json
import math

import pytest
import torch

from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED, PASSED, RUNTIME_ERROR, Outcome
from pagedkv_lib.judge.protocol import (
    MAX_MESSAGE_BYTES,
    CaseDone,
    LineReader,
    Loaded,
    ProtocolError,
    Ready,
    Refused,
    decode,
    encode,
    receive_cases,
    send_cases,
)

OBSERVATION = {
    "ret": [1, -1, 2.5, None, True, "x", float("inf")],
    "pair": (3, [4, (5,)]),
    "ref_counts": {0: 1, 7: 2},                                  # keys that are not strings
    "tensors": [torch.randn(3, 2, dtype=torch.bfloat16), torch.arange(5, dtype=torch.int32),
                torch.tensor([True, False]), torch.empty(0, 4), torch.randn(2, 3).to(torch.float8_e4m3fn),
                torch.full((2,), float("nan"))],
}


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            (a.view(torch.uint8) == b.view(torch.uint8)).all()) if a.numel() else a.shape == b.shape
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_an_observation_arrives_as_it_was_sent():
    (got,) = LineReader().feed(encode(CaseDone(3, 0.5, OBSERVATION)))
    assert got.index == 3 and got.error is None and same(OBSERVATION, got.observation)


def test_lines_split_anywhere_still_make_whole_messages():
    data = encode(Ready(23)) + encode(Loaded()) + encode(Refused("opening /x for writing"))
    reader, messages = LineReader(), []
    for i in range(0, len(data), 7):
        messages += reader.feed(data[i:i + 7])
    assert messages == [Ready(23), Loaded(), Refused("opening /x for writing")]


def test_a_child_cannot_claim_a_pass_or_a_verdict_the_judge_does_not_know():
    for claimed in (PASSED, "tampering", "skipped", "judge error", "excellent", None):
        line = json.dumps({"type": "case", "index": 0, "time_s": 0.0, "observation": None,
                           "error": {"verdict": claimed}, "fresh_child": False})
        assert decode(line.encode()).error.verdict == RUNTIME_ERROR
    said = Outcome(NOT_IMPLEMENTED, "NotImplementedError", "replace it")
    assert decode(encode(Loaded(said))).error == said


@pytest.mark.parametrize("line", [
    b"PASSED", b"{}", b'{"type": "done", "extra": 1}', b'{"type": "case", "index": "0", "time_s": 0}',
    b'{"type": "case", "index": true, "time_s": 0}', b'{"type": "ready"}', b'{"type": "exec", "code": "1"}',
    b'{"type": "case", "index": 0, "time_s": 0, "observation": {"__tensor__": ["load", [1], ""]}}',
    b'{"type": "case", "index": 0, "time_s": 0, "observation": {"__tensor__": ["float32", [3], "AAAA"]}}',
    b'{"type": "case", "index": 0, "time_s": 0, "observation": {"__pairs__": [[[1], 2]]}}',
    b"[" * 100_000,
])
def test_what_is_not_a_message_is_a_protocol_error(line):
    with pytest.raises(ProtocolError):
        decode(line)


def test_a_line_longer_than_the_limit_is_a_protocol_error_before_it_ends():
    with pytest.raises(ProtocolError):
        LineReader().feed(b"x" * (MAX_MESSAGE_BYTES["cpu"] + 1))


def case_line(**fields) -> bytes:
    body = {"type": "case", "index": 0, "time_s": 0.0, "observation": None, "error": None,
            "fresh_child": False, **fields}
    return json.dumps(body).encode()


@pytest.mark.parametrize("line", [
    case_line(time_s=float("nan")), case_line(time_s=float("inf")), case_line(time_s=-1.0),
    case_line(index=-1), case_line(index=10**9), case_line(verdict="passed"),
    case_line(fresh_child=1), case_line(fresh_child="yes"), case_line(fresh_child=None),
    b'{"type": "case", "index": 0, "time_s": 0.0, "error": null}',             # a field missing
    b'{"type": "ready", "cases": NaN}', b'{"type": "refused", "action": 3}',
    b'{"type": "done", "figures": {"gbs": Infinity}}', b'{"type": "done", "figures": [1]}',
])
def test_a_message_with_a_number_the_parent_uses_out_of_range_or_a_field_too_many_is_refused(line):
    with pytest.raises(ProtocolError):
        decode(line)


def test_a_nan_in_an_observation_is_data_and_text_a_child_sends_is_clipped():
    got = decode(case_line(observation={"ret": [float("nan")]}, error={"message": "m" * 10**6,
                                                                         "details": ["d" * 10**6] * 1000}))
    assert math.isnan(got.observation["ret"][0])
    assert len(got.error.message) < 600 and len(got.error.details) == 20
    assert all(len(line) < 600 for line in got.error.details)
    assert len(decode(encode(Refused("x" * 10**6))).action) < 600


def test_a_stream_of_lines_each_under_the_cap_but_one_over_it_is_refused_before_parsing():
    reader, limit = LineReader(), MAX_MESSAGE_BYTES["cpu"]
    with pytest.raises(ProtocolError):
        reader.feed(b"[" * (limit + 1) + b"\n" + encode(Ready(3)))


def test_a_case_that_asks_for_a_fresh_child_says_so_in_a_field_of_its_own():
    asked = decode(encode(CaseDone(4, 0.25, {"wild_writes": []}, None, True)))
    assert asked.fresh_child is True and asked.observation == {"wild_writes": []}
    assert decode(encode(CaseDone(4, 0.25, {"wild_writes": ["out[-1]"]}))).fresh_child is False


CASE_DTYPES = [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32,
               torch.float64, torch.int32, torch.int64, torch.bool, torch.uint8]     # docs/conventions.md's


@pytest.mark.parametrize("dtype", CASE_DTYPES, ids=str)
def test_cases_of_every_dtype_reach_the_child_bit_for_bit_with_their_shape_and_strides(dtype):
    from pagedkv_lib.judge.cases import Case

    g = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 256, (4, 6, 2), generator=g, dtype=torch.uint8)     # NaN encodings included
    whole = bits.view(dtype) if dtype.itemsize == 1 else torch.randn(4, 6, 2, generator=g).to(dtype)
    strided = whole[:, 1::2].transpose(0, 1)                                     # a view: strides kept
    cases = [Case("fp", {"cache": whole, "view": strided, "pair": (whole[0], 3), "empty": whole[:0]}, ["x"])]
    pipe = io.BytesIO()
    send_cases(cases, pipe)
    pipe.seek(0)
    (got,) = receive_cases(pipe)
    assert got.name == "fp" and got.show == ["x"]
    for name in ("cache", "view", "empty"):
        assert got.args[name].stride() == cases[0].args[name].stride()
        assert same(cases[0].args[name], got.args[name])
    assert same(cases[0].args["pair"], got.args["pair"])
