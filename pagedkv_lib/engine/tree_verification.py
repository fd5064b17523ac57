"""Verify a draft tree with the engine's model in one forward: the tree chunk under its tree mask.

`tree_logits` runs the prompt (all but its last token) and the tree (node 0 = the prompt's last token) as
one chunk through the paged path: store_kvcache by slot_mapping into a block table, then attention with
`core.tree_attention.paged_tree_attention` in place of the causal varlen kernel, positions = the last
token's position + each node's depth. `branch_logits` is the independent reference: the dense no-cache
model on the prompt and ONE branch, as if that branch alone were the draft.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from pagedkv_lib.core.kv_cache import allocate_kv_cache
from pagedkv_lib.core.model_inputs import ModelInputs, pad_block_tables
from pagedkv_lib.core.slot_mapping import compute_slot_mapping
from pagedkv_lib.core.tree_attention import (
    paged_tree_attention,
    tree_attention_mask,
    tree_branches,
    tree_depths,
)

from .config import ModelConfig
from .kernel_choice import REFERENCE
from .model import Qwen3ForCausalLM


@torch.inference_mode()
def tree_logits(config: ModelConfig, prompt: list[int], tree_token_ids: list[int], parents: list[int],
                block_size: int = 4) -> torch.Tensor:
    """Logits [N, V] (the model's dtype) at the tree's N nodes; tree_token_ids[0] must be prompt[-1]."""
    if not prompt or tree_token_ids[:1] != prompt[-1:] or len(tree_token_ids) != len(parents):
        raise ValueError(f"tree_token_ids: expected {len(parents)} tokens (one per parent) starting with "
                         f"the prompt's last token {prompt[-1:]}, got {tree_token_ids}")
    P, N = len(prompt) - 1, len(parents)
    mask = tree_attention_mask(parents, P)                                        # [P + N, P + N]
    kernels = replace(REFERENCE, name="tree", varlen=partial(paged_tree_attention, chunk_mask=mask))
    model = Qwen3ForCausalLM(config, kernels)
    num_blocks = -(-(P + N) // block_size)
    block_table = list(reversed(range(num_blocks)))                # any order: the table says where
    kv_cache = allocate_kv_cache(config.num_hidden_layers, num_blocks, block_size,
                                 config.num_key_value_heads, config.head_dim, config.dtype, "cpu",
                                 fill=float("nan"))                              # [2, L, M, S, H_kv, D]
    positions = list(range(P)) + [P + d for d in tree_depths(parents)]
    slot_mapping = compute_slot_mapping(block_table, 0, P + N, block_size)
    cu_seqlens = torch.tensor([0, P + N], dtype=torch.int32)                      # [2]
    inputs = ModelInputs(is_prefill=True,
                         input_ids=torch.tensor(prompt[:-1] + list(tree_token_ids)),           # [P + N]
                         positions=torch.tensor(positions),                                     # [P + N]
                         slot_mapping=torch.tensor(slot_mapping, dtype=torch.int32),            # [P + N]
                         cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens, max_seqlen_q=P + N,
                         max_seqlen_k=P + N, context_lens=None,
                         block_tables=pad_block_tables([block_table]))                          # [1, M]
    hidden = model(inputs.input_ids, inputs.positions, inputs, kv_cache)         # [P + N, E]
    return model.compute_logits(hidden[P:], None)                                # [N, V]


@torch.inference_mode()
def branch_logits(config: ModelConfig, prompt: list[int], tree_token_ids: list[int],
                  parents: list[int]) -> torch.Tensor:
    """The reference: for each node, the dense model on prompt + its branch's drafts, the last row's
    logits -> [N, V]."""
    model = Qwen3ForCausalLM(config)
    rows = []
    for branch in tree_branches(parents):
        ids = prompt + [tree_token_ids[j] for j in branch[1:]]
        hidden = model(torch.tensor(ids), torch.arange(len(ids)))                 # [len, E]
        rows.append(model.compute_logits(hidden[-1:], None))                     # [1, V]
    return torch.cat(rows)                                                       # [N, V]
