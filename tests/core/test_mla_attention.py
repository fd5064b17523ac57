"""pagedkv_lib.core.mla_attention: the multi-head form against torch SDPA on contiguous up-projected keys and
values (float64), and the absorbed form against the multi-head form, on awkward paged batches."""
import math

import pytest
import torch
import torch.nn.functional as F

from pagedkv_lib.core.mla_attention import (
    absorb_query,
    mla_decode_absorbed,
    mla_decode_multihead,
    mla_latent_attention,
    mla_scale,
    split_query,
)
from pagedkv_lib.core.rotary import apply_rope_interleaved, rope_angles
from pagedkv_lib.core.slot_mapping import slot_mapping_for
from pagedkv_lib.testing.mla_batch import make_mla_batch

CASES = [  # context_lens, block_size, H, C, R, Dn, Dv, num_layers, extra_padding
    ([1, 5, 17], 1, 4, 16, 8, 8, 8, 1, 0),
    ([15, 16, 17, 33], 16, 3, 24, 4, 12, 6, 2, 2),
    ([1, 63, 64, 65, 130], 64, 2, 32, 8, 16, 16, 1, 3),
    ([127, 128, 129], 16, 8, 16, 8, 16, 8, 3, 1),
]


def layer_args(batch, layer):
    return (batch.q[layer], batch.kv_cache[layer], batch.block_tables, batch.context_lens, batch.w_uk[layer],
            batch.w_uv[layer], batch.cos, batch.sin)


def sdpa_multihead(batch, layer) -> torch.Tensor:
    """Keys and values of every head from each sequence's rows read by slot (not through gather_latents),
    then SDPA with the explicit scale 1 / sqrt(Dn + R): [B, H, Dv]."""
    q, kv, w_uk, w_uv = batch.q[layer], batch.kv_cache[layer], batch.w_uk[layer], batch.w_uv[layer]
    C, Dn = w_uk.shape[2], w_uk.shape[1]
    R = kv.shape[2] - C
    flat = kv.reshape(-1, kv.shape[2])                                          # [N * S, W]
    outs = []
    for b, n in enumerate(batch.context_lens.tolist()):
        table = [t for t in batch.block_tables[b].tolist() if t >= 0]
        rows = flat[slot_mapping_for(table, list(range(n)), batch.block_size)]  # [n, W]
        k = torch.cat((torch.einsum("nc,hdc->hnd", rows[:, :C], w_uk),
                       rows[None, :, C:].expand(q.shape[1], n, R)), dim=-1)     # [H, n, Dn + R]
        v = torch.einsum("nc,hdc->hnd", rows[:, :C], w_uv)                      # [H, n, Dv]
        q_pe = apply_rope_interleaved(q[b, :, Dn:], batch.cos[b], batch.sin[b])  # [H, R]
        q_b = torch.cat((q[b, :, :Dn], q_pe), dim=-1)[:, None]                  # [H, 1, Dn + R]
        outs.append(F.scaled_dot_product_attention(q_b, k, v, scale=(Dn + R) ** -0.5)[:, 0])
    return torch.stack(outs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"S{c[1]}-lens{c[0]}")
def test_138_multihead_form_equals_sdpa_on_contiguous_keys_and_values(case):
    lens, S, H, C, R, Dn, Dv, L, pad = case
    batch = make_mla_batch(lens, S, H, C, R, Dn, Dv, num_layers=L, extra_padding=pad, seed=3)
    for layer in range(L):
        got = mla_decode_multihead(*layer_args(batch, layer))
        torch.testing.assert_close(got, sdpa_multihead(batch, layer), atol=1e-12, rtol=1e-12)
        assert not got.isnan().any()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"S{c[1]}-lens{c[0]}")
