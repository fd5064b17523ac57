"""The supervisor's deadline rules, driven by hand: a report already sent beats a deadline, and a memory hog
that lets go of its memory at a deadline (its MemoryError being reported) gets a moment to say so.

These races happen in real grading when a slowly growing allocation hits the memory cap just before its
second deadline (tests/test_judge_sandbox.py grades such a submission end to end); here the child's memory
and messages are set by the test, so each rule is checked without timing luck.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import time
from types import SimpleNamespace

import pytest

from pagedkv_lib.judge import deadlines
from pagedkv_lib.judge.deadlines import SETTLE_S, MemoryWatch, Phase
from pagedkv_lib.judge.outcome import MEMORY_LIMIT, TIME_LIMIT
from pagedkv_lib.judge.protocol import CaseFinished, CaseRecord, ErrorRecord, FrameReader, encode
from pagedkv_lib.judge.sandbox import Limits, Run, Submission
from pagedkv_lib.judge.supervisor import Supervisor


@pytest.fixture
def supervisor(monkeypatch):
    """A Supervisor in case 0 of 3, past its deadline, over a real (sleeping) process and real pipes; the
    child's memory comes from `held`, a list the test fills (MiB at each reading)."""
    child = subprocess.Popen(["sleep", "30"])
    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    for fd in (res_r, out_r):
        os.set_blocking(fd, False)
    held: list = []
    monkeypatch.setattr(deadlines, "memory_held_mb", lambda pid, cap, resident=None: held.pop(0))
    s = object.__new__(Supervisor)
    limits = Limits(time_limit_s=1.0, memory_limit_mb=768)
    s.job = SimpleNamespace(cases=[None] * 3, start=0, limits=limits)
    s.run, s.limits, s.mode = Run(Submission("test"), [None] * 3), limits, "fork"
    s.pid, s.res_fd, s.out_fd, s.reader = child.pid, res_r, out_r, FrameReader()
    s.phase, s.index, s.next = Phase.IN_CASE, 0, 0
    s.hard_end, s.deadline = float("inf"), time.monotonic() - 0.01
    s.outcome, s.status, s.eof, s.eof_at = None, None, False, None
    s.memory = MemoryWatch(limits.memory_limit_mb)
    killed: list = []
    monkeypatch.setattr(s, "_kill_everything", lambda: killed.append(True))
    closed: set = set()                                  # by the test: never close a number twice
    yield SimpleNamespace(s=s, held=held, write=lambda m: os.write(res_w, encode(m)), killed=killed,
                          out_w=out_w, closed=closed)
    child.kill()
    child.wait()
    for fd in {res_r, res_w, out_r, out_w} - closed:
        os.close(fd)


MEMORY_ERROR = CaseFinished(0, CaseRecord(error=ErrorRecord(MEMORY_LIMIT, "MemoryError", "the judge caps")))


def past_deadline(s) -> None:
    s.deadline = time.monotonic() - 0.01


def test_a_report_already_in_the_pipe_comes_before_a_deadline_verdict(supervisor):
    supervisor.write(MEMORY_ERROR)                       # sent, not yet read, when the deadline passes
    supervisor.s.check()
    assert supervisor.s.outcome.verdict == MEMORY_LIMIT and supervisor.killed
    assert supervisor.held == []                         # nothing was judged from memory


def test_a_hog_that_lets_go_at_its_second_deadline_gets_time_to_report_its_memory_error(supervisor):
    s = supervisor.s
    supervisor.held += [300.0, 3.0]
    s.check()                                            # first deadline: 300 MiB held, one more time limit
    assert s.outcome is None and s.memory.grace[2] == 300.0 and s.deadline > time.monotonic() + 0.5
    past_deadline(s)
    s.check()                                            # second: it let go, its report may be on the way
    assert s.outcome is None and s.memory.settling
    assert time.monotonic() < s.deadline <= time.monotonic() + SETTLE_S
    supervisor.write(MEMORY_ERROR)
    past_deadline(s)
    s.check()
    assert s.outcome.verdict == MEMORY_LIMIT


def test_a_hog_that_lets_go_and_says_nothing_is_late(supervisor):
    s = supervisor.s
    supervisor.held += [300.0, 3.0, 3.0]
    s.check()
    past_deadline(s)
    s.check()
    past_deadline(s)
    s.check()                                            # the settling moment passed with no report
    assert s.outcome.verdict == TIME_LIMIT and supervisor.killed


@pytest.mark.parametrize("second, verdict", [(500.0, MEMORY_LIMIT), (300.0, MEMORY_LIMIT), (100.0, None)])
def test_at_the_second_deadline_growing_or_a_quarter_of_the_cap_is_memory_limit(supervisor, second, verdict):
    """768 MiB cap: growing from 300, or holding 300 (over a quarter), is a memory limit; 100 MiB, held less
    than at the first deadline, means it let go: the settling moment, no verdict yet."""
    s = supervisor.s
    supervisor.held += [300.0, second]
    s.check()
    past_deadline(s)
    s.check()
    assert (s.outcome.verdict if s.outcome else None) == verdict


def test_a_slow_loop_that_holds_little_memory_is_a_time_limit(supervisor):
    supervisor.held += [10.0]
    supervisor.s.check()
    assert supervisor.s.outcome.verdict == TIME_LIMIT


def test_what_the_child_printed_last_is_kept_when_it_ends(supervisor, tmp_path):
    """A child flushes its output as it exits, after its last message: finish() reads it into the report
    (it was read and dropped once, so a learner's prints vanished when the parent noticed the exit first)."""
    s = supervisor.s
    s.phase, s.status = Phase.DONE, 0                    # it finished and was reaped
    s.job.scratch = str(tmp_path / "scratch")
    s.containment = SimpleNamespace(close=lambda: None)
    fcntl.fcntl(supervisor.out_w, fcntl.F_SETPIPE_SZ, 2**20)   # room for more than one read takes, unread
    os.write(supervisor.out_w, b"debugging " * 10_000)
    os.close(supervisor.out_w)
    assert s.finish() is None                            # closes the parent's ends
    supervisor.closed.update({supervisor.out_w, s.res_fd, s.out_fd})
    assert s.run.output_total == 100_000 and s.run.output.startswith(b"debugging")
