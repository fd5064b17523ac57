"""A draft tree verified in one forward under its tree mask gives, at every node, the logits of verifying
that node's branch alone with the dense no-cache model (float64), and greedy acceptance over the tree picks
the branch plain greedy decoding follows."""
from __future__ import annotations

import random

import pytest
import torch

from pagedkv_lib.core.tree_attention import tree_attention_mask, tree_branches, tree_depths
from pagedkv_lib.engine import ModelConfig, greedy_reference
from pagedkv_lib.engine.model import Qwen3ForCausalLM
from pagedkv_lib.engine.rejection_sampler import accept_greedy, accept_tree_greedy
from pagedkv_lib.engine.tree_verification import branch_logits, tree_logits

CONFIG = ModelConfig(dtype=torch.float64, num_hidden_layers=2)
TREES = [[-1], [-1, 0, 1, 2], [-1, 0, 0, 1, 2], [-1, 0, 0, 0, 1, 1, 4, 2, 7]]


@pytest.mark.parametrize("parents", TREES)
@pytest.mark.parametrize("block_size", [1, 3, 4])
def test_tree_logits_equal_each_branch_verified_alone(parents, block_size):
    rng = random.Random(len(parents) * 10 + block_size)
    prompt = [rng.randrange(512) for _ in range(rng.randint(1, 9))]
    tokens = [prompt[-1]] + [rng.randrange(512) for _ in parents[1:]]
    got = tree_logits(CONFIG, prompt, tokens, parents, block_size)
    expected = branch_logits(CONFIG, prompt, tokens, parents)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_a_causal_mask_would_mix_branches():
    """The check can fail: with the plain causal mask the second branch reads the first one's drafts."""
    parents, prompt, tokens = [-1, 0, 0], [3, 4, 5], [5, 6, 7]
    mask = tree_attention_mask(parents, 2)
    assert mask[4].tolist() == [True, True, True, False, True]     # node 2 skips its sibling, node 1
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert not torch.equal(mask, causal)
    expected = branch_logits(CONFIG, prompt, tokens, parents)
    chain = tree_logits(CONFIG, prompt, tokens, [-1, 0, 1])        # node 2 placed under node 1
    assert (chain[2] - expected[2]).abs().max() > 1e-3


def test_tree_helpers():
    parents = [-1, 0, 0, 1, 2]
    assert tree_depths(parents) == [0, 1, 1, 2, 2]
    assert tree_branches(parents) == [[0], [0, 1], [0, 2], [0, 1, 3], [0, 2, 4]]
    with pytest.raises(ValueError, match="parents"):
        tree_depths([-1, 1])


def test_greedy_acceptance_over_a_tree_follows_greedy_decoding():
    model = Qwen3ForCausalLM(CONFIG)
    prompt = [11, 22, 33, 44]
    truth = greedy_reference(model, prompt, 4)
    # branch 1-3-5 is wrong after one token, branch 2-4-6 right for two, node 7 a wrong sibling of 6
    tokens = [prompt[-1], (truth[0] + 1) % 512, truth[0], 7, truth[1], 9, (truth[2] + 3) % 512, 8]
    parents = [-1, 0, 0, 1, 2, 3, 4, 4]
    targets = tree_logits(CONFIG, prompt, tokens, parents).argmax(dim=-1).tolist()
    assert accept_tree_greedy(parents, tokens, targets) == truth[:3]
    assert accept_tree_greedy([-1, 0, 1], [1, 5, 6], [5, 7, 8]) == accept_greedy([5, 6], [5, 7, 8]) == [5, 7]
