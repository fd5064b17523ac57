"""What the GPU benchmarks measure: decode and prefill batches at the course's model shape, their contiguous
copies for SDPA, FP8 versions, their bytes and FLOPs, and the fp32 references.

Model shape: H = 32 query heads, H_kv = 8 KV heads, D = 128 (G = 4), bf16. Shapes: docs/conventions.md
(a decode shape `64x4096` is B x C); L_max = the longest context of a batch.
"""
import random

import torch
from gpu_harness import CUDA

H, H_KV, D = 32, 8, 128
G = H // H_KV
DTYPE = torch.bfloat16
FP8 = torch.float8_e4m3fn
DEVICE = "cuda" if CUDA else "cpu"


def ragged_lens(B: int, lo: int, hi: int, seed: int) -> list[int]:
    """B lengths uniform in [lo, hi], seeded."""
    rng = random.Random(seed)
    return [rng.randint(lo, hi) for _ in range(B)]


DECODE_SHAPES = {            # name: (lengths, block size); ragged lengths are seeded
    "1x4096": ([4096], 16),
    "8x4096": ([4096] * 8, 16),
    "64x4096": ([4096] * 64, 16),
    "32x16384": ([16384] * 32, 16),
    "256x1024": ([1024] * 256, 16),
    "ragged64": (ragged_lens(64, 1, 8192, seed=64), 16),
    "ragged8": (ragged_lens(8, 100, 4096, seed=8), 16),
}
PREFILL_SHAPES = {           # name: (seq_lens, q_lens, block size)
    "cold8x2048": ([2048] * 8, [2048] * 8, 16),
    "cold1x8192": ([8192], [8192], 16),
    "cold32x512": ([512] * 32, [512] * 32, 16),
    "chunked16x(2048+512)": ([2560] * 16, [512] * 16, 16),
}
if not CUDA:                 # CPU smoke run (interpreter): same names, tiny sizes, to prove the scripts run
    DECODE_SHAPES = {name: ([max(1, n // 256) for n in lens[:3]], 4)
                     for name, (lens, S) in DECODE_SHAPES.items()}
    PREFILL_SHAPES = {name: ([n // 128 for n in s[:2]], [n // 128 for n in q[:2]], 4)
                      for name, (s, q, S) in PREFILL_SHAPES.items()}


def decode_bytes(lens: list[int], cache_bytes: int = 2) -> int:
    """K and V of the ACTUAL tokens read, q read, out written (bf16 q / out)."""
    return 2 * sum(lens) * H_KV * D * cache_bytes + 2 * len(lens) * H * D * 2


def prefill_bytes(seq_lens, q_lens, cache_bytes: int = 2) -> int:
    """K and V of every context read once, q read, out written (bf16 q / out): the least a kernel moves."""
    return 2 * sum(seq_lens) * H_KV * D * cache_bytes + 2 * sum(q_lens) * H * D * 2


def prefill_flops(seq_lens, q_lens) -> int:
    pairs = sum(q * (n - q) + q * (q + 1) // 2 for n, q in zip(seq_lens, q_lens))
    return 4 * D * H * pairs


def paged_cache(k: torch.Tensor, v: torch.Tensor, lens: list[int], S: int, gen) -> tuple:
    """Scatter padded contiguous k, v [B, L_max, H_kv, D] into caches [N, S, H_kv, D] whose blocks are a
    random permutation (unused slots NaN); -> (k_cache, v_cache, block_tables [B, M] int32,
    slots [B, L_max])."""
    B, L_max = k.shape[:2]
    need = [-(-n // S) for n in lens]
    N, M = sum(need), -(-L_max // S)
    perm = torch.randperm(N, device=k.device, generator=gen).to(torch.int32)
    tables = torch.full((B, M), -1, dtype=torch.int32, device=k.device)            # [B, M]
    at = 0
    for b, n in enumerate(need):
        tables[b, :n] = perm[at : at + n]
        at += n
    pos = torch.arange(L_max, device=k.device)                                      # [L_max]
    valid = pos[None, :] < torch.tensor(lens, device=k.device)[:, None]             # [B, L_max]
    blocks = tables.long().gather(1, (pos // S)[None, :].expand(B, -1))             # [B, L_max]
    slots = blocks.clamp(min=0) * S + pos % S                                       # [B, L_max]
    caches = []
    for x in (k, v):
        cache = torch.full((N, S, H_KV, D), float("nan"), dtype=x.dtype, device=x.device)  # [N, S, H_kv, D]
        cache.view(N * S, H_KV, D)[slots[valid]] = x[valid]
        caches.append(cache)
    return caches[0], caches[1], tables, slots


def quantize_fp8(cache: torch.Tensor, amax: float) -> tuple:
    """Per-tensor e4m3: (cache / scale) in fp8 and the scale as a 1-element fp32 tensor (what vLLM passes)."""
    scale = max(amax, 1e-6) / 448.0
    q = (cache.float() / scale).to(FP8)                                            # [N, S, H_kv, D] fp8
    return q, torch.tensor([scale], dtype=torch.float32, device=cache.device)


def decode_set(lens: list[int], S: int, seed: int, *, fp8: bool = False, contiguous: bool = False) -> dict:
    """q [B, H, D], paged bf16 caches (+ fp8 copies and scales), lens, tables; contiguous [B, H_kv, L_max, D]
    K/V and a key mask [B, 1, 1, L_max] for SDPA when `contiguous`."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    B, L_max = len(lens), max(lens)
    q = torch.randn(B, H, D, device=DEVICE, generator=gen).to(DTYPE)               # [B, H, D]
    k = torch.randn(B, L_max, H_KV, D, device=DEVICE, generator=gen).to(DTYPE)     # [B, L_max, H_kv, D]
    v = torch.randn(B, L_max, H_KV, D, device=DEVICE, generator=gen).to(DTYPE)
    k_cache, v_cache, tables, slots = paged_cache(k, v, lens, S, gen)
    s = dict(q=q, k_cache=k_cache, v_cache=v_cache, block_tables=tables, slots=slots,
             context_lens=torch.tensor(lens, dtype=torch.int32, device=DEVICE), lens=lens)
    if fp8:
        s["k_fp8"], s["k_scale"] = quantize_fp8(k_cache, k.abs().amax().item())
        s["v_fp8"], s["v_scale"] = quantize_fp8(v_cache, v.abs().amax().item())
    if contiguous:
        s["k"] = k.transpose(1, 2).contiguous()                                     # [B, H_kv, L_max, D]
        s["v"] = v.transpose(1, 2).contiguous()
        pos = torch.arange(L_max, device=DEVICE)
        s["key_mask"] = (pos[None, :] < s["context_lens"][:, None])[:, None, None, :]  # [B, 1, 1, L_max]
        s["ragged"] = min(lens) != L_max
    return s


def gathered(s: dict, cache: torch.Tensor, scale=None) -> torch.Tensor:
    """The cache's tokens in contiguous order, fp32, dequantized, 0 past each context: [B, H_kv, L_max, D]."""
    B, L_max = s["slots"].shape
    raw = cache.view(torch.uint8) if cache.element_size() == 1 else cache         # fp8: index the bytes
    x = raw.view(-1, H_KV, D)[s["slots"].reshape(-1)].view(cache.dtype).float()    # [B * L_max, H_kv, D]
    if scale is not None:
        x = x * scale
    x = x.view(B, L_max, H_KV, D).transpose(1, 2)                                   # [B, H_kv, L_max, D]
    lens = s["context_lens"] if "context_lens" in s else s["seq_lens"]
    valid = torch.arange(L_max, device=x.device)[None, :] < lens[:, None]           # [B, L_max]
    return torch.where(valid[:, None, :, None], x, 0.0)


def decode_reference(s: dict, scale: float, fp8: bool = False) -> torch.Tensor:
    """fp32 SDPA over the cache's own (dequantized) tokens, GQA folded into the query length: [B, H, D]."""
    import torch.nn.functional as F

    B = s["q"].shape[0]
    kc, vc = (s["k_fp8"], s["v_fp8"]) if fp8 else (s["k_cache"], s["v_cache"])
    ks, vs = (s["k_scale"], s["v_scale"]) if fp8 else (None, None)
    k, v = gathered(s, kc, ks), gathered(s, vc, vs)                                 # [B, H_kv, L_max, D]
    mask = (torch.arange(k.shape[2], device=k.device)[None, :] < s["context_lens"][:, None])[:, None, None, :]
    q = s["q"].float().view(B, H_KV, G, D)                                          # [B, H_kv, G, D]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale).reshape(B, H, D)


def prefill_set(seq_lens: list[int], q_lens: list[int], S: int, seed: int, *, fp8: bool = False,
                contiguous: bool = True) -> dict:
    """q [T, H, D], paged caches, seq_lens, cu_seqlens_q; for SDPA (uniform shapes): q [B, H, q_len, D],
    k, v [B, H_kv, L, D]."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    B, L_max, T = len(seq_lens), max(seq_lens), sum(q_lens)
    q = torch.randn(T, H, D, device=DEVICE, generator=gen).to(DTYPE)               # [T, H, D]
    k = torch.randn(B, L_max, H_KV, D, device=DEVICE, generator=gen).to(DTYPE)     # [B, L_max, H_kv, D]
    v = torch.randn(B, L_max, H_KV, D, device=DEVICE, generator=gen).to(DTYPE)
    k_cache, v_cache, tables, slots = paged_cache(k, v, seq_lens, S, gen)
    cu = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32, device=DEVICE)
    s = dict(q=q, k_cache=k_cache, v_cache=v_cache, block_tables=tables, slots=slots, cu_seqlens_q=cu,
             seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=DEVICE), lens=seq_lens, q_lens=q_lens)
    if fp8:
        s["k_fp8"], s["k_scale"] = quantize_fp8(k_cache, k.abs().amax().item())
        s["v_fp8"], s["v_scale"] = quantize_fp8(v_cache, v.abs().amax().item())
    if contiguous and len(set(q_lens)) == 1 and len(set(seq_lens)) == 1:
        s["q4"] = q.view(B, q_lens[0], H, D).transpose(1, 2).contiguous()            # [B, H, q_len, D]
        s["k"] = k.transpose(1, 2).contiguous()                                     # [B, H_kv, L, D]
        s["v"] = v.transpose(1, 2).contiguous()
    return s
