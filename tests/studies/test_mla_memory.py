"""pagedkv_lib.studies.mla_memory: DeepSeek-V3's bytes per token, FlashMLA's FP8 record, what fits, and the
two decode forms' costs, each against arithmetic written out here."""
import pytest

from pagedkv_lib.studies.memory import GiB
from pagedkv_lib.studies.mla_memory import (
    DEEPSEEK_V3,
    LLAMA_405B,
    MLAShape,
    bytes_per_token_rows,
    capacity_rows,
    decode_cost_rows,
    fp8_record_bytes,
)


def test_flashmla_fp8_record_is_656_bytes_512_latents_4_scales_64_bf16():
    assert fp8_record_bytes(512, 64) == 512 + 4 * 4 + 64 * 2 == 656
    with pytest.raises(ValueError, match="multiple of the scale group"):
        fp8_record_bytes(500, 64)


def test_bytes_per_token_of_deepseek_v3_and_llama_405b():
    rows = {r.form: r for r in bytes_per_token_rows()}
    assert rows["latent c + RoPE key, bf16"].bytes_per_token == 61 * 576 * 2 == 70_272
    assert rows["FlashMLA FP8 record"].bytes_per_token == 61 * 656 == 40_016
    assert rows["multi-head K and V, bf16"].bytes_per_token == 61 * 128 * (128 + 64 + 128) * 2
    assert rows["GQA K and V, bf16"].bytes_per_token == LLAMA_405B.bytes_per_token == 2 * 126 * 8 * 128 * 2
    assert rows["GQA K and V, fp8"].bytes_per_token == 126 * 8 * 128 * 2


def test_capacity_is_the_pool_over_whole_blocks_of_each_form():
    pool, n = 64 * GiB, 32_768
    for form, fits in capacity_rows(pool, n, block_size=64):
        blocks = -(-n // 64)
        assert fits == pool // (blocks * 64 * form.bytes_per_token)
        assert (fits + 1) * blocks * 64 * form.bytes_per_token > pool
    by_form = {f.form: fits for f, fits in capacity_rows(pool, n)}
    assert by_form["latent c + RoPE key, bf16"] > 7 * by_form["GQA K and V, bf16"]


def test_absorbed_decode_reads_latents_once_for_every_head_and_projects_once_per_step():
    small = MLAShape("small", 1, num_heads=4, kv_lora_rank=8, rope_dim=2, nope_dim=3, v_dim=5)
    rows = {r.form: r for r in decode_cost_rows(small, context_len=10, dtype_bytes=1)}
    assert rows["latent, absorbed"].cache_bytes == rows["latent, un-absorbed"].cache_bytes == 10 * (8 + 2)
    assert rows["multi-head cache"].cache_bytes == 10 * 4 * (3 + 2 + 5)
    assert rows["latent, absorbed"].attention_flops == 2 * 10 * 4 * (8 + 2) + 2 * 10 * 4 * 8
    assert rows["latent, absorbed"].projection_flops == 2 * 4 * 8 * (3 + 5)        # independent of n
    longer = {r.form: r for r in decode_cost_rows(small, context_len=20, dtype_bytes=1)}
    assert longer["latent, absorbed"].projection_flops == rows["latent, absorbed"].projection_flops
    assert longer["latent, un-absorbed"].projection_flops == 2 * rows["latent, un-absorbed"].projection_flops


def test_deepseek_v3_absorbed_decode_does_about_two_h_flops_per_cache_byte():
    absorbed = {r.form: r for r in decode_cost_rows(DEEPSEEK_V3, 4096)}["latent, absorbed"]
    H, C, R = 128, 512, 64
    Dn, Dv, n = 128, 128, 4096
    per_byte = (2 * n * H * (2 * C + R) + 2 * H * C * (Dn + Dv)) / (n * (C + R) * 2)
    assert absorbed.flops_per_cache_byte == pytest.approx(per_byte)
    assert H * (2 * C + R) / (C + R) < per_byte < 1.05 * H * (2 * C + R) / (C + R)        # 2 H (2C + R) / 2W
