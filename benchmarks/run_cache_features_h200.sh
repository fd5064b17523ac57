#!/usr/bin/env bash
# Notebooks 21 and 22 on the GPU, with the kernel targets' shapes, in ONE call of at most 5 minutes (python,
# torch, triton, pytest; no network). From the repository root:
#
#     bash benchmarks/run_cache_features_h200.sh "$OUT"
#
# gpu_tests      the cascade kernel and the paged decode kernel's tests natively; the engine with a CPU tier on
#                CUDA (pinned side-stream copies; same greedy tokens eager and graphed)
# bench_cascade  bench_cascade.py: cascade vs the course's paged decode vs SDPA on batches sharing a prefix
# bench_offload  bench_offload.py: pinned vs pageable block copies, the side-stream copy beside a decode step
# bench_decode   bench_decode.py at 1x4096, 8x4096, 64x4096 (the decode and fp8 targets)
# bench_prefill  bench_prefill.py at cold 8x2048 and 32x512 (the prefill targets)
# Everything goes into $OUT/cache_features_run.tar.gz and the tables into $OUT/summary.txt. To commit:
#     tar -xzf cache_features_run.tar.gz -C benchmarks/results   (then rebuild notebooks 21 and 22 on a CPU)
set -u
OUT="${1:-${OUT:-/tmp}}"
PY="${PYTHON:-python}"
DEADLINE_S="${DEADLINE_S:-300}"
TARBALL=cache_features_run.tar.gz
SUMMARY_TAIL=12
source "$(dirname "$0")/gpu_run_steps.sh"

write_env

TUNED=benchmarks/results/sweep_engine.json
step gpu_tests 90 "${PYTEST[@]}" tests/kernels/test_kernels_cascade_attention.py \
    tests/kernels/test_kernels_decode_attention.py tests/engine/test_engine_offload.py
step bench_cascade 120 "$PY" -u benchmarks/bench_cascade.py --out "$RUN" --budget-s 100
step bench_offload 50 "$PY" -u benchmarks/bench_offload.py --out "$RUN" --budget-s 35
step bench_decode 45 "$PY" -u benchmarks/bench_decode.py --out "$RUN" --tuned "$TUNED" --budget-s 32 \
    --shapes 1x4096,8x4096,64x4096
step bench_prefill 45 "$PY" -u benchmarks/bench_prefill.py --out "$RUN" --tuned "$TUNED" --budget-s 32 \
    --shapes cold8x2048,cold32x512
echo "done in $(( $(date +%s) - START )) s"
