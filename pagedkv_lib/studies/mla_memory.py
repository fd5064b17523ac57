"""MLA's latent cache in bytes and FLOPs: what DeepSeek-V3 stores per token against a GQA model of similar
size, how many sequences a pool holds, and what a decode step costs in the multi-head and the absorbed form.

Exports: `MLAShape`, `DEEPSEEK_V3`, `LLAMA_405B`, `fp8_record_bytes`, `bytes_per_token_rows`,
`capacity_rows`, `capacity_table`, `decode_cost_rows`, `cost_table`, `CostRow`.

Per token and layer MLA stores C + R numbers (the latent and the shared RoPE key) where GQA stores
2 x H_kv x D and the multi-head form it replaces would store H x (Dn + R) keys and H x Dv values. FlashMLA's
FP8 record (deepseek-ai/FlashMLA@9241ae3 README.md, "FP8 KV Cache") is 656 bytes: the C = 512 latents in
e4m3 (1 byte each), one float32 scale per 128 of them (16 bytes), the R = 64 RoPE numbers kept in bf16
(128 bytes). Sources of the shapes: DeepSeek-V3, deepseek-ai/DeepSeek-V3@9b4e978
inference/configs/config_671B.json (61 layers, 128 heads, kv_lora_rank 512, qk_rope_head_dim 64,
qk_nope_head_dim 128, v_head_dim 128); Llama 3.1 405B, meta-llama/llama-models@084b88e models/sku_list.py
(126 layers, 8 KV heads, dim 16384 over 128 heads: head_dim 128).
Caveat: a latent cache cannot be split by heads, so under tensor parallelism every rank holds all of it,
where GQA's 8 KV heads split over 8 GPUs; DeepSeek decodes without tensor parallelism
(deepseek-ai/FlashMLA:docs/20250422-new-kernel-deep-dive.md).
"""
from __future__ import annotations

from dataclasses import dataclass

from pagedkv_lib.core.validation import check_positive_int

from .memory import ModelShape, paged_concurrency

FP8_SCALE_GROUP = 128     # latents per float32 scale in FlashMLA's FP8 record
FLASHMLA_BLOCK_SIZE = 64  # FlashMLA's page size (csrc/api/dense_decode.h checks page_block_size == 64)


@dataclass(frozen=True)
class MLAShape:
    """The attention shape of an MLA model, in its config's names."""

    name: str
    num_layers: int      # n_layers
    num_heads: int       # n_heads (H)
    kv_lora_rank: int    # C
    rope_dim: int        # qk_rope_head_dim (R)
    nope_dim: int        # qk_nope_head_dim (Dn)
    v_dim: int           # v_head_dim (Dv)

    def latent_bytes_per_layer(self, dtype_bytes: int) -> int:
        """One token's row of the latent cache in one layer: (C + R) x dtype_bytes."""
        check_positive_int("dtype_bytes", dtype_bytes)
        return (self.kv_lora_rank + self.rope_dim) * dtype_bytes

    def multihead_bytes_per_layer(self, dtype_bytes: int) -> int:
        """What caching the multi-head form's keys and values would take: H x (Dn + R + Dv) x dtype_bytes."""
        check_positive_int("dtype_bytes", dtype_bytes)
        return self.num_heads * (self.nope_dim + self.rope_dim + self.v_dim) * dtype_bytes


DEEPSEEK_V3 = MLAShape("DeepSeek-V3", num_layers=61, num_heads=128, kv_lora_rank=512, rope_dim=64,
                       nope_dim=128, v_dim=128)
LLAMA_405B = ModelShape("Llama-3.1-405B", num_layers=126, num_kv_heads=8, head_dim=128, dtype_bytes=2)


def fp8_record_bytes(kv_lora_rank: int, rope_dim: int, group: int = FP8_SCALE_GROUP) -> int:
    """FlashMLA's FP8 record of one token and layer: C e4m3 latents, C / group float32 scales, R bf16."""
    if kv_lora_rank % group:
        raise ValueError(f"kv_lora_rank: expected a multiple of the scale group {group}, got {kv_lora_rank}")
    return kv_lora_rank * 1 + kv_lora_rank // group * 4 + rope_dim * 2


@dataclass(frozen=True)
class CacheForm:
    model: str
    form: str
    bytes_per_layer: int     # one token in one layer
    num_layers: int

    @property
    def bytes_per_token(self) -> int:
        return self.bytes_per_layer * self.num_layers


