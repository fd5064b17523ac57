"""The judge's structure stays simple: one grading call in the parent goes through few of its files (the
machinery around the cases, which are the content). Its size in lines is not bounded: code is written plainly,
never compressed to meet a count."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

JUDGE = Path(__file__).resolve().parents[2] / "pagedkv_lib" / "judge"
MAX_FILES = 12   # 10 until the sandbox's file tree (harness.py: which library files a child gets), 11
                 # until the speed verdict (speed.py: the report and the status file read every card's bar)
TRACE = """
import json, sys
from pathlib import Path

import pytest
judge, seen = Path(sys.argv[1]), set()

def note(frame, event, arg):
    path = Path(frame.f_code.co_filename)
    if event == "call" and path.parent == judge:                # not the cases: they are the content
        seen.add(path.name)

sys.setprofile(note)
from pagedkv_lib.judge import cli
code = cli.main(sys.argv[2:])
sys.setprofile(None)
print(json.dumps([code, sorted(seen)]))
"""


@pytest.mark.slow
def test_a_grading_call_in_the_parent_passes_through_at_most_12_judge_files(tmp_path):
    solution = JUDGE.parents[1] / "solutions" / "122_slot_mapping.py"
    done = subprocess.run([sys.executable, "-c", TRACE, str(JUDGE), "122", str(solution)], text=True,
                          capture_output=True, timeout=300, cwd=JUDGE.parents[1])
    code, files = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr[-2000:]
    assert len(files) <= MAX_FILES, files
