"""NgramProposer: the longest suffix n-gram wins, its earliest earlier occurrence, up to k tokens after it."""
import pytest

from pagedkv_lib.engine.ngram_proposer import NgramProposer


def test_longest_ngram_first_then_earliest_occurrence():
    p = NgramProposer(3, prompt_lookup_min=1, prompt_lookup_max=3)
    #            0  1  2  3  4  5  6  7  8  9
    tokens = [1, 2, 3, 9, 2, 3, 8, 5, 2, 3]
    assert p.propose(tokens) == [9, 2, 3]          # "2 3" first at 1, followed by 9 2 3
    assert p.propose([4, 1, 2, 7, 1, 2, 6, 4, 1, 2]) == [7, 1, 2]   # "4 1 2" beats the earlier "1 2"
    assert p.propose([5, 1, 2, 7, 4, 1, 2, 6, 4, 1, 2]) == [6, 4, 1]  # 3-gram "4 1 2" at 4


def test_no_match_no_draft_and_the_caps():
    p = NgramProposer(4, prompt_lookup_min=2, prompt_lookup_max=3)
    assert p.propose([1, 2, 3, 4, 5]) == []
    assert p.propose([1, 2, 3, 1, 2]) == [3, 1, 2]                 # only the tokens there are
    assert p.propose([1, 2, 3, 4, 5, 1, 2], max_num_tokens=2) == [3, 4]
    assert p.propose([1, 2, 3, 4, 5, 1, 2], max_num_tokens=0) == []
    assert NgramProposer(2).propose([7]) == []


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        NgramProposer(2, prompt_lookup_min=3, prompt_lookup_max=2)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        NgramProposer(0)