def bytes_per_token_rows(mla: MLAShape = DEEPSEEK_V3, gqa: ModelShape = LLAMA_405B) -> list[CacheForm]:
    """The cache forms compared in notebook 18: GQA in bf16 and fp8, MLA's multi-head equivalent, MLA's
    latents in bf16 and in FlashMLA's FP8 record."""
    return [
        CacheForm(gqa.name, "GQA K and V, bf16", gqa.bytes_per_token // gqa.num_layers, gqa.num_layers),
        CacheForm(gqa.name, "GQA K and V, fp8", gqa.with_kv_dtype("fp8").bytes_per_token // gqa.num_layers,
                  gqa.num_layers),
        CacheForm(mla.name, "multi-head K and V, bf16", mla.multihead_bytes_per_layer(2), mla.num_layers),
        CacheForm(mla.name, "latent c + RoPE key, bf16", mla.latent_bytes_per_layer(2), mla.num_layers),
        CacheForm(mla.name, "FlashMLA FP8 record", fp8_record_bytes(mla.kv_lora_rank, mla.rope_dim),
                  mla.num_layers),
    ]


def capacity_rows(pool_bytes: int, context_len: int, block_size: int = FLASHMLA_BLOCK_SIZE,
                  forms: list[CacheForm] | None = None) -> list[tuple[CacheForm, int]]:
    """(form, sequences of context_len tokens that fit in pool_bytes, paged in blocks of block_size)."""
    forms = bytes_per_token_rows() if forms is None else forms
    return [(f, paged_concurrency(pool_bytes, context_len, block_size, f.bytes_per_token)) for f in forms]


@dataclass(frozen=True)
class CostRow:
    form: str
    attention_flops: int    # q . k and p . v over the context: one decode step, one sequence, one layer
    projection_flops: int   # the up-projections of that step (w_uk, w_uv)
    cache_bytes: int        # cache rows read

    @property
    def flops_per_cache_byte(self) -> float:
        """Every FLOP of the step over the cache bytes it reads: above a GPU's peak FLOP/s over its bytes/s a
        step is compute-bound."""
        return (self.attention_flops + self.projection_flops) / self.cache_bytes


def decode_cost_rows(shape: MLAShape, context_len: int, dtype_bytes: int = 2) -> list[CostRow]:
    """FLOPs and bytes of one decode step (one query over n = context_len cached tokens, one layer), a
    multiply-add counted as 2 FLOPs. The weights w_uk, w_uv (H x (Dn + Dv) x C numbers) are read by both
    latent forms alike and shared by the batch, so they are left out of the bytes.
    - multi-head cache: every head's keys and values cached; attention with head dims Dn + R and Dv;
    - latent, un-absorbed: every cached latent up-projected to H keys and values at every step;
    - latent, absorbed: q through w_uk and the output through w_uv once; attention over rows of C + R
      numbers with values of C, every head reading the same rows."""
    check_positive_int("context_len", context_len)
    n, H, C, R = context_len, shape.num_heads, shape.kv_lora_rank, shape.rope_dim
    Dn, Dv = shape.nope_dim, shape.v_dim
    latent = n * shape.latent_bytes_per_layer(dtype_bytes)
    multihead_attention = 2 * n * H * (Dn + R) + 2 * n * H * Dv
    return [
        CostRow("multi-head cache", multihead_attention, 0, n * shape.multihead_bytes_per_layer(dtype_bytes)),
        CostRow("latent, un-absorbed", multihead_attention, 2 * n * C * H * (Dn + Dv), latent),
        CostRow("latent, absorbed", 2 * n * H * (C + R) + 2 * n * H * C, 2 * H * C * (Dn + Dv), latent),
    ]


def capacity_table(pool_bytes: int, context_len: int, block_size: int = FLASHMLA_BLOCK_SIZE) -> str:
    """Bytes per token (one layer, every layer) and sequences of context_len that fit in pool_bytes."""
    rows = capacity_rows(pool_bytes, context_len, block_size)
    lines = [f"{'model':15s} {'cache':27s} {'B/token/layer':>13s} {'B/token':>10s} {'sequences':>9s}"]
    for form, fits in rows:
        lines.append(f"{form.model:15s} {form.form:27s} {form.bytes_per_layer:13,d} "
                     f"{form.bytes_per_token:10,d} {fits:9,d}")
    return "\n".join(lines)


def cost_table(shape: MLAShape, context_lens=(1024, 32768), dtype_bytes: int = 2) -> str:
    """Per context length and form: attention and projection GFLOPs, cache MB read, FLOPs per cache byte."""
    lines = [f"{'context':>7s} {'form':20s} {'attention GFLOP':>15s} {'projection GFLOP':>16s} "
             f"{'cache MB':>9s} {'FLOP/byte':>9s}"]
    for n in context_lens:
        for row in decode_cost_rows(shape, n, dtype_bytes):
            lines.append(f"{n:7,d} {row.form:20s} {row.attention_flops / 1e9:15.3f} "
                         f"{row.projection_flops / 1e9:16.3f} {row.cache_bytes / 1e6:9.2f} "
                         f"{row.flops_per_cache_byte:9.1f}")
    return "\n".join(lines)
