"""The checks of the attention exercises (125, 126, 131, 133): the comparison, and the hint that names the
mistake by recomputing the answer with it (`reference`, fp64 paged attention with switchable mistakes).

It runs in the judge only: `reference` with its defaults is the answer of 125 and 126, so the module is
parent-side (harness.PARENT_MODULES) and no sandboxed child has it; import it inside the check functions.
"""
from __future__ import annotations

import torch

from pagedkv_lib.judge.cases.attention_cases import (
    ARITHMETIC,
    GARBAGE,
    LOOP_NEVER_RAN,
    RECIPE,
    SHORT_ROWS_LOOP,
    SUMS_HINTS,
    TILES,
    TOLERANCE,
)
from pagedkv_lib.judge.cases.compare import close, diff
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case


def check_attention(case: Case, expected: dict, got: dict) -> Outcome:
    exp = expected["out"]
    tol = TOLERANCE[exp.dtype]
    outcome = close("out", exp, got["out"], tol, tol)
    if outcome.passed:
        found = diff(expected["inputs"], got["inputs"])
        if found is not None:
            return wrong("an input was modified (q, the caches, block_tables or the lengths)",
                         "every argument is read-only: gather into new tensors")
        return outcome
    out = got["out"]
    if isinstance(out, torch.Tensor) and out.shape == exp.shape and out.dtype == exp.dtype:
        outcome.hint = _diagnose(case.args, out, exp, tol)
        row = int(outcome.message.split("[", 1)[1].split(",")[0])
        outcome.details.append(_row_text(case.args, row))
    return outcome


def _row_text(a: dict, row: int) -> str:
    cu = a["cu_seqlens_q"].tolist()
    b = max(i for i in range(len(cu) - 1) if cu[i] <= row)
    n, q_len = int(a["seq_lens"][b]), cu[b + 1] - cu[b]
    return (f"row {row} is query {row - cu[b]} of sequence {b}: context {n} tokens, {q_len} new, "
            f"at position {n - q_len + row - cu[b]}")


