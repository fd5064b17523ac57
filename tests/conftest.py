"""Shared test setup: a non-interactive matplotlib backend; one torch thread (the test tensors are tiny,
and on a loaded 2-core machine a second thread makes small ops many times slower)."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

torch.set_num_threads(1)
