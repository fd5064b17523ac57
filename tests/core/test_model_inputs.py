"""prepare_prefill / prepare_decode on the walk-the-shapes example of notebook 03 and on prefix hits."""
import pytest
import torch

from pagedkv_lib import BlockPool, Sequence, prepare_decode, prepare_prefill, slot_mapping_for


def walk_the_shapes():
    """Block size 4, 8 physical blocks; A holds 6 tokens in [7, 2], B 3 tokens in [5]."""
    pool = BlockPool(8)
    pool.allocate(8)
    pool.free([0, 1, 3, 4, 6])                        # blocks 7, 2, 5 stay in use
    a, b = Sequence([11, 12, 13, 14, 15, 16], 4, seq_id=0), Sequence([21, 22, 23], 4, seq_id=1)
    a.block_table, b.block_table = [7, 2], [5]
    return pool, a, b


def decode_step(pool, seqs, next_tokens):
    """The engine's order: the sampled token is appended, then a block is added if it opens one."""
    new_block = []
    for seq, tok in zip(seqs, next_tokens):
        seq.append_token(tok)
        needs = (len(seq) - 1) % seq.block_size == 0
        if needs:
            seq.block_table += pool.allocate(1)
        new_block.append(needs)
    return prepare_decode(seqs), new_block


def test_walk_the_shapes_prefill_then_two_decode_steps():
    pool, a, b = walk_the_shapes()
    pre = prepare_prefill([a, b])
    assert pre.slot_mapping.tolist() == [28, 29, 30, 31, 8, 9, 20, 21, 22]
    assert pre.cu_seqlens_q.tolist() == [0, 6, 9] and pre.cu_seqlens_k.tolist() == [0, 6, 9]
    assert pre.positions.tolist() == [0, 1, 2, 3, 4, 5, 0, 1, 2]
    assert (pre.max_seqlen_q, pre.max_seqlen_k, pre.block_tables) == (6, 6, None)

    d1, new1 = decode_step(pool, [a, b], [17, 24])
    assert d1.slot_mapping.tolist() == [10, 23] and d1.context_lens.tolist() == [7, 4]
    assert d1.positions.tolist() == [6, 3] and d1.input_ids.tolist() == [17, 24] and new1 == [False, False]
    assert d1.block_tables.tolist() == [[7, 2], [5, -1]]

    d2, new2 = decode_step(pool, [a, b], [18, 25])
    assert new2 == [False, True] and b.block_table == [5, 0]
    assert d2.slot_mapping.tolist() == [11, 0] and d2.context_lens.tolist() == [8, 5]
    assert d2.block_tables.tolist() == [[7, 2], [5, 0]]


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_decode_slot_is_the_slot_of_the_last_position(block_size):
    for n in (1, block_size - 1 or 1, block_size, block_size + 1, 2 * block_size):
        seq = Sequence(list(range(n)), block_size)
        seq.block_table = list(range(100, 100 + seq.num_blocks))
        got = prepare_decode([seq]).slot_mapping.tolist()
        assert got == slot_mapping_for(seq.block_table, [n - 1], block_size)


def test_prefill_after_a_prefix_hit_passes_block_tables_and_only_new_slots():
    seq = Sequence(list(range(10)), 4)
    seq.block_table, seq.num_cached_tokens = [3, 1, 6], 8
    other = Sequence([1, 2], 4)
    other.block_table = [0]
    inp = prepare_prefill([seq, other])
    assert inp.input_ids.tolist() == [8, 9, 1, 2] and inp.positions.tolist() == [8, 9, 0, 1]
    assert inp.slot_mapping.tolist() == [24, 25, 0, 1]
    assert inp.cu_seqlens_q.tolist() == [0, 2, 4] and inp.cu_seqlens_k.tolist() == [0, 10, 12]
    assert inp.block_tables.tolist() == [[3, 1, 6], [0, -1, -1]] and inp.block_tables.dtype == torch.int32
    assert (inp.max_seqlen_q, inp.max_seqlen_k) == (2, 10)


def test_chunked_prefill_covers_only_the_scheduled_chunk():
    seq = Sequence(list(range(20)), 4)
    seq.block_table, seq.num_cached_tokens, seq.num_scheduled_tokens = [9, 8, 7, 6, 5], 12, 8
    inp = prepare_prefill([seq])
    assert inp.positions.tolist() == list(range(12, 20))
    assert inp.slot_mapping.tolist() == slot_mapping_for(seq.block_table, list(range(12, 20)), 4)


def test_errors_name_the_sequence_and_the_mismatch():
    seq = Sequence([1, 2, 3, 4, 5], 4)
    seq.block_table = [0]
    with pytest.raises(ValueError, match="need 2 blocks"):
        prepare_decode([seq])
    seq.num_cached_tokens = 5
    with pytest.raises(ValueError, match="nothing to prefill"):
        prepare_prefill([seq])
    with pytest.raises(ValueError, match="at least one prompt token"):
        Sequence([], 4)


def test_prepare_verify_puts_the_last_token_and_its_drafts_at_the_end_of_the_context():
    from pagedkv_lib.core.model_inputs import prepare_verify

    a, b = Sequence([1, 2, 3, 4, 5], 4), Sequence([7, 8], 4)
    a.block_table, b.block_table = [6, 2], [3]                # a: 5 tokens + 3 drafts need 2 blocks
    inputs = prepare_verify([a, b], [[10, 11, 12], []])
    assert inputs.is_prefill and inputs.input_ids.tolist() == [5, 10, 11, 12, 8]
    assert inputs.positions.tolist() == [4, 5, 6, 7, 1]
    assert inputs.slot_mapping.tolist() == [8, 9, 10, 11, 13]
    assert inputs.cu_seqlens_q.tolist() == [0, 4, 5] and inputs.cu_seqlens_k.tolist() == [0, 8, 10]
    assert inputs.block_tables.tolist() == [[6, 2], [3, -1]] and inputs.max_seqlen_q == 4
    with pytest.raises(ValueError, match="draft_token_ids"):
        prepare_verify([a, b], [[10]])


def test_a_prefill_without_a_prefix_hit_gets_block_tables_only_when_asked():
    """nano-vllm's rule (None: attend to this step's k, v) by default; the engine's attention always reads
    the cache and asks for them (always_block_tables=True, ModelRunner.prepare)."""
    seqs = [Sequence(list(range(6)), 4, seq_id=0), Sequence(list(range(3)), 4, seq_id=1)]
    seqs[0].block_table = [3, 1]
    seqs[1].block_table = [2]
    assert prepare_prefill(seqs).block_tables is None
    assert prepare_prefill(seqs, always_block_tables=True).block_tables.tolist() == [[3, 1], [2, -1]]
