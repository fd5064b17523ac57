"""store_kvcache writes each token's K/V at its slot, skips -1, and rejects bad arguments clearly."""
import pytest
import torch

from pagedkv_lib import allocate_kv_cache, gather_kv, layer_caches, store_kvcache


def loop_store(key, value, k_cache, v_cache, slots):
    """Per-token reference: one row at a time through (block, offset)."""
    bs = k_cache.shape[1]
    for t, s in enumerate(slots):
        if s != -1:
            k_cache[s // bs, s % bs] = key[t]
            v_cache[s // bs, s % bs] = value[t]


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_store_matches_per_token_loop_and_skips_padding(block_size, dtype):
    g = torch.Generator().manual_seed(block_size)
    N, H_kv, D, T = 20, 2, 8, 13
    k_cache = torch.randn(N, block_size, H_kv, D, generator=g).to(dtype)
    v_cache = torch.randn(N, block_size, H_kv, D, generator=g).to(dtype)
    key = torch.randn(T, H_kv, D, generator=g).to(dtype)
    value = torch.randn(T, H_kv, D, generator=g).to(dtype)
    slots = torch.randperm(N * block_size, generator=g)[:T].to(torch.int32)
    slots[::3] = -1
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    loop_store(key, value, k_ref, v_ref, slots.tolist())
    store_kvcache(key, value, k_cache, v_cache, slots)
    assert torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def test_store_into_a_layer_view_of_the_model_cache_then_gather():
    kv = allocate_kv_cache(3, 4, 4, 2, 8, fill=0.0)
    k_cache, v_cache = layer_caches(kv, 1)
    key, value = torch.randn(6, 2, 8), torch.randn(6, 2, 8)
    store_kvcache(key, value, k_cache, v_cache, torch.tensor([28 % 16, 13, 14, 15, 8, 9], dtype=torch.int32))
    assert torch.equal(gather_kv(k_cache, [3, 2], 6)[4:], key[4:])
    assert kv[:, 0].abs().sum() == 0 and kv[:, 2].abs().sum() == 0   # other layers untouched


def _args(T=4, N=3, S=4, H_kv=2, D=8):
    return (torch.randn(T, H_kv, D), torch.randn(T, H_kv, D), torch.zeros(N, S, H_kv, D),
            torch.zeros(N, S, H_kv, D), torch.arange(T, dtype=torch.int32))


@pytest.mark.parametrize("change, error, match", [
    (lambda a: a.__setitem__(0, a[0][:, :1]), ValueError, r"expected shape \(4, 1, 8\)"),
    (lambda a: a.__setitem__(4, a[4].float()), TypeError, "slot_mapping: expected dtype"),
    (lambda a: a.__setitem__(4, a[4][:3]), ValueError, r"slot_mapping: expected shape \(4,\)"),
    (lambda a: a.__setitem__(4, torch.tensor([0, 1, 2, 12], dtype=torch.int32)), ValueError, r"\[-1, 12\)"),
    (lambda a: a.__setitem__(4, torch.tensor([0, 1, -2, 3], dtype=torch.int32)), ValueError, "min -2"),
    (lambda a: a.__setitem__(2, a[2].half()), TypeError, "k_cache: expected dtype"),
    (lambda a: a.__setitem__(2, a[2].transpose(0, 1)), ValueError, "k_cache"),
    (lambda a: a.__setitem__(1, a[1].tolist()), TypeError, "value: expected a torch.Tensor"),
])
def test_bad_arguments_say_what_was_expected(change, error, match):
    args = list(_args())
    change(args)
    with pytest.raises(error, match=match):
        store_kvcache(*args)
