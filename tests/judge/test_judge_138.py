"""Exercise 138's cases stand without the module they are judged against: a graded child's tree lacks the
oracle's and the forbidden targets' modules, so ex138.py (and what it imports) must build and run its cases
with core/mla_attention.py and the MLA kernel absent. Its reference, once shown, shows all that a learner
writes: every function of core/mla_attention.py that mla_decode_absorbed reaches."""
import inspect
import subprocess
import sys
from pathlib import Path

from pagedkv_lib.core import mla_attention
from pagedkv_lib.judge.cases import ex138
from pagedkv_lib.judge.notebook import reference_source

ROOT = Path(__file__).resolve().parents[2]
ABSENT = ("pagedkv_lib.core.mla_attention", "pagedkv_lib.kernels.triton_mla_decode")
PROGRAM = f"""
import importlib.abc, importlib.util, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in {ABSENT!r}:
            raise ImportError("absent from the child's tree: " + name)
sys.meta_path.insert(0, Absent())
from pagedkv_lib.judge.cases import ex138
spec = importlib.util.spec_from_file_location("solution", "solutions/138_mla_decode.py")
solution = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solution)
cases = ex138.build(0)
got = [ex138.run({{"mla_decode_absorbed": solution.mla_decode_absorbed}}, case) for case in cases]
print(len(got), sorted(m for m in sys.modules if m in {ABSENT!r}))
"""


def test_138_cases_build_and_run_without_the_oracles_module():
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[0]) == len(ex138.build(0))
    assert done.stdout.strip().endswith("[]")


def reached(fn) -> set:
    """The functions of core/mla_attention.py that `fn` calls or takes as a default, through each other."""
    names = [vars(mla_attention).get(name) for name in fn.__code__.co_names]
    found = {f for f in [*names, *(fn.__defaults__ or ())]
             if inspect.isfunction(f) and f.__module__ == mla_attention.__name__}
    for target in list(found):
        found |= reached(target)
    return found


FRESH_KERNEL = """
import sys, torch
from pagedkv_lib.judge.cases import ex138
x = torch.ones(4)
with ex138.ProducedNumbers() as counter:
    x[1:] * 2
print(counter.total, sorted(m for m in sys.modules if m.startswith("torch._dynamo"))[:3])
"""
STUB_FROM_A_NOTEBOOK = """
from pagedkv_lib.judge.grading import Submission, grade
def mla_decode_absorbed(q, kv_cache, block_tables, context_lens, w_uk, w_uv, cos, sin):
    raise NotImplementedError
result = grade(138, [Submission("notebook", namespace=globals())])[0]
print(sorted({c.verdict for c in result.cases}))
"""


def test_138_counting_costs_no_import_inside_the_submissions_clock():
    """The watched case counts under a dispatch mode; torch wraps a mode's __torch_dispatch__ so that its
    first call imports torch._dynamo (seconds of CPU). A notebook's kernel never imported it, so its forked
    child paid that inside the 2 s case limit and the guard (a refused cache directory): the stub's
    never-up-projected case read TLE or RE where every other case read NI."""
    done = subprocess.run([sys.executable, "-c", FRESH_KERNEL], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split(maxsplit=1) == ["3", "[]\n"]     # the view makes none, the product 3
    stub = subprocess.run([sys.executable, "-c", STUB_FROM_A_NOTEBOOK], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert stub.stdout.strip() == "['not implemented']", stub.stdout + stub.stderr[-2000:]


def test_138_reference_shows_where_rope_absorption_and_the_scale_happen():
    shown = reference_source(138)
    every = reached(mla_attention.mla_decode_absorbed) | {mla_attention.mla_decode_absorbed}
    assert {"absorb_query", "mla_scale", "split_query"} <= {f.__name__ for f in every}
    for fn in every:
        assert f"def {fn.__name__}(" in shown, f"show_reference(138) leaves out {fn.__name__}"
