"""Shared test setup: a non-interactive matplotlib backend; one torch thread (the test tensors are tiny,
and on a loaded 2-core machine a second thread makes small ops many times slower)."""
import matplotlib
import torch

# Agg for this process only: an MPLBACKEND variable would be inherited by the kernels nbval starts in the
# same pytest run, and a notebook whose plt.show() draws nothing then differs from its stored outputs.
matplotlib.use("Agg")

torch.set_num_threads(1)
