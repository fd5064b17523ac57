"""Cases of exercise 138, paged MLA decode with absorbed weights: every layer of a small model in one case,
compared with the library's multi-head form (every latent up-projected to H keys and values, float64).

The case builds its inputs from pagedkv_lib.testing.mla_batch only (the oracle's module is not in the graded
child's tree): L layers share one block table, each with its own cache, weights and queries, and `run` calls
the submission once per layer. On a wrong answer of the right shape the check recomputes here, in float64,
the usual mistakes and names every one the output matches: RoPE applied to the latent query as well, the
query's RoPE part left unrotated or the cached RoPE key rotated again (one number: the hint names both),
the query rotated in halves instead of pairs, the RoPE key repeated instead of shared across heads, w_uk
used transposed (only possible when Dn = C: the first case is square on purpose), a scale of another usual
dimension (1/sqrt(C + R), 1/sqrt(C), 1/sqrt(Dn), none, ...: the hint names every one equal to the number
matched, as 1/sqrt(Dn) and 1/sqrt(C) are in that square case), the last partial page dropped, its unused
tail read or the -1 padding followed, and a later layer answered with any of an earlier layer's inputs
(state kept between calls). Otherwise the hint says what was observed (which sequences and heads, by how
much) and where notebook 18 teaches the clauses; no hint shows code of the answer.

One case (WATCHED) also counts the numbers the call's tensor operations make (new tensors, not views): an
up-projection of the cache (H keys or values per context row, all heads at once or one head at a time)
makes at least H * min(Dn, Dv) per row, and with Dn = Dv = 8 C that is about ten times what the absorbed
form makes in all.

Clauses of the contract -> the fixed case that holds each:
    RoPE on q's RoPE part only; one shared RoPE key    square_weights (and every case)
    w_uk absorbed as w_uk[h]^T q_nope                  square_weights (Dn = C: a transpose is a wrong number)
    scale 1 / sqrt(Dn + R)                             deepseek_ratios (C = 4 Dn, R = Dn / 2 as in V3)
    context = ceil(n / S) blocks, the last partial     square_weights, block_size_64 (1, 63, 64, 65, 130)
    -1 padding never followed, NaN rows never read     padding_and_nan_garbage, block_size_1
    each layer its own weights, nothing kept           three_layers (and every case of 2+ layers)
    float32 inputs, the output's shape and dtype       float32
    every argument read-only                           every case
    never up-project the cache (module docstring)      never_up_projected (Dn = Dv = 8 C: what it makes)
"""
from __future__ import annotations

import contextlib
import random

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pagedkv_lib.core.rotary import apply_rope_interleaved
from pagedkv_lib.judge.cases.compare import close, diff
from pagedkv_lib.judge.outcome import Outcome, wrong
from pagedkv_lib.testing.mla_batch import make_mla_batch

from . import Case, fresh, observe, tensor_text

TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4}     # atol = rtol
DTYPES = {"fp64": torch.float64, "fp32": torch.float32}
INPUTS = ("q", "kv_cache", "w_uk", "w_uv")     # what each layer's call brings
FIXED = [  # name, context_lens, block_size, H, C, R, Dn, Dv, options
    ("square_weights", [5, 3], 4, 4, 16, 8, 16, 8, {"num_layers": 2, "garbage": "huge"}),
    ("deepseek_ratios", [1, 16, 17, 40], 16, 8, 32, 4, 8, 8, {"num_layers": 2}),
    ("block_size_64", [1, 63, 64, 65, 130], 64, 4, 32, 8, 16, 16, {}),
    ("block_size_1", [1, 4, 7], 1, 4, 16, 4, 8, 8, {"num_layers": 2}),
    ("padding_and_nan_garbage", [6, 13, 3], 4, 2, 16, 8, 8, 4, {"extra_padding": 3, "exact_pool": True}),
    ("one_sequence_one_token", [1], 16, 4, 16, 8, 8, 8, {}),
    ("three_layers", [9, 30], 16, 4, 16, 4, 8, 8, {"num_layers": 3}),
    ("float32", [20, 7], 16, 4, 32, 8, 16, 8, {"dtype": "fp32", "num_layers": 2}),
    ("never_up_projected", [256, 100], 16, 8, 16, 8, 128, 128, {"exact_pool": True}),
]
WATCHED = "fixed/never_up_projected"    # the case whose tensor operations are counted (module docstring)
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
    counter = ProducedNumbers()
    with counter if case.name == WATCHED else contextlib.nullcontext():
        outs = [fn(a["q"][l], a["kv_cache"][l], a["block_tables"], a["context_lens"], a["w_uk"][l],
                   a["w_uv"][l], a["cos"], a["sin"]) for l in range(a["q"].shape[0])]
    return {"out": observe(outs), "inputs": observe([a[k] for k in sorted(a)]), "produced": counter.total}


