#!/usr/bin/env bash
# The engine's GPU run (issue 21) in ONE call of at most 9.5 minutes, on a machine with python, torch,
# triton, pytest and transformers (no network). From the repository root:
#
#     bash benchmarks/run_engine_h200.sh "$OUT" [tune|final]
#
# tune   every kernel and engine GPU test (sync debug mode, graphs vs eager, fused kernels); bench_engine_hf.py
#        (transformers, its compiled static cache at B = 64 included); bench_engine_gpu.py; a sweep of the fp8
#        decode tiles and of the prefill tiles (bf16 and fp8); bench_prefill.py; bench_decode.py at 3 shapes
# final  every kernel and engine GPU test; bench_engine_hf.py (compiled static cache at every batch);
#        bench_engine_gpu.py;
#        bench_decode.py and bench_prefill.py at every shape, with the tuned configs of the tune run's sweep
#        (benchmarks/results/sweep_engine.json)
# Each step has its own time limit, cut further so that the run ends by DEADLINE_S; a step that fails or
# times out is recorded and the run goes on. Everything goes into $OUT/engine_run.tar.gz (logs, JSON,
# tables) and the tables into $OUT/summary.txt. To commit: tar -xzf engine_run.tar.gz -C benchmarks/results
set -u
OUT="${1:-${OUT:-/tmp}}"
PLAN="${2:-final}"
PY="${PYTHON:-python}"
DEADLINE_S="${DEADLINE_S:-575}"
TARBALL=engine_run.tar.gz
SUMMARY_TAIL=12
source "$(dirname "$0")/gpu_run_steps.sh"

{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  "$PY" -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
  echo "plan $PLAN"; } > "$RUN/env.txt" 2>&1
cat "$RUN/env.txt"

ENGINE_TESTS=(tests/engine/test_engine_no_sync.py tests/engine/test_engine_decode_graphs.py tests/engine/test_engine_equivalence.py
              tests/engine/test_engine_fp8.py tests/kernels/test_kernels_fused_ops.py)
step gpu_tests 150 "${PYTEST[@]}" "${ENGINE_TESTS[@]}" tests/kernels/test_kernels_decode_attention.py \
    tests/kernels/test_kernels_prefill_attention.py tests/kernels/test_kernels_store_kvcache.py tests/kernels/test_kv_quant_triton.py
if [ "$PLAN" = tune ]; then
    step bench_engine 150 "$PY" benchmarks/bench_engine_gpu.py --out "$RUN" --budget-s 125
    step bench_engine_hf 105 "$PY" benchmarks/bench_engine_hf.py --out "$RUN" --budget-s 85 --compiled-batches 64
    step sweep 90 "$PY" benchmarks/sweep_kernels.py --out "$RUN" --budget-s 75 \
        --sections decode_fp8,prefill_fp8,prefill --decode-shapes 64x4096,8x4096,1x4096 \
        --prefill-shapes "cold8x2048,cold32x512,chunked16x(2048+512)"
    step bench_prefill 45 "$PY" benchmarks/bench_prefill.py --out "$RUN" --tuned "$RUN/sweep.json" --budget-s 34 \
        --shapes "cold8x2048,cold32x512,chunked16x(2048+512)"
    step bench_decode 35 "$PY" benchmarks/bench_decode.py --out "$RUN" --tuned "$RUN/sweep.json" --budget-s 24 \
        --shapes 1x4096,8x4096,64x4096
else
    TUNED=benchmarks/results/sweep_engine.json
    step bench_engine_hf 225 "$PY" benchmarks/bench_engine_hf.py --out "$RUN" --budget-s 205 \
        --compiled-batches 64,256,8,1
    step bench_engine 110 "$PY" benchmarks/bench_engine_gpu.py --out "$RUN" --hf "$RUN/engine_hf.json" --budget-s 90
    step bench_decode 60 "$PY" benchmarks/bench_decode.py --out "$RUN" --tuned "$TUNED" --budget-s 48
    step bench_prefill 55 "$PY" benchmarks/bench_prefill.py --out "$RUN" --tuned "$TUNED" --budget-s 42
fi
echo "done in $(( $(date +%s) - START )) s"
