"""Exercise 136's failure report replays: the ops up to the failing step come as a script that runs as it
is below the learner's RadixCache, and the tree's rows say what each number is."""
from __future__ import annotations

import runpy

import pytest
from plants import plant_file

from pagedkv_lib.judge.grading import grade


@pytest.mark.slow
def test_136_a_failure_shows_a_script_that_replays_below_the_submission_and_labels_the_tree(tmp_path):
    paths = [plant_file(136, name, tmp_path) for name in ("match_does_not_split", "split_without_the_locks")]
    no_split, no_locks = grade(136, paths, isolation="fork")
    outcome = no_split.first_failure.outcome
    assert outcome.details[0].startswith("# the script so far"), outcome.details
    script = [line for line in outcome.details if not line.startswith(("expected ", "got "))]
    assert len(script) >= 4 and all(not line.lstrip()[:1].isdigit() for line in script)   # not numbered
    scope = runpy.run_path(str(paths[0]))                            # the submission's RadixCache
    exec("\n".join(script), scope)                                   # noqa: S102  (the judge's own lines)
    assert "cache" in scope and "pool" in scope
    message = no_locks.first_failure.outcome.message
    assert "tree[" in message and "['lock_ref'] expected" in message, message
