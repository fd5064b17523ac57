#!/usr/bin/env bash
# After a change to the engine's input path or the decode kernels: the GPU tests and the figures that must
# not drop, in ONE call of at most 6 minutes (python, torch, triton, pytest; no network). From the repository
# root:
#
#     bash benchmarks/run_redesign_h200.sh "$OUT"
#
# gpu_tests         the decode, cascade and MLA kernels natively; the engine's graphs (one input path),
#                   overlap scheduling, no host sync, greedy equivalence, the CPU tier on CUDA
# judge_131         exercise 131's solution graded natively (the kernels a learner reads)
# bench_decode      bench_decode.py at 1x4096, 8x4096, 64x4096 (compare with the stored run's rows)
# bench_engine      bench_engine_gpu.py, graphed and overlapped: per batch against the floor, kernels per
#                   step and the kernels that take the most GPU time at B = 1 and 64
# bench_speculation n-gram speculation in the engine on the GPU: acceptance, tokens per step, tokens/s
# Everything goes into $OUT/redesign_run.tar.gz and the tables into $OUT/summary.txt.
set -u
OUT="${1:-${OUT:-/tmp}}"
PY="${PYTHON:-python}"
DEADLINE_S="${DEADLINE_S:-360}"
TARBALL=redesign_run.tar.gz
SUMMARY_TAIL=12
source "$(dirname "$0")/gpu_run_steps.sh"

write_env

TUNED=benchmarks/results/sweep_engine.json
step gpu_tests 120 "${PYTEST[@]}" tests/kernels/test_kernels_decode_attention.py \
    tests/kernels/test_kernels_cascade_attention.py tests/kernels/test_kernels_mla_decode.py \
    tests/engine/test_engine_decode_graphs.py tests/engine/test_engine_overlap.py tests/engine/test_engine_no_sync.py \
    tests/engine/test_engine_equivalence.py tests/engine/test_engine_offload.py
step judge_131 50 "$PY" judge.py 131 solutions/131_triton_paged_decode.py --device cuda --bench -v
step bench_decode 40 "$PY" -u benchmarks/bench_decode.py --out "$RUN" --tuned "$TUNED" --budget-s 28 \
    --shapes 1x4096,8x4096,64x4096
step bench_engine 110 "$PY" -u benchmarks/bench_engine_gpu.py --out "$RUN" --hf benchmarks/results/engine_hf.json \
    --budget-s 95 --modes graphed,overlap
step bench_speculation 40 "$PY" -u benchmarks/bench_speculation.py --device cuda --repeat 2
echo "done in $(( $(date +%s) - START )) s"
