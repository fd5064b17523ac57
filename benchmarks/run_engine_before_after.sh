#!/usr/bin/env bash
# The engine's decode step before and after a change, on one GPU in ONE call (python, torch, triton, pytest; no
# network). From the repository root (the "after" tree), with the "before" tree unpacked in BEFORE:
#
#     git archive BEFORE_COMMIT | (mkdir -p .before && tar -x -C .before)      # here, before the call
#     bash benchmarks/run_engine_before_after.sh "$OUT" .before                  # on the GPU machine
#
# gpu_tests      the engine's GPU tests after the change (graphs, overlap, no host sync, greedy equivalence, the
#                CPU tier on CUDA) and the kernels the engine launches
# judge_131/133  the Triton exercises' solutions graded natively, with --bench
# engine_before  bench_engine_gpu.py in BEFORE, graphed and overlapped, batches 1, 8, 64
# engine_after   the same here; the two runs share the machine, one after the other
# Everything goes into $OUT/before_after_run.tar.gz and the tables into $OUT/summary.txt.
set -u
OUT="${1:-${OUT:-/tmp}}"
BEFORE="$(cd "${2:?the before tree}" && pwd)"
PY="$(command -v "${PYTHON:-python}")"                # absolute: the before run starts in BEFORE
DEADLINE_S="${DEADLINE_S:-450}"
TARBALL=before_after_run.tar.gz
SUMMARY_TAIL=14
source "$(dirname "$0")/gpu_run_steps.sh"

write_env

step gpu_tests 110 "${PYTEST[@]}" tests/engine/test_engine_decode_graphs.py tests/engine/test_engine_overlap.py \
    tests/engine/test_engine_no_sync.py tests/engine/test_engine_equivalence.py tests/engine/test_engine_offload.py \
    tests/kernels/test_kernels_decode_attention.py
step judge_131 50 "$PY" judge.py 131 solutions/131_triton_paged_decode.py --device cuda --bench -v
step judge_133 50 "$PY" judge.py 133 solutions/133_triton_paged_prefill.py --device cuda --bench -v
ENGINE=(benchmarks/bench_engine_gpu.py --budget-s 75 --modes graphed,overlap --batches 1,8,64)
mkdir -p "$RUN/before" "$RUN/after"
step engine_before 90 env PYTHONPATH="$BEFORE" bash -c "cd '$BEFORE' && '$PY' -u ${ENGINE[*]} --out '$RUN/before'"
step engine_after 90 "$PY" -u "${ENGINE[@]}" --out "$RUN/after"
for side in before after; do
    [ -f "$RUN/$side/bench_engine.txt" ] && cp "$RUN/$side/bench_engine.txt" "$RUN/engine_$side.txt"
done
echo "done in $(( $(date +%s) - START )) s"
