"""The judge: grades a learner's exercise against hidden cases, with pagedkv_lib as the oracle.

    python practice/judge.py 127            grade practice/127_*.py (also: judge.py at the repo root)
    judge(127) / %judge 127                 grade code written in a notebook (%load_ext pagedkv_lib.judge)
    show_reference(127)                     the library's implementation, once your version passed
    python -m pagedkv_lib.judge.stubs       regenerate practice/ stubs from solutions/

How a grading run goes, module by module (cli.py -> grading.grade):
- registry.py      the exercises: id -> files, oracle, reference, limits, devices
- grading.py       the runner: a child per submission, `jobs` at a time, restarts after a crash; then the
                   oracle's answers and each case's check; it alone builds each submission's Result, from
                   what the supervisors saw
- supervisor.py    the parent's watch over one child: its messages (bounded), its CPU-time limits, why it
                   ended, reaping it; it reports what it saw (`Seen`: cases finished, output, how it ended)
- isolation.py     where the child runs (bwrap for a file where it works, else a fork in its own process
                   group: not a sandbox), the sandbox's file tree and its kernel limits
- harness.py       the library files a sandboxed child gets: what it runs, without the exercise's answer
- protocol.py      the Job a child gets and the JSON lines it answers with
- child.py         the child: limits, guard (guards.py), loading the submission, the cases
- cases/exNNN.py   build(seed, device) -> cases (inputs only); run(ns, case) -> observation; check(...)
- outcome.py       verdicts and the one error record, `Outcome`; report.py prints text, JSON or CSV;
                   status.py keeps the learner's verdicts; notebook.py grades a notebook's code
                   and shows a reference once passed
- speed.py         a kernel exercise's speed bar (its card's `speed`) and the verdict of a --bench run on
                   a GPU against it, from timed calls the parent checked (cases/kernel_harness.py)

Adding an exercise (e.g. 130):
1. solutions/130_<slug>.py: the reference solution, its contract in the docstrings, each answer between
   `# BEGIN SOLUTION` / `# END SOLUTION`; `python -m pagedkv_lib.judge.stubs 130` then writes the stub.
2. cases/exercises.py: its card (title, notebook, oracle = graded name -> "module:attr" of the library object
   its cases compare with, forbidden library objects, limits, devices, triton, the reference to show, a
   kernel's speed bar).
3. cases/ex130.py: build(seed, device) -> [Case] (it may depend on nothing else; it runs in the judge, which
   hands the cases to the child), run(ns, case) -> observation, check(case, expected, got) -> Outcome;
   optionally bench and bench_report for --bench. What the child runs (run, bench) may not import the
   modules of the oracle or the forbidden objects: they are not in its sandbox (harness.py; build and check
   may, inside the function). See cases/__init__.py, and cases/script.py (stateful exercises),
   cases/attention_cases.py, cases/kernel_harness.py (Triton: build on the CPU, move to the GPU in run).
4. tests/judge/plants/ex130.py: planted bugs with the verdict and hint each must get
   (tests/judge/test_judge_plants.py runs them all); the solution must pass, the stub be "not implemented".
"""
from __future__ import annotations

_NOTEBOOK_FACES = ("judge", "show_reference", "load_ipython_extension")


def __getattr__(name: str):
    """judge, show_reference and %load_ext's hook, from notebook.py on first use: `import pagedkv_lib.judge`
    (for `judge.py --list`) imports no torch."""
    if name in _NOTEBOOK_FACES:
        from . import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
