"""Shared test setup.

- A non-interactive matplotlib backend; one torch thread (the test tensors are tiny, and on a loaded 2-core
  machine a second thread makes small ops many times slower); SIGINT's handler, when the run was started
  with it ignored.
- The judge's status file goes to a temporary file for the whole run, the notebooks that nbval executes
  included (they inherit the environment): `practice/` is the learner's, and no test may change it. The
  session fails if anything under `practice/` changed while the tests ran.
"""
import hashlib
import os
import signal
import tempfile
from pathlib import Path

import matplotlib
import pytest
import torch

# Agg for this process only: an MPLBACKEND variable would be inherited by the kernels nbval starts in the
# same pytest run, and a notebook whose plt.show() draws nothing then differs from its stored outputs.
matplotlib.use("Agg")

torch.set_num_threads(1)

# The Ctrl-C tests press Ctrl-C as a terminal does, in this process and in the judges it starts. A shell
# without job control starts a background command (`make test &`) with SIGINT ignored, Python then keeps
# it ignored, and every process started from it inherits that: give the run Python's own handler back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

PRACTICE = Path(__file__).resolve().parent.parent / "practice"
_STATUS_DIR = tempfile.mkdtemp(prefix="pagedkv-test-status-")
os.environ["PAGEDKV_JUDGE_STATUS"] = os.path.join(_STATUS_DIR, "status.json")


def practice_digest() -> dict:
    """Every file under practice/ (the status file and backups too) -> sha256 of its bytes."""
    return {str(p.relative_to(PRACTICE)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(PRACTICE.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


_BEFORE = practice_digest()


def pytest_sessionfinish(session, exitstatus):
    after = practice_digest()
    if after != _BEFORE:
        changed = sorted(k for k in set(after) | set(_BEFORE) if after.get(k) != _BEFORE.get(k))
        session.config.pluginmanager.get_plugin("terminalreporter").write_line(
            f"ERROR: the tests changed the learner's practice/ folder: {changed}", red=True)
        session.exitstatus = 1


def pytest_collection_modifyitems(config, items):
    """nbval's cells are slow tests: `make test-fast` (-m "not slow") leaves the notebooks out."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
