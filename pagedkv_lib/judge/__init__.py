"""The judge: grades a learner's exercise against hidden cases, with pagedkv_lib as the oracle.

    python practice/judge.py 127            grade practice/127_*.py (also: judge.py at the repo root)
    judge(127) / %judge 127                 grade code written in a notebook (%load_ext pagedkv_lib.judge)
    show_reference(127)                     the library's implementation, once your version passed
    python -m pagedkv_lib.judge.stubs       regenerate practice/ stubs from solutions/

How a grading run goes (grading.grade), module by module:
- registry.py      the exercises: id -> files, oracle, limits, devices
- cases/exNNN.py   build(seed, device) -> cases (inputs only); run(ns, case) -> observation; check(...)
- sandbox.py       run_all: one child per submission, `jobs` at a time, restarts after a crash, and the
                   integrity check (integrity.py) after each child: a changed protected file is tampering
- supervisor.py    the parent's watch over one child: a state machine over the protocol's messages, the
                   deadlines, the kill, and why the child ended (deadlines.py: a time or a memory limit?)
- isolation.py     where the child runs (a bwrap sandbox for files, a fork for notebooks) and how all it
                   started ends (PID namespace, cgroup, or subreaper sweep)
- child.py         the child: limits, scratch directory, guards (guards.py, submission.install_guard), the
                   submission (submission.py), then every case, each result sent as a message
- protocol.py      the framing and the typed messages between child and parent (plain_data.py: what
                   a field may hold, read without running the child's code)
After every child has exited the parent runs the same cases on the oracle and the case module compares
them, naming the usual mistake (compare.py, outcome.py); report.py prints text, JSON or CSV; status.py
keeps the learner's verdicts.

Adding an exercise (e.g. 130):
1. solutions/130_<slug>.py: the reference solution, its contract in the docstrings, each answer between
   `# BEGIN SOLUTION` / `# END SOLUTION`; `python -m pagedkv_lib.judge.stubs 130` then writes the stub.
2. registry.EXERCISES: Exercise(130, slug, title, difficulty, notebook, oracle={graded name:
   "module:attr" of the library object it is checked against}, forbidden=(other library objects the
   submission may not call), time_limit_s=per case, memory_limit_mb=None to lift the address-space cap
   (CUDA needs it), devices=("cpu", "cuda") for one case set per device, triton=True for a kernel).
3. cases/ex130.py: build(seed, device) -> [Case], run(ns, case) -> observation, check(case, expected,
   got) -> Outcome; optionally bench(ns, device) (in the child) and bench_report(figures, device) (in the
   parent) for `judge.py 130 --bench`. See cases/__init__.py; scripted (stateful) exercises reuse
   cases/script.py, attention-like ones cases/attention_cases.py, Triton ones cases/kernel_harness.py.
   GPU exercises: build inputs on the CPU and move them to `device` inside run (the parent must not touch
   CUDA before it forks; the oracle can run on the CPU after the children are done). In the child, the
   modules named in `oracle` and `forbidden` cannot be re-read from disk (no reload), nor can solutions/.
4. tests/judge_plants/bugs.py: planted bugs with the verdict and hint each must get
   (tests/test_judge_plants.py runs them all); the solution must pass, the stub be "not implemented".
"""
from __future__ import annotations


def judge(exercise_id: int, namespace: dict | None = None, **kwargs):
    """Grade the notebook code of exercise `exercise_id`; see notebook.judge."""
    import inspect

    from .notebook import judge as _judge

    if namespace is None:
        namespace = inspect.currentframe().f_back.f_globals
    return _judge(exercise_id, namespace, **kwargs)


def show_reference(exercise_id: int) -> bool:
    """The library's implementation of an exercise, once your version passed; see reveal.show_reference."""
    from .reveal import show_reference as _show

    return _show(exercise_id)


def load_ipython_extension(ipython) -> None:
    from .notebook import load_ipython_extension as _load

    _load(ipython)
