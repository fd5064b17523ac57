"""The Triton store_kvcache kernel against the PyTorch reference (interpreter on CPU, native on GPU).

Cases are data: (T, H_kv, D, block_size, dtype); H_kv * D is deliberately not a power of two in some.
"""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.store_kvcache import store_kvcache
from pagedkv_lib.kernels import backend, store_kvcache_triton

DEVICE = backend.device()
CASES = [  # (T, H_kv, D, block_size, dtype)
    (1, 1, 16, 1, torch.float32),
    (7, 2, 24, 4, torch.float16),        # row of 48 elements
    (13, 3, 40, 16, torch.bfloat16),     # row of 120 elements
    (9, 8, 128, 256, torch.bfloat16),
    (5, 2, 8, 4, torch.float64),
]


def _caches(num_blocks, block_size, H_kv, D, dtype):
    shape = (num_blocks, block_size, H_kv, D)
    return torch.full(shape, float("nan"), dtype=dtype, device=DEVICE)  # [N, S, H_kv, D]


def _random_slots(T, num_slots, seed, num_skipped=0):
    gen = torch.Generator().manual_seed(seed)
    slots = torch.randperm(num_slots, generator=gen)[:T].to(torch.int32)   # distinct: no write races
    slots[torch.randperm(T, generator=gen)[:num_skipped]] = -1
    return slots.to(DEVICE)                                                 # [T]


def _run_both(key, value, num_blocks, block_size, slots):
    T, H_kv, D = key.shape
    k_ref = _caches(num_blocks, block_size, H_kv, D, key.dtype)
    v_ref = _caches(num_blocks, block_size, H_kv, D, key.dtype)
    k_tri, v_tri = k_ref.clone(), v_ref.clone()
    store_kvcache(key, value, k_ref, v_ref, slots)
    store_kvcache_triton(key, value, k_tri, v_tri, slots)
    return (k_tri, v_tri), (k_ref, v_ref)


@pytest.mark.parametrize("T,H_kv,D,block_size,dtype", CASES)
def test_store_kernel_matches_reference_bit_for_bit(T, H_kv, D, block_size, dtype):
    gen = torch.Generator().manual_seed(T)
    key = torch.randn(T, H_kv, D, generator=gen).to(dtype).to(DEVICE)      # [T, H_kv, D]
    value = torch.randn(T, H_kv, D, generator=gen).to(dtype).to(DEVICE)    # [T, H_kv, D]
    num_blocks = -(-T // block_size) + 2
    slots = _random_slots(T, num_blocks * block_size, seed=T, num_skipped=T // 3)
    got, want = _run_both(key, value, num_blocks, block_size, slots)
    for g, w in zip(got, want):
        assert torch.equal(g.nan_to_num(7.0), w.nan_to_num(7.0))          # NaN rows must stay NaN


def test_store_kernel_skips_slot_minus_one():
    key = torch.ones(4, 2, 16, device=DEVICE)
    k_cache, v_cache = _caches(2, 4, 2, 16, torch.float32), _caches(2, 4, 2, 16, torch.float32)
    slots = torch.tensor([-1, 5, -1, 0], dtype=torch.int32, device=DEVICE)
    store_kvcache_triton(key, 2 * key, k_cache, v_cache, slots)
    written = k_cache.view(8, 2, 16)[:, 0, 0].isnan().logical_not().nonzero().flatten().tolist()
    assert written == [0, 5]
    assert torch.all(v_cache.view(8, 2, 16)[[0, 5]] == 2)


def test_store_kernel_reads_strided_key_value_views_of_fused_qkv():
    T, H, H_kv, D, block_size = 11, 6, 2, 24, 4
    qkv = torch.randn(T, (H + 2 * H_kv) * D, dtype=torch.bfloat16, device=DEVICE)  # [T, (H + 2 H_kv) D]
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)                 # [T, H_kv, D], row stride 240
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)                     # [T, H_kv, D]
    assert key.stride(0) == (H + 2 * H_kv) * D and not key.is_contiguous()
    slots = _random_slots(T, 4 * block_size, seed=3, num_skipped=2)
    got, want = _run_both(key, value, 4, block_size, slots)
    for g, w in zip(got, want):
        assert torch.equal(g.nan_to_num(7.0), w.nan_to_num(7.0))


def test_store_kernel_accepts_int64_slot_mapping_and_empty_batch():
    key = torch.randn(3, 1, 16, device=DEVICE)
    got, want = _run_both(key, key, 2, 4, torch.tensor([6, -1, 1], device=DEVICE))
    assert torch.equal(got[0].nan_to_num(7.0), want[0].nan_to_num(7.0))
    empty = torch.empty(0, 1, 16, device=DEVICE)
    k_cache = _caches(2, 4, 1, 16, torch.float32)
    no_slots = torch.empty(0, dtype=torch.int32, device=DEVICE)
    store_kvcache_triton(empty, empty, k_cache, k_cache.clone(), no_slots)
    assert k_cache.isnan().all()


@pytest.mark.parametrize("case,error,match", [
    ("heads_not_contiguous", ValueError, "heads contiguous"),
    ("value_shape", ValueError, "value"),
    ("dtype_mismatch", TypeError, "k_cache"),
    ("slot_out_of_range", ValueError, "slot_mapping"),
    ("cache_not_contiguous", ValueError, "contiguous"),
])
def test_store_kernel_rejects_bad_inputs(case, error, match):
    key = torch.randn(3, 2, 16, device=DEVICE)
    value = key.clone()
    k_cache, v_cache = _caches(2, 4, 2, 16, torch.float32), _caches(2, 4, 2, 16, torch.float32)
    slots = torch.tensor([0, 1, 2], dtype=torch.int32, device=DEVICE)
    if case == "heads_not_contiguous":
        key = torch.randn(3, 16, 2, device=DEVICE).transpose(1, 2)        # [3, 2, 16], strides (32, 1, 2)
    elif case == "value_shape":
        value = torch.randn(3, 2, 8, device=DEVICE)
    elif case == "dtype_mismatch":
        k_cache = k_cache.half()
    elif case == "slot_out_of_range":
        slots = torch.tensor([0, 8, 2], dtype=torch.int32, device=DEVICE)
    elif case == "cache_not_contiguous":
        k_cache = torch.randn(4, 2, 2, 16, device=DEVICE).transpose(0, 1)
    with pytest.raises(error, match=match):
        store_kvcache_triton(key, value, k_cache, v_cache, slots)


def test_backend_says_where_kernels_run():
    text = backend.describe()
    if torch.cuda.is_available() and not backend.is_interpreted():
        assert "on " in text and backend.device().type == "cuda"
    else:
        assert "interpreter" in text and backend.device().type == "cpu"
    assert backend.triton_available()


def test_missing_triton_gives_install_advice(monkeypatch):
    monkeypatch.setattr(backend, "triton_available", lambda: False)
    with pytest.raises(ImportError, match="pip install triton"):
        backend.require_triton()
    assert "not installed" in backend.describe()