class ProducedNumbers(TorchDispatchMode):
    """Counts the elements of every new tensor the operations inside it return (a view of an argument, or
    an operation that writes into one, makes no new numbers)."""

    def __init__(self):
        super().__init__()
        self.total = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would otherwise wrap __torch_dispatch__ in dynamo's disable, whose first call imports
        torch._dynamo (about 2 s of CPU) inside the submission's clock and guard, in a child forked from a
        process that never imported it (a notebook's kernel). Nothing here is compiled."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        given = {_storage(v) for v in [*args, *(kwargs or {}).values()] if isinstance(v, torch.Tensor)}
        for value in result if isinstance(result, (tuple, list)) else [result]:
            if isinstance(value, torch.Tensor) and _storage(value) not in given:
                self.total += value.numel()
        return result


def _storage(x: torch.Tensor) -> int:
    return x.untyped_storage().data_ptr()


def up_projection_size(a: dict) -> int:
    """The numbers an up-projection of every context row makes at the least: H * min(Dn, Dv) per row."""
    H, Dn, Dv = a["w_uk"].shape[1], a["w_uk"].shape[2], a["w_uv"].shape[2]
    return int(a["context_lens"].sum()) * H * min(Dn, Dv) * a["q"].shape[0]


def check(case: Case, expected: dict, got: dict) -> Outcome:
    outs = got["out"]
    if not isinstance(outs, list) or len(outs) != len(expected["out"]):
        return wrong("expected one output per layer", "return a tensor from every call")
    for layer, (exp, out) in enumerate(zip(expected["out"], outs)):
        tol = TOLERANCE[exp.dtype]
        outcome = close(f"out of layer {layer}", exp, out, tol, tol)
        if not outcome.passed:
            if isinstance(out, torch.Tensor) and out.shape == exp.shape and out.dtype == exp.dtype:
                outcome.hint = _diagnose(case.args, layer, out, exp, tol)
            return outcome
    produced, bound = got.get("produced"), up_projection_size(case.args)
    if case.name == WATCHED and (not isinstance(produced, int) or produced >= bound):
        return wrong(f"the call's tensor operations made {produced} numbers, at least what up-projecting the "
                     f"cache makes ({bound}: H * min(Dn, Dv) per context row)",
                     "never up-project the cache: every head attends to the same latent rows, with w_uk "
                     f"absorbed into the query and w_uv applied to the latent output ({ABSORB})")
    if diff(expected["inputs"], got["inputs"]) is not None:
        return wrong("an input was modified (q, the cache, the tables, the weights or the angles)",
                     "every argument is read-only: gather into new tensors")
    return Outcome()


def reference(a: dict, layer: int, *, rope_latent: bool = False, rope_query: str = "interleaved",
              rope_key_again: bool = False, repeat_key: bool = False, transpose_w_uk: bool = False,
              scale: float | None = None, full_pages_only: bool = False, whole_blocks: bool = False,
              follow_padding: bool = False, layer_of: dict | None = None) -> torch.Tensor | None:
    """The absorbed form in float64 with switchable mistakes, [B, H, Dv] (None where the mistake cannot be
    made with these shapes). `rope_query`: "interleaved" (right), "halves" or "none"; `scale`: None for
    1 / sqrt(Dn + R); `layer_of`: input name ("q", "kv_cache", "w_uk", "w_uv") -> the earlier layer whose
    tensor is used (state kept between calls). NaN garbage is made 0 first, so a variant matches only what
    it computes."""
    src = dict.fromkeys(INPUTS, layer) | (layer_of or {})
    q, w_uk, w_uv = (a[name][src[name]].double() for name in ("q", "w_uk", "w_uv"))
    kv_cache = a["kv_cache"][src["kv_cache"]].double().nan_to_num(0.0)    # [N, S, W]
    B, H, _ = q.shape
    Dn, C = w_uk.shape[1], w_uk.shape[2]
    S, W = kv_cache.shape[1], kv_cache.shape[2]
    R = W - C
    if transpose_w_uk and Dn != C:
        return None
    cos, sin = a["cos"][:, None], a["sin"][:, None]                      # [B, 1, R / 2]
    rotate = {"interleaved": apply_rope_interleaved, "halves": rope_in_halves, "none": None}[rope_query]
    q_pe = q[..., Dn:] if rotate is None else rotate(q[..., Dn:], cos, sin)   # [B, H, R]
    w_k = w_uk.transpose(1, 2) if transpose_w_uk else w_uk
    q_c = torch.einsum("bhd,hdc->bhc", q[..., :Dn], w_k)                 # [B, H, C]
    if rope_latent:
        q_c = torch.cat((apply_rope_interleaved(q_c[..., :R], cos, sin), q_c[..., R:]), dim=-1)
    scale = (Dn + R) ** -0.5 if scale is None else scale
    out = torch.zeros(B, H, w_uv.shape[1], dtype=torch.float64)          # [B, H, Dv]
    for b in range(B):
        n = int(a["context_lens"][b])
        n = n // S * S if full_pages_only else n
        table = a["block_tables"][b] if follow_padding else a["block_tables"][b, : -(-n // S)]
        rows = kv_cache[table.long()].reshape(-1, W)                                 # [blocks * S, W]
        rows = rows if whole_blocks or follow_padding else rows[:n]                  # [n, W]
        n = len(rows)
        k_pe = rows[:, C:]                                                           # [n, R]
        if rope_key_again:
            k_pe = apply_rope_interleaved(k_pe, cos[b], sin[b])
        k_pe = k_pe.repeat(H, 1).reshape(n, H, R) if repeat_key else k_pe[:, None].expand(n, H, R)
        scores = q_c[b] @ rows[:, :C].T + torch.einsum("hr,nhr->hn", q_pe[b], k_pe)   # [H, n]
        if n:
            out[b] = torch.einsum("hc,hvc->hv", (scores * scale).softmax(-1) @ rows[:, :C], w_uv)
    return out


def rope_in_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE in the half-split layout of Llama-style models (dimension i paired with i + R / 2): the layout
    this exercise does not use, for the hint of a query rotated that way."""
    first, second = x.chunk(2, dim=-1)                                   # [..., R / 2] each
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


ABSORB = 'section 2 of notebook 18, "One decode step, two ways"'
PAGED = 'section 4 of notebook 18, "The paged latent cache"'
VARIANTS = [  # hint (what the output matched, the clause, where it is taught), reference switches
    ("the output matches RoPE applied to the latent query as well: only q's RoPE part (its last R numbers) "
     "carries a position; the latent query and the cached latents carry none, which is what lets w_uk be "
     f"absorbed at all ({ABSORB})", {"rope_latent": True}),
    ("the output matches the query's RoPE part not rotated: the scores must see the query's position "
     f"(cos, sin) against each key's, already in the cache ({ABSORB})", {"rope_query": "none"}),
    ("the output matches the cached RoPE key rotated a second time, with the query's angles: the cache "
     "stores k_pe already rotated at its own position, and turning both sides by the same angle undoes the "
     f"query's rotation ({ABSORB})", {"rope_key_again": True}),
    ("the output matches the query's RoPE part rotated in halves (dimension i with i + R / 2): this model "
     "pairs neighbours (2i, 2i + 1), the layout the cached keys were rotated in (the docstring's contract; "
     "pagedkv_lib/core/rotary.py)", {"rope_query": "halves"}),
    ("the output matches a RoPE key that is not shared across heads (head h scoring another token's key): "
     f"each cached row holds ONE RoPE key that every head scores against ({ABSORB})", {"repeat_key": True}),
    ("the output matches w_uk absorbed transposed: the latent query must satisfy q_c . c = q_nope . "
     f"(w_uk[h] c) for every latent c ({ABSORB})", {"transpose_w_uk": True}),
    (f"the output matches the last block's unused tail read: a context is its first n rows ({PAGED})",
     {"whole_blocks": True}),
    ("the output matches a block read through the -1 padding (PyTorch reads block -1 as the pool's last "
     f"one): a context of n tokens uses only the first ceil(n / S) entries of its table row ({PAGED})",
     {"follow_padding": True}),
    ("the output matches the last partial page dropped: a context of n tokens spans ceil(n / S) blocks, "
     f"the last one holding n - (ceil(n / S) - 1) * S of them ({PAGED})", {"full_pages_only": True}),
]
GARBAGE = ("NaN in the output: a cache row outside the context reached it. Masking the scores with -inf is "
           "not enough: such a row's weight is 0, and 0 x NaN = NaN in p . c, so cut the rows to the context "
           f"before the products ({PAGED})")


def _diagnose(a: dict, layer: int, got: torch.Tensor, expected: torch.Tensor, tol: float) -> str:
    """The hint of a wrong output of the right shape and dtype: the known mistakes whose output it matches
    (all of them when this case cannot tell them apart), else what was observed."""
    got = got.double()
    found = [text for text, kwargs in [*VARIANTS, *_kept_state(a, layer)]
             if _matches(got, reference(a, layer, **kwargs), tol)]
    found += _scale_hints(a, layer, got, tol)
    if len(found) == 1:
        return found[0]
    if found:
        each = [f"({i}) {text.removeprefix('the output matches ')}" for i, text in enumerate(found, 1)]
        return f"the output matches {len(found)} mistakes that this case cannot tell apart: {'; '.join(each)}"
    if bool(torch.isnan(got).any()):
        return GARBAGE
    return _observed(a, layer, got, expected.double(), tol)


def _matches(got: torch.Tensor, other: torch.Tensor | None, tol: float) -> bool:
    return other is not None and torch.allclose(got, other, atol=tol, rtol=tol)


def _kept_state(a: dict, layer: int) -> list:
    """(hint, switches) of every way a later layer can reuse an earlier layer's inputs: any non-empty set of
    q, the cache and the weights taken from any earlier call."""
    variants = []
    for earlier in range(layer):
        for mask in range(1, 2 ** len(INPUTS)):
            names = [name for i, name in enumerate(INPUTS) if mask >> i & 1]
            variants.append((
                f"layer {layer}'s output is what layer {earlier}'s {' and '.join(names)} "
                f"{'give' if len(names) > 1 else 'gives'} with this "
                f"layer's other inputs: something was kept between calls; every call brings its own layer's "
                f"query, cache and weights (one block table for all), and the contract keeps nothing",
                {"layer_of": dict.fromkeys(names, earlier)}))
    return variants


def _scale_hints(a: dict, layer: int, got: torch.Tensor, tol: float) -> list:
    """The hint of the softmax scale the output matches, naming every usual scale of that value here (with
    Dn = C, 1 / sqrt(Dn) and 1 / sqrt(C) are one number: the case cannot tell which was written)."""
    Dn, C = a["w_uk"].shape[2], a["w_uk"].shape[3]
    R, Dv = a["kv_cache"].shape[-1] - C, a["w_uv"].shape[2]
    right = Dn + R
    usual = [("1 / sqrt(Dn)", Dn), ("1 / sqrt(C)", C), ("1 / sqrt(R)", R), ("1 / sqrt(C + R)", C + R),
             ("1 / sqrt(Dv)", Dv), ("1 / (Dn + R), without the square root", right ** 2),
             ("1 (no scale at all)", 1)]
    by_value = {}                                   # the number under the square root -> its usual names
    for name, under_root in usual:
        by_value.setdefault(under_root, []).append(name)
    by_value.pop(right, None)
    hints = []
    for value, names in by_value.items():
        if not _matches(got, reference(a, layer, scale=value ** -0.5), tol):
            continue
        same = "" if len(names) == 1 else (
            f" (all one number here: Dn = {Dn}, C = {C}, R = {R}, Dv = {Dv}, so this case cannot tell which)")
        hints.append(f"the output matches the scores scaled by {' or '.join(names)}{same}, not by "
                     f"1 / sqrt(Dn + R) = 1 / sqrt({right}), the head dim of the multi-head q . k: absorbing "
                     f"w_uk changes the vectors, not the scores ({ABSORB})")
    return hints


def _observed(a: dict, layer: int, got: torch.Tensor, expected: torch.Tensor, tol: float) -> str:
    """What a wrong output no known mistake explains shows: which sequences and heads are off, by how much,
    beside their context lengths, and where the clauses are taught."""
    lens = a["context_lens"].tolist()
    S = a["kv_cache"].shape[2]
    off = ~torch.isclose(got, expected, atol=tol, rtol=tol)                          # [B, H, Dv]
    wrong_seqs = [b for b in range(len(lens)) if bool(off[b].any())]
    right_seqs = [b for b in range(len(lens)) if b not in wrong_seqs]
    heads = int(off.any(dim=-1).any(dim=0).sum())
    err = float((got - expected).abs().max())
    text = (f"no usual mistake matches layer {layer}'s output. Observed, with blocks of {S} tokens: "
            f"sequences {wrong_seqs} (context lengths {[lens[b] for b in wrong_seqs]}) are off in {heads} of "
            f"{got.shape[1]} heads, by up to {err:.3g}")
    if right_seqs:
        text += f"; sequences {right_seqs} (lengths {[lens[b] for b in right_seqs]}) are right"
    return (f"{text}. Absorption, RoPE and the scale: {ABSORB}; reading a context through its block table: "
            f"{PAGED}")
