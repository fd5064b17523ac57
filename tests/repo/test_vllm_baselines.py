"""vllm_baselines.py, the benchmarks' vLLM row, on a CPU: without vLLM it gives the one-line reason the rows
print; with a stand-in for vLLM's triton_unified_attention.py (the same imports, the real signature of
`unified_attention`, recording what it is given) it loads through its vllm stand-ins, and the decode and
prefill adapters hand over the arguments vLLM's kernel reads: cu_seqlens_q, seqused_k, the max lengths,
the scale, causal, the caches and a block table whose first columns are the course's."""
from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

FAKE = '''
import torch

from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.triton_utils import tl, triton

logger = init_logger(__name__)
float8_info = torch.finfo(current_platform.fp8_dtype())
CALLS = []


def unified_attention(
    q,
    k,
    v,
    out,
    cu_seqlens_q,
    max_seqlen_q,
    seqused_k,
    max_seqlen_k,
    softmax_scale,
    causal,
    window_size,
    block_table,
    softcap,
    q_descale,
    k_descale,
    v_descale,
    alibi_slopes=None,
    output_scale=None,
    qq_bias=None,
    sinks=None,
    prefix_lens=None,
):
    CALLS.append(dict(locals(), head_size_padded=triton.next_power_of_2(q.shape[2]), fp8_max=float8_info.max,
                      tl_float32=tl.float32))
    out.fill_(7.0)
'''


@pytest.fixture
def modules(monkeypatch):
    """(vllm_baselines, attention_workloads) imported afresh, with no installed vLLM taken into account."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("vllm_baselines", "attention_workloads", "gpu_harness"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    vb = importlib.import_module("vllm_baselines")
    aw = importlib.import_module("attention_workloads")
    monkeypatch.setattr(vb, "_from_package", lambda: None)
    return vb, aw


def test_without_vllm_the_row_says_not_installed(modules, tmp_path, monkeypatch):
    vb, aw = modules
    where = tmp_path / "nowhere" / "triton_unified_attention.py"
    monkeypatch.setenv("VLLM_TRITON_SRC", str(where))
    assert vb.missing() == f"not installed: no vLLM and no {where}"
    assert vb.source() == {"kind": "missing", "reason": vb.missing()}
    assert vb.describe().endswith(f"not installed: no vLLM and no {where}")
    with pytest.raises(vb.VLLMMissing, match="not installed"):
        vb.decode_calls([aw.decode_set([3, 5], 4, seed=0)], 4)
    monkeypatch.delenv("VLLM_TRITON_SRC")
    assert vb.src_path() == BENCHMARKS.parent / ".vllm" / "triton_unified_attention.py"


@pytest.fixture
def fake(modules, tmp_path, monkeypatch):
    """The stand-in file loaded through vllm_baselines: (vllm_baselines, attention_workloads, its module)."""
    vb, aw = modules
    path = tmp_path / "triton_unified_attention.py"
    path.write_text(FAKE)
    monkeypatch.setenv("VLLM_TRITON_SRC", str(path))
    before = {name: sys.modules.get(name) for name in vb.SHIMMED}
    module, src = vb.load()
    assert {name: sys.modules.get(name) for name in vb.SHIMMED} == before   # stand-ins gone again
    assert src == dict(kind="file", path=str(path), sha256=hashlib.sha256(FAKE.encode()).hexdigest(),
                       bytes=len(FAKE.encode()))
    assert vb.missing() == "" and src["sha256"][:12] in vb.describe()
    return vb, aw, module


def _common(got, s, S, scale):
    k, v = s["k_cache"], s["v_cache"]
    B, M = s["block_tables"].shape
    assert got["k"] is k and got["v"] is v and got["v"].shape[1] == S              # block size: v.shape[1]
    assert got["softmax_scale"] == scale and got["causal"] is True
    assert got["window_size"] == (-1, -1) and got["softcap"] == 0 and got["q_descale"] is None
    assert got["alibi_slopes"] is None and got["sinks"] is None and got["prefix_lens"] is None
    for name in ("k_descale", "v_descale"):                                      # what vLLM passes: ones
        assert got[name].shape == (B, k.shape[2]) and bool((got[name] == 1).all())
    table = got["block_table"]
    assert table.dtype == torch.int32 and table.shape[0] == B and table.shape[1] * S >= 64
    assert torch.equal(table[:, :M], s["block_tables"].clamp(min=0))
    assert bool((table[:, M:] == 0).all())
    assert got["fp8_max"] == torch.finfo(torch.float8_e4m3fn).max                # current_platform's fp8
    assert got["head_size_padded"] == 128


def test_decode_adapter_hands_vllm_one_query_per_sequence(fake):
    vb, aw, module = fake
    lens, S = [3, 9, 5], 4
    s = aw.decode_set(lens, S, seed=0)
    calls = vb.decode_calls([s], S, 0.125)
    assert module.CALLS == []                                                     # nothing ran yet
    out = calls[0]()
    (got,) = module.CALLS
    assert got["q"] is s["q"] and out is got["out"] and out.shape == s["q"].shape == (3, aw.H, aw.D)
    assert out.dtype == s["q"].dtype and bool((out == 7).all())
    assert torch.equal(got["cu_seqlens_q"], torch.arange(4, dtype=torch.int32))
    assert got["cu_seqlens_q"].dtype == torch.int32
    assert got["max_seqlen_q"] == 1 and type(got["max_seqlen_q"]) is int
    assert got["seqused_k"].dtype == torch.int32 and got["seqused_k"].tolist() == lens
    assert got["max_seqlen_k"] == 9 and type(got["max_seqlen_k"]) is int
    _common(got, s, S, 0.125)
    assert calls[0]() is out                                                      # one buffer per set
    vb.decode_calls([s], S)[0]()
    assert module.CALLS[-1]["softmax_scale"] == aw.D**-0.5                        # the default scale


def test_prefill_adapter_hands_vllm_the_courses_varlen_batch(fake):
    vb, aw, module = fake
    seq_lens, q_lens, S = [8, 13], [8, 5], 4                                      # cold, then chunked
    s = aw.prefill_set(seq_lens, q_lens, S, seed=0)
    out = vb.prefill_calls([s], 0.25)[0]()
    (got,) = module.CALLS
    assert got["q"] is s["q"] and out is got["out"] and out.shape == (13, aw.H, aw.D)
    assert got["cu_seqlens_q"].tolist() == [0, 8, 13] and got["cu_seqlens_q"].dtype == torch.int32
    assert got["max_seqlen_q"] == 8 and type(got["max_seqlen_q"]) is int
    assert got["seqused_k"].tolist() == seq_lens and got["seqused_k"].dtype == torch.int32
    assert got["max_seqlen_k"] == 13 and type(got["max_seqlen_k"]) is int
    _common(got, s, S, 0.25)


LAUNCH = '''
from vllm.triton_utils import tl, triton

LAUNCHED = []


class Kernel:
    """A stand-in @triton.jit kernel: `fn` with the kernel's parameters, kernel[grid](**kwargs) records."""

    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return lambda **kwargs: LAUNCHED.append((grid, kwargs))


