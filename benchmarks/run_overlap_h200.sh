#!/usr/bin/env bash
# Issue 32 parts 1 and 2 on the GPU in ONE call of at most 8 minutes (python, torch, triton, pytest; no
# network). From the repository root:
#
#     bash benchmarks/run_overlap_h200.sh "$OUT"
#
# gpu_tests     the overlap tests on CUDA (same greedy tokens as the sequential engine, graphed and eager;
#               no host sync inside a step, overlap on and off), the fused store (qk_norm_rope v2 against
#               qk_norm_rope + store_kvcache), the Triton launches of a decode step, the engine's other GPU
#               tests (graphs, equivalence, fp8)
# bench_engine  bench_engine_gpu.py: the engine's decode step per batch 1/8/64/256 against its floor, eager,
#               graphed and graphed with overlap scheduling; kernels per step at B = 64 (torch.profiler) per
#               mode; the B = 8 timeline of host phases and device spans (notebook 14 draws it); the
#               transformers rows from the stored benchmarks/results/engine_hf.json
# Everything goes into $OUT/overlap_run.tar.gz and the tables into $OUT/summary.txt. To commit:
#     tar -xzf overlap_run.tar.gz -C benchmarks/results   (bench_engine.json/.txt replace the stored run)
set -u
OUT="${1:-${OUT:-/tmp}}"
PY="${PYTHON:-python}"
DEADLINE_S="${DEADLINE_S:-470}"
TARBALL=overlap_run.tar.gz
SUMMARY_TAIL=12
source "$(dirname "$0")/gpu_run_steps.sh"

write_env

step gpu_tests 170 "${PYTEST[@]}" tests/engine/test_engine_overlap.py tests/engine/test_engine_no_sync.py \
    tests/engine/test_engine_kernel_launches.py tests/engine/test_engine_decode_graphs.py \
    tests/engine/test_engine_equivalence.py tests/engine/test_engine_fp8.py \
    tests/kernels/test_kernels_fused_ops.py tests/kernels/test_kernels_store_kvcache.py
step bench_engine 270 "$PY" benchmarks/bench_engine_gpu.py --out "$RUN" --hf benchmarks/results/engine_hf.json \
    --budget-s 230
echo "done in $(( $(date +%s) - START )) s"
