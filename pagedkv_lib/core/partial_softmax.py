"""Partial softmax results and their merge: what split-KV decode combines, in any order and any tree.

A part of a row of scores `s` (with the value rows `v` of its tokens) is summarised per query row by
    m   = max of the part's scores        (-inf for an empty part, or one whose scores are all -inf)
    l   = sum exp(s - m)                  (0 for such a part)
    acc = sum exp(s - m) * v              ([D]; 0 for such a part)
and two parts merge into the summary of their union:
    m = max(m_a, m_b)    l = l_a e^(m_a - m) + l_b e^(m_b - m)    acc = acc_a e^(m_a - m) + acc_b e^(m_b - m)
where e^(m_x - m) is 0 for an empty part, also when both are empty (the formula as written would give
e^(-inf + inf) = NaN). The merge is commutative (bit for bit: max and + commute) and associative (exactly in
real numbers; in floats up to rounding, so two trees may differ in the last bits), with the empty part as
its identity: any cut of a row into parts, merged in any order and any tree, gives the row's softmax.
`output` is acc / l, `lse` is m + log l; a row with no score left (l = 0) gives output 0 and lse -inf.
Kernels store the same state normalised, (o = acc / l, lse): `from_lse` reads it back.

Ideas: the online softmax (Milakov and Gimelshein, 2018), Flash-Decoding's split-KV reduction (Dao et al.,
2023), FlashInfer's attention states merged by `merge_state` (`flashinfer/cascade.py`).
Shapes: `...` are leading dims (query heads, say), n the part's tokens, D the head dim (docs/conventions.md).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

NEG_INF = float("-inf")


@dataclass(frozen=True)
class SoftmaxPartial:
    """The summary of one part of a row (or of several merged): see the module docstring."""
    m: torch.Tensor      # [...]      max score (-inf: nothing in the part)
    l: torch.Tensor      # [...]      sum exp(s - m)
    acc: torch.Tensor    # [..., D]   sum exp(s - m) * v


def _shift(m: torch.Tensor) -> torch.Tensor:
    """m, with -inf replaced by 0: subtracting it never computes -inf - (-inf)."""
    return torch.where(m == NEG_INF, torch.zeros_like(m), m)


def partial_of(scores: torch.Tensor, values: torch.Tensor) -> SoftmaxPartial:
    """The summary of a part: scores [..., n] (-inf allowed: masked tokens; n = 0 allowed), values [n, D]
    (or [..., n, D])."""
    if scores.shape[-1] == 0:
        m = torch.full(scores.shape[:-1], NEG_INF, dtype=scores.dtype, device=scores.device)    # [...]
    else:
        m = scores.max(dim=-1).values                                                            # [...]
    p = torch.exp(scores - _shift(m)[..., None])                      # [..., n]; -inf scores give 0
    acc = (p[..., None, :] @ values.to(p.dtype)).squeeze(-2)          # [..., D]
    return SoftmaxPartial(m, p.sum(dim=-1), acc)


def merge_partials(a: SoftmaxPartial, b: SoftmaxPartial) -> SoftmaxPartial:
    """The summary of the union of two disjoint parts of the same row(s)."""
    m = torch.maximum(a.m, b.m)                                       # [...]
    wa = torch.exp(a.m - _shift(m))                                   # [...]; 0 where a is empty
    wb = torch.exp(b.m - _shift(m))                                   # [...]
    return SoftmaxPartial(m, a.l * wa + b.l * wb, a.acc * wa[..., None] + b.acc * wb[..., None])


def output(p: SoftmaxPartial) -> torch.Tensor:
    """acc / l: the softmax-weighted sum of the values [..., D]; 0 where nothing was merged (l = 0)."""
    l = p.l[..., None]                                                # [..., 1]
    return torch.where(l > 0, p.acc / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(p.acc))


def lse(p: SoftmaxPartial) -> torch.Tensor:
    """log sum exp of every score merged, [...]: m + log l (-inf where nothing was merged)."""
    return torch.where(p.l > 0, p.m + torch.log(p.l), torch.full_like(p.m, NEG_INF))


def from_lse(o: torch.Tensor, lse_: torch.Tensor) -> SoftmaxPartial:
    """The state a kernel stores, (normalised output o [..., D], log-sum-exp [...]), as a SoftmaxPartial:
    m = lse, l = 1, acc = o (m = -inf, l = 0, acc = 0 for an empty part). Merging these weights each o by
    exp(lse_i - lse), the kernels' formula."""
    empty = lse_ == NEG_INF                                           # [...]
    return SoftmaxPartial(lse_, (~empty).to(o.dtype), torch.where(empty[..., None], torch.zeros_like(o), o))


def merge_tree(parts: list[SoftmaxPartial], tree) -> SoftmaxPartial:
    """Merge `parts` along `tree`: a leaf is an index into `parts`, a node a pair (left, right), e.g.
    ((0, 2), (1, (3, 4))) (each index used once; the order inside a pair is the order of the merge)."""
    if isinstance(tree, int):
        return parts[tree]
    left, right = tree
    return merge_partials(merge_tree(parts, left), merge_tree(parts, right))


def random_tree(leaves: list, rng: random.Random):
    """A random binary tree over `leaves` in a random order: repeatedly merge two random subtrees."""
    nodes = list(leaves)
    rng.shuffle(nodes)
    while len(nodes) > 1:
        i, j = sorted(rng.sample(range(len(nodes)), 2))
        right, left = nodes.pop(j), nodes.pop(i)
        nodes.append((left, right) if rng.random() < 0.5 else (right, left))
    return nodes[0]
