"""Sequence bookkeeping: blocks, the last block's fill, and appends."""
import pytest

from pagedkv_lib import Sequence


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_last_block_num_tokens_is_never_zero(block_size):
    seq = Sequence([0], block_size)
    for n in range(1, 3 * block_size + 2):
        assert seq.num_tokens == n and seq.num_blocks == -(-n // block_size)
        assert 1 <= seq.last_block_num_tokens <= block_size
        assert (seq.num_blocks - 1) * block_size + seq.last_block_num_tokens == n
        seq.append_token(n)


def test_blocks_prompt_and_completion():
    seq = Sequence([1, 2, 3, 4, 5], 2)
    seq.append_token(6)
    assert seq.block(0) == [1, 2] and seq.block(2) == [5, 6]
    assert seq.prompt_token_ids == [1, 2, 3, 4, 5] and seq.completion_token_ids == [6]
    assert seq.num_completion_tokens == 1 and seq.last_token == 6 and len(seq) == 6
    with pytest.raises(IndexError):
        seq.block(3)
