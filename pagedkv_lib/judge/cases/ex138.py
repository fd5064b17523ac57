"""Cases of exercise 138, paged MLA decode with absorbed weights: every layer of a small model in one case,
compared with the library's multi-head form (every latent up-projected to H keys and values, float64).

The case builds its inputs from pagedkv_lib.testing.mla_batch only (the oracle's module is not in the graded
child's tree): L layers share one block table, each with its own cache, weights and queries, and `run` calls
the submission once per layer. On a finite wrong answer the check recomputes here, in float64, the usual
wrong variants and names the one matched: RoPE applied to the latent query as well, the query's RoPE part
left unrotated, the RoPE key repeated instead of shared across heads (head h reading another token's key),
w_uk used transposed (only possible when Dn = C: the first case is square on purpose), the scale of the
latent rows 1/sqrt(C + R) (or 1/sqrt(C)) instead of 1/sqrt(Dn + R), the last partial page dropped or its
unused tail read, and a
later layer answered with the first layer's weights (state kept between calls).

Clauses of the contract -> the fixed case that holds each:
    RoPE on q's RoPE part only; one shared RoPE key    square_weights (and every case)
    w_uk absorbed as w_uk[h]^T q_nope                  square_weights (Dn = C: a transpose is a wrong number)
    scale 1 / sqrt(Dn + R)                             deepseek_ratios (C = 4 Dn, R = Dn / 2 as in V3)
    context = ceil(n / S) blocks, the last partial     square_weights, block_size_64 (1, 63, 64, 65, 130)
    -1 padding never followed, NaN rows never read     padding_and_nan_garbage, block_size_1
    each layer its own weights, nothing kept           three_layers (and every case of 2+ layers)
    float32 inputs, the output's shape and dtype       float32
    every argument read-only                           every case
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.core.rotary import apply_rope_interleaved
from pagedkv_lib.judge.cases.compare import close, diff
from pagedkv_lib.judge.outcome import Outcome, wrong
from pagedkv_lib.testing.mla_batch import make_mla_batch

from . import Case, fresh, observe, tensor_text

TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}     # atol = rtol
DTYPES = {"fp64": torch.float64, "fp32": torch.float32}
FIXED = [  # name, context_lens, block_size, H, C, R, Dn, Dv, options
    ("square_weights", [5, 3], 4, 4, 16, 8, 16, 8, {"num_layers": 2, "garbage": "huge"}),
    ("deepseek_ratios", [1, 16, 17, 40], 16, 8, 32, 4, 8, 8, {"num_layers": 2}),
    ("block_size_64", [1, 63, 64, 65, 130], 64, 4, 32, 8, 16, 16, {}),
    ("block_size_1", [1, 4, 7], 1, 4, 16, 4, 8, 8, {"num_layers": 2}),
    ("padding_and_nan_garbage", [6, 13, 3], 4, 2, 16, 8, 8, 4, {"extra_padding": 3, "exact_pool": True}),
    ("one_sequence_one_token", [1], 16, 4, 16, 8, 8, 8, {}),
    ("three_layers", [9, 30], 16, 4, 16, 4, 8, 8, {"num_layers": 3}),
    ("float32", [20, 7], 16, 4, 32, 8, 16, 8, {"dtype": "fp32", "num_layers": 2}),
]
CALL = "mla_decode_absorbed(q, kv_cache, block_tables, context_lens, w_uk, w_uv, cos, sin):"


def make_case(name: str, lens, block_size: int, H: int, C: int, R: int, Dn: int, Dv: int, *, seed: int,
              num_layers: int = 1, dtype: str = "fp64", garbage: str = "nan", extra_padding: int = 0,
              exact_pool: bool = False) -> Case:
    need = sum(-(-n // block_size) for n in lens)
    batch = make_mla_batch(lens, block_size, H, C, R, Dn, Dv, num_layers=num_layers, seed=seed,
                           dtype=DTYPES[dtype], num_blocks=need if exact_pool else None,
                           extra_padding=extra_padding)
    if garbage == "huge":                                   # finite garbage, large enough to dominate
        nan = torch.isnan(batch.kv_cache)
        g = torch.Generator().manual_seed(seed + 7)
        batch.kv_cache[nan] = (torch.randn(int(nan.sum()), generator=g, dtype=torch.float64) * 100).to(
            batch.kv_cache.dtype)
    args = {"q": batch.q, "kv_cache": batch.kv_cache, "block_tables": batch.block_tables,
            "context_lens": batch.context_lens, "w_uk": batch.w_uk, "w_uv": batch.w_uv,
            "cos": batch.cos, "sin": batch.sin}
    lines = [CALL, f"{num_layers} layer(s), one call each; block_size {block_size}, H {H}, C {C}, R {R}, "
             f"Dn {Dn}, Dv {Dv}, {dtype}",
             tensor_text("kv_cache (every layer)", batch.kv_cache,
                         f" (rows outside contexts: {garbage} garbage)"),
             f"block_tables = {batch.block_tables.tolist()}", f"context lengths = {list(lens)}"]
    return Case(name, args, lines)


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"138/{seed}")
    cases = [make_case(f"fixed/{n}", lens, bs, H, C, R, Dn, Dv, seed=i, **opt)
             for i, (n, lens, bs, H, C, R, Dn, Dv, opt) in enumerate(FIXED)]
    for i in range(6):
        lens = [rng.randint(1, 150) for _ in range(rng.randint(1, 4))]
        opt = {"num_layers": rng.randint(1, 3), "garbage": rng.choice(["nan", "huge"]),
               "extra_padding": rng.randint(0, 2), "exact_pool": rng.random() < 0.5}
        cases.append(make_case(f"random/{i}", lens, rng.choice([1, 16, 64]), rng.choice([1, 2, 4, 8]),
                               rng.choice([16, 32, 64]), rng.choice([4, 8, 16]), rng.choice([8, 16]),
                               rng.choice([4, 8, 16]), seed=100 + i, **opt))
    return cases


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    fn = ns["mla_decode_absorbed"]
    outs = [fn(a["q"][l], a["kv_cache"][l], a["block_tables"], a["context_lens"], a["w_uk"][l], a["w_uv"][l],
               a["cos"], a["sin"]) for l in range(a["q"].shape[0])]
    return {"out": observe(outs), "inputs": observe([a[k] for k in sorted(a)])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    outs = got["out"]
    if not isinstance(outs, list) or len(outs) != len(expected["out"]):
        return wrong("expected one output per layer", "return a tensor from every call")
    for layer, (exp, out) in enumerate(zip(expected["out"], outs)):
        tol = TOLERANCE[exp.dtype]
        outcome = close(f"out of layer {layer}", exp, out, tol, tol)
        if not outcome.passed:
            if isinstance(out, torch.Tensor) and out.shape == exp.shape and out.dtype == exp.dtype:
                outcome.hint = _diagnose(case.args, layer, out, tol)
            return outcome
    if diff(expected["inputs"], got["inputs"]) is not None:
        return wrong("an input was modified (q, the cache, the tables, the weights or the angles)",
                     "every argument is read-only: gather into new tensors")
    return Outcome()


def reference(a: dict, layer: int, *, rope_latent: bool = False, rope_query: bool = True,
              repeat_key: bool = False, transpose_w_uk: bool = False, scale_dim: str = "Dn + R",
              full_pages_only: bool = False, whole_blocks: bool = False, follow_padding: bool = False,
              weights_of: int | None = None) -> torch.Tensor | None:
    """The absorbed form in float64 with switchable mistakes, [B, H, Dv] (None where the mistake cannot be
    made with these shapes). NaN garbage is made 0 first, so a variant matches only what it computes."""
    w = layer if weights_of is None else weights_of
    q, w_uk, w_uv = a["q"][layer].double(), a["w_uk"][w].double(), a["w_uv"][w].double()
    kv_cache = a["kv_cache"][layer].double().nan_to_num(0.0)             # [N, S, W]
    B, H, _ = q.shape
    Dn, C = w_uk.shape[1], w_uk.shape[2]
    S, W = kv_cache.shape[1], kv_cache.shape[2]
    R = W - C
    if transpose_w_uk and Dn != C:
        return None
    cos, sin = a["cos"][:, None], a["sin"][:, None]                      # [B, 1, R / 2]
    q_pe = apply_rope_interleaved(q[..., Dn:], cos, sin) if rope_query else q[..., Dn:]   # [B, H, R]
    w_k = w_uk.transpose(1, 2) if transpose_w_uk else w_uk
    q_c = torch.einsum("bhd,hdc->bhc", q[..., :Dn], w_k)                 # [B, H, C]
    if rope_latent:
        q_c = torch.cat((apply_rope_interleaved(q_c[..., :R], cos, sin), q_c[..., R:]), dim=-1)
    scale = {"Dn + R": Dn + R, "C + R": C + R, "C": C}[scale_dim] ** -0.5
    out = torch.zeros(B, H, w_uv.shape[1], dtype=torch.float64)          # [B, H, Dv]
    for b in range(B):
        n = int(a["context_lens"][b])
        n = n // S * S if full_pages_only else n
        table = a["block_tables"][b] if follow_padding else a["block_tables"][b, : -(-n // S)]
        rows = kv_cache[table.long()].reshape(-1, W)                                 # [blocks * S, W]
        rows = rows if whole_blocks or follow_padding else rows[:n]                  # [n, W]
        n = len(rows)
        k_pe = rows[:, C:].repeat(H, 1).reshape(n, H, R) if repeat_key else rows[:, None, C:].expand(n, H, R)
        scores = q_c[b] @ rows[:, :C].T + torch.einsum("hr,nhr->hn", q_pe[b], k_pe)   # [H, n]
        if n:
            out[b] = torch.einsum("hc,hvc->hv", (scores * scale).softmax(-1) @ rows[:, :C], w_uv)
    return out


VARIANTS = [  # hint, reference switches
    ("RoPE was applied to the latent query too: only the decoupled RoPE part q[..., Dn:] is rotated (it "
     "meets the rows' last R numbers); w_uk[h]^T q_nope and the cached latents carry no position, which "
     "is what lets w_uk be absorbed at all", {"rope_latent": True}),
    ("the query's RoPE part was not rotated: rotate q[..., Dn:] with cos, sin (the keys in the cache already "
     "are, each at its own position)", {"rope_query": False}),
    ("the RoPE key is not shared across heads: each row holds ONE RoPE key that every head scores against "
     "(rows[:, C:] broadcast over heads, or q_pe @ k_pe.T); repeat(H, 1) then reshape gives head h another "
     "token's key", {"repeat_key": True}),
    ("w_uk was absorbed transposed: the latent query is q_c[h] = w_uk[h]^T q_nope, einsum('hd,hdc->hc'), so "
     "that q_c . c = q_nope . (w_uk[h] c)", {"transpose_w_uk": True}),
    ("the softmax scale of the latent dimension: scale by 1 / sqrt(Dn + R), the head dim of the multi-head "
     "q . k, not 1 / sqrt(C + R) of the latent rows (absorption changes the vectors, not the scores)",
     {"scale_dim": "C + R"}),
    ("the softmax scale of the latent dimension: scale by 1 / sqrt(Dn + R), not 1 / sqrt(C)",
     {"scale_dim": "C"}),
    ("the last block's unused tail was read: cut the rows to the context_len tokens", {"whole_blocks": True}),
    ("a block was read through the -1 padding (PyTorch reads block -1 as the pool's last one): take only "
     "the first ceil(n / S) entries of the table row", {"follow_padding": True}),
    ("the last partial page was dropped: a context of n tokens spans ceil(n / S) blocks, the last one "
     "holding n - (ceil(n / S) - 1) * S of them", {"full_pages_only": True}),
]
RECIPE = ("absorb: q_c = einsum('bhd,hdc->bhc', q_nope, w_uk), q_pe rotated; per sequence gather its n rows "
          "through the block table; scores = (q_c . c + q_pe . k_pe) / sqrt(Dn + R); latent output = "
          "softmax . c; out = einsum('hc,hvc->hv', latent output, w_uv)")
GARBAGE = ("NaN in the output: a cache row outside the context reached it. Masking the scores with -inf is "
           "not enough: such a row's weight is 0, and 0 x NaN = NaN in p . c, so cut the rows to the context "
           "before the products")


def _diagnose(a: dict, layer: int, got: torch.Tensor, tol: float) -> str:
    variants = list(VARIANTS)
    if layer:
        variants.append(("this layer's answer is computed with layer 0's weights: something was kept "
                         "between calls (a cache of absorbed weights?); every call brings its own layer's "
                         "weights, keep nothing", {"weights_of": 0}))
    for text, kwargs in variants:
        other = reference(a, layer, **kwargs)
        if other is not None and torch.allclose(got.double(), other, atol=tol, rtol=tol):
            return text
    if bool(torch.isnan(got).any()):
        return GARBAGE
    return RECIPE
