"""Speculative decoding's rollback (core/rollback.py) and the lookahead slots of BlockManager.may_append.

The brute-force reference: the same tokens decoded one at a time, with no speculation, on a second manager.
After a verification and `truncate`, both must agree on every count the contract makes observable: the free
blocks, the table's length, the multiset of reference counts, the chained hashes of the table's blocks and
the prefix cache's keys (hashes only on FULL blocks of VERIFIED tokens).
"""
import random

import pytest

from pagedkv_lib.core.block_manager import BlockManager, num_new_blocks
from pagedkv_lib.core.rollback import truncate
from pagedkv_lib.core.sequence import Sequence


def decode_plainly(bm: BlockManager, seq: Sequence, tokens: list[int]) -> None:
    """The reference: one decode step per token, as the engine without speculation: room for the last
    token (may_append), then the step's sampled token is appended."""
    for t in tokens:
        assert bm.can_append(seq)
        bm.may_append(seq)
        seq.append_token(t)


def speculate(bm: BlockManager, seq: Sequence, drafts: list[int], num_accepted: int, bonus: int) -> None:
    """One verification step: lookahead slots for the drafts, accept a prefix and the bonus, roll back."""
    assert bm.can_append(seq, len(drafts))
    bm.may_append(seq, len(drafts))
    assert len(seq.block_table) == -(-(len(seq) + len(drafts)) // bm.block_size)
    for t in [*drafts[:num_accepted], bonus]:
        seq.append_token(t)
    truncate(bm, seq, len(seq) - 1)


def observable(bm: BlockManager, seqs: list[Sequence]) -> dict:
    return {"num_free": bm.num_free_blocks,
            "tables": [len(s.block_table) for s in seqs],
            "refs": sorted(bm.pool.ref_counts),
            "hashes": [[bm.blocks[b].hash for b in s.block_table] for s in seqs],
            "keys": set(bm.hash_to_block_id)}


@pytest.mark.parametrize("seed", range(40))
def test_rollback_matches_plain_decoding_of_the_accepted_tokens(seed):
    rng = random.Random(seed)
    bs = rng.choice([1, 2, 3, 4, 8])
    system = [rng.randrange(50) for _ in range(rng.randint(0, 3 * bs))]
    prompts = [system + [rng.randrange(50) for _ in range(rng.randint(1, 2 * bs))] for _ in range(2)]
    managers = [BlockManager(64, bs), BlockManager(64, bs)]
    runs = [[Sequence(p, bs) for p in prompts] for _ in managers]
    for bm, seqs in zip(managers, runs, strict=True):
        for s in seqs:
            bm.allocate(s)
            s.append_token(7)                                      # the prefill's sampled token
    for _ in range(6):
        for i in range(2):
            k = rng.randint(0, 5)
            drafts = [rng.randrange(50) for _ in range(k)]
            a, bonus = rng.randint(0, k), rng.randrange(50)
            speculate(managers[0], runs[0][i], drafts, a, bonus)
            decode_plainly(managers[1], runs[1][i], [*drafts[:a], bonus])
            assert observable(managers[0], runs[0]) == observable(managers[1], runs[1])
    for bm, seqs in zip(managers, runs, strict=True):
        for s in seqs:
            bm.deallocate(s)
        assert bm.num_free_blocks == 64


def test_rejected_blocks_are_freed_last_first_to_the_end_and_never_hashed():
    bm = BlockManager(8, 2)
    seq = Sequence([1, 2, 3], 2)
    bm.allocate(seq)
    seq.append_token(4)                                            # 4 tokens, the 4th not yet written
    bm.may_append(seq, 5)                                          # positions 3..8: blocks 2, 3, 4 added
    assert seq.block_table == [0, 1, 2, 3, 4]
    assert [bm.blocks[b].hash != -1 for b in seq.block_table] == [True, True, False, False, False]
    seq.append_token(9)                                            # one draft accepted, then the bonus
    seq.append_token(8)
    truncate(bm, seq, 5)                                           # positions 0..4 verified: 3 blocks
    assert seq.block_table == [0, 1, 2]
    assert list(bm.free_block_ids) == [5, 6, 7, 4, 3]
    assert bm.blocks[2].hash == -1                                 # partial: [9] of block 2, no hash
    assert all(bm.blocks[b].hash == -1 for b in (3, 4)) and len(bm.hash_to_block_id) == 2


def test_a_block_filled_by_accepted_drafts_is_hashed_and_can_be_hit():
    bm = BlockManager(8, 4)
    seq = Sequence([1], 4)
    bm.allocate(seq)
    seq.append_token(2)
    bm.may_append(seq, 4)                                          # positions 1..5: drafts 3, 4, 5, 9
    assert [bm.blocks[b].hash for b in seq.block_table] == [-1, -1]
    for t in (3, 4, 5, 6):                                         # three drafts accepted, bonus 6
        seq.append_token(t)
    truncate(bm, seq, 5)                                           # positions 0..4: block 0 full
    first, second = (bm.blocks[b] for b in seq.block_table)
    assert first.token_ids == [1, 2, 3, 4] and first.hash == BlockManager.compute_hash([1, 2, 3, 4])
    assert second.hash == -1                                       # [5] verified, the bonus not written
    other = Sequence([1, 2, 3, 4, 0], 4)
    bm.allocate(other)
    assert other.num_cached_tokens == 4 and other.block_table[0] == seq.block_table[0]


def test_shared_prefix_blocks_keep_their_references():
    bm = BlockManager(10, 2)
    a, b = Sequence([1, 2, 3, 4, 5], 2), Sequence([1, 2, 3, 4, 6], 2)
    bm.allocate(a)
    bm.allocate(b)
    assert a.block_table[:2] == b.block_table[:2]
    a.append_token(9)
    bm.may_append(a, 4)
    a.append_token(0)                                              # nothing accepted: only the bonus
    truncate(bm, a, 6)
    assert [bm.blocks[x].ref_count for x in a.block_table] == [2, 2, 1]


@pytest.mark.parametrize("num_computed_tokens", [0, 3, 8, True, 2.0])
def test_truncate_refuses_a_length_outside_the_verified_and_the_allocated_tokens(num_computed_tokens):
    bm = BlockManager(8, 2)
    seq = Sequence([1, 2, 3, 4, 5], 2)
    bm.allocate(seq)                                               # 2 hashed blocks, 3 blocks, 5 tokens
    seq.append_token(6)
    before = (list(seq.block_table), list(bm.free_block_ids), dict(bm.hash_to_block_id))
    with pytest.raises(ValueError, match="num_computed_tokens"):
        truncate(bm, seq, num_computed_tokens)
    assert (list(seq.block_table), list(bm.free_block_ids), dict(bm.hash_to_block_id)) == before


def test_lookahead_counts_the_blocks_the_drafts_start():
    bm = BlockManager(4, 4)
    seq = Sequence([1, 2, 3, 4], 4)
    bm.allocate(seq)
    seq.append_token(5)                                            # position 4 starts block 1
    assert [num_new_blocks(len(seq), 4, k) for k in (0, 3, 4, 7, 8)] == [1, 1, 2, 2, 3]
    assert bm.can_append(seq, 8) and not bm.can_append(seq, 12)
    with pytest.raises(ValueError, match="num_lookahead_tokens"):
        bm.can_append(seq, -1)


def test_the_radix_manager_refuses_lookahead_slots():
    from pagedkv_lib.core.radix_block_manager import RadixBlockManager

    rbm = RadixBlockManager(4, 2)
    seq = Sequence([1, 2, 3], 2)
    rbm.allocate(seq)
    seq.append_token(4)
    assert rbm.can_append(seq, 0)
    with pytest.raises(ValueError, match="num_lookahead_tokens"):
        rbm.can_append(seq, 2)
    with pytest.raises(ValueError, match="num_lookahead_tokens"):
        rbm.may_append(seq, 2)
