"""pagedkv_lib.studies.waste: each policy's waste in the paper's four categories, on workloads small enough to
count by hand; the closed forms against a step-by-step sum; notebook 1's figures in the final view."""
import numpy as np
import pytest

from pagedkv_lib.studies.policies import Paged, Reserve, make_policy
from pagedkv_lib.studies.waste import final_waste, lifetime_waste, waste_at, waste_breakdown, waste_shares
from pagedkv_lib.studies.workload import (
    Request,
    make_trace,
    make_workload,
    utilization_paged,
    utilization_reserved,
)

P, O = np.array([3, 6]), np.array([5, 2])  # two requests: 3 + 5 and 6 + 2 tokens, both end at 8


def totals(w):
    return [int(w.token.sum()), int(w.reserved.sum()), int(w.internal.sum()), int(w.external.sum())]


def test_figure_3_two_requests_at_their_first_generated_token():
    """Fig. 3 (p. 4): A has a 7-token prompt, 3 outputs, max 2048: 8 token states, 2 reserved, 2038 never
    used; B has a 3-token prompt, 2 outputs, max 512: 4, 1 and 507."""
    a = waste_at([7], [3], 1, Reserve("max", 2048))
    b = waste_at([3], [2], 1, Reserve("max", 512))
    assert totals(a) == [8, 2, 2038, 0] and totals(b) == [4, 1, 507, 0]


@pytest.mark.parametrize("policy, expected", [
    # token: 4+5+6+7+8 and 7+8; reserved: 4+3+2+1+0 and 1+0 (every Orca variant: only the lengths matter)
    (Reserve("max", 16), [45, 11, 5 * 8 + 2 * 8, 0]),          # chunks of 16, 8 never used each
    (Reserve("pow2", 16), [45, 11, 5 * 3, 5 * 5]),             # 3 + 8 = 11 -> chunk 16; 6 + 2 = 8 -> 8
    (Reserve("oracle", 16), [45, 11, 0, 0]),                   # 8 and 8: powers of two already
    (Paged(4), [45, 3 + 2 + 1 + 1, 0, 0]),                     # blocks of 4: empty 0,3,2,1,0 and 1,0
])
def test_lifetime_waste_by_hand(policy, expected):
    w = lifetime_waste(P, O, policy)
    assert totals(w) == expected
    assert w.allocated.sum() == sum(expected)


def test_paged_splits_the_last_block_into_reserved_and_internal():
    """3 + 4 tokens, blocks of 4: lengths 4..7 hold 4, 8, 8, 8 slots; of the empty 3, 2, 1 at lengths 5, 6,
    7, slot 8 is never filled (internal, 3 times), slots 6 and 7 are filled later (reserved, 2 + 1)."""
    assert totals(lifetime_waste([3], [4], Paged(4))) == [22, 3, 3, 0]
    assert totals(final_waste([3], [4], Paged(4))) == [7, 0, 1, 0]


@pytest.mark.parametrize("policy, expected", [
    (Reserve("max", 16), [16, 0, 16, 0]), (Reserve("pow2", 16), [16, 0, 3, 5]),
    (Reserve("oracle", 16), [16, 0, 0, 0]), (Paged(4), [16, 0, 0, 0]), (Paged(3), [16, 0, 2, 0]),
    (Reserve("max", 12), [16, 0, 8, 8]), (Reserve("max", 12, buddy=False), [16, 0, 8, 0]),
])
def test_final_waste_by_hand(policy, expected):
    assert totals(final_waste(P, O, policy)) == expected


@pytest.mark.parametrize("key", ["orca_max", "orca_pow2", "orca_oracle", "paged"])
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_lifetime_closed_forms_equal_summing_every_snapshot(key, block_size):
    rng = np.random.default_rng(block_size)
    p, o = rng.integers(1, 40, 30), rng.integers(1, 40, 30)
    policy = make_policy(key, max_len=100, block_size=block_size)
    w = lifetime_waste(p, o, policy)
    for i in range(len(p)):
        steps = [waste_at(p[i:i + 1], o[i:i + 1], k, policy) for k in range(1, o[i] + 1)]
        assert [w.token[i], w.reserved[i], w.internal[i], w.external[i]] == \
            [sum(int(getattr(s, c)[0]) for s in steps) for c in ("token", "reserved", "internal", "external")]


def test_paged_snapshot_matches_a_per_token_walk():
    """Per token: a slot of the held blocks is a token, reserved if a later token of the request lands in
    it, internal otherwise."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        p, o, b = int(rng.integers(1, 30)), int(rng.integers(1, 30)), int(rng.integers(1, 9))
        k = int(rng.integers(1, o + 1))
        held = -(-(p + k) // b) * b
        walk = [sum(s < p + k for s in range(held)), sum(p + k <= s < p + o for s in range(held)),
                sum(s >= p + o for s in range(held)), 0]
        assert totals(waste_at([p], [o], k, Paged(b))) == walk


def test_final_view_keeps_the_notebook_1_figures():
    requests = make_workload()
    assert round(100 * waste_shares(requests, Reserve("max", 4096), "final")["token"], 1) == 46.2
    got = [round(100 * waste_shares(requests, Paged(b), "final")["token"], 1) for b in (1, 16, 64, 256)]
    assert got == [100.0, 99.6, 98.3, 93.2]


@pytest.mark.parametrize("block_size", [1, 16, 129, 256])
def test_waste_breakdown_of_notebook_1_is_internal_fragmentation_only(block_size):
    """Each request at its last token: nothing is reserved any more (every token has come), so what a
    max_len reservation leaves empty and the tail of the last block are both internal fragmentation."""
    requests = make_workload(300, seed=3)
    waste = waste_breakdown(requests, block_size, 4096)
    reserve, paged = waste["reserve"], waste["paged"]
    total = np.array([r.total_len for r in requests])
    for scheme in (reserve, paged):
        assert np.array_equal(scheme.token, total)
        assert (scheme.reserved == 0).all() and (scheme.external == 0).all() and (scheme.internal >= 0).all()
    assert (reserve.allocated == 4096).all() and np.array_equal(reserve.internal, 4096 - total)
    assert (paged.allocated % block_size == 0).all() and (paged.internal < block_size).all()
    for scheme, expected in ((reserve, utilization_reserved(requests, 4096)),
                             (paged, utilization_paged(requests, block_size))):
        assert scheme.token.sum() / scheme.allocated.sum() == pytest.approx(expected)   # token / allocated


def test_shares_sum_to_one():
    requests = make_trace("sharegpt", 500, 1)
    for key in ("orca_max", "orca_pow2", "orca_oracle", "paged"):
        for view in ("lifetime", "final"):
            assert sum(waste_shares(requests, make_policy(key), view).values()) == pytest.approx(1.0)


@pytest.mark.parametrize("call, error, message", [
    (lambda: waste_at([3], [2], 3, Paged(4)), ValueError, "step: expected 1 <= step"),
    (lambda: waste_shares([Request(1, 1)], Paged(4), "mean"), ValueError, "view: expected"),
    (lambda: waste_shares([], Paged(4)), ValueError, "at least one"),
    (lambda: waste_breakdown(make_workload(5), True, 4096), ValueError, "block_size"),
    (lambda: waste_breakdown(make_workload(5), 16, 100), ValueError, "max_len: expected >="),
    (lambda: lifetime_waste([1], [1], "paged"), TypeError, "expected a Reserve or a Paged"),
])
def test_bad_inputs_say_expected_and_given(call, error, message):
    with pytest.raises(error, match=message):
        call()
