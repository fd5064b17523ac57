"""The judge: grades a learner's exercise against hidden cases, with pagedkv_lib as the oracle.

    python practice/judge.py 127            grade practice/127_*.py (also: judge.py at the repo root)
    judge(127) / %judge 127                 grade code written in a notebook (%load_ext pagedkv_lib.judge)
    show_reference(127)                     the library's implementation, once your version passed
    python -m pagedkv_lib.judge.stubs       regenerate practice/ stubs from solutions/

How a grading run goes, module by module (cli.py -> grading.grade):
- registry.py      the exercises: id -> files, oracle, reference, limits, devices
- grading.py       the runner: a child per submission, `jobs` at a time, restarts after a crash; then the
                   oracle's answers and each case's check; the Result of each submission
- supervisor.py    the parent's watch over one child: its messages, its deadlines, why it ended, reaping it
- isolation.py     where the child runs (bwrap for a file where it works, else a fork in its own process
                   group: not a sandbox) and its resource limits
- protocol.py      the Job a child gets and the JSON lines it answers with
- child.py         the child: limits, guard (guards.py), the submission (submission.py), the cases
- cases/exNNN.py   build(seed, device) -> cases (inputs only); run(ns, case) -> observation; check(...)
- outcome.py       verdicts and the one error record, `Outcome`; report.py prints text, JSON or CSV;
                   status.py keeps the learner's verdicts; notebook.py grades a notebook's code
                   and shows a reference once passed

Adding an exercise (e.g. 130):
1. solutions/130_<slug>.py: the reference solution, its contract in the docstrings, each answer between
   `# BEGIN SOLUTION` / `# END SOLUTION`; `python -m pagedkv_lib.judge.stubs 130` then writes the stub.
2. registry.EXERCISES: Exercise(130, slug, title, difficulty, notebook, oracle={graded name:
   "module:attr" of the library object it is checked against}, forbidden=(other library objects the
   submission may not call), time_limit_s=per case, memory_limit_mb=None to lift the address-space cap
   (CUDA needs it), devices=("cpu", "cuda") for one case set per device, triton=True for a kernel,
   reference=(what show_reference prints, when not the oracle: a Triton exercise's kernel)).
3. cases/ex130.py: build(seed, device) -> [Case], run(ns, case) -> observation, check(case, expected,
   got) -> Outcome; optionally bench(ns, device) (in the child) and bench_report(figures, device) (in the
   parent) for `judge.py 130 --bench`. See cases/__init__.py; scripted (stateful) exercises reuse
   cases/script.py, attention-like ones cases/attention_cases.py, Triton ones cases/kernel_harness.py.
   build must depend on (seed, device) alone: a sandboxed child builds the same cases itself. GPU
   exercises: build inputs on the CPU and move them to `device` inside run (the parent must not touch CUDA
   before it forks; the oracle can run on the CPU after the children are done). In the child, the modules
   named in `oracle` and `forbidden` cannot be re-read from disk (no reload), nor can solutions/.
4. tests/judge/plants/ex130.py: planted bugs with the verdict and hint each must get
   (tests/judge/test_judge_plants.py runs them all); the solution must pass, the stub be "not implemented".
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
    """The library's implementation of an exercise, once your version passed; see notebook.show_reference."""
    from .notebook import show_reference as _show

    return _show(exercise_id)


def load_ipython_extension(ipython) -> None:
    from .notebook import load_ipython_extension as _load

    _load(ipython)
