"""Tree attention: several candidate continuations verified in one forward (SpecInfer, Miao et al.,
arXiv:2305.09781; Medusa, Cai et al., arXiv:2401.10774).

A draft TREE holds node 0, the last verified token, and drafts whose parent is an earlier node:
parents[0] = -1, 0 <= parents[i] < i. Flattened in node order, the tree is ONE chunk of the varlen path
(notebook 05), written to the cache like any chunk, but the causal mask is replaced: node i reads the
context before the tree and its own ancestors (itself included), never a sibling branch. Its position (for
RoPE) is that of the last verified token plus its depth, so every branch sees exactly what it would see if
it were verified alone as a chain. Example, parents [-1, 0, 0, 1, 2] (two branches 0-1-3 and 0-2-4):

    key ->   ctx  0 1 2 3 4          depth
    node 0    #   #                    0
    node 1    #   # #                  1
    node 2    #   #   #                1
    node 3    #   # #   #              2
    node 4    #   #   #   #            2

vLLM V1 verifies such drafts with its tree attention backend (`vllm/v1/attention/backends/tree_attn.py`
at 00c457b: the tree comes from `speculative_config.speculative_token_tree`, `_prepare_tree_attn_bias` turns
it into a bias, 0 on the root, the diagonal and each node's ancestors, -inf elsewhere). The course's check
is the definition: each node's logits equal those of verifying its branch alone, in float64
(tests/engine/test_tree_verification.py).
"""
from __future__ import annotations

import torch

from .kv_cache import gather_kv
from .paged_attention import attend_masked
from .validation import check_shape


def check_parents(parents: list[int]) -> None:
    if not parents or parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents) if i):
        raise ValueError(f"parents: expected parents[0] == -1 and 0 <= parents[i] < i for i > 0, "
                         f"got {parents}")


def tree_depths(parents: list[int]) -> list[int]:
    """Depth of each node: 0 for node 0, its parent's + 1 for the others."""
    check_parents(parents)
    depths = [0]
    for p in parents[1:]:
        depths.append(depths[p] + 1)
    return depths


def tree_branches(parents: list[int]) -> list[list[int]]:
    """The path from node 0 to each node, node 0 first: branch[i][-1] == i."""
    check_parents(parents)
    paths = [[0]]
    for i, p in enumerate(parents[1:], start=1):
        paths.append([*paths[p], i])
    return paths


def tree_attention_mask(parents: list[int], num_prefix_tokens: int = 0) -> torch.Tensor:
    """The chunk's mask [P + N, P + N] bool, P = num_prefix_tokens causal tokens before the tree's N nodes:
    a prefix token reads the prefix tokens up to itself; a node reads every prefix token and its branch."""
    P, N = num_prefix_tokens, len(parents)
    mask = torch.zeros(P + N, P + N, dtype=torch.bool)                             # [P + N, P + N]
    mask[:P, :P] = torch.ones(P, P, dtype=torch.bool).tril()
    mask[P:, :P] = True
    for i, branch in enumerate(tree_branches(parents)):
        mask[P + i, [P + j for j in branch]] = True
    return mask


def paged_tree_attention(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale: float, *,
                         chunk_mask: torch.Tensor) -> torch.Tensor:
    """paged_attention_varlen's signature for ONE sequence whose chunk of q_len tokens (the LAST q_len of its
    seq_lens[0] tokens, all in the cache) reads the tokens before it freely and its own tokens through
    `chunk_mask` [q_len, q_len] instead of causally: q [q_len, H, D] -> out [q_len, H, D]."""
    check_shape("block_tables", block_tables, (1, None), "[1, M]: one sequence")
    t, n = q.shape[0], int(seq_lens[0])
    check_shape("chunk_mask", chunk_mask, (t, t), "[q_len, q_len]")
    if cu_seqlens_q.tolist() != [0, t] or t > n:
        raise ValueError(f"cu_seqlens_q: expected [0, {t}] with q_len <= seq_lens[0] = {n}, "
                         f"got {cu_seqlens_q.tolist()}")
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    k = gather_kv(k_cache, block_tables[0], n).to(cdt)                             # [n, H_kv, D]
    v = gather_kv(v_cache, block_tables[0], n).to(cdt)                             # [n, H_kv, D]
    before = torch.ones(t, n - t, dtype=torch.bool, device=q.device)               # [q_len, n - q_len]
    allowed = torch.cat([before, chunk_mask.to(q.device)], dim=1)                  # [q_len, n]
    return attend_masked(q.to(cdt), k, v, scale, allowed).to(q.dtype)              # [q_len, H, D]
