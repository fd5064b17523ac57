#!/usr/bin/env bash
# Every notebook top to bottom on a CUDA GPU (the Triton kernels natively), as a learner would run them there.
# The GPU machine has torch, triton and matplotlib but no Jupyter: carry a wheelhouse made here with
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
#     --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any -d .whl \
#     nbclient ipykernel ipywidgets xxhash
# then, from the repository root on the GPU machine:  bash benchmarks/run_notebooks_gpu.sh OUT_DIR [NN ...]
# (NN: only the notebooks whose names start with these prefixes)
# Writes OUT_DIR/notebooks_gpu.log and OUT_DIR/notebooks_gpu.json (seconds per notebook, errors).
set -u
OUT="${1:-benchmarks/results}"
shift || true
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --find-links .whl --target /tmp/nb-site nbclient ipykernel ipywidgets \
        xxhash 2>&1 | tail -3
    export PYTHONPATH="/tmp/nb-site:$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
    export JUPYTER_PATH="/tmp/nb-site/share/jupyter"
else
    export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
fi
export MPLBACKEND=Agg
{ nvidia-smi --query-gpu=name --format=csv,noheader; python3 -c "import torch, triton; print('torch',
  torch.__version__, 'triton', triton.__version__)"; } 2>&1 | tee "$OUT/notebooks_gpu.log"
python3 -u benchmarks/bench_notebooks.py --no-callbacks --json "$OUT/notebooks_gpu.json" "$@" 2>&1 \
    | tee -a "$OUT/notebooks_gpu.log"