def test_138_absorbed_form_equals_the_multihead_form_in_float64(case):
    lens, S, H, C, R, Dn, Dv, L, pad = case
    batch = make_mla_batch(lens, S, H, C, R, Dn, Dv, num_layers=L, extra_padding=pad, seed=5)
    for layer in range(L):
        args = layer_args(batch, layer)
        torch.testing.assert_close(mla_decode_absorbed(*args), mla_decode_multihead(*args), atol=1e-12,
                                   rtol=1e-12)


def test_138_absorbed_form_in_float32_is_within_float32_rounding():
    batch = make_mla_batch([40, 9], 16, 4, 64, 16, 16, 8, dtype=torch.float32, seed=2)
    args = layer_args(batch, 0)
    torch.testing.assert_close(mla_decode_absorbed(*args), mla_decode_multihead(*args), atol=2e-5, rtol=2e-5)


def test_the_latent_query_is_w_uk_transposed_times_q_nope_then_the_rotated_rope_part():
    batch = make_mla_batch([4], 4, 2, 8, 4, 6, 6, seed=1)
    q, w_uk = batch.q[0], batch.w_uk[0]
    q_latent = absorb_query(q, w_uk, batch.cos, batch.sin)                       # [1, 2, 12]
    assert q_latent.shape == (1, 2, 12)
    torch.testing.assert_close(q_latent[0, 1, :8], w_uk[1].T @ q[0, 1, :6])
    torch.testing.assert_close(q_latent[..., 8:], apply_rope_interleaved(q[..., 6:], batch.cos[:, None],
                                                                         batch.sin[:, None]))


def test_138_scale_is_of_the_multihead_head_dim_and_the_wrong_one_changes_the_answer():
    assert mla_scale(128, 64) == 192 ** -0.5
    batch = make_mla_batch([30], 16, 4, 32, 8, 8, 8, seed=4)
    q_latent = absorb_query(batch.q[0], batch.w_uk[0], batch.cos, batch.sin)
    right = mla_latent_attention(q_latent, batch.kv_cache[0], batch.block_tables, batch.context_lens, 32,
                                 mla_scale(8, 8))
    latent_dim = mla_latent_attention(q_latent, batch.kv_cache[0], batch.block_tables, batch.context_lens, 32,
                                      (32 + 8) ** -0.5)
    assert not torch.allclose(right, latent_dim, atol=1e-6)


def test_rope_keeps_norms_and_rotates_a_pair_by_position_times_frequency():
    cos, sin = rope_angles(torch.tensor([0, 3]), 4, base=100.0)                # [2, 2] each
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]] * 2, dtype=torch.float64)
    y = apply_rope_interleaved(x, cos, sin)
    torch.testing.assert_close(y[0], x[0])                                      # position 0: unchanged
    angle = 3 * 100.0 ** -0.5                                     # pair 1: position x base^(-2/4)
    expected = [math.cos(3), math.sin(3), -math.sin(angle), math.cos(angle)]    # pair 0 turns by 3 radians
    torch.testing.assert_close(y[1], torch.tensor(expected, dtype=torch.float64))
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    with pytest.raises(ValueError, match="rope_dim"):
        rope_angles(torch.tensor([1]), 3)


def test_rope_and_the_query_split_stay_on_the_query_device():
    """A CUDA query once met CPU angles (issue 40): the angles follow the positions' device, and the rotation
    moves cos and sin to x's. The 'meta' device stands in for a GPU on a CPU machine."""
    cos, sin = rope_angles(torch.arange(3, device="meta"), 4)
    assert cos.device.type == sin.device.type == "meta" and cos.shape == (3, 2)
    cpu_cos, cpu_sin = rope_angles(torch.tensor([1, 2]), 8)                     # [2, 4] each, on the CPU
    q = torch.empty(2, 3, 6 + 8, device="meta", dtype=torch.bfloat16)          # [B, H, Dn + R]
    q_nope, q_pe = split_query(q, torch.empty(3, 6, 16, device="meta"), cpu_cos, cpu_sin)
    assert q_pe.device.type == "meta" and q_pe.dtype == torch.bfloat16 and q_pe.shape == (2, 3, 8)
