"""The merge of partial softmaxes (pagedkv_lib.core.partial_softmax): any cut of a row, merged in any order
and any tree shape, gives the softmax of the whole row (float64, against torch.softmax); empty parts and
parts of -inf scores are the identity; the merge commutes bit for bit."""
import random

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedkv_lib.core.partial_softmax import (
    from_lse,
    lse,
    merge_partials,
    merge_tree,
    output,
    partial_of,
    random_tree,
)

NEG_INF = float("-inf")


def row(seed: int, n: int, heads: int, D: int, masked: float):
    """Scores [heads, n] (some -inf, at least one finite per head, large enough to overflow a plain exp)
    and values [n, D], in float64."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(heads, n, generator=g, dtype=torch.float64) * 40        # exp(40 * 3) overflows fp32
    scores[torch.rand(heads, n, generator=g) < masked] = NEG_INF
    scores[torch.arange(heads), torch.randint(0, n, (heads,), generator=g)] = 1.0   # one finite per head
    return scores, torch.randn(n, D, generator=g, dtype=torch.float64)


def cut(scores, values, points):
    """The parts between sorted cut points (repeated points: empty parts)."""
    bounds = [0, *sorted(points), scores.shape[-1]]
    return [partial_of(scores[:, a:b], values[a:b]) for a, b in zip(bounds, bounds[1:])]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 40), heads=st.integers(1, 3), D=st.integers(1, 5),
       masked=st.sampled_from([0.0, 0.3, 0.9]), data=st.data())
def test_any_cut_merged_in_any_order_and_tree_is_the_softmax_of_the_row(seed, n, heads, D, masked, data):
    scores, values = row(seed, n, heads, D, masked)
    points = data.draw(st.lists(st.integers(0, n), max_size=8), label="cut points")
    parts = cut(scores, values, points)
    tree = random_tree(list(range(len(parts))), random.Random(data.draw(st.integers(0, 2**31 - 1))))
    merged = merge_tree(parts, tree)
    expected = torch.softmax(scores, dim=-1) @ values                               # [heads, D]
    torch.testing.assert_close(output(merged), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse(merged), torch.logsumexp(scores, dim=-1), rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(0, 12), masked=st.sampled_from([0.0, 0.5, 1.0]))
def test_the_merge_commutes_bit_for_bit(seed, n, masked):
    g = torch.Generator().manual_seed(seed)
    parts = []
    for _ in range(2):
        s = torch.randn(2, n, generator=g, dtype=torch.float32) * 10
        s[torch.rand(2, n, generator=g) < masked] = NEG_INF
        parts.append(partial_of(s, torch.randn(n, 4, generator=g)))
    ab, ba = merge_partials(*parts), merge_partials(*reversed(parts))
    for x, y in ((ab.m, ba.m), (ab.l, ba.l), (ab.acc, ba.acc)):
        assert torch.equal(x, y)


def test_empty_parts_and_all_minus_inf_parts_are_the_identity_and_never_nan():
    scores, values = row(0, 10, 2, 3, 0.3)
    whole = partial_of(scores, values)
    empty = partial_of(scores[:, :0], values[:0])                                   # no token at all
    masked = partial_of(torch.full((2, 4), NEG_INF, dtype=torch.float64), values[:4])   # every score -inf
    for nothing in (empty, masked):
        assert nothing.m.eq(NEG_INF).all() and nothing.l.eq(0).all() and nothing.acc.eq(0).all()
        for merged in (merge_partials(whole, nothing), merge_partials(nothing, whole)):
            assert torch.equal(merged.acc, whole.acc) and torch.equal(merged.l, whole.l)
    both = merge_tree([empty, masked, empty], ((0, 1), 2))                         # an all-empty row
    assert not any(t.isnan().any() for t in (both.m, both.l, both.acc))
    assert output(both).eq(0).all() and lse(both).eq(NEG_INF).all()


def test_the_kernels_state_o_and_lse_merges_like_the_running_state():
    scores, values = row(1, 30, 2, 4, 0.2)
    parts = cut(scores, values, [7, 7, 19])                                        # one empty part
    stored = [from_lse(output(p), lse(p)) for p in parts]                          # what a kernel writes
    merged = merge_tree(stored, ((3, 1), (0, 2)))
    torch.testing.assert_close(output(merged), torch.softmax(scores, -1) @ values, rtol=1e-12, atol=1e-12)


def test_random_tree_uses_every_leaf_once():
    tree = random_tree(list(range(7)), random.Random(3))
    leaves = []

    def walk(node):
        if isinstance(node, int):
            leaves.append(node)
        else:
            walk(node[0])
            walk(node[1])

    walk(tree)
    assert sorted(leaves) == list(range(7))