def _2d(output_ptr, USE_MM_PREFIX, mm_prefix_ranges):   # the kernel's names
    pass


kernel_unified_attention_2d = Kernel(_2d)


def unified_attention(out, prefix_lens=None):                # the launch's names, as in the stored file
    kernel_unified_attention_2d[(3, 2)](output_ptr=out, USE_PREFIX_LM=prefix_lens is not None,
                                        prefix_lens_ptr=prefix_lens)
'''


@pytest.mark.parametrize("kernel_names", ["new", "old"])
def test_the_2d_launch_names_are_matched_only_where_they_differ(modules, tmp_path, monkeypatch, kernel_names):
    """The file as stored launches kernel_unified_attention_2d with USE_PREFIX_LM / prefix_lens_ptr while the
    kernel names them USE_MM_PREFIX / mm_prefix_ranges: the loader renames them at the launch (an unused None
    range as 0, what the kernel's int64 parameter takes on a GPU), and says so; a file whose kernel has the
    launch's names is left alone."""
    vb, _ = modules
    text = LAUNCH if kernel_names == "new" else LAUNCH.replace(
        "USE_MM_PREFIX, mm_prefix_ranges", "USE_PREFIX_LM, prefix_lens_ptr")
    path = tmp_path / "triton_unified_attention.py"
    path.write_text(text)
    monkeypatch.setenv("VLLM_TRITON_SRC", str(path))
    module, src = vb.load()
    module.unified_attention("out")
    ((grid, kwargs),) = module.LAUNCHED
    assert grid == (3, 2) and kwargs["output_ptr"] == "out"
    if kernel_names == "new":
        assert kwargs == dict(output_ptr="out", USE_MM_PREFIX=False, mm_prefix_ranges=0)   # int64: not None
        assert src["renamed_2d_launch_names"] == vb.RENAMED_2D and "names matched" in vb.describe()
    else:
        assert kwargs == dict(output_ptr="out", USE_PREFIX_LM=False, prefix_lens_ptr=None)
        assert "renamed_2d_launch_names" not in src and "names matched" not in vb.describe()