def reference(a: dict, *, gqa: str = "div", offset: bool = True, causal: bool = True, extra: int = 0,
              scale: float | None = None, whole_blocks: bool = False, zero_scores_to: int = 0,
              not_rescaled: tuple | None = None) -> torch.Tensor | None:
    """fp64 paged attention with switchable mistakes: [T, H, D], or None where the mistake cannot be made
    (a context past its table row). gqa: "div" (right), "mod" (h % H_kv), "first" (every head reads KV head
    0). whole_blocks: every token of the last block is read (its unused tail too), the queries staying at
    their positions. zero_scores_to: keys of score 0 and value 0 up to the next multiple of it (a kernel's
    last tile, K/V loaded as 0 past the context, scores left unmasked). not_rescaled: ("acc" or "l", tile):
    an online softmax over tiles of `tile` keys that forgets to rescale acc (or l) by exp(m_old - m_new).
    A -1 block read by mistake is the pool's last block, as PyTorch indexing makes it."""
    q, k_cache, v_cache = a["q"].double(), a["k_cache"].double(), a["v_cache"].double()
    S, H_kv, D = k_cache.shape[1:]
    H = q.shape[1]
    heads = {"div": torch.arange(H) // (H // H_kv), "mod": torch.arange(H) % H_kv,
             "first": torch.zeros(H, dtype=torch.long)}[gqa]                    # [H] the KV head of each
    cu = a["cu_seqlens_q"].tolist()
    out = torch.zeros_like(q)                                                   # [T, H, D]
    for b in range(len(cu) - 1):
        n, q_len = int(a["seq_lens"][b]) + extra, cu[b + 1] - cu[b]
        blocks = a["block_tables"][b, : -(-n // S)].long()
        at = n                                                                # the queries' context end
        n = len(blocks) * S if whole_blocks else n
        if n < 1 or len(blocks) * S < n:
            return None
        k = k_cache[blocks].reshape(-1, H_kv, D)[:n][:, heads]                # [n, H, D]
        v = v_cache[blocks].reshape(-1, H_kv, D)[:n][:, heads]                # [n, H, D]
        s = torch.einsum("thd,nhd->htn", q[cu[b] : cu[b + 1]], k) * (a["scale"] if scale is None else scale)
        pos = torch.arange(at - q_len, at) if offset else torch.arange(q_len)  # [q_len]
        if causal:                                                            # (a read tail stays unmasked)
            key_pos = torch.arange(n)[None, :]                                # [1, n]
            s = s.masked_fill((key_pos > pos[:, None]) & (key_pos < at), float("-inf"))
        if zero_scores_to:                                                    # the rest of the last tile
            pad = -n % zero_scores_to
            s = torch.cat([s, s.new_zeros(H, q_len, pad)], -1)                # [H, q_len, n + pad]
            v = torch.cat([v, v.new_zeros(pad, H, D)])                        # [n + pad, H, D]
        if not_rescaled:
            out[cu[b] : cu[b + 1]] = _online_softmax_v(s, v, *not_rescaled)
        else:
            out[cu[b] : cu[b + 1]] = torch.einsum("htn,nhd->thd", s.softmax(-1), v)
    return out


def _online_softmax_v(s: torch.Tensor, v: torch.Tensor, forgotten: str, tile: int) -> torch.Tensor:
    """softmax(s) . v computed online over tiles of `tile` keys, with acc (or l) never rescaled by
    exp(m_old - m_new): s [H, q_len, n], v [n, H, D] -> [q_len, H, D]."""
    H, q_len, n = s.shape
    m = s.new_full((H, q_len), float("-inf"))                                 # [H, q_len] running max
    l = s.new_zeros(H, q_len)                                                 # [H, q_len] running sum
    acc = s.new_zeros(H, q_len, v.shape[-1])                                  # [H, q_len, D]
    for start in range(0, n, tile):
        s_t = s[..., start : start + tile]                                    # [H, q_len, tile]
        m_new = torch.maximum(m, s_t.amax(-1))
        alpha = torch.where(m_new > float("-inf"), torch.exp(m - m_new), 1.0)   # [H, q_len]
        p = torch.exp(s_t - m_new[..., None]).nan_to_num(0.0)                   # [H, q_len, tile]
        pv = torch.einsum("htn,nhd->htd", p, v[start : start + tile])           # [H, q_len, D]
        l = (l if forgotten == "l" else l * alpha) + p.sum(-1)
        acc = (acc if forgotten == "acc" else acc * alpha[..., None]) + pv
        m = m_new
    return (acc / l[..., None]).transpose(0, 1)                               # [q_len, H, D]


def _diagnose(a: dict, got: torch.Tensor, expected: torch.Tensor, tol: float) -> str:
    """The hint: a wrong variant computed on the cache with its NaN garbage made 0 (so that a variant matches
    only what it computes itself, never NaN read from garbage), else where NaN came from, else the recipe."""
    D = a["q"].shape[-1]
    clean = dict(a, k_cache=a["k_cache"].nan_to_num(0.0), v_cache=a["v_cache"].nan_to_num(0.0))
    variants = [
        ("GQA: query head h reads KV head h // (H // H_kv), not h % H_kv", {"gqa": "mod"}),
        ("GQA: every query head read KV head 0: head h reads KV head h // (H // H_kv) (in a kernel, the "
         "program's KV head j: offset the cache by j * D within a slot's H_kv * D)", {"gqa": "first"}),
        ("causal mask: the new tokens are the LAST q_len of the context, so query i sits at position "
         "seq_len - q_len + i, not i", {"offset": False}),
        ("causal: query i must not see keys after its own position", {"causal": False}),
        ("use the `scale` argument, not 1/sqrt(head_dim)", {"scale": D**-0.5}),
        ("the scale was never applied: multiply q . k by `scale` (once) before the softmax", {"scale": 1.0}),
        ("the scale was applied twice (q multiplied by scale, then the scores again): multiply the scores "
         "by it once", {"scale": a["scale"] ** 2}),
        ("one token too many: the context is positions 0..context_len-1", {"extra": 1}),
        ("one key too few: a query sees every key up to AND including its own position (the current token "
         "is part of the context)", {"extra": -1}),
        ("the last block's unused tail was read: cut K and V to the context_len tokens (or mask them)",
         {"whole_blocks": True}),
        *((f"the keys past the context in the last tile (of {n} keys, it seems) were scored 0, not -inf: K "
           "loaded with other=0 gives q . k = 0, and exp(0 - m) still enters l. Set the scores of positions "
           ">= context_len to -inf (tl.where) before the max and the exp", {"zero_scores_to": n})
          for n in TILES),
        *((f"acc was not rescaled (with tiles of {n} keys, it seems): when the running max grows from m to "
           f"m', acc must be multiplied by exp(m - m') before the new tile's p . v is added, as l is",
           {"not_rescaled": ("acc", n)}) for n in TILES),
        *((f"l was not rescaled (with tiles of {n} keys, it seems): when the running max grows from m to "
           f"m', l must be multiplied by exp(m - m') before the new tile's sum is added, as acc is",
           {"not_rescaled": ("l", n)}) for n in TILES),
    ]
    for text, kwargs in variants:
        if kwargs.get("scale") == a["scale"]:
            continue
        other = reference(clean, **kwargs)
        if other is not None and torch.allclose(got.double(), other, atol=tol, rtol=tol, equal_nan=True):
            return text
    if a.get("sums"):
        return SUMS_HINTS[a["sums"]]
    broken = (~torch.isfinite(got) & torch.isfinite(expected)).flatten(1).any(1)       # [T] rows
    if bool(broken.any()):
        if _extreme_scores(a):
            return ARITHMETIC
        seen = keys_seen(a)                                                             # [T]
        if not bool(broken.all()) and int(seen[broken].max()) < int(seen[~broken].min()):   # the shortest
            return LOOP_NEVER_RAN if int(seen[broken].max()) == 1 else SHORT_ROWS_LOOP.format(
                n=int(seen[broken].max()), longer=int(seen[~broken].min()))
        return GARBAGE
    return RECIPE


def keys_seen(a: dict) -> torch.Tensor:
    """[T]: how many keys each query row sees (its position + 1: seq_len - q_len + i + 1)."""
    cu, lens = a["cu_seqlens_q"].long(), a["seq_lens"].long()
    q_lens = cu[1:] - cu[:-1]                                                        # [B]
    seq = torch.repeat_interleave(torch.arange(len(q_lens)), q_lens)                 # [T] the row's sequence
    i = torch.arange(int(cu[-1])) - cu[:-1][seq]                                     # [T] index in its chunk
    return lens[seq] - q_lens[seq] + i + 1


def _extreme_scores(a: dict, limit: float = 80.0) -> bool:
    """Whether some query's scores over its context all lie below -limit, or some score above +limit."""
    q, k_cache = a["q"].double(), a["k_cache"].double()
    S, H_kv, D = k_cache.shape[1:]
    group = q.shape[1] // H_kv
    cu = a["cu_seqlens_q"].tolist()
    for b in range(len(cu) - 1):
        n = int(a["seq_lens"][b])
        k = k_cache[a["block_tables"][b, : -(-n // S)].long()].reshape(-1, H_kv, D)[:n]   # [n, H_kv, D]
        s = torch.einsum("thd,nhd->thn", q[cu[b] : cu[b + 1]], k.repeat_interleave(group, 1)) * a["scale"]
        if bool((s.amax(-1) < -limit).any()) or bool((s > limit).any()):
            return True
    return False
