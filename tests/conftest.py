"""Shared test setup: a non-interactive matplotlib backend and deterministic torch on CPU."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))
