"""The speculation study: the engine's greedy tokens are unchanged, and the replay counts what greedy
verification of known answers accepts."""
import pytest

from pagedkv_lib.engine.ngram_proposer import NgramProposer
from pagedkv_lib.studies.speculation import (
    edit_requests,
    engine_speculation,
    format_table,
    replay_speculation,
)


def test_engine_rows_keep_the_greedy_tokens_and_count_sequence_steps():
    row = engine_speculation("system", k=3)
    assert row.same_outputs and row.num_drafted > 0
    assert row.seq_steps_plain - row.seq_steps_speculative == row.num_accepted
    assert "system" in format_table([row])


def test_replay_of_an_unedited_copy_accepts_every_draft_after_the_first_match():
    (prompt, answer), = edit_requests(num_requests=1, length=40, num_edits=0)
    row = replay_speculation([(prompt, answer)], k=4, proposer=NgramProposer(4, 1, 1))
    assert row.num_accepted >= 0.9 * row.num_drafted > 0
    assert row.num_accepted + row.seq_steps_speculative == len(answer)
    assert row.tokens_per_step > 3


def test_replay_with_a_drafter_that_never_matches_gains_nothing():
    requests = [([1, 2, 3], [4, 5, 6])]
    row = replay_speculation(requests, k=4)
    assert (row.num_drafted, row.num_accepted, row.seq_steps_speculative) == (0, 0, 3)


def test_unknown_workload_is_refused():
    with pytest.raises(ValueError, match="workload"):
        engine_speculation("nope")
