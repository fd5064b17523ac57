"""The Triton primer's kernels (pagedkv_lib.kernels.triton_primer) against their PyTorch specs, on awkward
sizes (never a multiple of a block), strided views, every float dtype; and the interpreter's GPU dot rule."""
from importlib.metadata import version

import pytest
import torch

from pagedkv_lib.kernels import backend  # first: chooses the interpreter on a CPU, before triton's import

if not backend.triton_available():
    pytest.skip(backend.MISSING_TRITON, allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pagedkv_lib.kernels import triton_primer as tp  # noqa: E402

DEV = backend.device()
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def nan_out(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


def one_step(dtype) -> float:
    """Results rounded from fp32 may differ by one step of the dtype (the interpreter truncates to bf16)."""
    return torch.finfo(dtype).eps


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_rows_matches_the_spec_with_minus_one_and_a_row_stride(dtype):
    g = torch.Generator().manual_seed(0)
    wide = torch.randn(9, 30, generator=g).to(dtype).to(DEV)
    src = wide[:, 4:17]                                               # [9, 13], rows 30 apart
    index = torch.tensor([8, -1, 0, 3, 3, -1, 5], dtype=torch.int32, device=DEV)
    out = nan_out((7, 13), dtype)
    tp.gather_rows_triton(src, index, out)
    assert torch.equal(out, tp.gather_rows_spec(src, index))
    assert torch.equal(out[1], torch.zeros(13, dtype=dtype, device=DEV))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "slice"])
def test_scale_columns_matches_the_spec_for_any_strides(dtype, layout):
    g = torch.Generator().manual_seed(1)
    M, N = 37, 21
    base = torch.randn(N, M, generator=g) if layout == "transposed" else torch.randn(M, N + 6, generator=g)
    base = base.to(dtype).to(DEV)
    x = {"contiguous": base[:, :N].contiguous(), "transposed": base.T, "slice": base[:, 3 : 3 + N]}[layout]
    w = torch.randn(N, generator=g).to(dtype).to(DEV)
    out = nan_out((M, N), dtype)
    tp.scale_columns_triton(x, w, out)
    torch.testing.assert_close(out, tp.scale_columns_spec(x, w), atol=0, rtol=one_step(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_softmax_matches_the_spec_and_never_reads_past_a_length(dtype):
    g = torch.Generator().manual_seed(2)
    lengths = [0, 1, 31, 32, 33, 100, 7]
    x = (torch.randn(len(lengths), 100, generator=g) * 6).to(dtype).to(DEV)
    for r, n in enumerate(lengths):
        x[r, n:] = float("nan")                                       # garbage past each length
    lens = torch.tensor(lengths, dtype=torch.int32, device=DEV)
    out = nan_out(tuple(x.shape), dtype)
    tp.row_softmax_triton(x, lens, out)
    expected = tp.row_softmax_spec(x, lens)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=one_step(dtype))
    assert torch.equal(out[0], torch.zeros_like(out[0]))              # a row of length 0
    assert not expected.isnan().any()


def test_row_softmax_subtracts_the_max_for_very_negative_scores():
    x = -250.0 - torch.arange(40, dtype=torch.float32, device=DEV)[None, :] / 10  # exp(x) underflows
    lens = torch.tensor([37], dtype=torch.int32, device=DEV)
    out = nan_out((1, 40), torch.float32)
    tp.row_softmax_triton(x, lens, out)
    torch.testing.assert_close(out, tp.row_softmax_spec(x, lens), atol=1e-6, rtol=1e-5)
    assert abs(float(out.sum()) - 1.0) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M", [1, 4, 16])
def test_scores_matches_the_spec_with_a_transposed_k(dtype, M):
    g = torch.Generator().manual_seed(M)
    q = torch.randn(M, 24, generator=g).to(dtype).to(DEV)
    k = torch.randn(24, 70, generator=g).to(dtype).to(DEV).T          # [70, 24] strides (1, 70)
    out = nan_out((M, 70), torch.float32)
    tp.scores_triton(q, k, out)
    torch.testing.assert_close(out, tp.scores_spec(q, k), atol=1e-4, rtol=1e-4)


def test_the_launchers_say_what_they_expected():
    x = torch.zeros(4, 5, device=DEV)
    with pytest.raises(ValueError, match="out: expected a contiguous float32 tensor of shape"):
        tp.scale_columns_triton(x, torch.zeros(5, device=DEV), torch.zeros(5, 4, device=DEV))
    with pytest.raises(TypeError, match="index: expected dtype in"):
        tp.gather_rows_triton(x, torch.zeros(2, dtype=torch.int64, device=DEV), torch.zeros(2, 5, device=DEV))


@pytest.mark.skipif(not backend.is_interpreted(), reason="the rule is the interpreter's")
@triton.jit
def _small_dot(a_ptr, out_ptr, ROWS: tl.constexpr):
    r = tl.arange(0, ROWS)
    c = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + c[None, :])                 # [ROWS, 16]
    tl.store(out_ptr + r[:, None] * ROWS + r[None, :], tl.dot(a, tl.trans(a)))


def test_gpu_dot_rule_refuses_a_dot_under_16_rows_and_restores_the_interpreter():
    """Up to triton 3.2 the interpreter refuses such a dot by itself (the rule is a no-op there); from 3.3 it
    accepts it, and only the rule refuses it."""
    if not backend.is_interpreted():
        pytest.skip("about Triton's CPU interpreter")
    a, out = torch.ones(4, 16), torch.zeros(4, 4)
    with tp.gpu_dot_rule(), pytest.raises(Exception, match="16"):
        _small_dot[(1,)](a, out, ROWS=4)
    if tuple(int(p) for p in version("triton").split(".")[:2]) < (3, 3):
        with pytest.raises(Exception, match="16"):
            _small_dot[(1,)](a, out, ROWS=4)
        return
    _small_dot[(1,)](a, out, ROWS=4)                                  # the rule is gone again
    assert torch.equal(out, torch.full((4, 4), 16.0))


def test_gpu_dot_rule_counts_the_dots_the_interpreter_runs():
    """What exercise 135's scores check reads: one count per tl.dot per program, None where the interpreter
    has no hook for the rule (then nothing is counted)."""
    if not backend.is_interpreted():
        pytest.skip("about Triton's CPU interpreter")
    a, out = torch.ones(16, 16), torch.zeros(16, 16)
    with tp.gpu_dot_rule() as dots:
        if dots is None:
            pytest.skip("this Triton's interpreter has no min_dot_size hook")
        _small_dot[(3,)](a, out, ROWS=16)                             # three programs, one dot each
    assert dots == [3]
