"""The judge: grades a learner's exercise against hidden cases, with pagedkv_lib as the oracle.

    python practice/judge.py 127            grade practice/127_*.py (also: judge.py at the repo root)
    judge(127) / %judge 127                 grade code written in a notebook (%load_ext pagedkv_lib.judge)
    python -m pagedkv_lib.judge.stubs       regenerate practice/ stubs from solutions/

How a grading run goes (engine.grade): the case module builds the cases (inputs only); sandbox.run_all
forks one child per submission and a Supervisor (supervisor.py) watches each one's time, memory and output;
in the child (child.py) the guard poisons the graded library names and the submission is loaded and checked
(submission.py), then every case runs and its observation streams back (wire.py). After every child has
exited the parent runs the same cases on the oracle and the case module compares them, naming the usual
mistake (cases/, compare.py); report.py prints text, JSON or CSV; status.py keeps the learner's verdicts.

Adding an exercise (e.g. 130):
1. solutions/130_<slug>.py: the reference solution, its contract in the docstrings, each answer between
   `# BEGIN SOLUTION` / `# END SOLUTION`; `python -m pagedkv_lib.judge.stubs` then writes the practice stub.
2. registry.EXERCISES: Exercise(130, slug, title, difficulty, notebook, oracle={graded name:
   "module:attr" of the library object it is checked against}, forbidden=(other library objects the
   submission may not call), time_limit_s=per case, memory_limit_mb=None to lift the address-space cap
   (CUDA needs it), devices=("cpu", "cuda") for one case set per device).
3. cases/ex130.py: build(seed, device) -> [Case], run(ns, case) -> observation, check(case, expected,
   got) -> Outcome; optionally bench(ns, device) -> dict of figures for `judge.py 130 --bench` (it runs in
   the child after the cases, under Limits.bench_limit_s). See cases/__init__.py; scripted (stateful)
   exercises reuse cases/script.py; attention-like ones cases/attention.py.
   GPU exercises: build inputs on the CPU and move them to `device` inside run (the parent must not touch
   CUDA before it forks; the oracle can run on the CPU after the children are done). In the child, the
   modules named in `oracle` and `forbidden` cannot be re-read from disk (no reload), nor can solutions/.
4. tests/test_judge_<id>.py: the solution passes, the stub is not implemented, planted bugs are caught.
"""
from __future__ import annotations


def judge(exercise_id: int, namespace: dict | None = None, **kwargs):
    """Grade the notebook code of exercise `exercise_id`; see notebook.judge."""
    import inspect

    from .notebook import judge as _judge

    if namespace is None:
        namespace = inspect.currentframe().f_back.f_globals
    return _judge(exercise_id, namespace, **kwargs)


def load_ipython_extension(ipython) -> None:
    from .notebook import load_ipython_extension as _load

    _load(ipython)
